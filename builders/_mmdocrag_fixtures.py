"""Generated MMDocRAG sources for tests and the builder's example: MMDocIR annotations over
generated PDFs (the substitute's layout) and MMDocRAG's own JSONL, as a folder or as the Hub
release ships it."""

from __future__ import annotations

import json
import random
import shutil
import zipfile
from pathlib import Path

import numpy as np

from mmlongembed.core.rng import derive_rng
from mmlongembed.testing import made_up_word, mark_synthetic, paged_document_spec, write_pdf


def write_mmdocir_sources(root: Path, n_documents: int = 8, n_pages: int = 12, questions_per_document: int = 3,
                          seed: int = 9) -> dict:
    """Generated sources in the shared-data layout of the MMDocRAG substitute:
    ``mmlongbench_doc/documents/*.pdf`` and ``mmdocir/MMDocIR_annotations.subset.jsonl`` (MMDocIR's
    format: per document, questions with 0-based ``page_id`` and ``layout_mapping`` boxes in PDF
    points, top-left origin). Each question has 2 to 4 evidence boxes on distinct pages: text
    paragraphs ('Pure-text (Plain-text)') and figures or photos ('Figure'). Returns name -> pages."""
    rng = derive_rng(seed, "mmdocir-fixture")
    pyrng = random.Random(seed)
    base = Path(root)
    mark_synthetic(base)
    out = {}
    lines = []
    for d in range(n_documents):
        name = f"paper{d:02d}.pdf"
        pages = paged_document_spec(rng, 100 + d, n_pages, image_every=2)
        write_pdf(base / "mmlongbench_doc" / "documents" / name, pages)
        out[name] = pages
        questions = []
        evidence_pages = list(range(n_pages // 2))  # the other half is free for padding
        pyrng.shuffle(evidence_pages)
        for q in range(questions_per_document):
            n_evidence = 2 + (q + d) % 3
            chosen = sorted(evidence_pages[:n_evidence])
            evidence_pages = evidence_pages[n_evidence:] + evidence_pages[:n_evidence]
            mapping, types, names = [], set(), []
            for k, page in enumerate(chosen):
                blocks = pages[page]["blocks"]
                if k % 2 == 0:
                    kind, box, _ = next(b for b in blocks if b[0] == "text")
                    types.add("Pure-text (Plain-text)")
                else:
                    kind, box, _ = next(b for b in blocks if b[0] in ("photo", "figure"))
                    types.add("Figure")
                names.append(blocks[0][2].split()[0])
                mapping.append({"page": page, "page_size": list(pages[page]["size"]), "bbox": [float(v) for v in box]})
            questions.append({"Q": f"Which {made_up_word(pyrng)} links the {' and the '.join(names)} sections of "
                                   f"Report {d}?",
                              "A": f"Zz{made_up_word(pyrng)}", "type": str(sorted(types)), "page_id": chosen,
                              "layout_mapping": mapping})
        # one question with a single evidence box: the 2-to-5 filter drops it
        questions.append({"Q": f"What is {made_up_word(pyrng).title()}?", "A": "x",
                          "type": "['Pure-text (Plain-text)']",
                          "page_id": [0], "layout_mapping": [{"page": 0, "page_size": list(pages[0]["size"]),
                                                              "bbox": [float(v) for v in pages[0]["blocks"][1][1]]}]})
        lines.append({"doc_name": name, "domain": "Research report", "page_indices": [0, n_pages],
                      "layout_indices": [0, 0], "questions": questions})
    (base / "mmdocir").mkdir(parents=True, exist_ok=True)
    with open(base / "mmdocir" / "MMDocIR_annotations.subset.jsonl", "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    return out


def write_mmdocrag_jsonl(root: Path, n_documents: int = 6, records_per_document: int = 2, seed: int = 13,
                         leak: str = "", release: bool = False, subject_share: float = 0.0) -> Path:
    """Generated sources in MMDocRAG's own format: ``mmdocrag/evaluation_20.jsonl`` (``q_id``,
    ``doc_name``, ``question``, ``text_quotes``, ``img_quotes``, ``gold_quotes``, answers) and
    ``mmdocrag/images/*.jpg``. Every ``img_description`` contains ``leak`` (a test can check that
    it never reaches a candidate). ``release=True`` lays the folder out as the Hub repo
    ``MMDocIR/MMDocRAG`` ships it: ``evaluation_15``/``evaluation_20`` (the same questions with
    fewer or more quotes), ``dev_15``/``dev_20`` (other questions), ``train.jsonl`` (chat-format
    fine-tuning lines), and the images only in ``images.zip`` (members ``images/<name>.jpg`` as
    ``img_path`` says, plus macOS ``__MACOSX/`` entries). ``subject_share`` > 0: the question's two
    words (its subject) are drawn first and each sentence of the record's text quotes, gold or not,
    names one of them with that chance, as a real document's quotes name what it is about (0: the
    records as they always were drawn)."""
    base = Path(root) / "mmdocrag"
    (base / "images").mkdir(parents=True, exist_ok=True)
    mark_synthetic(root)
    records = _RecordWriter(base, derive_rng(seed, "mmdocrag-fixture"), random.Random(seed), records_per_document,
                            leak, release, subject_share)
    evaluation = records.make(0, n_documents, 0)
    _write_jsonl(base / "evaluation_20.jsonl", evaluation)
    if release:
        dev = records.make(n_documents, max(2, n_documents // 2), 5000)
        _write_release(base, evaluation, dev)
    return base


class _RecordWriter:
    """MMDocRAG records with their images (written to ``base/images``), drawn in one sequence."""

    def __init__(self, base: Path, rng: np.random.Generator, pyrng: random.Random, records_per_document: int,
                 leak: str, release: bool, subject_share: float = 0.0):
        self.base, self.rng, self.pyrng, self.records_per_document = base, rng, pyrng, records_per_document
        self.leak, self.release, self.subject_share = leak, release, subject_share
        self.prefix = "images/" if release else ""

    def make(self, first_document: int, count: int, first_id: int) -> list[dict]:
        out = []
        for d in range(first_document, first_document + count):
            doc = f"{made_up_word(self.pyrng).title()}_Report_{d}.pdf"
            for r in range(self.records_per_document):
                pyrng = self.pyrng
                subject = (made_up_word(pyrng), made_up_word(pyrng).title()) if self.subject_share else ()
                text_quotes, img_quotes = self._text_quotes(r, subject), self._image_quotes(doc, r)
                gold = ["text1", "image2"] + (["text5"] if (d + r) % 2 else [])
                first, second = subject or (made_up_word(pyrng), made_up_word(pyrng).title())
                out.append({"q_id": first_id + len(out) if self.release else f"{d}-{r}", "doc_name": doc,
                            "domain": "Research report",
                            "question": f"Which {first} does the {second} table in Report {d} show?",
                            "evidence_modality_type": ["text", "image"], "question_type": "multi",
                            "text_quotes": text_quotes, "img_quotes": img_quotes, "gold_quotes": gold,
                            "answer_short": f"Zz{made_up_word(pyrng)}", "answer_interleaved": "see ![](image2)"})
        return out

    def _text_quotes(self, r: int, subject: tuple[str, ...] = ()) -> list[dict]:
        pyrng, quotes = self.pyrng, []
        for t in range(6):
            sentences = [" ".join(made_up_word(pyrng) for _ in range(pyrng.randint(6, 10))).capitalize() + "."
                         for _ in range(pyrng.randint(3, 5))]
            if subject:
                sentences = [f"{s[:-1]} of the {pyrng.choice(subject)}." if pyrng.random() < self.subject_share
                             else s for s in sentences]
            quotes.append({"quote_id": f"text{t + 1}", "type": "text", "text": " ".join(sentences),
                           "page_id": 2 * r + t // 3, "layout_id": 10 * t})
        return quotes

    def _image_quotes(self, doc: str, r: int) -> list[dict]:
        from PIL import Image

        quotes = []
        for m in range(4):
            name = f"{Path(doc).stem}_r{r}_{m}.jpg"
            w, h = int(self.rng.integers(60, 140)), int(self.rng.integers(50, 120))
            colour = tuple(int(c) for c in self.rng.integers(0, 256, 3))
            Image.new("RGB", (w, h), colour).save(self.base / "images" / name, quality=85)
            quotes.append({"quote_id": f"image{m + 1}", "type": "image", "img_path": self.prefix + name,
                           "img_description": f"{self.leak} a chart of {made_up_word(self.pyrng)}",
                           "page_id": 2 * r + m // 2, "layout_id": 10 * m + 5})
        return quotes


def _write_jsonl(path: Path, lines: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")


def _fewer_quotes(record: dict) -> dict:
    """The _15 file's record: the same question, two non-gold text quotes fewer."""
    dropped = [q["quote_id"] for q in record["text_quotes"] if q["quote_id"] not in record["gold_quotes"]][-2:]
    return {**record, "text_quotes": [q for q in record["text_quotes"] if q["quote_id"] not in dropped]}


def _write_release(base: Path, evaluation: list[dict], dev: list[dict]) -> None:
    """The rest of the Hub release beside evaluation_20: the _15 files, dev, train.jsonl, and the
    images moved into images.zip."""
    _write_jsonl(base / "evaluation_15.jsonl", [_fewer_quotes(r) for r in evaluation])
    _write_jsonl(base / "dev_20.jsonl", dev)
    _write_jsonl(base / "dev_15.jsonl", [_fewer_quotes(r) for r in dev])
    _write_jsonl(base / "train.jsonl", [{"messages": [
        {"role": "system", "content": "Answer from the quotes."},
        {"role": "user", "content": f"The user question is: {r['question']}"},
        {"role": "assistant", "content": r["answer_interleaved"]}]} for r in evaluation + dev])
    with zipfile.ZipFile(base / "images.zip", "w") as archive:
        for image in sorted((base / "images").iterdir()):
            archive.write(image, f"images/{image.name}")
            archive.writestr(f"__MACOSX/images/._{image.name}", b"\x00\x05\x16\x07 not an image")
    shutil.rmtree(base / "images")
