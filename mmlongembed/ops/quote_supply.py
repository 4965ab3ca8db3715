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
from typing import Callable, Mapping, Sequence

from mmlongembed.digests import short_sha256
from mmlongembed.documents import Document
from mmlongembed.ops.evidence import Unit, units_document
from mmlongembed.ops.quotes import (
    Block, Donor, Instance, Quote, block_units, content_keys, holds, padding_doc, refill_unit)
from mmlongembed.tokens import TokenCounter


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


class Supply:
    """Padding blocks (other documents' pages), refill text and image donors. ``answer_pattern``:
    the pattern of an answer that padding must not hold (None where the answer is no anchor)."""

    def __init__(self, blocks: list[Unit], doc_of_block: dict[str, str], refill: dict[str, list[Unit]],
                 donors: list[tuple[str, Donor]], answer_pattern: Callable[[str], re.Pattern | None]):
        self.blocks, self.doc_of_block, self.refill, self.donors = blocks, doc_of_block, refill, donors
        self.answer_pattern = answer_pattern
        self._memo: dict[str, list[Unit]] = {}
        # what the gold checks look for in each padding block and each donor, worked out once
        self._block_keys = {unit.id: content_keys(units_document(unit.id, [unit])) for unit in blocks}
        self._donor_digests = [short_sha256(donor.data) for _, donor in donors]

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

    def padding_for(self, instance: Instance) -> list[Unit]:
        """Blocks of other documents that hold none of the instance's gold quotes or its answer."""
        if instance.id not in self._memo:
            pattern, gold = self.answer_pattern(instance.answer), instance.gold_quotes()
            out = []
            for unit in self.blocks:
                if self.doc_of_block[unit.id] == instance.doc:
                    continue
                text, images = self._block_keys[unit.id]
                if any(holds(text, images, q) for q in gold) or (pattern is not None and pattern.search(text)):
                    continue
                out.append(unit)
            self._memo[instance.id] = out
        return self._memo[instance.id]

    def refill_elsewhere(self, instance: Instance) -> list[Unit]:
        return [u for doc, units in sorted(self.refill.items()) if doc != instance.doc for u in units]

    def donors_for(self, instance: Instance, used_docs: set) -> list[Donor]:
        """Images of other documents, those whose pages the positive does not already hold first."""
        gold = {q.image.sha256[:16] for q in instance.gold_quotes() if q.kind == "image"}
        usable = [(doc, d) for (doc, d), digest in zip(self.donors, self._donor_digests)
                  if doc != instance.doc and digest not in gold]
        fresh = [d for doc, d in usable if doc not in used_docs]
        return fresh or [d for _, d in usable]
