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

import numpy as np


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
