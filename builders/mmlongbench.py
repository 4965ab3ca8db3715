"""MMLongBench Logical Summarization on document page images (paper §3.2.3, A.3, Table 1).

The query is a summary; the candidates are runs of page images and nothing else (no page
numbers, file names or titles). The positive is the head window of its document's pages that fits
the pool's band and leaves unseen pages after it. The hard pool pairs it with three copies of
itself in which the pages covering the first 25%, the last 25% or the middle 50% of its tokens are
replaced by a contiguous run of unseen pages of the same document (intra-document replacement
keeps the visual style uniform); the easy pool pairs it with the windows of three other documents.

The recipe: ``load_sources`` reads the documents and decodes every page once (measured,
rendered, text layer: ``mmlongembed.readers.mmlongbench``); the declared summary step
(``run_steps``) finds each band's windows and has the LLM write the summaries the sources lack;
``build_pools`` assembles the pools from those plans and touches no file and no LLM.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Iterable

from builders._mmlongbench_checks import check_page_pool, page_statistics, query_sources
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.build.capacity import (
    WRITE_AND_READ_BYTES, LengthLimit, OutputEstimate, check_lengths, halving_limit, image_bytes)
from mmlongembed.core.documents import Document, image_segment
from mmlongembed.core.errors import FitError, UserError
from mmlongembed.llm import LLMConfig
from mmlongembed.llm.summaries import SYNTHETIC_QUERY_SOURCE, summarise_documents
from mmlongembed.output.manifest import files_identity
from mmlongembed.media.pdf import RenderOptions
from mmlongembed.ops.pages import HARD_VARIANTS, PageGuard, PagePlan, apply_plan, head_window
from mmlongembed.build.pool_plan import PoolContext, Skip, fill_pool
from mmlongembed.core.rng import seeded_order
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, pool_name
from mmlongembed.readers.mmlongbench import (
    DOC_HUB, DOC_HUB_SAMPLES, FORM_JSONL, FORM_NAMES, OpenPdfs, PagedDocument, Sources, hub_doc_root, measure_pages,
    placed_page_bytes, read_paged_sources, render_pages, source_roots)
from mmlongembed.core.tokens import default_counter

INSTRUCTION = "Given this summary, retrieve the original corresponding long document."  # paper Table 6


@dataclass
class MMLongBenchConfig(CommonConfig, LLMConfig, RenderOptions):
    max_queries_per_pool: int = field(default=80, metadata={"help": "cap on queries per pool (paper: 80)"})
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; pool T holds page windows of (T/2, T] tokens"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy negatives per query (paper: 3)"})
    summary_input_chars: int = field(default=24000, metadata={
        "help": "MMLongBench-Doc layout: characters of the window's text layer given to the summary step "
                "(an equal share per page, so the last pages are summarised too)"})


@dataclass
class BandPlan:
    """One length's plan, made by the summary step: the documents with a window in the band, in
    the seeded order, their windows (page count and hard-variant plans) and the query texts of
    the first ones (doc id -> (text, where it came from))."""

    band: LengthBand
    eligible: list[str]
    windows: dict[str, tuple[int, list[PagePlan]]]
    queries: dict[str, tuple[str, str]]


@dataclass
class Planned:
    """What ``build_pools`` takes: the decoded sources and each length's plan."""

    sources: Sources
    bands: list[BandPlan]


@register
class MMLongBenchBuilder(Builder):
    """Logical Summarization on document page images (MMLongBench): find the run of pages a
    summary describes, against copies whose head, tail or middle pages were replaced by other
    pages of the same document."""

    name = "mmlongbench"
    # 1.1.0: MMLongBench's release layout (mmlb_data/ + mmlb_image/), the Hub's samples parquet; 1.2.0: a hard
    # variant whose replacement page equals a page of the positive is skipped (real PDFs repeat pages)
    version = "1.2.0"
    task = "logical_summarization"
    title = "MMLongEmbed Logical Summarization: MMLongBench (document images)"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Logical Summarization on page images: summary -> a head window of a document's pages (placeholders only, "
        "no page numbers or names); hard negatives have the pages covering 25%/25%/50% of the tokens replaced by "
        "unseen pages of the same document"
    )
    source_formats = (
        "without `--sources`, MMLongBench-Doc from the Hub (`yubo2333/MMLongBench-Doc` at a pinned revision: the "
        "samples table and the PDFs it names); or local: MMLongBench JSONL (`image_list` + `summary`) with page "
        "images (its release as extracted: `mmlb_data/` with the separate image root `mmlb_image/`), PDFs with a "
        "summary sidecar, or MMLongBench-Doc (GitHub's `data/samples.json` or the Hub's `data/train-*.parquet`, + "
        "PDFs; summaries from the `document_summary` LLM step). PDFs rendered with pypdfium2 (`--dpi`, "
        "`--max-image-pixels`)"
    )
    config_class = MMLongBenchConfig
    card_template = "mmlongbench.md.j2"
    licence = "cc-by-nc-4.0"

    # -- sources ---------------------------------------------------------------------------
    def _roots(self, config: MMLongBenchConfig, report: BuildReport | None = None) -> list[Path]:
        if config.sources:
            return source_roots(config.sources)
        if getattr(self, "_hub_root", None) is None:
            self._hub_root = hub_doc_root(self.name, report or BuildReport(progress=False))
        return [self._hub_root]

    def load_sources(self, config: MMLongBenchConfig, report: BuildReport) -> Sources:
        """The documents, every page measured, rendered once and (where the summary step needs
        it) its text layer read: all file reading of the build happens here."""
        settings = config.render_settings()  # fail fast on bad render options
        lengths = sorted(set(config.lengths))
        if not lengths or lengths[0] < 2:
            raise UserError("--lengths needs targets of at least 2 tokens")
        sources = read_paged_sources(self._roots(config, report), report)
        if not sources.documents:
            raise UserError(f"no paged document with a summary (or in an MMLongBench-Doc samples file) under "
                            f"{config.sources or DOC_HUB.repo}")
        pdfs = OpenPdfs()
        try:
            measure_pages(sources, settings, pdfs, report)
            check_lengths(self, sources, config)  # lengths the pages cannot fill are refused before rendering
            pages = render_pages(sources, settings, pdfs, report)
        finally:
            pdfs.close()
        report.notes.append(f"rendered {pages['pages']} distinct pages in {pages['seconds']} s "
                            f"({pages['pages_per_second']} pages/s) with {settings.identity()['renderer']} "
                            f"{settings.identity()['version']} at {settings.dpi:g} dpi, budget "
                            f"{settings.max_pixels} pixels")
        # how long rendering took is a fact of this build, not of its sources (the up-to-date rule
        # compares sources)
        report.stats["rendering"] = pages
        return sources

    def source_identity(self, config: MMLongBenchConfig) -> dict:
        roots = self._roots(config)
        sources = read_paged_sources(roots, BuildReport(progress=False))
        forms = Counter(d.form for d in sources.documents)
        files = sorted(set(sources.files) | {p.path for d in sources.documents if d.form == FORM_JSONL
                                              for p in d.pages})
        base = roots[0].parent if len(roots) > 1 else roots[0]
        hub = {} if config.sources else {"kind": "hub", **DOC_HUB.identity}
        return {"kind": "local", "name": "MMLongBench / MMLongBench-Doc", "licence": "CC BY-NC 4.0", **hub,
                "forms": dict(sorted(forms.items())), "files": files_identity(files, base),
                "render": config.render_settings().identity()}

    def largest_length(self, sources: Sources, config: MMLongBenchConfig) -> LengthLimit | None:
        """Documents keep their pages (a longer one is only ever cut): the longest bounds it."""
        if not sources.costs:
            return None
        return halving_limit(max(sum(costs) for costs in sources.costs.values()), "the longest document")

    def output_estimate(self, sources: Sources, config: MMLongBenchConfig) -> OutputEstimate | None:
        """No page is held while building or writing (pages wait in the page store on disk and the
        writer reads them a row group at a time); the validator holds one pool's distinct pages at
        a time: at most the windows of its queries and their negatives, the largest documents'
        windows at the largest length. The largest candidate is the head window of the longest
        document at the largest length."""
        if not sources.costs:
            return None
        fmt, largest = config.image_format, max(config.lengths)
        windows = sorted((min(sum(costs), largest) for costs in sources.costs.values()), reverse=True)
        one_pool = windows[: config.max_queries_per_pool * (config.negatives_per_query + 1)]
        held = image_bytes(sum(one_pool), fmt) + WRITE_AND_READ_BYTES
        longest_window = windows[0]
        return OutputEstimate(image_bytes(longest_window, fmt), held,
                              "shorter --lengths, a smaller --max-image-pixels or --dpi, or --image-format JPEG")

    # -- the summary step ------------------------------------------------------------------
    def run_steps(self, sources: Sources, config: MMLongBenchConfig, report: BuildReport) -> Planned:
        """The document-summary step: each length's windows, then a summary for every query
        window whose document ships none (the LLM of ``--llm``, from the window's text layer)."""
        context = PoolContext(self.name, config, default_counter(), report)
        order = [d.id for d in seeded_order(sources.documents, context.rng("order"))]
        plans = []
        for band in [LengthBand.halving(t) for t in sorted(set(config.lengths))]:
            windows: dict[str, tuple[int, list[PagePlan]]] = {}
            for doc_id in order:
                try:
                    windows[doc_id] = head_window(
                        sources.costs[doc_id], band, lambda n, d=doc_id: context.rng(band.target, d, n, "pages"))
                except FitError as error:
                    report.skip(f"{band.name}_{error.reason}", doc_id)
            eligible = [d for d in order if d in windows]
            queries = self._queries(eligible[: context.cap], windows, band, sources, context)
            plans.append(BandPlan(band, eligible, windows, queries))
        pages, size = placed_page_bytes(sources, self._placed_pages(plans))
        report.notes.append(f"page store: {pages} distinct pages ({size / 1e6:.1f} MB) for the pools' windows and "
                            "variants, read from disk as each row group is written")
        return Planned(sources, plans)

    @staticmethod
    def _placed_pages(plans: list[BandPlan]) -> dict[str, set[int]]:
        """doc id -> every page a pool may place: each eligible document's window (the easy pool's
        positives and negatives), and the hard variants' pages of the documents with a query."""
        placed: dict[str, set[int]] = {}
        for plan in plans:
            for doc_id in plan.eligible:
                n, page_plans = plan.windows[doc_id]
                pages = placed.setdefault(doc_id, set())
                pages.update(range(n))
                if doc_id in plan.queries:
                    for page_plan in page_plans:
                        pages.update(apply_plan(n, page_plan))
        return placed

    def _queries(self, doc_ids, windows, band, sources: Sources, context: PoolContext) -> dict[str, tuple[str, str]]:
        """doc id -> (query text, where it came from) for this band's window of each document."""
        documents = {d.id: d for d in sources.documents}
        out = {}
        to_write = []
        for doc_id in doc_ids:
            document = documents[doc_id]
            if document.summary:
                out[doc_id] = (document.summary, "reference_summary")
            else:
                to_write.append((f"{doc_id}@{band.name}", list(sources.texts[doc_id][:windows[doc_id][0]])))
        if to_write:
            config = context.config
            written, source = summarise_documents(to_write, config, context.report,
                                                  max_chars=config.summary_input_chars)
            for rid, text in written.items():
                out[rid.rsplit("@", 1)[0]] = (text, source)
        return out

    # -- pools -----------------------------------------------------------------------------
    def build_pools(self, planned: Planned, config: MMLongBenchConfig, report: BuildReport) -> list[Pool]:
        context = PoolContext(self.name, config, default_counter(), report)
        pools = []
        for plan in planned.bands:
            pools.append(self._easy_pool(plan, planned.sources, context))
            pools.append(self._hard_pool(plan, planned.sources, context))
        return pools

    def _page_document(self, document: PagedDocument, indices: list[int], label: str, sources: Sources) -> Document:
        stored = sources.pages[document.id]
        # the stored page is the segment's image: its bytes are read when its row group is written
        segments = tuple(image_segment(stored[k], stored[k].height, stored[k].width, origin=f"page:{k}")
                         for k in indices)
        return Document(id=f"{document.id}@{label}", segments=segments)

    def _query(self, doc_id: str, queries) -> Query:
        text, source = queries[doc_id]
        return Query(id=f"q:{doc_id}", text=text, instruction=INSTRUCTION, source_id=doc_id,
                     n_tokens=default_counter().count(text), extra={"query_source": source})

    def _candidate(self, cid, document, role, group, source_id, indices, provenance) -> Candidate:
        return Candidate(id=cid, document=document, role=role, group=group, source_id=source_id,
                         n_tokens=document.tokens, provenance=provenance, extra={"page_indices": indices})

    def _positive(self, doc_id: str, document, group: str, n_pages: int) -> Candidate:
        return self._candidate(f"d:{doc_id}", document, POSITIVE, group, doc_id, list(range(n_pages)),
                               {"variant": "original", "window": [0, n_pages]})

    def _hard_pool(self, plan: BandPlan, sources: Sources, context: PoolContext) -> Pool:
        band = plan.band
        pool = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name, difficulty="hard",
                    band=band, modality="image")
        documents = {d.id: d for d in sources.documents}
        guard = PageGuard()

        def make(doc_id: str):
            if doc_id not in plan.queries:
                return None
            n, plans = plan.windows[doc_id]
            document = documents[doc_id]
            positive = self._page_document(document, list(range(n)), band.name, sources)
            variants = [(page_plan, apply_plan(n, page_plan)) for page_plan in plans]
            made = [self._page_document(document, pages, f"{band.name}:{page_plan.variant}", sources)
                    for page_plan, pages in variants]
            if any(m.render()[1] == positive.render()[1] for m in made):
                raise Skip(f"hard_{band.name}_variant_equals_positive")
            # a real PDF repeats pages (blank, divider, logo pages): a replacement page equal to one
            # the positive shows would let the variant keep what it was to lose
            shown = set(positive.render()[1])
            stored = sources.pages[doc_id]
            if any(stored[k] in shown for page_plan in plans for k in range(*page_plan.donor)):
                raise Skip(f"hard_{band.name}_replacement_page_equals_a_positive_page")
            group = f"q:{doc_id}"
            if not guard.admit(group, positive, made):
                raise Skip(f"hard_{band.name}_page_shared_with_another_query")
            return self._query(doc_id, plan.queries), self._positive(doc_id, positive, group, n), [
                self._candidate(f"d:{doc_id}:{page_plan.variant}", doc, HARD_NEGATIVE, group, doc_id, pages,
                                {**page_plan.as_dict(), "window": [0, n]})
                for (page_plan, pages), doc in zip(variants, made)]

        fill_pool(pool, plan.eligible, make, context)
        return pool

    def _easy_pool(self, plan: BandPlan, sources: Sources, context: PoolContext) -> Pool:
        """Each query's positive and the windows of ``negatives_per_query`` other documents of the
        band (their own positive windows, so all lengths come from one rule). A document serves
        the pool once; negatives are taken from the far end of the seeded order, so the easy
        queries are the hard pool's first ones."""
        band = plan.band
        pool = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name, difficulty="easy",
                    band=band, modality="image")
        documents = {d.id: d for d in sources.documents}
        k = context.config.negatives_per_query
        claimed: set[str] = set()
        guard = PageGuard()
        supply = list(reversed(plan.eligible))

        def window(doc_id: str) -> tuple[int, Document]:
            n = plan.windows[doc_id][0]
            return n, self._page_document(documents[doc_id], list(range(n)), band.name, sources)

        def make(doc_id: str):
            if doc_id in claimed or doc_id not in plan.queries:
                return None
            group = f"q:{doc_id}"
            n, positive = window(doc_id)
            negatives = list(islice(((other, *window(other)) for other in supply
                                     if other not in claimed and other != doc_id), k))
            if len(negatives) < k:
                raise Skip(f"easy_{band.name}_not_enough_documents")
            if not guard.admit(group, positive, [d for _, _, d in negatives]):
                raise Skip(f"easy_{band.name}_page_shared_with_another_query")
            claimed.update({doc_id, *(o for o, _, _ in negatives)})
            return self._query(doc_id, plan.queries), self._positive(doc_id, positive, group, n), [
                self._candidate(f"d:{other}", doc, EASY_NEGATIVE, group, other, list(range(m)),
                                {"variant": "other_document", "window": [0, m]})
                for other, m, doc in negatives]

        fill_pool(pool, plan.eligible, make, context)
        return pool

    # -- checks ----------------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        return check_page_pool(pool_row, corpus, qrels)

    def example_config(self, directory) -> MMLongBenchConfig:
        from builders._mmlongbench_fixtures import write_paged_sources

        write_paged_sources(Path(directory), n_documents=8, pages=(14, 22))
        return MMLongBenchConfig(sources=str(directory), lengths=(512, 1024), max_queries_per_pool=4, dpi=36.0,
                                 max_image_pixels=160 * 230)

    def synthetic_parts(self, config: MMLongBenchConfig, pools: list[Pool], report: BuildReport) -> list[str]:
        parts = super().synthetic_parts(config, pools, report)
        made_up = query_sources(pools).get(SYNTHETIC_QUERY_SOURCE, 0)
        if made_up:
            parts.append(f"queries: {made_up} queries are text-layer stand-ins made without an LLM (--llm none), "
                         "not summaries")
        return parts

    # -- card ------------------------------------------------------------------------------
    def card_context(self, config: MMLongBenchConfig, pools: list[Pool], report: BuildReport) -> dict:
        settings = config.render_settings()
        sources = read_paged_sources(self._roots(config), BuildReport(progress=False))
        forms = Counter(d.form for d in sources.documents)
        return {
            "instruction": INSTRUCTION,
            "hard_variants": [v for v, _ in HARD_VARIANTS],
            "render": settings.identity(),
            "rendering": report.stats.get("rendering", {}),
            "forms": [{"name": FORM_NAMES[f], "documents": n} for f, n in sorted(forms.items())],
            "page_stats": page_statistics(pools),
            "query_sources": query_sources(pools),
            "sources": [{
                "name": "MMLongBench (Wang et al., 2025b) / MMLongBench-Doc (Ma et al., 2024)",
                "licence": "CC BY-NC 4.0 (documents keep their own terms)",
                "identity": (f"local files under `{Path(config.sources).name}` (sha256 in manifest.json)"
                             if config.sources else f"`{DOC_HUB.repo}` @ `{DOC_HUB.revision}` (`{DOC_HUB_SAMPLES}` "
                             "and the PDFs under `documents/` it names)")}],
        }
