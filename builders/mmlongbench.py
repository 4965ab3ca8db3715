"""MMLongBench Logical Summarization on document page images (paper §3.2.3, A.3, Table 1).

The query is a summary; the candidates are runs of page images and nothing else (no page
numbers, file names or titles). The positive is the head window of its document's pages that fits
the pool's band and leaves unseen pages after it. The hard pool pairs it with three copies of
itself in which the pages covering the first 25%, the last 25% or the middle 50% of its tokens are
replaced by a contiguous run of unseen pages of the same document (intra-document replacement
keeps the visual style uniform); the easy pool pairs it with the windows of three other documents.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from mmlongembed.capacity import LengthLimit, halving_limit
from mmlongembed.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.documents import IMAGE_PLACEHOLDER, Document, image_segment
from mmlongembed.errors import FitError, UserError
from mmlongembed.llm import LLMConfig
from mmlongembed.llm.summaries import SYNTHETIC_QUERY_SOURCE, summarise_documents
from mmlongembed.manifest import files_identity
from mmlongembed.media.pdf import (
    PageRenderer, PdfFile, RenderOptions, RenderSettings, image_file_size, page_image_size)
from mmlongembed.ops.pages import HARD_VARIANTS, PagePlan, apply_plan, head_window
from mmlongembed.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, pool_name
from mmlongembed.rng import derive_rng
from mmlongembed.sources import HubSource, hub_file, iter_jsonl, read_json, require_dir
from mmlongembed.tokens import default_counter, fit_image_size, image_tokens

INSTRUCTION = "Given this summary, retrieve the original corresponding long document."  # paper Table 6
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
SUBDIRS = ("mmlongbench", "mmlongbench_doc")
FORM_JSONL, FORM_SIDECAR, FORM_DOC = "mmlongbench_jsonl", "pdf_with_summary", "mmlongbench_doc"
FORM_NAMES = {
    FORM_JSONL: "MMLongBench summarization JSONL (`image_list` + `summary`; gov-report, multi-lexsum)",
    FORM_SIDECAR: "local PDF with a summary sidecar",
    FORM_DOC: "MMLongBench-Doc layout (`samples.json(l)` or the Hub's samples parquet + PDFs; summaries from the "
              "document-summary step)",
}
# MMLongBench's release (HF ZhaoweiWang/MMLongBench, read by EdinburghNLP/MMLongBench's data.py): the JSONL under
# mmlb_data/ (summ/gov_K8.jsonl, ...) name their pages relative to the separate image root mmlb_image/.
MMLB_DATA, MMLB_IMAGE = "mmlb_data", "mmlb_image"
SAMPLE_COLUMNS = ("doc_id", "question")  # an MMLongBench-Doc samples file (GitHub JSON or the Hub's parquet)
# Without --sources: MMLongBench-Doc from the Hub (the samples table and the PDFs it names). MMLongBench's own
# summarization data is on the Hub only inside multi-GB tarballs (ZhaoweiWang/MMLongBench): download and extract
# it, then pass --sources.
DOC_HUB = HubSource(repo="yubo2333/MMLongBench-Doc", revision="0a9311ec5ccb42e63b844f4263f98dc44f7232fd",
                    licence="CC BY-NC 4.0")
DOC_HUB_SAMPLES = "data/train-00000-of-00001.parquet"


def hub_doc_root(builder_name: str, report: BuildReport) -> Path:
    """The Hub's MMLongBench-Doc at the pinned revision: its samples table and every PDF it names,
    downloaded (and cached) by the Hub client; returns the snapshot folder that holds them in the
    repo's layout (``data/``, ``documents/``). A PDF the repo lacks is a counted skip."""
    import pyarrow.parquet as pq

    samples = hub_file(DOC_HUB, DOC_HUB_SAMPLES, builder_name)
    names = sorted({Path(str(r["doc_id"])).name for r in pq.read_table(samples, columns=["doc_id"]).to_pylist()
                    if r["doc_id"]})
    for name in report.bar(names, "downloading PDFs", "document"):
        try:
            hub_file(DOC_HUB, f"documents/{name}", builder_name)
        except UserError:
            report.skip("pdf_not_on_hub", name)
    return samples.parent.parent


@dataclass
class MMLongBenchConfig(CommonConfig, LLMConfig, RenderOptions):
    max_queries_per_pool: int = field(default=80, metadata={"help": "cap on queries per pool (paper: 80)"})
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; pool T holds page windows of (T/2, T] tokens"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy negatives per query (paper: 3)"})
    summary_input_chars: int = field(default=24000, metadata={
        "help": "MMLongBench-Doc layout: characters of the window's text layer given to the summary step "
                "(an equal share per page, so the last pages are summarised too)"})


@dataclass(frozen=True)
class PageRef:
    path: Path
    index: int | None  # 0-based PDF page; None for an image file


@dataclass(frozen=True)
class PagedDocument:
    id: str
    pages: tuple[PageRef, ...]
    summary: str  # "" when the summary step writes it per window
    form: str
    origin: str


@dataclass
class Sources:
    documents: list[PagedDocument]
    files: list[Path] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)


# -- reading ---------------------------------------------------------------------------------

def summary_text(value) -> str:
    """A summary as MMLongBench ships it: a string (multi-lexsum) or GovReport's list of
    ``{section_title, paragraphs}`` (joined as "title:\\nparagraphs", blank lines between)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict):
                title = str(item.get("section_title") or "").strip()
                body = item.get("paragraphs") or ""
                body = "\n".join(str(p) for p in body) if isinstance(body, list) else str(body)
                parts.append(f"{title}:\n{body.strip()}" if title else body.strip())
            elif isinstance(item, str):
                parts.append(item.strip())
        return "\n\n".join(p for p in parts if p)
    return ""


def source_roots(path: str | Path) -> list[Path]:
    root = require_dir(path, "MMLongBench JSONL + page images, or PDFs with summaries, or MMLongBench-Doc")
    if root.is_file():
        return [root.parent]
    if root.name == MMLB_DATA and (root.parent / MMLB_IMAGE).is_dir():
        return [root.parent]  # mmlb_data/ given alone: read it with its sibling image root
    inside = [root / sub for sub in SUBDIRS if (root / sub).is_dir()]
    return inside or [root]


def image_bases(path: Path, root: Path) -> list[Path]:
    """Where the pages named by a JSONL's ``image_list`` may be: beside it, at the sources root,
    in ``images/``, and in the ``mmlb_image/`` image root of MMLongBench's release (a sibling of
    ``mmlb_data/`` or of any folder between the JSONL and the root)."""
    bases = [path.parent, root, root / "images"]
    for folder in [path.parent, *path.parent.parents]:
        if (folder / MMLB_IMAGE).is_dir():
            bases.append(folder / MMLB_IMAGE)
        if folder == root or root not in folder.parents:
            break
    return bases


def _resolve_image(entry: str, bases: list[Path]) -> Path | None:
    for base in bases:
        path = base / entry
        if path.is_file():
            return path
    return None


def _records(path: Path, report: BuildReport) -> Iterable[tuple[dict, str]]:
    if path.suffix == ".parquet":  # only a samples table (the Hub's MMLongBench-Doc data/train-*.parquet)
        import pyarrow.parquet as pq

        try:
            if not set(SAMPLE_COLUMNS) <= set(pq.read_schema(path).names):
                return
            rows = pq.read_table(path, columns=list(SAMPLE_COLUMNS)).to_pylist()
        except (OSError, ValueError) as error:
            report.skip("unreadable_parquet", f"{path.name}: {type(error).__name__}")
            return
        for number, record in enumerate(rows, 1):
            yield record, f"{path.name}:{number}"
        return
    if path.suffix == ".jsonl":
        for number, record in enumerate(iter_jsonl(path, report), 1):
            yield record, f"{path.name}:{number}"
        return
    value = read_json(path, report)
    if isinstance(value, dict):
        yield value, path.name
    elif isinstance(value, list):
        for number, record in enumerate(value, 1):
            if isinstance(record, dict):
                yield record, f"{path.name}:{number}"


def read_paged_sources(roots: list[Path], report: BuildReport) -> Sources:
    """Every paged document with a summary (or, in the MMLongBench-Doc layout, one to be
    written), from the three forms the card lists. Bad records are counted skips."""
    sources = Sources([], roots=roots)
    by_id: dict[str, PagedDocument] = {}
    sidecar: dict[str, str] = {}
    listed: set[str] = set()
    for root in roots:
        for path in sorted([*root.rglob("*.jsonl"), *root.rglob("*.json"), *root.rglob("*.parquet")]):
            used = False
            for record, origin in _records(path, report):
                if "image_list" in record:
                    used = True
                    document = _jsonl_document(record, origin, image_bases(path, root), report)
                    if document is None:
                        continue
                    known = by_id.get(document.id)
                    # A document ships at several lengths; the longest holds the pages the
                    # shorter ones leave unseen (paper A.3: "extended versions").
                    if known is None or len(document.pages) > len(known.pages):
                        by_id[document.id] = document
                elif "summary" in record:
                    name = next((str(record[k]) for k in ("file", "doc_name", "doc_id", "pdf") if record.get(k)),
                                path.with_suffix(".pdf").name if path.suffix == ".json" else "")
                    text = summary_text(record["summary"])
                    if name and text:
                        sidecar[Path(name).name] = text
                        used = True
                    else:
                        report.skip("malformed_summary_record", origin)
                elif "doc_id" in record and "question" in record:
                    listed.add(Path(str(record["doc_id"])).name)
                    used = True
            if used:
                sources.files.append(path)
        for pdf in sorted(root.rglob("*.pdf")):
            if pdf.name in sidecar:
                form, summary = FORM_SIDECAR, sidecar[pdf.name]
            elif pdf.name in listed:
                form, summary = FORM_DOC, ""
            else:
                report.skip("pdf_without_summary", pdf.name)
                continue
            try:
                opened = PdfFile(pdf)
                n_pages = len(opened)
                opened.close()
            except UserError:
                report.skip("unreadable_pdf", pdf.name)
                continue
            if pdf.name in by_id:
                report.skip("duplicate_document", pdf.name)
                continue
            by_id[pdf.name] = PagedDocument(pdf.name, tuple(PageRef(pdf, i) for i in range(n_pages)), summary, form,
                                            pdf.name)
            sources.files.append(pdf)
    sources.documents = [by_id[k] for k in sorted(by_id)]
    return sources


def _jsonl_document(record: dict, origin: str, bases: list[Path], report: BuildReport) -> PagedDocument | None:
    images = record.get("image_list")
    summary = summary_text(record.get("summary"))
    if not isinstance(images, list) or not images or not all(isinstance(p, str) for p in images):
        report.skip("malformed_image_list", origin)
        return None
    if not summary:
        report.skip("missing_summary", origin)
        return None
    paths = [_resolve_image(p, bases) for p in images]
    if any(p is None for p in paths):
        report.skip("missing_page_image", origin)
        return None
    doc_id = str(record.get("id") or record.get("doc_id") or record.get("_id") or Path(images[0]).parent.name)
    return PagedDocument(doc_id, tuple(PageRef(p, None) for p in paths), summary, FORM_JSONL, origin)


# -- the builder -----------------------------------------------------------------------------

class PageGuard:
    """A pool holds no page of one query's positive in another query's group (every query ranks
    the whole pool): checked on the stored bytes, so two PDFs with an identical page are caught."""

    def __init__(self):
        self.held: dict[bytes, str] = {}
        self.positive: dict[bytes, str] = {}

    def admit(self, group: str, positive: Document, others: list[Document]) -> bool:
        mine = {s.image for s in positive.segments}
        every = mine | {s.image for d in others for s in d.segments}
        if any(self.held.get(p, group) != group for p in mine) or any(
                self.positive.get(p, group) != group for p in every):
            return False
        self.held.update(dict.fromkeys(every, group))
        self.positive.update(dict.fromkeys(mine, group))
        return True


@register
class MMLongBenchBuilder(Builder):
    """Logical Summarization on document page images (MMLongBench): find the run of pages a
    summary describes, against copies whose head, tail or middle pages were replaced by other
    pages of the same document."""

    name = "mmlongbench"
    version = "1.1.0"  # 1.1.0: MMLongBench's release layout (mmlb_data/ + mmlb_image/), the Hub's samples parquet
    task = "logical_summarization"
    title = "MMLongEmbed Logical Summarization: MMLongBench (document images)"
    config_class = MMLongBenchConfig
    card_template = "mmlongbench.md.j2"
    licence = "cc-by-nc-4.0"

    def __init__(self):
        self._renderer: PageRenderer | None = None
        self._pdfs: dict[Path, PdfFile] = {}

    def _pdf(self, path: Path) -> PdfFile:
        if path not in self._pdfs:
            self._pdfs[path] = PdfFile(path)
        return self._pdfs[path]

    # -- sources ---------------------------------------------------------------------------
    def _roots(self, config: MMLongBenchConfig, report: BuildReport | None = None) -> list[Path]:
        if config.sources:
            return source_roots(config.sources)
        if getattr(self, "_hub_root", None) is None:
            self._hub_root = hub_doc_root(self.name, report or BuildReport(progress=False))
        return [self._hub_root]

    def load_sources(self, config: MMLongBenchConfig, report: BuildReport) -> Sources:
        config.render_settings()  # fail fast on bad render options
        sources = read_paged_sources(self._roots(config, report), report)
        if not sources.documents:
            raise UserError(f"no paged document with a summary (or in an MMLongBench-Doc samples file) under "
                            f"{config.sources or DOC_HUB.repo}")
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

    # -- pools -----------------------------------------------------------------------------
    def _costs(self, document: PagedDocument, settings: RenderSettings) -> list[int]:
        costs = []
        for page in document.pages:
            if page.index is None:
                height, width = fit_image_size(*image_file_size(page.path), settings.max_pixels)
            else:
                height, width = page_image_size(*self._pdf(page.path).page_size(page.index), settings)
            costs.append(image_tokens(height, width))
        return costs

    def _page_document(self, document: PagedDocument, indices: list[int], label: str) -> Document:
        segments = []
        for k in indices:
            page = document.pages[k]
            stored = (self._renderer.image_file(page.path) if page.index is None
                      else self._renderer.page(self._pdf(page.path), page.index))
            segments.append(image_segment(stored.data, stored.height, stored.width, origin=f"page:{k}"))
        return Document(id=f"{document.id}@{label}", segments=tuple(segments))

    def largest_length(self, sources: Sources, config: MMLongBenchConfig) -> LengthLimit | None:
        """Documents keep their pages (a longer one is only ever cut): the longest bounds it."""
        if not sources.documents:
            return None
        settings = config.render_settings()
        longest = max(sum(self._costs(d, settings)) for d in sources.documents)
        return halving_limit(longest, "the longest document")

    def build_pools(self, sources: Sources, config: MMLongBenchConfig, report: BuildReport) -> list[Pool]:
        settings = config.render_settings()
        self._renderer = PageRenderer(settings)
        lengths = sorted(set(config.lengths))
        if not lengths or lengths[0] < 2:
            raise UserError("--lengths needs targets of at least 2 tokens")
        bands = [LengthBand.halving(t) for t in lengths]
        documents = {d.id: d for d in sources.documents}
        costs = {d.id: self._costs(d, settings) for d in report.bar(sources.documents, "page sizes", "document")}
        order_rng = derive_rng(config.seed, self.name, "order")
        order = [sources.documents[int(i)].id for i in order_rng.permutation(len(sources.documents))]

        pools = []
        for band in bands:
            windows: dict[str, tuple[int, list[PagePlan]]] = {}
            for doc_id in order:
                try:
                    windows[doc_id] = head_window(
                        costs[doc_id], band,
                        lambda n, d=doc_id: derive_rng(config.seed, self.name, band.target, d, n, "pages"))
                except FitError as error:
                    report.skip(f"{band.name}_{error.reason}", doc_id)
            eligible = [d for d in order if d in windows]
            queries = self._queries(eligible[: config.max_queries_per_pool], windows, band, documents, config,
                                    report)
            pools.append(self._easy_pool(band, eligible, windows, queries, documents, config, report))
            pools.append(self._hard_pool(band, eligible, windows, queries, documents, config, report))
        for pdf in self._pdfs.values():
            pdf.close()
        self._pdfs.clear()
        pages = self._renderer.stats()
        report.notes.append(f"rendered {pages['pages']} distinct pages in {pages['seconds']} s "
                            f"({pages['pages_per_second']} pages/s) with {settings.identity()['renderer']} "
                            f"{settings.identity()['version']} at {settings.dpi:g} dpi, budget "
                            f"{settings.max_pixels} pixels")
        # how long rendering took is a fact of this build, not of its sources (the up-to-date rule
        # compares sources)
        report.stats["rendering"] = pages
        return pools

    def _queries(self, doc_ids, windows, band, documents, config, report) -> dict[str, tuple[str, str]]:
        """doc id -> (query text, where it came from) for this band's window of each document."""
        out = {}
        to_write = []
        for doc_id in doc_ids:
            document = documents[doc_id]
            if document.summary:
                out[doc_id] = (document.summary, "reference_summary")
            else:
                n = windows[doc_id][0]
                texts = [self._pdf(p.path).text(p.index) for p in document.pages[:n]]
                to_write.append((f"{doc_id}@{band.name}", texts))
        if to_write:
            written, source = summarise_documents(to_write, config, report, max_chars=config.summary_input_chars)
            for rid, text in written.items():
                out[rid.rsplit("@", 1)[0]] = (text, source)
        return out

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

    def _hard_pool(self, band, eligible, windows, queries, documents, config, report) -> Pool:
        pool = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name, difficulty="hard",
                    band=band, modality="image")
        guard = PageGuard()
        for doc_id in eligible:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            if doc_id not in queries:
                continue
            n, plans = windows[doc_id]
            document = documents[doc_id]
            positive = self._page_document(document, list(range(n)), band.name)
            variants = [(plan, apply_plan(n, plan)) for plan in plans]
            made = [self._page_document(document, pages, f"{band.name}:{plan.variant}") for plan, pages in variants]
            if any(m.render()[1] == positive.render()[1] for m in made):
                report.skip(f"hard_{band.name}_variant_equals_positive", doc_id)
                continue
            group = f"q:{doc_id}"
            if not guard.admit(group, positive, made):
                report.skip(f"hard_{band.name}_page_shared_with_another_query", doc_id)
                continue
            pool.add_query(self._query(doc_id, queries), self._positive(doc_id, positive, group, n), [
                self._candidate(f"d:{doc_id}:{plan.variant}", doc, HARD_NEGATIVE, group, doc_id, pages,
                                {**plan.as_dict(), "window": [0, n]})
                for (plan, pages), doc in zip(variants, made)])
        return pool

    def _easy_pool(self, band, eligible, windows, queries, documents, config, report) -> Pool:
        """Each query's positive and the windows of ``negatives_per_query`` other documents of the
        band (their own positive windows, so all lengths come from one rule). A document serves
        the pool once; negatives are taken from the far end of the seeded order, so the easy
        queries are the hard pool's first ones."""
        pool = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name, difficulty="easy",
                    band=band, modality="image")
        k = config.negatives_per_query
        claimed: set[str] = set()
        guard = PageGuard()
        supply = list(reversed(eligible))
        for doc_id in eligible:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            if doc_id in claimed or doc_id not in queries:
                continue
            group = f"q:{doc_id}"
            n = windows[doc_id][0]
            positive = self._page_document(documents[doc_id], list(range(n)), band.name)
            negatives = []
            for other in supply:
                if len(negatives) == k:
                    break
                if other in claimed or other == doc_id:
                    continue
                m = windows[other][0]
                negatives.append((other, m, self._page_document(documents[other], list(range(m)), band.name)))
            if len(negatives) < k:
                report.skip(f"easy_{band.name}_not_enough_documents", doc_id)
                continue
            if not guard.admit(group, positive, [d for _, _, d in negatives]):
                report.skip(f"easy_{band.name}_page_shared_with_another_query", doc_id)
                continue
            claimed |= {doc_id, *(o for o, _, _ in negatives)}
            pool.add_query(self._query(doc_id, queries), self._positive(doc_id, positive, group, n), [
                self._candidate(f"d:{other}", doc, EASY_NEGATIVE, group, other, list(range(m)),
                                {"variant": "other_document", "window": [0, m]})
                for other, m, doc in negatives])
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
            "rendering": self._renderer.stats() if self._renderer else {},
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


def page_statistics(pools: list[Pool]) -> dict:
    """Stored page sizes (distinct pages) and pages per candidate per pool, for the card."""
    sizes: Counter = Counter()
    seen: set[int] = set()
    per_pool = []
    for pool in pools:
        counts = [len(c.document.segments) for c in pool.candidates]
        per_page = [s.tokens for c in pool.candidates for s in c.document.segments]
        for c in pool.candidates:
            for s in c.document.segments:
                if id(s.image) not in seen:
                    seen.add(id(s.image))
                    sizes[(s.height, s.width)] += 1
        if counts:
            per_pool.append({"pool": pool.name, "pages_min": min(counts), "pages_median": statistics.median(counts),
                             "pages_max": max(counts), "page_tokens_min": min(per_page),
                             "page_tokens_max": max(per_page)})
    return {"sizes": [{"height": h, "width": w, "tokens": image_tokens(h, w), "pages": n}
                      for (h, w), n in sorted(sizes.items(), key=lambda kv: -kv[1])],
            "pools": per_pool, "distinct_pages": len(seen)}


def query_sources(pools: list[Pool]) -> dict:
    found: Counter = Counter()
    for pool in pools:
        for q in pool.queries:
            found[q.extra.get("query_source", "")] += 1
    return dict(sorted(found.items()))


def check_page_pool(pool_row: dict, corpus: dict, qrels: dict) -> Iterator[Problem]:
    """The page-window invariants (issue: intra-document replacement), on the data as written."""
    name = pool_row["pool"]
    n_rows = len(corpus["_id"])
    rows = {corpus["_id"][i]: {k: corpus[k][i] for k in ("text", "images", "role", "group", "source_id",
                                                           "page_indices", "provenance")} for i in range(n_rows)}
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    groups: dict[str, list[str]] = defaultdict(list)
    for cid, row in rows.items():
        groups[row["group"]].append(cid)
        images = [im["bytes"] for im in row["images"]]
        if row["text"] != IMAGE_PLACEHOLDER * len(images):
            yield Problem(name, "placeholders_only", f"{cid}: the text is more than one placeholder per page")
        row["bytes"] = images
    positive_pages = {}
    for group, pid in positive_of.items():
        positive = rows.get(pid)
        if positive is None:
            continue
        n = len(positive["bytes"])
        positive_pages[group] = set(positive["bytes"])
        if list(positive["page_indices"] or []) != list(range(n)):
            yield Problem(name, "positive_window", f"{pid}: pages {positive['page_indices']} are not a head window")
        sizes = [_size(b) for b in positive["bytes"]]
        costs = [image_tokens(h, w) for h, w in sizes]
        for cid in groups[group]:
            row = rows[cid]
            if row["role"] == HARD_NEGATIVE:
                yield from _check_hard(name, cid, row, positive, n, costs)
            elif row["role"] == EASY_NEGATIVE:
                if row["source_id"] == positive["source_id"]:
                    yield Problem(name, "easy_negative", f"{cid} comes from its query's own document")
                if list(row["page_indices"] or []) != list(range(len(row["bytes"]))):
                    yield Problem(name, "easy_negative", f"{cid} is not a head window of its document")
        roles = Counter(rows[c]["role"] for c in groups[group])
        if roles[HARD_NEGATIVE] not in (0, len(HARD_VARIANTS)) or (roles[HARD_NEGATIVE] and roles[EASY_NEGATIVE]):
            yield Problem(name, "group", f"{group}: {dict(roles)}")
    for group, pages in positive_pages.items():
        for cid, row in rows.items():
            if row["group"] != group and pages & set(row["bytes"]):
                yield Problem(name, "page_exclusivity", f"{cid} (group {row['group']}) holds a page of {group}'s "
                                                        "positive")


def _size(data: bytes) -> tuple[int, int]:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.height, im.width


def _check_hard(name, cid, row, positive, n, costs) -> Iterator[Problem]:
    plan = json.loads(row["provenance"])
    a, b = plan["replaced_slots"]
    c, d = plan["donor_pages"]
    pages = list(row["page_indices"] or [])
    if row["source_id"] != positive["source_id"]:
        yield Problem(name, "hard_negative", f"{cid} comes from another document")
    if pages != [*range(a), *range(c, d), *range(b, n)]:
        yield Problem(name, "replaced_slots", f"{cid}: pages {pages} are not the window with [{a}, {b}) replaced by "
                                              f"unseen pages [{c}, {d})")
    if c < n:
        yield Problem(name, "replaced_slots", f"{cid}: donor pages [{c}, {d}) overlap the window [0, {n})")
    kept_head, kept_tail = row["bytes"][:a], row["bytes"][a + (d - c):]
    if kept_head != positive["bytes"][:a] or kept_tail != positive["bytes"][b:]:
        yield Problem(name, "kept_pages", f"{cid}: pages outside the replaced slots differ from the positive's")
    if set(row["bytes"][a:a + (d - c)]) & set(positive["bytes"]):
        yield Problem(name, "replaced_slots", f"{cid}: a replacement page is one of the positive's pages")
    total = sum(costs)
    start, end = plan["fraction"]
    removed = sum(costs[a:b])
    if abs(removed - (end - start) * total) > max(costs[a:b] or [0]) or abs(sum(costs[:a]) - start * total) > max(costs):
        yield Problem(name, "replaced_fraction", f"{cid}: slots [{a}, {b}) are {removed / total:.0%} of the tokens "
                                                 f"from {sum(costs[:a]) / total:.0%}, not within one page of "
                                                 f"{end - start:.0%} from {start:.0%}")
