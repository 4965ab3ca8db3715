"""Score every selected pool with every model; a pool that cannot be scored is reported and skipped."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from harness.scoring.cache import EmbeddingCache, model_key
from harness.scoring.data import Benchmark, PoolError, PoolInfo
from harness.scoring.metrics import MAIN_METRIC, per_query, positive_ranks, summarise, tied_positives, variant_breakdown
from harness.models.adapters import Model, ModelError, NotMeasured, RunSettings
from harness.report.predictions import pool_predictions
from harness.report.tables import pool_p1
from harness.scoring.truncation import range_kept


@dataclass
class Outcome:
    results: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    predictions: list = field(default_factory=list)  # per pool and model, a pyarrow table (harness.report.predictions)

    @property
    def failed(self) -> list[dict]:
        return [s for s in self.skipped if s["counts_as_failure"]]


def _skip(outcome: Outcome, benchmark: str, model: Model | None, info: PoolInfo, reason: str,
          failure: bool = True, measured: bool = True):
    """`measured` False: the model ran but received nothing to measure with (`NotMeasured`)."""
    # the pool's facts travel with the skip, so the tables can say which of a column's pools a model missed
    outcome.skipped.append({"model": model.spec if model else "*", "pool": info.name, "reason": reason,
                            "counts_as_failure": failure, **({} if measured else {"not_measured": True}),
                            "facts": {**info.as_dict(), "n_queries": info.n_queries, "benchmark": benchmark}})


def score(benchmark: Benchmark, pools: list[PoolInfo], models: list[Model], settings: RunSettings,
          cache: EmbeddingCache, modalities: set[str], lenient_models: set[str] = frozenset(),
          bootstrap: int = 1000, seed: int = 0, log=print) -> Outcome:
    """`modalities`: what the user selected; pools needing more are deselected (not failures).
    `lenient_models`: models whose modality mismatches are expected (the default run's MiniLM)."""
    outcome = Outcome()
    ref = benchmark.ref
    plan = [(info, _runnable(outcome, ref, info, models, modalities, lenient_models)) for info in pools]
    for model in models:
        if hasattr(getattr(model, "executor", None), "embed_many"):
            prefill(model, benchmark, [info for info, runnable in plan if model in runnable], cache, log)

    for info, runnable in plan:
        if not runnable:
            continue
        start = time.perf_counter()
        try:
            pool = benchmark.open_pool(info)
        except PoolError as exc:
            for model in runnable:
                _skip(outcome, ref, model, info, str(exc))
            log(f"skipped {info.name}: {exc}")
            continue
        load_seconds = time.perf_counter() - start
        audit, audit_read = None, False
        for model in runnable:
            start = time.perf_counter()
            try:
                scored = model.score_pool(pool, cache, settings)
            except NotMeasured as exc:
                _skip(outcome, ref, model, info, str(exc), failure=False, measured=False)
                log(f"{info.name:<40} {model.spec:<24} not measured: {exc}")
                continue
            except (PoolError, ModelError) as exc:
                _skip(outcome, ref, model, info, str(exc))
                log(f"skipped {info.name} with {model.spec}: {exc}")
                continue
            ranks = positive_ranks(scored.scores, pool.positive_index)
            elapsed = time.perf_counter() - start
            row = _result_row(ref, info, model, pool, scored, ranks,
                              summarise(ranks, bootstrap, seed, n_candidates=len(pool.corpus_ids)),
                              {"load_s": round(load_seconds, 3), "embed_s": round(scored.embed_seconds, 3),
                               "total_s": round(elapsed, 3)}, settings.device)
            if not audit_read:  # breakdowns only: read once a model has scored, never before
                audit, audit_read = pool.audit(), True
            if audit is not None:
                row["breakdown"] = variant_breakdown(scored.scores, pool.query_ids, pool.corpus_ids,
                                                     pool.positive_index, audit)
            if info.depth is not None:
                row["needle_truncated"] = needle_truncated(pool, model)
            outcome.results.append(row)
            outcome.predictions.append(pool_predictions(model.spec, ref, info.as_dict(), pool.query_ids,
                                                        pool.corpus_ids, pool.positive_index, scored.scores,
                                                        ranks, audit))
            sample = (f"  SUBSET: {len(pool.query_ids)} of {pool.queries_in_pool} queries"
                      if "query_sample" in row else "")
            # as table.md's per-pool table prints it: x100, an interval from MIN_QUERIES_FOR_INTERVAL queries on
            log(f"{info.name:<40} {model.spec:<24} P@1 {pool_p1(row)}  truncated {scored.truncated_queries}q/"
                f"{scored.truncated_candidates}c  embedded {scored.embedded}, cached {scored.cached}{sample}")
    return outcome


def prefill(model, benchmark: Benchmark, pools: list[PoolInfo], cache: EmbeddingCache, log) -> None:
    """Embed every input of ``pools`` not yet cached in one job of the model's executor (Ray: its actors
    load the model once, not once per pool); each pool's share of the cost is kept for its result row.
    A pool that cannot be read, or a job that fails, is left to the pool loop, which reports it."""
    from harness.scoring.embedding import SIDES, side_work

    key_of_model = model_key(model.identity())
    jobs, planned = [], set()
    for info in pools:
        try:
            pool = benchmark.open_pool(info)
        except PoolError:
            continue
        model.begin_pool(pool)
        for side in SIDES:
            work = side_work(model, pool, side, cache, key_of_model)
            # an input shared by several pools (an Easy and a Hard pool's queries) is embedded once, for the
            # first; the others find it cached, as they would in a pool-by-pool run
            work.missing = [i for i in work.missing if work.keys[i] not in planned]
            planned.update(work.keys[i] for i in work.missing)
            if work.missing:
                jobs.append((pool, work))
    if not jobs:
        return
    from tqdm.auto import tqdm

    # one job can run for hours: a bar over all its inputs
    bar = tqdm(total=sum(len(work.missing) for _, work in jobs), desc=f"{model.spec}: every pool's inputs",
               unit="input", disable=not model.settings.progress, leave=False, dynamic_ncols=True)
    try:
        model.prefilled = model.executor.embed_many(model, jobs, cache, key_of_model, bar.update)
    except ModelError as exc:
        log(f"{model.spec}: the joint embedding job failed ({exc}); embedding pool by pool")
    finally:
        bar.close()


def needle_truncated(pool, model: Model) -> int | None:
    """Queries of a needle-grid pool whose positive lost its needle (whole or in part) to the
    model's middle truncation: the needle's range as the audit records it, against the characters
    the model's input kept. None where either is unknown."""
    ranges = pool.needle_ranges()
    if not ranges:
        return None
    positives = {pool.corpus_ids[i] for i in pool.positive_index}
    lost = {}
    for batch in pool.iter_candidates(64):
        for item in batch:
            if item.id in positives and item.id in ranges:
                kept = model.kept_characters(item)
                if kept is None:
                    return None
                lost[item.id] = not range_kept(ranges[item.id], kept)
    return sum(lost.get(pool.corpus_ids[i], False) for i in pool.positive_index)


def _runnable(outcome: Outcome, ref: str, info: PoolInfo, models: list[Model], modalities: set[str],
              lenient_models: set[str]) -> list[Model]:
    """The models that can score the pool; the pool's skips (deselected, or a model that cannot
    take its modalities) go to `outcome`."""
    deselected = info.selection - modalities
    if deselected:
        _skip(outcome, ref, None, info, f"modality {','.join(sorted(deselected))} deselected", failure=False)
        return []
    runnable = []
    for model in models:
        missing = info.modalities - model.modalities
        if missing and not model.ignores_images:
            _skip(outcome, ref, model, info, f"{model.spec} cannot take {','.join(sorted(missing))} "
                  f"(takes {','.join(sorted(model.modalities))})", failure=model.spec not in lenient_models)
        else:
            runnable.append(model)
    return runnable


def _result_row(ref: str, info: PoolInfo, model: Model, pool, scored, ranks, metrics: dict, timings: dict,
                device: str) -> dict:
    """One pool scored by one model on ``device`` (the run's first), as results.json records it."""
    return {
        "model": model.spec, "benchmark": ref, **info.as_dict(),
        "n_queries": len(pool.query_ids), "n_candidates": len(pool.corpus_ids),
        **({"query_sample": {"queries": len(pool.query_ids), "of": pool.queries_in_pool}}
           if len(pool.query_ids) < pool.queries_in_pool else {}),
        "metrics": metrics,
        # per query, so a table column can pool the queries of all its pools (and bootstrap them)
        "per_query": {MAIN_METRIC: [round(float(v), 6) for v in per_query(ranks)[MAIN_METRIC]]},
        "truncated": {"queries": scored.truncated_queries, "candidates": scored.truncated_candidates},
        "tied_positives": tied_positives(scored.scores, pool.positive_index),
        # queries whose every candidate scored as much as the positive: P@1 there is chance by the tie rule
        "all_tied": int(((ranks[:, 0] == 1) & (ranks[:, 1] == len(pool.corpus_ids))).sum()),
        "embedded": scored.embedded, "cached": scored.cached,
        "timings": timings,
        "items_per_s": round(scored.embedded / scored.embed_seconds, 2) if scored.embed_seconds > 0 else None,
        "notes": scored.notes,
        "throughput": _bare_throughput(scored, device),
        **scored.details,
    }


def _bare_throughput(scored, device: str) -> dict:
    """The throughput of a model whose embedding step is its own (multi-vector, generative readout, a
    diagnostic): inputs, time and peak memory on its device; it counts no tokens (None, not 0)."""
    from harness.scoring.batching import Throughput, peak_memory

    throughput = Throughput(inputs=scored.embedded, wall_seconds=scored.embed_seconds,
                            model_seconds=scored.embed_seconds, devices=[device])
    throughput.peak_memory_bytes, throughput.peak_memory_source = peak_memory(device)
    return {**throughput.as_dict(), "own_tokens": None, "padded_tokens": None, "tokens_per_s": None}
