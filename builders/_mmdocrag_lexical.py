"""MMDocRAG's lexically matched Hard tier (``mmlongembed.core.pools.LEXICAL``): every document of
a group has one text quote swapped for sentences of the same length, and BM25 cannot tell which
one is whole.

In the paper's Hard tier the positive is the question's quotes padded with other documents'
pages, and each variant loses a gold quote: a text quote is refilled by sentences of the same
length that seldom name the question's entities, so each text variant scores below its positive
under BM25 and "the candidate sharing the most words with the question" is the positive. As for
HotpotQA (``ops.multisource.lexical_refill``), no refill gives the variant that weight back: the
question's rarest words occur in its own document's quotes. The lever is the positive. In this
tier one of its own quotes that is no evidence (a text quote of its context, which often names
the question's entities) is refilled the way a variant's gold quote is (whole sentences of about
its length, the document's unused text first), chosen so that the positive's BM25 score falls
below a number of its variants' drawn uniformly from none to all of them, with a margin
(``lexical_refill.Gap``). The variants are the hard pool's, each of which holds one refill too (a
gold quote's, or a padding quote's where it lost only an image: ``quotes.refill_padding_quotes``).
Every document of the group holds a refill where a quote was, and BM25 finds the question's
document, not which copy of it is whole.

A query keeps its place only when both the top rank and a rank below it could have been reached
(``PlaceWeights.reachable``): the queries kept must not depend on the rank drawn.

Scores are BM25 over the pool as the harness runs it, stood in for by the IDF over the hard
pool's positives (their words: ``UnitWords``), as HotpotQA's tier does.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from mmlongembed.ops.bm25 import QueryScorer, bm25_tokenize
from mmlongembed.ops.multisource.evidence import Unit
from mmlongembed.ops.multisource.lexical_refill import Gap, PlaceWeights, UnitWords, drawn_gap
from mmlongembed.ops.multisource.quotes import context_text_places, refill_place, sentence_refill

# the places (context quotes) whose estimate lies in the drawn gap that are tried, nearest a gold
# text quote's length first
PLACES_TRIED = 8
# a variant that lost none of the question's words scores as the whole positive but for its length
# in words (a refill a few words longer or shorter): within this share of it, even at 1K tokens,
# where a gold text quote carries several times more of the question's weight
NEAR_SHARE = 0.01


def lexical_positive(units: Sequence[Unit], gold_text_tokens: Sequence[int], variant_scores: Sequence[float],
                     hard_score: float, scorer: QueryScorer, words: UnitWords,
                     text_sources: Sequence[Callable[[], list[Unit]]], slack: int, rank_rng: np.random.Generator,
                     run_rng: Callable[[str], np.random.Generator],
                     counter) -> tuple[list[Unit] | None, dict | None, Gap, int] | str:
    """The whole positive's ``units`` with one context quote that is no evidence refilled so that
    its BM25 score (``scorer``) lies in the gap of a rank among ``variant_scores`` drawn uniformly
    (``rank_rng``), the refill's provenance, the gap and how many variants stand level with the
    whole positive; or why the query leaves the tier: ``no_context_text`` (no such quote),
    ``rank_unreachable`` (the top or the ranks below it cannot be reached), ``no_matching_refill``.
    The positive is never left whole: every variant of the hard pool holds a refill, and a
    positive without one would lie at its group's centre in characters.

    Variants that lost none of the question's words (an image quote, and a padding quote) score
    within ``NEAR_SHARE`` of the whole positive (``near`` of them), and no refill of the question's
    own text lifts the positive clear of them. The hard pool's positive (``hard_score``: a padding
    quote refilled as theirs were) stands among them as one of them, and BM25 orders them by their
    lengths in words, drawn alike: P@1 about 1 / (near + 1). So the draws from none to ``near``
    variants above give the hard pool's positive (None for the units and the refill) where it lies
    above every other variant, and the positive's expected P@1 is (near + 1) / (n + 1) *
    1 / (near + 1) = 1 / (n + 1), chance, as without them."""
    counts, length = words.weights(scorer, units)
    places = context_text_places(units)
    weights = PlaceWeights(scorer, units, places, words) if places else None
    whole = scorer.score(counts, length)
    near = sum(abs(s - whole) <= NEAR_SHARE * abs(whole) for s in variant_scores)
    top = Gap([s for s in variant_scores if abs(s - whole) > NEAR_SHARE * abs(whole)], 0) if near \
        else Gap(variant_scores, 0)
    below = Gap(variant_scores, 1, at_least=True)
    if weights is None or not weights.reaches(below) or not (top.holds(hard_score) if near else weights.reaches(top)):
        return "no_context_text" if weights is None else "rank_unreachable"
    above = int(rank_rng.integers(len(variant_scores) + 1))
    if above <= near and near:
        return None, None, top, near
    gap = drawn_gap(variant_scores, above, weights.reaches)
    by_id = {unit.id: unit for unit in units}
    aims = list(gold_text_tokens) or [0]

    def shape(i: int) -> float:  # a refill of a gold text quote's length, like the variants' refills
        tokens = by_id[weights.places[i][0]].segments[0].tokens
        return min(abs(tokens - t) for t in aims)

    for i in weights.ordered(gap, shape)[:PLACES_TRIED]:
        unit_id = weights.places[i][0]
        segment = by_id[unit_id].segments[0]
        removed = bm25_tokenize(segment.text)
        base_counts, base_length = counts - scorer.counts(removed), length - len(removed)

        def in_gap(run) -> bool:
            run_words = bm25_tokenize("".join(s.text for s in run))
            return gap.holds(scorer.score(base_counts + scorer.counts(run_words), base_length + len(run_words)))

        found = sentence_refill(segment, text_sources, slack, run_rng(unit_id), counter, in_gap)
        if found is not None:
            source, a, b, run = found
            refilled, record = refill_place(units, unit_id, run, source.id, (a, b))
            return refilled, record, gap, near
    return "no_matching_refill"
