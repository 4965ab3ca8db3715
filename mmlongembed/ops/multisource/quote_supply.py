"""What a quote document is grown and refilled from, and the guard that keeps gold quotes apart:
pure operations over the records of ``ops.quotes``.

- ``Supply``: padding blocks (other documents' pages, whole or quote by quote), refill text and
  image donors, each filtered for the instance at hand;
- ``GoldGuard``: every query ranks the whole pool, so no candidate outside a query's group may
  hold any of its gold quotes;
- ``padding_pages``: which pages padded a document, for the candidate's provenance (the document
  as built is ``ops.measured.Built``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from mmlongembed.core.digests import short_sha256
from mmlongembed.core.documents import Document
from mmlongembed.ops.multisource.evidence import Unit, units_document
from mmlongembed.ops.multisource.quotes import (
    Block, Donor, Instance, Quote, block_units, content_keys, holds, padding_doc, refill_unit)
from mmlongembed.core.tokens import TokenCounter


def padding_pages(units: list[Unit]) -> list[dict]:
    """Which pages padded a document (each block's or piece's id and its document), for the
    candidate's provenance."""
    return [{"id": u.id, "doc": padding_doc(u)} for u in units if u.kind in ("block", "piece")]


class GoldGuard:
    """Every query ranks the whole pool: no candidate outside a query's group may hold any of its
    gold quotes (easy negatives hold none of them either)."""

    def __init__(self):
        self.gold: list[Quote] = []
        self.contents: list[tuple[str, set[str]]] = []

    def unclaimed(self, gold: list[Quote]) -> bool:
        """No candidate already in the pool holds any of these gold quotes."""
        return not any(holds(t, i, q) for t, i in self.contents for q in gold)

    def clean(self, document: Document) -> bool:
        """The document holds no gold quote of a query already in the pool."""
        text, images = content_keys(document)
        return not any(holds(text, images, q) for q in self.gold)

    def admit(self, gold: list[Quote], documents: list[Document]) -> bool:
        if not self.unclaimed(gold) or not all(self.clean(d) for d in documents):
            return False
        self.gold += gold
        self.contents += [content_keys(d) for d in documents]
        return True


@dataclass(frozen=True)
class Padding:
    """Padding an instance may take, in a random order: whole pages (``blocks``) and single quotes
    (``pieces``); ``complete``: all the usable ones, not a sample of them."""

    blocks: list[Unit]
    pieces: list[Unit]
    complete: bool


class Supply:
    """Padding blocks (other documents' pages), refill text and image donors. ``answer_pattern``:
    the pattern of an answer that padding must not hold (None where the answer is no anchor)."""

    def __init__(self, blocks: list[Unit], doc_of_block: dict[str, str], refill: dict[str, list[Unit]],
                 donors: list[tuple[str, Donor]], answer_pattern: Callable[[str], re.Pattern | None]):
        self.blocks, self.doc_of_block, self.refill, self.donors = blocks, doc_of_block, refill, donors
        self.answer_pattern = answer_pattern
        self._by_kind = {kind: [u for u in blocks if u.kind == kind] for kind in ("block", "piece")}
        # what the gold checks look for in each padding block and each donor, worked out once
        self._block_keys = {unit.id: content_keys(units_document(unit.id, [unit])) for unit in blocks}
        # donors' documents and image digests as codes, so a choice among thousands is array work
        self._doc_code: dict[str, int] = {}
        self._digest_code: dict[str, int] = {}
        self._donor_docs = np.array([self._doc_code.setdefault(doc, len(self._doc_code)) for doc, _ in donors],
                                    dtype=np.int64)
        self._donor_digests = np.array([self._digest_code.setdefault(short_sha256(d.data), len(self._digest_code))
                                        for _, d in donors], dtype=np.int64)
        self._donor_aspects = np.array([np.log(d.width / d.height) for _, d in donors], dtype=np.float64)
        # refill text of every document, in document order (each instance takes the others')
        self._refill_in_order = [(doc, u) for doc, units in sorted(refill.items()) for u in units]

    @classmethod
    def of(cls, blocks: Sequence[Block], refill_text: Mapping[str, list[tuple[str, str]]], counter: TokenCounter,
           whole: Callable[[Block], bool], answer_pattern: Callable[[str], re.Pattern | None]) -> "Supply":
        """The supply of these padding pages and refill texts: each page whole or quote by quote as
        ``whole(block)`` says, each image of a padding page a donor."""
        units = [u for b in blocks for u in block_units(b, counter, whole=whole(b))]
        refill = {doc: [refill_unit(doc, rid, text, counter) for rid, text in items]
                  for doc, items in refill_text.items()}
        donors = [(b.doc, Donor(f"{b.doc}:{q.id}", q.image.height, q.image.width, q.image.data))
                  for b in blocks for q in b.quotes if q.kind == "image"]
        return cls(units, {u.id: padding_doc(u) for u in units}, refill, donors, answer_pattern)

    def padding_for(self, instance: Instance, rng: np.random.Generator, sample: int) -> Padding:
        """Padding for the instance: blocks of other documents that hold none of its gold quotes
        or its answer, drawn at random from up to ``sample`` of each kind (``Padding``). A full
        corpus has tens of thousands of pages and a document takes a few dozen: filtering them
        all for every instance made a build grow with the square of its sources."""
        drawn = [[units[int(i)] for i in rng.choice(len(units), size=min(sample, len(units)), replace=False)]
                 for units in (self._by_kind["block"], self._by_kind["piece"])]
        pattern, gold = self.answer_pattern(instance.answer), instance.gold_quotes()

        def usable(unit: Unit) -> bool:
            if self.doc_of_block[unit.id] == instance.doc:
                return False
            text, images = self._block_keys[unit.id]
            return not any(holds(text, images, q) for q in gold) and not (pattern is not None and pattern.search(text))

        return Padding([u for u in drawn[0] if usable(u)], [u for u in drawn[1] if usable(u)],
                       complete=all(len(d) == len(self._by_kind[k]) for d, k in zip(drawn, ("block", "piece"))))

    def refill_elsewhere(self, instance: Instance) -> list[Unit]:
        return [u for doc, u in self._refill_in_order if doc != instance.doc]

    def image_donor(self, instance: Instance, used_docs: set, height: int, width: int,
                    rng: np.random.Generator) -> Donor | None:
        """The image of another document whose aspect ratio is closest to ``width / height`` (log
        scale; ties by a draw), so a refill resized to the removed image's exact size costs exactly
        its tokens; never a copy of a gold image, and from a document whose pages the positive
        does not hold where there is one. None without any. (Arrays over every donor: a full
        corpus has thousands, and each hard negative with an image looks once.)"""
        gold = [self._digest_code.get(q.image.sha256[:16], -1) for q in instance.gold_quotes() if q.kind == "image"]
        usable = (self._donor_docs != self._doc_code.get(instance.doc, -1)) & ~np.isin(self._donor_digests, gold)
        fresh = usable & ~np.isin(self._donor_docs, [self._doc_code.get(doc, -1) for doc in used_docs])
        candidates = np.flatnonzero(fresh if fresh.any() else usable)
        if not len(candidates):
            return None
        misses = np.round(np.abs(self._donor_aspects[candidates] - np.log(width / height)), 6)
        tied = candidates[misses == misses.min()]
        return self.donors[int(tied[int(rng.integers(len(tied)))])][1]
