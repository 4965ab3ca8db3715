"""MMDocRAG Multi-Source Reasoning over interleaved text and image evidence (paper §3.2.2, A.2).

The query is a document question with 2 to 5 evidence quotes (text quotes and image quotes:
tables, charts, figures) that the query audit kept. The positive is the question's own quotes in
reading order, padded with whole quote blocks (a page's quotes) of other documents to the pool's
length; at longer lengths the same document grows by blocks inserted between its units so the
evidence keeps its relative depth. Hard negatives drop the first, the last or a middle gold quote
(both, when there are two): a text quote is refilled by whole sentences of the same length, an
image quote by an image of another document resized to its exact pixel size. Easy negatives are
other questions' positives of the same length.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from mmlongembed.capacity import LengthLimit
from mmlongembed.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.documents import IMAGE_PLACEHOLDER, TEXT, Document, Segment, image_segment, text_segments
from mmlongembed.digests import short_sha256
from mmlongembed.errors import FitError, UserError
from mmlongembed.llm import AuditItem, LLMConfig, audit_queries
from mmlongembed.manifest import files_identity
from mmlongembed.media.pdf import Box, PageRenderer, PdfFile, RenderOptions, StoredImage
from mmlongembed.ops.answers import answer_pattern as whole_word_answer
from mmlongembed.ops.evidence import (
    EVIDENCE_ORIGIN, Unit, find_evidence, find_sentence_run, grow, units_document)
from mmlongembed.ops.length import edge_whitespace, exact_tokens, fit_block_edges, trim_edges
from mmlongembed.ops.quotes import (
    Donor, chunk_sentences, closest_aspect, evidence_positions, replace_image_evidence,
    replace_text_evidence)
from mmlongembed.pools import (
    EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, hard_negative_tolerance, pool_name)
from mmlongembed.rng import derive_rng
from mmlongembed.sources import HubSource, hub_file, iter_jsonl, require_dir
from mmlongembed.text import split_sentences
from mmlongembed.tokens import TokenCounter, default_counter

INSTRUCTION = ("Given a question about a document, retrieve the document that contains all the text and image "
               "evidence needed to answer it.")
MIN_EVIDENCE, MAX_EVIDENCE = 2, 5
RECOUNT_MARGIN = 4
GROWTH_PIECES = 4
PIECE_SHARE = 0.25  # share of padding pages used quote by quote (the rest as whole-page blocks)
SEPARATOR = "\n\n"
NOT_ANCHORS = frozenset({"yes", "no", "not answerable"})  # answers any document holds as words
TEXT_TYPES = frozenset({"Pure-text (Plain-text)", "Generalized-text (Layout)", "Text", "Pure-text"})
VISUAL_TYPES = frozenset({"Table", "Chart", "Figure", "Image"})
SUBSTITUTE = "MMDocIR layout annotations over the MMLongBench-Doc PDFs (substitute for MMDocRAG)"
ORIGINAL = "MMDocRAG JSONL (text_quotes, img_quotes, gold_quotes) with its images"
# The Hub release: {dev,evaluation}_{15,20}.jsonl (dev and evaluation are disjoint question sets; _15 and _20
# hold the same questions with 15 or 20 quotes), train.jsonl (chat-format fine-tuning data, no quotes),
# images.zip (members images/<name>.jpg, as the records' img_path) and doc_pdfs.zip (not read).
# The pin is the repo's main commit as its file listing shows it (the README update "04b58db"); only
# that short form could be read from here, so --hub-revision takes the full sha (TODO: pin it here).
HUB_SOURCE = HubSource(repo="MMDocIR/MMDocRAG", revision="04b58db", licence="CC BY-NC 4.0")
QUESTION_SETS = ("dev_15", "dev_20", "evaluation_15", "evaluation_20")
IMAGE_ARCHIVE = "images.zip"


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


@dataclass(frozen=True)
class Quote:
    id: str  # unique within the document
    kind: str  # "text" or "image"
    page: int
    order: float  # reading order within the page
    text: str = ""
    image: StoredImage | None = None

    @property
    def key(self) -> str:
        """Content key: the same text or the same image bytes is the same quote."""
        if self.kind == "text":
            return "t:" + short_sha256(self.text)
        return "i:" + (self.image.sha256[:16] if self.image else "")


@dataclass(frozen=True)
class Instance:
    id: str
    doc: str
    question: str
    answer: str
    quotes: tuple[Quote, ...]  # the instance's context, in reading order
    gold: tuple[str, ...]  # quote ids of the evidence, in context order (evidence index = position)
    origin: str

    def gold_quotes(self) -> list[Quote]:
        by_id = {q.id: q for q in self.quotes}
        return [by_id[g] for g in self.gold]


@dataclass(frozen=True)
class Block:
    """A padding unit: the quotes of one page of one document."""

    doc: str
    page: int
    quotes: tuple[Quote, ...]


@dataclass
class Sources:
    instances: list[Instance]
    blocks: list[Block]  # padding: pages holding no instance's evidence
    refill_text: dict[str, list[tuple[str, str]]]  # doc -> (id, text) of text that no context uses
    substitute: bool
    files: list[Path] = field(default_factory=list)


# -- reading ---------------------------------------------------------------------------------

def parse_types(value) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    try:
        parsed = ast.literal_eval(str(value))
    except (ValueError, SyntaxError):
        return [str(value)]
    return [str(v) for v in parsed] if isinstance(parsed, (list, tuple)) else [str(parsed)]


def reads_as_prose(text: str) -> bool:
    """Running text (a paragraph), as opposed to the words and numbers of a table, chart or
    figure: at least 8 words, three in four of them alphabetic, and a sentence end."""
    words = text.split()
    if len(words) < 8:
        return False
    alphabetic = sum(1 for w in words if re.fullmatch(r"[A-Za-z][A-Za-z'’\-]*[.,;:!?)]*", w))
    return alphabetic / len(words) >= 0.75 and bool(re.search(r"[.!?]", text))


def quote_kind(types: Iterable[str], text: str) -> str:
    """Text or image quote for an MMDocIR evidence box, from the question's evidence types and
    the box's text layer: text-only types -> text (if the box has text), visual-only -> image,
    mixed -> text when the box reads as prose."""
    types = set(types)
    textual, visual = bool(types & TEXT_TYPES), bool(types & VISUAL_TYPES)
    if not text.strip():
        return "image"
    if textual and not visual:
        return "text"
    if visual and not textual:
        return "image"
    return "text" if reads_as_prose(text) else "image"


class SubstituteReader:
    """MMDocIR annotations (questions, evidence pages, layout boxes in PDF points) over the PDFs:
    text quotes from the text layer inside a box, image quotes as crops of the rendered page."""

    def __init__(self, annotation_files: list[Path], pdf_dirs: list[Path], renderer: PageRenderer,
                 config: MMDocRAGConfig, counter: TokenCounter, report: BuildReport):
        self.files, self.renderer, self.config, self.counter, self.report = annotation_files, renderer, config, \
            counter, report
        self.pdf_paths = {p.name: p for d in pdf_dirs for p in sorted(d.rglob("*.pdf"))}
        self.pdfs: dict[str, PdfFile] = {}

    def pdf(self, name: str) -> PdfFile:
        if name not in self.pdfs:
            self.pdfs[name] = PdfFile(self.pdf_paths[name])
        return self.pdfs[name]

    def read(self) -> Sources:
        records = []
        for path in self.files:
            for number, record in enumerate(iter_jsonl(path, self.report), 1):
                name = Path(str(record.get("doc_name", ""))).name
                if not isinstance(record.get("questions"), list):
                    self.report.skip("malformed_record", f"{path.name}:{number}")
                elif name not in self.pdf_paths:
                    self.report.skip("pdf_not_found", name or f"{path.name}:{number}")
                else:
                    records.append((name, record))
        instances, evidence_pages, texts_of = [], defaultdict(set), {}
        boxes_of: dict[str, dict] = {}
        for name, record in sorted(records, key=lambda r: r[0]):
            pdf = self.pdf(name)
            boxes = boxes_of.setdefault(name, {})
            questions = []
            for q, question in enumerate(record["questions"]):
                rid = f"{name}#q{q}"
                found = self._boxes(pdf, question, rid)
                if found is None:
                    continue
                for page, box in found:
                    boxes.setdefault((page, box.key()), (page, box, parse_types(question.get("type"))))
                questions.append((rid, question, found))
            for rid, question, found in questions:
                if not MIN_EVIDENCE <= len(found) <= MAX_EVIDENCE:
                    self.report.skip("evidence_count_outside_2_to_5", rid)
                    continue
                for page, _ in found:
                    evidence_pages[name].add(page)
                instances.append((name, rid, question, found))
        for name in sorted(boxes_of):
            texts_of[name] = {page: self._page_chunks(self.pdf(name), page) for page in range(len(self.pdf(name)))}
        quotes_of = {name: {key: self._box_quote(self.pdf(name), page, box, types, f"b{n}")
                            for n, (key, (page, box, types)) in enumerate(sorted(boxes.items(),
                                                                                key=lambda kv: kv[0]))}
                     for name, boxes in boxes_of.items()}
        built, used_text = [], defaultdict(set)
        for name, rid, question, found in self.report.bar(instances, "substitute instances", "question"):
            instance = self._instance(name, rid, question, found, quotes_of[name], texts_of[name])
            if instance is not None:
                built.append(instance)
                used_text[name] |= {q.id for q in instance.quotes if q.id.startswith("c")}
        blocks, refill = [], {}
        for name in sorted(texts_of):
            refill[name] = [(f"{name}:{q.id}", q.text) for page, chunks in sorted(texts_of[name].items())
                            if page not in evidence_pages[name] for q in chunks if q.id not in used_text[name]]
            for page in range(len(self.pdf(name))):
                if page in evidence_pages[name]:
                    continue
                quotes = list(texts_of[name][page]) + self._figures(self.pdf(name), page)
                if quotes:
                    blocks.append(Block(name, page, tuple(sorted(quotes, key=lambda q: q.order))))
        for pdf in self.pdfs.values():
            pdf.close()
        return Sources(built, blocks, refill, substitute=True)

    def _boxes(self, pdf: PdfFile, question: dict, rid: str) -> list[tuple[int, Box]] | None:
        if not isinstance(question.get("Q"), str) or not isinstance(question.get("layout_mapping"), list):
            self.report.skip("malformed_question", rid)
            return None
        found, seen = [], set()
        for item in question["layout_mapping"]:
            try:
                page = int(item["page"])
                x1, y1, x2, y2 = (float(v) for v in item["bbox"])
                width, height = pdf.page_size(page)
                annotated = item.get("page_size") or [width, height]
                sx, sy = width / float(annotated[0]), height / float(annotated[1])
            except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
                self.report.skip("malformed_layout_box", rid)
                return None
            box = Box(x1 * sx, y1 * sy, x2 * sx, y2 * sy).clipped(width, height)
            if box.width < 4 or box.height < 4:
                self.report.skip("empty_layout_box", rid)
                return None
            if (page, box.key()) not in seen:
                seen.add((page, box.key()))
                found.append((page, box))
        return sorted(found, key=lambda pb: (pb[0], pb[1].y1, pb[1].x1))

    def _box_quote(self, pdf: PdfFile, page: int, box: Box, types: list[str], qid: str) -> Quote:
        text = pdf.text_in_box(page, box)
        order = box.y1 + box.x1 / 1000
        if quote_kind(types, text) == "text":
            return Quote(qid, "text", page, order, text=text)
        return Quote(qid, "image", page, order, image=self.renderer.region(pdf, page, box))

    def _page_chunks(self, pdf: PdfFile, page: int) -> list[Quote]:
        """The page's text layer as text quotes of about ``chunk_tokens`` whole sentences each,
        ordered down the page by their share of the page's text."""
        body = " ".join(pdf.text(page).split())
        if not body:
            return []
        sentences = [s.strip() for s in split_sentences(body) if s.strip()]
        counts = self.counter.count_many(sentences)
        ranges = chunk_sentences(sentences, counts, self.config.chunk_tokens)
        height = pdf.page_size(page)[1]
        return [Quote(f"c{page}.{k}", "text", page, height * a / max(1, len(sentences)),
                      text=" ".join(sentences[a:b])) for k, (a, b) in enumerate(ranges)]

    def _figures(self, pdf: PdfFile, page: int) -> list[Quote]:
        """Embedded pictures of a page (image objects), as padding image quotes."""
        width, height = pdf.page_size(page)
        out = []
        for k, box in enumerate(pdf.image_boxes(page)):
            box = box.clipped(width, height)
            small = min(box.width, box.height) < self.config.min_figure_points
            if small or box.width * box.height > 0.5 * width * height:
                continue
            out.append(Quote(f"f{page}.{k}", "image", page, box.y1, image=self.renderer.region(pdf, page, box)))
        return out

    def _instance(self, name, rid, question, found, box_quotes, page_chunks) -> Instance | None:
        gold = [box_quotes[(page, box.key())] for page, box in found]
        gold_boxes = {page: [box for p, box in found if p == page] for page, _ in found}
        if len({q.key for q in gold}) != len(gold):
            self.report.skip("duplicate_evidence", rid)
            return None
        rng = derive_rng(self.config.seed, "mmdocrag", "quotes", rid)
        # Non-evidence quotes: other questions' boxes of the document that overlap no gold box,
        # then text-layer chunks of pages without evidence, to quotes_per_instance in all.
        others = [q for (page, key), q in sorted(box_quotes.items(), key=lambda kv: kv[0])
                  if q.key not in {g.key for g in gold}
                  and not any(Box(*key).intersects(b) for b in gold_boxes.get(page, []))]
        chunks = [q for page, quotes in sorted(page_chunks.items()) if page not in gold_boxes for q in quotes]
        room = max(0, self.config.quotes_per_instance - len(gold))
        picked = [others[int(i)] for i in rng.permutation(len(others))][:room]
        picked += [chunks[int(i)] for i in rng.permutation(len(chunks))][: room - len(picked)]
        quotes = sorted([*gold, *picked], key=lambda q: (q.page, q.order, q.id))
        gold_ids = tuple(q.id for q in quotes if q in gold)
        return Instance(rid, name, question["Q"].strip(), str(question.get("A", "")).strip(), tuple(quotes), gold_ids,
                        rid)


def hub_source(config: MMDocRAGConfig) -> HubSource:
    return dataclasses.replace(HUB_SOURCE, revision=config.hub_revision)


class QuoteImages:
    """Where image quotes' files are found: ``img_path`` relative to the JSONL's folder, to its
    ``images/`` folder or to its parent's, else inside an ``images.zip`` in one of those folders
    (the Hub's archive, read in place: members ``images/<name>.jpg`` as ``img_path`` says, or the
    bare file name; macOS ``__MACOSX/`` entries are not images)."""

    def __init__(self):
        self._archives: dict[Path, tuple[zipfile.ZipFile, dict[str, str]]] = {}

    @staticmethod
    def folders(jsonl: Path) -> list[Path]:
        return [jsonl.parent, jsonl.parent / "images", jsonl.parent.parent / "images"]

    @staticmethod
    def archive_paths(jsonl: Path) -> list[Path]:
        return [p for p in dict.fromkeys([jsonl.parent / IMAGE_ARCHIVE, jsonl.parent / "images" / IMAGE_ARCHIVE,
                                          jsonl.parent.parent / IMAGE_ARCHIVE]) if p.is_file()]

    def _archive(self, path: Path) -> tuple[zipfile.ZipFile, dict[str, str]]:
        if path not in self._archives:
            try:
                archive = zipfile.ZipFile(path)
            except (OSError, zipfile.BadZipFile) as error:
                raise UserError(f"{path}: not a readable zip archive ({error})") from None
            index: dict[str, str] = {}
            for member in archive.namelist():
                if member.endswith("/") or member.startswith("__MACOSX/") or "/._" in f"/{member}":
                    continue
                index.setdefault(member, member)
                index.setdefault(member.rsplit("/", 1)[-1], member)
            self._archives[path] = (archive, index)
        return self._archives[path]

    def find(self, img_path: str, jsonl: Path, extra_archives: Iterable[Path] = ()) -> tuple[str, bytes] | None:
        """(a name for messages, the image's bytes), or None when it is nowhere."""
        if not img_path:
            return None
        for folder in self.folders(jsonl):
            if (folder / img_path).is_file():
                return str(folder / img_path), (folder / img_path).read_bytes()
        for path in [*self.archive_paths(jsonl), *extra_archives]:
            archive, index = self._archive(path)
            member = index.get(img_path) or index.get(img_path.rsplit("/", 1)[-1])
            if member is not None:
                return f"{path.name}:{member}", archive.read(member)
        return None

    def close(self) -> None:
        for archive, _ in self._archives.values():
            archive.close()
        self._archives.clear()


def read_original(paths: list[Path], renderer: PageRenderer, report: BuildReport,
                  archives: Iterable[Path] = ()) -> Sources:
    """MMDocRAG's JSONL: each line a question with its 15 or 20 quotes (``text_quotes``,
    ``img_quotes``) and ``gold_quotes``; images as ``QuoteImages`` finds them (``archives``: more
    zip archives to look in, e.g. the Hub's ``images.zip``). A ``q_id`` seen before (the same set
    downloaded twice) is a counted skip. ``img_description`` is never read: it is model-written
    and would leak the evidence."""
    records, seen = [], {}
    for path in paths:
        for number, record in enumerate(iter_jsonl(path, report), 1):
            origin = f"{path.name}:{number}"
            q_id = str(record.get("q_id", ""))
            if q_id and q_id in seen:
                report.skip("duplicate_q_id", f"{origin} (kept {seen[q_id]})")
                continue
            seen.setdefault(q_id, origin)
            records.append((record, path, origin))
    images = QuoteImages()
    try:
        return _original_sources(records, renderer, report, images, list(archives), paths)
    finally:
        images.close()


def _original_sources(records, renderer: PageRenderer, report: BuildReport, images: QuoteImages,
                      archives: list[Path], paths: list[Path]) -> Sources:
    instances, gold_keys, pages_of = [], set(), defaultdict(lambda: defaultdict(dict))
    for record, path, origin in records:
        try:
            rid, doc = str(record["q_id"]), Path(str(record["doc_name"])).name
            question = str(record["question"]).strip()
            gold = [str(g) for g in record["gold_quotes"]]
            raw = [*record.get("text_quotes", []), *record.get("img_quotes", [])]
        except (KeyError, TypeError):
            report.skip("malformed_record", origin)
            continue
        quotes = []
        for item in raw:
            quote = _original_quote(item, path, renderer, report, origin, images, archives)
            if quote is None:
                break
            quotes.append(quote)
        else:
            ids = {q.id for q in quotes}
            if not question or any(g not in ids for g in gold):
                report.skip("gold_quote_missing", origin)
                continue
            if not MIN_EVIDENCE <= len(gold) <= MAX_EVIDENCE:
                report.skip("evidence_count_outside_2_to_5", origin)
                continue
            quotes.sort(key=lambda q: (q.page, q.order, q.id))
            gold_set = set(gold)
            answer = str(record.get("answer_short") or record.get("answer") or "").strip()
            instances.append(Instance(rid, doc, question, answer, tuple(quotes),
                                      tuple(q.id for q in quotes if q.id in gold_set), origin))
            gold_keys |= {q.key for q in quotes if q.id in gold_set}
            for q in quotes:
                pages_of[doc][q.page].setdefault(q.key, q)
    blocks, refill = [], defaultdict(list)
    in_context = {(i.doc, q.key) for i in instances for q in i.quotes}
    for doc in sorted(pages_of):
        for page in sorted(pages_of[doc]):
            quotes = [q for q in pages_of[doc][page].values() if q.key not in gold_keys]
            if quotes:
                blocks.append(Block(doc, page, tuple(sorted(quotes, key=lambda q: (q.order, q.id)))))
        refill[doc] = [(f"{doc}:{q.id}", q.text) for page in sorted(pages_of[doc])
                       for q in pages_of[doc][page].values()
                       if q.kind == "text" and q.key not in gold_keys and (doc, q.key) not in in_context]
    return Sources(sorted(instances, key=lambda i: i.id), blocks, dict(refill), substitute=False, files=paths)


def _original_quote(item, path: Path, renderer: PageRenderer, report: BuildReport, origin: str,
                    images: QuoteImages, archives: list[Path]) -> Quote | None:
    try:
        qid, kind = str(item["quote_id"]), str(item.get("type", ""))
        page, order = int(item.get("page_id", 0)), float(item.get("layout_id", 0))
    except (KeyError, TypeError, ValueError):
        report.skip("malformed_quote", origin)
        return None
    if kind == "text" or "text" in item and "img_path" not in item:
        text = " ".join(str(item.get("text", "")).split())
        if not text:
            report.skip("empty_text_quote", origin)
            return None
        return Quote(qid, "text", page, order, text=text)
    found = images.find(str(item.get("img_path") or ""), path, archives)
    if found is None:
        report.skip("missing_quote_image", origin)
        return None
    return Quote(qid, "image", page, order, image=renderer.image_data(found[1], found[0]))


# -- units -----------------------------------------------------------------------------------

def _separator(counter: TokenCounter) -> Segment:
    return Segment(kind=TEXT, tokens=counter.count(SEPARATOR), text=SEPARATOR, paragraph_end=True, origin="separator")


def quote_unit(quote: Quote, doc: str, origin: str, counter: TokenCounter, kind: str = "context") -> Unit:
    """A quote as a unit: its text and a blank line as one segment (counted together: a full stop
    and the newlines after it are one token), or its image then a blank line."""
    if quote.kind == "text":
        text = quote.text + SEPARATOR
        segments = (Segment(kind=TEXT, tokens=counter.count(text), text=text, paragraph_end=True, origin=origin),)
    else:
        segments = (image_segment(quote.image.data, quote.image.height, quote.image.width, origin=origin),
                    _separator(counter))
    return Unit(id=f"{kind}:{doc}:{quote.id}", kind=kind, segments=segments)


def context_units(instance: Instance, counter: TokenCounter) -> list[Unit]:
    gold = {g: k for k, g in enumerate(instance.gold)}
    return [quote_unit(q, instance.doc, f"{EVIDENCE_ORIGIN}{gold[q.id]}" if q.id in gold else "source", counter)
            for q in instance.quotes]


def block_units(block: Block, counter: TokenCounter, whole: bool) -> list[Unit]:
    """Padding from one page of another document: the page's quotes as one unit (a block that
    reads like a page), or each quote as a unit of its own (small pieces that let a length land
    in its window). A page is used one way or the other, never both."""
    origin = f"padding:{block.doc}:p{block.page}"
    units = [quote_unit(q, block.doc, origin, counter) for q in block.quotes]
    if whole:
        return [Unit(id=f"block:p{block.page}:{block.doc}", kind="block",
                     segments=tuple(s for u in units for s in u.segments))]
    return [Unit(id=f"piece:p{block.page}.{q.id}:{block.doc}", kind="piece", segments=u.segments)
            for q, u in zip(block.quotes, units)]


def padding_doc(unit: Unit) -> str:
    return unit.id.split(":", 2)[2]


def refill_unit(doc: str, rid: str, text: str, counter: TokenCounter) -> Unit:
    return Unit(id=f"refill:{rid}", kind="refill", segments=tuple(text_segments(text, counter, origin=f"refill:{doc}")))


def answer_pattern(answer: str) -> re.Pattern | None:
    """Whole-word pattern of a distinctive answer (4+ characters with a letter); short or
    numeric answers ("8", "21%") occur in any document and are not checked."""
    return whole_word_answer(answer, not_anchors=NOT_ANCHORS, min_chars=4, needs_letter=True)


def content_keys(document: Document) -> tuple[str, set[str]]:
    """(text, image hashes) of a candidate: what the gold checks look for."""
    text, images = document.render()
    return text, {short_sha256(b) for b in images}


def holds(text: str, images: set[str], quote: Quote) -> bool:
    return quote.text in text if quote.kind == "text" else quote.image.sha256[:16] in images


@dataclass
class Built:
    units: list[Unit]
    document: Document
    n_tokens: int


class GoldGuard:
    """Every query ranks the whole pool: no candidate outside a query's group may hold any of its
    gold quotes (easy negatives hold none of them either)."""

    def __init__(self):
        self.gold: list[Quote] = []
        self.contents: list[tuple[str, set[str]]] = []

    def unclaimed(self, gold: list[Quote]) -> bool:
        """No candidate already in the pool holds any of these gold quotes."""
        return not any(holds(t, i, q) for t, i in self.contents for q in gold)

    def clean(self, document: Document) -> bool:
        """The document holds no gold quote of a query already in the pool."""
        text, images = content_keys(document)
        return not any(holds(text, images, q) for q in self.gold)

    def admit(self, gold: list[Quote], documents: list[Document]) -> bool:
        if not self.unclaimed(gold) or not all(self.clean(d) for d in documents):
            return False
        self.gold += gold
        self.contents += [content_keys(d) for d in documents]
        return True


# -- the builder -----------------------------------------------------------------------------

@register
class MMDocRAGBuilder(Builder):
    """Multi-Source Reasoning over interleaved text and image evidence (MMDocRAG): find the
    document that holds every text and image quote a question needs, against copies that lack one."""

    name = "mmdocrag"
    version = "1.1.0"  # 1.1.0: one question set (--question-set), q_id deduplicated, images.zip, the Hub
    task = "multi_source_reasoning"
    title = "MMLongEmbed Multi-Source Reasoning: MMDocRAG (interleaved text and images)"
    config_class = MMDocRAGConfig
    card_template = "mmdocrag.md.j2"
    licence = "cc-by-nc-4.0"

    def __init__(self):
        self._renderer: PageRenderer | None = None
        self._substitute: bool | None = None

    def _layout(self, config: MMDocRAGConfig) -> tuple[list[Path], list[Path], list[Path]]:
        """(the chosen question set's MMDocRAG JSONL files, MMDocIR annotation files, PDF
        directories) under --sources. Other MMDocRAG question sets there are not read: they
        repeat the chosen one's questions (_15 vs _20) or are another split."""
        root = require_dir(config.sources, "MMDocRAG JSONL + images, or mmdocir/ + mmlongbench_doc/")
        original, annotations = [], []
        for path in sorted(root.rglob("*.jsonl")):
            with open(path, encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
            if '"gold_quotes"' in first:
                original.append(path)
            elif '"layout_mapping"' in first:
                annotations.append(path)
        chosen = [p for p in original if p.stem == config.question_set]
        if original and not chosen:
            raise UserError(f"no {config.question_set}.jsonl under {root} (MMDocRAG question sets there: "
                            f"{', '.join(sorted({p.stem for p in original}))}): choose one with --question-set NAME")
        pdf_dirs = sorted({p.parent for p in root.rglob("*.pdf")})
        return chosen, annotations, pdf_dirs

    def _hub_files(self, config: MMDocRAGConfig) -> tuple[Path, Path]:
        """The question set's JSONL and images.zip from the Hub at the pinned revision."""
        if config.question_set not in QUESTION_SETS:
            raise UserError(f"--question-set {config.question_set}: the Hub release has "
                            f"{', '.join(QUESTION_SETS)}; pass --sources DIR for a file of your own")
        source = hub_source(config)
        self._hub_paths = [hub_file(source, f"{config.question_set}.jsonl", self.name),
                           hub_file(source, IMAGE_ARCHIVE, self.name)]
        return self._hub_paths[0], self._hub_paths[1]

    # -- sources ---------------------------------------------------------------------------
    def load_sources(self, config: MMDocRAGConfig, report: BuildReport) -> Sources:
        self._renderer = PageRenderer(config.render_settings())
        if not config.sources:
            jsonl, archive = self._hub_files(config)
            sources = read_original([jsonl], self._renderer, report, archives=[archive])
            self._substitute = False
            if not sources.instances:
                raise UserError(f"no usable instance (2 to 5 evidence quotes) in {HUB_SOURCE.repo} "
                                f"{config.question_set}.jsonl")
            return sources
        original, annotations, pdf_dirs = self._layout(config)
        if original:
            sources = read_original(original, self._renderer, report)
        elif annotations and pdf_dirs:
            reader = SubstituteReader(annotations, pdf_dirs, self._renderer, config, default_counter(), report)
            sources = reader.read()
            sources.files = [*annotations, *(reader.pdf_paths[n] for n in sorted(reader.pdfs))]
        else:
            raise UserError(f"no MMDocRAG JSONL (gold_quotes) and no MMDocIR annotations with PDFs under "
                            f"{config.sources}")
        self._substitute = sources.substitute
        if not sources.instances:
            raise UserError(f"no usable instance (2 to 5 evidence quotes) under {config.sources}")
        return sources

    def source_identity(self, config: MMDocRAGConfig) -> dict:
        if not config.sources:
            paths = getattr(self, "_hub_paths", None)
            return {"kind": "hub", "name": "MMDocRAG", "licence": HUB_SOURCE.licence, **hub_source(config).identity,
                    "files": files_identity(paths) if paths else [f"{config.question_set}.jsonl", IMAGE_ARCHIVE],
                    "question_set": config.question_set,
                    "substitute": False, "format": ORIGINAL, "render": config.render_settings().identity()}
        original, annotations, pdf_dirs = self._layout(config)
        root = Path(config.sources)
        files = list(original) or [*annotations, *(p for d in pdf_dirs for p in d.rglob("*.pdf"))]
        for path in original:
            for folder in QuoteImages.folders(path)[1:]:
                files += sorted(folder.rglob("*")) if folder.is_dir() else []
            files += QuoteImages.archive_paths(path)
        return {"kind": "local", "name": "MMDocRAG", "licence": "CC BY-NC 4.0",
                "question_set": config.question_set if original else None,
                "substitute": not original, "format": ORIGINAL if original else SUBSTITUTE,
                "files": files_identity(sorted({f for f in files if f.is_file()}), root),
                "render": config.render_settings().identity()}

    # -- pools -----------------------------------------------------------------------------
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

    def build_pools(self, sources: Sources, config: MMDocRAGConfig, report: BuildReport) -> list[Pool]:
        counter = default_counter()
        bands = LengthBand.tight_bands(config.lengths, config.band_slack)
        instances = sources.instances
        audit = audit_queries([AuditItem(i.id, i.question, i.answer, tuple(
            q.text if q.kind == "text" else "[image quote]" for q in i.gold_quotes())) for i in instances],
            config, report)
        kept = [i for i in instances if i.id in audit.kept]
        units_of = {i.id: context_units(i, counter) for i in instances}
        blocks = [u for b in sources.blocks for u in block_units(
            b, counter, whole=derive_rng(config.seed, self.name, "piece", b.doc, b.page).random() >= PIECE_SHARE)]
        doc_of_block = {u.id: padding_doc(u) for u in blocks}
        refill = {doc: [refill_unit(doc, rid, text, counter) for rid, text in items]
                  for doc, items in sources.refill_text.items()}
        donors = [(b.doc, Donor(f"{b.doc}:{q.id}", q.image.height, q.image.width, q.image.data))
                  for b in sources.blocks for q in b.quotes if q.kind == "image"]
        order_rng = derive_rng(config.seed, self.name, "order")
        order = [kept[int(k)] for k in order_rng.permutation(len(kept))]
        memo: dict[tuple[str, str], list[Built]] = {}
        supply = Supply(blocks, doc_of_block, refill, donors)

        def positives_of(instance: Instance, exclude_doc: str = "") -> list[Built]:
            """The instance's document at every length; ``exclude_doc``: also without padding
            from that document (an easy negative for a query of that document, built by the
            same procedure as the positives so that lengths are exchangeable)."""
            key = (instance.id, exclude_doc)
            if key not in memo:
                memo[key] = self._positives(instance, units_of[instance.id], bands, supply, config, counter,
                                            report if not exclude_doc else BuildReport(progress=False), exclude_doc)
            return memo[key]

        pools = []
        for level, band in enumerate(bands):
            pools.append(self._easy_pool(band, level, order, positives_of, config, report))
            pools.append(self._hard_pool(band, level, order, positives_of, supply, config, counter, report))
        stats = self._renderer.stats()
        report.notes.append(f"{'substitute: ' + SUBSTITUTE if sources.substitute else ORIGINAL}; "
                            f"{len(instances)} instances with 2-5 evidence quotes, {len(kept)} kept by the audit; "
                            f"{stats['renders']} images rendered or re-encoded in {stats['seconds']} s")
        # how long rendering took is a fact of this build, not of its sources (the up-to-date rule
        # compares sources)
        report.stats["rendering"] = self._renderer.stats()
        return pools

    def _window(self, band: LengthBand) -> tuple[int, int]:
        tolerance = hard_negative_tolerance(band.hi)
        return band.lo + tolerance, band.hi - tolerance - RECOUNT_MARGIN

    def _positives(self, instance, context, bands, supply, config, counter, report, exclude_doc="") -> list[Built]:
        """The positive at each length, each grown from the previous one by whole blocks of
        other documents; stops at the first length that cannot be built (counted)."""
        usable = [u for u in supply.padding_for(instance) if supply.doc_of_block[u.id] != exclude_doc]
        out: list[Built] = []
        units = list(context)
        for level, band in enumerate(bands):
            lo, hi = self._window(band)
            rng = derive_rng(config.seed, self.name, instance.id, band.target, "positive", exclude_doc)
            try:
                units = grow(units, level, lo, hi, [u for u in usable if u.kind == "block"],
                             [u for u in usable if u.kind == "piece"], rng, GROWTH_PIECES)
            except FitError as error:
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

    def _query(self, instance: Instance) -> Query:
        return Query(id=f"q:{instance.id}", text=instance.question, instruction=INSTRUCTION, source_id=instance.id,
                     n_tokens=default_counter().count(instance.question), extra={"doc_name": instance.doc})

    def _positive_candidate(self, instance: Instance, built: Built) -> Candidate:
        return Candidate(
            id=f"d:{instance.id}", document=built.document, role=POSITIVE, group=f"q:{instance.id}",
            source_id=instance.id, n_tokens=built.n_tokens, extra={"doc_name": instance.doc},
            provenance={"variant": "original", "answer": instance.answer, "n_evidence": len(instance.gold),
                        "evidence": evidence_positions(built.document, built.n_tokens, default_counter()),
                        "padding": _padding(built.units)})

    def _easy_pool(self, band, level, order, positives_of, config, report) -> Pool:
        pool = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name, difficulty="easy",
                    band=band, modality="mixed")
        k = config.negatives_per_query
        claimed: set[str] = set()
        guard = GoldGuard()
        for instance in order:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            built = positives_of(instance)
            if instance.id in claimed or len(built) <= level:
                continue
            positive, gold = built[level], instance.gold_quotes()
            if not guard.unclaimed(gold) or not guard.clean(positive.document):
                report.skip(f"easy_{band.name}_evidence_shared_with_another_query", instance.id)
                continue
            rng = derive_rng(config.seed, self.name, pool.name, instance.id, "negatives")
            negatives = []
            for j in rng.permutation(len(order)):
                other = order[int(j)]
                if len(negatives) == k:
                    break
                if other.id == instance.id or other.id in claimed or other.doc == instance.doc:
                    continue
                others = positives_of(other, instance.doc)
                if len(others) <= level or not guard.clean(others[level].document):
                    continue
                made = others[level]
                text, images = content_keys(made.document)
                if not any(holds(text, images, q) for q in gold):
                    negatives.append((other, made))
            if len(negatives) < k or not guard.admit(gold, [positive.document, *(m.document for _, m in negatives)]):
                report.skip(f"easy_{band.name}_not_enough_negatives", instance.id)
                continue
            claimed |= {instance.id, *(o.id for o, _ in negatives)}
            pool.add_query(self._query(instance), self._positive_candidate(instance, positive), [Candidate(
                id=f"d:{other.id}:for:{instance.id}", document=made.document, role=EASY_NEGATIVE,
                group=f"q:{instance.id}", source_id=other.id, n_tokens=made.n_tokens, extra={"doc_name": other.doc},
                provenance={"variant": "other_instance", "instance": other.id, "padding": _padding(made.units)})
                for other, made in negatives])
        return pool

    def _hard_pool(self, band, level, order, positives_of, supply, config, counter, report) -> Pool:
        pool = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name, difficulty="hard",
                    band=band, modality="mixed")
        guard = GoldGuard()
        for instance in order:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            built = positives_of(instance)
            if len(built) <= level:
                continue
            positive = built[level]
            variants = self._hard_variants(instance, positive, band, pool.name, supply, config, counter)
            if isinstance(variants, str):
                report.skip(f"hard_{band.name}_{variants}", instance.id)
                continue
            if not guard.admit(instance.gold_quotes(), [positive.document, *(m.document for _, m, _ in variants)]):
                report.skip(f"hard_{band.name}_evidence_shared_with_another_query", instance.id)
                continue
            pool.add_query(self._query(instance), self._positive_candidate(instance, positive), [Candidate(
                id=f"d:{instance.id}:{variant}", document=made.document, role=HARD_NEGATIVE,
                group=f"q:{instance.id}", source_id=instance.id, n_tokens=made.n_tokens,
                extra={"doc_name": instance.doc},
                provenance={"variant": variant, "removed": removed,
                            "evidence": evidence_positions(made.document, made.n_tokens, counter),
                            "padding": _padding(made.units)})
                for variant, made, removed in variants])
        return pool

    def _hard_variants(self, instance, positive: Built, band, pool_label, supply, config, counter):
        """Three copies of the positive, each without a gold quote (first / last / a random middle
        one, or both of two): text refilled by whole sentences of the same length (the same
        document's unused text first), images by another document's image resized to the exact
        size. Returns the variants, or the skip reason."""
        n = len(instance.gold)
        rng = derive_rng(config.seed, self.name, pool_label, instance.id, "hard")
        plans = [("drop_first", [0]), ("drop_last", [n - 1])]
        plans.append(("drop_middle", [int(rng.integers(1, n - 1))]) if n >= 3 else ("drop_both", [0, 1]))
        plans = plans[: config.negatives_per_query]
        used = {u.id for u in positive.units}
        text_sources = [[u for u in supply.refill.get(instance.doc, []) if u.id not in used],
                        [u for u in supply.refill_elsewhere(instance) if u.id not in used]]
        donors = supply.donors_for(instance, used_docs={supply.doc_of_block.get(u.id) for u in positive.units})
        tolerance = hard_negative_tolerance(positive.n_tokens)
        gold = instance.gold_quotes()
        out = []
        for variant, removed_indices in plans:
            units, removed = list(positive.units), []
            for k in removed_indices:
                u, s = find_evidence(units, k)
                segment = units[u].segments[s]
                run_rng = derive_rng(config.seed, pool_label, instance.id, variant, k)
                if segment.is_visual:
                    donor = closest_aspect(donors, segment.height, segment.width, run_rng) if donors else None
                    if donor is None:
                        return "no_image_donor"
                    stored = self._renderer.resized(StoredImage(donor.data, donor.height, donor.width),
                                                    segment.height, segment.width)
                    refill = image_segment(stored.data, stored.height, stored.width, origin=f"replacement:{donor.id}")
                    units, record = replace_image_evidence(units, k, refill, donor.id)
                else:
                    slack = max(1, (tolerance - RECOUNT_MARGIN) // len(removed_indices))
                    window = (max(1, segment.tokens - slack), segment.tokens + slack)
                    found = None
                    for candidates in text_sources:
                        try:
                            found = find_sentence_run(candidates, *window, segment.tokens, run_rng)
                            break
                        except FitError:
                            continue
                    if found is None:
                        return "no_replacement_sentences"
                    source, a, b = found
                    lead, tail = edge_whitespace(segment.text)
                    run = fit_block_edges(source.segments[a:b], lead, tail, counter, f"replacement:{source.id}")
                    units, record = replace_text_evidence(units, k, run, source.id, (a, b))
                removed.append(record)
            document = trim_edges(units_document(f"{instance.id}@{band.name}:{variant}", units), counter)
            n_tokens = exact_tokens(document, counter)
            if not band.contains(n_tokens) or abs(n_tokens - positive.n_tokens) > tolerance:
                return "length_mismatch"
            text, images = content_keys(document)
            if any(holds(text, images, gold[k]) for k in removed_indices):
                return "removed_evidence_still_present"
            out.append((variant, Built(units, document, n_tokens), removed))
        return out

    # -- checks ----------------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        return check_quote_pool(pool_row, corpus, qrels)

    def example_config(self, directory) -> MMDocRAGConfig:
        from mmlongembed.testing import write_mmdocir_sources

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


class Supply:
    """Padding blocks (other documents' pages), refill text and image donors."""

    def __init__(self, blocks: list[Unit], doc_of_block: dict[str, str], refill: dict[str, list[Unit]],
                 donors: list[tuple[str, Donor]]):
        self.blocks, self.doc_of_block, self.refill, self.donors = blocks, doc_of_block, refill, donors
        self._memo: dict[str, list[Unit]] = {}

    def padding_for(self, instance: Instance) -> list[Unit]:
        """Blocks of other documents that hold none of the instance's gold quotes or its answer."""
        if instance.id not in self._memo:
            pattern, gold = answer_pattern(instance.answer), instance.gold_quotes()
            out = []
            for unit in self.blocks:
                if self.doc_of_block[unit.id] == instance.doc:
                    continue
                document = units_document(unit.id, [unit])
                text, images = content_keys(document)
                if any(holds(text, images, q) for q in gold) or (pattern is not None and pattern.search(text)):
                    continue
                out.append(unit)
            self._memo[instance.id] = out
        return self._memo[instance.id]

    def refill_elsewhere(self, instance: Instance) -> list[Unit]:
        return [u for doc, units in sorted(self.refill.items()) if doc != instance.doc for u in units]

    def donors_for(self, instance: Instance, used_docs: set) -> list[Donor]:
        """Images of other documents, those whose pages the positive does not already hold first."""
        gold = {q.image.sha256[:16] for q in instance.gold_quotes() if q.kind == "image"}
        usable = [(doc, d) for doc, d in self.donors if doc != instance.doc and short_sha256(d.data) not in gold]
        fresh = [d for doc, d in usable if doc not in used_docs]
        return fresh or [d for _, d in usable]


def _padding(units: list[Unit]) -> list[dict]:
    return [{"id": u.id, "doc": padding_doc(u)} for u in units if u.kind in ("block", "piece")]


def evidence_statistics(pools: list[Pool]) -> dict:
    """Evidence per query (text and image quotes), images per candidate, for the card."""
    per_pool = []
    for pool in pools:
        kinds = Counter()
        n_evidence = []
        for c in pool.candidates:
            if c.role != POSITIVE:
                continue
            evidence = c.provenance.get("evidence", [])
            n_evidence.append(len(evidence))
            kinds.update(e["kind"] for e in evidence)
        images = [sum(1 for s in c.document.segments if s.is_visual) for c in pool.candidates]
        if n_evidence:
            per_pool.append({"pool": pool.name, "queries": len(pool.queries), "text_quotes": kinds.get("text", 0),
                             "image_quotes": kinds.get("image", 0), "evidence_min": min(n_evidence),
                             "evidence_max": max(n_evidence), "images_min": min(images), "images_max": max(images)})
    return {"pools": per_pool}


def check_quote_pool(pool_row: dict, corpus: dict, qrels: dict) -> Iterator[Problem]:
    """Gold-quote invariants on the data as written (issue: exactly one candidate per query holds
    all its gold quotes, and it is the positive; placeholders match the images in order)."""
    name = pool_row["pool"]
    rows = {cid: {"text": corpus["text"][i], "images": [short_sha256(im["bytes"]) for im in corpus["images"][i]],
                  "role": corpus["role"][i], "group": corpus["group"][i], "doc_name": corpus["doc_name"][i],
                  "provenance": json.loads(corpus["provenance"][i])}
            for i, cid in enumerate(corpus["_id"])}
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    gold_of: dict[str, dict[int, tuple[str, str]]] = {}
    for cid, row in rows.items():
        if row["text"].count(IMAGE_PLACEHOLDER) != len(row["images"]):
            yield Problem(name, "image_placeholders", f"{cid}: placeholders and images differ in number")
        for e in row["provenance"].get("evidence", []):
            if e["kind"] == "image":
                slot = e["image_slot"]
                if slot >= len(row["images"]) or row["images"][slot] != e["sha256"]:
                    yield Problem(name, "image_slots", f"{cid}: evidence {e['index']} is not image {slot}")
            else:
                a, b = e["char_range"]
                if short_sha256(row["text"][a:b].strip()) != e["sha256"]:
                    yield Problem(name, "evidence_positions", f"{cid}: evidence {e['index']} is not at {a}:{b}")
    for group, pid in positive_of.items():
        positive = rows.get(pid)
        if positive is None:
            continue
        gold = {}
        for e in positive["provenance"].get("evidence", []):
            if e["kind"] == "image":
                gold[e["index"]] = ("image", e["sha256"])
            else:
                a, b = e["char_range"]
                gold[e["index"]] = ("text", positive["text"][a:b].strip())
        gold_of[group] = gold
        if len(gold) != positive["provenance"].get("n_evidence") or not MIN_EVIDENCE <= len(gold) <= MAX_EVIDENCE:
            yield Problem(name, "evidence_count", f"{pid}: {len(gold)} gold quotes recorded")
    for group, gold in gold_of.items():
        if not gold:
            continue
        for cid, row in rows.items():
            present = {k for k, (kind, value) in gold.items()
                       if (value in row["images"] if kind == "image" else value in row["text"])}
            if cid != positive_of[group] and present == set(gold):
                yield Problem(name, "all_gold_in_one_candidate",
                              f"{cid} holds every gold quote of {group}, whose positive is {positive_of[group]}")
            if row["group"] != group:
                continue
            if row["role"] == POSITIVE and present != set(gold):
                yield Problem(name, "positive_gold", f"{cid} lacks gold quotes {sorted(set(gold) - present)}")
            elif row["role"] == HARD_NEGATIVE:
                dropped = {r["index"] for r in row["provenance"].get("removed", [])}
                if present & dropped or present != set(gold) - dropped:
                    yield Problem(name, "removed_quote", f"{cid}: holds gold {sorted(present)}, dropped "
                                                         f"{sorted(dropped)}")
                for r in row["provenance"].get("removed", []):
                    if r["kind"] == "image" and r["replacement"]["tokens"] != r["tokens"]:
                        yield Problem(name, "image_refill", f"{cid}: image refill of {r['replacement']['tokens']} "
                                                            f"tokens for {r['tokens']}")
            elif row["role"] == EASY_NEGATIVE and present:
                yield Problem(name, "easy_negative_gold", f"{cid} holds gold quotes {sorted(present)} of {group}")
        own = rows[positive_of[group]]["doc_name"]
        for cid, row in rows.items():
            if row["group"] == group and any(p["doc"] == own for p in row["provenance"].get("padding", [])):
                yield Problem(name, "padding_source", f"{cid} is padded with a block of its query's own document")
