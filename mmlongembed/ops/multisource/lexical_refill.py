"""The lexically matched Hard tier of the multi-source builders (``mmlongembed.core.pools.LEXICAL``):
every document of a group has lost a sentence that carries the question's words.

The paper's hard variant loses an evidence sentence, refilled with a run of whole sentences on the
receiving paragraph's topic (``refill.VariantSearch``); its positive loses a sentence too (one that
is no evidence, refilled alike: ``refill.positive_places``), so that no word statistic marks the
variants. But the evidence sentence was written around the question's entities and the
positive's refilled sentence seldom names them: every variant loses more of the question's BM25
weight than its positive, and BM25 picks the positive as "the candidate sharing the most words
with the question" (HotpotQA Hard, 8K: 59% P@1 among a group of four).

A refill cannot give that weight back: the question's rarest words (its entities, its specific
terms) occur in the paragraphs about those entities, which are the question's own, and no other
source holds them (measured on the HotpotQA sample: over the 400 runs the search reads for a place,
the variant's score moves by under 2% of the positive's, while the evidence sentence alone carries
2% to 20%). So the lever is the other sentence: in this tier the positive's refilled sentence is
chosen for its question weight (``PlaceWeights``) so that the positive's BM25 score falls at a rank
among its variants' drawn uniformly (the number of variants above it, from none to all of them),
with a margin (``RANK_MARGIN``) on both sides; the variants are the hard pool's. Every document of
the group has then lost a sentence carrying the question's words, and BM25 may still find the
question's topic, but not which of its documents is whole.

A query keeps its place only when every rank could have been reached (``PlaceWeights.reachable``):
a rank harder to reach would otherwise be drawn less often among the queries kept, and the
positive's rank would no longer be uniform.

Scores are those of BM25 over the pool the group lands in, as the harness runs it; that pool's
documents are its positives and copies of most of them, so the IDF over the hard pool's
positives (``BM25Index`` of their words) stands in for it (``ops.query_weight``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from mmlongembed.core.documents import Segment
from mmlongembed.ops.bm25 import QueryScorer, bm25_tokenize
from mmlongembed.ops.multisource.evidence import Unit
from mmlongembed.ops.multisource.refill import VariantSearch, locate

# the positive's score lies at least this share of it away from its neighbours' (the variants
# ranked next above and below it): BM25 over the finished pool, whose IDF differs a little from
# the stand-in's, keeps the rank
RANK_MARGIN = 0.001


class UnitWords:
    """Each unit's ``bm25_tokenize`` words, tokenised and counted once per build (the documents of
    a build share most of their units: padding articles, context paragraphs), and a document's as
    its units' in order: a unit ends at a paragraph break, so no word spans two units."""

    def __init__(self):
        self._words: dict[str, list[str]] = {}
        self._counts: dict[str, Counter] = {}

    def of(self, unit: Unit) -> list[str]:
        text = unit.text
        if text not in self._words:
            self._words[text] = bm25_tokenize(text)
        return self._words[text]

    def document(self, units: Sequence[Unit]) -> list[str]:
        return [word for unit in units for word in self.of(unit)]

    def weights(self, scorer: QueryScorer, units: Sequence[Unit]) -> tuple[np.ndarray, int]:
        """(how often each of ``scorer``'s words occurs in the units, their number of words)."""
        counts, length = np.zeros(len(scorer.terms), dtype=np.int64), 0
        for unit in units:
            text = unit.text
            if text not in self._counts:
                self._counts[text] = Counter(self.of(unit))
            held = self._counts[text]
            counts += [held.get(term, 0) for term in scorer.terms]
            length += len(self.of(unit))
        return counts, length

    def score(self, scorer: QueryScorer, units: Sequence[Unit]) -> float:
        return scorer.score(*self.weights(scorer, units))


class Gap:
    """Where the positive's score must lie for ``above`` of the variants' ``scores`` to lie above
    it, each neighbour at least ``RANK_MARGIN`` of it away; with ``at_least``, for ``above`` or
    more of them (``above`` >= 1: any rank but the top)."""

    def __init__(self, scores: Sequence[float], above: int, at_least: bool = False):
        ranked = sorted(scores, reverse=True)
        self.above = above
        self.at_least = at_least
        self.upper = ranked[above - 1] if above > 0 else math.inf
        self.lower = ranked[above] if above < len(ranked) and not at_least else -math.inf

    def holds(self, score: float) -> bool:
        margin = RANK_MARGIN * abs(score)
        return self.lower + margin < score < self.upper - margin

    def centre_distance(self, score: float) -> float:
        """How far ``score`` lies from the middle of the gap (from its one bound, for an open gap),
        in the score's units: the smaller, the safer."""
        if math.isinf(self.upper) and math.isinf(self.lower):
            return 0.0
        if math.isinf(self.upper):
            return -(score - self.lower)
        if math.isinf(self.lower):
            return -(self.upper - score)
        return abs(score - (self.upper + self.lower) / 2)


def drawn_gap(scores: Sequence[float], above: int, reached: Callable[[Gap], bool]) -> Gap:
    """The gap of the rank drawn (``above`` of the variants above the positive) where ``reached``,
    else, for a rank below the top, the gap of any rank below the top: the top is the rank BM25's
    P@1 reads, and it is drawn with its own chance whatever the others can reach."""
    gap = Gap(scores, above)
    return gap if above == 0 or reached(gap) else Gap(scores, 1, at_least=True)


class PlaceWeights:
    """The positive's score as it would be with one of its sentences taken out (``estimate``: the
    refill assumed to hold none of the question's words and as many words as the sentence),
    for every sentence that may be refilled, and which ranks among the variants' scores those
    estimates can reach."""

    def __init__(self, scorer: QueryScorer, units: Sequence[Unit], places: Sequence[tuple[str, int]],
                 words: UnitWords):
        self.scorer = scorer
        self.places = list(places)
        counts, length = words.weights(scorer, units)
        by_id = {unit.id: unit for unit in units}
        self.estimate = np.array([
            scorer.score(counts - scorer.counts(bm25_tokenize(by_id[unit_id].segments[s].text)), length)
            for unit_id, s in self.places])

    def reaches(self, gap: Gap) -> bool:
        return any(gap.holds(float(e)) for e in self.estimate)

    def ordered(self, gap: Gap, shape: Callable[[int], float]) -> list[int]:
        """The places whose estimate lies in ``gap``, the most like an evidence sentence first
        (``shape``: a place's distance in words and tokens from the nearest; ties: the nearer the
        gap's middle, then the earlier place)."""
        inside = [i for i, e in enumerate(self.estimate) if gap.holds(float(e))]
        return sorted(inside, key=lambda i: (shape(i), gap.centre_distance(float(self.estimate[i])), i))


@dataclass
class GapSearch(VariantSearch):
    """``VariantSearch`` for the lexical positive's refill: a run is taken only where the positive
    it makes scores in the ``gap`` (``scorer``: the question's BM25 under the pool's IDF)."""

    scorer: QueryScorer | None = None
    gap: Gap | None = None
    words: UnitWords | None = None
    # per search: the document's question-word counts and length without the place's sentence,
    # and each run's (unit id, start, end) counts and length as fitted there
    _place: tuple = field(default=(), init=False)
    _runs: dict = field(default_factory=dict, init=False)

    def search(self, units, k, stats):
        u, s = locate(units, k)
        removed = bm25_tokenize(units[u].segments[s].text)
        counts, length = self.words.weights(self.scorer, units)
        self._place = (counts - self.scorer.counts(removed), length - len(removed))
        self._runs = {}
        return super().search(units, k, stats)

    def _fit(self, segment: Segment, before: str, after: str) -> Callable:
        base = super()._fit(segment, before, after)
        counts, length = self._place

        def fit(source: Unit, a: int, b: int):
            fitted = base(source, a, b)
            if fitted is None:
                return None
            key = (source.id, a, b)
            if key not in self._runs:
                words = bm25_tokenize("".join(x.text for x in fitted[0]))
                self._runs[key] = (self.scorer.counts(words), len(words))
            run_counts, run_length = self._runs[key]
            return fitted if self.gap.holds(self.scorer.score(counts + run_counts, length + run_length)) else None

        return fit

