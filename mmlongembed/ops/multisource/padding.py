"""A multi-hop question's documents: its own paragraphs as units, each evidence sentence one
marked segment (``context_units``), and what may pad them: whole padding articles and whole
paragraphs of other questions, none of which holds the question's answer or evidence
(``PaddingSupply``).

The question is whatever has the fields of ``Question`` (``mmlongembed.readers.hotpotqa.Instance``
has them).
"""

from __future__ import annotations

import re
from typing import Iterator, Protocol

from mmlongembed.core.documents import TEXT, Segment
from mmlongembed.ops.multisource.answers import answer_pattern as whole_word_answer
from mmlongembed.ops.multisource.evidence import EVIDENCE_ORIGIN, LineIndex, Unit
from mmlongembed.core.tokens import TokenCounter

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


def _shaped_paragraphs(instance: Question) -> Iterator[tuple[str, list[tuple[int, str]]]]:
    """Each paragraph's title and its non-empty sentences (index, text) as the document holds
    them: the first without leading space, the others after one space, the last ending the
    paragraph with a blank line."""
    for title, sentences in instance.context:
        kept = [(i, s) for i, s in enumerate(sentences) if s.strip()]
        texts = []
        for position, (i, sentence) in enumerate(kept):
            text = sentence.lstrip() if position == 0 else " " + sentence.lstrip()
            texts.append((i, text.rstrip() + "\n\n" if position == len(kept) - 1 else text))
        if texts:
            yield title, texts


def context_units(instance: Question, counter: TokenCounter, counts: dict[str, int]) -> list[Unit]:
    """The instance's paragraphs as units: a title line, then one segment per sentence (so each
    supporting fact is exactly one segment, marked ``evidence:<k>`` in document order)."""
    evidence_index = {fact: k for k, fact in enumerate(instance.supporting)}
    units = []
    for title, texts in _shaped_paragraphs(instance):
        segments = [Segment(kind=TEXT, tokens=counts[title + "\n"], text=title + "\n", paragraph_end=True,
                            origin="source")]
        for position, (i, text) in enumerate(texts):
            k = evidence_index.get((title, i))
            origin = f"{EVIDENCE_ORIGIN}{k}" if k is not None else "source"
            segments.append(Segment(kind=TEXT, tokens=counts[text], text=text,
                                    paragraph_end=position == len(texts) - 1, origin=origin))
        units.append(Unit(id=f"context:{title}", kind="context", segments=tuple(segments)))
    return units


def context_pieces(instance: Question) -> list[str]:
    """Every text piece ``context_units`` counts (to count them all in one batch)."""
    return [piece for title, texts in _shaped_paragraphs(instance) for piece in (title + "\n", *(t for _, t in texts))]


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

    def usable(self, instance: Question, exclude_titles: set[str] = frozenset()) -> tuple[list[Unit], list[Unit]]:
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
        if not exclude_titles:
            return articles, paragraphs
        return list(articles), [u for u in paragraphs if u.id[len("paragraph:"):] not in exclude_titles]
