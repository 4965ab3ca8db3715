"""A document of whole units, measured: its exact token length, and where its evidence and its
padding lie (the provenance a candidate records and validation recounts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

from mmlongembed.core.digests import short_sha256
from mmlongembed.core.documents import Document
from mmlongembed.ops.multisource.evidence import EVIDENCE_ORIGIN, Unit, unit_spans
from mmlongembed.ops.length import segment_token_offsets
from mmlongembed.core.pools import LengthBand, hard_negative_tolerance
from mmlongembed.core.tokens import TokenCounter, default_counter
from mmlongembed.ops.wordstats import WordStats

# Room left for the few tokens a final recount can differ from the sum of unit counts.
RECOUNT_MARGIN = 4


def positive_window(band: LengthBand) -> tuple[int, int]:
    """Where a positive's length must lie so that every negative can match it within the
    hard-negative tolerance and stay in the band (the recount margin kept free at the top)."""
    tolerance = hard_negative_tolerance(band.hi)
    return band.lo + tolerance, band.hi - tolerance - RECOUNT_MARGIN


@dataclass
class Built:
    units: list[Unit]
    document: Document
    n_tokens: int
    # the token offsets of its evidence segments' edges (segment index -> offset), if measured
    offsets: dict[int, int] | None = None

    @cached_property
    def evidence(self) -> list[dict]:
        """Where its evidence lies (``evidence_provenance``), worked out once per document."""
        return evidence_provenance(self.document, self.n_tokens, self.offsets)

    @classmethod
    def measured(cls, units: list[Unit], document: Document, counter: TokenCounter) -> "Built":
        """The document with its exact length and its evidence offsets, from one pass over its
        segments' counts (``segment_token_offsets``)."""
        edges = [j for i, x in enumerate(document.segments) if x.origin.startswith(EVIDENCE_ORIGIN) for j in (i, i + 1)]
        offsets = segment_token_offsets(document, counter, edges)
        return cls(units, document, offsets[len(document.segments)], offsets)

    @cached_property
    def padding(self) -> list[dict]:
        return padding_provenance(self.units)

    @cached_property
    def word_stats(self) -> WordStats:
        """Its words' counts (``mmlongembed.ops.wordstats``), what a refill is matched against."""
        return WordStats.of(self.document.text)


def evidence_provenance(document: Document, n_tokens: int, offsets: dict[int, int] | None = None) -> list[dict]:
    """Each remaining evidence segment: its character and token range in the final text, its
    relative depth, and a hash of its text. Token positions are what counting the final text
    up to each boundary gives (``token_offsets_at``, which validation recounts), worked out from
    the segments' counts (``segment_token_offsets``: exact also where two pieces fuse)."""
    segments = document.segments
    marked = sorted((int(x.origin[len(EVIDENCE_ORIGIN):]), i) for i, x in enumerate(segments)
                    if x.origin.startswith(EVIDENCE_ORIGIN))
    if offsets is None:
        offsets = segment_token_offsets(document, default_counter(), [j for _, i in marked for j in (i, i + 1)])
    chars = [0, *accumulate(len(x.text) for x in segments)]
    out = []
    for k, i in marked:
        start, end = offsets[i], offsets[i + 1]
        out.append({"index": k, "char_range": [chars[i], chars[i + 1]], "token_range": [start, end],
                    "relative_position": round(start / n_tokens, 4), "sha256": short_sha256(segments[i].text.strip())})
    return out


def padding_provenance(units: list[Unit]) -> list[dict]:
    """Every padding unit (and every replacement run) with its character range."""
    out = []
    for unit, span in zip(units, unit_spans(units)):
        if unit.kind != "context":
            out.append({"id": unit.id, "kind": unit.kind, "char_range": [span.char_start, span.char_end]})
            continue
        chars = span.char_start
        run_start, run_source = None, None
        for segment in (*unit.segments, None):
            source = segment.origin if segment is not None and segment.origin.startswith("replacement:") else None
            if source != run_source and run_source is not None:
                out.append({"id": run_source.split(":", 1)[1], "kind": "replacement", "char_range": [run_start, chars]})
            if source is not None and source != run_source:
                run_start = chars
            run_source = source
            if segment is not None:
                chars += len(segment.text)
    return out
