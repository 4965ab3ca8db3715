"""The MMDocRAG substitute, read: MMDocIR's layout annotations (questions, evidence pages, layout
boxes in PDF points) over the MMLongBench-Doc PDFs, read as MMDocRAG's records (``Sources``).

A text box becomes a text quote from the PDF's text layer inside it, a visual box an image quote
cropped from the rendered page; pages without evidence are cut into text quotes of whole
sentences and their embedded pictures become image quotes. MMDocRAG ships each question with
its 15 or 20 quotes; the substitute draws the non-evidence ones (the one seeded choice here: a
generator from the seed and the question's identity).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import BuildReport
from mmlongembed.media.pdf import Box, PageRenderer, PdfFile
from mmlongembed.ops.multisource.quotes import Block, Instance, Quote, chunk_sentences
from mmlongembed.readers.mmdocrag import MAX_EVIDENCE, MIN_EVIDENCE, Sources
from mmlongembed.core.rng import derive_rng
from mmlongembed.readers.sources import iter_jsonl
from mmlongembed.core.text import split_sentences
from mmlongembed.core.tokens import TokenCounter

TEXT_TYPES = frozenset({"Pure-text (Plain-text)", "Generalized-text (Layout)", "Text", "Pure-text"})
VISUAL_TYPES = frozenset({"Table", "Chart", "Figure", "Image"})


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


@dataclass(frozen=True)
class SubstituteOptions:
    """What reading the substitute takes from the build's config."""

    seed: int
    quotes_per_instance: int  # quotes in an instance's own context, gold included
    chunk_tokens: int  # tokens of a text quote cut from a page's text layer
    min_figure_points: float  # smallest side (PDF points) of an embedded picture used as a padding image


class SubstituteReader:
    """MMDocIR annotations (questions, evidence pages, layout boxes in PDF points) over the PDFs:
    text quotes from the text layer inside a box, image quotes as crops of the rendered page."""

    def __init__(self, annotation_files: list[Path], pdf_dirs: list[Path], renderer: PageRenderer,
                 options: SubstituteOptions, counter: TokenCounter, report: BuildReport):
        self.files, self.renderer, self.options, self.counter, self.report = annotation_files, renderer, options, \
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
        return Sources(built, blocks, refill, substitute=True, renderer=self.renderer)

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
        ranges = chunk_sentences(sentences, counts, self.options.chunk_tokens)
        height = pdf.page_size(page)[1]
        return [Quote(f"c{page}.{k}", "text", page, height * a / max(1, len(sentences)),
                      text=" ".join(sentences[a:b])) for k, (a, b) in enumerate(ranges)]

    def _figures(self, pdf: PdfFile, page: int) -> list[Quote]:
        """Embedded pictures of a page (image objects), as padding image quotes."""
        width, height = pdf.page_size(page)
        out = []
        for k, box in enumerate(pdf.image_boxes(page)):
            box = box.clipped(width, height)
            small = min(box.width, box.height) < self.options.min_figure_points
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
        rng = derive_rng(self.options.seed, "mmdocrag", "quotes", rid)
        # Non-evidence quotes: other questions' boxes of the document that overlap no gold box,
        # then text-layer chunks of pages without evidence, to quotes_per_instance in all.
        others = [q for (page, key), q in sorted(box_quotes.items(), key=lambda kv: kv[0])
                  if q.key not in {g.key for g in gold}
                  and not any(Box(*key).intersects(b) for b in gold_boxes.get(page, []))]
        chunks = [q for page, quotes in sorted(page_chunks.items()) if page not in gold_boxes for q in quotes]
        room = max(0, self.options.quotes_per_instance - len(gold))
        picked = [others[int(i)] for i in rng.permutation(len(others))][:room]
        picked += [chunks[int(i)] for i in rng.permutation(len(chunks))][: room - len(picked)]
        quotes = sorted([*gold, *picked], key=lambda q: (q.page, q.order, q.id))
        gold_ids = tuple(q.id for q in quotes if q in gold)
        return Instance(rid, name, question["Q"].strip(), str(question.get("A", "")).strip(), tuple(quotes), gold_ids,
                        rid)
