"""The haystacks of a needle grid: the text stream (every haystack document, tokenised once, in a
seeded order), the mixed stream (photos interleaved after paragraphs at the configured image
share) and image haystacks (photos drawn one after another to a token budget), with each photo
encoded once per patch grid."""

from __future__ import annotations

import io
from typing import Callable, Sequence

import numpy as np

from mmlongembed.core.documents import Segment, image_segment, text_segments
from mmlongembed.ops.needle import Stream, fit_to_patches, patch_grid
from mmlongembed.core.rng import seeded_order
from mmlongembed.core.tokens import TokenCounter


def image_share(config) -> float:
    """The share of a mixed haystack's tokens that are photos: ``--mixed-image-share``, kept
    within [0.01, 0.95] so that a mixed stream always holds both text and photos."""
    return min(max(config.mixed_image_share, 0.01), 0.95)


class Haystacks:
    """Per-build caches: the text stream (tokenised once), the encoded photos per size, and the
    mixed stream per haystack image size.

    ``documents``: (source id, text) of the haystack text; ``photos``: (source id, PIL RGB image);
    ``config``: the builder's config (``haystack_image_budget``, ``haystack_jpeg_quality``,
    ``mixed_image_share``); ``rng(*identity)``: the build's generator factory (the stream order and
    each mixed stream draw from their own)."""

    def __init__(self, documents: Sequence[tuple[str, str]], photos: Sequence[tuple[str, object]], config,
                 counter: TokenCounter, rng: Callable[..., np.random.Generator]):
        self.config, self.counter, self.documents, self.photos, self.rng = config, counter, documents, photos, rng
        segments: list[Segment] = []
        for source_id, text in seeded_order(documents, rng("stream-order")):
            segments.extend(text_segments(text if text.endswith("\n") else text + "\n", counter, origin=source_id))
        self.text_stream = Stream(segments)
        self.corpus_lower = "".join(s.text for s in segments).lower()
        self._photo_cache: dict[tuple[int, int, int], Segment] = {}
        self._mixed: dict[int, Stream] = {}

    def image_cap(self, length: int) -> int:
        """Haystack images never exceed L/8 tokens, so that a short document still holds several
        images and the needle is not one image among one or two."""
        return max(4, min(self.config.haystack_image_budget, length // 8))

    def photo(self, index: int, cap: int, tokens: int | None = None) -> Segment:
        """Photo ``index`` at the largest 32-px patch grid within ``cap`` (or exactly near ``tokens``)."""
        source_id, pil = self.photos[index]
        aspect = pil.height / pil.width
        grid = patch_grid(tokens if tokens is not None else cap, aspect)
        if grid is None:
            raise ValueError(f"no patch grid for {tokens or cap} tokens")
        key = (index, *grid)
        if key not in self._photo_cache:
            fitted = fit_to_patches(pil, *grid)
            buffer = io.BytesIO()
            fitted.save(buffer, format="JPEG", quality=self.config.haystack_jpeg_quality, optimize=True)
            self._photo_cache[key] = image_segment(buffer.getvalue(), fitted.height, fitted.width,
                                                   origin=source_id)
        return self._photo_cache[key]

    def mixed_stream(self, length: int) -> Stream:
        """The text stream with a photo after a paragraph whenever the text since the last photo
        reaches the gap that gives the configured image share."""
        cap = self.image_cap(length)
        if cap not in self._mixed:
            rng = self.rng("mixed-stream", cap)
            share = image_share(self.config)
            gap = cap * (1 - share) / share
            out: list[Segment] = []
            since, previous = 0.0, -1
            for s in self.text_stream.segments:
                out.append(s)
                since += s.tokens
                if s.paragraph_end and since >= gap:
                    previous = self._next_photo(rng, previous)
                    out.append(self.photo(previous, cap))
                    since = 0.0
            self._mixed[cap] = Stream(out)
        return self._mixed[cap]

    def _next_photo(self, rng, previous: int) -> int:
        """A random photo other than the previous one (no photo twice in a row)."""
        n = len(self.photos)
        if n == 1:
            return 0
        if previous < 0:
            return int(rng.integers(n))
        choice = int(rng.integers(n - 1))
        return choice + (choice >= previous)

    def image_haystack(self, length: int, need_lo: int, need_hi: int, rng) -> list[Segment] | None:
        """Photos in random order (never the same twice in a row) up to the budget, then one photo
        cropped to the patch grid that fills what is left."""
        cap = self.image_cap(length)
        out: list[Segment] = []
        total, previous = 0, -1
        for _ in range(need_hi + 1):  # every photo costs at least one token
            candidate_index = self._next_photo(rng, previous)
            segment = self.photo(candidate_index, cap)
            if total + segment.tokens > need_hi:
                break
            out.append(segment)
            total += segment.tokens
            previous = candidate_index
        aim = (need_lo + need_hi) // 2
        if total < aim:
            filler_index = self._next_photo(rng, previous)
            if patch_grid(aim - total, 1.0) is not None:
                segment = self.photo(filler_index, cap, tokens=aim - total)
                out.append(segment)
                total += segment.tokens
        return out if need_lo <= total <= need_hi else None
