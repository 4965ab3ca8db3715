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
