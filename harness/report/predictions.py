"""`predictions.parquet`: what each model picked for each query, written by `mmle score` beside
results.json (lighteval's `--save-details`, MTEB's saved retrievals).

One row per model x pool x query: the top-k candidate ids in rank order with their scores, the
positive's best and worst rank (they differ where candidates tie with it) and its tie-aware P@1,
and what each top-k candidate is to the query, from the pool's audit config (`positive`, its
variant such as `drop_first` or `head25`, `easy_negative`, or `other_query`). The query's `_id`
and the candidate ids join with the `<pool>-audit` configs on `_id`, where each edit's provenance
is. The audit is read after scoring, never before (harness/runner.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.scoring.metrics import MAIN_METRIC, candidate_labels, label_for_query, outscores, per_query

TOP_K = 10
FILENAME = "predictions.parquet"

SCHEMA = pa.schema([
    ("model", pa.string()), ("benchmark", pa.string()), ("pool", pa.string()), ("task", pa.string()),
    ("dataset", pa.string()), ("difficulty", pa.string()), ("length", pa.int64()),
    ("_id", pa.string()),  # the query's opaque id (joins the pool's audit config)
    ("positive_id", pa.string()),
    ("k", pa.int64()),
    ("top_ids", pa.list_(pa.string())), ("top_scores", pa.list_(pa.float64())),
    ("top_labels", pa.list_(pa.string())), ("top_roles", pa.list_(pa.string())),
    ("top1_tied", pa.int64()),  # candidates sharing the top score (the top-1 is one of them by chance)
    ("positive_score", pa.float64()),
    ("positive_rank_best", pa.int64()), ("positive_rank_worst", pa.int64()),
    ("p_at_1", pa.float64()),
])


def pool_predictions(model: str, benchmark: str, info: dict, query_ids: list[str], corpus_ids: list[str],
                     positive_index, scores: np.ndarray, ranks: np.ndarray, audit: dict | None,
                     k: int = TOP_K) -> pa.Table:
    """One pool scored by one model: a row per query. `ranks`: `positive_ranks(scores, ...)`;
    `audit`: the pool's audit columns, or None (labels and roles are then null)."""
    k = min(k, len(corpus_ids))
    labels = candidate_labels(audit) if audit is not None else None
    # rank order: score descending; tied candidates in corpus order (a seeded random order in a release)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    p_at_1 = per_query(ranks)[MAIN_METRIC]
    columns = {name: [] for name in SCHEMA.names}
    for q, qid in enumerate(query_ids):
        positive_id = corpus_ids[positive_index[q]]
        top = [corpus_ids[j] for j in order[q]]
        columns["_id"].append(qid)
        columns["positive_id"].append(positive_id)
        columns["top_ids"].append(top)
        columns["top_scores"].append([float(scores[q, j]) for j in order[q]])
        columns["top_labels"].append(None if labels is None else
                                     [label_for_query(qid, cid, labels, positive_id) for cid in top])
        columns["top_roles"].append(None if labels is None else [labels.get(cid, ("", "", ""))[2] for cid in top])
        columns["top1_tied"].append(int((outscores(scores[q], scores[q].max()) == 0).sum()))
        columns["positive_score"].append(float(scores[q, positive_index[q]]))
        columns["positive_rank_best"].append(int(ranks[q, 0]))
        columns["positive_rank_worst"].append(int(ranks[q, 1]))
        columns["p_at_1"].append(float(p_at_1[q]))
    n = len(query_ids)
    fixed = {"model": model, "benchmark": benchmark, "pool": info["pool"], "task": info.get("task"),
             "dataset": info.get("dataset"), "difficulty": info.get("difficulty"), "length": info.get("length"),
             "k": k}
    for name, value in fixed.items():
        columns[name] = [value] * n
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def write_predictions(tables: list[pa.Table], path: Path) -> Path:
    """All pools' rows in one file (zstd); an empty table with the schema where nothing was scored."""
    table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    pq.write_table(table, path, compression="zstd")
    return path
