"""HotpotQA Multi-Source Reasoning (paper §3.2.2, appendix A.2).

The query is a multi-hop HotpotQA question (distractor setting) that the query audit kept, with
2 to 5 evidence sentences (supporting facts). The positive is the question's own context (gold
and distractor paragraphs) padded with whole Wikipedia articles to the pool's length; at longer
lengths the same document grows by whole articles inserted between its units so that the
evidence keeps its relative depth. Hard negatives drop the first, the last or a middle evidence
sentence (both, when there are two) for whole sentences on the receiving paragraph's topic of
exactly the same token length; easy negatives are other questions' documents padded to the same
length.

The recipe, top-down: sources (``mmlongembed.readers.hotpotqa``, ``mmlongembed.readers.wikitext``);
the declared step (``run_steps``: the query audit, the build's one LLM call); operations (the
question's paragraphs as units and the padding that holds neither its answer nor its evidence,
``ops.padding``; growth by whole units, ``ops.evidence.grow``; refills, ``ops.refill``, planned and
assembled in ``builders._hotpotqa_hard``); the pool plan (``build_pools``, pure: per length the hard
pool, then the easy pool among its queries). The checks of a written pool are
``builders._hotpotqa_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Iterable

from builders._hotpotqa_checks import check_hotpotqa_pool, refill_statistics
from builders._hotpotqa_hard import (
    hard_assemble, hard_plan, lexical_place_weights, lexical_plan, lexical_rank_range, prefetch_hard_plans)
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.build.capacity import LengthLimit
from mmlongembed.core.documents import text_segments
from mmlongembed.core.errors import FitError, UserError
from mmlongembed.llm import Audited, AuditItem, LLMConfig, audit_queries
from mmlongembed.output.manifest import files_identity
from mmlongembed.ops.donor import exchangeable_offsets
from mmlongembed.ops.multisource.evidence import Unit, grow, units_document
from mmlongembed.ops.multisource.evidence_guard import PoolEvidenceGuard
from mmlongembed.ops.length import summed_tokens, trim_edges
from mmlongembed.ops.measured import RECOUNT_MARGIN, Built, positive_window
from mmlongembed.ops.bm25 import BM25Index, QueryScorer, bm25_tokenize
from mmlongembed.ops.multisource.lexical_refill import UnitWords
from mmlongembed.ops.lexical import balanced_ranks
from mmlongembed.checks.levelling import level_the_pool
from mmlongembed.ops.multisource.padding import PaddingSupply, context_pieces, context_units
from mmlongembed.ops.multisource.refill import REFILL_CHOICES, RefillSource, with_origin
from mmlongembed.build.pool_plan import PoolContext, Skip, fill_pool
from mmlongembed.core.pools import (
    EASY_NEGATIVE, HARD_NEGATIVE, LEXICAL, LEXICAL_TIER_HELP, POSITIVE, Candidate, LengthBand, Pool, Query,
    hard_negative_tolerance, pool_name)
from mmlongembed.readers.hotpotqa import Instance, local_files, origin_file, read_instances, read_local_instances
from mmlongembed.readers.wikitext import read_wikitext_files, wikitext_files, wikitext_rows_articles
from mmlongembed.core.rng import derive_rng, seeded_order
from mmlongembed.readers.sources import HubSource, hub_rows, require_dir
from mmlongembed.core.tokens import TokenCounter, default_counter

INSTRUCTION = "Given a multi-hop question, retrieve the document that contains all the evidence needed to answer it."
HUB_SOURCE = HubSource(repo="hotpotqa/hotpot_qa", revision="1908d6afbbead072334abe2965f91bd2709910ab",
                       config="distractor", split="validation", licence="CC BY-SA 4.0")
HUB_PADDING = HubSource(repo="Salesforce/wikitext", revision="b08601e04326c79dfdd32d625aee71d232d685c3",
                        config="wikitext-103-raw-v1", split="train", licence="CC BY-SA 3.0 / GFDL")
LOCAL_PADDING = Path("haystack_text") / "wikitext-2-raw"
NO_PADDING = "none"  # --padding none: pad with other questions' paragraphs only (the card says so)
PADDING_REMEDY = ("pass --padding with a WikiText raw file or directory (or put one at "
                  f"<sources>/{LOCAL_PADDING.as_posix()}), or --padding none to pad only with other questions' paragraphs")
GROWTH_PIECES = 4  # a longer positive grows by at least this many whole units
EASY_LAST_STEP_DRAWS = 4  # an easy negative's last growth step is drawn this many times (``_other_document``)


@dataclass
class HotpotQAConfig(CommonConfig, LLMConfig):
    # paper Table 1: 960 queries over 6 pools
    max_queries_per_pool: int = field(default=160, metadata={"help": "cap on queries per pool (paper: 160)"})
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; the smallest is built first and each longer one grows from it"})
    band_slack: float = field(default=0.1, metadata={
        "help": "every candidate of pool T lies in [T*(1-slack), T]"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy and hard negatives per query (paper: 3)"})
    padding: str | None = field(default=None, metadata={
        "help": "WikiText raw file or directory of padding articles, or 'none' to pad only with other questions' "
                "paragraphs (the card says so); default: <sources>/haystack_text/wikitext-2-raw (or next to "
                "--sources), else the Hub's WikiText-103 at a pinned revision; where none of them can be read, the "
                "build stops and says so"})
    padding_articles: int = field(default=2000, metadata={"help": "most Hub padding articles to read"})
    lexical_tier: bool = field(default=True, metadata={"help": LEXICAL_TIER_HELP})
    split: str = field(default="all", metadata={
        "choices": ("all", "train", "dev"),
        "help": "which HotpotQA split to read: a local file's split is told by its name (train: 'train' in it; dev: "
                "'dev' or 'validation'), the Hub source is dev (its validation split); all: every file"})


@dataclass(frozen=True)
class Sources:
    instances: list[Instance]
    articles: list[tuple[str, str]]  # (id, cleaned text)


@dataclass
class PoolStock:
    """What every pool of one build draws on: the bands, every usable instance (easy negatives
    come from any) with its paragraphs as units, the padding and the refill sources, the
    positives built so far and the refill plans worked out ahead (``prefetch_hard_plans``)."""

    context: PoolContext
    bands: list[LengthBand]
    instances: list[Instance]
    units_of: dict[str, list[Unit]]
    supply: PaddingSupply
    refills: RefillSource
    positives: dict[str, list[Built]] = field(default_factory=dict)
    planned: dict = field(default_factory=dict)


@dataclass
class EasyDraw:
    """One easy pool's draw of negatives: its queries may come only from ``queries`` (the hard
    pool's), no negative is padded with one of their ``gold`` paragraphs (``PoolEvidenceGuard``
    would turn that query away), and an instance serves the pool once (``claimed``)."""

    name: str
    level: int
    queries: set[str]
    gold: set[str]
    claimed: set[str] = field(default_factory=set)


@register
class HotpotQABuilder(Builder):
    """Multi-Source Reasoning from HotpotQA: find the document that holds every piece of evidence
    for a multi-hop question, against copies that lack one piece."""

    name = "hotpotqa"
    # 1.1: an instance serves a pool once; positives share no paragraph
    # 1.2: refills of exactly the removed sentence's length, on the receiving paragraph's topic
    # 1.3: easy negatives grow as positives do; refills balanced in characters
    # 1.5: one growth rule (ops.evidence.grow) caps padding paragraphs as well as articles
    # 1.6: the positive carries refilled sentences as its variants do; refills chosen to leave the
    # word statistics unmoved (issue 19: the variants' new words told them from the positive)
    # 1.7: padding is found where --help says: with --sources and no local WikiText, the Hub's WikiText-103
    # (1.6 padded with other questions' paragraphs only, and said nothing); --padding none does that on purpose
    # 1.8: the lexical pools (``--lexical-tier``) beside easy and hard; those two are unchanged
    # 1.9: an easy negative's last growth step is the nearest its aim of four draws (it landed
    # above it on average, and "the shortest" found the positive); the lexical tier deals each
    # query's rank among those its refills can reach, so that each rank is held equally often
    # (it kept only the queries that could reach the top and below it)
    # 1.10: the lexical tier is levelled over its pool for the query-blind rules too; easy and hard unchanged
    version = "1.10.0"
    task = "multi_source_reasoning"
    title = "MMLongEmbed Multi-Source Reasoning: HotpotQA"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Multi-Source Reasoning: question -> its context padded with whole Wikipedia articles to 8K/16K/32K, "
        "evidence positions recorded; hard negatives lose one evidence sentence, refilled at equal length (the "
        "positive has a non-evidence sentence refilled alike, so no word statistic marks the variants); `--split` "
        "picks train or dev files; queries audited by an LLM step"
    )
    source_formats = "HotpotQA JSON/JSONL (distractor setting), WikiText-2 raw for padding"
    config_class = HotpotQAConfig
    card_template = "hotpotqa.md.j2"
    licence = "cc-by-sa-4.0"

    # -- sources ---------------------------------------------------------------------------
    def _data_root(self, config: HotpotQAConfig) -> Path:
        root = require_dir(config.sources, "HotpotQA files in the original format")
        return root / "hotpotqa" if (root / "hotpotqa").is_dir() else root

    def padding_source(self, config: HotpotQAConfig) -> Path | str:
        """Where the padding articles come from, as ``--padding`` says: a local WikiText file or
        folder (given, or found at ``<sources>/haystack_text/wikitext-2-raw`` or next to
        ``--sources``), else ``"hub"`` (WikiText-103 at its pinned revision), or ``NO_PADDING``."""
        if config.padding == NO_PADDING:
            return NO_PADDING
        if config.padding:
            return require_dir(config.padding, "WikiText raw padding text")
        if config.sources:
            root = Path(config.sources)
            for base in (root, root.parent):
                if (base / LOCAL_PADDING).exists():
                    return base / LOCAL_PADDING
        return "hub"

    def input_paths(self, config: HotpotQAConfig) -> dict[str, list[str]]:
        padding = config.padding if config.padding and config.padding != NO_PADDING else None
        return {**super().input_paths(config), **({"--padding": [padding]} if padding else {})}

    def load_sources(self, config: HotpotQAConfig, report: BuildReport) -> Sources:
        if config.sources:
            records = read_local_instances(self._data_root(config), report, config.split)
        else:
            if config.split == "train":
                raise UserError(f"the Hub source {HUB_SOURCE.repo} is read at its validation split (dev): "
                                "--split train needs local files (--sources)")
            records = ((row, "hub") for row in hub_rows(HUB_SOURCE, self.name))
        instances, files = read_instances(records, report)
        if not instances:
            raise UserError(f"no usable HotpotQA record (2 to 5 supporting facts) in {config.sources or HUB_SOURCE.repo}")
        report.stats["source_files"] = files
        return Sources(instances, self._padding_articles(config, report))

    def _padding_articles(self, config: HotpotQAConfig, report: BuildReport) -> list[tuple[str, str]]:
        """The padding articles of ``padding_source``; none only under ``--padding none``: a
        padding source that cannot be read, or holds no article, stops the build in one line."""
        source = self.padding_source(config)
        if source == NO_PADDING:
            return []
        if source == "hub":
            rows = hub_rows(HUB_PADDING, self.name, remedy=f"no padding text without it: {PADDING_REMEDY}")
            return wikitext_rows_articles(rows, "wikitext-103", config.padding_articles)
        articles = read_wikitext_files(source, report)
        if not articles:
            raise UserError(f"no WikiText article (a ' = Title = ' line and its text) in {source}: {PADDING_REMEDY}")
        return articles

    def source_identity(self, config: HotpotQAConfig) -> dict:
        padding = self.padding_source(config)
        if padding == NO_PADDING:
            padding_identity = {"name": "none (--padding none: other questions' paragraphs only)"}
        elif padding == "hub":
            padding_identity = {"name": "WikiText-103", "licence": HUB_PADDING.licence, **HUB_PADDING.identity,
                                "articles": config.padding_articles}
        else:
            padding_identity = {"name": "WikiText (local)", "licence": HUB_PADDING.licence,
                                "files": files_identity(wikitext_files(padding), padding.parent)}
        if not config.sources:
            return {"kind": "hub", "name": "HotpotQA", "licence": HUB_SOURCE.licence, **HUB_SOURCE.identity,
                    "padding": padding_identity}
        data_root = self._data_root(config)
        return {"kind": "local", "name": "HotpotQA", "licence": HUB_SOURCE.licence, "split": config.split,
                "files": files_identity(local_files(data_root, config.split), data_root), "padding": padding_identity}

    # -- pools -----------------------------------------------------------------------------
    def largest_length(self, sources: Sources, config: HotpotQAConfig) -> LengthLimit | None:
        """A document grows from its own paragraphs by whole padding articles and other records'
        paragraphs: all of them together bound it."""
        paragraphs = {title: "".join(sentences) for i in sources.instances for title, sentences in i.context}
        total = sum(default_counter().count_many([*(text for _, text in sources.articles), *paragraphs.values()]))
        return LengthLimit(total, f"a document grows from paragraphs and padding articles, and the "
                                  f"{len(paragraphs)} paragraphs and {len(sources.articles)} articles of these sources "
                                  f"hold {total} tokens in all")

    # -- the query audit ------------------------------------------------------------------
    def run_steps(self, sources: Sources, config: HotpotQAConfig, report: BuildReport) -> Audited:
        """The query audit (the LLM of ``--llm``, or its rules under ``none``): which questions
        may be queries. Every instance stays a source of easy negatives."""
        audit = audit_queries([AuditItem(i.id, i.question, i.answer, tuple(i.evidence_texts()))
                               for i in sources.instances], config, report)
        return Audited(sources, frozenset(audit.kept))

    def build_pools(self, audited: Audited, config: HotpotQAConfig, report: BuildReport) -> list[Pool]:
        """Pure: the audited sources in, pools out (no file read, no LLM call)."""
        sources: Sources = audited.sources
        context = PoolContext(self.name, config, default_counter(), report)
        stock = self._stock(sources, context)
        order = seeded_order([i for i in sources.instances if i.id in audited.kept], context.rng("order"))
        stock.planned = prefetch_hard_plans(context, order, partial(self._positives, stock), stock.bands,
                                            stock.refills)
        pools = []
        for level in range(len(stock.bands)):
            # Pools take instances in one seeded order and skip those they cannot use, so a
            # failure is replaced by the next instance. The hard pool of a length comes first and
            # the easy pool takes its queries among the hard pool's (the paper's paired comparison
            # of the two); an easy query needs three other instances as its negatives, so the easy
            # pool is the smaller.
            hard_positives: dict[str, tuple[Built, list[dict]]] = {}
            hard_plans: dict[str, tuple] = {}
            hard = self._hard_pool(stock, level, order, hard_positives, hard_plans)
            queries = [i for i in order if i.id in hard_positives]
            easy = self._easy_pool(stock, level, queries, hard_positives)
            pools += [easy, hard]
            if config.lexical_tier:
                lexical = self._lexical_pool(stock, level, queries, hard_positives, hard_plans)
                pools += [lexical] if lexical.queries else []  # each query left out is a counted skip
        report.stats["refills"] = refill_statistics(pools)
        _count_source_use(report, sources.instances, pools)
        return pools

    def _stock(self, sources: Sources, context: PoolContext) -> PoolStock:
        counter, instances = context.counter, sources.instances
        pieces = sorted({p for i in instances for p in context_pieces(i)})
        counts = dict(zip(pieces, counter.count_many(pieces)))
        units_of = {i.id: context_units(i, counter, counts) for i in instances}
        supply = self._padding_supply(sources, units_of, counter)
        if not supply.articles and not supply.paragraphs:
            raise UserError("no padding text: pass --padding with a WikiText raw file or directory")
        refills = RefillSource(supply, {title for i in instances for title, _ in i.supporting})
        bands = LengthBand.tight_bands(context.config.lengths, context.config.band_slack)
        return PoolStock(context, bands, instances, units_of, supply, refills)

    def _padding_supply(self, sources: Sources, units_of: dict[str, list[Unit]], counter: TokenCounter) -> PaddingSupply:
        articles = []
        for article_id, text in sources.articles:
            segments = text_segments(text, counter, origin=f"padding:{article_id}")
            articles.append(Unit(id=f"article:{article_id}", kind="article", segments=tuple(segments)))
        paragraphs, seen = [], set()
        for instance in sources.instances:  # sorted by id: the first copy of a title wins
            for unit in units_of[instance.id]:
                title = unit.id.split(":", 1)[1]
                if title in seen:
                    continue
                seen.add(title)
                origin = f"padding:paragraph:{title}"
                paragraphs.append(Unit(id=f"paragraph:{title}", kind="paragraph",
                                       segments=tuple(with_origin(s, origin) for s in unit.segments)))
        return PaddingSupply(articles, paragraphs)

    def _positives(self, stock: PoolStock, instance: Instance) -> list[Built]:
        """The positive at each length, each grown from the previous one; stops at the first
        length that cannot be built (counted). Built on first use, so a small build touches only
        the instances it needs."""
        if instance.id in stock.positives:
            return stock.positives[instance.id]
        counter, report = stock.context.counter, stock.context.report
        articles, paragraphs = stock.supply.usable(instance)
        out: list[Built] = []
        units = list(stock.units_of[instance.id])
        for level, band in enumerate(stock.bands):
            lo, hi = positive_window(band)
            try:
                units = grow(units, level, lo, hi, articles, paragraphs,
                             stock.context.rng(instance.id, band.target, "positive"), GROWTH_PIECES)
            except FitError as error:
                reason = f"context_longer_than_{band.name}" if error.reason == "already_longer" else \
                    f"positive_{band.name}_{error.reason}"
                report.skip(reason, instance.id)
                break
            built = Built.measured(units, trim_edges(units_document(f"{instance.id}@{band.name}", units), counter),
                                   counter)
            if not lo <= built.n_tokens <= band.hi - hard_negative_tolerance(band.hi):
                report.skip(f"positive_{band.name}_recount_outside_window", instance.id)
                break
            out.append(built)
        stock.positives[instance.id] = out
        return out

    def _query(self, instance: Instance) -> Query:
        return Query(id=f"q:{instance.id}", text=instance.question, instruction=INSTRUCTION, source_id=instance.id,
                     n_tokens=default_counter().count(instance.question))

    def _positive_candidate(self, instance: Instance, built: Built, refilled: list[dict]) -> Candidate:
        return Candidate(
            id=f"d:{instance.id}", document=built.document, role=POSITIVE, group=f"q:{instance.id}",
            source_id=instance.id, n_tokens=built.n_tokens,
            provenance={"variant": "original", "answer": instance.answer, "n_evidence": len(instance.supporting),
                        "evidence": built.evidence, "refilled": refilled, "padding": built.padding})

    def _pool(self, difficulty: str, band: LengthBand) -> Pool:
        return Pool(name=pool_name(self.name, difficulty, band), task=self.task, dataset=self.name,
                    difficulty=difficulty, band=band)

    def _hard_pool(self, stock: PoolStock, level: int, order: list[Instance],
                   hard_positives: dict[str, tuple[Built, list[dict]]], plans: dict[str, tuple] | None = None) -> Pool:
        """The hard pool of a length; ``hard_positives`` gets each query's refilled positive and
        its refilled sentences (instance id -> (Built, provenance)), for the easy pool, and
        ``plans`` (when given) each query's refill plan and variants, for the lexical pool."""
        band, context = stock.bands[level], stock.context
        pool = self._pool("hard", band)
        guard = PoolEvidenceGuard()
        bar = context.report.progress_bar(min(context.cap, len(order)), pool.name, "query")

        def make(instance: Instance):
            built = self._positives(stock, instance)
            if len(built) <= level:
                return None
            plan = stock.planned.pop((instance.id, level), None)
            if plan is None:
                plan = hard_plan(context, instance, built[level], pool.name, stock.refills)
            assembled = hard_assemble(instance, built[level], band, plan, context.counter)
            if isinstance(assembled, str):
                raise Skip(f"hard_{band.name}_{assembled}")
            positive, refilled, variants = assembled
            if not guard.admit(instance, [positive.units, *(made.units for _, made, _ in variants)]):
                raise Skip(f"hard_{band.name}_evidence_shared_with_another_query")
            hard_positives[instance.id] = (positive, refilled)
            if plans is not None:
                plans[instance.id] = (plan, variants)
            bar.update(1)
            return self._query(instance), self._positive_candidate(instance, positive, refilled), [Candidate(
                id=f"d:{instance.id}:{variant}", document=made.document, role=HARD_NEGATIVE,
                group=f"q:{instance.id}", source_id=instance.id, n_tokens=made.n_tokens,
                provenance={"variant": variant, "removed": removed, "evidence": made.evidence, "padding": made.padding})
                for variant, made, removed in variants]

        fill_pool(pool, order, make, context, describe=lambda instance: instance.id)
        bar.close()
        return pool

    def _lexical_pool(self, stock: PoolStock, level: int, order: list[Instance],
                      hard_positives: dict[str, tuple[Built, list[dict]]], hard_groups: dict[str, tuple]) -> Pool:
        """The hard pool's queries (``order``), in its order, each with the hard pool's variants
        and a positive whose one refilled sentence is chosen so that BM25 ranks it below as many
        of them as dealt (``_hotpotqa_hard.lexical_plan``). The ranks are dealt over the pool
        (``ops.lexical.balanced_ranks``: each held by as many queries as each other) among those
        each query's refills can reach (``lexical_rank_range``), and last the pool is levelled,
        for the query-blind rules and for BM25's top, as they read the pool itself
        (``level_the_pool``); a query that can reach no rank, or whose rank is not needed to
        level the others, or whose dealt rank was not reached, or that leaves in the levelling,
        leaves this pool only (a counted skip)."""
        band, context = stock.bands[level], stock.context
        pool = self._pool(LEXICAL, band)
        # the pool's documents are its positives and copies of most of them: BM25 over the hard
        # pool's positives stands in for the harness's over the pool (``ops.query_weight``)
        words = UnitWords()
        index = BM25Index(words.document(hard_positives[i.id][0].units) for i in order) if order else None
        guard = PoolEvidenceGuard()

        def weighed(instance: Instance):
            """(the query's scorer, its variants' scores, its positive's place weights)."""
            scorer = QueryScorer(index, bm25_tokenize(instance.question), index.average_length)
            scores = [words.score(scorer, made.units) for _, made, _ in hard_groups[instance.id][1]]
            original = self._positives(stock, instance)[level]
            return scorer, scores, lexical_place_weights(instance, original, scorer, words)

        # each query weighed once: the ranks it can reach are dealt from it, and its refill is sought with it
        weighing = {instance.id: weighed(instance)
                    for instance in context.report.bar(order, f"{pool.name}: ranks each query can reach", "query")}
        ranges = [lexical_rank_range(weighing[i.id][2], weighing[i.id][1]) for i in order]
        dealt = dict(zip((i.id for i in order), zip(ranges, balanced_ranks(
            ranges, context.config.negatives_per_query + 1, context.rng(pool.name, "ranks")))))
        bar = context.report.progress_bar(min(context.cap, len(order)), pool.name, "query")

        def make(instance: Instance):
            plan, hard_variants = hard_groups[instance.id]
            reach, above = dealt[instance.id]
            if reach is None:
                raise Skip(f"lexical_{band.name}_rank_unreachable")
            if above is None:
                raise Skip(f"lexical_{band.name}_rank_not_needed")
            scorer, scores, weights = weighing[instance.id]
            original = self._positives(stock, instance)[level]
            planned = lexical_plan(context, instance, original, plan, scores, above, pool.name, stock.refills, scorer,
                                   words, weights)
            if isinstance(planned, str):
                raise Skip(f"lexical_{band.name}_{planned}")
            lexical, gap = planned
            # the positive alone: the variants are the hard pool's, as long as their positive's
            assembled = hard_assemble(instance, original, band, lexical[:1], context.counter)
            if isinstance(assembled, str):
                raise Skip(f"lexical_{band.name}_{assembled}")
            positive, refilled, _ = assembled
            variants = hard_variants
            if any(abs(made.n_tokens - positive.n_tokens) > hard_negative_tolerance(positive.n_tokens)
                   for _, made, _ in variants):
                raise Skip(f"lexical_{band.name}_length_mismatch")
            score = words.score(scorer, positive.units)
            if not gap.holds(score):  # the finished document
                raise Skip(f"lexical_{band.name}_positive_off_rank")
            if not guard.admit(instance, [positive.units, *(made.units for _, made, _ in variants)]):
                raise Skip(f"lexical_{band.name}_evidence_shared_with_another_query")
            bar.update(1)
            candidate = self._positive_candidate(instance, positive, refilled)
            candidate.provenance["query_bm25"] = {"score": round(score, 4), "variants_above": gap.above,
                                                 "rank_dealt": above}
            return self._query(instance), candidate, [Candidate(
                id=f"d:{instance.id}:{variant}", document=made.document, role=HARD_NEGATIVE,
                group=f"q:{instance.id}", source_id=instance.id, n_tokens=made.n_tokens,
                provenance={"variant": variant, "removed": removed, "evidence": made.evidence, "padding": made.padding,
                            "query_bm25": {"score": round(variant_score, 4)}})
                for (variant, made, removed), variant_score in zip(variants, scores)]

        fill_pool(pool, order, make, context, describe=lambda instance: instance.id)
        bar.close()
        pool, left_for_rules, left_for_top = level_the_pool(pool, context.rng(pool.name, "level_in_pool"))
        for reason, left in (("rules", left_for_rules), ("top", left_for_top)):
            for query in left:
                context.report.skip(f"lexical_{band.name}_{reason}_not_level_in_pool", query.source_id)
        return pool

    def _easy_pool(self, stock: PoolStock, level: int, order: list[Instance],
                   hard_positives: dict[str, tuple[Built, list[dict]]]) -> Pool:
        """Queries from ``order`` (the hard pool's, in the seeded order), each with its positive
        (the hard pool's, ``hard_positives``) and ``negatives_per_query`` other instances'
        contexts padded alike."""
        band, context = stock.bands[level], stock.context
        pool = self._pool("easy", band)
        # Every query ranks every candidate of the pool, so an instance serves a pool once: as a
        # positive or as one easy negative, never both (its context would then be a second
        # document holding that query's evidence); see also PoolEvidenceGuard.
        draw = EasyDraw(pool.name, level, {instance.id for instance in order},
                        {title for instance in order for title, _ in instance.supporting})
        guard = PoolEvidenceGuard()
        bar = context.report.progress_bar(min(context.cap, len(order)), pool.name, "query")

        def make(instance: Instance):
            if instance.id in draw.claimed:
                return None  # already an easy negative of an earlier query
            positive, refilled = hard_positives[instance.id]
            negatives = self._easy_negatives(stock, draw, instance, positive)
            if len(negatives) < context.config.negatives_per_query:
                raise Skip(f"easy_{band.name}_not_enough_negatives")
            if not guard.admit(instance, [positive.units, *(made.units for _, made in negatives)]):
                raise Skip(f"easy_{band.name}_evidence_shared_with_another_query")
            draw.claimed.update({instance.id, *(other.id for other, _ in negatives)})
            bar.update(1)
            return self._query(instance), self._positive_candidate(instance, positive, refilled), [Candidate(
                id=f"d:{other.id}:for:{instance.id}", document=made.document, role=EASY_NEGATIVE,
                group=f"q:{instance.id}", source_id=other.id, n_tokens=made.n_tokens,
                provenance={"variant": "other_instance", "instance": other.id, "padding": made.padding})
                for other, made in negatives]

        fill_pool(pool, order, make, context, describe=lambda instance: instance.id)
        bar.close()
        return pool

    def _easy_negatives(self, stock: PoolStock, draw: EasyDraw, instance: Instance,
                        positive: Built) -> list[tuple[Instance, Built]]:
        """Up to ``negatives_per_query`` other instances' contexts padded to lengths exchangeable
        with the positive's, drawn in a seeded order: instances that are no query of the pool
        first (each one claimed as a negative could otherwise have been an easy query itself),
        none that shares a paragraph with this query or holds its evidence."""
        k, seed = stock.context.config.negatives_per_query, stock.context.config.seed
        titles = {t for t, _ in instance.context}
        evidence = instance.evidence_texts()
        # keyed by the pool's name (which holds the builder's), as it always was: not context.rng,
        # whose builder key would draw other offsets and change the data
        offsets = exchangeable_offsets(positive.n_tokens, k, derive_rng(seed, draw.name, instance.id, "offsets"))
        drawn = seeded_order(stock.instances, stock.context.rng(draw.name, instance.id, "negatives"))
        negatives = []
        for other in [o for o in drawn if o.id not in draw.queries] + [o for o in drawn if o.id in draw.queries]:
            if len(negatives) == k:
                break
            if other.id == instance.id or other.id in draw.claimed or titles & {t for t, _ in other.context}:
                continue  # a shared Wikipedia paragraph could carry this query's evidence
            if any(e in u.text for u in stock.units_of[other.id] for e in evidence):
                continue
            made = self._other_document(stock, draw, instance, other, positive.n_tokens + offsets[len(negatives)])
            if made is not None:
                negatives.append((other, made))
        return negatives

    def _other_document(self, stock: PoolStock, draw: EasyDraw, instance: Instance, other: Instance,
                        aim: int) -> Built | None:
        """Another instance's context padded to about ``aim`` tokens with padding that carries
        neither this query's answer nor its evidence, grown level by level exactly as a positive
        grows (``grow``): padded in one pass instead, a longer easy negative would hold fewer,
        larger units than the positive, and its paragraph-break density would tell them apart."""
        bands, level, counter = stock.bands, draw.level, stock.context.counter
        band = bands[level]
        tolerance = hard_negative_tolerance(aim)
        articles, paragraphs = stock.supply.usable(instance, exclude_titles={t for t, _ in other.context} | draw.gold)
        units = list(stock.units_of[other.id])
        try:
            for step in range(level):
                rng = stock.context.rng(bands[step].target, instance.id, other.id, "easy")
                units = grow(units, step, *positive_window(bands[step]), articles, paragraphs, rng, GROWTH_PIECES)
        except FitError:
            return None
        # the last step lands where its last unit takes it past the window's start: seldom at the
        # aim, and on average above it (units are large beside the window), so that "the shortest"
        # would find the positive. Of a few draws, the one nearest the aim is taken
        lo, hi = max(band.lo + RECOUNT_MARGIN, aim - tolerance // 2), min(band.hi - RECOUNT_MARGIN, aim + tolerance // 2)
        nearest = None
        for attempt in range(EASY_LAST_STEP_DRAWS):
            rng = stock.context.rng(bands[level].target, instance.id, other.id, "easy", *([attempt] if attempt else []))
            try:
                grown = grow(units, level, lo, hi, articles, paragraphs, rng, GROWTH_PIECES)
            except FitError:
                continue
            document = trim_edges(units_document(f"{other.id}@{band.name}:for:{instance.id}", grown), counter)
            n_tokens = summed_tokens(document, counter)
            if not band.contains(n_tokens) or any(e in document.text for e in instance.evidence_texts()):
                continue
            if nearest is None or abs(n_tokens - aim) < abs(nearest.n_tokens - aim):
                nearest = Built(grown, document, n_tokens)
        return nearest

    # -- checks and card -------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        return check_hotpotqa_pool(pool_row, corpus, queries, qrels)

    def example_config(self, directory) -> HotpotQAConfig:
        root = Path(directory)
        from builders._hotpotqa_fixtures import write_hotpotqa_sources

        write_hotpotqa_sources(root, padding_dir=LOCAL_PADDING)
        return HotpotQAConfig(sources=str(root), lengths=(1024, 2048), max_queries_per_pool=4)

    def card_context(self, config: HotpotQAConfig, pools: list[Pool], report: BuildReport) -> dict:
        local = bool(config.sources)
        padding = self.padding_source(config)
        padding_kind = padding if isinstance(padding, str) else "local"  # "none", "hub" or "local"
        pairing = []
        for easy in (p for p in pools if p.difficulty == "easy"):
            hard = next((p for p in pools if p.difficulty == "hard" and p.band == easy.band), None)
            if hard is not None:
                shared = {q.id for q in easy.queries} & {q.id for q in hard.queries}
                pairing.append({"length": easy.band.name, "easy": len(easy.queries), "hard": len(hard.queries),
                                "shared": len(shared)})
        return {
            "instruction": INSTRUCTION,
            "pairing": pairing,
            "refill_choices": REFILL_CHOICES,
            "source_files": report.stats.get("source_files", []),
            "split": config.split,
            "padding": padding_kind,
            "refills": report.stats.get("refills") or refill_statistics(pools),
            "sources": [
                {"name": "HotpotQA (Yang et al., EMNLP 2018), distractor setting", "licence": HUB_SOURCE.licence,
                 "identity": (f"local files under `{Path(config.sources).name}`, split `{config.split}` "
                              "(its files and records: *Source records in this build*; sha256 in manifest.json)" if local
                              else f"`{HUB_SOURCE.repo}` @ `{HUB_SOURCE.revision}`, split `{HUB_SOURCE.split}` (dev)")},
                *([] if padding_kind == NO_PADDING else [{
                    "name": "WikiText (Merity et al., 2016), padding articles", "licence": HUB_PADDING.licence,
                    "identity": ("local WikiText raw files (sha256 in manifest.json)" if padding_kind == "local"
                                 else f"`{HUB_PADDING.repo}` `{HUB_PADDING.config}` @ `{HUB_PADDING.revision}`")}]),
            ],
        }


def _count_source_use(report: BuildReport, instances: list[Instance], pools: list[Pool]) -> None:
    """How many of each file's records the pools use, as a query or in a negative."""
    file_of = {i.id: origin_file(i.origin) for i in instances}
    for entry in report.stats.get("source_files", []):
        entry["in_pools"] = len({c.source_id for pool in pools for c in pool.candidates
                                 if file_of.get(c.source_id) == entry["file"]})
        entry["queries"] = {pool.name: sum(file_of.get(q.source_id) == entry["file"] for q in pool.queries)
                            for pool in pools}
