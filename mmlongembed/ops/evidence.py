"""Evidence-preserving padding: documents built from whole units (a source paragraph, a whole
padding article), with marked evidence segments whose positions are tracked exactly.

A document is a list of ``Unit``s; each unit is whole (never cut), so padding is always coherent
text. Evidence segments carry ``origin="evidence:<k>"``. Operations:

- ``pick_fillers``: choose whole units whose total lies in a token window (big articles first,
  small paragraphs to land in the window);
- ``insert_spread``: insert units between existing ones so that each old position keeps its
  relative depth (``f = tokens before / total``) as the document grows;
- ``insert_random``: insert units at random gaps (the first padding of a document);
- ``find_sentence_run``: a run of whole sentences of one paragraph of a padding article whose
  length lies in a window, to replace an evidence segment with coherent text of the same length;
- ``segment_spans`` / ``token_offsets_at``: where segments are, in characters and tokens, and the
  independent recount that checks it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from mmlongembed.documents import TEXT, Document, Segment
from mmlongembed.errors import FitError
from mmlongembed.tokens import TokenCounter

EVIDENCE_ORIGIN = "evidence:"


@dataclass(frozen=True)
class Unit:
    id: str
    kind: str  # "context" (the record's own paragraph), "article", "paragraph" (padding)
    segments: tuple[Segment, ...]

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.segments)

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)


def units_document(doc_id: str, units: Sequence[Unit], **meta) -> Document:
    return Document(id=doc_id, segments=tuple(s for u in units for s in u.segments),
                    meta={"units": [u.id for u in units], **meta})


@dataclass(frozen=True)
class Span:
    char_start: int
    char_end: int
    token_start: int
    token_end: int


def segment_spans(document: Document) -> list[Span]:
    """Character and token range of every segment (tokens by the segments' own counts)."""
    spans, chars, tokens = [], 0, 0
    for s in document.segments:
        spans.append(Span(chars, chars + len(s.text), tokens, tokens + s.tokens))
        chars += len(s.text)
        tokens += s.tokens
    return spans


def unit_spans(units: Sequence[Unit]) -> list[Span]:
    spans, chars, tokens = [], 0, 0
    for u in units:
        n_chars = sum(len(s.text) for s in u.segments)
        spans.append(Span(chars, chars + n_chars, tokens, tokens + u.tokens))
        chars += n_chars
        tokens += u.tokens
    return spans


def evidence_spans(document: Document) -> dict[int, Span]:
    """Evidence index -> span, for segments with ``origin="evidence:<k>"``."""
    return {int(s.origin[len(EVIDENCE_ORIGIN):]): span
            for s, span in zip(document.segments, segment_spans(document)) if s.origin.startswith(EVIDENCE_ORIGIN)}


def token_offsets_at(text: str, char_positions: Iterable[int], counter: TokenCounter) -> dict[int, int]:
    """The token offset of each character position, counted piecewise between the positions
    (one pass over the text). Exact where the positions fall on pre-token boundaries, which is
    where segments begin (whitespace leads a sentence, a newline run ends a paragraph)."""
    positions = sorted(set(char_positions))
    offsets, total = {}, 0
    pieces = [text[a:b] for a, b in zip([0, *positions], positions)]
    for position, n in zip(positions, counter.count_many(pieces)):
        total += n
        offsets[position] = total
    return offsets


def pick_fillers(big: Sequence[Unit], small: Sequence[Unit], lo: int, hi: int, rng: np.random.Generator) -> list[Unit]:
    """Whole units whose token total lies in [lo, hi]: big ones (articles) in random order while
    they fit, then small ones (paragraphs) until the total reaches ``lo``. Raises FitError."""
    if hi < 0 or lo > hi:
        raise FitError("bad_window", f"[{lo}, {hi}]")
    if lo <= 0:
        return []
    chosen, total = [], 0
    for pool in (big, small):
        for i in rng.permutation(len(pool)):
            unit = pool[int(i)]
            if total + unit.tokens <= hi:
                chosen.append(unit)
                total += unit.tokens
                if total >= lo:
                    return chosen
    raise FitError("not_enough_padding", f"reached {total} of [{lo}, {hi}] tokens from {len(big)}+{len(small)} units")


def insert_random(units: Sequence[Unit], extras: Sequence[Unit], rng: np.random.Generator) -> list[Unit]:
    """Each extra unit at a uniformly drawn gap (before, between or after the units); units keep
    their order, extras at one gap keep theirs."""
    gaps = sorted(int(g) for g in rng.integers(0, len(units) + 1, size=len(extras)))
    return _insert_at(units, list(zip(gaps, extras)))


def insert_spread(units: Sequence[Unit], extras: Sequence[Unit], rng: np.random.Generator) -> list[Unit]:
    """Insert ``extras`` (shuffled) between ``units`` so that the tokens inserted before any old
    point are, as nearly as whole units allow, the same fraction of the new tokens as that point's
    depth: relative positions are kept as the document grows."""
    total = sum(u.tokens for u in units)
    extra_total = sum(u.tokens for u in extras)
    if not extras or total == 0:
        return list(units) + list(extras)
    depth = [0.0]
    for u in units:
        depth.append(depth[-1] + u.tokens / total)
    placed, done = [], 0
    for i in rng.permutation(len(extras)):
        unit = extras[int(i)]
        centre = (done + unit.tokens / 2) / extra_total
        done += unit.tokens
        k = bisect.bisect_left(depth, centre)
        gap = min((g for g in (k - 1, k) if 0 <= g < len(depth)), key=lambda g: (abs(depth[g] - centre), g))
        placed.append((gap, unit))
    placed.sort(key=lambda item: item[0])  # stable: units at one gap keep their drawn order
    return _insert_at(units, placed)


def _insert_at(units: Sequence[Unit], placed: Sequence[tuple[int, Unit]]) -> list[Unit]:
    out, j = [], 0
    for gap in range(len(units) + 1):
        while j < len(placed) and placed[j][0] == gap:
            out.append(placed[j][1])
            j += 1
        if gap < len(units):
            out.append(units[gap])
    return out


def find_sentence_run(sources: Sequence[Unit], need_lo: int, need_hi: int, aim: int,
                      rng: np.random.Generator) -> tuple[Unit, int, int]:
    """(unit, start, end): ``unit.segments[start:end]`` is a run of whole sentences inside one
    paragraph (no heading lines) with a token sum in [need_lo, need_hi], closest to ``aim``.
    Sources are tried in random order; the first exact hit wins."""
    best: tuple[int, int, Unit, int, int] | None = None
    for rank, i in enumerate(rng.permutation(len(sources))):
        unit = sources[int(i)]
        segments = unit.segments
        start = 0
        while start < len(segments):
            end = start
            while end < len(segments) and not segments[end].paragraph_end:
                end += 1
            paragraph = range(start, min(end + 1, len(segments)))
            if len(paragraph) > 1:  # a one-segment paragraph is a heading or a fragment: skip
                for a in paragraph:
                    total = 0
                    for b in range(a, paragraph.stop):
                        if segments[b].kind != TEXT:
                            break
                        total += segments[b].tokens
                        if total > need_hi:
                            break
                        if total >= need_lo:
                            miss = abs(total - aim)
                            if best is None or (miss, rank) < best[:2]:
                                best = (miss, rank, unit, a, b + 1)
                            if miss == 0:
                                return unit, a, b + 1
            start = paragraph.stop
    if best is None:
        raise FitError("no_sentence_run", f"no run of [{need_lo}, {need_hi}] tokens in {len(sources)} sources")
    return best[2], best[3], best[4]
