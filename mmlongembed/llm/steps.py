"""The LLM steps builders call: query audit, caption rewrite, translation.

Each step picks its path from ``config.llm``: ``none`` runs the documented deterministic
fallback (the translation has none and refuses in one line), any other backend runs the prompt
through ``run_llm_step`` (cache, retries, contract checks). Either way the step is recorded in
``report.llm_steps`` with the backend and model that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mmlongembed.builder import BuildReport
from mmlongembed.errors import UserError
from mmlongembed.llm.config import LLMConfig
from mmlongembed.llm.fallbacks import AUDIT_HEURISTIC, REWRITE_TEMPLATE, audit_heuristic, rewrite_template
from mmlongembed.llm.prompts import load_prompt
from mmlongembed.llm.runner import run_llm_step, step_record

QUERY_AUDIT, CAPTION_REWRITE, TRANSLATION = "query_audit", "caption_rewrite", "translation"


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


def format_evidence(evidence: Sequence[str]) -> str:
    return "\n".join(f"[{i}] {segment.strip()}" for i, segment in enumerate(evidence, 1))


def audit_queries(items: Sequence[AuditItem], config: LLMConfig, report: BuildReport, **overrides) -> AuditOutcome:
    """Keep the queries the auditor marks valid. Invalid verdicts are counted as
    ``query_audit:marked_invalid``; unusable replies as ``query_audit:invalid_output:<why>``."""
    prompt = load_prompt(QUERY_AUDIT)
    outcome = AuditOutcome()
    if config.llm == "none":
        for item in items:
            outcome.verdicts[item.id] = audit_heuristic(item.query)
        record = step_record(QUERY_AUDIT, prompt, "none", AUDIT_HEURISTIC, "", records=len(items),
                             answered=len(items), rejected={}, calls=0, cache_hits=0)
        record["prompt_hash"] = "fallback (no prompt)"
        report.llm_steps.append(record)
    else:
        result = run_llm_step(
            QUERY_AUDIT, prompt,
            [(item.id, {"query": item.query, "answer": item.answer, "evidence": format_evidence(item.evidence)})
             for item in items],
            config, report, **overrides)
        outcome.verdicts = {rid: (bool(v["valid"]), str(v["reason"])) for rid, v in result.values.items()}
        record = result.record
    for item in items:
        verdict = outcome.verdicts.get(item.id)
        if verdict is None:
            continue  # rejected by the runner, already counted
        if verdict[0]:
            outcome.kept.add(item.id)
        else:
            report.skip(f"{QUERY_AUDIT}:marked_invalid", item.id)
    record["kept"] = len(outcome.kept)
    record["marked_invalid"] = sum(1 for valid, _ in outcome.verdicts.values() if not valid)
    return outcome


def rewrite_captions(items: Sequence[tuple[str, Sequence[str]]], config: LLMConfig, report: BuildReport,
                     **overrides) -> dict[str, str]:
    """Time-ordered captions (already in order, with their time spans in the text if wanted)
    -> one paragraph per id, order carried by transition words."""
    prompt = load_prompt(CAPTION_REWRITE)
    if config.llm == "none":
        out = {rid: rewrite_template(list(captions)) for rid, captions in items}
        record = step_record(CAPTION_REWRITE, prompt, "none", REWRITE_TEMPLATE, "", records=len(items),
                             answered=len(out), rejected={}, calls=0, cache_hits=0)
        record["prompt_hash"] = "fallback (no prompt)"
        report.llm_steps.append(record)
        return out
    result = run_llm_step(
        CAPTION_REWRITE, prompt,
        [(rid, {"captions": "\n".join(f"{i}. {c.strip()}" for i, c in enumerate(captions, 1))})
         for rid, captions in items],
        config, report, **overrides)
    return {rid: str(v) for rid, v in result.values.items()}


def translate(items: Sequence[tuple[str, str]], config: LLMConfig, report: BuildReport, **overrides) -> dict[str, str]:
    """Chinese -> English. No fallback: ``--llm none`` refuses."""
    if config.llm == "none":
        raise UserError("the translation step needs an LLM and has no fallback: "
                        "pass --llm openai, vllm, ray or replay")
    prompt = load_prompt(TRANSLATION)
    result = run_llm_step(TRANSLATION, prompt, [(rid, {"text": text}) for rid, text in items], config, report,
                          **overrides)
    return {rid: str(v) for rid, v in result.values.items()}
