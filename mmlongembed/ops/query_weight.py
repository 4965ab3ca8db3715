"""Keeping a query's BM25 weight where it was when a span of a document is replaced (the
lexically matched Hard tier, ``mmlongembed.core.pools.LEXICAL``).

The paper's hard negative swaps a quarter to a half of its positive for a donor's text. What
leaves carries the query's words (the summary was written from it); what comes in, from another
report, carries fewer. So every variant scores below its positive under BM25 and "the candidate
sharing the most words with the query" finds the positive. Here each variant is given a side of
the positive's BM25 score against the query (above or below), drawn so that the positive's rank
among itself and its variants is uniform (``ops.lexical.exchangeable_sides``, as for the word
statistics), and a donor block is chosen whose words put the variant on that side, as near the
positive as can be (``QueryWeight.block_cost``, for ``ops.length.find_block``); the finished
text is checked (``QueryWeight.miss``). Goals drawn around the positive's score would not do: a
variant can seldom score far above its positive, and a goal it cannot reach leaves it below,
where BM25 finds the positive.

Scores are those of BM25 over the pool the variant lands in, as the harness runs it: IDF and
average length over the pool's documents. That pool is not made yet, but each of its documents
is a positive or a copy of most of one, so an index over documents the builder already holds
stands in for it (GovReport gives its ``QueryWeight`` the hard pool's positives and variants;
HotpotQA's and MMDocRAG's refills score over their hard pool's positives). The build corpus's IDF would not
do: a term's weight relative to another's decides which side a variant falls on, and over a
whole corpus those weights are not a pool's. What the stand-in misses, the finished pool's own
BM25 reading corrects (``checks.levelling.level_the_pool``).
"""

from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np

from mmlongembed.core.documents import TEXT, Segment
from mmlongembed.ops.bm25 import BM25Index, QueryScorer, bm25_tokenize

# A variant's score lies on the side of its positive's drawn for it, at most this share of the
# positive's score away ...
SCORE_TOLERANCE = 0.02
# ... and within this share of it the block is chosen for its length, not its score: the score
# may not decide alone, or the length nearest the positive's would tell the variants apart
SCORE_SLACK = 0.002
# a block's score miss, per unit of the positive's score, in tokens of length miss: the query's
# weight comes first, then length (``find_block`` adds the two)
MISS_TOKENS = 1e6
# the cost of a block that would leave its variant past the tolerance: such a block is not tried
# (its text would only fail ``QueryWeight.miss``; the words counted by segment foresee it)
MAX_BLOCK_COST = MISS_TOKENS * (SCORE_TOLERANCE - SCORE_SLACK)
# below and above the positive, as a column: ``QueryWeight.block_cost``'s costs for both at once
BOTH_SIDES = np.array([[-1], [1]])
BOTH_SIDES.setflags(write=False)


def _prefix_weights(scorer: QueryScorer, words: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums over segments of the query words' counts (segments+1 x query words) and of
    the number of words (segments+1)."""
    # C-level passes (``term_ids``, bincount): a donor has tens of thousands of words, and a
    # query's variants try twenty donors
    terms = scorer.term_ids(itertools.chain.from_iterable(words))
    lengths = np.zeros(len(words) + 1, dtype=np.int64)
    lengths[1:] = [len(segment) for segment in words]
    segment_of = np.repeat(np.arange(1, len(words) + 1), lengths[1:])
    held = terms >= 0
    n_terms = len(scorer.terms)
    counts = np.bincount(segment_of[held] * n_terms + terms[held], minlength=(len(words) + 1) * n_terms)
    return np.cumsum(counts.reshape(len(words) + 1, n_terms), axis=0), np.cumsum(lengths)


def segment_words(segments: Sequence[Segment]) -> list[list[str]]:
    """Each segment's ``bm25_tokenize`` words (none for an image)."""
    return [bm25_tokenize(s.text) if s.kind == TEXT else [] for s in segments]


class QueryWeight:
    """The query's BM25 weight over one positive, and what a variant replacing a span of it with
    a donor's block would weigh."""

    def __init__(self, pool_index: BM25Index, query: str, positive_words: Sequence[Sequence[str]],
                 words_of: Callable[[str], Sequence[Sequence[str]]]):
        """``pool_index``: a ``BM25Index`` over the pool's positives (its IDF and average length);
        ``words_of(donor id)``: a donor's ``segment_words``."""
        self.scorer = QueryScorer(pool_index, bm25_tokenize(query), average_length=pool_index.average_length)
        self._counts, self._lengths = _prefix_weights(self.scorer, positive_words)
        self._words_of = words_of
        # each donor's prefix weights, counted once: every variant tries the same donors, on both sides
        self._donor_weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.score = self.scorer.score(self._counts[-1], int(self._lengths[-1]))

    def distance(self, score: float, side: int) -> float:
        """How far ``score`` lies from the positive's on ``side`` (+1 above, -1 below), as a share of
        the positive's score; on the wrong side, or level with it, one more than that."""
        return float(self.distances(np.asarray([score], dtype=np.float64), side)[0])

    def distances(self, scores: np.ndarray, side: int) -> np.ndarray:
        """``distance`` of each of ``scores``."""
        away = (scores - self.score) * side / max(self.score, 1e-9)
        return np.where(away > 0, away, 1.0 - away)

    def block_cost(self, donor_id: str,
                   side: int | np.ndarray) -> Callable[[int, int, np.ndarray, np.ndarray], np.ndarray]:
        """``ops.donor.replace_span_with_donor``'s ``block_cost`` for blocks of ``donor_id`` (arrays
        of block starts and ends, one cost each): zero for a block that puts the variant on
        ``side`` of the positive within ``SCORE_SLACK``, and beyond it a cost that outweighs any
        length miss. ``side`` may be a column of sides (``BOTH_SIDES``): a row of costs each, the
        blocks scored once for all (``SpanToFill.can_fill`` reads them together)."""
        if donor_id not in self._donor_weights:
            self._donor_weights[donor_id] = _prefix_weights(self.scorer, self._words_of(donor_id))
        donor_counts, donor_lengths = self._donor_weights[donor_id]
        total, length = self._counts[-1], int(self._lengths[-1])

        def cost(span_start: int, span_end: int, block_starts: np.ndarray, block_ends: np.ndarray) -> np.ndarray:
            kept = total - (self._counts[span_end] - self._counts[span_start])
            counts = kept + (donor_counts[block_ends] - donor_counts[block_starts])
            words = (length - int(self._lengths[span_end] - self._lengths[span_start])
                     + (donor_lengths[block_ends] - donor_lengths[block_starts]))
            distances = self.distances(self.scorer.scores(counts, words), side)
            return MISS_TOKENS * np.maximum(0.0, distances - SCORE_SLACK)

        return cost

    def lost_words(self, span_start: int, span_end: int, most: int = 5) -> list[str]:
        """The query's words that the span ``[span_start, span_end)`` of the positive holds, each
        as often as it occurs there (at most ``most`` times): a BM25 query for the reports that
        hold what a variant loses, the donors most likely to give it back."""
        held = self._counts[span_end] - self._counts[span_start]
        return [word for word, k in zip(self.scorer.terms, held) for _ in range(int(min(k, most)))]

    def miss(self, text: str, side: int) -> tuple[float, float]:
        """(the text's score, its ``distance`` from the positive's on ``side``)."""
        score = self.scorer.score_text(text)
        return score, self.distance(score, side)


def ranks_in_pool(query_words: Sequence[Sequence[str]], groups: Sequence[Sequence[Sequence[str]]]) -> list[int]:
    """For each query, how many of its group's variants BM25 scores above its positive, as the
    harness runs it (``harness.models.adapters.BM25Model``: IDF and average length over all the
    groups' documents, scores as float32). ``groups``: each query's documents' words, its
    positive's first."""
    index = BM25Index(document for group in groups for document in group)
    ranks, start = [], 0
    for words, group in zip(query_words, groups):
        scores = index.scores(words).astype(np.float32)[start:start + len(group)]
        ranks.append(int((scores[1:] > scores[0]).sum()))
        start += len(group)
    return ranks
