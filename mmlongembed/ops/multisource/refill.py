"""Refilling a removed sentence in place: a run of whole sentences on the receiving paragraph's
topic, of exactly the removed sentence's token length wherever one exists, that gives back
neither the answer, nor any evidence sentence, nor a name or number of the removed fact.

- ``RefillSource``: where refills come from (distractor paragraphs and padding-article
  paragraphs, ranked by BM25 against the receiving paragraph), with what one build learns about
  each place remembered;
- ``RefillGuard`` / ``fact_anchors``: what a refill must not hold;
- ``VariantSearch``: the refills of one document variant, place by place (``find_refill``), each
  chosen among the first exact runs to leave the characters and word statistics unmoved
  (``choose_balanced``);
- ``positive_places``: the positive's own sentences to refill, mirroring the evidence sentences
  a variant removes, so that no statistic of the words tells which document lost one.

The question is an ``ops.padding.Question``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from mmlongembed.core.documents import Segment
from mmlongembed.core.errors import FitError
from mmlongembed.ops.multisource.evidence import EVIDENCE_ORIGIN, Refill, SentenceRuns, Unit, find_evidence, find_refill
from mmlongembed.ops.length import edge_whitespace, fit_block_edges
from mmlongembed.ops.lexical import choose_balanced
from mmlongembed.ops.multisource.padding import PaddingSupply, Question, answer_pattern
from mmlongembed.core.tokens import MemoCounter, TokenCounter, default_counter
from mmlongembed.ops.wordstats import FEATURES as WORD_FEATURES, WordStats, features_replacing

REFILL_CHOICES = 16  # exact-length refill runs compared for their characters and words (more: less topical refills)
# what a refill is chosen to leave unmoved (``choose_balanced``): the character count, then the
# word statistics of ``mmlongembed.ops.wordstats``
REFILL_STATISTICS = ("chars", *WORD_FEATURES)
POSITIVE_ALTERNATIVES = 8  # sentences tried in turn for each of the positive's refills (the first with an exact one)

_ANCHOR = re.compile(r"[A-Z][\w'’-]*\w|\d[\d,.]*\d|\d")


def fact_anchors(sentence: str, rest: str) -> set[str]:
    """What carries a sentence's fact: its names and numbers (capitalised words, digit runs) that
    occur nowhere else in ``rest`` (the rest of the instance's context). A refill that holds none
    of them cannot restate the removed fact."""
    lowered = rest.lower()
    return {a for a in _ANCHOR.findall(sentence)
            if not re.search(r"(?<!\w)" + re.escape(a.lower()) + r"(?!\w)", lowered)}


def mentions_pattern(words: Iterable[str]) -> re.Pattern | None:
    """A pattern for lower-cased text that finds any of the words, lower-cased, as a whole word
    (None for no words)."""
    words = sorted(words)
    if not words:
        return None
    return re.compile("|".join(r"(?<!\w)" + re.escape(w.lower()) + r"(?!\w)" for w in words))


class RefillGuard:
    """What a refill must not hold: the answer (whole word), any evidence sentence of the query,
    or a name or number of the removed fact (``fact_anchors``). ``allows(unit, text)`` judges the
    fitted text of one run of ``unit``. A run's text is the unit's text between two of its
    sentence boundaries (the edges' whitespace aside), so a unit whose whole text does not even
    hold these as plain substrings (case aside) passes every run unread: the refill search tries
    hundreds of runs, from a few dozen units, most of which hold none of them."""

    def __init__(self, answer: str, evidence: list[str], anchors: set[str]):
        self.pattern = answer_pattern(answer)
        # the answer anywhere, word boundaries aside (a superset of the pattern's matches)
        self.plain = re.compile(re.escape(answer.strip()), re.IGNORECASE) if self.pattern is not None else None
        self.evidence = evidence
        self.mentions = mentions_pattern(anchors)
        self.anchors = [a.lower() for a in anchors]
        self._clear: dict[str, bool] = {}

    def _unit_clear(self, unit: Unit) -> bool:
        if unit.id not in self._clear:
            text = unit.text
            lowered = text.lower() if self.anchors else ""
            # lower() maps character by character (a substring's lowering is a substring of the
            # lowering) except for the Greek final sigma, which depends on what follows
            self._clear[unit.id] = not (
                (self.plain is not None and self.plain.search(text)) or any(e in text for e in self.evidence)
                or (self.anchors and ("Σ" in text or any(a in lowered for a in self.anchors))))
        return self._clear[unit.id]

    def allows(self, unit: Unit, text: str) -> bool:
        if self._unit_clear(unit):
            return True
        return not ((self.pattern is not None and self.pattern.search(text)) or any(e in text for e in self.evidence)
                    or (self.mentions is not None and self.mentions.search(text.lower())))


def paragraph_pieces(unit: Unit) -> list[Unit]:
    """A padding article's paragraphs of two or more sentences, each as a unit of its own, named
    ``<article id>#<paragraph>``."""
    pieces, start, number = [], 0, 0
    segments = unit.segments
    for i, segment in enumerate(segments):
        if segment.paragraph_end or i == len(segments) - 1:
            if i + 1 - start > 1:
                pieces.append(Unit(f"{unit.id}#{number}", unit.kind, segments[start:i + 1]))
            start, number = i + 1, number + 1
    return pieces


def with_origin(segment: Segment, origin: str) -> Segment:
    return replace(segment, origin=origin)


class RefillSource:
    """Where the refill of a removed evidence sentence comes from: runs of whole sentences of
    HotpotQA distractor paragraphs (paragraphs that no question of the sources uses as evidence)
    and of padding-article paragraphs, ranked by BM25 against the paragraph that receives the
    refill (as it was), so that the refill is on that paragraph's topic. A unit already in the
    document is never a source (its sentence would appear twice), nor one that holds the answer or
    the evidence, nor one of the instance's own paragraphs (``PaddingSupply.usable``)."""

    def __init__(self, supply: PaddingSupply, gold_titles: set[str]):
        self.supply = supply
        self.pieces = [u for u in supply.paragraphs if u.id[len("paragraph:"):] not in gold_titles]
        self.whole = [u.id for u in self.pieces]  # per piece: the unit a document holds or not
        for article in supply.articles:
            pieces = paragraph_pieces(article)
            self.pieces += pieces
            self.whole += [article.id] * len(pieces)
        # each piece as a refill: its segments carry where they come from (fit_block_edges keeps it)
        self.pieces = [Unit(u.id, u.kind, tuple(with_origin(x, f"replacement:{u.id}") for x in u.segments))
                       for u in self.pieces]
        self.index = BM25Index.from_texts([u.text for u in self.pieces]) if self.pieces else None
        self._ranked: dict[str, list[int]] = {}
        self._usable: dict[str, set[str]] = {}
        self._runs: dict[str, SentenceRuns] = {}
        self.edge_counter = MemoCounter(default_counter())  # the recounted edges of fitted runs
        # What refilling one place learns holds for the same place at every length (a positive
        # grows by padding only): the removed fact's anchors, and each run fitted there.
        self._anchors: dict[tuple[str, str], set[str]] = {}
        self._guards: dict[tuple, RefillGuard] = {}
        self._fitted: dict[tuple, dict] = {}
        self._runs_fitted: dict[tuple, list[Segment]] = {}

    def runs(self, unit: Unit) -> SentenceRuns:
        """The unit's sentence runs, indexed once per build (``find_refill``)."""
        if unit.id not in self._runs:
            self._runs[unit.id] = SentenceRuns(unit)
        return self._runs[unit.id]

    def anchors(self, sentence: str, context: str) -> set[str]:
        """``fact_anchors`` of a removed sentence in its instance's context, remembered."""
        if (sentence, context) not in self._anchors:
            self._anchors[(sentence, context)] = fact_anchors(sentence, context.replace(sentence, " "))
        return self._anchors[(sentence, context)]

    def guard(self, instance: Question, evidence: list[str], anchors: set[str]) -> RefillGuard:
        """The ``RefillGuard`` of a variant (the same at every length), made once."""
        key = (instance.id, frozenset(anchors))
        if key not in self._guards:
            self._guards[key] = RefillGuard(instance.answer, evidence, anchors)
        return self._guards[key]

    def fitted_run(self, source: Unit, a: int, b: int, lead: str, tail: str) -> list[Segment]:
        """``fit_block_edges`` of a run of ``source`` for a place with that edge whitespace
        (most places share a few kinds of edges), made once."""
        key = (source.id, a, b, lead, tail)
        if key not in self._runs_fitted:
            self._runs_fitted[key] = fit_block_edges(source.segments[a:b], lead, tail, self.edge_counter,
                                                     f"replacement:{source.id}")
        return self._runs_fitted[key]

    def fitted(self, place: tuple) -> dict:
        """The runs already fitted into one place (``place`` names everything a fit depends on
        but the run), by (unit id, start, end): what ``fit`` returned for each."""
        return self._fitted.setdefault(place, {})

    def ranked(self, query_text: str) -> list[int]:
        """Piece indices, the most similar to ``query_text`` first (ties: lower index)."""
        if query_text not in self._ranked:
            if self.index is None:
                self._ranked[query_text] = []
            else:
                scores = self.index.scores(bm25_tokenize(query_text))
                self._ranked[query_text] = np.argsort(-scores, kind="stable").tolist()  # ties: lower index
        return self._ranked[query_text]

    def candidates(self, instance: Question, query_text: str, exclude_ids: set[str]) -> Iterator[Unit]:
        """The usable pieces, the most topical first (lazily: a search reads only a few)."""
        if instance.id not in self._usable:
            articles, paragraphs = self.supply.usable(instance)
            self._usable[instance.id] = {u.id for u in (*articles, *paragraphs)}
        usable = self._usable[instance.id]
        return (self.pieces[i] for i in self.ranked(query_text)
                if self.whole[i] in usable and self.whole[i] not in exclude_ids)


def locate(units: list[Unit], place) -> tuple[int, int]:
    """(unit index, segment index) of a place to refill: evidence sentence ``k`` (an int), or a
    context paragraph's segment by (unit id, segment index), which growth never changes."""
    if isinstance(place, int):
        return find_evidence(units, place)
    unit_id, s = place
    return next(u for u, unit in enumerate(units) if unit.id == unit_id), s


class PlaceRefill(NamedTuple):
    """The refill found for one place, where it goes, and the receiving paragraph's words as they
    were (what the variant's word statistics lose when it goes in)."""

    refill: Refill
    unit_index: int
    segment_index: int
    removed_stats: WordStats
    exact: bool  # of exactly the removed sentence's token length


@dataclass
class VariantSearch:
    """What the refill search at every place of one document variant shares: the question, the
    removed fact's ``anchors`` (none for the positive's own refills: they hold no fact), the units
    a refill may not come from (``in_document``: the document's), the word features of the
    original document, each place's ``share`` of the variant's length offset and the ``slack``
    a refill's length may have where no run is exact; ``sides_rng(place)`` is the generator of the
    sides that place's refill is balanced to (``choose_balanced``)."""

    refills: RefillSource
    instance: Question
    anchors: set[str]
    counter: TokenCounter
    original: dict
    in_document: set[str]
    share: int
    slack: int
    sides_rng: Callable[[object], np.random.Generator]
    guard: RefillGuard = field(init=False)

    def __post_init__(self):
        self.guard = self.refills.guard(self.instance, self.instance.evidence_texts(), self.anchors)

    def refill_all(self, units: Sequence[Unit], choices: list[list], stats: WordStats) -> list[tuple] | None:
        """For each entry of ``choices`` (the places that may stand in for one another, in order),
        (place, refill): the first place with an exact refill, else the first with any, each
        refill going in before the next is looked for (and, with more than one, moving the word
        statistics the next is balanced against). None where an entry has no refill at all."""
        units = list(units)
        picks = []
        for alternatives in choices:
            searched = None
            for k in alternatives:  # the first place with an exact refill; else the first with any
                result = self.search(units, k, stats)
                if result is not None and (searched is None or result.exact):
                    searched = (k, result)
                    if result.exact:
                        break
            if searched is None:
                return None
            k, found = searched
            u, s = found.unit_index, found.segment_index
            unit = units[u]
            units[u] = Unit(unit.id, unit.kind, (*unit.segments[:s], *found.refill.segments, *unit.segments[s + 1:]))
            if len(choices) > 1:
                stats = stats.replacing(found.removed_stats, WordStats.of(units[u].text))
            picks.append((k, found.refill))
        return picks

    def search(self, units: list[Unit], k, stats: WordStats) -> PlaceRefill | None:
        """The refill of place ``k`` of ``units`` (``locate``), or None: among the most topical
        runs of exactly the removed sentence's length (``find_refill``), the one that leaves the
        document's character count and word statistics nearest the original's, each moved to a
        side drawn at random (``choose_balanced``): a refill longer in characters more often than
        shorter, or one that moves a word statistic one way more often than the other, would mark
        the documents that hold refills."""
        u, s = locate(units, k)
        unit = units[u]
        segment = unit.segments[s]
        before = "".join(x.text for x in unit.segments[:s])
        after = "".join(x.text for x in unit.segments[s + 1:])
        fit = self._fit(segment, before, after)
        window = (max(1, segment.tokens - self.slack), segment.tokens + self.slack)
        aim = min(max(segment.tokens + self.share, window[0]), window[1])
        # The receiving paragraph whole (the removed sentence too) says what it is about; the
        # guard keeps the removed fact out of the refill.
        candidates = self.refills.candidates(self.instance, before + segment.text + after, self.in_document)
        sides = self.sides_rng(k).choice([-1, 1], size=len(REFILL_STATISTICS))
        removed_stats = WordStats.of(unit.text)

        def choose(exact):
            rows = []
            for refill in exact:
                text = "".join(x.text for x in refill.segments)
                made = features_replacing(stats, removed_stats, WordStats.of(before + text + after))
                rows.append([len(text) - len(segment.text), *(made[f] - self.original[f] for f in WORD_FEATURES)])
            return choose_balanced(np.array(rows), sides)

        try:
            found = find_refill(candidates, segment.tokens, window, aim, fit, choose_among=REFILL_CHOICES,
                                choose=choose, runs=self.refills.runs)
        except FitError:
            return None
        return PlaceRefill(found, u, s, removed_stats, found.tokens == segment.tokens)

    def _fit(self, segment: Segment, before: str, after: str) -> Callable:
        """``fit(source, a, b)`` for ``find_refill``: the run ``source.segments[a:b]`` fitted in
        place of ``segment`` between ``before`` and ``after`` and its length as measured there, or
        None where the guard rejects it; remembered per place across lengths (``fitted``)."""
        counter = self.counter
        lead, tail = edge_whitespace(segment.text)
        paragraph_tokens = counter.count(before + segment.text + after)
        edges = ([before, after], [counter.count(before), counter.count(after)])
        fitted = self.refills.fitted((self.instance.id, frozenset(self.anchors), before, segment.text, after))

        def fit(source: Unit, a: int, b: int):
            if (source.id, a, b) not in fitted:
                fitted[(source.id, a, b)] = fit_in_place(source, a, b)
            return fitted[(source.id, a, b)]

        def fit_in_place(source: Unit, a: int, b: int):
            run = self.refills.fitted_run(source, a, b, lead, tail)
            if not self.guard.allows(source, "".join(x.text for x in run)):
                return None  # the refill must not give back the answer or the removed fact
            # the receiving paragraph as counted alone, from its pieces' counts (exact)
            pieces, counts = edges
            measured = counter.count_joined([pieces[0], *(x.text for x in run), pieces[1]],
                                            [counts[0], *(x.tokens for x in run), counts[1]])[0]
            return run, segment.tokens + measured - paragraph_tokens

        return fit


def _sentence_class(unit: Unit, s: int) -> tuple[bool, bool]:
    """Whether segment ``s`` of a context paragraph (its title line is segment 0) is the first
    and whether it is the last of its sentences."""
    return s == 1, s == len(unit.segments) - 1


def _sentence_shape(segment: Segment) -> tuple[int, int]:
    """(words, tokens) of a sentence: a refilled sentence of the positive mirrors an evidence
    sentence in both (as many words for its tokens: names and numbers take more tokens a word)."""
    return WordStats.of(segment.text).words, segment.tokens


def refillable_sentences(units: list[Unit], evidence: list[str]) -> list[tuple[Unit, int]]:
    """The positive's sentences that may be refilled, (unit, segment index): the context
    paragraphs' own sentences that are no evidence, never a title line, nor the document's last
    sentence, whose trailing newlines trim_edges strips (the refill's last characters could then
    count differently than in place)."""
    return [(unit, s) for unit in units if unit.kind == "context" for s in range(1, len(unit.segments))
            if unit.segments[s].origin == "source" and unit.segments[s].text.strip() not in evidence
            and not (unit is units[-1] and s == len(unit.segments) - 1)]


def sentence_shape(segment: Segment) -> tuple[int, int]:
    """(words, tokens) of a sentence (``positive_places``)."""
    return _sentence_shape(segment)


def positive_places(units: list[Unit], removals: list[list[int]], evidence: list[str],
                    rng: np.random.Generator) -> list[list[tuple[str, int]]]:
    """The positive's own sentences to refill, so that it carries refilled text as its variants do
    and no statistic of the words can tell which of a group's documents lost a sentence: as many
    as a variant drawn at random removes (a two-sentence drop is matched as often as the variants
    have one), each a sentence that is no evidence, at the same place in its paragraph (first,
    last, or between) as the evidence sentence it mirrors and as near it in words and tokens, from the
    question's distractor paragraphs (its gold paragraphs stay whole), else from any of its
    paragraphs, else at any place in them. For each mirrored sentence, up to
    ``POSITIVE_ALTERNATIVES`` places in that order (ties drawn at random), to be tried in turn."""
    drawn = removals[int(rng.integers(len(removals)))]
    context = [unit for unit in units if unit.kind == "context"]
    gold = {unit.id for unit in context for x in unit.segments if x.origin.startswith(EVIDENCE_ORIGIN)}
    sentences = refillable_sentences(units, evidence)
    classes = [_sentence_class(unit, s) for unit, s in sentences]  # each candidate's, once
    shapes = [_sentence_shape(unit.segments[s]) for unit, s in sentences]
    taken: set[str] = set()  # the paragraphs an earlier mirrored sentence may use
    out = []
    for k in drawn:
        u, s = find_evidence(units, k)
        mirrored, shape = _sentence_class(units[u], s), _sentence_shape(units[u].segments[s])
        ties = rng.random(len(sentences))
        ranked = sorted(range(len(sentences)), key=lambda i: (
            (0 if sentences[i][0].id not in gold else 1) if classes[i] == mirrored else 2,
            sum(abs(a - b) for a, b in zip(shapes[i], shape)),
            ties[i]))
        # one refill per paragraph: a refill's run shifts the segment indices after it
        alternatives = [(sentences[i][0].id, sentences[i][1]) for i in ranked
                        if sentences[i][0].id not in taken][:POSITIVE_ALTERNATIVES]
        if alternatives:
            out.append(alternatives)
            taken.update(unit_id for unit_id, _ in alternatives)
    return out
