"""Interleaved evidence (text quotes and image quotes) in unit documents: pure operations.

The records a quote source is read into: a ``Quote`` (a text or an image, on a page, in reading
order), an ``Instance`` (a question, its context of quotes and which of them are gold) and a
``Block`` (one page's quotes, padding for other documents' questions).

A quote is a ``Unit`` (see ``ops.evidence``): a text quote is its text as one segment, an image
quote is one image segment; both end with a blank-line separator segment. Gold quotes carry
``origin="evidence:<k>"``. Operations:

- ``quote_unit`` / ``context_units`` / ``block_units`` / ``refill_unit``: quotes, an instance's
  context, a padding page and refill text as units;
- ``content_keys`` / ``holds``: what a candidate holds (text, image hashes) and whether it holds a
  quote;
- ``chunk_sentences``: consecutive sentences grouped into chunks of about a target length (the
  text quotes of a page without layout boxes);
- ``replace_image_evidence`` / ``replace_text_evidence``: a copy of the units with one gold quote
  swapped for a refill, with provenance;
- ``sentence_refill``: whole sentences of a text quote's length, fitted to its edges, to stand where
  it was;
- ``context_text_places`` / ``refill_place``: the text quotes of a question's own context that are
  no evidence, and a copy of the units with one of them refilled;
- ``padding_text_places`` / ``refill_padding_quotes``: the text quotes of the padding (other
  documents' pages), and a copy of the units with some of them refilled;
- ``evidence_positions``: where every gold quote sits in the finished document: a character range
  (text) or an image slot (image), its token offset and its relative depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Protocol, Sequence

import numpy as np

from mmlongembed.core.digests import short_sha256
from mmlongembed.core.documents import IMAGE, TEXT, Document, Segment, count_rendered, image_segment, text_segments
from mmlongembed.core.errors import FitError
from mmlongembed.ops.length import edge_whitespace, fit_block_edges
from mmlongembed.ops.multisource.evidence import EVIDENCE_ORIGIN, Unit, find_evidence, find_sentence_run
from mmlongembed.core.tokens import TokenCounter

SEPARATOR = "\n\n"


class EncodedImage(Protocol):
    """An image quote's picture as stored (``media.pdf.StoredImage``): encoded bytes and the size
    they are counted at."""

    data: bytes
    height: int
    width: int

    @property
    def tokens(self) -> int: ...

    @property
    def sha256(self) -> str: ...


@dataclass(frozen=True)
class Quote:
    id: str  # unique within the document
    kind: str  # "text" or "image"
    page: int
    order: float  # reading order within the page
    text: str = ""
    image: EncodedImage | None = None

    @property
    def key(self) -> str:
        """Content key: the same text or the same image bytes is the same quote."""
        if self.kind == "text":
            return "t:" + short_sha256(self.text)
        return "i:" + (self.image.sha256[:16] if self.image else "")


@dataclass(frozen=True)
class Instance:
    id: str
    doc: str
    question: str
    answer: str
    quotes: tuple[Quote, ...]  # the instance's context, in reading order
    gold: tuple[str, ...]  # quote ids of the evidence, in context order (evidence index = position)
    origin: str

    def gold_quotes(self) -> list[Quote]:
        by_id = {q.id: q for q in self.quotes}
        return [by_id[g] for g in self.gold]


@dataclass(frozen=True)
class Block:
    """A padding unit: the quotes of one page of one document."""

    doc: str
    page: int
    quotes: tuple[Quote, ...]


def _separator(counter: TokenCounter) -> Segment:
    return Segment(kind=TEXT, tokens=counter.count(SEPARATOR), text=SEPARATOR, paragraph_end=True, origin="separator")


def quote_unit(quote: Quote, doc: str, origin: str, counter: TokenCounter, kind: str = "context") -> Unit:
    """A quote as a unit: its text and a blank line as one segment (counted together: a full stop
    and the newlines after it are one token), or its image then a blank line."""
    if quote.kind == "text":
        text = quote.text + SEPARATOR
        segments = (Segment(kind=TEXT, tokens=counter.count(text), text=text, paragraph_end=True, origin=origin),)
    else:
        segments = (image_segment(quote.image.data, quote.image.height, quote.image.width, origin=origin),
                    _separator(counter))
    return Unit(id=f"{kind}:{doc}:{quote.id}", kind=kind, segments=segments)


def context_units(instance: Instance, counter: TokenCounter) -> list[Unit]:
    gold = {g: k for k, g in enumerate(instance.gold)}
    return [quote_unit(q, instance.doc, f"{EVIDENCE_ORIGIN}{gold[q.id]}" if q.id in gold else "source", counter)
            for q in instance.quotes]


def block_units(block: Block, counter: TokenCounter, whole: bool) -> list[Unit]:
    """Padding from one page of another document: the page's quotes as one unit (a block that
    reads like a page), or each quote as a unit of its own (small pieces that let a length land
    in its window). A page is used one way or the other, never both."""
    origin = f"padding:{block.doc}:p{block.page}"
    units = [quote_unit(q, block.doc, origin, counter) for q in block.quotes]
    if whole:
        return [Unit(id=f"block:p{block.page}:{block.doc}", kind="block",
                     segments=tuple(s for u in units for s in u.segments))]
    return [Unit(id=f"piece:p{block.page}.{q.id}:{block.doc}", kind="piece", segments=u.segments)
            for q, u in zip(block.quotes, units)]


def padding_doc(unit: Unit) -> str:
    return unit.id.split(":", 2)[2]


def refill_unit(doc: str, rid: str, text: str, counter: TokenCounter) -> Unit:
    return Unit(id=f"refill:{rid}", kind="refill", segments=tuple(text_segments(text, counter, origin=f"refill:{doc}")))


def content_keys(document: Document) -> tuple[str, set[str]]:
    """(text, image hashes) of a candidate: what the gold checks look for."""
    text, images = document.render()
    return text, {short_sha256(b) for b in images}


def holds(text: str, images: set[str], quote: Quote) -> bool:
    return quote.text in text if quote.kind == "text" else quote.image.sha256[:16] in images


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


def _text_refill(removed: Segment, run: Sequence[Segment], source_id: str, sentences: tuple[int, int]) -> dict:
    """The provenance of a text quote swapped for a run of whole sentences (a gold quote's, a
    context quote's or a padding quote's: the caller names which first)."""
    return {"kind": "text", "sha256": short_sha256(removed.text.strip()), "tokens": removed.tokens,
            "replacement": {"source": source_id, "sentences": list(sentences), "tokens": sum(x.tokens for x in run)}}


def replace_text_evidence(units: Sequence[Unit], k: int, run: Sequence[Segment], source_id: str,
                          sentences: tuple[int, int]) -> tuple[list[Unit], dict]:
    """Gold text ``k`` replaced by a run of whole sentences (already fitted to its edges)."""
    u, s = find_evidence(units, k)
    removed = units[u].segments[s]
    if removed.kind != TEXT:
        raise ValueError(f"evidence {k} is not a text quote")
    return _swap(units, u, s, run), {"index": k, **_text_refill(removed, run, source_id, sentences)}


def sentence_refill(segment: Segment, sources: Sequence[Callable[[], list[Unit]]], slack: int,
                    rng: np.random.Generator, counter: TokenCounter,
                    accept: Callable[[list[Segment]], bool] | None = None) -> tuple[Unit, int, int, list[Segment]] | None:
    """(source unit, first sentence, end, the run fitted to the quote's edge whitespace): whole
    sentences within ``slack`` tokens of the text quote ``segment``'s length, the closest, from the
    first of ``sources`` (in order of preference) that has a run ``accept`` takes (given the fitted
    run); None when none has."""
    lead, tail = edge_whitespace(segment.text)

    def fitted(source: Unit, a: int, b: int) -> list[Segment]:
        return fit_block_edges(source.segments[a:b], lead, tail, counter, f"replacement:{source.id}")

    window = (max(1, segment.tokens - slack), segment.tokens + slack)
    takes = None if accept is None else lambda source, a, b: accept(fitted(source, a, b))
    for candidates in sources:
        try:
            source, a, b = find_sentence_run(candidates(), *window, segment.tokens, rng, takes)
        except FitError:
            continue
        return source, a, b, fitted(source, a, b)
    return None


def context_text_places(units: Sequence[Unit]) -> list[tuple[str, int]]:
    """(unit id, segment index) of every text quote of the question's own context that is no
    evidence (nor refilled already): one text segment of a context unit, of origin "source"."""
    return [(unit.id, 0) for unit in units
            if unit.kind == "context" and len(unit.segments) == 1 and not unit.segments[0].is_visual
            and unit.segments[0].origin == "source" and unit.segments[0].text.strip()]


def refill_place(units: Sequence[Unit], unit_id: str, run: Sequence[Segment], source_id: str,
                 sentences: tuple[int, int]) -> tuple[list[Unit], dict]:
    """The units with the quote ``unit_id`` (one text segment) swapped for ``run`` (already
    fitted to its edges), and the swap's provenance."""
    u = next(k for k, unit in enumerate(units) if unit.id == unit_id)
    return _swap(units, u, 0, run), {"quote": unit_id.split(":", 2)[2],
                                     **_text_refill(units[u].segments[0], run, source_id, sentences)}


# padding quotes tried for one refill, the nearest in length to a refilled gold quote first
PADDING_PLACES_TRIED = 8


def padding_text_places(units: Sequence[Unit]) -> list[tuple[str, int]]:
    """(unit id, segment index) of every text quote of another document's page that pads the
    question's context (not refilled already)."""
    return [(unit.id, k) for unit in units if unit.kind in ("block", "piece")
            for k, segment in enumerate(unit.segments)
            if not segment.is_visual and segment.origin.startswith("padding:") and segment.text.strip()]


def refill_padding_quotes(units: Sequence[Unit], count: int, aims: Sequence[int],
                          sources_of: Callable[[str], Sequence[Callable[[], list[Unit]]]], slack: int,
                          rng: np.random.Generator, counter: TokenCounter,
                          avoid: Collection[str] = ()) -> tuple[list[Unit], list[dict]] | None:
    """The units with ``count`` text quotes of their padding (other documents' pages) refilled as
    a gold text quote is (``sentence_refill``, from ``sources_of(padding unit id)``: the padding
    page's document's own text first, as a gold quote is refilled from its document's), and the
    refills' provenance; None when too few places take a refill. Each place is, among those
    ``avoid`` does not name (``"<unit id>#<segment>"``: refilled in another document of the group,
    which would otherwise come out the same), the nearest in tokens to one of ``aims`` (the lengths
    of the gold quotes refilled elsewhere, one drawn per refill; ties drawn).

    Why: a hard negative is its positive with one quote refilled at about its length, so its
    characters land a little above or below the positive's; a positive that nothing touched sits
    at its group's centre, and "the candidate nearest the others' median" finds it. A positive
    refilled the same way is one of its group's like the others. The padding, not the question's
    own context: another document's quote and its refill carry none of the question's words, so
    the positive keeps what the paper's Hard tier measures (it holds the question's words its
    evidence holds; each variant loses some with the evidence it lost), and a variant that lost
    only an image stays about level with it under BM25."""
    out, records = list(units), []
    for _ in range(count):
        aim = int(aims[int(rng.integers(len(aims)))]) if aims else 0
        index_of = {unit.id: u for u, unit in enumerate(out)}
        places = [(unit_id, k) for unit_id, k in padding_text_places(out) if f"{unit_id}#{k}" not in avoid]
        segments = [out[index_of[unit_id]].segments[k] for unit_id, k in places]
        ties = rng.random(len(places))
        ordered = sorted(range(len(places)), key=lambda i: (abs(segments[i].tokens - aim), ties[i]))
        for i in ordered[:PADDING_PLACES_TRIED]:
            found = sentence_refill(segments[i], sources_of(places[i][0]), slack, rng, counter)
            if found is not None:
                source, a, b, run = found
                unit_id, k = places[i]
                out = _swap(out, index_of[unit_id], k, run)
                records.append({"padding": f"{unit_id}#{k}", **_text_refill(segments[i], run, source.id, (a, b))})
                break
        else:
            return None
    return out, records


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
