"""BM25 retrieval over a corpus: donor search for span replacement, and the lexical shortcut check.

Scoring is exactly ``rank_bm25.BM25Okapi`` with its defaults (k1=1.5, b=0.75, epsilon=0.25:
negative IDFs are floored to a quarter of the mean IDF), the reference the design names. The
engine is ``rank-bm25-rs``, a Rust port with bit-identical scores (tested against
``rank_bm25``) that indexes about 3x and scores queries several thousand times faster.

Tokenisation, the same for documents and queries: NFKC, lower case, runs of Unicode word
characters (``\\w+``), English stop words removed, no stemming. CJK text has no spaces, so each
CJK character is its own token.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

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


def bm25_tokenize(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    return [t for t in _TOKEN.findall(text) if t not in STOP_WORDS]


class BM25Index:
    def __init__(self, tokenized_corpus: Sequence[Sequence[str]]):
        import rank_bm25_rs

        if not tokenized_corpus:
            raise ValueError("cannot index an empty corpus")
        self.size = len(tokenized_corpus)
        # A corpus without a single word (image-only documents) has no average length to
        # normalise by; every score is zero.
        self._engine = None
        if any(tokenized_corpus):
            self._engine = rank_bm25_rs.BM25Okapi([list(doc) for doc in tokenized_corpus], k1=K1, b=B, epsilon=EPSILON)

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> "BM25Index":
        return cls([bm25_tokenize(t) for t in texts])

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        if not query_tokens or self._engine is None:
            return np.zeros(self.size, dtype=np.float64)
        return np.asarray(self._engine.get_scores(list(query_tokens)), dtype=np.float64)

    def top_k(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        scores = self.scores(query_tokens)
        k = min(k, self.size)
        if k <= 0:
            return []
        # Every document scoring at least the k-th best, so ties at the boundary are broken the
        # same way every time: higher score first, then lower index.
        threshold = np.partition(scores, self.size - k)[self.size - k]
        contenders = np.flatnonzero(scores >= threshold)
        order = contenders[np.lexsort((contenders, -scores[contenders]))][:k]
        return [(int(i), float(scores[i])) for i in order]
