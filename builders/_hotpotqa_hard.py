"""HotpotQA's hard negatives: copies of the positive that each lack evidence (the first, the
last or a random middle sentence, or both of two), every removed sentence refilled in place with
whole sentences on the receiving paragraph's topic of exactly its token length
(``mmlongembed.ops.multisource.refill``), and the positive with as many of its other sentences refilled.

Planning the refills is the costly search (``hard_plan``, a pure function of its arguments, so
plans can be worked out on all cores ahead: ``prefetch_hard_plans``); assembling a plan
(``hard_assemble``) measures and checks each document.
"""

from __future__ import annotations

from typing import Callable

from mmlongembed.core import parallel
from mmlongembed.core.digests import short_sha256
from mmlongembed.ops.donor import exchangeable_offsets
from mmlongembed.ops.multisource.evidence import Refill, Unit, find_evidence, units_document
from mmlongembed.ops.length import trim_edges
from mmlongembed.ops.measured import RECOUNT_MARGIN, Built
from mmlongembed.ops.bm25 import QueryScorer
from mmlongembed.ops.multisource.lexical_refill import Gap, GapSearch, PlaceWeights, UnitWords, drawn_gap
from mmlongembed.ops.multisource.refill import (
    POSITIVE_ALTERNATIVES, RefillSource, VariantSearch, locate, positive_places, refillable_sentences, sentence_shape)
from mmlongembed.build.pool_plan import PoolContext
from mmlongembed.core.pools import LengthBand, hard_negative_tolerance, pool_name
from mmlongembed.readers.hotpotqa import Instance
from mmlongembed.core.rng import derive_rng
from mmlongembed.core.tokens import TokenCounter

POSITIVE_REFILL = "positive"  # the plan's entry for the positive's own refilled sentences

Plan = list[tuple[str, list, "list[tuple[object, Refill]] | str"]]


def hard_variants(context: PoolContext, instance: Instance, positive: Built, band: LengthBand, pool_label: str,
                  refills: RefillSource):
    """Three copies of the positive, each lacking evidence (first / last / a random middle
    one, or both of two). Each removed sentence is refilled in place with a run of whole
    sentences on the receiving paragraph's topic (``RefillSource``) of exactly its token
    length wherever one exists, holding neither the answer nor the removed fact's names and
    numbers; the positive has as many of its other sentences refilled (``positive_places``).
    Returns (refilled positive, its refilled sentences, the variants), or the skip reason."""
    plan = hard_plan(context, instance, positive, pool_label, refills)
    return hard_assemble(instance, positive, band, plan, context.counter)


def hard_plan(context: PoolContext, instance: Instance, positive: Built, pool_label: str,
              refills: RefillSource) -> Plan:
    """The refills of the positive and of each variant (the search, ``hard_variants``'s
    costly part): per entry (name, places, [(place, refill)]), the positive's first (name
    ``POSITIVE_REFILL``, its places ``(unit id, segment)``), then the variants' (their places
    the removed evidence indices), or the reason in place of the refills of the first entry
    for which a sentence has none (later entries are not planned). A pure function of its
    arguments: plans can be worked out anywhere."""
    seed = context.config.seed
    variants, offsets = _variants(context, instance, positive, pool_label)
    evidence = instance.evidence_texts()
    tolerance = hard_negative_tolerance(positive.n_tokens)
    context_text = "".join(u.text for u in positive.units if u.kind == "context")
    original = positive.word_stats.features()
    # The positive is refilled too, first: as many non-evidence sentences as a variant drawn at
    # random removes evidence sentences, each at the same place in its paragraph as one of them
    # (``positive_places``: for each, the sentences that may stand in, tried in turn until one
    # has an exact refill), refilled in the same way.
    places = positive_places(positive.units, [removed for _, removed in variants], evidence,
                             derive_rng(seed, pool_label, instance.id, "positive-refill"))
    entries = [(POSITIVE_REFILL, places, 0), *((v, [[k] for k in removed], offset)
                                               for (v, removed), offset in zip(variants, offsets))]
    plans = []
    for variant, choices, offset in entries:
        # a positive's refilled sentence holds no fact: only evidence has anchors to keep out
        anchors = set().union(*(refills.anchors(evidence[k], context_text)
                                for alternatives in choices for k in alternatives if isinstance(k, int)))
        search = VariantSearch(
            refills, instance, anchors, context.counter, original, {u.id for u in positive.units},
            share=offset // max(1, len(choices)), slack=max(1, (tolerance - RECOUNT_MARGIN) // max(1, len(choices))),
            sides_rng=lambda k, variant=variant: derive_rng(seed, pool_label, instance.id, variant, str(k), "sides"))
        picks = search.refill_all(positive.units, choices, positive.word_stats)
        if picks is None:
            plans.append((variant, [a[0] for a in choices], "no_replacement_sentences"))
            return plans
        plans.append((variant, [k for k, _ in picks], picks))
    return plans


def _variants(context: PoolContext, instance: Instance, positive: Built,
              pool_label: str) -> tuple[list[tuple[str, list[int]]], list[int]]:
    """The variants of a hard group, (name, the evidence indices it removes), and the length
    offset each aims at where no run is exact."""
    n = len(instance.supporting)
    rng = context.rng(pool_label, instance.id, "hard")
    variants = [("drop_first", [0]), ("drop_last", [n - 1])]
    variants.append(("drop_middle", [int(rng.integers(1, n - 1))]) if n >= 3 else ("drop_both", [0, 1]))
    variants = variants[: context.config.negatives_per_query]
    # Where no run is exact, the variants aim at exchangeable lengths (see exchangeable_offsets).
    # The generators here are keyed by the pool's label (which holds the builder's name), as they
    # always were, not by context.rng: its builder key would draw others and change the data.
    offsets = exchangeable_offsets(positive.n_tokens, len(variants), derive_rng(
        context.config.seed, pool_label, instance.id, "offsets"))
    return variants, offsets


def lexical_place_weights(instance: Instance, positive: Built, scorer: QueryScorer, words: UnitWords) -> PlaceWeights:
    """The positive's score with each of its sentences that is no evidence taken out
    (``PlaceWeights``): which ranks among its variants a refill there can give it."""
    sentences = refillable_sentences(positive.units, instance.evidence_texts())
    return PlaceWeights(scorer, positive.units, [(unit.id, s) for unit, s in sentences], words)


def lexical_rank_range(weights: PlaceWeights, variant_scores: list[float]) -> tuple[int, int] | None:
    """The ranks (how many of the variants lie above the positive) a lexical group can be dealt
    (``ops.lexical.balanced_ranks``): the top, any rank below it (a rank below the top that its
    refills cannot reach exactly is made as one of the others, ``drawn_gap``), or both; None
    when neither."""
    top, below = weights.reaches(Gap(variant_scores, 0)), weights.reaches(Gap(variant_scores, 1, at_least=True))
    if not (top or below):
        return None
    return 0 if top else 1, len(variant_scores) if below else 0


def lexical_plan(context: PoolContext, instance: Instance, positive: Built, hard: Plan, variant_scores: list[float],
                 above: int, lexical_label: str, refills: RefillSource, scorer: QueryScorer,
                 words: UnitWords, weights: PlaceWeights) -> tuple[Plan, Gap] | str:
    """The plan of a lexical group (``ops.multisource.lexical_refill``): the hard group's
    variants as they are (``hard``'s entries but its first), and the positive with one sentence
    that is no evidence refilled, chosen so that its BM25 score (``scorer``) falls below
    ``above`` of the variants' ``variant_scores`` (dealt over the pool, ``lexical_rank_range``),
    with a margin. The places are tried in turn (``PlaceWeights.ordered``, ``weights``), each
    refilled as the positive is in the hard tier, with the run that keeps the score in its gap
    (``GapSearch``). Returns the plan for ``hard_assemble`` and the gap, or why the query leaves
    the tier: ``no_matching_refill``."""
    seed = context.config.seed
    evidence = instance.evidence_texts()
    sentences = refillable_sentences(positive.units, evidence)
    gap = drawn_gap(variant_scores, above, weights.reaches)
    shapes = [sentence_shape(unit.segments[s]) for unit, s in sentences]
    evidence_shapes = [sentence_shape(positive.units[u].segments[s])
                       for u, s in (find_evidence(positive.units, k) for k in range(len(evidence)))]

    def shape(i: int) -> float:
        return min(sum(abs(a - b) for a, b in zip(shapes[i], e)) for e in evidence_shapes)

    places = [[weights.places[i]] for i in weights.ordered(gap, shape)][:POSITIVE_ALTERNATIVES]
    search = GapSearch(refills, instance, set(), context.counter, positive.word_stats.features(),
                       {u.id for u in positive.units}, share=0,
                       slack=max(1, hard_negative_tolerance(positive.n_tokens) - RECOUNT_MARGIN),
                       sides_rng=lambda k: derive_rng(seed, lexical_label, instance.id, str(k), "sides"),
                       scorer=scorer, gap=gap, words=words)
    for alternatives in places:
        picks = search.refill_all(positive.units, [alternatives], positive.word_stats)
        if picks is not None:
            return [(POSITIVE_REFILL, [k for k, _ in picks], picks), *hard[1:]], gap
    return "no_matching_refill"


def hard_assemble(instance: Instance, original: Built, band: LengthBand, plan: Plan, counter: TokenCounter):
    """The refilled positive and the variants of a plan (``hard_plan``), each measured and
    checked: its length in the band and within the tolerance of the refilled positive's (that
    one within the tolerance of the original's), the variants' removed evidence gone. Returns
    (positive, its refilled sentences, the variants), or the first reason (in plan order) one
    fails for."""
    evidence = instance.evidence_texts()
    out = []
    positive = original
    for variant, removed_indices, picks in plan:
        if isinstance(picks, str):
            return picks
        units, removed = _refilled(original.units, picks)
        name = f"{instance.id}@{band.name}" + ("" if variant == POSITIVE_REFILL else f":{variant}")
        made = Built.measured(units, trim_edges(units_document(name, units), counter), counter)
        if not band.contains(made.n_tokens) or abs(made.n_tokens - positive.n_tokens) > hard_negative_tolerance(
                positive.n_tokens):
            return "length_mismatch"
        text = made.document.text
        if any(evidence[k] in text for k in removed_indices if isinstance(k, int)):
            return "removed_evidence_still_present"
        if variant == POSITIVE_REFILL:
            if not all(e in text for e in evidence):
                return "positive_refill_took_evidence"
            positive, refilled = made, removed
        else:
            out.append((variant, made, removed))
    return positive, refilled, out


def _refilled(original: list[Unit], picks: list[tuple[object, Refill]]) -> tuple[list[Unit], list[dict]]:
    """The units with each pick's refill in its place, and each removed sentence's provenance."""
    units = list(original)
    removed = []
    for k, found in picks:
        u, s = locate(units, k)
        unit = units[u]
        segment = unit.segments[s]
        units[u] = Unit(unit.id, unit.kind, (*unit.segments[:s], *found.segments, *unit.segments[s + 1:]))
        where = {"index": k} if isinstance(k, int) else {"paragraph": k[0].split(":", 1)[1], "sentence": k[1] - 1}
        removed.append({**where, "sha256": short_sha256(segment.text.strip()), "tokens": segment.tokens,
                        "replacement": {"source": found.unit.id, "kind": found.unit.kind,
                                        "sentences": [found.start, found.end], "tokens": found.tokens,
                                        "topic_rank": found.rank}})
    return units, removed


def prefetch_hard_plans(context: PoolContext, order: list[Instance], positives_of: Callable[[Instance], list[Built]],
                        bands: list[LengthBand], refills: RefillSource) -> dict:
    """The refill plans (``hard_plan``) that the hard pools will ask for whatever happens, by
    (instance id, level): at each length, those of the first ``max_queries_per_pool``
    instances of the seeded order that have a positive of that length (a pool cannot fill
    up before it has seen them). Worked out on all cores (``fork_map``; each worker takes
    whole instances, so what it learns about a place serves every length), before the pools
    are assembled in order. The positives this needs are the first the pools would build,
    built here in the same order; the pools find them built."""
    if parallel.available_cores() < 2 or not parallel.can_fork():
        return {}
    report, cap = context.report, context.cap
    wanted: list[tuple[Instance, list[int]]] = []
    seen = [0] * len(bands)
    bar = report.progress_bar(len(order), "positives", "instance")
    for instance in order:
        if all(n >= cap for n in seen):
            break
        levels = [level for level in range(len(positives_of(instance))) if seen[level] < cap]
        bar.update(1)
        for level in levels:
            seen[level] += 1
        if levels:
            wanted.append((instance, levels))
    bar.close()
    workers = min(parallel.available_cores(), len(wanted))

    def plan_share(worker: int, advance) -> dict:
        plans = {}
        for instance, levels in wanted[worker::workers]:
            for level in levels:
                plans[(instance.id, level)] = hard_plan(context, instance, positives_of(instance)[level],
                                                        pool_name(context.builder, "hard", bands[level]), refills)
                advance(1)
        return plans

    planned: dict = {}
    total = sum(len(levels) for _, levels in wanted)
    for share in parallel.fork_map(plan_share, workers, workers,
                                   bar=lambda: report.progress_bar(total, "refills of hard negatives", "query")):
        planned.update(share)
    return planned
