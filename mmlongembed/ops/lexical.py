"""Choosing an edit that leaves a document's query-blind statistics where they were.

An edited copy of a document (a hard negative: one sentence replaced by another of the same
token length) must not be told from the original by anything a rule can read without the query:
its character count, the share of distinct words, of words used once, word and sentence lengths
(``mmlongembed.ops.wordstats``). Matching each statistic as closely as possible is not enough: if every
candidate edit moves a statistic the same way (a sentence from another paragraph brings words the
document never used, so the share of distinct words rises), the nearest edit still moves it that
way, and the original is the extreme of its group far more often than chance. So each statistic
gets a side drawn at random (the edit may raise it, or lower it), and the edit is chosen that puts
as much of the statistics' weight as it can on their drawn sides, the smaller moves first; over
many edits each statistic then moves up as often as down, and the original sits among its copies
instead of at their edge.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from mmlongembed.core.documents import TEXT, Segment
from mmlongembed.ops.wordstats import word_count_and_chars


def exchangeable_sides(n_edits: int, n_statistics: int, rng: np.random.Generator) -> np.ndarray:
    """Sides for ``n_edits`` edits of one original (edits x statistics, +1 or -1) when all of them
    stand beside it in one group: per statistic, how many edits go below the original is drawn
    uniformly from 0 to ``n_edits``, so the original's rank among itself and its edits is uniform
    (independent sides would put it at the group's edge too seldom; one shared side, as edits from
    one donor all move alike, far too often)."""
    sides = np.ones((n_edits, n_statistics), dtype=int)
    for j in range(n_statistics):
        below = int(rng.integers(n_edits + 1))
        sides[rng.permutation(n_edits)[:below], j] = -1
    return sides


def choose_balanced(differences: np.ndarray, sides: np.ndarray) -> int:
    """The row of ``differences`` (edits x statistics: the edited document's value minus the
    original's) to take, given ``sides`` (+1 or -1 per statistic: the side the edit should move
    it to). A statistic on its drawn side, or unmoved, costs its size; one on the wrong side
    costs one more than its size. Sizes are measured against the
    typical move of that statistic among the edits offered (its median absolute difference), so
    no statistic's unit dominates. Ties: the earlier row (the edits come in order of preference)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or not len(d):
        raise ValueError("choose_balanced needs a non-empty (edits x statistics) array")
    scale = np.median(np.abs(d), axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    size = np.abs(d) / scale
    wrong = np.sign(d) == -np.asarray(sides)
    cost = (wrong * (1.0 + size)).sum(axis=1) + 0.1 * size.sum(axis=1)
    return int(np.argmin(cost))  # argmin takes the first of equal costs


def balanced_ranks(ranges: Sequence[tuple[int, int] | None], n_ranks: int, rng: np.random.Generator) -> list[int | None]:
    """A rank (0 to ``n_ranks`` - 1) for each item that can take the ranks ``lo..hi`` of its
    ``ranges`` entry (None: no rank, left out), such that every rank is taken by as many items
    as every other, with as many items kept as this finds room for (the others: None).

    The lexical tier's positive must hold each rank among its variants equally often, or "the
    candidate BM25 puts first" finds it more (or less) often than chance. Keeping only the
    items that can take every rank, each with a rank drawn uniformly, does that but keeps few:
    a variant that must lose a summary's densest half seldom has a donor to put it above its
    positive. Here an item that can take fewer ranks enters too, and the ranks of the items
    with room make up for it: the narrowest ranges first (in a drawn order among equals),
    each to its least taken rank (drawn among ties); then each rank taken more often than the
    least taken one gives back as many of its items, drawn."""
    tie_order = rng.permutation(len(ranges))
    order = sorted((i for i in range(len(ranges)) if ranges[i] is not None),
                   key=lambda i: (ranges[i][1] - ranges[i][0], tie_order[i]))
    counts = np.zeros(n_ranks, dtype=int)
    ranks: list[int | None] = [None] * len(ranges)
    for i in order:
        lo, hi = ranges[i]
        if not 0 <= lo <= hi < n_ranks:
            raise ValueError(f"rank range {ranges[i]} is not within 0..{n_ranks - 1}")
        options = np.arange(lo, hi + 1)
        least = options[counts[options] == counts[options].min()]
        ranks[i] = int(least[rng.integers(len(least))])
        counts[ranks[i]] += 1
    level = counts.min()
    for rank in range(n_ranks):
        holders = np.array([i for i, r in enumerate(ranks) if r == rank], dtype=int)
        for i in rng.permutation(holders)[: counts[rank] - level]:
            ranks[int(i)] = None
    return ranks


def word_length_sums(segments: Sequence[Segment]) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums over segments of their words and their words' characters (``WordStats``'
    counts, which add up over pieces; an image has none)."""
    counts = np.array([word_count_and_chars(s.text) if s.kind == TEXT else (0, 0) for s in segments],
                      dtype=np.int64).reshape(-1, 2)
    sums = np.zeros((len(counts) + 1, 2), dtype=np.int64)
    sums[1:] = np.cumsum(counts, axis=0)
    return sums[:, 0], sums[:, 1]


def word_length_cost(positive_sums: tuple[np.ndarray, np.ndarray], donor_sums: tuple[np.ndarray, np.ndarray],
                     side: int, wrong_side_cost: float) -> Callable[[int, int, np.ndarray, np.ndarray], np.ndarray]:
    """A ``block_cost`` (``ops.donor.replace_span_with_donor``'s) of ``wrong_side_cost`` for each
    donor block that would leave the variant's mean word length level with the positive's or on
    the side other than ``side``, from the two documents' ``word_length_sums``.

    Why: a block sought for a query's words holds more of them than the span it replaces, and a
    query's words (a subject's terms) are longer than most: the lexical tier's variants would
    have longer words than their positive, and "the shortest words" would find it. The donor
    order (``exchangeable_sides`` in the builder) cannot mend that when few donors keep the
    query's weight; the choice of block within a donor can."""
    positive_words, positive_chars = positive_sums
    donor_words, donor_chars = donor_sums
    mean = positive_chars[-1] / max(1, positive_words[-1])

    def cost(span_start: int, span_end: int, block_starts: np.ndarray, block_ends: np.ndarray) -> np.ndarray:
        kept_words = positive_words[-1] - (positive_words[span_end] - positive_words[span_start])
        kept_chars = positive_chars[-1] - (positive_chars[span_end] - positive_chars[span_start])
        words = kept_words + donor_words[block_ends] - donor_words[block_starts]
        chars = kept_chars + donor_chars[block_ends] - donor_chars[block_starts]
        return wrong_side_cost * ((chars / np.maximum(words, 1) - mean) * side <= 0)

    return cost


def level_the_top(tops: Sequence[bool], group_size: int, rng: np.random.Generator) -> list[bool]:
    """Which groups to keep (drawn) so that the positive tops its group in exactly 1 / ``group_size``
    of those kept, as many kept as can be; ``tops[i]``: whether it tops group i. The top is the
    rank P@1 reads: the share of groups where it holds is the share a rule ranking by that
    score finds the positive."""
    top = np.flatnonzero(tops)
    rest = np.flatnonzero(~np.asarray(tops, dtype=bool))
    n_top = min(len(top), len(rest) // (group_size - 1))
    keep = np.zeros(len(tops), dtype=bool)
    keep[rng.permutation(top)[:n_top]] = True
    keep[rng.permutation(rest)[:(group_size - 1) * n_top]] = True
    return keep.tolist()
