"""GovReport Logical Summarization (paper §3.2.3, appendix A.3).

The query is an expert-written summary; the positive is its report. Reports are bucketed into
length pools by their natural length. The easy and the hard pool of one length hold the same
queries (a paired comparison). The easy pool pairs each positive with three other,
unmodified reports of the same band; the hard pool pairs it with three variants of itself in
which the first 25%, the last 25% or the middle 50% of its tokens (cut at paragraph boundaries)
is replaced by a length-matched block of paragraphs from its BM25 donor, the most similar other
report, so that a model must read the whole document to tell them apart.

Beside them, the lexical pool of each length (``LEXICAL``, not in the paper) holds the hard
pool's queries against variants made the same way, except that each donor block is chosen to
put the variant's BM25 score against the summary on a side of the positive's drawn for it
(``mmlongembed.ops.query_weight``): the paper's variants lose the query's words with the span,
so BM25 finds the positive; these keep them, so only reading tells the whole report from the
patched ones.
"""

from __future__ import annotations

import functools
import itertools
import json
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from mmlongembed.build.capacity import LengthLimit, halving_limit, longest_text_tokens
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.core.documents import Document, counted_segments, pieces_again, piece_lengths, text_pieces
from mmlongembed.core.errors import FitError
from mmlongembed.output.manifest import files_identity
from mmlongembed.ops.donor import (
    SHINGLE_WORDS, SpanToFill, content_sha256, exchangeable_offsets, jaccard, offset_room,
    replace_span_with_donor, word_shingles)
from mmlongembed.ops.length import Fitted, SegmentSums, truncate_to_band
from mmlongembed.ops.lexical import (
    balanced_ranks, exchangeable_sides, word_length_cost, word_length_sums)
from mmlongembed.build.pool_plan import PoolContext
from mmlongembed.core.rng import seeded_order
from mmlongembed.core.pools import (
    EASY_NEGATIVE, HARD_NEGATIVE, LEXICAL, LEXICAL_TIER_HELP, POSITIVE, Candidate, LengthBand, Pool, Query, pool_name)
from mmlongembed.ops.query_weight import (
    BOTH_SIDES, MAX_BLOCK_COST, SCORE_TOLERANCE, QueryWeight, segment_words)
from mmlongembed.checks.levelling import level_the_pool
from mmlongembed.readers.govreport import HUB_SOURCE, Report, local_files, local_root, read_reports
from mmlongembed.core.tokens import default_counter
from mmlongembed.ops.wordstats import text_features

INSTRUCTION = "Given this summary, retrieve the original corresponding long document."
HARD_VARIANTS = (("head25", (0.0, 0.25)), ("tail25", (0.75, 1.0)), ("middle50", (0.25, 0.75)))
# What a variant's donor is chosen to move as often up as down (``_hard_variants``): a report's
# style sets its word length, and a quarter to half of one donor moves all three variants alike.
BALANCED_STATISTIC = "mean_word_length"
# and in the lexical tier, the share of words used once too: a block chosen for the summary's
# words repeats them, and "the most words used once" would find the positive
LEXICAL_BALANCED_STATISTICS = (BALANCED_STATISTIC, "hapax_share")


@dataclass
class GovReportConfig(CommonConfig):
    lengths: tuple[int, ...] = field(
        default=(8192, 16384, 32768),
        metadata={"help": "pool length targets in tokens; pool T holds reports of natural length in (T/2, T], "
                          "reports longer than the largest T are cut to it at a paragraph boundary"},
    )
    negatives_per_query: int = field(default=3, metadata={"help": "easy negatives per query (paper: 3)"})
    donor_candidates: int = field(
        default=10, metadata={"help": "how many top BM25 reports are tried as donor before the query is skipped"})
    near_duplicate_jaccard: float = field(
        default=0.5,
        metadata={"help": f"a report whose {SHINGLE_WORDS}-word shingles overlap the source's by at least this "
                          "Jaccard index is a near-duplicate and never a donor"},
    )
    lexical_tier: bool = field(default=True, metadata={"help": LEXICAL_TIER_HELP})


class Corpus:
    """The reports every pool of a build draws on (``reports``, by id): their token counts and the
    BM25 index that finds donors, made in one pass that tokenises each report once. A report's
    document (its sentences with their counts, kept from that pass) and its shingles are made
    when a pool uses it, and only the most recent are kept: a full-size corpus is 19K reports,
    a build uses a few thousand of them."""

    DOCUMENTS_KEPT, SHINGLES_KEPT, WORDS_KEPT = 512, 1024, 512

    def __init__(self, records: list[Report], context: PoolContext):
        self.ids = [r.id for r in records]
        self.reports = {r.id: r for r in records}
        self._sentence_tokens: dict[str, array] = {}
        # each report's sentences as lengths (``piece_lengths``): a document is made again for every
        # pool, and often for the lexical tier's two passes, and splitting sentences was most of it
        self._sentence_lengths: dict[str, array] = {}
        self.tokens: dict[str, int] = {}

        def words_of_each_report():
            for r in context.report.bar(records, "tokenising reports", "report"):
                text = r.report
                pieces = text_pieces(text)
                counts = array("I", context.counter.count_many([p for p, _ in pieces]))
                self._sentence_tokens[r.id], self.tokens[r.id] = counts, sum(counts)
                self._sentence_lengths[r.id] = piece_lengths(pieces)
                yield bm25_tokenize(text)

        self.index = BM25Index(words_of_each_report())
        # caches over the records, not over self: a cycle through self would keep the corpus (its
        # index: gigabytes at full size) alive until a full garbage collection, past build_pools
        reports, sentence_tokens, sentence_lengths = self.reports, self._sentence_tokens, self._sentence_lengths
        self.document = functools.lru_cache(self.DOCUMENTS_KEPT)(
            lambda rid: report_document(reports[rid], sentence_tokens[rid], sentence_lengths[rid]))
        self.shingles = functools.lru_cache(self.SHINGLES_KEPT)(lambda rid: word_shingles(reports[rid].report))
        # each sentence's BM25 words, for the lexical tier's donor blocks (a donor serves many queries)
        document = self.document
        self.segment_words = functools.lru_cache(self.WORDS_KEPT)(lambda rid: segment_words(document(rid).segments))
        # and their words' count and length, for the mean word length of a variant a block would make
        self.word_length_sums = functools.lru_cache(self.WORDS_KEPT)(
            lambda rid: word_length_sums(document(rid).segments))
        # and the prefix sums a donor's blocks are sought by (``find_block``), for every span it is tried for
        self.segment_sums = functools.lru_cache(self.DOCUMENTS_KEPT)(lambda rid: SegmentSums.of(document(rid).segments))

    def cut(self, rid: str, fitted: Fitted) -> bool:
        """Whether ``fitted`` is its report cut short."""
        return fitted.document.tokens < self.tokens[rid]


def report_document(report: Report, sentence_tokens: Sequence[int], sentence_lengths: Sequence[int]) -> Document:
    """The report as a document, its sentences split and counted before (``text_segments``' split
    as ``piece_lengths``, and its counts)."""
    pieces = pieces_again(report.report, sentence_lengths)
    return Document(id=report.id, segments=tuple(counted_segments(pieces, sentence_tokens)),
                    meta={})


def _weight_then_word_length(weight_cost, word_length_cost):
    """The ``block_cost`` that is ``weight_cost`` plus ``word_length_cost``, for the blocks whose
    ``weight_cost`` is within ``MAX_BLOCK_COST`` (the others: infinite, not taken), so that the
    word length's side chooses among the blocks the query's weight allows, never past them."""
    def cost(*block):
        weight = weight_cost(*block)
        return np.where(weight <= MAX_BLOCK_COST, weight + word_length_cost(*block), np.inf)
    return cost


@dataclass
class LexicalReach:
    """What ``_lexical_reach`` found for one query: per variant, the donors to try and the first
    of them whose block can put it (below, above) its positive under BM25 (None: none can)."""

    tried: list[list[tuple[int, str, float]]]
    first_fill: list[tuple[int | None, int | None]]

    @property
    def below_above(self) -> list[tuple[bool, bool]]:
        """Per variant, whether it can lie (below, above) its positive."""
        return [(below is not None, above is not None) for below, above in self.first_fill]

    def donors(self, sides: list[int]) -> list[list[tuple[int, str, float]]]:
        """Each variant's donors from the first whose block can put it on its side (+1 above, -1
        below): the reach tried those before it for that side, and none could."""
        return [tried[first[(side + 1) // 2]:] for tried, first, side in zip(self.tried, self.first_fill, sides)]

    def rank_range(self) -> tuple[int, int] | None:
        """The positive's ranks among its variants (how many lie above it) that the variants'
        sides can make, lowest and highest; None when a variant can reach neither side."""
        if len(self.below_above) < len(HARD_VARIANTS) or not all(below or above for below, above in self.below_above):
            return None
        only_above = sum(above and not below for below, above in self.below_above)
        either = sum(above and below for below, above in self.below_above)
        return only_above, only_above + either

    def sides(self, rank: int, rng) -> list[int]:
        """Each variant's side (+1 above, -1 below) for the positive to have ``rank`` variants
        above it: those that can only go above, and as many drawn from those that can go either
        way as the rank still needs."""
        either = [i for i, (below, above) in enumerate(self.below_above) if below and above]
        above = {i for i, (below, up) in enumerate(self.below_above) if up and not below}
        above |= {either[int(i)] for i in rng.permutation(len(either))[: rank - len(above)]}
        return [1 if i in above else -1 for i in range(len(self.below_above))]


@dataclass
class LexicalVariants:
    """How ``_hard_variants`` makes a query's lexically matched variants: the summary's BM25
    weight over its positive, each variant's donors, each variant's side of the positive, and
    the positive's words and their lengths."""

    weight: QueryWeight
    tried: list[list[tuple[int, str, float]]]
    sides: list[int]
    word_lengths: tuple  # the positive's ``word_length_sums``


@register
class GovReportBuilder(Builder):
    """Logical Summarization from GovReport: find the report behind a summary, against reports
    whose head, tail or middle was swapped for a BM25-similar report's paragraphs."""

    name = "govreport"
    # 1.1: Hub source is the parquet GovReport (ccdv/govreport-summarization)
    # 1.2: the easy and hard pools of one length share their queries (paired)
    # 1.3: reports are fitted as a pool reaches them; easy negatives are the band's next reports,
    # never a query's near-duplicate
    # 1.4: the lexical pools (``--lexical-tier``) beside easy and hard; those two are unchanged
    # 1.5: the lexical tier weighs its blocks with the IDF of the hard pool's documents (not its
    # positives'), tries no block that its sentences' words put past the tolerance, and foresees a
    # query's other side from those words; easy and hard unchanged
    # 1.6: the lexical tier deals the positive's rank among its variants so that each rank is held
    # equally often (keeping the queries whose variants cannot all reach both sides), levels the
    # top under BM25 over the pool itself, and chooses blocks for the mean word length's side too
    # 1.7: the lexical tier is levelled over its pool for the query-blind rules too (queries leave
    # until no rule of the label-free audit reads the positives above chance); easy and hard unchanged
    version = "1.7.0"
    # a variant mixing in a quarter to a half of another report has more distinct words and more
    # words used once (the paper's design): reported in the card, not a build failure
    design_signals = ("type_token_ratio", "hapax_share")
    shortest_length = 512
    shortest_length_reason = ("a report is fitted to its length band by whole paragraphs: below 512 tokens a "
                              "'long document' is a few paragraphs, shorter than the summaries that query it")
    task = "logical_summarization"
    title = "MMLongEmbed Logical Summarization: GovReport"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Logical Summarization: summary -> report; hard negatives have 25%/50% of the report replaced by "
        "length-matched paragraphs of a BM25-retrieved donor"
    )
    source_formats = (
        "GovReport JSONL (`id`, `report`, `summary`), L-Eval JSONL (`input`, `outputs`), ZeroSCROLLS `*_input.json` "
        "+ `*_output.json`"
    )
    config_class = GovReportConfig
    card_template = "govreport.md.j2"
    licence = "cc-by-4.0"

    # -- sources -------------------------------------------------------------------------
    def load_sources(self, config: GovReportConfig, report: BuildReport) -> list[Report]:
        return read_reports(config.sources, self.name, report)

    def source_identity(self, config: GovReportConfig) -> dict:
        if config.sources:
            root = local_root(config.sources)
            return {"kind": "local", "name": "GovReport", "licence": HUB_SOURCE.licence,
                    "files": files_identity(local_files(root), root)}
        return {"kind": "hub", "name": "GovReport", "licence": HUB_SOURCE.licence, **HUB_SOURCE.identity}

    # -- pools ---------------------------------------------------------------------------
    def largest_length(self, records: list[Report], config: GovReportConfig) -> LengthLimit | None:
        """Reports keep their natural length (a longer one is only ever cut): the longest bounds it."""
        if not records:
            return None
        longest = longest_text_tokens(records, default_counter(), characters=lambda r: r.characters,
                                      text=lambda r: r.report)
        return halving_limit(longest, "the longest report")

    def build_pools(self, records: list[Report], config: GovReportConfig, report: BuildReport) -> list[Pool]:
        context = PoolContext(self.name, config, default_counter(), report)
        bands = [LengthBand.halving(t) for t in sorted(set(config.lengths))]
        corpus = Corpus(records, context)
        bucket_of: dict[str, LengthBand] = {}
        for rid in corpus.ids:
            natural = corpus.tokens[rid]
            band = next((b for b in bands if b.lo <= natural <= b.hi), bands[-1] if natural > bands[-1].hi else None)
            if band is None:
                report.skip("too_short_for_any_pool", f"{rid} ({natural} tokens)")
            else:
                bucket_of[rid] = band
        pools = []
        for band in bands:
            members = [rid for rid in corpus.ids if bucket_of.get(rid) == band]
            longer = [rid for rid in corpus.ids if rid in bucket_of and bucket_of[rid].target > band.target]
            pools.extend(self._paired_pools(band, members, longer, corpus, context))
        return pools

    def _query(self, rid: str, corpus: Corpus) -> Query:
        text = corpus.reports[rid].summary
        return Query(id=f"q:{rid}", text=text, instruction=INSTRUCTION, source_id=rid,
                     n_tokens=default_counter().count(text))

    def _positive(self, rid: str, fitted: Fitted, corpus: Corpus) -> Candidate:
        return Candidate(
            id=f"d:{rid}", document=fitted.document, role=POSITIVE, group=f"q:{rid}", source_id=rid,
            n_tokens=fitted.n_tokens, provenance={"variant": "original", "truncated": corpus.cut(rid, fitted)})

    def _paired_pools(self, band: LengthBand, members: list[str], longer: list[str], corpus: Corpus,
                      context: PoolContext) -> list[Pool]:
        """The easy and the hard pool of one length, over the same queries (the paper's paired
        comparison: the two pools differ only in their negatives), and with ``lexical_tier`` the
        lexical pool over those of them whose lexically matched variants can be made
        (``_lexical_pool``).

        Reports of the band are taken in one seeded order; a report becomes a query when its three
        hard variants can be built, until the cap or the supply of easy negatives is reached. The
        easy negatives are the band's next reports in that order that are not queries
        (unmodified), then reports of longer bands cut at a paragraph boundary to a length drawn
        from the positives' lengths (counted in the card), never a query's near-duplicate; if too
        few can be had, the last queries leave both pools and serve as easy negatives. Reports
        are fitted as they are reached, so a build holds the documents its pools use, not the
        band's."""
        easy = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name,
                    difficulty="easy", band=band)
        hard = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name,
                    difficulty="hard", band=band)
        rng = context.rng(f"{self.name}-{band.name}", "order")  # one generator, drawn from in this order:
        top = band.hi - offset_room(band)  # room above a positive for its longer variants

        def fitted_in_order():
            for rid in seeded_order(members, rng):  # the band's reports, ...
                try:
                    yield rid, truncate_to_band(corpus.document(rid), band, context.counter, target=top)
                except FitError as error:
                    context.report.skip(f"positive_{error.reason}", rid)

        fitted = fitted_in_order()
        chosen, passed, twins = self._hard_queries(band, fitted, len(members) + len(longer), hard.name, corpus,
                                                   context)
        chosen, negatives = self._easy_negatives(band, chosen, itertools.chain(passed, fitted), longer, twins, rng,
                                                 corpus, context)  # ... the rest
        k = context.config.negatives_per_query
        for q, (rid, positive_fitted, variants) in enumerate(chosen):
            query, positive = self._query(rid, corpus), self._positive(rid, positive_fitted, corpus)
            easy.add_query(query, positive, [Candidate(
                id=f"d:{neg_rid}", document=neg.document, role=EASY_NEGATIVE, group=f"q:{rid}", source_id=neg_rid,
                n_tokens=neg.n_tokens, provenance={"variant": "other_report", "truncated": truncated})
                for neg_rid, neg, truncated in negatives[q * k:(q + 1) * k]])
            hard.add_query(query, positive, self._variant_candidates(rid, variants))
        pools = [easy, hard]
        if context.config.lexical_tier:
            lexical = self._lexical_pool(band, chosen, corpus, context)
            pools += [lexical] if lexical.queries else []  # each query left out is a counted skip
        return pools

    @staticmethod
    def _variant_candidates(rid: str, variants) -> list[Candidate]:
        return [Candidate(id=f"d:{rid}:{variant}", document=made.document, role=HARD_NEGATIVE, group=f"q:{rid}",
                          source_id=rid, n_tokens=made.n_tokens, provenance=made.provenance)
                for variant, made in variants]

    def _lexical_pool(self, band: LengthBand, queries: list[tuple[str, Fitted, list]], corpus: Corpus,
                      context: PoolContext) -> Pool:
        """The hard pool's queries, in its order, against variants whose donor blocks keep the
        summary's BM25 weight (``_hard_variants`` with a ``LexicalVariants``). First each query's
        variants are tried for the sides of the positive's score they can reach
        (``_lexical_reach``); then the positive's rank among its variants (how many lie above it)
        is dealt so that each rank is held by as many queries as each other
        (``ops.lexical.balanced_ranks``), and the variants are made on their sides; last, the
        pool is levelled, for the query-blind rules and for BM25's top, as they read the pool
        itself (``level_the_pool``). A query whose variants cannot reach a side, or whose rank
        is not needed to level the others, or that leaves in the levelling, leaves this pool
        only (counted skips)."""
        pool = Pool(name=pool_name(self.name, LEXICAL, band), task=self.task, dataset=self.name,
                    difficulty=LEXICAL, band=band)
        if not queries:
            return pool
        made: set[str] = set()
        words = [segment_words(positive.document.segments) for _, positive, _ in queries]
        # the pool's documents are its positives and copies of most of them refilled from donors:
        # BM25 over the hard pool's (its positives and their variants, refilled from the same
        # donors) stands in for the harness's over this pool (``ops.query_weight``). Over the
        # positives alone, a query word the donors bring in would weigh more than in the pool,
        # and the variants refilled with it would score lower there than their sides say
        pool_index = BM25Index(itertools.chain(
            ([word for segment in document for word in segment] for document in words),
            (bm25_tokenize(variant.document.render()[0]) for _, _, variants in queries for _, variant in variants)))

        # made again for each pass, not kept between them: a QueryWeight keeps its donors' counts,
        # which for every query of a pool at once would not fit (a real summary's few hundred
        # words, by every sentence of twenty donors)
        def weight_of(rid: str, positive_words) -> QueryWeight:
            return QueryWeight(pool_index, corpus.reports[rid].summary, positive_words, corpus.segment_words)

        reaches = [self._lexical_reach(rid, positive, band, pool.name, corpus, context, weight_of(rid, positive_words))
                   for (rid, positive, _), positive_words in context.report.bar(
                       list(zip(queries, words)), f"{pool.name}: sides each variant can reach", "query")]
        ranks = balanced_ranks([reach.rank_range() for reach in reaches], len(HARD_VARIANTS) + 1,
                               context.rng(pool.name, "ranks"))
        for (rid, positive, _), positive_words, reach, rank in context.report.bar(
                list(zip(queries, words, reaches, ranks)), f"{pool.name}: lexically matched negatives", "query"):
            if reach.rank_range() is None:
                context.report.skip("lexical_no_matching_block", rid)
                continue
            if rank is None:
                context.report.skip("lexical_rank_not_needed", rid)
                continue
            sides = reach.sides(rank, context.rng(pool.name, rid, "query_weight"))
            lexical = LexicalVariants(weight_of(rid, positive_words), reach.donors(sides), sides,
                                      word_length_sums(positive.document.segments))
            variants = self._hard_variants(rid, positive, [], band, pool.name, corpus, context, lexical)
            texts = {content_sha256(variant.document.render()[0]) for _, variant in variants or ()}
            if variants is None:
                context.report.skip("lexical_side_missed_on_recount", rid)
            elif texts & made:
                context.report.skip("lexical_variant_made_twice", rid)
            else:
                made |= texts
                pool.add_query(self._query(rid, corpus), self._positive(rid, positive, corpus),
                               self._variant_candidates(rid, variants))
        pool, left_for_rules, left_for_top = level_the_pool(pool, context.rng(pool.name, "level_in_pool"))
        for reason, left in (("rules", left_for_rules), ("top", left_for_top)):
            for query in left:
                context.report.skip(f"lexical_{reason}_not_level_in_pool", query.source_id)
        return pool

    def _lexical_reach(self, rid: str, positive: Fitted, band: LengthBand, pool_label: str, corpus: Corpus,
                       context: PoolContext, weight: QueryWeight) -> "LexicalReach":
        """Per variant, the donors its block is sought among (the summary's donors, then the
        reports holding the query's words its span takes away) and the sides of the positive's
        BM25 score (below, above) that a block of theirs can put it on, foreseen from the
        segments' words (``SpanToFill.can_fill``; nothing is assembled). Stops at a variant that
        can reach neither side."""
        donors, _ = self._donors(rid, corpus, context.config)
        seen = {donor_id for _, donor_id, _ in donors}
        reach = LexicalReach([], [])
        for _, fraction in HARD_VARIANTS:
            try:
                span = SpanToFill.of(positive.document, positive.n_tokens, fraction, band)
            except FitError:
                break
            lost = weight.lost_words(span.start, span.end)
            tried = donors + [d for d in self._donors(rid, corpus, context.config, lost)[0] if d[1] not in seen]
            first: list[int | None] = [None, None]  # (below, above)
            for k, (_, donor_id, _) in enumerate(tried):
                fills = span.can_fill(corpus.segment_sums(donor_id), weight.block_cost(donor_id, BOTH_SIDES),
                                      MAX_BLOCK_COST)
                first = [k if at is None and fill else at for at, fill in zip(first, fills)]
                if None not in first:
                    break
            reach.tried.append(tried)
            reach.first_fill.append(tuple(first))
            if first == [None, None]:
                break
        return reach

    def _hard_queries(self, band: LengthBand, fitted: Iterator[tuple[str, Fitted]], n_reports: int,
                      pool_label: str, corpus: Corpus, context: PoolContext):
        """(queries as (report, fitted, its hard variants), reports passed over as (report,
        fitted), the queries' near-duplicates): the fitted reports taken in their order, a query
        each whose three variants can be made, up to the cap and to what the ``n_reports`` of the
        band and longer ones can serve as easy negatives. Stops reading ``fitted`` there."""
        k = context.config.negatives_per_query
        cap = min(context.cap, n_reports // (k + 1))  # Q queries leave n - Q reports for k*Q negatives
        chosen, passed, twins = [], [], set()
        made: set[str] = set()  # the variants' texts (sha256) so far: a pool holds no text twice
        bar = context.report.progress_bar(cap, f"{pool_label}: hard negatives", "query")
        for rid, positive in fitted if cap else ():
            donors, near_duplicates = self._donors(rid, corpus, context.config)
            variants = self._hard_variants(rid, positive, donors, band, pool_label, corpus, context)
            texts = {content_sha256(variant.document.render()[0]) for _, variant in variants or ()}
            if variants is None:
                context.report.skip("hard_no_donor_block", rid)
                passed.append((rid, positive))
            elif texts & made:  # a near-duplicate of a query (refilled from the same donor block):
                context.report.skip("hard_variant_made_twice", rid)  # no easy negative either
            else:
                made |= texts
                twins |= near_duplicates
                chosen.append((rid, positive, variants))
                bar.update()
                if len(chosen) >= cap:
                    break
        bar.close()
        return chosen, passed, twins

    def _easy_negatives(self, band: LengthBand, chosen: list, unused: Iterable[tuple[str, Fitted]],
                        longer: list[str], twins: set, rng, corpus: Corpus, context: PoolContext):
        """(the queries that keep their place, k easy negatives for each in a seeded order, as
        (report, fitted, cut)): the band's reports that are not queries, as far as needed, then
        longer ones cut to a positive's length, none of them one of the queries' ``twins``."""
        k = context.config.negatives_per_query
        unused = ((rid, fitted) for rid, fitted in unused if rid not in twins)
        longer = [rid for rid in longer if rid not in twins]
        negatives: list[tuple[str, Fitted, bool]] = [  # the top band cuts longer reports too
            (rid, fitted, corpus.cut(rid, fitted)) for rid, fitted in itertools.islice(unused, k * len(chosen))]
        positive_lengths = [positive.n_tokens for _, positive, _ in chosen]
        for i in rng.permutation(len(longer)):
            if len(negatives) >= k * len(chosen):
                break
            rid = longer[int(i)]
            target = positive_lengths[int(rng.integers(len(positive_lengths)))]
            try:
                negatives.append((rid, truncate_to_band(corpus.document(rid), band, context.counter, target=target),
                                  True))
            except FitError as error:
                context.report.skip(f"easy_negative_{error.reason}", rid)
        while len(negatives) < k * len(chosen):  # fewer queries, never fewer negatives each:
            rid, positive, _ = chosen.pop()  # a query that leaves serves as a negative (not a twin)
            context.report.skip("not_enough_easy_negatives", rid)
            if rid not in twins:
                negatives.append((rid, positive, corpus.cut(rid, positive)))
        return chosen, seeded_order(negatives, rng)[: k * len(chosen)]

    def _donors(self, rid: str, corpus: Corpus, config: GovReportConfig,
                query: list[str] | None = None) -> tuple[list[tuple[int, str, float]], set]:
        """(BM25 rank, report id, score) of the donor candidates, best first: the reports the
        summary (or ``query``'s words) retrieves from the whole corpus, less the source itself and
        its near-duplicates; and those near-duplicates (a report as near the summary as its own
        never answers another's)."""
        query = bm25_tokenize(corpus.reports[rid].summary) if query is None else query
        ranked = corpus.index.top_k(query, config.donor_candidates + 1)
        donors, near_duplicates = [], set()
        for rank, (i, score) in enumerate(ranked):
            other = corpus.ids[i]
            if other == rid:
                continue
            if jaccard(corpus.shingles(rid), corpus.shingles(other)) >= config.near_duplicate_jaccard:
                near_duplicates.add(other)
                continue
            donors.append((rank, other, score))
        return donors, near_duplicates

    def _hard_variants(self, rid: str, positive: Fitted, donors, band: LengthBand, pool_label: str, corpus: Corpus,
                       context: PoolContext, lexical: "LexicalVariants | None" = None):
        """The three variants (head25, tail25, middle50); None when one of them cannot be made.
        Each comes from the best-ranked donor of the top BM25 list that can fill its span and
        moves the mean word length to the side drawn for it (``exchangeable_sides``; the best
        donor that can fill, when none does): the best donor alone would move all three variants'
        words the same way, and "the shortest words" would find the positive half the time.

        With ``lexical`` (the lexical tier) each variant's donors are its own list, and it also
        has a side of the positive's BM25 score against the summary: its block is sought to put
        it there, nearest the positive; a variant that lands on the wrong side, or farther than
        the tolerance, is not taken."""
        variants = []
        offsets = exchangeable_offsets(positive.n_tokens, len(HARD_VARIANTS), context.rng(pool_label, rid, "offsets"))
        statistics = LEXICAL_BALANCED_STATISTICS if lexical else (BALANCED_STATISTIC,)
        sides = exchangeable_sides(len(HARD_VARIANTS), len(statistics), context.rng(pool_label, rid, "sides"))
        score_sides = lexical.sides if lexical else [None] * len(HARD_VARIANTS)
        donor_lists = lexical.tried if lexical else [donors] * len(HARD_VARIANTS)
        before = text_features(positive.document.render()[0])

        def made_from(tried, variant, fraction, offset, word_side, score_side, rng):
            """The variant from the first donor of ``tried`` that fills its span (on ``score_side``,
            where given) and moves the word statistics to ``word_side``, else from the first that
            fills it. None if no donor fills it."""
            chosen = None
            for rank, donor_id, score in tried:
                block_cost, max_block_cost = None, MAX_BLOCK_COST
                if score_side is not None:
                    # the query's weight on its side (within the tolerance, where nearness to the
                    # positive's gives BM25 nothing), then the mean word length's side: a block on
                    # the wrong one costs as much as the tolerance allows, so that any block on the
                    # right one within the tolerance goes first (a block sought for the summary's
                    # words brings the long words of a subject's terms)
                    block_cost = _weight_then_word_length(
                        lexical.weight.block_cost(donor_id, score_side),
                        word_length_cost(lexical.word_lengths, corpus.word_length_sums(donor_id), int(word_side[0]),
                                         MAX_BLOCK_COST))
                    max_block_cost = 2 * MAX_BLOCK_COST  # the blocks the reach foresaw, on either word side
                try:
                    made = replace_span_with_donor(
                        positive.document, positive.n_tokens, fraction, corpus.document(donor_id), band,
                        context.counter, rng, length_offset=offset, block_cost=block_cost,
                        max_block_cost=max_block_cost, donor_sums=corpus.segment_sums(donor_id))
                except FitError:
                    continue
                if score_side is not None:
                    reached, miss = lexical.weight.miss(made.document.render()[0], score_side)
                    if miss > SCORE_TOLERANCE:
                        continue
                    made.provenance["query_bm25"] = {"positive": round(lexical.weight.score, 4),
                                                     "side": int(score_side), "variant": round(reached, 4)}
                made.provenance.update(variant=variant, donor_bm25_rank=rank, donor_bm25_score=round(score, 4),
                                       source_id=rid, word_side=dict(zip(statistics, map(int, word_side))))
                chosen = chosen or made
                after = text_features(made.document.render()[0])
                if all((after[name] - before[name]) * side > 0 for name, side in zip(statistics, word_side)):
                    return made
            return chosen

        for (variant, fraction), offset, word_side, score_side, tried in zip(
                HARD_VARIANTS, offsets, sides, score_sides, donor_lists):
            chosen = made_from(tried, variant, fraction, offset, word_side, score_side,
                               context.rng(pool_label, rid, variant))
            if chosen is None:
                return None
            variants.append((variant, chosen))
        return variants

    # -- checks and card -----------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        name = pool_row["pool"]
        text_of = dict(zip(corpus["_id"], corpus["text"]))
        positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
        for cid, role, group, raw in zip(corpus["_id"], corpus["role"], corpus["group"], corpus["provenance"]):
            if role != HARD_NEGATIVE:
                continue
            provenance = json.loads(raw)
            positive_text = text_of.get(positive_of.get(group, ""), "")
            a, b = provenance["replaced_char_range"]
            replaced = positive_text[a:b]
            if content_sha256(replaced) != provenance["replaced_sha256"]:
                yield Problem(name, "replaced_span", f"{cid}: recorded span does not match its positive")
            elif replaced and replaced in text_of[cid]:
                yield Problem(name, "replaced_span", f"{cid} still contains the replaced span")
            c, d = provenance["block_char_range"]
            if content_sha256(text_of[cid][c:d]) != provenance["block_sha256"]:
                yield Problem(name, "donor_block", f"{cid} does not contain its donor block where recorded")

    def example_config(self, directory) -> GovReportConfig:
        from builders._govreport_fixtures import write_govreport_jsonl

        write_govreport_jsonl(Path(directory) / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
        return GovReportConfig(sources=str(directory), lengths=(2048, 4096), max_queries_per_pool=4)

    def card_context(self, config: GovReportConfig, pools: list[Pool], report: BuildReport) -> dict:
        composition = []
        for pool in pools:
            negatives = [c for c in pool.candidates if c.role == EASY_NEGATIVE]
            composition.append({
                "pool": pool.name, "queries": len(pool.queries),
                "positives_cut": sum(1 for c in pool.candidates if c.role == POSITIVE and c.provenance["truncated"]),
                "easy_negatives": len(negatives),
                "easy_negatives_cut": sum(1 for c in negatives if c.provenance["truncated"]),
                "donor_ranks": sorted({c.provenance["donor_bm25_rank"] for c in pool.candidates
                                       if c.role == HARD_NEGATIVE}),
            })
        paired = all(sorted(q.id for q in easy.queries) == sorted(q.id for q in hard.queries)
                     for easy in pools for hard in pools
                     if easy.difficulty == "easy" and hard.difficulty == "hard" and easy.band == hard.band)
        return {
            "instruction": INSTRUCTION,
            "composition": composition,
            "paired": paired,
            "hard_variants": [v for v, _ in HARD_VARIANTS],
            "offset_room_note": ", ".join(f"{offset_room(band)} tokens ({band.name})" for band in
                                          (LengthBand.halving(t) for t in sorted(set(config.lengths)))),
            "sources": [{
                "name": "GovReport (Huang et al., NAACL 2021)", "licence": HUB_SOURCE.licence,
                "identity": (f"local files under `{Path(config.sources).name}` (sha256 in manifest.json)"
                             if config.sources else f"`{HUB_SOURCE.repo}` @ `{HUB_SOURCE.revision}`"),
            }],
        }
