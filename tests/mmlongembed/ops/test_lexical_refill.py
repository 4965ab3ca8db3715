"""The lexical tier's ranks for the multi-source builders (``ops.multisource.lexical_refill``):
where the positive's score must lie, which ranks stand in, and a document's BM25 weight from its
units' words."""

from __future__ import annotations

import math

import pytest

from mmlongembed.core.documents import TEXT, Segment
from mmlongembed.ops.bm25 import BM25Index, QueryScorer, bm25_tokenize
from mmlongembed.ops.multisource.evidence import Unit
from mmlongembed.ops.multisource.lexical_refill import RANK_MARGIN, Gap, UnitWords, drawn_gap

SCORES = [10.0, 8.0, 6.0]


@pytest.mark.parametrize("above, inside, outside", [
    (0, [10.5, 100.0], [10.0, 10.0 * (1 + RANK_MARGIN / 2), 9.0]),
    (1, [9.0], [10.0, 8.0, 8.0 * (1 + RANK_MARGIN / 2), 11.0]),
    (3, [5.0, 0.1], [6.0, 7.0]),
])
def test_a_gap_holds_the_scores_with_that_many_variants_above_and_a_margin(above, inside, outside):
    gap = Gap(SCORES, above)
    for score in inside:
        assert gap.holds(score) and sum(s > score for s in SCORES) == above, score
    for score in outside:
        assert not gap.holds(score), score


def test_a_rank_below_the_top_that_cannot_be_reached_stands_in_for_any_rank_below_the_top():
    assert drawn_gap(SCORES, 2, lambda gap: True).lower == 6.0
    fallback = drawn_gap(SCORES, 2, lambda gap: False)
    assert fallback.upper == 10.0 and math.isinf(fallback.lower)  # anywhere below the top variant
    top = drawn_gap(SCORES, 0, lambda gap: False)  # the top keeps its draw whatever is reachable
    assert math.isinf(top.upper) and top.lower == 10.0


def test_a_documents_weight_from_its_units_is_its_texts():
    units = [Unit(f"u{k}", "context", (Segment(kind=TEXT, text=text, tokens=5, origin="source"),))
             for k, text in enumerate(["Alpha beta Gamma.\n\n", "beta delta, epsilon alpha.\n\n", "Zeta eta beta."])]
    index = BM25Index.from_texts(["alpha beta", "gamma delta zeta", "eta theta"])
    scorer = QueryScorer(index, bm25_tokenize("alpha beta zeta?"), average_length=index.average_length)
    words = UnitWords()
    assert words.score(scorer, units) == pytest.approx(scorer.score_text("".join(u.text for u in units)))
    assert words.document(units) == bm25_tokenize("".join(u.text for u in units))
