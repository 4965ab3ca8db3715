"""MMDocRAG Multi-Source Reasoning over interleaved text and image evidence (paper §3.2.2, A.2).

The query is a document question with 2 to 5 evidence quotes (text quotes and image quotes:
tables, charts, figures) that the query audit kept. The positive is the question's own quotes in
reading order, padded with whole quote blocks (a page's quotes) of other documents to the pool's
length; at longer lengths the same document grows by blocks inserted between its units so the
evidence keeps its relative depth. Hard negatives drop the first, the last or a middle gold quote
(both, when there are two): a text quote is refilled by whole sentences of the same length, an
image quote by an image of another document resized to its exact pixel size. In a hard group every
document holds as many refilled text quotes: the positive, and a variant that lost only an image,
have text quotes of their padding (other documents' pages) refilled the same way, so that the
positive is not the centre its variants' lengths scatter around. Easy negatives are other
questions' positives of the same length.

Sources: MMDocRAG's release (``readers.mmdocrag``: from the Hub or a folder), else MMDocIR's
annotations over the MMLongBench-Doc PDFs as a substitute (``readers.mmdocir``). Operations: quotes
as units and what a candidate holds (``ops.quotes``), the padding supply and the gold guard
(``ops.quote_supply``), growth and sentence refills (``ops.evidence``). The declared step
(``run_steps``) is the query audit, the build's one LLM call. Pool plan (``build_pools``, pure: every
image is rendered in ``load_sources``, a refill image is resized in memory): per length an easy and
a hard pool over the audited questions in one seeded order (``pool_plan.fill_pool``), and with
``--lexical-tier`` a lexical pool of the hard pool's groups with the positive's BM25 rank drawn
(``builders/_mmdocrag_lexical.py``).
The gold-quote checks are in ``builders/_mmdocrag_checks.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from builders._mmdocrag_checks import check_quote_pool, evidence_statistics
from builders._mmdocrag_lexical import lexical_positive
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.build.capacity import LengthLimit
from mmlongembed.core.documents import image_segment
from mmlongembed.core.errors import FitError, UserError
from mmlongembed.llm import Audited, AuditItem, LLMConfig, audit_queries
from mmlongembed.output.manifest import files_identity
from mmlongembed.media.pdf import PageRenderer, RenderOptions, StoredImage
from mmlongembed.ops.multisource.answers import answer_pattern as whole_word_answer
from mmlongembed.ops.bm25 import BM25Index, QueryScorer, bm25_tokenize
from mmlongembed.ops.multisource.evidence import Unit, find_evidence, grow, units_document
from mmlongembed.ops.multisource.lexical_refill import UnitWords
from mmlongembed.checks.levelling import level_the_pool
from mmlongembed.ops.length import exact_tokens, trim_edges
from mmlongembed.ops.measured import RECOUNT_MARGIN, Built, positive_window
from mmlongembed.ops.multisource.quote_supply import GoldGuard, Supply, padding_pages
from mmlongembed.ops.multisource.quotes import (
    Instance, content_keys, context_units, evidence_positions, holds, refill_padding_quotes, replace_image_evidence,
    replace_text_evidence, sentence_refill)
from mmlongembed.build.pool_plan import Made, PoolContext, Skip, fill_pool
from mmlongembed.core.pools import (
    EASY_NEGATIVE, HARD_NEGATIVE, LEXICAL, LEXICAL_TIER_HELP, POSITIVE, Candidate, LengthBand, Pool, Query,
    hard_negative_tolerance, pool_name)
from mmlongembed.readers.mmdocir import SubstituteOptions, SubstituteReader
from mmlongembed.readers.mmdocrag import (
    HUB_SOURCE, IMAGE_ARCHIVE, Sources, hub_files, hub_source, image_files, read_original, source_layout)
from mmlongembed.core.rng import derive_rng, seeded_order
from mmlongembed.core.tokens import default_counter

INSTRUCTION = ("Given a question about a document, retrieve the document that contains all the text and image "
               "evidence needed to answer it.")
GROWTH_PIECES = 4
PIECE_SHARE = 0.25  # share of padding pages used quote by quote (the rest as whole-page blocks)
# padding units of each kind a positive draws from (a random sample of the usable ones, drawn
# larger when it runs out): pages of a few hundred tokens, so this fills 32K a few times over
PADDING_SAMPLE = 150
NOT_ANCHORS = frozenset({"yes", "no", "not answerable"})  # answers any document holds as words
SUBSTITUTE = "MMDocIR layout annotations over the MMLongBench-Doc PDFs (substitute for MMDocRAG)"
ORIGINAL = "MMDocRAG JSONL (text_quotes, img_quotes, gold_quotes) with its images"


@dataclass
class MMDocRAGConfig(CommonConfig, LLMConfig, RenderOptions):
    max_queries_per_pool: int = field(default=160, metadata={"help": "cap on queries per pool (paper: 160)"})
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; the smallest is built first and each longer one grows from it"})
    band_slack: float = field(default=0.1, metadata={"help": "every candidate of pool T lies in [T*(1-slack), T]"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy and hard negatives per query (paper: 3)"})
    quotes_per_instance: int = field(default=15, metadata={
        "help": "substitute: quotes in an instance's own context, gold included (MMDocRAG ships 15 or 20)"})
    chunk_tokens: int = field(default=120, metadata={
        "help": "substitute: tokens of a text quote cut from a page's text layer (non-evidence quotes, padding)"})
    min_figure_points: float = field(default=72.0, metadata={
        "help": "substitute: smallest side (PDF points) of an embedded picture used as a padding image"})
    question_set: str = field(default="evaluation_20", metadata={
        "help": "the MMDocRAG question set read, by file stem: evaluation_20 (default), evaluation_15, dev_20 or "
                "dev_15 (dev and evaluation are disjoint; _15/_20 are the same questions with 15 or 20 quotes), "
                "or the stem of your own JSONL in that format"})
    hub_revision: str = field(default=HUB_SOURCE.revision, metadata={
        "help": f"without --sources: the commit of {HUB_SOURCE.repo} to read (a full sha pins it exactly)"})
    lexical_tier: bool = field(default=True, metadata={"help": LEXICAL_TIER_HELP})


def answer_pattern(answer: str) -> re.Pattern | None:
    """Whole-word pattern of a distinctive answer (4+ characters with a letter); short or
    numeric answers ("8", "21%") occur in any document and are not checked."""
    return whole_word_answer(answer, not_anchors=NOT_ANCHORS, min_chars=4, needs_letter=True)


@dataclass
class Plan:
    """What every pool of one build shares: the context, the length bands, the queries' seeded
    order, the padding supply, each instance's context as units, the renderer that resizes refill
    images (in memory, with the sources' settings) and the positives built so far."""

    context: PoolContext
    bands: list[LengthBand]
    order: list[Instance]
    supply: Supply
    units_of: dict[str, list[Unit]]
    renderer: PageRenderer
    memo: dict[tuple[str, str], list[Built]] = field(default_factory=dict)

    def positives_of(self, instance: Instance, exclude_doc: str = "") -> list[Built]:
        """The instance's document at every length; ``exclude_doc``: also without padding
        from that document (an easy negative for a query of that document, built by the
        same procedure as the positives so that lengths are exchangeable)."""
        key = (instance.id, exclude_doc)
        if key not in self.memo:
            self.memo[key] = self._positives(instance, self.context.report if not exclude_doc
                                             else BuildReport(progress=False), exclude_doc)
        return self.memo[key]

    def _positives(self, instance: Instance, report: BuildReport, exclude_doc: str,
                   sample: int | None = None) -> list[Built]:
        """The positive at each length, each grown from the previous one by whole blocks of
        other documents; stops at the first length that cannot be built (counted). The padding is
        a random sample of the usable blocks, drawn again larger if it runs out before they do."""
        sample = sample or PADDING_SAMPLE
        padding = self.supply.padding_for(instance, self.context.rng(instance.id, "padding", sample), sample)
        blocks = [u for u in padding.blocks if self.supply.doc_of_block[u.id] != exclude_doc]
        pieces = [u for u in padding.pieces if self.supply.doc_of_block[u.id] != exclude_doc]
        counter = self.context.counter
        out: list[Built] = []
        units = list(self.units_of[instance.id])
        for level, band in enumerate(self.bands):
            lo, hi = positive_window(band)
            rng = self.context.rng(instance.id, band.target, "positive", exclude_doc)
            try:
                units = grow(units, level, lo, hi, blocks, pieces, rng, GROWTH_PIECES)
            except FitError as error:
                if error.reason == "not_enough_padding" and not padding.complete:
                    return self._positives(instance, report, exclude_doc, sample * 8)
                reason = f"context_longer_than_{band.name}" if error.reason == "already_longer" else \
                    f"positive_{band.name}_{error.reason}"
                report.skip(reason, instance.id)
                break
            document = trim_edges(units_document(f"{instance.id}@{band.name}", units), counter)
            n_tokens = exact_tokens(document, counter)
            if not lo <= n_tokens <= band.hi - hard_negative_tolerance(band.hi):
                report.skip(f"positive_{band.name}_recount_outside_window", instance.id)
                break
            out.append(Built(units, document, n_tokens))
        return out


@dataclass
class PoolState:
    """One pool being filled: its band, its level (the band's index: which positive), the gold
    guard and, for an easy pool, the instances already used as queries or negatives."""

    pool: Pool
    band: LengthBand
    level: int
    guard: GoldGuard = field(default_factory=GoldGuard)
    claimed: set[str] = field(default_factory=set)
    # a hard pool's groups (instance id -> (the whole positive, the positive as shown, the variants,
    # the query and candidates made of them)), for the lexical pool
    groups: dict[str, tuple[Built, Built, list, Made]] = field(default_factory=dict)


def no_usable_instance(where: str, report: BuildReport) -> UserError:
    """The one line for sources that gave no instance: what was skipped and why, and, when image
    quotes had no image (a JSONL downloaded without its images), where the images are looked for."""
    hint = ""
    if report.skipped.get("missing_quote_image"):
        hint = ("; the images of its image quotes are missing: put the release's images/ folder or images.zip "
                "beside the JSONL or in its parent folder")
    return UserError(f"no usable instance (2 to 5 evidence quotes) {where} (skipped: {report.skip_counts()}){hint}")


@register
class MMDocRAGBuilder(Builder):
    """Multi-Source Reasoning over interleaved text and image evidence (MMDocRAG): find the
    document that holds every text and image quote a question needs, against copies that lack one."""

    name = "mmdocrag"
    # 1.2.0: padding drawn from a random sample of the usable pages (linear in the sources); MMDocRAG's
    # own files refill a text quote from its document's other questions' quotes (none before)
    # 1.3.0: the lexical pools (``--lexical-tier``) beside easy and hard; those two are unchanged
    # 1.4.0: the lexical pools are levelled for the query-blind rules; easy and hard unchanged
    # 1.5.0: every document of a hard group holds as many refilled text quotes: the positive, and a
    # variant that lost only an image, have padding quotes refilled (at the paper's size the whole
    # positive lay at its group's centre in characters); no two copies of a group alike; the lexical
    # positive is always refilled, and the lexical pools are levelled for BM25's top too
    version = "1.5.0"  # 1.1.0: one question set (--question-set), q_id deduplicated, images.zip, the Hub
    task = "multi_source_reasoning"
    title = "MMLongEmbed Multi-Source Reasoning: MMDocRAG (interleaved text and images)"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Multi-Source Reasoning over interleaved text and image quotes: question -> its quotes padded with other "
        "documents' page blocks; hard negatives lose one gold quote (text refilled at equal length, images by "
        "another document's image at the exact size)"
    )
    source_formats = (
        "the Hub release `MMDocIR/MMDocRAG` without `--sources` (one question set, `--question-set`, default "
        "`evaluation_20`; a repeated `q_id` is skipped; images read from `images.zip`), the same files local (JSONL "
        "+ `images/` or `images.zip`), or the substitute: MMDocIR layout annotations over the MMLongBench-Doc PDFs "
        "(text layer inside boxes, crops of table/chart/figure boxes)"
    )
    config_class = MMDocRAGConfig
    card_template = "mmdocrag.md.j2"
    licence = "cc-by-nc-4.0"

    def __init__(self):
        self._substitute: bool | None = None
        self._hub_paths: list[Path] | None = None

    # -- sources: MMDocRAG's release (the Hub or a folder), else the MMDocIR substitute --------
    def load_sources(self, config: MMDocRAGConfig, report: BuildReport) -> Sources:
        """The instances and padding pages, every image quote decoded and rendered here (the
        sources keep their renderer, for the refill images ``build_pools`` resizes)."""
        renderer = PageRenderer(config.render_settings())
        if not config.sources:
            self._hub_paths = hub_files(config.question_set, config.hub_revision, self.name)
            jsonl, archive = self._hub_paths
            sources = read_original([jsonl], renderer, report, archives=[archive])
            self._substitute = False
            if not sources.instances:
                raise no_usable_instance(f"in {HUB_SOURCE.repo} {config.question_set}.jsonl", report)
            return sources
        original, annotations, pdf_dirs = source_layout(config.sources, config.question_set)
        if original:
            sources = read_original(original, renderer, report)
        elif annotations and pdf_dirs:
            options = SubstituteOptions(config.seed, config.quotes_per_instance, config.chunk_tokens,
                                        config.min_figure_points)
            reader = SubstituteReader(annotations, pdf_dirs, renderer, options, default_counter(), report)
            sources = reader.read()
        else:
            raise UserError(f"no MMDocRAG JSONL (gold_quotes) and no MMDocIR annotations with PDFs under "
                            f"{config.sources}")
        self._substitute = sources.substitute
        if not sources.instances:
            raise no_usable_instance(f"under {config.sources}", report)
        return sources

    def source_identity(self, config: MMDocRAGConfig) -> dict:
        if not config.sources:
            paths = self._hub_paths
            return {"kind": "hub", "name": "MMDocRAG", "licence": HUB_SOURCE.licence,
                    **hub_source(config.hub_revision).identity,
                    "files": files_identity(paths) if paths else [f"{config.question_set}.jsonl", IMAGE_ARCHIVE],
                    "question_set": config.question_set,
                    "substitute": False, "format": ORIGINAL, "render": config.render_settings().identity()}
        original, annotations, pdf_dirs = source_layout(config.sources, config.question_set)
        files = list(original) or [*annotations, *(p for d in pdf_dirs for p in d.rglob("*.pdf"))]
        for path in original:
            files += image_files(path)
        return {"kind": "local", "name": "MMDocRAG", "licence": "CC BY-NC 4.0",
                "question_set": config.question_set if original else None,
                "substitute": not original, "format": ORIGINAL if original else SUBSTITUTE,
                "files": files_identity(sorted({f for f in files if f.is_file()}), Path(config.sources)),
                "render": config.render_settings().identity()}

    # -- pools: the audited questions in a seeded order, an easy and a hard pool per length ----
    def largest_length(self, sources: Sources, config: MMDocRAGConfig) -> LengthLimit | None:
        """A document grows from its context by padding pages and refill text: all the quotes and
        refill text of the sources together bound it."""
        quotes = {(i.doc, q.id): q for i in sources.instances for q in i.quotes}
        quotes.update({(b.doc, q.id): q for b in sources.blocks for q in b.quotes})
        texts = [q.text for q in quotes.values() if q.kind == "text" and q.text]
        texts += [text for refills in sources.refill_text.values() for _, text in refills]
        images = sum(q.image.tokens for q in quotes.values() if q.image is not None)
        total = sum(default_counter().count_many(texts)) + images
        return LengthLimit(total, f"a document grows from its context, padding pages and refill text, which hold "
                                  f"{total} tokens in all in these sources")

    # -- the query audit ------------------------------------------------------------------
    def run_steps(self, sources: Sources, config: MMDocRAGConfig, report: BuildReport) -> Audited:
        """The query audit (the LLM of ``--llm``, or its rules under ``none``) over each question
        with its gold quotes: which questions may be queries."""
        audit = audit_queries([AuditItem(i.id, i.question, i.answer, tuple(
            q.text if q.kind == "text" else "[image quote]" for q in i.gold_quotes())) for i in sources.instances],
            config, report)
        return Audited(sources, frozenset(audit.kept))

    def build_pools(self, audited: Audited, config: MMDocRAGConfig, report: BuildReport) -> list[Pool]:
        """Pure: the audited sources in, pools out (no file read, no LLM call; a refill image
        is resized in memory by the sources' renderer)."""
        sources: Sources = audited.sources
        context = PoolContext(self.name, config, default_counter(), report)
        instances = sources.instances
        kept = [i for i in instances if i.id in audited.kept]
        supply = Supply.of(sources.blocks, sources.refill_text, context.counter,
                           whole=lambda b: context.rng("piece", b.doc, b.page).random() >= PIECE_SHARE,
                           answer_pattern=answer_pattern)
        plan = Plan(context, LengthBand.tight_bands(config.lengths, config.band_slack),
                    seeded_order(kept, context.rng("order")), supply,
                    {i.id: context_units(i, context.counter) for i in instances}, sources.renderer)
        pools = []
        for level, band in enumerate(plan.bands):
            pools.append(self._pool(plan, "easy", band, level, self._easy_query).pool)
            hard = self._pool(plan, "hard", band, level, self._hard_query)
            pools.append(hard.pool)
            if config.lexical_tier:
                lexical = self._lexical_pool(plan, band, level, hard)
                pools += [lexical] if lexical.queries else []  # each query left out is a counted skip
        stats = sources.renderer.stats()
        report.notes.append(f"{'substitute: ' + SUBSTITUTE if sources.substitute else ORIGINAL}; "
                            f"{len(instances)} instances with 2-5 evidence quotes, {len(kept)} kept by the audit; "
                            f"{stats['renders']} images rendered or re-encoded in {stats['seconds']} s")
        # how long rendering took is a fact of this build, not of its sources (the up-to-date rule
        # compares sources)
        report.stats["rendering"] = stats
        return pools

    def _query(self, instance: Instance) -> Query:
        return Query(id=f"q:{instance.id}", text=instance.question, instruction=INSTRUCTION, source_id=instance.id,
                     n_tokens=default_counter().count(instance.question), extra={"doc_name": instance.doc})

    def _positive_candidate(self, instance: Instance, built: Built) -> Candidate:
        return Candidate(
            id=f"d:{instance.id}", document=built.document, role=POSITIVE, group=f"q:{instance.id}",
            source_id=instance.id, n_tokens=built.n_tokens, extra={"doc_name": instance.doc},
            provenance={"variant": "original", "answer": instance.answer, "n_evidence": len(instance.gold),
                        "evidence": evidence_positions(built.document, built.n_tokens, default_counter()),
                        "padding": padding_pages(built.units)})

    def _pool(self, plan: Plan, difficulty: str, band: LengthBand, level: int, query_of,
              order: list[Instance] | None = None) -> PoolState:
        """One pool of this length: each question in ``order`` (the plan's) made into its query by
        ``query_of(plan, state, instance)`` (``_easy_query``, ``_hard_query`` or ``_lexical_query``)."""
        state = PoolState(Pool(name=pool_name(self.name, difficulty, band), task=self.task, dataset=self.name,
                               difficulty=difficulty, band=band, modality="mixed"), band, level)
        fill_pool(state.pool, plan.order if order is None else order,
                  lambda instance: query_of(plan, state, instance), plan.context, describe=lambda instance: instance.id)
        return state

    # -- easy: other questions' positives of the same length -------------------------------
    def _easy_query(self, plan: Plan, state: PoolState, instance: Instance) -> Made | None:
        built = plan.positives_of(instance)
        if instance.id in state.claimed or len(built) <= state.level:
            return None
        positive, gold = built[state.level], instance.gold_quotes()
        if not state.guard.unclaimed(gold) or not state.guard.clean(positive.document):
            raise Skip(f"easy_{state.band.name}_evidence_shared_with_another_query")
        negatives = self._easy_negatives(plan, state, instance)
        if len(negatives) < plan.context.config.negatives_per_query or not state.guard.admit(
                gold, [positive.document, *(m.document for _, m in negatives)]):
            raise Skip(f"easy_{state.band.name}_not_enough_negatives")
        state.claimed.update({instance.id, *(o.id for o, _ in negatives)})
        return self._query(instance), self._positive_candidate(instance, positive), [Candidate(
            id=f"d:{other.id}:for:{instance.id}", document=made.document, role=EASY_NEGATIVE,
            group=f"q:{instance.id}", source_id=other.id, n_tokens=made.n_tokens, extra={"doc_name": other.doc},
            provenance={"variant": "other_instance", "instance": other.id, "padding": padding_pages(made.units)})
            for other, made in negatives]

    def _easy_negatives(self, plan: Plan, state: PoolState, instance: Instance) -> list[tuple[Instance, Built]]:
        """Up to k other questions' documents (of other documents, not yet claimed), in a seeded
        order, built without padding from the query's document and holding none of its gold."""
        rng = plan.context.rng(state.pool.name, instance.id, "negatives")
        gold, negatives = instance.gold_quotes(), []
        for j in rng.permutation(len(plan.order)):
            other = plan.order[int(j)]
            if len(negatives) == plan.context.config.negatives_per_query:
                break
            if other.id == instance.id or other.id in state.claimed or other.doc == instance.doc:
                continue
            others = plan.positives_of(other, instance.doc)
            if len(others) <= state.level or not state.guard.clean(others[state.level].document):
                continue
            made = others[state.level]
            text, images = content_keys(made.document)
            if not any(holds(text, images, q) for q in gold):
                negatives.append((other, made))
        return negatives

    # -- hard: the positive without one gold quote, refilled to the same length ------------
    def _hard_query(self, plan: Plan, state: PoolState, instance: Instance) -> Made | None:
        built = plan.positives_of(instance)
        if len(built) <= state.level:
            return None
        whole = built[state.level]
        try:
            positive, refilled, variants = self._hard_group(plan, state, instance, whole)
        except Skip as skipped:
            raise Skip(f"hard_{state.band.name}_{skipped.reason}") from None
        if not state.guard.admit(instance.gold_quotes(), [positive.document, *(m.document for _, m, _, _ in variants)]):
            raise Skip(f"hard_{state.band.name}_evidence_shared_with_another_query")
        counter = plan.context.counter
        candidate = self._positive_candidate(instance, positive)
        group = self._query(instance), dataclasses.replace(candidate, provenance={
            **candidate.provenance, "refilled": refilled}), [Candidate(
                id=f"d:{instance.id}:{variant}", document=made.document, role=HARD_NEGATIVE,
                group=f"q:{instance.id}", source_id=instance.id, n_tokens=made.n_tokens,
                extra={"doc_name": instance.doc},
                provenance={"variant": variant, "removed": removed, "refilled": padding,
                            "evidence": evidence_positions(made.document, made.n_tokens, counter),
                            "padding": padding_pages(made.units)})
            for variant, made, removed, padding in variants]
        # the lexical pool starts again from the whole positive: its own refill draws the rank
        state.groups[instance.id] = (whole, positive, [(v, m, r) for v, m, r, _ in variants], group)
        return group

    def _hard_group(self, plan: Plan, state: PoolState, instance: Instance, whole: Built) -> tuple:
        """The positive as the pool shows it, the provenance of its refills, and three copies of the
        whole positive, each without a gold quote (first / last / a random middle one, or both of
        two): text refilled by whole sentences of the same length (the same document's unused text
        first), images by another document's image resized to the exact size. Every document of
        the group then holds as many refilled text quotes as the variant with the most: the
        positive and the variants with fewer have text quotes of their padding (other documents'
        pages; each document of the group its own) refilled the same way, from the padding page's
        document's text (``refill_padding_quotes``), so that the positive is one of its group and not the
        centre the variants' lengths scatter around. Returns (positive, its refills,
        [(variant, made, removed, padding refills)]); raises Skip with the reason when one cannot
        be made."""
        n, config, counter = len(instance.gold), plan.context.config, plan.context.counter
        rng = plan.context.rng(state.pool.name, instance.id, "hard")
        plans = [("drop_first", [0]), ("drop_last", [n - 1])]
        plans.append(("drop_middle", [int(rng.integers(1, n - 1))]) if n >= 3 else ("drop_both", [0, 1]))
        plans = plans[: config.negatives_per_query]
        sources_of_doc = self._text_sources(plan, instance, whole)
        text_sources = sources_of_doc(instance.doc)
        used_docs = {plan.supply.doc_of_block.get(u.id) for u in whole.units}
        tolerance = hard_negative_tolerance(whole.n_tokens)
        dropped, runs_at = [], defaultdict(set)  # the texts refilled at each gold quote: no two copies alike
        for variant, removed_indices in plans:
            units, removed = list(whole.units), []
            slack = max(1, (tolerance - RECOUNT_MARGIN) // len(removed_indices))
            for k in removed_indices:
                # this generator's key has no builder name: kept as first built, so the data stay the same
                run_rng = derive_rng(config.seed, state.pool.name, instance.id, variant, k)
                units, record = self._drop(units, k, instance, used_docs, text_sources, slack, run_rng, plan,
                                           runs_at[k])
                removed.append(record)
            dropped.append((variant, units, removed))
        text_refills = [sum(r["kind"] == "text" for r in removed) for _, _, removed in dropped]
        most = max(text_refills)
        aims = [r["tokens"] for _, _, removed in dropped for r in removed if r["kind"] == "text"]
        refill_slack = max(1, (tolerance - RECOUNT_MARGIN) // max(1, most))

        refilled_places: set[str] = set()  # each document of the group refills its own padding quotes

        def padding_sources(unit_id: str) -> list[Callable[[], list[Unit]]]:
            return sources_of_doc(plan.supply.doc_of_block[unit_id])

        def with_padding_refills(name: str, units: list[Unit], count: int) -> tuple[Built, list[dict]]:
            records = []
            if count:
                made = refill_padding_quotes(units, count, aims, padding_sources, refill_slack,
                                             plan.context.rng(state.pool.name, instance.id, name, "padding refill"),
                                             counter, avoid=refilled_places)
                if made is None:
                    raise Skip("no_padding_refill")
                units, records = made
                refilled_places.update(r["padding"] for r in records)
            document = trim_edges(units_document(f"{instance.id}@{state.band.name}" + (
                f":{name}" if name != "original" else ""), units), counter)
            return Built(units, document, exact_tokens(document, counter)), records

        positive, refilled = with_padding_refills("original", list(whole.units), most)
        if not state.band.contains(positive.n_tokens):
            raise Skip("length_mismatch")
        gold, out = instance.gold_quotes(), []
        for (variant, units, removed), count in zip(dropped, text_refills):
            made, padding = with_padding_refills(variant, units, most - count)
            if not state.band.contains(made.n_tokens) or abs(made.n_tokens - positive.n_tokens) > tolerance:
                raise Skip("length_mismatch")
            text, images = content_keys(made.document)
            if any(holds(text, images, gold[r["index"]]) for r in removed):
                raise Skip("removed_evidence_still_present")
            out.append((variant, made, removed, padding))
        return positive, refilled, out

    @staticmethod
    def _text_sources(plan: Plan, instance: Instance,
                      positive: Built) -> Callable[[str], list[Callable[[], list[Unit]]]]:
        """Per document, the sources of refill text for a quote of it, in order of preference, each
        listed when first needed (other documents' text is all of a corpus): that document's
        unused text, then the text of documents other than the question's (listed once for all)."""
        held = positive.document.render()[0]

        def fresh(units: list[Unit]) -> list[Unit]:  # a refill never repeats text the document holds
            return [u for u in units if "".join(s.text for s in u.segments).strip() not in held]

        elsewhere = functools.cache(lambda: fresh(plan.supply.refill_elsewhere(instance)))

        @functools.cache
        def sources(doc: str) -> list[Callable[[], list[Unit]]]:
            return [functools.cache(lambda: fresh(plan.supply.refill.get(doc, []))), elsewhere]

        return sources

    def _drop(self, units: list[Unit], k: int, instance: Instance, used_docs: set,
              text_sources: list[Callable[[], list[Unit]]], slack: int, rng: np.random.Generator,
              plan: Plan, taken: set[str]) -> tuple[list[Unit], dict]:
        """Gold quote ``k`` swapped for a refill: an image for a donor resized to its exact size,
        a text for a run of whole sentences within ``slack`` tokens of it (the first source that
        has one), none of the texts ``taken`` (refilled there in another copy of the group, which
        would then equal this one but for an image; the run is added to them). Returns the units
        and the removal's record."""
        u, s = find_evidence(units, k)
        segment = units[u].segments[s]
        if segment.is_visual:
            donor = plan.supply.image_donor(instance, used_docs, segment.height, segment.width, rng)
            if donor is None:
                raise Skip("no_image_donor")
            stored = plan.renderer.resized(StoredImage(donor.data, donor.height, donor.width),
                                           segment.height, segment.width)
            refill = image_segment(stored.data, stored.height, stored.width, origin=f"replacement:{donor.id}")
            return replace_image_evidence(units, k, refill, donor.id)
        found = sentence_refill(segment, text_sources, slack, rng, plan.context.counter,
                                lambda run: "".join(x.text for x in run) not in taken)
        if found is None:
            raise Skip("no_replacement_sentences")
        source, a, b, run = found
        taken.add("".join(x.text for x in run))
        return replace_text_evidence(units, k, run, source.id, (a, b))

    # -- lexical: the hard groups, the positive's rank under BM25 drawn -------------------
    def _lexical_pool(self, plan: Plan, band: LengthBand, level: int, hard: PoolState) -> Pool:
        """The hard pool's queries, in its order, each with the hard pool's variants and a
        positive with one context quote that is no evidence refilled so that BM25 ranks it below
        as many of them as drawn (``builders._mmdocrag_lexical``); a query for which some rank
        could not be reached, or the drawn one was not, or that leaves when the pool is levelled
        for the query-blind rules and BM25's top as they read the pool itself (``level_the_pool``),
        leaves this pool only (a counted skip)."""
        order = [i for i in plan.order if i.id in hard.groups]
        # the pool's documents are its positives and copies of them: BM25 over the hard pool's
        # positives stands in for the harness's over the pool (``ops.query_weight``)
        words = UnitWords()
        index = BM25Index(words.document(hard.groups[i.id][1].units) for i in order) if order else None

        def query_of(plan: Plan, state: PoolState, instance: Instance) -> Made:
            try:
                return self._lexical_query(plan, state, instance, hard.groups[instance.id], index, words)
            except Skip as skipped:
                raise Skip(f"lexical_{band.name}_{skipped.reason}") from None

        pool = self._pool(plan, LEXICAL, band, level, query_of, order).pool
        pool, left_for_rules, left_for_top = level_the_pool(pool, plan.context.rng(pool.name, "level_in_pool"))
        for reason, left in (("rules", left_for_rules), ("top", left_for_top)):
            for query in left:
                plan.context.report.skip(f"lexical_{band.name}_{reason}_not_level_in_pool", query.source_id)
        return pool

    def _lexical_query(self, plan: Plan, state: PoolState, instance: Instance, group: tuple,
                       index: BM25Index, words: UnitWords) -> Made:
        whole, hard_positive, variants, (query, hard_candidate, hard_negatives) = group
        context, counter = plan.context, plan.context.counter
        scorer = QueryScorer(index, bm25_tokenize(instance.question), index.average_length)
        scores = [words.score(scorer, made.units) for _, made, _ in variants]
        tolerance = hard_negative_tolerance(whole.n_tokens)
        gold_tokens = [q for q in (whole.units[u].segments[s] for u, s in (
            find_evidence(whole.units, k) for k in range(len(instance.gold)))) if not q.is_visual]
        made = lexical_positive(
            whole.units, [s.tokens for s in gold_tokens], scores, words.score(scorer, hard_positive.units), scorer,
            words, self._text_sources(plan, instance, whole)(instance.doc), max(1, (tolerance - RECOUNT_MARGIN) // 2),
            context.rng(state.pool.name, instance.id, "rank"),
            lambda unit_id: context.rng(state.pool.name, instance.id, unit_id, "refill"), counter)
        if isinstance(made, str):
            raise Skip(made)
        units, refilled, gap, near = made
        if units is None:  # the hard pool's positive, among the variants that lost none of the question's words
            units, document, n_tokens = hard_positive.units, hard_positive.document, hard_positive.n_tokens
        else:
            document = trim_edges(units_document(f"{instance.id}@{state.band.name}", units), counter)
            n_tokens = exact_tokens(document, counter)
        if not state.band.contains(n_tokens) or any(
                abs(m.n_tokens - n_tokens) > hard_negative_tolerance(n_tokens) for _, m, _ in variants):
            raise Skip("length_mismatch")
        text, images = content_keys(document)
        if not all(holds(text, images, q) for q in instance.gold_quotes()):
            raise Skip("positive_refill_took_evidence")
        score = words.score(scorer, units)
        if not gap.holds(score):  # the finished document
            raise Skip("positive_off_rank")
        if not state.guard.admit(instance.gold_quotes(), [document, *(m.document for _, m, _ in variants)]):
            raise Skip("evidence_shared_with_another_query")
        candidate = hard_candidate if refilled is None else self._positive_candidate(
            instance, Built(units, document, n_tokens))
        candidate = dataclasses.replace(candidate, provenance={
            **candidate.provenance, "refilled": hard_candidate.provenance["refilled"] if refilled is None else [refilled],
            "query_bm25": {"score": round(score, 4), "variants_above": gap.above, "variants_near": near}})
        # the hard pool's variants as written there, each with its BM25 score beside
        return query, candidate, [
            dataclasses.replace(negative, provenance={**negative.provenance, "query_bm25": {"score": round(s, 4)}})
            for negative, s in zip(hard_negatives, scores)]

    # -- checks ----------------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        return check_quote_pool(pool_row, corpus, qrels)

    def example_config(self, directory) -> MMDocRAGConfig:
        from builders._mmdocrag_fixtures import write_mmdocir_sources

        write_mmdocir_sources(Path(directory))
        return MMDocRAGConfig(sources=str(directory), lengths=(1024, 2048), max_queries_per_pool=4, dpi=36.0,
                              max_image_pixels=96 * 96, chunk_tokens=60, quotes_per_instance=6)

    # -- card ------------------------------------------------------------------------------
    def card_context(self, config: MMDocRAGConfig, pools: list[Pool], report: BuildReport) -> dict:
        return {
            "instruction": INSTRUCTION,
            "substitute": bool(self._substitute),
            "source_format": SUBSTITUTE if self._substitute else ORIGINAL,
            "question_set": None if self._substitute else config.question_set,
            "render": config.render_settings().identity(),
            "evidence_stats": evidence_statistics(pools),
            "sources": [{
                "name": ("MMDocIR (Dong et al.) annotations over MMLongBench-Doc PDFs — **substitute for MMDocRAG**"
                         if self._substitute else "MMDocRAG (Dong et al., 2026)"),
                "licence": "CC BY-NC 4.0 (documents keep their own terms)",
                "identity": (f"local files under `{Path(config.sources).name}` (sha256 in manifest.json)"
                             if config.sources else f"`{HUB_SOURCE.repo}` @ `{config.hub_revision}` "
                             f"(`{config.question_set}.jsonl`, `{IMAGE_ARCHIVE}`)")}],
        }
