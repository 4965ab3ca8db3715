"""Replace a span of a document with a length-matched block of donor text (hard negatives).

The span is a token fraction of the document snapped to paragraph boundaries; the block is a
contiguous run of the donor's sentences, starting at a donor paragraph where possible, whose
length matches the span within the hard-negative tolerance. The offset from an exact match is
drawn at random around zero, so a negative is as often a little longer as a little shorter than
its positive and length gives nothing away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mmlongembed.core.digests import content_sha256
from mmlongembed.core.documents import Document
from mmlongembed.core.errors import FitError
from mmlongembed.ops.length import (
    SegmentSums, edge_whitespace, exact_tokens, find_block, fit_block_edges, has_block, prefix_sums, replace_segments,
    span_at_fraction)
from mmlongembed.core.pools import LengthBand, hard_negative_tolerance
from mmlongembed.core.tokens import TokenCounter

# Recount drift we leave room for when aiming inside the tolerance (see ops.length).
RECOUNT_MARGIN = 2


@dataclass(frozen=True)
class SpanReplacement:
    document: Document
    n_tokens: int
    provenance: dict


def exchangeable_offsets(positive_tokens: int, n_variants: int, rng: np.random.Generator) -> list[int]:
    """Length offsets for ``n_variants`` negatives such that the positive and its negatives are
    exchangeable in length: all n+1 lengths are drawn i.i.d. around the positive's and the
    positive keeps its own draw, so its length rank among them is uniform and neither "pick the
    longest", "the shortest" nor "the median" beats chance."""
    half = max(0, (hard_negative_tolerance(positive_tokens) - RECOUNT_MARGIN) // 2)
    draws = rng.integers(-half, half + 1, size=n_variants + 1)
    return [int(d - draws[0]) for d in draws[1:]]


def offset_room(band: LengthBand) -> int:
    """How far below the band's top a positive must end for every offset ``exchangeable_offsets``
    may draw to fit: a positive cut to the very top could only have shorter negatives, and "the
    longest" would find it."""
    return 2 * max(0, (hard_negative_tolerance(band.hi) - RECOUNT_MARGIN) // 2)


@dataclass(frozen=True)
class SpanToFill:
    """The span of a positive that a donor block replaces, and what the block must be: its
    token range [need_lo, need_hi] and the positive's own character and word densities. Made
    once for the many donors a span is tried with (``can_fill``): it renders the positive."""

    positive: Document
    start: int
    end: int
    sums: list[int]
    need_lo: int
    need_hi: int
    char_start: int
    char_end: int
    chars_per_token: float
    words_per_token: float
    removed_words: int

    @classmethod
    def of(cls, positive: Document, positive_tokens: int, fraction: tuple[float, float], band: LengthBand) -> "SpanToFill":
        segments = positive.segments
        start, end = span_at_fraction(segments, *fraction)
        sums = prefix_sums(segments)
        removed = sums[end] - sums[start]
        tolerance = hard_negative_tolerance(positive_tokens) - RECOUNT_MARGIN
        kept = positive_tokens - removed
        need_lo = max(removed - tolerance, band.lo - kept, 1)
        need_hi = min(removed + tolerance, band.hi - kept)
        if need_lo > need_hi:
            raise FitError("no_room_in_band", f"{positive.id}: span of {removed} tokens cannot be refilled in band")
        positive_text = positive.render()[0]
        char_start = len(Document(positive.id, segments[:start]).render()[0])
        replaced_text = Document(positive.id, segments[start:end]).render()[0]
        return cls(positive, start, end, sums, need_lo, need_hi, char_start, char_start + len(replaced_text),
                   len(positive_text) / max(1, positive_tokens), len(positive_text.split()) / max(1, positive_tokens),
                   len(replaced_text.split()))

    @property
    def removed(self) -> int:
        return self.sums[self.end] - self.sums[self.start]

    def find(self, donor_sums: SegmentSums, rng: np.random.Generator, length_offset: int, block_cost,
             max_block_cost: float):
        """The donor's block (segment range) for this span (``find_block`` over the donor's
        ``SegmentSums``)."""
        removed = self.removed
        aim = min(max(removed + length_offset, self.need_lo), self.need_hi)
        # the block's characters follow its tokens at the positive's own density, so the
        # variants' character lengths are as exchangeable with the positive's as their tokens
        char_aim = self.char_end - self.char_start + round((aim - removed) * self.chars_per_token)
        word_aim = self.removed_words + round((aim - removed) * self.words_per_token)  # and so its words
        cost = None if block_cost is None else (lambda a, b: block_cost(self.start, self.end, a, b))
        return find_block(donor_sums, self.need_lo, self.need_hi, rng, aim=aim, char_aim=char_aim,
                          chars_per_token=self.chars_per_token, word_aim=word_aim,
                          words_per_token=self.words_per_token, block_cost=cost, max_block_cost=max_block_cost)

    def can_fill(self, donor_sums: SegmentSums,
                 block_cost: Callable[[int, int, np.ndarray, np.ndarray], np.ndarray],
                 max_block_cost: float = np.inf) -> np.ndarray:
        """Whether the donor of ``donor_sums`` has a block that ``replace_span_with_donor`` could
        take, for each row of ``block_cost``'s costs (``has_block``: the search's answer, as the
        segment counts foresee it; nothing is assembled or recounted)."""
        return has_block(donor_sums, self.need_lo, self.need_hi, lambda a, b: block_cost(self.start, self.end, a, b),
                         max_block_cost)


def replace_span_with_donor(
    positive: Document,
    positive_tokens: int,
    fraction: tuple[float, float],
    donor: Document,
    band: LengthBand,
    counter: TokenCounter,
    rng: np.random.Generator,
    length_offset: int = 0,
    max_attempts: int = 4,
    block_cost: Callable[[int, int, np.ndarray, np.ndarray], np.ndarray] | None = None,
    max_block_cost: float = np.inf,
    donor_sums: SegmentSums | None = None,
) -> SpanReplacement:
    """``length_offset``: how many tokens longer than the positive the negative should aim to
    be (see ``exchangeable_offsets``); clipped to the tolerance and the band. ``block_cost(span
    start, span end, block starts, block ends)`` (segment indices of the positive, and arrays of
    the donor's) weighs candidate blocks beside their length, and a block costing more than
    ``max_block_cost`` is not taken (``find_block``'s). ``donor_sums``: the donor's ``SegmentSums``,
    where the caller keeps them for the donor's next search."""
    span = SpanToFill.of(positive, positive_tokens, fraction, band)
    segments, start, end, sums = positive.segments, span.start, span.end, span.sums
    lead, _ = edge_whitespace(segments[start].text)
    _, tail = edge_whitespace(segments[end - 1].text)
    donor_sums = SegmentSums.of(donor.segments) if donor_sums is None else donor_sums
    for _ in range(max_attempts):
        block_start, block_end = span.find(donor_sums, rng, length_offset, block_cost, max_block_cost)
        block = fit_block_edges(donor.segments[block_start:block_end], lead, tail, counter,
                                origin=f"donor:{donor.id}")
        negative = replace_segments(positive, start, end, block)
        n_tokens = exact_tokens(negative, counter)
        if abs(n_tokens - positive_tokens) <= hard_negative_tolerance(positive_tokens) and band.contains(n_tokens):
            block_text = Document(donor.id, tuple(block)).render()[0]
            char_start = span.char_start
            provenance = {
                "replaced_token_range": [sums[start], sums[end]],
                "replaced_char_range": [char_start, span.char_end],
                "replaced_sha256": content_sha256(positive.render()[0][char_start:span.char_end]),
                "donor_id": donor.id,
                "donor_token_range": [int(donor_sums.tokens[block_start]), int(donor_sums.tokens[block_end])],
                "block_char_range": [char_start, char_start + len(block_text)],
                "block_sha256": content_sha256(block_text),
                "block_tokens": sum(s.tokens for s in block),
            }
            return SpanReplacement(negative, n_tokens, provenance)
    raise FitError("recount_out_of_tolerance", f"{positive.id}: refilled span drifted past the tolerance")


# -- near-duplicates, which are never donors -----------------------------------------------------

SHINGLE_WORDS = 8


def word_shingles(text: str) -> np.ndarray:
    """The text's runs of ``SHINGLE_WORDS`` words (lower-cased), hashed, sorted and each once:
    what two near-duplicate texts share most of (hashes are compared within one process only).
    An array of 8 bytes a shingle, not a set of a few dozen: a build keeps many of them."""
    words = text.lower().split()
    count = max(1, len(words) - SHINGLE_WORDS + 1)
    hashes = (hash(" ".join(words[i:i + SHINGLE_WORDS])) for i in range(count))
    return np.unique(np.fromiter(hashes, dtype=np.int64, count=count))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|a & b| / |a | b| of two ``word_shingles``; 0 when either is empty."""
    if not len(a) or not len(b):
        return 0.0
    shared = len(np.intersect1d(a, b, assume_unique=True))
    return shared / (len(a) + len(b) - shared)
