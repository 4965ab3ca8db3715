"""Interleaved evidence (text quotes and image quotes) in unit documents: pure operations.

A quote is a ``Unit`` (see ``ops.evidence``): a text quote is its text as one segment, an image
quote is one image segment; both end with a blank-line separator segment. Gold quotes carry
``origin="evidence:<k>"``. Operations:

- ``chunk_sentences``: consecutive sentences grouped into chunks of about a target length (the
  text quotes of a page without layout boxes);
- ``closest_aspect``: the donor image whose aspect ratio is closest to a removed image's (a refill
  resized to the removed image's exact size then costs exactly its tokens);
- ``replace_image_evidence`` / ``replace_text_evidence``: a copy of the units with one gold quote
  swapped for a refill, with provenance;
- ``evidence_positions``: where every gold quote sits in the finished document: a character range
  (text) or an image slot (image), its token offset and its relative depth.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from mmlongembed.digests import short_sha256
from mmlongembed.documents import IMAGE, TEXT, Document, Segment, count_rendered
from mmlongembed.errors import FitError
from mmlongembed.ops.evidence import EVIDENCE_ORIGIN, Unit, find_evidence
from mmlongembed.tokens import TokenCounter


def chunk_sentences(sentences: Sequence[str], counts: Sequence[int], target: int) -> list[tuple[int, int]]:
    """Index ranges ``[a, b)`` of consecutive sentences, each range closing once its tokens reach
    ``target`` (the last one may be shorter)."""
    chunks, start, total = [], 0, 0
    for i, n in enumerate(counts):
        total += n
        if total >= target:
            chunks.append((start, i + 1))
            start, total = i + 1, 0
    if start < len(sentences):
        chunks.append((start, len(sentences)))
    return chunks


@dataclass(frozen=True)
class Donor:
    """An image that may stand in for a removed image quote."""

    id: str
    height: int
    width: int
    data: bytes


def closest_aspect(donors: Sequence[Donor], height: int, width: int, rng: np.random.Generator) -> Donor:
    """The donor with the aspect ratio closest to ``width / height`` (log scale); ties by a draw."""
    if not donors:
        raise FitError("no_image_donor", "no image of another document to refill a removed image")
    goal = np.log(width / height)
    misses = [round(abs(np.log(d.width / d.height) - goal), 6) for d in donors]
    best = min(misses)
    tied = [d for d, m in zip(donors, misses) if m == best]
    return tied[int(rng.integers(len(tied)))]


def _swap(units: Sequence[Unit], u: int, s: int, new: Sequence[Segment]) -> list[Unit]:
    out = list(units)
    unit = out[u]
    out[u] = Unit(unit.id, unit.kind, (*unit.segments[:s], *new, *unit.segments[s + 1:]))
    return out


def replace_image_evidence(units: Sequence[Unit], k: int, refill: Segment, donor_id: str) -> tuple[list[Unit], dict]:
    """Gold image ``k`` replaced by ``refill`` (an image of exactly the same size)."""
    u, s = find_evidence(units, k)
    removed = units[u].segments[s]
    if removed.kind != IMAGE or (refill.height, refill.width) != (removed.height, removed.width):
        raise ValueError(f"evidence {k}: an image refill must have the removed image's size")
    return _swap(units, u, s, [refill]), {
        "index": k, "kind": "image", "sha256": short_sha256(removed.image or b""), "tokens": removed.tokens,
        "size": [removed.height, removed.width],
        "replacement": {"source": donor_id, "sha256": short_sha256(refill.image or b""), "tokens": refill.tokens}}


def replace_text_evidence(units: Sequence[Unit], k: int, run: Sequence[Segment], source_id: str,
                          sentences: tuple[int, int]) -> tuple[list[Unit], dict]:
    """Gold text ``k`` replaced by a run of whole sentences (already fitted to its edges)."""
    u, s = find_evidence(units, k)
    removed = units[u].segments[s]
    if removed.kind != TEXT:
        raise ValueError(f"evidence {k} is not a text quote")
    return _swap(units, u, s, run), {
        "index": k, "kind": "text", "sha256": short_sha256(removed.text.strip()), "tokens": removed.tokens,
        "replacement": {"source": source_id, "sentences": list(sentences), "tokens": sum(x.tokens for x in run)}}


def evidence_positions(document: Document, n_tokens: int, counter: TokenCounter) -> list[dict]:
    """Every gold quote left in the finished document, in evidence order: text quotes by
    character range, image quotes by image slot, each with its token offset (the recount of
    everything before it) and relative depth."""
    out = []
    chars, slot = 0, 0
    text_parts: list[str] = []
    sizes: list[tuple[int, int]] = []
    for segment in document.segments:
        if segment.origin.startswith(EVIDENCE_ORIGIN):
            k = int(segment.origin[len(EVIDENCE_ORIGIN):])
            text_tokens, image_tokens = count_rendered("".join(text_parts), sizes, counter)
            start = text_tokens + image_tokens
            entry = {"index": k, "kind": segment.kind, "token_start": start,
                     "relative_position": round(start / n_tokens, 4) if n_tokens else 0.0}
            if segment.is_visual:
                entry.update(image_slot=slot, sha256=short_sha256(segment.image or b""),
                             size=[segment.height, segment.width])
            else:
                entry.update(char_range=[chars, chars + len(segment.text)], sha256=short_sha256(segment.text.strip()))
            out.append(entry)
        if segment.is_visual:
            text_parts.append("<|image|>")
            sizes.append((segment.height, segment.width))
            chars += len("<|image|>")
            slot += 1
        else:
            text_parts.append(segment.text)
            chars += len(segment.text)
    return sorted(out, key=lambda e: e["index"])


def with_origin(segment: Segment, origin: str) -> Segment:
    return replace(segment, origin=origin)
