"""Needle-in-a-haystack operations: cut a haystack window from a long stream of segments, put one
needle in it at a depth, and measure where it landed.

A *stream* is a long run of haystack segments in document order (sentences, images) whose token
counts were taken once; windows are cut from it with prefix sums, so no document is ever
re-tokenised while it is assembled. The finished document is recounted once (``exact_tokens``).

Depth is measured in tokens of the haystack (the document without the needle): a needle at
depth d goes to the segment boundary nearest ``d * H``. Its realised position is the token count
of everything rendered before it (text runs between image placeholders plus image tokens), which
``needle_token_index`` recomputes from the stored text alone, so a validator can check it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from mmlongembed.core.documents import IMAGE_PLACEHOLDER, TEXT, Document, Segment, count_rendered
from mmlongembed.core.errors import UserError
from mmlongembed.ops.length import prefix_sums, trim_edges
from mmlongembed.core.pools import LengthBand
from mmlongembed.core.tokens import IMAGE_PATCH_PIXELS, TokenCounter


@dataclass
class Stream:
    """Haystack segments in document order, with prefix sums and the indices a window may start at
    (paragraph starts and image boundaries: a haystack never opens mid-paragraph)."""

    segments: list[Segment]
    sums: list[int] = field(init=False)
    starts: list[int] = field(init=False)

    def __post_init__(self):
        self.sums = prefix_sums(self.segments)
        self.starts = [0] + [
            i + 1 for i, s in enumerate(self.segments[:-1]) if s.kind != TEXT or s.paragraph_end
            or self.segments[i + 1].kind != TEXT
        ]

    @property
    def tokens(self) -> int:
        return self.sums[-1]

    def window_end(self, start: int, need_lo: int, need_hi: int) -> int | None:
        """The largest ``end`` with ``need_lo <= tokens(start:end) <= need_hi``, or None."""
        end = bisect.bisect_right(self.sums, self.sums[start] + need_hi) - 1
        if end <= start or self.sums[end] - self.sums[start] < need_lo:
            return None
        return end

    def stratified_starts(self, n: int, need_hi: int, rng: np.random.Generator) -> list[list[int]]:
        """For each of ``n`` documents, an ordered list of start indices to try: the usable starts
        are cut into ``n`` strata in stream order and each document tries its own stratum first
        (random order), so the documents of one cell read different stretches of the stream."""
        usable = [s for s in self.starts if self.sums[-1] - self.sums[s] >= need_hi]
        if not usable:
            return [[] for _ in range(n)]
        strata = np.array_split(np.array(usable), n) if len(usable) >= n else [np.array(usable)] * n
        order = rng.permutation(n)
        plans = []
        for k in range(n):
            own = strata[order[k]]
            tries = [int(own[i]) for i in rng.permutation(len(own))] if len(own) else []
            # then any start, so a stratum without a fitting window does not starve the document
            extra = [usable[int(i)] for i in rng.choice(len(usable), min(len(usable), 64), replace=False)]
            plans.append(tries + extra)
        return plans


def nearest_boundary(segments: Sequence[Segment], depth: float) -> tuple[int, int, int]:
    """(boundary index k, haystack tokens before it, haystack tokens H) for the segment boundary
    nearest ``depth * H``; ``depth`` in [0, 1]. Ties go to the earlier boundary."""
    sums = prefix_sums(segments)
    goal = depth * sums[-1]
    k = min(range(len(sums)), key=lambda i: (abs(sums[i] - goal), i))
    return k, sums[k], sums[-1]


def text_needle_segment(needle: str, before: Segment | None, after: Segment | None, tokens: int) -> Segment:
    """The needle as a segment that keeps the text around it well formed: a sentence of its own
    within a paragraph (" Needle." after a sentence end), else a paragraph of its own."""
    mid_paragraph = before is not None and before.kind == TEXT and not before.text[-1:].isspace()
    if mid_paragraph:
        text = " " + needle
        if after is not None and after.kind == TEXT and not after.text[:1].isspace():
            text += " "
    else:
        text = needle + ("\n" if after is not None else "")
    return Segment(kind=TEXT, tokens=tokens, text=text, paragraph_end=not mid_paragraph, origin="needle")


def insert_needle(window: Sequence[Segment], boundary: int, needle_text: str, needle_segment: Segment | None,
                  document_id: str, counter: TokenCounter) -> Document:
    """The document: ``window`` with the needle at segment boundary ``boundary``, edges trimmed. A
    text needle (``needle_segment`` None) is shaped to the text around it and counted; an image
    needle's segment goes in as it is."""
    if needle_segment is None:
        before = window[boundary - 1] if boundary > 0 else None
        after = window[boundary] if boundary < len(window) else None
        shaped = text_needle_segment(needle_text, before, after, 0)
        needle_segment = Segment(kind=TEXT, tokens=counter.count(shaped.text), text=shaped.text,
                                 paragraph_end=shaped.paragraph_end, origin="needle")
    return trim_edges(Document(id=document_id, segments=(*window[:boundary], needle_segment, *window[boundary:])),
                      counter)


def locate_needle(document: Document, needle_text: str | None,
                  counter: TokenCounter) -> tuple[Segment, str, list[int], int]:
    """Where the needle (the segment of origin "needle") of a finished document landed: (its
    segment, the rendered text, its character range there (a text needle's own words, or an image
    needle's placeholder; ``needle_text`` None), and the tokens rendered before it)."""
    segments = document.segments
    at = next(i for i, s in enumerate(segments) if s.origin == "needle")
    segment = segments[at]
    text, _ = document.render()
    prefix_chars = sum(len(IMAGE_PLACEHOLDER) if s.is_visual else len(s.text) for s in segments[:at])
    sizes = [(s.height, s.width) for s in segments if s.is_visual]
    if needle_text is not None:
        char_start = prefix_chars + segment.text.index(needle_text)
        char_range = [char_start, char_start + len(needle_text)]
    else:
        char_range = [prefix_chars, prefix_chars + len(IMAGE_PLACEHOLDER)]
    return segment, text, char_range, needle_token_index(text, sizes, char_range[0], counter)


def needle_token_index(text: str, image_sizes: Sequence[tuple[int, int]], char_offset: int,
                       counter: TokenCounter) -> int:
    """Tokens rendered before ``char_offset`` of a stored candidate: the text runs before it
    (split at image placeholders) plus the images whose placeholder comes before it."""
    prefix = text[:char_offset]
    n_images = prefix.count(IMAGE_PLACEHOLDER)
    text_tokens, image_tokens = count_rendered(prefix, image_sizes[:n_images], counter)
    return text_tokens + image_tokens


def patch_grid(tokens: int, aspect: float, max_aspect: float = 3.0) -> tuple[int, int] | None:
    """(rows, cols) of 32-pixel patches with rows*cols as close to ``tokens`` as possible without
    passing it, and rows/cols near ``aspect`` (height/width) but within [1/max_aspect, max_aspect]."""
    best = None
    for rows in range(1, tokens + 1):
        cols = tokens // rows
        if cols < 1:
            break
        ratio = rows / cols
        if not 1 / max_aspect <= ratio <= max_aspect:
            continue
        key = (rows * cols, -abs(math.log(ratio / aspect)))
        if best is None or key > best[0]:
            best = (key, (rows, cols))
    return best[1] if best else None


def fit_to_patches(pil_image, rows: int, cols: int):
    """Scale to cover ``rows x cols`` patches, then crop the centre: the image is not distorted."""
    from PIL import Image

    height, width = rows * IMAGE_PATCH_PIXELS, cols * IMAGE_PATCH_PIXELS
    scale = max(height / pil_image.height, width / pil_image.width)
    new_w, new_h = max(width, round(pil_image.width * scale)), max(height, round(pil_image.height * scale))
    resized = pil_image.resize((new_w, new_h), Image.Resampling.BICUBIC)
    left, top = (new_w - width) // 2, (new_h - height) // 2
    return resized.crop((left, top, left + width, top + height))


# -- the grid: its depths, its cells' names ---------------------------------------------------

def sigmoid_depths(points: int, steepness: float = 4.0) -> tuple[float, ...]:
    """``points`` depths from 0 to 100 whose spacing follows a logistic curve: uniform steps on
    the curve's input put more depths near the ends, where retrieval is known to change most."""
    if points < 2:
        raise UserError("--depth-points must be at least 2")
    lo, hi = 1 / (1 + math.exp(steepness)), 1 / (1 + math.exp(-steepness))
    xs = [-steepness + 2 * steepness * i / (points - 1) for i in range(points)]
    return tuple(round(100 * (1 / (1 + math.exp(-x)) - lo) / (hi - lo), 1) for x in xs)


def depth_label(depth: float) -> str:
    """40.0 -> "40", 4.7 -> "4.7" (the harness reads the depth back from the `-d<depth>` suffix)."""
    return f"{depth:g}"


def cell_name(needle_modality: str, background: str, band: LengthBand, depth: float, family: str | None = None) -> str:
    """`needle-<needle modality>-<background>-<length>-d<depth>`; with a family (one grid per
    family), `needle-<needle modality>-<family>-<background>-<length>-d<depth>`."""
    modality = needle_modality if family is None else f"{needle_modality}-{family}"
    return f"needle-{modality}-{background}-{band.name}-d{depth_label(depth)}".lower()


def pool_modality(needle_modality: str, background: str) -> str:
    if background == "mixed" or needle_modality != background:
        return "mixed"
    return background


def needle_side(image_budget: int, length: int) -> int:
    """Square needle of at most ``image_budget`` (``--needle-image-budget``) and at most L/8
    tokens, in whole patches: its side in pixels."""
    budget = max(1, min(image_budget, length // 8))
    return max(1, math.isqrt(budget)) * 32

