"""Keeping a pool free of second documents that hold a query's evidence (beside
``mmlongembed.ops.multisource.evidence``, whose units it reads by id: ``context:<title>`` for a question's own
paragraph, ``paragraph:<title>`` for another question's paragraph used as padding)."""

from __future__ import annotations

from typing import Iterable

from mmlongembed.ops.multisource.evidence import Unit
from mmlongembed.ops.multisource.padding import Question


class PoolEvidenceGuard:
    """Keeps a pool free of second documents that hold a query's evidence. Every query ranks the
    whole pool, so no candidate but a query's positive may carry that query's gold paragraphs,
    whether as its own context or as padding (whole HotpotQA paragraphs of other questions)."""

    def __init__(self):
        self.titles_in_pool: set[str] = set()  # every paragraph title any candidate holds
        self.gold_in_pool: set[str] = set()  # the gold paragraph titles of the pool's queries

    @staticmethod
    def titles(units: Iterable[Unit]) -> set[str]:
        return {u.id.split(":", 1)[1] for u in units if u.id.startswith(("context:", "paragraph:"))}

    def admit(self, instance: Question, candidates: list[Iterable[Unit]]) -> bool:
        """Take a query with its candidates (positive first) if no earlier candidate holds its
        gold paragraphs, none of its candidates holds an earlier query's, and its negatives hold
        its gold only as their own context (a hard variant is the positive minus one sentence)."""
        gold = {title for title, _ in instance.supporting}
        held = [self.titles(units) for units in candidates]
        if gold & self.titles_in_pool or set().union(*held) & self.gold_in_pool:
            return False
        own_context = {t for t, _ in instance.context}
        padding_of_negatives = set().union(*held[1:]) - own_context if len(held) > 1 else set()
        if gold & padding_of_negatives:
            return False
        self.titles_in_pool |= set().union(*held)
        self.gold_in_pool |= gold
        return True
