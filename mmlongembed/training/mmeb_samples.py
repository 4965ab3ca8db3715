"""Real retrieval pairs from the shared sample data, written in the MMEB-train layout.

MMEB-train (TIGER-Lab, VLM2Vec) itself is not local. These pairs stand in for it in tests and
demos of the ``evialign-evidence`` builder; the texts are the samples' own, the instructions are
written inline in MMEB's style (``<|image_1|>`` marks the image, the instruction opens the text):

- ``MMLongBench-Doc`` (T -> I, like Wiki-SS-NQ): an answerable question -> its first evidence
  page, rendered with the toolkit's PDF renderer (``mmlongembed.media.pdf``) to a pixel budget, PNG;
- ``HotpotQA`` (T -> T): a question -> the paragraph of its first supporting fact (title line,
  then the paragraph's sentences);
- ``scikit-image-photos`` (I -> T): a photo -> its one-line description from SOURCES.md.

Layout: ``<out>/<subset>/train.jsonl`` (``qry``, ``qry_image_path``, ``pos_text``,
``pos_image_path``; image paths relative to ``<out>``) and the images under ``<out>/images/``.
Run standing alone: ``python -m mmlongembed.training.mmeb_samples --shared ../shared/data --out DIR``. The
subsets are stand-ins, not MMEB's retrieval subsets (which the builder reads by default), so a
build names them: ``--subsets MMLongBench-Doc HotpotQA scikit-image-photos``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path


MMEB_IMAGE_TOKEN = "<|image_1|>"
PAGE_PIXELS = 400_000  # a rendered page is scaled to about this many pixels


def render_pdf_page(path: Path, page_number: int, max_pixels: int = PAGE_PIXELS) -> bytes:
    """Page ``page_number`` (1-based) of a PDF as PNG bytes, at most ``max_pixels`` (the toolkit's
    one renderer, ``mmlongembed.media.pdf``)."""
    from mmlongembed.media.pdf import PageRenderer, PdfFile, RenderSettings

    pdf = PdfFile(path)
    try:
        if not 1 <= page_number <= len(pdf):
            raise ValueError(f"{path.name} has {len(pdf)} pages, not {page_number}")
        return PageRenderer(RenderSettings(max_pixels=max_pixels, image_format="PNG")).page(pdf, page_number - 1).data
    finally:
        pdf.close()


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def mmlongbench_pairs(shared: Path, out: Path, limit: int, max_pixels: int = PAGE_PIXELS) -> list[dict]:
    rows, rendered = [], {}
    for line in (shared / "mmlongbench_doc" / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        if len(rows) >= limit:
            break
        record = json.loads(line)
        pages = ast.literal_eval(record.get("evidence_pages") or "[]")
        if record.get("answer") == "Not answerable" or not pages:
            continue
        doc, page = record["doc_id"], int(pages[0])
        name = f"images/MMLongBench-Doc/{Path(doc).stem}_p{page}.png"
        if name not in rendered:
            try:
                image = render_pdf_page(shared / "mmlongbench_doc" / "documents" / doc, page, max_pixels)
            except ValueError:  # an evidence page the PDF does not have (the annotations hold a few)
                continue
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(image)
            rendered[name] = True
        rows.append({"qry": f"Find a document page that answers this question: {record['question'].strip()}",
                     "qry_image_path": "", "pos_text": f"{MMEB_IMAGE_TOKEN}\nRepresent the given document page.",
                     "pos_image_path": name})
    return rows


def hotpotqa_pairs(shared: Path, limit: int) -> list[dict]:
    rows = []
    for line in (shared / "hotpotqa" / "hotpotqa_train_distractor_100.jsonl").read_text(encoding="utf-8").splitlines():
        if len(rows) >= limit:
            break
        record = json.loads(line)
        paragraphs = {title: sentences for title, sentences in record["context"]}
        title = record["supporting_facts"][0][0]
        if title not in paragraphs:
            continue
        paragraph = "".join(paragraphs[title]).strip()
        question = record["question"].strip()
        rows.append({"qry": f"Retrieve the Wikipedia paragraph that answers this question: {question}",
                     "qry_image_path": "", "pos_text": f"{title}\n{paragraph}", "pos_image_path": ""})
    return rows


_IMAGE_ROW = re.compile(r"^\| `(skimage_[^`]+)` \| ([^|]+?) \|")


def photo_pairs(shared: Path, out: Path, limit: int) -> list[dict]:
    """The photos of ``images/`` with the description SOURCES.md gives each."""
    text = (shared / "SOURCES.md").read_text(encoding="utf-8")
    section = text.split("## images/", 1)[-1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = _IMAGE_ROW.match(line)
        if not match or len(rows) >= limit:
            continue
        name, description = match.group(1), match.group(2).strip()
        source = shared / "images" / name
        if not source.is_file():
            continue
        target = out / "images" / "scikit-image-photos" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        caption = description[0].upper() + description[1:]
        rows.append({"qry": f"{MMEB_IMAGE_TOKEN}\nFind a caption describing the given photo.",
                     "qry_image_path": target.relative_to(out).as_posix(), "pos_text": caption, "pos_image_path": ""})
    return rows


def write_mmeb_samples(shared: Path, out: Path, per_source: int = 8, max_pixels: int = PAGE_PIXELS) -> dict[str, int]:
    """Write the three subsets; returns rows per subset."""
    shared, out = Path(shared), Path(out)
    subsets = {
        "MMLongBench-Doc": mmlongbench_pairs(shared, out, per_source, max_pixels),
        "HotpotQA": hotpotqa_pairs(shared, per_source),
        "scikit-image-photos": photo_pairs(shared, out, per_source),
    }
    for subset, rows in subsets.items():
        _write_jsonl(out / subset / "train.jsonl", rows)
    return {subset: len(rows) for subset, rows in subsets.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, required=True, help="the shared sample data directory")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the MMEB-train layout into")
    parser.add_argument("--per-source", type=int, default=8, help="pairs per source (default 8)")
    args = parser.parse_args(argv)
    counts = write_mmeb_samples(args.shared, args.out, args.per_source)
    print(json.dumps(counts))
    print(f"build with: mmle build evialign-evidence --sources {args.out} --subsets {' '.join(counts)} ...")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
