"""The `mmle score` runs an explorer site shows: each model's predictions per query (from
predictions.parquet) and the variant-confusion records (from results.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.report.predictions import FILENAME
from mmlongembed.core.errors import UserError


@dataclass
class Runs:
    models: list[str] = field(default_factory=list)
    confusion: list[dict] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    by_pool: dict[str, dict[str, dict[str, dict]]] = field(default_factory=dict)  # pool -> model -> query id -> row


def load_runs(paths: list[Path], pools: set[str]) -> Runs:
    """The runs' predictions for the benchmark's pools; a run with none of them, or a model's
    pool in two runs, is a one-line error (one model's pools may come from several runs)."""
    runs = Runs()
    for path in paths:
        folder = path.parent if path.name == "results.json" else path
        results, predictions = folder / "results.json", folder / FILENAME
        if not results.is_file() or not predictions.is_file():
            raise UserError(f"--results {path}: needs results.json and {FILENAME} of an `mmle score` run "
                            "(runs before predictions existed: score again)")
        import pyarrow.parquet as pq

        try:
            report = json.loads(results.read_text(encoding="utf-8"))
            rows = pq.read_table(predictions).to_pylist()
        except Exception as exc:  # noqa: BLE001  (a damaged file: one line)
            raise UserError(f"--results {path}: unreadable ({type(exc).__name__}: {str(exc)[:200]})") from None
        mine = [r for r in rows if r["pool"] in pools]
        if rows and not mine:
            raise UserError(f"--results {path}: scores no pool of this benchmark")
        models = list(dict.fromkeys(r["model"] for r in mine))
        clash = sorted({(r["model"], r["pool"]) for r in mine if r["model"] in runs.by_pool.get(r["pool"], {})})
        if clash:
            raise UserError(f"--results {path}: {clash[0][0]} on {clash[0][1]} is in another run too; give each "
                            "model's pool once")
        runs.models += [m for m in models if m not in runs.models]  # a model's pools may come from several runs
        runs.sources.append(str(folder))
        runs.confusion += [{**c, "run": str(folder)} for c in report.get("variant_confusion") or []
                           if c["model"] in models]
        for r in mine:
            runs.by_pool.setdefault(r["pool"], {}).setdefault(r["model"], {})[r["_id"]] = r
    return runs


def attach_results(payload: dict, runs: Runs) -> dict:
    """Each model's pick per query into the pool's payload (`results[model]`: per query in the
    payload's order [top-1 candidate index, its label, best rank, worst rank, P@1, top-k indices],
    or null for a query the run lacks); returns per model its P@1 and count of wrong queries
    (the positive not alone on top: P@1 below 1)."""
    at = {c["id"]: k for k, c in enumerate(payload["candidates"])}
    overview = {}
    for model, by_query in runs.by_pool.get(payload["pool"], {}).items():
        picks = []
        for query in payload["queries"]:
            row = by_query.get(query["id"])
            if row is None:
                picks.append(None)
                continue
            top = [at.get(cid, -1) for cid in row["top_ids"]]
            label = (row["top_labels"] or [None])[0]
            picks.append([top[0], label, row["positive_rank_best"], row["positive_rank_worst"],
                          round(row["p_at_1"], 6), top])
        payload["results"][model] = picks
        scored = [p for p in picks if p is not None]
        overview[model] = {"p_at_1": sum(p[4] for p in scored) / len(scored) if scored else None,
                           "wrong": sum(p[4] < 1 for p in scored), "queries": len(scored)}
    return overview
