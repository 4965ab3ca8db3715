"""Retrieval metrics for pools with exactly one positive per query, with bootstrap confidence intervals.

Definitions follow trec_eval / pytrec_eval (what MTEB reports), so the numbers can be checked
against MTEB's evaluator: P@k = (positives in the top k) / k, which with one positive is at most
1/k; nDCG@10 = 1/log2(rank+1) for rank <= 10; MRR = 1/rank over the full ranking. `hit@5`
(the positive is in the top 5) is the readable form of P@5. `hit@k` is the positive in the top k
with k = min(5, candidates - 1): where a pool has five candidates or fewer, P@5 and hit@5 cannot
vary (the positive is always in the top 5), and hit@k with k below the pool size can.

Ties: a candidate scoring exactly as much as the positive may land above or below it, and every
metric is its expected value over a uniformly random order of the tied candidates (tie-aware
evaluation, McSherry & Najork, ECIR 2008). A model that scores everything equal (BM25 with no
term overlap, inputs identical after middle truncation) gets chance, neither 0 nor a lucky 1,
and the result does not depend on candidate order. Without ties this is trec_eval's definition.

A tie is a score within ``TIE_TOLERANCE`` of the positive's, not only an exactly equal one: the same
model input embedded in two batches (other padding, other matrix shapes) need not give the same
bits on every CPU (MiniLM on a 2-core AMD EPYC: up to 1.2e-7 apart), and a figure must not depend
on the machine or on how the inputs were batched. Cosine scores of float32 unit vectors carry about
seven significant digits, so the tolerance merges nothing that a float32 model tells apart.
"""

from __future__ import annotations

import numpy as np

METRICS = ("p@1", "p@5", "hit@5", "ndcg@10", "mrr")
MAIN_METRIC = "p@1"
TIE_TOLERANCE = 1e-6


def outscores(scores, reference):
    """Elementwise: 1 where a score beats ``reference`` by more than ``TIE_TOLERANCE``, 0 where
    the two tie (within it), -1 where it falls below. The one tie rule of every figure."""
    difference = np.asarray(scores, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return np.where(difference > TIE_TOLERANCE, 1, np.where(difference < -TIE_TOLERANCE, -1, 0))


def positive_ranks(scores: np.ndarray, positive_index: list[int] | np.ndarray) -> np.ndarray:
    """[n_queries, 2]: the best and the worst 1-based rank each query's positive can take among
    all candidates of the pool (they differ when other candidates tie with it)."""
    positive_index = np.asarray(positive_index)
    standing = outscores(scores, scores[np.arange(len(scores)), positive_index][:, None])
    better = (standing > 0).sum(axis=1)
    tied = (standing == 0).sum(axis=1)  # includes the positive itself
    return np.stack([better + 1, better + tied], axis=1).astype(np.int64)


def tied_positives(scores: np.ndarray, positive_index) -> int:
    """Queries whose positive ties with some other candidate (e.g. inputs identical after middle
    truncation): reported, because the tie rule, not the model, decides them."""
    positive_index = np.asarray(positive_index)
    standing = outscores(scores, scores[np.arange(len(scores)), positive_index][:, None])
    return int(((standing == 0).sum(axis=1) > 1).sum())


_VALUE_AT_RANK = {
    "p@1": lambda r: (r <= 1).astype(np.float64),
    "p@5": lambda r: (r <= 5) / 5.0,
    "hit@5": lambda r: (r <= 5).astype(np.float64),
    "ndcg@10": lambda r: np.where(r <= 10, 1.0 / np.log2(r + 1.0), 0.0),
    "mrr": lambda r: 1.0 / r,
}


def hit_k(n_candidates: int) -> int:
    """The k of `hit@k`: 5, or one less than the pool size where five would always hit."""
    return max(1, min(5, int(n_candidates) - 1))


def _as_ranges(ranks) -> np.ndarray:
    ranks = np.asarray(ranks, dtype=np.int64)
    return np.stack([ranks, ranks], axis=1) if ranks.ndim == 1 else ranks


def hit_at(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per query: the chance that the positive is in the top k (over the ranks ties let it take)."""
    ranks = _as_ranges(ranks)
    first, last = ranks[:, 0], ranks[:, 1]
    return np.clip(np.minimum(last, k) - first + 1, 0, None) / (last - first + 1)


def per_query(ranks: np.ndarray) -> dict[str, np.ndarray]:
    """Each metric per query: its mean over the ranks the positive can take (a 1-D array of exact
    ranks, or the [n, 2] best/worst ranks from ``positive_ranks``)."""
    ranks = _as_ranges(ranks)
    first, last = ranks[:, 0], ranks[:, 1]
    every_rank = np.arange(1, int(last.max(initial=1)) + 1, dtype=np.float64)
    out = {}
    for name, value_at in _VALUE_AT_RANK.items():
        cumulative = np.concatenate([[0.0], np.cumsum(value_at(every_rank))])
        out[name] = (cumulative[last] - cumulative[first - 1]) / (last - first + 1)
    return out


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


def summarise(ranks: np.ndarray, n_resamples: int = 1000, seed: int = 0,
              n_candidates: int | None = None) -> dict[str, dict]:
    """{metric: {"value": mean, "ci95": [lo, hi]}} for one pool; with `n_candidates`, also
    `hit@k` (its k beside the value)."""
    values_of = per_query(ranks)
    if n_candidates is not None:
        values_of["hit@k"] = hit_at(ranks, hit_k(n_candidates))
    out = {}
    for name, values in values_of.items():
        lo, hi = bootstrap_ci(values, n_resamples, seed)
        out[name] = {"value": float(values.mean()), "ci95": [lo, hi]}
    if n_candidates is not None:
        out["hit@k"]["k"] = hit_k(n_candidates)
    return out


POSITIVE_LABEL = "positive"
OTHER_QUERY = "other_query"  # a candidate made for another query of the pool (its positive or negative)


def candidate_labels(audit: dict[str, list]) -> dict[str, tuple[str, str, str]]:
    """From a pool's audit config: candidate `_id` -> (group, label, role), the label being the
    candidate's `variant` (`drop_first`, `head25`, ...) or, where it has none, its role."""
    kinds = audit.get("kind") or ["candidate"] * len(audit["_id"])
    return {cid: (group, variant or role, role)
            for cid, kind, role, group, variant in zip(audit["_id"], kinds, audit["role"], audit["group"],
                                                       audit["variant"])
            if kind == "candidate"}


def label_for_query(query_id: str, candidate_id: str, labels: dict[str, tuple[str, str, str]],
                    positive_id: str) -> str:
    """What a candidate is to one query: `positive`, its variant label when it was made for that
    query, else `other_query` (any candidate made for another query of the pool)."""
    if candidate_id == positive_id:
        return POSITIVE_LABEL
    group, label, _ = labels.get(candidate_id, (None, OTHER_QUERY, ""))
    return label if group == query_id else OTHER_QUERY


def top1_shares(scores_row: np.ndarray, label_of_column: list[str]) -> dict[str, float]:
    """Per label, the chance that the query's top-1 is a candidate of that label: the candidates
    tied at the top score share it equally (the tie rule of the metrics above), so the positive's
    share is the query's tie-aware P@1."""
    top = np.flatnonzero(scores_row == scores_row.max())
    shares: dict[str, float] = {}
    for j in top:
        shares[label_of_column[j]] = shares.get(label_of_column[j], 0.0) + 1.0 / len(top)
    return shares


def variant_breakdown(scores: np.ndarray, query_ids: list[str], corpus_ids: list[str],
                      positive_index: list[int] | np.ndarray, audit: dict[str, list]) -> dict:
    """Per negative variant (from the pool's audit config: `_id`, `kind`, `role`, `group`,
    `variant`), how often the positive outscores a negative of that variant made for the same
    query; a tie counts half. And per query, what its top-1 is (`top1`: label -> the per-query
    share of `top1_shares`, in query order, 0 where the label is not on top; labels as
    `label_for_query`), for the variant-confusion table. And per query, the positive's tie-aware
    P@1 among its own group alone (`group`: the positive and the negatives made for the query;
    chance is 1 / the group's size): a lexical model finds a query's topic in a pool, the tiers
    ask whether it finds the whole document among its variants. Read for analysis only: scoring
    never sees the audit.

    Returns {"by_variant": {variant: {"role", "pairs", "positive_beats"}}, "top1": {label: [share
    per query]}, "group": {"_id": [query ids, the builder's where the audit has them], "p_at_1":
    [per query], "size": [per query]}};
    `by_variant` is empty, and each group is its positive alone, when the pool's queries have no
    negatives of their own (the needle grid)."""
    labels = candidate_labels(audit)
    # a query's id is drawn per pool; its builder's id (the audit's `internal_id`) is the same in
    # every pool that holds it, so tiers can be compared on the same queries
    internal = dict(zip(audit["_id"], audit["internal_id"])) if "internal_id" in audit else {}
    row_of_query = {qid: k for k, qid in enumerate(query_ids)}
    column_of = {cid: j for j, cid in enumerate(corpus_ids)}
    wins: dict[str, list[float]] = {}
    roles: dict[str, str] = {}
    beaten = np.zeros(len(query_ids), dtype=np.int64)  # the group's negatives that outscore the positive
    level = np.zeros(len(query_ids), dtype=np.int64)  # ... and that tie with it
    size = np.ones(len(query_ids), dtype=np.int64)
    for cid, (group, name, role) in labels.items():
        if role == "positive" or group not in row_of_query or cid not in column_of:
            continue
        k = row_of_query[group]
        positive, negative = scores[k, positive_index[k]], scores[k, column_of[cid]]
        versus = int(outscores(negative, positive))
        beaten[k] += versus == 1
        level[k] += versus == 0
        size[k] += 1
        wins.setdefault(name, []).append((1.0 + float(outscores(positive, negative))) / 2)
        roles[name] = role
    top1: dict[str, list[float]] = {}
    for k, qid in enumerate(query_ids):
        positive_id = corpus_ids[positive_index[k]]
        top = np.flatnonzero(outscores(scores[k], scores[k].max()) == 0)  # tied at the top
        shares = top1_shares(scores[k][top], [label_for_query(qid, corpus_ids[j], labels, positive_id) for j in top])
        for label, share in shares.items():
            top1.setdefault(label, [0.0] * len(query_ids))[k] = round(share, 6)
    return {"by_variant": {name: {"role": roles[name], "pairs": len(values),
                                  "positive_beats": float(np.mean(values))}
                           for name, values in sorted(wins.items())},
            "top1": dict(sorted(top1.items())),
            "group": {"_id": [internal.get(qid, qid) for qid in query_ids], "size": size.tolist(),
                      "p_at_1": [0.0 if b else round(1.0 / (1 + t), 6) for b, t in zip(beaten, level)]}}
