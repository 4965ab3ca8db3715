"""Evidence-preserving padding: documents built from whole units (a source paragraph, a whole
padding article), with marked evidence segments whose positions are tracked exactly.

A document is a list of ``Unit``s; each unit is whole (never cut), so padding is always coherent
text. Evidence segments carry ``origin="evidence:<k>"``. Operations:

- ``pick_fillers``: choose whole units whose total lies in a token window (big articles first,
  small paragraphs to land in the window);
- ``insert_spread``: insert units between existing ones so that each old position keeps its
  relative depth (``f = tokens before / total``) as the document grows;
- ``insert_random``: insert units at random gaps (the first padding of a document);
- ``sentence_runs`` / ``find_refill``: runs of whole sentences inside one paragraph, and the one
  that replaces an evidence segment with coherent text of exactly its length (the most preferred
  source first; the closest length in a window only where no run is exact);
- ``segment_spans`` / ``token_offsets_at``: where segments are, in characters and tokens, and the
  independent recount that checks it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from mmlongembed.core.documents import TEXT, Document, Segment
from mmlongembed.core.errors import FitError
from mmlongembed.core.tokens import TokenCounter

EVIDENCE_ORIGIN = "evidence:"


@dataclass(frozen=True)
class Unit:
    id: str
    kind: str  # "context" (the record's own paragraph), "article", "paragraph" (padding)
    segments: tuple[Segment, ...]

    @cached_property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.segments)

    @cached_property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)


def units_document(doc_id: str, units: Sequence[Unit], **meta) -> Document:
    return Document(id=doc_id, segments=tuple(s for u in units for s in u.segments),
                    meta={"units": [u.id for u in units], **meta})


@dataclass(frozen=True)
class Span:
    char_start: int
    char_end: int
    token_start: int
    token_end: int


def segment_spans(document: Document) -> list[Span]:
    """Character and token range of every segment (tokens by the segments' own counts)."""
    spans, chars, tokens = [], 0, 0
    for s in document.segments:
        spans.append(Span(chars, chars + len(s.text), tokens, tokens + s.tokens))
        chars += len(s.text)
        tokens += s.tokens
    return spans


def unit_spans(units: Sequence[Unit]) -> list[Span]:
    spans, chars, tokens = [], 0, 0
    for u in units:
        n_chars = sum(len(s.text) for s in u.segments)
        spans.append(Span(chars, chars + n_chars, tokens, tokens + u.tokens))
        chars += n_chars
        tokens += u.tokens
    return spans


def evidence_spans(document: Document) -> dict[int, Span]:
    """Evidence index -> span, for segments with ``origin="evidence:<k>"``."""
    return {int(s.origin[len(EVIDENCE_ORIGIN):]): span
            for s, span in zip(document.segments, segment_spans(document)) if s.origin.startswith(EVIDENCE_ORIGIN)}


def token_offsets_at(text: str, char_positions: Iterable[int], counter: TokenCounter,
                     memo: dict[str, int] | None = None) -> dict[int, int]:
    """The token offset of each character position, counted piecewise between the positions
    (one pass over the text). Exact where the positions fall on pre-token boundaries, which is
    where segments begin (whitespace leads a sentence, a newline run ends a paragraph). With
    ``memo`` (shared across texts), each stretch is counted by paragraphs, each remembered
    (``TokenCounter.count_cached``): the same counts, cheaper for texts that share paragraphs."""
    positions = sorted(set(char_positions))
    offsets, total = {}, 0
    pieces = [text[a:b] for a, b in zip([0, *positions], positions)]
    counts = counter.count_many(pieces) if memo is None else [counter.count_cached(p, memo) for p in pieces]
    for position, n in zip(positions, counts):
        total += n
        offsets[position] = total
    return offsets


class LineIndex:
    """Which texts hold a string, found through their distinct lines: texts built from one
    supply (padded documents, padding units) share most of their lines, so each look-up scans
    the distinct text once instead of every text."""

    def __init__(self, texts: dict[Any, str]):
        self.texts = texts
        self._holders: dict[str, list] = {}
        for key, text in texts.items():
            for line in text.split("\n"):
                self._holders.setdefault(line, []).append(key)
        self._lines = list(self._holders)
        self._starts = list(accumulate((len(line) + 1 for line in self._lines[:-1]), initial=0))
        self._joined = "\n".join(self._lines)

    def holding(self, needle: str) -> set:
        """The keys of the texts that hold ``needle``: ``{k for k, t in texts.items() if needle
        in t}`` (a needle with a newline is looked for in every text)."""
        if not needle or "\n" in needle:
            return {key for key, text in self.texts.items() if needle in text}
        found: set = set()
        starts, joined = self._starts, self._joined
        at = joined.find(needle)
        while at >= 0:
            k = bisect.bisect_right(starts, at) - 1  # the line it lies in (the needle has no newline)
            found.update(self._holders[self._lines[k]])
            at = joined.find(needle, starts[k + 1]) if k + 1 < len(starts) else -1
        return found


def texts_holding(texts: dict[str, str], needles: dict[Any, str]) -> dict[Any, set[str]]:
    """For each needle, the ids of the texts that hold it (``LineIndex``)."""
    index = LineIndex(texts)
    return {name: index.holding(needle) for name, needle in needles.items()}


def pick_fillers(big: Sequence[Unit], small: Sequence[Unit], lo: int, hi: int, rng: np.random.Generator) -> list[Unit]:
    """Whole units whose token total lies in [lo, hi]: big ones (articles) in random order while
    they fit, then small ones (paragraphs) until the total reaches ``lo``. Raises FitError."""
    if hi < 0 or lo > hi:
        raise FitError("bad_window", f"[{lo}, {hi}]")
    if lo <= 0:
        return []
    chosen, total = [], 0
    for pool in (big, small):
        for i in rng.permutation(len(pool)):
            unit = pool[int(i)]
            if total + unit.tokens <= hi:
                chosen.append(unit)
                total += unit.tokens
                if total >= lo:
                    return chosen
    raise FitError("not_enough_padding", f"reached {total} of [{lo}, {hi}] tokens from {len(big)}+{len(small)} units")


def grow(units: Sequence[Unit], level: int, lo: int, hi: int, big: Sequence[Unit], small: Sequence[Unit],
         rng: np.random.Generator, pieces: int) -> list[Unit]:
    """One growth step of a document of whole units to [lo, hi] tokens, the same for a positive
    and for the negatives that must look like it. The first step (``level`` 0) scatters padding at
    random gaps (evidence depth varies across queries); later steps spread the new padding so each
    old point keeps its depth, and no unit may take more than 1/``pieces`` of the new tokens
    (smaller pieces follow each evidence segment's depth more closely, and a document grown in
    steps and one padded at once would otherwise differ in how many units they hold). Raises
    FitError ("already_longer", or ``pick_fillers``')."""
    current = sum(u.tokens for u in units)
    if current > hi:
        raise FitError("already_longer", f"{current} tokens, window ends at {hi}")
    used = {u.id for u in units}
    largest = (hi - current) if level == 0 else max(1, (hi - current) // pieces)
    fillers = pick_fillers([u for u in big if u.id not in used and u.tokens <= largest],
                           [u for u in small if u.id not in used and u.tokens <= largest], lo - current, hi - current,
                           rng)
    return insert_random(units, fillers, rng) if level == 0 else insert_spread(units, fillers, rng)


def find_evidence(units: Sequence[Unit], k: int) -> tuple[int, int]:
    """(unit index, segment index) of the segment marked ``evidence:<k>``."""
    marker = f"{EVIDENCE_ORIGIN}{k}"
    for u, unit in enumerate(units):
        for s, segment in enumerate(unit.segments):
            if segment.origin == marker:
                return u, s
    raise KeyError(marker)


def insert_random(units: Sequence[Unit], extras: Sequence[Unit], rng: np.random.Generator) -> list[Unit]:
    """Each extra unit at a uniformly drawn gap (before, between or after the units); units keep
    their order, extras at one gap keep theirs."""
    gaps = sorted(int(g) for g in rng.integers(0, len(units) + 1, size=len(extras)))
    return _insert_at(units, list(zip(gaps, extras)))


def insert_spread(units: Sequence[Unit], extras: Sequence[Unit], rng: np.random.Generator) -> list[Unit]:
    """Insert ``extras`` (shuffled) between ``units`` so that the tokens inserted before any old
    point are, as nearly as whole units allow, the same fraction of the new tokens as that point's
    depth: relative positions are kept as the document grows."""
    total = sum(u.tokens for u in units)
    extra_total = sum(u.tokens for u in extras)
    if not extras or total == 0:
        return list(units) + list(extras)
    depth = [0.0]
    for u in units:
        depth.append(depth[-1] + u.tokens / total)
    placed, done = [], 0
    for i in rng.permutation(len(extras)):
        unit = extras[int(i)]
        centre = (done + unit.tokens / 2) / extra_total
        done += unit.tokens
        k = bisect.bisect_left(depth, centre)
        gap = min((g for g in (k - 1, k) if 0 <= g < len(depth)), key=lambda g: (abs(depth[g] - centre), g))
        placed.append((gap, unit))
    placed.sort(key=lambda item: item[0])  # stable: units at one gap keep their drawn order
    return _insert_at(units, placed)


def _insert_at(units: Sequence[Unit], placed: Sequence[tuple[int, Unit]]) -> list[Unit]:
    out, j = [], 0
    for gap in range(len(units) + 1):
        while j < len(placed) and placed[j][0] == gap:
            out.append(placed[j][1])
            j += 1
        if gap < len(units):
            out.append(units[gap])
    return out


def sentence_runs(unit: Unit) -> Iterator[tuple[int, int, int]]:
    """(start, end, tokens): every run ``unit.segments[start:end]`` of whole text sentences inside
    one paragraph of the unit, with the sum of their counts. A one-segment paragraph (a heading,
    a title line, a fragment) yields nothing."""
    segments = unit.segments
    start = 0
    while start < len(segments):
        end = start
        while end < len(segments) and not segments[end].paragraph_end:
            end += 1
        stop = min(end + 1, len(segments))
        if stop - start > 1:
            for a in range(start, stop):
                total = 0
                for b in range(a, stop):
                    if segments[b].kind != TEXT:
                        break
                    total += segments[b].tokens
                    yield a, b + 1, total
        start = stop


def find_sentence_run(sources: Sequence[Unit], need_lo: int, need_hi: int, aim: int,
                      rng: np.random.Generator,
                      accept: Callable[[Unit, int, int], bool] | None = None) -> tuple[Unit, int, int]:
    """(unit, start, end): ``unit.segments[start:end]`` is a run of whole sentences inside one
    paragraph (no heading lines) with a token sum in [need_lo, need_hi], closest to ``aim``, among
    the runs ``accept(unit, start, end)`` takes, where given (asked only of a run that would be the
    best so far: it may be costly). Sources are tried in random order; the first exact hit wins.
    (Kept for builders that draw refills at random; ``find_refill`` takes them in order of
    preference and measures in place.)"""
    best: tuple[int, int, Unit, int, int] | None = None
    for rank, i in enumerate(rng.permutation(len(sources))):
        unit = sources[int(i)]
        for a, b, total in sentence_runs(unit):
            if not need_lo <= total <= need_hi:
                continue
            miss = abs(total - aim)
            if (best is None or (miss, rank) < best[:2]) and (accept is None or accept(unit, a, b)):
                best = (miss, rank, unit, a, b)
                if miss == 0:
                    return unit, a, b
    if best is None:
        raise FitError("no_sentence_run", f"no run of [{need_lo}, {need_hi}] tokens in {len(sources)} sources")
    return best[2], best[3], best[4]


class SentenceRuns:
    """Every run of ``sentence_runs(unit)``, indexed by its token sum: what ``find_refill`` looks
    up for each candidate unit (build it once per unit and pass it in through ``runs``)."""

    def __init__(self, unit: Unit):
        self.runs = list(sentence_runs(unit))
        self._by_total: dict[int, list[int]] = {}
        for k, (_, _, total) in enumerate(self.runs):
            self._by_total.setdefault(total, []).append(k)

    def near(self, target: int, near: int) -> list[tuple[int, int, int]]:
        """The runs whose sum is within ``near`` of ``target``, in ``sentence_runs`` order."""
        get = self._by_total.get
        if near == 1:  # the common case, and most units have none: three look-ups
            lists = [found for found in (get(target - 1), get(target), get(target + 1)) if found]
        else:
            lists = [found for total in range(target - near, target + near + 1) if (found := get(total))]
        if not lists:
            return []
        positions = lists[0] if len(lists) == 1 else sorted(k for found in lists for k in found)
        return [self.runs[k] for k in positions]

    def within(self, lo: int, hi: int) -> list[tuple[int, int, int, int]]:
        """(position, start, end, sum) of the runs whose sum lies in [lo, hi], in order."""
        return [(k, a, b, total) for k, (a, b, total) in enumerate(self.runs) if lo <= total <= hi]


@dataclass(frozen=True)
class Refill:
    """A run of whole sentences chosen to stand in for a removed segment of ``target`` tokens:
    ``segments`` are the run as fitted into place (see ``find_refill``), ``tokens`` its measured
    length there."""

    unit: Unit
    start: int
    end: int
    segments: tuple[Segment, ...]
    tokens: int
    target: int
    rank: int  # the unit's position in the candidate order (0 = the most preferred)


FitRun = Callable[[Unit, int, int], "tuple[Sequence[Segment], int] | None"]


def find_refill(candidates: Iterable[Unit], target: int, window: tuple[int, int], aim: int, fit: FitRun,
                max_fits: int = 400, near: int = 1, choose_among: int = 1,
                choose: Callable[[Sequence[Refill]], int] | None = None,
                runs: Callable[[Unit], SentenceRuns] = SentenceRuns) -> Refill:
    """A run of whole sentences from one paragraph of one candidate unit to replace a segment of
    ``target`` tokens. ``fit(unit, start, end)`` puts a run into place and returns its fitted
    segments and measured length, or None where the run may not be used (its content).

    Candidates are in order of preference (the most topical first; an iterable is read only as
    far as the search goes). The first run whose measured length equals ``target`` wins,
    searching runs whose summed counts lie within ``near`` of the target and fitting at most
    ``max_fits`` of them; with ``choose_among`` > 1, the first that many exact runs are compared
    and ``choose(exact runs)`` says which wins (its index; e.g. the one whose words and characters
    are most like the removed text's; without it, the first). Only when no run is exact does the
    fitted run within ``window`` closest to ``aim`` win, among the candidates searched (the
    earlier candidate on ties). ``runs(unit)`` gives a unit's runs (``SentenceRuns``; pass a
    cache to share them across searches). Bounded; raises FitError when nothing fits the window."""
    lo, hi = window
    fits = 0
    searched: list[Unit] = []
    exact: list[Refill] = []
    for unit in candidates:
        if fits >= max_fits or len(exact) >= choose_among:
            break
        rank = len(searched)
        searched.append(unit)
        for a, b, _ in runs(unit).near(target, near):
            if fits >= max_fits or len(exact) >= choose_among:
                break
            fits += 1
            fitted = fit(unit, a, b)
            if fitted is not None and fitted[1] == target:
                exact.append(Refill(unit, a, b, tuple(fitted[0]), fitted[1], target, rank))
    if exact:
        return exact[0] if choose is None or len(exact) == 1 else exact[choose(exact)]
    # every run in the window of every unit searched, the closest to the aim first
    fallback = sorted((abs(total - aim), rank, k, a, b) for rank, unit in enumerate(searched)
                      for k, a, b, total in runs(unit).within(lo, hi))
    for _, rank, _, a, b in fallback[:max_fits]:
        fitted = fit(searched[rank], a, b)
        if fitted is not None and lo <= fitted[1] <= hi:
            return Refill(searched[rank], a, b, tuple(fitted[0]), fitted[1], target, rank)
    raise FitError("no_sentence_run", f"no run of [{lo}, {hi}] tokens in the {len(searched)} sources searched")
