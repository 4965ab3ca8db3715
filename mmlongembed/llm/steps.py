"""The LLM steps builders call: query audit, caption rewrite, translation.

Each step picks its path from ``config.llm``: ``none`` runs the documented deterministic
fallback (the translation has none and refuses in one line), any other backend runs the prompt
through ``run_llm_step`` (cache, retries, contract checks). The prompt wording comes from
``config.llm_prompt_version``: ``paper`` (default; the inputs, rules and output fields of the
paper's Tables 8-10) or ``v1`` (the toolkit's first prompts). Either way the step is recorded in
``report.llm_steps`` with the backend, model, prompt version and hash that produced it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.llm.config import LLMConfig
from mmlongembed.llm.fallbacks import (
    AUDIT_HEURISTIC, AUDIT_RULES, REWRITE_TEMPLATE, audit_heuristic, audit_rules, rewrite_template)
from mmlongembed.llm.prompts import DEFAULT_PROMPT_VERSION, OutputProblem, Prompt, load_prompt
from mmlongembed.llm.runner import run_llm_step, step_record

QUERY_AUDIT, CAPTION_REWRITE, TRANSLATION = "query_audit", "caption_rewrite", "translation"
QUERY_PARAPHRASE = "query_paraphrase"
EXAMPLES = 5  # dropped queries shown per reason in the manifest and card


@dataclass(frozen=True)
class AuditItem:
    id: str
    query: str
    answer: str
    evidence: tuple[str, ...]


@dataclass
class AuditOutcome:
    kept: set[str] = field(default_factory=set)
    verdicts: dict[str, tuple[bool, str]] = field(default_factory=dict)  # id -> (valid, reason)
    details: dict[str, dict] = field(default_factory=dict)  # id -> the whole verdict (paper: its JSON fields)


@dataclass(frozen=True)
class Audited:
    """What ``build_pools`` takes from a builder whose declared step is the query audit: the
    sources as ``load_sources`` gave them and the ids of the queries the audit kept. The audit
    runs in ``run_steps``, so that ``build_pools`` calls no LLM."""

    sources: Any
    kept: frozenset[str]


def format_evidence(evidence: Sequence[str]) -> str:
    return "\n".join(f"[{i}] {segment.strip()}" for i, segment in enumerate(evidence, 1))


def step_prompt(step: str, config: LLMConfig) -> Prompt:
    """The prompt of ``step`` in the build's prompt version."""
    return load_prompt(step, version=getattr(config, "llm_prompt_version", DEFAULT_PROMPT_VERSION))


def _fallback_record(step: str, prompt: Prompt, model: str, records: int, answered: int) -> dict:
    record = step_record(step, prompt, "none", model, "", records=records, answered=answered, rejected={},
                         calls=0, cache_hits=0)
    record["prompt_hash"] = "fallback (no prompt)"
    return record


def audit_queries(items: Sequence[AuditItem], config: LLMConfig, report: BuildReport, **overrides) -> AuditOutcome:
    """Keep the queries the auditor marks valid. Invalid verdicts are counted as
    ``query_audit:marked_invalid``; unusable replies as ``query_audit:invalid_output:<why>``.

    The paper's auditor (default) reads the query alone and answers ``is_valid``,
    ``strong_linked_anchor``, ``anchor_type``, ``potential_ambiguity`` and ``reason``; under
    ``--llm none`` the same steps run as rules (``fallbacks.audit_rules``). The step record says
    what was kept (by anchor type) and what was dropped (by rule or anchor type, with examples)."""
    prompt = step_prompt(QUERY_AUDIT, config)
    outcome = AuditOutcome()
    rule_of: dict[str, str] = {}
    if config.llm == "none":
        for item in items:
            if prompt.variant == "v1":
                valid, reason = audit_heuristic(item.query)
                outcome.details[item.id] = {"valid": valid, "reason": reason}
            else:
                outcome.details[item.id], rule_of[item.id] = audit_rules(item.query)
        record = _fallback_record(QUERY_AUDIT, prompt, AUDIT_HEURISTIC if prompt.variant == "v1" else AUDIT_RULES,
                                  len(items), len(items))
        report.llm_steps.append(record)
    else:
        available = {"query": lambda item: item.query, "answer": lambda item: item.answer,
                     "evidence": lambda item: format_evidence(item.evidence)}
        result = run_llm_step(
            QUERY_AUDIT, prompt, [(item.id, {f: available[f](item) for f in prompt.fields}) for item in items],
            config, report, **overrides)
        outcome.details = dict(result.values)
        record = result.record
    for rid, detail in outcome.details.items():
        outcome.verdicts[rid] = (bool(detail.get("is_valid", detail.get("valid"))), str(detail["reason"]))
    kept_types, dropped, examples = Counter(), Counter(), {}
    for item in items:
        verdict = outcome.verdicts.get(item.id)
        if verdict is None:
            continue  # rejected by the runner, already counted
        detail = outcome.details[item.id]
        if verdict[0]:
            outcome.kept.add(item.id)
            kept_types[detail.get("anchor_type", "n/a")] += 1
        else:
            report.skip(f"{QUERY_AUDIT}:marked_invalid", item.id)
            why = rule_of.get(item.id) or detail.get("anchor_type") or "invalid"
            dropped[why] += 1
            shown = examples.setdefault(why, [])
            if len(shown) < EXAMPLES:
                shown.append(item.query)
    record["prompt_version_name"] = prompt.variant
    record["kept"] = len(outcome.kept)
    record["marked_invalid"] = sum(1 for valid, _ in outcome.verdicts.values() if not valid)
    record["kept_by_anchor_type"] = dict(sorted(kept_types.items()))
    record["dropped_by"] = dict(sorted(dropped.items()))
    record["dropped_examples"] = dict(sorted(examples.items()))
    return outcome


def _caption_fields(prompt: Prompt, captions: Sequence[str]) -> dict:
    """The paper's rewrite reads the captions concatenated (``original_caption``); v1 reads them
    numbered, one per line (``captions``)."""
    if "original_caption" in prompt.fields:
        return {"original_caption": " ".join(c.strip() for c in captions if c and c.strip())}
    return {"captions": "\n".join(f"{i}. {c.strip()}" for i, c in enumerate(captions, 1))}


def rewrite_captions(items: Sequence[tuple[str, Sequence[str]]], config: LLMConfig, report: BuildReport,
                     **overrides) -> dict[str, str]:
    """Time-ordered captions (already in order, with their time spans in the text if wanted)
    -> one text per id, order carried by transition words."""
    prompt = step_prompt(CAPTION_REWRITE, config)
    if config.llm == "none":
        out = {rid: rewrite_template(list(captions)) for rid, captions in items}
        record = _fallback_record(CAPTION_REWRITE, prompt, REWRITE_TEMPLATE, len(items), len(out))
        record["prompt_version_name"] = prompt.variant
        report.llm_steps.append(record)
        return out
    result = run_llm_step(CAPTION_REWRITE, prompt, [(rid, _caption_fields(prompt, captions)) for rid, captions in items],
                          config, report, **overrides)
    result.record["prompt_version_name"] = prompt.variant
    return {rid: str(v) for rid, v in result.values.items()}


def translate(items: Sequence[tuple[str, str]], config: LLMConfig, report: BuildReport, **overrides) -> dict[str, str]:
    """Chinese -> English (the paper's: literal, greedy). No fallback: ``--llm none`` refuses."""
    if config.llm == "none":
        raise UserError("the translation step needs an LLM and has no fallback: "
                        "pass --llm openai, vllm, ray or replay")
    prompt = step_prompt(TRANSLATION, config)
    result = run_llm_step(TRANSLATION, prompt, [(rid, {"text": text}) for rid, text in items], config, report,
                          **overrides)
    result.record["prompt_version_name"] = prompt.variant
    return {rid: str(v) for rid, v in result.values.items()}


def paraphrase_queries(items: Sequence[tuple[str, dict]], config: LLMConfig, report: BuildReport, check,
                       fallback, **overrides) -> dict[str, str]:
    """Question templates that share no content word with their needle (the needle grid's
    lexical tier; ``mmlongembed.needles.paraphrase``): record id -> the reworded question, for
    each (record id, request fields) item. ``check(record id, question)``: why a question breaks
    the step's contract, or None (a problem is fed back as a repair turn, then counted as
    ``query_paraphrase:invalid_output:<reason>``). ``fallback(record id)``: the deterministic
    question (or None), what ``--llm none`` uses. The prompt has one wording (the step is not in
    the paper), whatever ``--llm-prompt-version``."""
    prompt = load_prompt(QUERY_PARAPHRASE, version=DEFAULT_PROMPT_VERSION)
    if config.llm == "none":
        out = {rid: q for rid, _ in items if (q := fallback(rid)) is not None}
        record = _fallback_record(QUERY_PARAPHRASE, prompt, "fallback_wordings", len(items), len(out))
        report.llm_steps.append(record)
    else:
        def contract(rid: str, value) -> OutputProblem | None:
            why = check(rid, value["question"].strip())
            return None if why is None else OutputProblem("paraphrase_contract", why)

        result = run_llm_step(QUERY_PARAPHRASE, prompt, list(items), config, report, check=contract, **overrides)
        out = {rid: str(value["question"]).strip() for rid, value in result.values.items()}
        record = result.record
    record["prompt_version_name"] = prompt.variant
    record["questions"] = dict(sorted(out.items()))
    return out
