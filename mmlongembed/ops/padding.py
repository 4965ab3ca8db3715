"""A multi-hop question's documents: its own paragraphs as units, each evidence sentence one
marked segment (``context_units``), and what may pad them: whole padding articles and whole
paragraphs of other questions, none of which holds the question's answer or evidence
(``PaddingSupply``).

The question is whatever has the fields of ``Question`` (``mmlongembed.readers.hotpotqa.Instance``
has them).
"""

from __future__ import annotations

import re
from typing import Protocol

from mmlongembed.documents import TEXT, Segment
from mmlongembed.ops.answers import answer_pattern as whole_word_answer
from mmlongembed.ops.evidence import EVIDENCE_ORIGIN, LineIndex, Unit
from mmlongembed.tokens import TokenCounter

YES_NO = frozenset({"yes", "no"})


class Question(Protocol):
    """What the operations on a multi-hop question's documents read of it."""

    id: str
    answer: str
    context: tuple[tuple[str, tuple[str, ...]], ...]  # (title, sentences) per paragraph
    supporting: tuple[tuple[str, int], ...]  # (title, sentence index) per supporting fact, in document order

    def evidence_texts(self) -> list[str]:
        """Its supporting-fact sentences, stripped, in document order."""


def answer_pattern(answer: str) -> re.Pattern | None:
    """Whole-word pattern of the answer; None for yes/no answers, which every article contains
    as words and which are not a retrievable anchor."""
    return whole_word_answer(answer, not_anchors=YES_NO)


def context_units(instance: Question, counter: TokenCounter, counts: dict[str, int]) -> list[Unit]:
    """The instance's paragraphs as units: a title line, then one segment per sentence (so each
    supporting fact is exactly one segment, marked ``evidence:<k>`` in document order)."""
    evidence_index = {fact: k for k, fact in enumerate(instance.supporting)}
    units = []
    for title, sentences in instance.context:
        kept = [(i, s) for i, s in enumerate(sentences) if s.strip()]
        if not kept:
            continue
        segments = [Segment(kind=TEXT, tokens=counts[title + "\n"], text=title + "\n", paragraph_end=True, origin="source")]
        for position, (i, sentence) in enumerate(kept):
            text = sentence if position == 0 else (" " + sentence.lstrip())
            text = text.lstrip() if position == 0 else text
            if position == len(kept) - 1:
                text = text.rstrip() + "\n\n"
            k = evidence_index.get((title, i))
            origin = f"{EVIDENCE_ORIGIN}{k}" if k is not None else "source"
            segments.append(Segment(kind=TEXT, tokens=counts[text], text=text,
                                    paragraph_end=position == len(kept) - 1, origin=origin))
        units.append(Unit(id=f"context:{title}", kind="context", segments=tuple(segments)))
    return units


def context_pieces(instance: Question) -> list[str]:
    """Every text piece ``context_units`` counts (to count them all in one batch)."""
    pieces = []
    for title, sentences in instance.context:
        kept = [s for s in sentences if s.strip()]
        if not kept:
            continue
        pieces.append(title + "\n")
        for position, sentence in enumerate(kept):
            text = sentence.lstrip() if position == 0 else " " + sentence.lstrip()
            pieces.append(text.rstrip() + "\n\n" if position == len(kept) - 1 else text)
    return pieces


class PaddingSupply:
    """The padding corpus: whole articles and whole HotpotQA paragraphs (by title). For each
    query it lists the units it may use: none holds its answer or its evidence, and no
    paragraph has one of its own titles."""

    def __init__(self, articles: list[Unit], paragraphs: list[Unit]):
        self.articles, self.paragraphs = articles, paragraphs
        self._text = {u.id: u.text for u in (*articles, *paragraphs)}
        self._lowered = {k: v.lower() for k, v in self._text.items()}
        self._lines = LineIndex(self._text)  # which units hold an evidence sentence
        self._memo: dict[str, tuple[list[Unit], list[Unit]]] = {}

    def _clean(self, unit: Unit, answer: re.Pattern | None, answer_lower: str, with_evidence: set[str]) -> bool:
        # the plain substring test is a fast filter; the whole-word pattern decides
        if answer is not None and answer_lower in self._lowered[unit.id] and answer.search(self._text[unit.id]):
            return False
        return unit.id not in with_evidence

    def usable(self, instance: Question, exclude_titles: set[str] = frozenset(),
               exclude_ids: set[str] = frozenset()) -> tuple[list[Unit], list[Unit]]:
        if instance.id not in self._memo:
            answer = answer_pattern(instance.answer)
            with_evidence = set().union(*(self._lines.holding(e) for e in instance.evidence_texts()))
            own = {t for t, _ in instance.context}
            answer_lower = instance.answer.strip().lower()
            self._memo[instance.id] = (
                [u for u in self.articles if self._clean(u, answer, answer_lower, with_evidence)],
                [u for u in self.paragraphs
                 if u.id[len("paragraph:"):] not in own and self._clean(u, answer, answer_lower, with_evidence)],
            )
        articles, paragraphs = self._memo[instance.id]
        if not exclude_titles and not exclude_ids:
            return articles, paragraphs
        return ([u for u in articles if u.id not in exclude_ids],
                [u for u in paragraphs if u.id not in exclude_ids and u.id[len("paragraph:"):] not in exclude_titles])
