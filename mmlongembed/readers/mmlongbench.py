"""MMLongBench (Wang et al., 2025b) and MMLongBench-Doc (Ma et al., 2024): paged documents with
their summaries, read into ``PagedDocument`` records, and their pages decoded once.

Three forms (the card lists them): MMLongBench's summarization JSONL (``image_list`` page images
+ ``summary``), a local PDF with a summary sidecar, and MMLongBench-Doc's layout (a samples file
naming PDFs; their summaries come from the document-summary step). ``decode_pages`` measures,
renders and reads the text layer of every page, each PDF opened once, so nothing after
``load_sources`` touches a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.media.page_store import PageStore, StoredPage
from mmlongembed.media.pdf import PageRenderer, PdfFile, RenderSettings, image_file_size, page_image_size
from mmlongembed.readers.sources import HubSource, hub_file, iter_jsonl, read_json, require_dir
from mmlongembed.core.tokens import fit_image_size, image_tokens

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
    repo's layout (``data/``, ``documents/``). A PDF the repo lacks is not there, so reading the
    folder counts it (``pdf_not_found``)."""
    import pyarrow.parquet as pq

    samples = hub_file(DOC_HUB, DOC_HUB_SAMPLES, builder_name)
    names = sorted({Path(str(r["doc_id"])).name for r in pq.read_table(samples, columns=["doc_id"]).to_pylist()
                    if r["doc_id"]})
    for name in report.bar(names, "downloading PDFs", "document"):
        try:
            hub_file(DOC_HUB, f"documents/{name}", builder_name)
        except UserError:
            continue  # counted as pdf_not_found when the folder is read
    return samples.parent.parent



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
    # filled by decode_pages: doc id -> each page's token cost at its stored size, its stored
    # image (in the page store: its bytes are read when the row group placing it is written), and (for documents
    # whose summary the summary step writes) its text layer
    costs: dict[str, list[int]] = field(default_factory=dict)
    pages: dict[str, tuple[StoredPage, ...]] = field(default_factory=dict)
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    store: PageStore | None = None


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
    count_missing_pdfs(roots, listed, report)
    sources.documents = [by_id[k] for k in sorted(by_id)]
    return sources


def count_missing_pdfs(roots: list[Path], listed: set[str], report: BuildReport) -> None:
    """Each PDF a samples file names that no root holds is a counted skip (``pdf_not_found``, as
    MMDocRAG's reader counts them): the GitHub repository ships 93 of the 135 its samples name."""
    found = {pdf.name for root in roots for pdf in root.rglob("*.pdf")}
    for name in sorted(listed - found):
        report.skip("pdf_not_found", name)


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



# -- decoding --------------------------------------------------------------------------------

class OpenPdfs:
    """The PDFs of one build, each opened on first use and all closed together."""

    def __init__(self):
        self._pdfs: dict[Path, PdfFile] = {}

    def __getitem__(self, path: Path) -> PdfFile:
        if path not in self._pdfs:
            self._pdfs[path] = PdfFile(path)
        return self._pdfs[path]

    def close(self) -> None:
        for pdf in self._pdfs.values():
            pdf.close()
        self._pdfs.clear()


def page_costs(document: PagedDocument, settings: RenderSettings, pdfs: OpenPdfs) -> list[int]:
    """Each page's token cost at the size it is stored at, from the PDF's page size or the
    image file's header (nothing is rendered)."""
    costs = []
    for page in document.pages:
        if page.index is None:
            height, width = fit_image_size(*image_file_size(page.path), settings.max_pixels)
        else:
            height, width = page_image_size(*pdfs[page.path].page_size(page.index), settings)
        costs.append(image_tokens(height, width))
    return costs


def measure_pages(sources: Sources, settings: RenderSettings, pdfs: OpenPdfs, report: BuildReport) -> None:
    """``sources.costs``: every document's page costs."""
    sources.costs = {d.id: page_costs(d, settings, pdfs) for d in report.bar(sources.documents, "page sizes",
                                                                            "document")}


def render_pages(sources: Sources, settings: RenderSettings, pdfs: OpenPdfs, report: BuildReport) -> dict:
    """``sources.pages``: every page rendered (a PDF page) or re-encoded (a page image) once per
    document, into the page store (``sources.store``: on disk, so that memory holds one document's
    pages at a time; two equal pages are one file); ``sources.texts``: the text layer of every page
    of the documents whose summary the summary step writes. Returns the renderer's figures (pages,
    seconds, pages per second)."""
    renderer = PageRenderer(settings)
    sources.store = sources.store or PageStore()
    for document in report.bar(sources.documents, "rendering pages", "document"):
        sources.pages[document.id] = tuple(
            sources.store.put(renderer.image_file(p.path) if p.index is None else renderer.page(pdfs[p.path], p.index))
            for p in document.pages)
        renderer.forget()  # the store holds them now
        if not document.summary:  # MMLongBench-Doc: PDF pages, so each page has its index
            sources.texts[document.id] = tuple(pdfs[p.path].text(p.index) for p in document.pages)
    return renderer.stats()


def placed_page_bytes(sources: Sources, placed: dict[str, set[int]]) -> tuple[int, int]:
    """(distinct pages, their bytes) of the pages that pools may place (doc id -> page indices):
    what the writer will read back from the page store, a row group at a time. Nothing is read
    here; the store stays until the pools that place its pages are let go."""
    pages = {sources.pages[doc_id][k] for doc_id, indices in placed.items() for k in indices}
    return len(pages), sum(page.size for page in pages)
