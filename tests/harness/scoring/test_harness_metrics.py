"""Metrics, truncation and the MTEB cross-check."""

import numpy as np
import pytest

from harness.scoring.metrics import bootstrap_ci, per_query, positive_ranks, summarise, tied_positives
from harness.scoring.truncation import keep_head_tail, truncate_middle


def test_middle_truncation_keeps_head_and_tail():
    units = list(range(10))
    kept, truncated = truncate_middle(units, [1] * 10, 6)
    assert truncated and kept == [0, 1, 2, 7, 8, 9]
    assert truncate_middle(units, [1] * 10, 10) == (units, False)


def test_images_are_kept_or_dropped_whole():
    # head budget 5 cannot hold the 4-token image after 3 tokens; the tail takes the unused budget
    costs = [1, 1, 1, 4, 1, 1, 1, 1, 1]
    n_head, n_tail = keep_head_tail(costs, 10)
    assert (n_head, n_tail) == (3, 5)
    assert sum(costs[:n_head]) + sum(costs[len(costs) - n_tail:]) <= 10


def test_ties_count_as_the_expected_value_over_their_orders():
    scores = np.array([[0.0, 0.0, 0.0], [0.1, 0.9, 0.5], [0.7, 0.7, 0.9]])
    ranks = positive_ranks(scores, [1, 1, 1])
    assert ranks.tolist() == [[1, 3], [1, 1], [2, 3]]
    assert tied_positives(scores, [1, 1, 1]) == 2
    values = per_query(ranks)
    assert values["p@1"].tolist() == pytest.approx([1 / 3, 1, 0])  # all equal: chance, not 0
    assert values["mrr"].tolist() == pytest.approx([(1 + 1 / 2 + 1 / 3) / 3, 1, (1 / 2 + 1 / 3) / 2])
    assert values["hit@5"].tolist() == [1, 1, 1]


def test_per_query_definitions():
    values = per_query(np.array([1, 3, 11]))
    assert values["p@1"].tolist() == [1, 0, 0]
    assert values["p@5"].tolist() == pytest.approx([0.2, 0.2, 0])
    assert values["mrr"].tolist() == pytest.approx([1, 1 / 3, 1 / 11])
    assert values["ndcg@10"].tolist() == pytest.approx([1, 0.5, 0])


def test_hit_at_k_varies_where_p_at_5_cannot():
    """A pool of four candidates: P@5 is 1/5 for every ranking, hit@k (k = 3 there) tells them apart."""
    from harness.scoring.metrics import hit_at, hit_k

    assert (hit_k(4), hit_k(5), hit_k(6), hit_k(420), hit_k(2)) == (3, 4, 5, 5, 1)
    best, worst = summarise(np.array([1, 1, 2, 1]), 10, n_candidates=4), summarise(np.array([4, 4, 4, 3]), 10,
                                                                                   n_candidates=4)
    assert best["p@5"]["value"] == pytest.approx(0.2) and worst["p@5"]["value"] == pytest.approx(0.2)
    assert (best["hit@k"]["value"], best["hit@k"]["k"]) == (1.0, 3)
    assert worst["hit@k"]["value"] == pytest.approx(0.25)
    # ties: the chance over the ranks the positive can take (ranks 2..5 tied: 2 of 4 are in the top 3)
    assert hit_at(np.array([[2, 5], [1, 1], [4, 4]]), 3).tolist() == pytest.approx([0.5, 1, 0])
    assert "hit@k" not in summarise(np.array([1, 2]), 10)  # only where the pool size is given


def test_bootstrap_interval_brackets_the_mean():
    values = np.array([1.0] * 30 + [0.0] * 70)
    lo, hi = bootstrap_ci(values, 2000, seed=1)
    assert lo < 0.3 < hi and hi - lo < 0.25
    assert bootstrap_ci(np.ones(10)) == (1.0, 1.0)


def test_metrics_equal_mteb_retrieval_evaluator():
    """Same embeddings, two evaluators: ours and MTEB's (pytrec_eval) agree on P@1, P@5, nDCG@10, MRR."""
    # a hard import: with the mteb extra installed (CI), a moved module must fail, not skip
    from mteb._evaluators import retrieval_metrics
    rng = np.random.default_rng(7)
    queries, docs = rng.normal(size=(40, 16)), rng.normal(size=(60, 16))
    # queries sit near their positive so that ranks spread over 1..60
    positives = rng.integers(0, 60, size=40)
    queries = queries + 0.8 * docs[positives]
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    scores = unit(queries) @ unit(docs).T
    ours = summarise(positive_ranks(scores, positives), n_resamples=10)
    results = {f"q{i}": {f"d{j}": float(scores[i, j]) for j in range(60)} for i in range(40)}
    qrels = {f"q{i}": {f"d{positives[i]}": 1} for i in range(40)}
    theirs = retrieval_metrics.calculate_retrieval_scores(results, qrels, [1, 5, 10, 100])
    assert 0 < ours["p@1"]["value"] < 1  # a check that could fail: not all-or-nothing
    assert ours["p@1"]["value"] == pytest.approx(theirs.precision["P@1"], abs=1e-5)
    assert ours["p@5"]["value"] == pytest.approx(theirs.precision["P@5"], abs=1e-5)
    assert ours["hit@5"]["value"] == pytest.approx(theirs.hit_rate["HitRate@5"], abs=1e-5)
    assert ours["ndcg@10"]["value"] == pytest.approx(theirs.ndcg["NDCG@10"], abs=1e-5)
    assert ours["mrr"]["value"] == pytest.approx(theirs.mrr["MRR@100"], abs=1e-5)


def test_variant_breakdown_counts_wins_per_variant_with_ties_as_half():
    from harness.scoring.metrics import variant_breakdown

    # two queries; candidates: q0's positive, head25, tail25; q1's positive, head25, other
    scores = np.array([[0.9, 0.5, 0.9, 0.1, 0.2, 0.3],
                       [0.0, 0.0, 0.0, 0.4, 0.6, 0.1]])
    audit = {"_id": ["Q0", "Q1", "p0", "h0", "t0", "p1", "h1", "o1"],
             "kind": ["query", "query"] + ["candidate"] * 6,
             "role": ["query", "query", "positive", "hard_negative", "hard_negative", "positive", "hard_negative",
                      "easy_negative"],
             "group": ["Q0", "Q1", "Q0", "Q0", "Q0", "Q1", "Q1", "Q1"],
             "variant": ["", "", "original", "head25", "tail25", "original", "head25", "other_report"]}
    out = variant_breakdown(scores, ["Q0", "Q1"], ["p0", "h0", "t0", "p1", "h1", "o1"], [0, 3], audit)
    assert {k: v for k, v in out.items() if k not in ("top1", "group")} == {"by_variant": {
        "head25": {"role": "hard_negative", "pairs": 2, "positive_beats": 0.5},  # beats h0, loses to h1
        "other_report": {"role": "easy_negative", "pairs": 1, "positive_beats": 1.0},
        "tail25": {"role": "hard_negative", "pairs": 1, "positive_beats": 0.5},  # a tie
    }}
    # among its own group: Q0's positive ties its tail25 (half), Q1's loses to its head25
    assert out["group"] == {"_id": ["Q0", "Q1"], "size": [3, 3], "p_at_1": [0.5, 0.0]}


def test_the_group_figure_ignores_other_queries_candidates():
    """A pool P@1 loses to any candidate of another query; the group P@1 only to the query's own."""
    from harness.scoring.metrics import variant_breakdown

    scores = np.array([[0.5, 0.1, 0.9]])  # another query's positive on top, the query's own head25 below
    audit = {"_id": ["Q0", "Q1", "p0", "h0", "p1"], "kind": ["query", "query", "candidate", "candidate", "candidate"],
             "role": ["query", "query", "positive", "hard_negative", "positive"],
             "group": ["Q0", "Q1", "Q0", "Q0", "Q1"], "variant": ["", "", "original", "head25", "original"]}
    out = variant_breakdown(scores, ["Q0"], ["p0", "h0", "p1"], [0], audit)
    assert out["group"] == {"_id": ["Q0"], "size": [2], "p_at_1": [1.0]}


def test_scores_within_the_tie_tolerance_tie_and_beyond_it_do_not():
    """The same input embedded in two batches can differ in its last bits on some CPUs: a score
    that far from the positive's is a tie (chance), one clearly above it wins."""
    from harness.scoring.metrics import TIE_TOLERANCE, outscores, positive_ranks, tied_positives

    bits_apart = np.array([[0.5, 0.5 + TIE_TOLERANCE / 4, 0.1]])
    assert positive_ranks(bits_apart, [0]).tolist() == [[1, 2]]
    assert tied_positives(bits_apart, [0]) == 1
    clearly_above = np.array([[0.5, 0.5 + 10 * TIE_TOLERANCE, 0.1]])
    assert positive_ranks(clearly_above, [0]).tolist() == [[2, 2]]
    assert tied_positives(clearly_above, [0]) == 0
    assert outscores([0.5 + 10 * TIE_TOLERANCE, 0.5, 0.5 - 10 * TIE_TOLERANCE], 0.5).tolist() == [1, 0, -1]
