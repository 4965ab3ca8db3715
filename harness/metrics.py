"""Retrieval metrics for pools with exactly one positive per query, with bootstrap confidence intervals.

Definitions follow trec_eval / pytrec_eval (what MTEB reports), so the numbers can be checked
against MTEB's evaluator: P@k = (positives in the top k) / k, which with one positive is at most
1/k; nDCG@10 = 1/log2(rank+1) for rank <= 10; MRR = 1/rank over the full ranking. `hit@5`
(the positive is in the top 5) is the readable form of P@5 and what the depth heatmaps show.

Ties: a candidate scoring exactly as much as the positive is ranked above it (pessimistic), so
a model that scores everything equal (e.g. BM25 with no term overlap) does not get lucky hits.
"""

from __future__ import annotations

import numpy as np

METRICS = ("p@1", "p@5", "hit@5", "ndcg@10", "mrr")
MAIN_METRIC = "p@1"


def positive_ranks(scores: np.ndarray, positive_index: list[int] | np.ndarray) -> np.ndarray:
    """1-based rank of each query's positive among all candidates of the pool."""
    positive_index = np.asarray(positive_index)
    positive_scores = scores[np.arange(len(scores)), positive_index][:, None]
    better_or_tied = (scores >= positive_scores).sum(axis=1)  # includes the positive itself
    return better_or_tied.astype(np.int64)


def tied_positives(scores: np.ndarray, positive_index) -> int:
    """Queries whose positive scores exactly as much as some other candidate (e.g. inputs identical
    after middle truncation): reported, because the pessimistic tie rule decides them."""
    positive_index = np.asarray(positive_index)
    positive_scores = scores[np.arange(len(scores)), positive_index][:, None]
    return int(((scores == positive_scores).sum(axis=1) > 1).sum())


def per_query(ranks: np.ndarray) -> dict[str, np.ndarray]:
    ranks = np.asarray(ranks, dtype=np.float64)
    return {
        "p@1": (ranks <= 1).astype(np.float64),
        "p@5": (ranks <= 5) / 5.0,
        "hit@5": (ranks <= 5).astype(np.float64),
        "ndcg@10": np.where(ranks <= 10, 1.0 / np.log2(ranks + 1.0), 0.0),
        "mrr": 1.0 / ranks,
    }


def bootstrap_ci(values: np.ndarray, n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap over queries: the pool's queries are the sample."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    # Resample in chunks so memory stays small even for large pools.
    means = []
    for start in range(0, n_resamples, 256):
        n = min(256, n_resamples - start)
        means.append(values[rng.integers(0, len(values), size=(n, len(values)))].mean(axis=1))
    means = np.concatenate(means)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def summarise(ranks: np.ndarray, n_resamples: int = 1000, seed: int = 0) -> dict[str, dict]:
    """{metric: {"value": mean, "ci95": [lo, hi]}} for one pool."""
    out = {}
    for name, values in per_query(ranks).items():
        lo, hi = bootstrap_ci(values, n_resamples, seed)
        out[name] = {"value": float(values.mean()), "ci95": [lo, hi]}
    return out
