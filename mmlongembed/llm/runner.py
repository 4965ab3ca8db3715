"""Running one LLM step over many records: cache first, then the backend, then the contract.

For each record the step renders the prompt, looks the request up in the cache, sends what is
missing to the backend (all at once, so the backend can batch or run requests concurrently),
stores every reply as it arrives, and checks it against the prompt's output contract. A reply
that breaks the contract is answered with one repair turn (the bad reply plus what was wrong)
and asked again, at most ``llm_output_retries`` times; then the record is rejected with a
counted reason. Greedy decoding makes a plain re-ask pointless, and the repair turn keeps every
request deterministic, so it is cached and replayed like any other.

Nothing here crashes on a bad reply and nothing is dropped silently: every record ends as a
value or as a counted rejection (``BuildReport.skip``), and the step is recorded in
``report.llm_steps`` with the backend, model and prompt hash that produced it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.llm.backends import NOT_SENT, ChatRequest, Reply, make_backend
from mmlongembed.llm.cache import CACHE_FILE, LLMCache, request_keys
from mmlongembed.llm.config import LLMConfig, decoding_parameters
from mmlongembed.llm.prompts import OutputProblem, Prompt


REPAIR_MESSAGE = (
    "Your reply does not meet the output contract: {detail}. Answer the same request again, "
    "following every rule, and reply with the required output only."
)


@dataclass
class StepResult:
    step: str
    values: dict[str, object] = field(default_factory=dict)  # record id -> parsed reply
    rejected: Counter = field(default_factory=Counter)  # reason -> records
    first_invalid: int = 0  # records whose first reply broke the contract (repaired or rejected)
    calls: int = 0  # requests the backend was asked
    cache_hits: int = 0
    record: dict = field(default_factory=dict)  # this step's entry in report.llm_steps


def step_record(step: str, prompt: Prompt, backend: str, model: str, model_revision: str, **extra) -> dict:
    """The entry of ``report.llm_steps`` (manifest and card)."""
    return {"step": step, "backend": backend, "model": model, "model_revision": model_revision,
            "prompt": prompt.name, "prompt_version": prompt.version, "prompt_hash": prompt.hash, **extra}


def run_llm_step(step: str, prompt: Prompt, items: Sequence[tuple[str, dict]], config: LLMConfig,
                 report: BuildReport, backend=None, cache: LLMCache | None = None,
                 images: Mapping[str, Sequence[bytes]] | None = None,
                 check: Callable[[str, object], OutputProblem | None] | None = None) -> StepResult:
    """Ask ``prompt`` for every (record id, fields) item with the backend of ``config.llm``
    (``replay``: from the cache only). ``images`` maps a record id to the encoded images its
    request carries (multimodal models). ``check(record id, parsed value)``: the step's own part
    of the contract, beyond the prompt's schema (a problem is repaired and counted like a schema
    break). ``backend``/``cache`` override the config (tests)."""
    if config.llm == "none":
        raise ValueError("run_llm_step needs a backend; --llm none runs the step's fallback instead")
    replaying = config.llm == "replay"
    if backend is None and not replaying:
        backend = make_backend(config)
    owns_cache = cache is None
    images = images or {}
    messages = {record_id: prompt.render(values, images.get(record_id, ())) for record_id, values in items}
    if len(messages) != len(items):
        raise ValueError(f"{step}: record ids are not unique")
    run = _StepRun(step, prompt, config, report, backend, cache or LLMCache(config.llm_cache), messages)
    run.check = check
    pending = list(messages)
    try:
        for attempt in range(config.llm_output_retries + 1):
            if not pending:
                break
            pending = run.judge(pending, run.ask(pending), attempt)
    finally:
        if owns_cache:
            run.cache.close()
    result = run.result
    if items and run.transport_failures == len(items):
        where = getattr(backend, "endpoint", run.backend_name)
        raise UserError(f"{step}: every request to the LLM failed ({dict(result.rejected)}); is {where} reachable?")
    extra = {"replayed_from": sorted(run.replayed_from)} if replaying else answers_record(run.used)
    result.record = step_record(
        step, prompt, run.backend_name, config.llm_model, config.llm_model_revision, records=len(items),
        answered=len(result.values), rejected=dict(sorted(result.rejected.items())), calls=result.calls,
        cache_hits=result.cache_hits, **extra)
    report.llm_steps.append(result.record)
    return result


def _answers_sha256(used: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(used.items()), ensure_ascii=False).encode("utf-8")).hexdigest()


def answers_record(used: dict[str, str]) -> dict:
    """What the step record says of the answers a live step used (cache key -> reply): their
    keys and one digest of them all, so that a later run can tell whether it would replay them."""
    return {"answer_keys": sorted(used), "answers_sha256": _answers_sha256(used)}


def rerun_problem(steps, cache_dir: str | None) -> str | None:
    """None when running the build of these LLM step records again would use exactly the answers
    it used, every one from the cache at ``cache_dir`` (a rerun asks the cache first, so it calls
    no model and writes the same data); else why not. Steps that called no model (rule
    fallbacks, replays, all answers cached) need nothing."""
    asked = [step for step in steps if step.get("calls")]
    if not asked:
        return None
    if any(reason.startswith("request_failed") for step in asked for reason in step.get("rejected") or {}):
        return "an LLM request failed in it (a rerun would ask again)"
    if any("answers_sha256" not in step for step in asked):
        return "an LLM answered for it (the manifest does not record which answers)"
    path = Path(cache_dir or "") / CACHE_FILE
    if not cache_dir or not path.is_file():
        return f"an LLM answered for it, and its answers are not in the cache ({path})"
    cache = LLMCache(cache_dir)
    try:
        for step in asked:
            used = {key: cache.get(key) for key in step["answer_keys"]}
            if None in used.values() or _answers_sha256(used) != step["answers_sha256"]:
                return f"the LLM answers of its step {step.get('step')} are no longer those in the cache ({path})"
    finally:
        cache.close()
    return None


class _StepRun:
    """One step's state across its attempts: the conversation of each record (it grows by a
    repair turn per invalid reply), the cache, the backend, and the counts the step reports."""

    def __init__(self, step: str, prompt: Prompt, config: LLMConfig, report: BuildReport, backend,
                 cache: LLMCache, messages: dict[str, list[dict]]):
        self.step, self.prompt, self.config, self.report = step, prompt, config, report
        self.replaying = config.llm == "replay"
        self.backend, self.cache, self.messages = backend, cache, messages
        self.backend_name = "replay" if self.replaying else backend.name
        self.decoding = decoding_parameters(config)
        self.result = StepResult(step)
        self.replayed_from: set[str] = set()
        self.transport_failures = 0
        self.used: dict[str, str] = {}  # cache key -> the reply this step used (repairs' included)
        self.check: Callable[[str, object], OutputProblem | None] | None = None  # the step's own contract

    def ask(self, pending: list[str]) -> dict[str, Reply]:
        """A reply for every pending record: from the cache (or, replaying, from it alone), else
        from the backend."""
        config, prompt = self.config, self.prompt
        replies: dict[str, Reply] = {}
        to_send: list[tuple[str, str, str]] = []  # (record id, key, lookup)
        for record_id in pending:
            key, lookup = request_keys(
                backend=self.backend_name, model=config.llm_model, model_revision=config.llm_model_revision,
                prompt_hash=prompt.hash, messages=self.messages[record_id], decoding=self.decoding)
            if self.replaying:
                replies[record_id] = self.replayed(record_id, lookup)
                self.result.cache_hits += 1
                continue
            cached = self.cache.get(key)
            if cached is not None:
                replies[record_id] = Reply(text=cached)
                self.used[key] = cached
                self.result.cache_hits += 1
            else:
                to_send.append((record_id, key, lookup))
        if to_send:
            replies.update(self.send(to_send))
        return replies

    def replayed(self, record_id: str, lookup: str) -> Reply:
        config, cache, step, prompt = self.config, self.cache, self.step, self.prompt
        # answers, by the backend that produced them; recorded transport failures
        # only where no backend answered (an answer replays as it did before failures
        # were recorded)
        found = {b: Reply(text=t) for b, t in cache.find_for_replay(lookup, config.llm_replay_from).items()}
        if not found:
            found = {b: Reply(error=error)
                     for b, error in cache.failures_for_replay(lookup, config.llm_replay_from).items()}
        if not found:
            raise UserError(
                f"replay: no cached answer for step {step}, record {record_id} (request {lookup[:16]}, "
                f"model {config.llm_model}, prompt {prompt.name} {prompt.hash}) in {cache.path}")
        if len(set(found.values())) > 1:
            raise UserError(
                f"replay: the cache holds different answers from {sorted(found)} for step {step}, "
                f"record {record_id}; choose one with --llm-replay-from")
        self.replayed_from.update(found)
        return next(iter(found.values()))

    def send(self, to_send: list[tuple[str, str, str]]) -> dict[str, Reply]:
        """The backend's replies to the requests not in the cache, each stored as it arrives."""
        prompt, model, messages = self.prompt, self.config.llm_model, self.messages
        requests = [ChatRequest(messages=messages[r], schema=prompt.json_schema, schema_name=prompt.name,
                                decoding=self.decoding) for r, _, _ in to_send]
        self.result.calls += len(requests)

        def store(index: int, reply: Reply) -> None:
            # Stored as it arrives (resume) and before it is judged: a contract-breaking
            # reply is replayed as such, so replay walks the same repairs and rejections.
            if reply.ok:
                record_id, key, lookup = to_send[index]
                self.cache.put(key, lookup, backend=self.backend_name, model=model,
                               prompt_hash=prompt.hash, messages=messages[record_id], reply=reply.text or "")

        replies: dict[str, Reply] = {}
        for (record_id, key, lookup), reply in zip(to_send, self.backend.complete(requests, on_reply=store)):
            replies[record_id] = reply
            if reply.ok:
                self.used[key] = reply.text or ""
            if not reply.ok and reply.error != NOT_SENT:
                # a failure after the backend's retries: recorded, so replay fails it the same way
                self.cache.put_failure(key, lookup, backend=self.backend_name, model=model,
                                       prompt_hash=prompt.hash, messages=messages[record_id], error=reply.error)
        return replies

    def judge(self, pending: list[str], replies: dict[str, Reply], attempt: int) -> list[str]:
        """Check each reply against the contract: a value, a repair turn to ask again (the
        records returned), or a counted rejection."""
        result, step = self.result, self.step
        next_pending = []
        for record_id in pending:
            reply = replies[record_id]
            if not reply.ok:
                # Recorded for replay only: a live rerun asks again; retries already happened in the backend.
                self.transport_failures += 1
                _reject(result, self.report, step, f"request_failed:{reply.error}", record_id)
                continue
            value, problem = self.prompt.parse(reply.text or "")
            if problem is None and self.check is not None:
                problem = self.check(record_id, value)
            if problem is not None and attempt == 0:
                result.first_invalid += 1
            if problem is None:
                result.values[record_id] = value
            elif attempt < self.config.llm_output_retries:
                self.messages[record_id] = [
                    *self.messages[record_id],
                    {"role": "assistant", "content": reply.text or ""},
                    {"role": "user", "content": REPAIR_MESSAGE.format(detail=problem.detail)},
                ]
                next_pending.append(record_id)
            else:
                _reject(result, self.report, step, f"invalid_output:{problem.reason}", record_id)
        return next_pending


def _reject(result: StepResult, report: BuildReport, step: str, reason: str, record_id: str) -> None:
    result.rejected[reason] += 1
    report.skip(f"{step}:{reason}", record_id)
