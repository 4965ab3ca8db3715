"""Word and sentence statistics (mmlongembed.ops.wordstats) and the balanced choice of an edit
(mmlongembed.ops.lexical)."""

from __future__ import annotations

import numpy as np
import pytest

from mmlongembed.ops.lexical import choose_balanced
from mmlongembed.ops.wordstats import FEATURES, WordStats, features_replacing, text_features

DOCUMENT = ("Ada Pell kept the lamp. She kept it for 40 years!\n\nThe lamp stood on the pier.\n\n"
            "Harbour\nThe pier is old. Boats come home.\n\n")


def test_features_of_a_text_are_counted_as_read():
    f = text_features("The cat sat. The dog ran 2 miles!\nTitle line\n")
    # words: the cat sat the dog ran 2 miles title line (10); distinct 9; used once 8
    assert f["words"] == 10 and f["type_token_ratio"] == 0.9 and f["hapax_share"] == 0.8
    assert f["capitalised_share"] == 0.3 and f["digit_share"] == 0.1
    # sentences of 3, 5 and 2 words
    assert f["sentence_words_mean"] == pytest.approx(10 / 3)
    assert f["sentence_words_sd"] == pytest.approx(np.std([3, 5, 2]))
    assert f["mean_word_length"] == pytest.approx(sum(map(len, "The cat sat The dog ran 2 miles Title line".split())) / 10)


def test_replacing_a_paragraph_gives_the_features_of_the_edited_text():
    """What a builder works out for each candidate edit without reading the document again."""
    old = "The lamp stood on the pier.\n\n"
    for new in ("A gull sat on the pier and cried.\n\n", "The lamp stood. It stood on the pier.\n\n", "\n\n"):
        edited = DOCUMENT.replace(old, new)
        expected = text_features(edited)
        stats = WordStats.of(DOCUMENT)
        got = features_replacing(stats, WordStats.of(old), WordStats.of(new))
        assert got == pytest.approx(expected)
        assert stats.replacing(WordStats.of(old), WordStats.of(new)).features() == pytest.approx(expected)
    assert list(text_features(DOCUMENT)) == list(FEATURES)


def test_the_balanced_choice_moves_each_statistic_to_its_drawn_side():
    # three edits x two statistics: every edit raises the first; only the last lowers the second
    differences = np.array([[1.0, 2.0], [0.5, 1.0], [3.0, -1.0]])
    assert choose_balanced(differences, np.array([1, 1])) == 1  # both up: the smallest moves
    assert choose_balanced(differences, np.array([1, -1])) == 2  # the second down: the only one that does
    # no edit lowers the first: the smallest move on the wrong side
    assert choose_balanced(differences, np.array([-1, 1])) == 1
    # an unmoved statistic is on either side; equal costs: the earlier edit
    assert choose_balanced(np.array([[0.0, 1.0], [0.0, 1.0]]), np.array([-1, 1])) == 0
    with pytest.raises(ValueError):
        choose_balanced(np.zeros((0, 2)), np.array([1, 1]))


def test_exchangeable_sides_put_the_original_at_each_rank_equally_often():
    from mmlongembed.ops.lexical import exchangeable_sides

    below = [int((exchangeable_sides(3, 2, np.random.default_rng(seed)) == -1).sum(axis=0)[0]) for seed in range(4000)]
    shares = np.bincount(below, minlength=4) / len(below)
    assert np.allclose(shares, 0.25, atol=0.03)  # independent +-1 sides would give 1/8, 3/8, 3/8, 1/8
    sides = exchangeable_sides(3, 2, np.random.default_rng(1))
    assert sides.shape == (3, 2) and set(np.unique(sides)) <= {-1, 1}


def test_balanced_ranks_level_the_ranks_and_keep_the_narrow_ranges():
    """Most variants can only go below their positive (range 0..0 or 0..1), few can go either
    way: each item's rank lies in its range, every rank is held equally often, and the wide
    ranges make up for the narrow ones (as many kept as four times the items that can take
    rank 3). A rank drawn uniformly within each range, the plausible wrong way, crowds rank 0."""
    from mmlongembed.ops.lexical import balanced_ranks

    ranges = [(0, 0)] * 10 + [(0, 1)] * 20 + [(0, 2)] * 30 + [(0, 3)] * 15 + [None] * 5 + [(1, 3)] * 3
    ranks = balanced_ranks(ranges, 4, np.random.default_rng(0))
    kept = [(r, span) for r, span in zip(ranks, ranges) if r is not None]
    assert all(span is not None and span[0] <= r <= span[1] for r, span in kept)
    counts = np.bincount([r for r, _ in kept], minlength=4)
    assert len(set(counts)) == 1 and counts.sum() == 4 * 18, counts  # rank 3: the 15 + 3 that can take it
    assert ranks == balanced_ranks(ranges, 4, np.random.default_rng(0))
    assert ranks != balanced_ranks(ranges, 4, np.random.default_rng(1))  # ties and give-backs are drawn

    rng = np.random.default_rng(0)
    drawn = [int(rng.integers(lo, hi + 1)) for lo, hi in (r for r in ranges if r is not None)]
    assert np.bincount(drawn, minlength=4).max() > 1.5 * np.bincount(drawn, minlength=4).min()
    with pytest.raises(ValueError, match="rank range"):
        balanced_ranks([(2, 4)], 4, np.random.default_rng(0))


def test_word_length_cost_charges_a_block_that_leaves_the_mean_word_length_on_the_wrong_side():
    """The variant's mean word length is the positive's with the span's words swapped for the
    block's: a block of long words raises it (free when the side drawn is +1, charged when -1),
    and one of the positive's own word length leaves it level (charged either way)."""
    from mmlongembed.core.documents import TEXT, Segment
    from mmlongembed.ops.lexical import word_length_cost, word_length_sums

    WORD_SIDE_COST = 500.0
    from mmlongembed.ops.wordstats import WordStats

    def segments(*texts):
        return [Segment(kind=TEXT, tokens=len(t.split()), text=t) for t in texts]

    positive = segments("The cat sat on a mat. ", "A dog ran to the sea. ", "We saw it all. ")
    donor = segments("Extraordinarily unbelievable circumstances materialised. ", "I am at my ox. ",
                     "The cow ate on a hay. ")
    words, chars = word_length_sums(positive)
    whole = WordStats.of("".join(s.text for s in positive))
    assert (words[-1], chars[-1]) == (whole.words, whole.word_chars)  # the sums add up to the text's
    blocks = np.array([0, 1, 2]), np.array([1, 2, 3])  # long words, short words, the span's length
    up = word_length_cost((words, chars), word_length_sums(donor), +1, WORD_SIDE_COST)(1, 2, *blocks)
    down = word_length_cost((words, chars), word_length_sums(donor), -1, WORD_SIDE_COST)(1, 2, *blocks)
    assert list(up) == [0.0, WORD_SIDE_COST, WORD_SIDE_COST]
    assert list(down) == [WORD_SIDE_COST, 0.0, WORD_SIDE_COST]


def test_level_the_top_keeps_one_group_in_group_size_topped_by_its_positive():
    from mmlongembed.ops.lexical import level_the_top

    tops = [True] * 30 + [False] * 60  # a third of the groups topped: too many for 1 in 4
    keep = level_the_top(tops, 4, np.random.default_rng(0))
    kept_tops = sum(k and t for k, t in zip(keep, tops))
    assert kept_tops == 20 and sum(keep) == 80  # all 60 others kept, as many tops as they allow
    few = level_the_top([True] * 5 + [False] * 60, 4, np.random.default_rng(0))
    assert sum(few) == 20 and sum(few[:5]) == 5  # too few tops: the others leave instead
    assert level_the_top([False] * 9, 4, np.random.default_rng(0)) == [False] * 9


@pytest.mark.parametrize("text", ["The cat sat. On a mat! Yes?\nNo", "Dr. Smith's 3.5 items...", "", "中文 text. 42"])
def test_word_count_and_chars_are_word_stats_own(text):
    from mmlongembed.ops.wordstats import word_count_and_chars

    stats = WordStats.of(text)
    assert word_count_and_chars(text) == (stats.words, stats.word_chars)
