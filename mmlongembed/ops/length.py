"""Exact length control: cut, take and refill at sentence or paragraph boundaries.

Every function counts each piece once (segment counts are summed with prefix sums) and
searches a bounded space, so a budget that cannot be met fails fast with ``FitError``.
A few boundaries (a Chinese full stop before a letter) fuse into one pre-token and make the
plain sum drift by a token or two, so the finished document's length is either recounted
(``exact_tokens``) or summed with its seams checked (``summed_tokens``: the same number without
recounting the text, the pieces on both sides of a seam that may fuse counted together);
validation recounts the written text either way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Callable, Iterable, Sequence

import numpy as np

from mmlongembed.core.documents import TEXT, Document, Segment, count_rendered
from mmlongembed.core.errors import FitError
from mmlongembed.core.pools import LengthBand
from mmlongembed.core.tokens import TokenCounter

MAX_RECOUNT_ATTEMPTS = 8


def edge_whitespace(text: str) -> tuple[str, str]:
    """(leading whitespace, trailing whitespace) of a segment's text."""
    stripped = text.strip()
    if not stripped:
        return text, ""
    start = text.index(stripped)
    return text[:start], text[start + len(stripped):]


def fit_block_edges(block: Sequence[Segment], lead: str, tail: str, counter: TokenCounter,
                    origin: str) -> list[Segment]:
    """Make a block of segments read in the place of the span it replaces: the span's leading
    whitespace (``lead``) and trailing whitespace (``tail``) become the block's edges, so no
    whitespace seam marks where the block begins or ends. Edited edge segments are recounted."""
    out = [s if s.origin == origin else replace(s, origin=origin) for s in block]
    first = lead + out[0].text.lstrip()
    out[0] = replace(out[0], text=first, tokens=counter.count(first))
    last = out[-1].text.rstrip() + tail
    out[-1] = replace(out[-1], text=last, tokens=counter.count(last), paragraph_end="\n" in tail)
    return out


def trim_edges(document: Document, counter: TokenCounter) -> Document:
    """The document without whitespace before its first or after its last character: a finished
    candidate never begins or ends with whitespace, whichever way it was cut (``validate``
    checks this), so an edge cannot tell a cut, a refilled or an untouched document apart.
    Edited edge segments are recounted; a segment left empty is dropped."""
    segments = list(document.segments)
    for position, strip in ((0, str.lstrip), (-1, str.rstrip)):
        while segments and segments[position].kind == TEXT and strip(segments[position].text) != segments[position].text:
            text = strip(segments[position].text)
            if text:
                segments[position] = replace(segments[position], text=text, tokens=counter.count(text))
            else:
                segments.pop(position)
    return document if len(segments) == len(document.segments) and all(
        a is b for a, b in zip(segments, document.segments)) else document.with_segments(segments)


def exact_tokens(document: Document, counter: TokenCounter) -> int:
    """The length of the finished document, recounted from its assembled text."""
    text, _ = document.render()
    sizes = [(s.height, s.width) for s in document.segments if s.is_visual]
    text_tokens, image_tokens = count_rendered(text, sizes, counter)
    return text_tokens + image_tokens


def summed_tokens(document: Document, counter: TokenCounter) -> int:
    """The length of the finished document, ``exact_tokens`` without recounting its text: text
    segment counts summed where the pre-tokenizer splits at their seams, the rare runs of
    segments joined by any other seam counted together (``TokenCounter.count_joined``), images
    at their own counts. Trusts each text segment's count to be ``counter.count(segment.text)``;
    validation recounts the written text independently."""
    return segment_token_offsets(document, counter, ())[len(document.segments)]


def segment_token_offsets(document: Document, counter: TokenCounter, indices: Iterable[int]) -> dict[int, int]:
    """The token offset at which each segment ``i`` in ``indices`` starts, and the document's
    length at ``len(document.segments)``: what counting the rendered text stretch by stretch
    between those segment starts gives (``ops.evidence.token_offsets_at``), from the segments'
    counts (see ``summed_tokens``). An image counts as its own tokens, and the text on its two
    sides is counted apart, as ``count_rendered`` does."""
    segments = document.segments
    n = len(segments)
    wanted = {i for i in indices if 0 <= i <= n}
    starts = {0, *(i for i in wanted if i < n)}
    for i, s in enumerate(segments):
        if s.kind != TEXT:
            starts |= {i, i + 1} if i + 1 < n else {i}
    starts = sorted(starts)
    pieces = [s.text if s.kind == TEXT else "" for s in segments]
    counts = [s.tokens if s.kind == TEXT else 0 for s in segments]
    offsets, total = {}, 0
    for start, tokens in zip(starts, counter.count_joined(pieces, counts, starts)):
        offsets[start] = total
        total += tokens + (segments[start].tokens if segments[start].kind != TEXT else 0)
    offsets[n] = total
    return {i: offsets[i] for i in (*sorted(wanted), n)}


def prefix_sums(segments: Sequence[Segment]) -> list[int]:
    return [0, *accumulate(s.tokens for s in segments)]


def cut_points(segments: Sequence[Segment], unit: str) -> list[int]:
    """Segment indices at which a cut may fall: after a paragraph or after any sentence."""
    if unit == "paragraph":
        return [0] + [i + 1 for i, s in enumerate(segments) if s.kind != TEXT or s.paragraph_end]
    return list(range(len(segments) + 1))


@dataclass(frozen=True)
class Fitted:
    document: Document
    n_tokens: int  # exact, recounted


def truncate_to_band(
    document: Document, band: LengthBand, counter: TokenCounter, target: int | None = None
) -> Fitted:
    """Keep the longest head of the document that ends at a paragraph boundary (else a
    sentence boundary) and lies in the band, at most ``target`` tokens long."""
    target = band.hi if target is None else min(target, band.hi)
    sums = prefix_sums(document.segments)
    if sums[-1] < band.lo:
        raise FitError("too_short", f"{document.id} has {sums[-1]} tokens, band starts at {band.lo}")
    for unit in ("paragraph", "sentence"):
        ends = [i for i in cut_points(document.segments, unit) if i > 0 and band.lo <= sums[i] <= target]
        for end in sorted(ends, reverse=True)[:MAX_RECOUNT_ATTEMPTS]:
            candidate = trim_edges(document.with_segments(document.segments[:end], cut_at_segment=end), counter)
            n_tokens = exact_tokens(candidate, counter)
            if band.lo <= n_tokens <= band.hi:
                return Fitted(candidate, n_tokens)
    raise FitError("no_boundary_in_band", f"{document.id}: no paragraph or sentence end in [{band.lo}, {target}]")


@dataclass(frozen=True, eq=False)
class SegmentSums:
    """Prefix sums over a document's segments that ``find_block`` weighs its runs by (tokens,
    characters, words, non-text segments), and where its paragraphs start. Made once for a donor
    and kept by its caller: a donor is searched for many spans (each variant of many queries, on
    both sides of the lexical tier's weight), and summing its segments was most of a search."""

    tokens: np.ndarray
    chars: np.ndarray
    words: np.ndarray
    not_text: np.ndarray
    paragraph_starts: np.ndarray

    @classmethod
    def of(cls, segments: Sequence[Segment]) -> "SegmentSums":
        def read_only(values) -> np.ndarray:  # kept and shared by every search of the donor
            array = np.asarray(values, dtype=np.int64)
            array.setflags(write=False)
            return array

        def prefix(values) -> np.ndarray:
            return read_only([0, *accumulate(values)])

        return cls(prefix(s.tokens for s in segments), prefix(len(s.text) for s in segments),
                   prefix(len(s.text.split()) for s in segments), prefix(s.kind != TEXT for s in segments),
                   read_only([0] + [i + 1 for i, s in enumerate(segments[:-1]) if s.paragraph_end]))

    @property
    def n_segments(self) -> int:
        return len(self.tokens) - 1


def _sums_of(segments: Sequence[Segment] | SegmentSums) -> SegmentSums:
    return segments if isinstance(segments, SegmentSums) else SegmentSums.of(segments)


def find_block(
    segments: Sequence[Segment] | SegmentSums,
    need_lo: int,
    need_hi: int,
    rng: np.random.Generator,
    aim: int | None = None,
    char_aim: int | None = None,
    chars_per_token: float = 4.0,
    word_aim: int | None = None,
    words_per_token: float = 0.75,
    block_cost: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    max_block_cost: float = np.inf,
) -> tuple[int, int]:
    """A contiguous run ``segments[start:end]`` of text whose token sum lies in
    [need_lo, need_hi], starting at a paragraph start where possible. The run closest to ``aim``
    tokens wins; with ``char_aim``, the run closest to both aims, a character counting as
    ``1 / chars_per_token`` tokens: a block from a denser or sparser donor would otherwise make
    every variant of a positive longer (or shorter) in characters than the positive itself.
    ``word_aim`` does the same for words (a word counting as ``1 / words_per_token`` tokens): at
    equal tokens and characters, a donor of longer words would give every variant fewer, longer
    words than its positive, and "the most words" would find the positive. ``block_cost(starts,
    ends)``, in tokens per run (arrays in, an array out), is added to a run's miss (the lexical
    tier's: how far the run leaves the query's BM25 weight from where it should be; at least zero);
    a run whose cost exceeds ``max_block_cost``, or is infinite, is no candidate (the lexical tier
    would not take it).
    ``segments`` may be given as their ``SegmentSums``, kept from an earlier search.

    Start points are tried in shuffled order, and of equal misses the first run in that order
    (ends ascending from each start) wins. Every run of a pass is weighed at once, in numpy
    (``_runs``, in batches of ``RUN_BATCH``): one bisection per start, no Python call per run."""
    if need_lo > need_hi or need_hi <= 0:
        raise FitError("bad_request", f"block of [{need_lo}, {need_hi}] tokens")
    aim = (need_lo + need_hi) // 2 if aim is None else aim
    table = _sums_of(segments)
    sums, chars, words = table.tokens, table.chars, table.words
    for starts in (table.paragraph_starts, np.arange(table.n_segments, dtype=np.int64)):
        order = rng.permutation(len(starts))
        run_starts, run_ends = _runs(sums, table.not_text, starts[order], need_lo, need_hi)
        best: tuple[float, int, int] | None = None
        for at in range(0, len(run_starts), RUN_BATCH):
            start, end = run_starts[at:at + RUN_BATCH], run_ends[at:at + RUN_BATCH]
            # the terms add in this order, in float64, as one run's sum always has
            miss = np.abs(sums[end] - sums[start] - aim).astype(np.float64)
            if char_aim is not None:
                miss += np.abs(chars[end] - chars[start] - char_aim) / chars_per_token
            if word_aim is not None:
                miss += np.abs(words[end] - words[start] - word_aim) / words_per_token
            if block_cost is not None:
                cost = block_cost(start, end)
                miss += np.where(cost > max_block_cost, np.inf, cost)
            k = int(np.argmin(miss))  # the first of equal misses
            if np.isinf(miss[k]):
                continue
            if best is None or miss[k] < best[0]:
                best = (float(miss[k]), int(start[k]), int(end[k]))
            if best[0] == 0:
                break
        if best is not None:
            return best[1], best[2]
    raise FitError("no_block", f"no run of [{need_lo}, {need_hi}] tokens among {table.n_segments} segments")


def has_block(segments: Sequence[Segment] | SegmentSums, need_lo: int, need_hi: int,
              block_cost: Callable[[np.ndarray, np.ndarray], np.ndarray],
              max_block_cost: float = np.inf) -> np.ndarray:
    """Whether ``find_block`` would find a run, for each row of ``block_cost``'s costs (an array
    of one row per cost read over the same runs, as the lexical tier's two sides of the query's
    weight; a cost of one row gives one answer). The search's answer without its search: a run
    it can take is any text run of the length, from any start, whose cost is neither infinite nor
    above ``max_block_cost``; which run it would take (the order, the aims) does not change whether
    there is one. So both sides are read over one set of runs, and a donor's weights once. Costs
    are at least zero, as for ``find_block``."""
    # the rows' number, from the costs of no run: a request no run can meet still answers each row
    found = np.zeros(np.shape(block_cost(np.zeros(0, np.int64), np.zeros(0, np.int64)))[:-1], dtype=bool)
    if need_lo > need_hi or need_hi <= 0:
        return found
    table = _sums_of(segments)
    run_starts, run_ends = _runs(table.tokens, table.not_text, np.arange(table.n_segments, dtype=np.int64),
                                 need_lo, need_hi)
    for at in range(0, len(run_starts), RUN_BATCH):
        cost = block_cost(run_starts[at:at + RUN_BATCH], run_ends[at:at + RUN_BATCH])
        found |= np.any(~((cost > max_block_cost) | np.isinf(cost)), axis=-1)
        if found.all():
            break
    return found


# runs weighed at once by find_block and has_block: bounds their memory (a lexical block cost holds a row of
# query-word counts per run) whatever the donor's length
RUN_BATCH = 1 << 14


def _runs(sums: np.ndarray, not_text: np.ndarray, starts: np.ndarray, need_lo: int,
          need_hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of every run of text segments from one of ``starts`` (in their order) whose
    token sum lies in [need_lo, need_hi], ends ascending from each start. ``sums`` and
    ``not_text``: prefix sums of the segments' tokens and of their non-text count."""
    first = np.maximum(np.searchsorted(sums, sums[starts] + need_lo, side="left"), starts + 1)
    after = np.searchsorted(sums, sums[starts] + need_hi, side="right")
    count = np.maximum(after - first, 0)
    run_starts = np.repeat(starts, count)
    run_ends = np.repeat(first, count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    text_only = not_text[run_ends] == not_text[run_starts]
    return run_starts[text_only], run_ends[text_only]


def span_at_fraction(
    segments: Sequence[Segment], start_fraction: float, end_fraction: float, unit: str = "paragraph"
) -> tuple[int, int]:
    """Segment range covering the token fraction [start_fraction, end_fraction) of the
    document, snapped to the nearest cut points (paragraph ends, else sentence ends)."""
    sums = prefix_sums(segments)
    total = sums[-1]
    points = cut_points(segments, unit)
    if len(points) < 3:
        points = cut_points(segments, "sentence")

    def nearest(fraction: float) -> int:
        goal = fraction * total
        return min(points, key=lambda i: (abs(sums[i] - goal), i))

    start, end = nearest(start_fraction), nearest(end_fraction)
    if end <= start:
        raise FitError("span_too_small", f"no boundary between {start_fraction:.0%} and {end_fraction:.0%}")
    return start, end


def replace_segments(document: Document, start: int, end: int, block: Sequence[Segment], **meta) -> Document:
    return document.with_segments([*document.segments[:start], *block, *document.segments[end:]], **meta)
