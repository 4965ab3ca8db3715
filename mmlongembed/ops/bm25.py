"""BM25 retrieval over a corpus: donor search for span replacement, and the lexical shortcut check.

Scoring is exactly ``rank_bm25.BM25Okapi`` with its defaults (k1=1.5, b=0.75, epsilon=0.25:
negative IDFs are floored to a quarter of the mean IDF), the reference the design names, and
bit-identical to it (tested side by side). The index is an inverted one, built one document at a
time: a document's words are counted and dropped, so indexing a corpus of reports holds its
postings (a term id and a count per distinct word of a document, 8 bytes) and never every
document's words at once; a query touches only the documents holding its words.

Tokenisation, the same for documents and queries: NFKC, lower case, runs of Unicode word
characters (``\\w+``), English stop words removed, no stemming. CJK text has no spaces, so each
CJK character is its own token.
"""

from __future__ import annotations

import itertools
import math
import unicodedata
from array import array
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import regex

K1, B, EPSILON = 1.5, 0.75, 0.25
_TOKEN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]|[\w]+", regex.UNICODE)
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she should
    so some such than that the their theirs them themselves then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves""".split()
)


def length_norm(length, average_length):
    """rank_bm25's ``k1 * (1 - b + b * |d| / avgdl)``, evaluated in its order (one length or an array)."""
    return K1 * (1 - B + B * length / average_length)


def saturated(frequency, norm):
    """rank_bm25's ``tf * (k1 + 1) / (tf + norm)``, evaluated in its order: a word's weight in a
    document, before its IDF."""
    return frequency * (K1 + 1) / (frequency + norm)


def bm25_tokenize(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    return [t for t in _TOKEN.findall(text) if t not in STOP_WORDS]


class BM25Index:
    """BM25Okapi over ``tokenized_corpus`` (any iterable: a generator is read once, one document
    at a time)."""

    def __init__(self, tokenized_corpus: Iterable[Sequence[str]]):
        vocabulary: dict[str, int] = {}  # term -> id, in order of first appearance (rank_bm25's IDF order)
        terms, counts, distinct, lengths = array("i"), array("i"), array("i"), array("q")
        for document in tokenized_corpus:
            lengths.append(len(document))
            counted = Counter(document)
            distinct.append(len(counted))
            for word, count in counted.items():
                term = vocabulary.get(word)
                if term is None:
                    term = vocabulary[word] = len(vocabulary)
                terms.append(term)
                counts.append(count)
        if not lengths:
            raise ValueError("cannot index an empty corpus")
        self.size = len(lengths)
        self._vocabulary = vocabulary
        term_of = np.frombuffer(terms, dtype=np.int32)
        frequency = np.bincount(term_of, minlength=len(vocabulary))  # a document holding a term is one entry
        self._idf = _idf(frequency.tolist(), self.size)
        self._starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(frequency, out=self._starts[1:])
        # Postings by term: the documents holding each term, in document order, with its count.
        # Made one array at a time, each input dropped once used: a full corpus has about 10^8
        # entries (19K reports of ~4K distinct words), and holding them all twice is gigabytes.
        order = np.argsort(term_of, kind="stable")
        if len(order) < 2**31:
            order = order.astype(np.int32)
        del term_of, terms
        self._counts = np.frombuffer(counts, dtype=np.int32)[order]
        del counts
        self._documents = np.repeat(np.arange(self.size, dtype=np.int32), np.frombuffer(distinct, dtype=np.int32))
        self._documents = self._documents[order]
        del order
        total = sum(lengths)
        self.average_length = total / self.size
        # A corpus without a single word (image-only documents) has no average length to
        # normalise by; every score is zero.
        self._length_norm = None
        if total:
            # rank_bm25's expression, evaluated in its order, so every score is bit-identical
            self._length_norm = length_norm(np.frombuffer(lengths, dtype=np.int64), self.average_length)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "BM25Index":
        return cls(bm25_tokenize(t) for t in texts)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document, in document order. A query word adds to the documents
        holding it only: rank_bm25 adds an exact 0.0 to the others, which changes nothing.

        One pass of numpy calls per query, not per query word: the postings of every query word
        are gathered into one array (each occurrence of a word once, in query order), weighted in
        one expression evaluated as rank_bm25 evaluates it, and summed per document by
        ``np.bincount``, which adds in array order, so a document's words add in query order, as
        rank_bm25's loop adds them: bit-identical."""
        if self._length_norm is None:
            return np.zeros(self.size, dtype=np.float64)
        terms = [term for term in map(self._vocabulary.get, query_tokens) if term is not None]
        if not terms:
            return np.zeros(self.size, dtype=np.float64)
        terms = np.asarray(terms)
        starts = self._starts[terms]
        lengths = self._starts[terms + 1] - starts
        # positions of every posting of the query's words, word after word: 0..total-1 shifted
        # by each word's start less the postings before it
        before = np.cumsum(lengths) - lengths
        positions = np.arange(before[-1] + lengths[-1]) + np.repeat(starts - before, lengths)
        documents, frequency = self._documents[positions], self._counts[positions]
        idf = np.repeat(self._idf[terms], lengths)
        weights = idf * saturated(frequency, self._length_norm[documents])
        scores = np.bincount(documents, weights=weights, minlength=self.size)
        return scores

    def idf(self, word: str) -> float:
        """The word's IDF in this corpus; 0 for a word no document holds (it adds nothing)."""
        term = self._vocabulary.get(word)
        return 0.0 if term is None else float(self._idf[term])

    def top_k(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The k best documents, higher score first, then lower index (so ties at the boundary are
        broken the same way every time)."""
        scores = self.scores(query_tokens)
        k = min(k, self.size)
        if k <= 0:
            return []
        order = _best(scores, k)
        return [(int(i), float(scores[i])) for i in order]


# At least this many blocks (and four per wanted document), whose maxima bound the k-th best
# score from below (see _best).
_BLOCKS = 256


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, ties by lower index, with no quickselect.

    numpy's ``partition``, ``argpartition`` and default sort dispatch to x86-simd-sort, whose
    AVX-512 kernels write with a compress-store that AMD's Zen 4 runs in microcode (over 100
    cycles a vector; numpy/numpy#32690): a ``np.partition`` of every score per query is cheap on
    one machine and the largest cost on another. Here a linear scan and small stable sorts
    (which x86-simd-sort does not do) do it: the k-th highest of the blocks' maxima is a lower
    bound for the k-th highest score (those k maxima are k different documents' scores), so the
    k best are among the scores above the bound and the first k at it (ties go to the lower
    index): usually a few more than k, where most documents share one score (0: no query word)."""
    n = len(scores)
    blocks = max(_BLOCKS, 4 * k)
    if n >= 4 * blocks:
        maxima = np.maximum.reduceat(scores, np.arange(0, n, -(-n // blocks)))
        bound = np.sort(maxima, kind="stable")[-k]
        contenders = np.flatnonzero(scores >= bound)
        if len(contenders) > 4 * k:  # many tie at the bound (all the documents without a query word)
            at = scores[contenders] == bound
            contenders = np.concatenate([contenders[~at], contenders[at][:k]])
    else:
        contenders = np.arange(n)
    return contenders[np.lexsort((contenders, -scores[contenders]))][:k]


def _idf(document_frequency: list[int], corpus_size: int) -> np.ndarray:
    """rank_bm25's IDF per term, summed in its order so the floor is bit-identical: a term in
    more than half the documents would score negative and gets EPSILON times the mean IDF."""
    values, total, negative = [], 0.0, []
    for term, frequency in enumerate(document_frequency):
        value = math.log(corpus_size - frequency + 0.5) - math.log(frequency + 0.5)
        values.append(value)
        total += value
        if value < 0:
            negative.append(term)
    floor = EPSILON * (total / len(values)) if values else 0.0
    for term in negative:
        values[term] = floor
    return np.asarray(values, dtype=np.float64)


class QueryScorer:
    """BM25 of one query against texts given one at a time (or as word counts), with the IDF of
    ``index`` and the average length ``average_length``: what a BM25 over a pool of documents of
    about that length would give them. It lets a build weigh a text by the query's words before
    the pool it lands in exists (the lexically matched tier: a refill carrying as much of the
    query's weight as the text it replaces)."""

    def __init__(self, index: BM25Index, query_tokens: Sequence[str], average_length: float):
        occurrences = Counter(query_tokens)  # each occurrence of a query word adds once
        self.terms = {word: k for k, word in enumerate(occurrences)}
        self._weights = np.array([occurrences[w] * index.idf(w) for w in self.terms], dtype=np.float64)
        self._average_length = max(1.0, float(average_length))

    def term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        """Each token's query word (its index in query order), -1 for a word not in the query: in
        C-level passes (map, fromiter), for texts of tens of thousands of words."""
        return np.fromiter(map(self.terms.get, tokens, itertools.repeat(-1)), dtype=np.int64)

    def counts(self, tokens: Iterable[str]) -> np.ndarray:
        """How often each query word occurs in ``tokens`` (``bm25_tokenize``'s), in query order."""
        held = self.term_ids(tokens)
        return np.bincount(held[held >= 0], minlength=len(self.terms)).astype(np.int64, copy=False)

    def score(self, counts: np.ndarray, length: int) -> float:
        """The BM25 score of a document of ``length`` words holding the query's words ``counts`` times."""
        return float(self.scores(np.asarray(counts)[None, :], np.asarray([length]))[0])

    def scores(self, counts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """``score`` of many documents at once: ``counts`` (documents x query words), ``lengths``."""
        norms = length_norm(np.asarray(lengths), self._average_length)[:, None]
        return np.sum(self._weights * saturated(counts, norms), axis=1)

    def score_text(self, text: str) -> float:
        tokens = bm25_tokenize(text)
        return self.score(self.counts(tokens), len(tokens))
