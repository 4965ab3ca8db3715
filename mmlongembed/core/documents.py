"""Documents: ordered segments (text pieces, images, video frames), each with its token count.

A document's length is the sum of its segments' counts. Text segments are sentences (see
``mmlongembed.core.text``) that carry whether they close a paragraph, so operations can cut and pad
at paragraph or sentence boundaries and never inside a word. Images are kept encoded (bytes)
with their stored size; operations move them around without decoding. An image may also be a
stored image that stands for its bytes (the page store's ``StoredPage``: equal, hashed and sized
as its bytes, read from disk when written), so that a build holds no page until it writes it;
``image_data`` gives the bytes of either.
"""

from __future__ import annotations

import io
from array import array
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from mmlongembed.core.text import split_paragraphs, split_sentences
from mmlongembed.core.tokens import TokenCounter, image_tokens

IMAGE_PLACEHOLDER = "<|image|>"
TEXT, IMAGE, FRAME = "text", "image", "frame"
VISUAL_KINDS = (IMAGE, FRAME)


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str
    tokens: int
    text: str = ""
    paragraph_end: bool = False
    image: bytes | None = None  # or a stored image standing for its bytes (``image_data``)
    height: int = 0
    width: int = 0
    timestamp: float | None = None
    origin: str = ""  # where it came from: "source", "donor:<id>", "padding:<id>", "needle"...

    @property
    def is_visual(self) -> bool:
        return self.kind in VISUAL_KINDS


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    segments: tuple[Segment, ...]
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.segments)

    @property
    def text_tokens(self) -> int:
        return sum([s.tokens for s in self.segments if s.kind == TEXT])

    @property
    def image_tokens(self) -> int:
        return sum([s.tokens for s in self.segments if s.kind in VISUAL_KINDS])

    def render(self) -> tuple[str, list[bytes]]:
        """The text with one placeholder per image, and the images in placeholder order."""
        segments = self.segments
        parts = [IMAGE_PLACEHOLDER if s.kind in VISUAL_KINDS else s.text for s in segments]
        return "".join(parts), [s.image or b"" for s in segments if s.kind in VISUAL_KINDS]

    @property
    def text(self) -> str:
        return self.render()[0]

    def with_segments(self, segments: Iterable[Segment], **meta) -> "Document":
        return replace(self, segments=tuple(segments), meta={**self.meta, **meta})

    def token_offsets(self) -> list[int]:
        """Token offset at which each segment starts."""
        offsets, total = [], 0
        for s in self.segments:
            offsets.append(total)
            total += s.tokens
        return offsets


def text_pieces(text: str) -> list[tuple[str, bool]]:
    """The text's sentences, each with whether it closes a paragraph: what its segments hold."""
    pieces: list[tuple[str, bool]] = []
    for paragraph in split_paragraphs(text):
        sentences = split_sentences(paragraph)
        pieces.extend((sentence, i == len(sentences) - 1) for i, sentence in enumerate(sentences))
    return pieces


def piece_lengths(pieces: Sequence[tuple[str, bool]]) -> array:
    """``text_pieces(text)`` kept in four bytes a piece: twice each piece's length in characters,
    plus one where it closes a paragraph. The split is lossless (the pieces make up the text end to
    end), so ``pieces_again`` cuts the text by them with no sentence split."""
    return array("I", [2 * len(piece) + end for piece, end in pieces])


def pieces_again(text: str, lengths: Sequence[int]) -> list[tuple[str, bool]]:
    """The ``text_pieces`` that ``piece_lengths`` kept, cut from ``text`` again."""
    pieces, start = [], 0
    for length in lengths:
        end = start + (length >> 1)
        pieces.append((text[start:end], bool(length & 1)))
        start = end
    return pieces


def counted_segments(pieces: Sequence[tuple[str, bool]], counts: Iterable[int],
                     origin: str = "source") -> list[Segment]:
    """Text segments from ``text_pieces`` and their token counts (counted now or kept from before)."""
    return [Segment(kind=TEXT, tokens=int(n), text=p, paragraph_end=end, origin=origin)
            for (p, end), n in zip(pieces, counts, strict=True)]


def text_segments(text: str, counter: TokenCounter, origin: str = "source") -> list[Segment]:
    """Split text into sentence segments (paragraph ends marked), counting each piece once."""
    pieces = text_pieces(text)
    return counted_segments(pieces, counter.count_many([p for p, _ in pieces]), origin)


def text_document(doc_id: str, text: str, counter: TokenCounter, origin: str = "source", **meta) -> Document:
    return Document(id=doc_id, segments=tuple(text_segments(text, counter, origin)), meta=meta)


def image_data(image) -> bytes:
    """The bytes of a segment's image: bytes as they are; a stored image (``.data``: the page
    store's ``StoredPage``) read now, and held only as long as the caller holds them."""
    return image if isinstance(image, bytes) else image.data


def image_segment(
    image: bytes, height: int, width: int, kind: str = IMAGE, origin: str = "source", timestamp: float | None = None
) -> Segment:
    return Segment(
        kind=kind, tokens=image_tokens(height, width), image=image, height=height, width=width,
        origin=origin, timestamp=timestamp,
    )


def encode_image(pil_image, max_pixels: int, fmt: str = "JPEG", quality: int = 90) -> tuple[bytes, int, int]:
    """Resize a PIL image to the pixel budget (aspect kept) and encode it deterministically.
    Returns (bytes, height, width) of what is stored, which is what gets counted."""
    from PIL import Image

    from mmlongembed.core.tokens import fit_image_size

    height, width = fit_image_size(pil_image.height, pil_image.width, max_pixels)
    if (height, width) != (pil_image.height, pil_image.width):
        pil_image = pil_image.resize((width, height), Image.Resampling.BICUBIC)
    if fmt == "JPEG" and pil_image.mode not in ("RGB", "L"):
        pil_image = pil_image.convert("RGB")
    buffer = io.BytesIO()
    pil_image.save(buffer, format=fmt, quality=quality, optimize=False)
    return buffer.getvalue(), height, width


def count_rendered(text: str, image_sizes: Sequence[tuple[int, int]], counter: TokenCounter) -> tuple[int, int]:
    """Recount a rendered candidate from scratch: (text tokens, image tokens).

    Text between placeholders is counted as whole runs (not per sentence), so this is the
    independent check of what a builder summed incrementally."""
    (counted,) = count_rendered_many([text], [image_sizes], counter)
    if isinstance(counted, ValueError):
        raise counted
    return counted


def count_rendered_many(texts: Sequence[str], image_sizes: Sequence[Sequence[tuple[int, int]] | ValueError],
                        counter: TokenCounter, num_threads: int = 1) -> list[tuple[int, int] | ValueError]:
    """``count_rendered`` of several candidates, their text runs counted in one batch on
    ``num_threads`` threads. A candidate whose placeholders do not match its images (or whose
    sizes are a ValueError already) gives the ValueError in place of its counts."""
    out: list = []
    runs: list[str] = []
    for text, sizes in zip(texts, image_sizes):
        if isinstance(sizes, ValueError):
            out.append(sizes)
            continue
        pieces = text.split(IMAGE_PLACEHOLDER)
        if len(pieces) - 1 != len(sizes):
            out.append(ValueError(f"{len(pieces) - 1} image placeholders but {len(sizes)} images"))
            continue
        first = len(runs)
        runs.extend(r for r in pieces if r)
        out.append((first, len(runs), sum(image_tokens(h, w) for h, w in sizes)))
    counts = counter.count_many(runs, num_threads=num_threads)
    return [item if isinstance(item, ValueError) else (sum(counts[item[0]:item[1]]), item[2]) for item in out]
