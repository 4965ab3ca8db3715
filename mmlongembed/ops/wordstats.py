"""Query-blind statistics of a text's words and sentences: how varied its vocabulary is (the share
of distinct words, of words used once), how long its words and sentences are, how many of its
words are capitalised or hold a digit.

A model or an evaluator sees these without reading the query, so inside a query's group (its
positive and the negatives made from it) none may tell the positive apart: the shortcut audit
(``mmlongembed.checks.shortcuts``) reads them as rules, and builders that edit a document (a refilled
sentence, a donor block) use the same figures to choose edits that leave them where they were.

``WordStats`` is additive over pieces that end a sentence (paragraphs: a newline ends a
sentence), so the statistics of a document with one paragraph replaced are worked out from the
document's and the two paragraphs' (``features_replacing``) without reading the document again.
Each text is tokenised once (one regular expression); the rest works on its distinct words.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, count

import numpy as np

# a word, or what ends a sentence: . ! ? before whitespace, a closing quote or bracket, or the
# end; a newline (a heading or title line is a sentence of its own)
_TOKEN = re.compile(r"\w+|[.!?](?=[\s\"'’”)\]]|$)|\n")
_ENDS = frozenset({".", "!", "?", "\n"})

FEATURES = ("words", "type_token_ratio", "hapax_share", "mean_word_length", "capitalised_share", "digit_share",
            "sentence_words_mean", "sentence_words_sd")


@dataclass
class WordStats:
    """Counts that add up over pieces of text: lower-cased word -> count, and the totals the
    features divide."""

    counts: Counter = field(default_factory=Counter)
    words: int = 0
    word_chars: int = 0
    capitalised: int = 0
    with_digit: int = 0  # words not all letters: numbers, mostly
    sentences: int = 0
    sentence_words_squared: int = 0

    @classmethod
    def of(cls, text: str) -> "WordStats":
        tokens = _TOKEN.findall(text)
        # C-level passes over the token list (a long document has tens of thousands of words)
        counts = Counter(map(str.lower, tokens))
        n_ends = sum(counts.pop(end, 0) for end in _ENDS)
        words = len(tokens) - n_ends
        stats = cls(counts, words, sum(map(len, tokens)) - n_ends,
                    sum(map(str.isupper, map(operator.itemgetter(0), tokens))),
                    sum(map(operator.not_, map(str.isalpha, tokens))) - n_ends)
        if words:
            # the words between two sentence ends (a run of ends is one end)
            ends = np.fromiter(compress(count(), map(_ENDS.__contains__, tokens)), dtype=np.int64, count=n_ends)
            lengths = np.diff(np.concatenate(([-1], ends, [len(tokens)]))) - 1
            lengths = lengths[lengths > 0]
            stats.sentences, stats.sentence_words_squared = int(lengths.size), int((lengths * lengths).sum())
        return stats

    def replacing(self, removed: "WordStats", added: "WordStats") -> "WordStats":
        """These counts with ``removed`` (a piece of the text) taken out and ``added`` put in."""
        counts = Counter(self.counts)
        counts.subtract(removed.counts)
        counts.update(added.counts)
        return WordStats(+counts, *(a - r + n for a, r, n in zip(self._totals(), removed._totals(), added._totals())))

    @cached_property
    def types_and_hapax(self) -> tuple[int, int]:
        """(distinct words, words used once); a WordStats is not changed once made."""
        return len(self.counts), operator.countOf(self.counts.values(), 1)  # counts hold no zeros

    def _totals(self) -> tuple[int, ...]:
        return (self.words, self.word_chars, self.capitalised, self.with_digit, self.sentences,
                self.sentence_words_squared)

    def features(self) -> dict[str, float]:
        return features_replacing(self)


def features_replacing(stats: WordStats, removed: WordStats | None = None, added: WordStats | None = None
                       ) -> dict[str, float]:
    """The features of ``stats`` with ``removed`` taken out and ``added`` put in, reading only the
    distinct words of the two pieces (the document's own distinct and once-used words are
    counted once per ``WordStats`` and remembered)."""
    types, hapax = stats.types_and_hapax
    totals = list(stats._totals())
    if removed is not None or added is not None:
        removed, added = removed or WordStats(), added or WordStats()
        for word in removed.counts.keys() | added.counts.keys():
            before = stats.counts.get(word, 0)
            after = before - removed.counts.get(word, 0) + added.counts.get(word, 0)
            types += (after > 0) - (before > 0)
            hapax += (after == 1) - (before == 1)
        totals = [a - r + n for a, r, n in zip(totals, removed._totals(), added._totals())]
    words, word_chars, capitalised, with_digit, sentences, squared = totals
    n = max(1, words)
    mean = words / sentences if sentences else 0.0
    variance = max(0.0, squared / sentences - mean * mean) if sentences else 0.0
    return {"words": float(words), "type_token_ratio": types / n, "hapax_share": hapax / n,
            "mean_word_length": word_chars / n, "capitalised_share": capitalised / n, "digit_share": with_digit / n,
            "sentence_words_mean": mean, "sentence_words_sd": math.sqrt(variance)}


def word_count_and_chars(text: str) -> tuple[int, int]:
    """(``WordStats.of(text).words``, ``.word_chars``) without the rest of its counts."""
    tokens = _TOKEN.findall(text)
    n_ends = sum(map(_ENDS.__contains__, tokens))
    return len(tokens) - n_ends, sum(map(len, tokens)) - n_ends


def text_features(text: str) -> dict[str, float]:
    """The word and sentence features of one text."""
    return WordStats.of(text).features()
