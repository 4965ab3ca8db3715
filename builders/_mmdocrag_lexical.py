"""MMDocRAG's lexically matched Hard tier (``mmlongembed.core.pools.LEXICAL``): every document of
a group has one text quote swapped for sentences of the same length, and BM25 cannot tell which
one is whole.

In the paper's Hard tier the positive is the question's quotes padded with other documents'
pages, and each variant loses a gold quote: a text quote is refilled by sentences of the same
length that seldom name the question's entities, so each text variant scores below its positive
under BM25 and "the candidate sharing the most words with the question" is the positive. As for
HotpotQA (``ops.multisource.lexical_refill``), no refill gives the variant that weight back: the
question's rarest words occur in its own document's quotes. The lever is the positive: in this
tier one of its own quotes that is no evidence (a text quote of its context, which often names
the question's entities) is refilled the way a variant's gold quote is (whole sentences of about
its length, the document's unused text first), chosen so that the positive's BM25 score falls
below a number of its variants' drawn uniformly from none to all of them, with a margin
(``lexical_refill.Gap``). The variants are the hard pool's. Every document of the group then
holds one refill where a quote was, and BM25 finds the question's document, not which copy of it
is whole.

A query keeps its place only when both the top rank and a rank below it could have been reached
(``PlaceWeights.reachable``): the queries kept must not depend on the rank drawn.

Scores are BM25 over the pool as the harness runs it, stood in for by the IDF over the hard
pool's positives (their words: ``UnitWords``), as HotpotQA's tier does.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from mmlongembed.core.digests import short_sha256
from mmlongembed.ops.bm25 import QueryScorer, bm25_tokenize
from mmlongembed.ops.length import edge_whitespace, fit_block_edges
from mmlongembed.core.errors import FitError
from mmlongembed.ops.multisource.evidence import Unit, find_sentence_run
from mmlongembed.ops.multisource.lexical_refill import Gap, PlaceWeights, UnitWords

# the places (context quotes) whose estimate lies in the drawn gap that are tried, nearest a gold
# text quote's length first
PLACES_TRIED = 8


def context_text_places(units: Sequence[Unit]) -> list[tuple[str, int]]:
    """(unit id, segment index) of every text quote of the question's own context that is no
    evidence: one text segment of a context unit, of origin "source"."""
    return [(unit.id, 0) for unit in units
            if unit.kind == "context" and len(unit.segments) == 1 and not unit.segments[0].is_visual
            and unit.segments[0].origin == "source" and unit.segments[0].text.strip()]


def refill_place(units: Sequence[Unit], unit_id: str, run: Sequence, source_id: str,
                 sentences: tuple[int, int]) -> tuple[list[Unit], dict]:
    """The units with the quote ``unit_id`` (one text segment) swapped for ``run`` (already
    fitted to its edges), and the swap's provenance."""
    out = list(units)
    u = next(k for k, unit in enumerate(out) if unit.id == unit_id)
    removed = out[u].segments[0]
    out[u] = Unit(out[u].id, out[u].kind, tuple(run))
    replacement = {"source": source_id, "sentences": list(sentences), "tokens": sum(x.tokens for x in run)}
    return out, {"quote": unit_id.split(":", 2)[2], "kind": "text", "sha256": short_sha256(removed.text.strip()),
                 "tokens": removed.tokens, "replacement": replacement}


def lexical_positive(units: Sequence[Unit], gold_text_tokens: Sequence[int], variant_scores: Sequence[float],
                     scorer: QueryScorer, words: UnitWords, text_sources: Sequence[Callable[[], list[Unit]]],
                     slack: int, rank_rng: np.random.Generator, run_rng: Callable[[str], np.random.Generator],
                     counter) -> tuple[list[Unit], dict | None, Gap] | str:
    """The positive's units with one context quote that is no evidence refilled so that its BM25
    score (``scorer``) lies in the gap of a rank among ``variant_scores`` drawn uniformly
    (``rank_rng``), and the refill's provenance and the gap; where variants tie with the positive
    (they lost an image quote) and the top is drawn, the units as they are, None and the top's gap
    (the tie lies on its bound: every other variant was checked to lie below the positive before
    the draw); or why the query leaves the tier: ``no_context_text`` (no such quote),
    ``rank_unreachable`` (the top or the ranks below it cannot be reached), ``no_matching_refill``."""
    counts, length = words.weights(scorer, units)
    # variants that lost an image quote hold the positive's very text: BM25 ties them with it, and
    # the harness's tie-aware P@1 gives the positive 1 / (ties + 1) while nothing is refilled
    score = scorer.score(counts, length)
    tied = sum(1 for s in variant_scores if math.isclose(s, score, rel_tol=1e-12))
    places = context_text_places(units)
    weights = PlaceWeights(scorer, units, places, words) if places else None
    below = Gap(variant_scores, 1, at_least=True)
    top = Gap(variant_scores, 0)
    # with ties, the top is the positive as it is: every variant but the tied ones below it
    top_as_it_is = tied and Gap([s for s in variant_scores if not math.isclose(s, score, rel_tol=1e-12)],
                                0).holds(score)
    if weights is None or not weights.reaches(below) or not (top_as_it_is if tied else weights.reaches(top)):
        return "no_context_text" if weights is None else "rank_unreachable"
    # the number of variants above the positive, drawn from none to all; with ties, the positive
    # stays as it is (tied at the top) for the draws up to their number, so that its expected P@1
    # is (tied + 1) / (n + 1) * 1 / (tied + 1) = 1 / (n + 1), chance, as without ties
    above = int(rank_rng.integers(len(variant_scores) + 1))
    if above <= tied and tied:
        return list(units), None, top
    gap = Gap(variant_scores, above)
    if above > 0 and not weights.reaches(gap):
        gap = below  # as ``drawn_gap``: the top keeps its own chance
    by_id = {unit.id: unit for unit in units}
    aims = list(gold_text_tokens) or [0]

    def shape(i: int) -> float:  # a refill of a gold text quote's length, like the variants' refills
        tokens = by_id[weights.places[i][0]].segments[0].tokens
        return min(abs(tokens - t) for t in aims)

    for i in weights.ordered(gap, shape)[:PLACES_TRIED]:
        unit_id = weights.places[i][0]
        segment = by_id[unit_id].segments[0]
        removed = bm25_tokenize(segment.text)
        base_counts, base_length = counts - scorer.counts(removed), length - len(removed)
        lead, tail = edge_whitespace(segment.text)

        def fitted(source: Unit, a: int, b: int):
            return fit_block_edges(source.segments[a:b], lead, tail, counter, f"replacement:{source.id}")

        def in_gap(source: Unit, a: int, b: int) -> bool:
            run_words = bm25_tokenize("".join(s.text for s in fitted(source, a, b)))
            return gap.holds(scorer.score(base_counts + scorer.counts(run_words), base_length + len(run_words)))

        window = (max(1, segment.tokens - slack), segment.tokens + slack)
        for candidates in text_sources:
            try:
                source, a, b = find_sentence_run(candidates(), *window, segment.tokens, run_rng(unit_id), in_gap)
            except FitError:
                continue
            refilled, record = refill_place(units, unit_id, fitted(source, a, b), source.id, (a, b))
            return refilled, record, gap
    return "no_matching_refill"
