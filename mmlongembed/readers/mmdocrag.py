"""MMDocRAG's own release, read: its question-set JSONL (``q_id``, ``question``, ``text_quotes``,
``img_quotes``, ``gold_quotes``, answers) with its images, from a folder or from the Hub.

``Sources`` is what either reader of the builder gives it: this one, or the substitute
(``readers.mmdocir``: MMDocIR annotations over the MMLongBench-Doc PDFs).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.media.pdf import PageRenderer
from mmlongembed.ops.multisource.quotes import Block, Instance, Quote
from mmlongembed.readers.archives import ZipMembers
from mmlongembed.readers.sources import HubSource, hub_file, iter_jsonl, require_dir

MIN_EVIDENCE, MAX_EVIDENCE = 2, 5
# The Hub release: {dev,evaluation}_{15,20}.jsonl (dev and evaluation are disjoint question sets; _15 and _20
# hold the same questions with 15 or 20 quotes), train.jsonl (chat-format fine-tuning data, no quotes),
# images.zip (members images/<name>.jpg, as the records' img_path) and doc_pdfs.zip (not read).
# The pin is the repo's main commit as its file listing shows it (the README update "04b58db"); only
# that short form could be read from here, so --hub-revision takes the full sha (TODO: pin it here).
HUB_SOURCE = HubSource(repo="MMDocIR/MMDocRAG", revision="04b58db", licence="CC BY-NC 4.0")
QUESTION_SETS = ("dev_15", "dev_20", "evaluation_15", "evaluation_20")
IMAGE_ARCHIVE = "images.zip"


@dataclass
class Sources:
    instances: list[Instance]
    blocks: list[Block]  # padding: pages holding no instance's evidence
    refill_text: dict[str, list[tuple[str, str]]]  # doc -> (id, text) of text that no context uses
    substitute: bool
    # the renderer that decoded these sources' images: refill images are resized (in memory) with
    # its settings, and its counts are the build's rendering figures
    renderer: PageRenderer | None = field(default=None, repr=False, compare=False)


def source_layout(sources: str, question_set: str) -> tuple[list[Path], list[Path], list[Path]]:
    """(the chosen question set's MMDocRAG JSONL files, MMDocIR annotation files, PDF
    directories) under ``sources``. Other MMDocRAG question sets there are not read: they
    repeat the chosen one's questions (_15 vs _20) or are another split."""
    root = require_dir(sources, "MMDocRAG JSONL + images, or mmdocir/ + mmlongbench_doc/")
    original, annotations = [], []
    for path in sorted(root.rglob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
        if '"gold_quotes"' in first:
            original.append(path)
        elif '"layout_mapping"' in first:
            annotations.append(path)
    chosen = [p for p in original if p.stem == question_set]
    if original and not chosen:
        raise UserError(f"no {question_set}.jsonl under {root} (MMDocRAG question sets there: "
                        f"{', '.join(sorted({p.stem for p in original}))}): choose one with --question-set NAME")
    pdf_dirs = sorted({p.parent for p in root.rglob("*.pdf")})
    return chosen, annotations, pdf_dirs


def hub_source(revision: str) -> HubSource:
    return dataclasses.replace(HUB_SOURCE, revision=revision)


def hub_files(question_set: str, revision: str, builder_name: str) -> list[Path]:
    """The question set's JSONL and images.zip from the Hub at ``revision``."""
    if question_set not in QUESTION_SETS:
        raise UserError(f"--question-set {question_set}: the Hub release has "
                        f"{', '.join(QUESTION_SETS)}; pass --sources DIR for a file of your own")
    source = hub_source(revision)
    return [hub_file(source, f"{question_set}.jsonl", builder_name), hub_file(source, IMAGE_ARCHIVE, builder_name)]


class QuoteImages:
    """Where image quotes' files are found: ``img_path`` relative to the JSONL's folder, to its
    ``images/`` folder or to its parent's, else inside an ``images.zip`` in one of those folders
    (the Hub's archive, read in place: members ``images/<name>.jpg`` as ``img_path`` says, or the
    bare file name; macOS ``__MACOSX/`` entries are not images)."""

    def __init__(self):
        self._archives: dict[Path, ZipMembers] = {}

    @staticmethod
    def folders(jsonl: Path) -> list[Path]:
        return [jsonl.parent, jsonl.parent / "images", jsonl.parent.parent / "images"]

    @staticmethod
    def archive_paths(jsonl: Path) -> list[Path]:
        return [p for p in dict.fromkeys([jsonl.parent / IMAGE_ARCHIVE, jsonl.parent / "images" / IMAGE_ARCHIVE,
                                          jsonl.parent.parent / IMAGE_ARCHIVE]) if p.is_file()]

    @staticmethod
    def _is_image_member(member: str) -> bool:
        return not (member.endswith("/") or member.startswith("__MACOSX/") or "/._" in f"/{member}")

    def _archive(self, path: Path) -> ZipMembers:
        if path not in self._archives:
            self._archives[path] = ZipMembers(path, keep=self._is_image_member)
        return self._archives[path]

    def find(self, img_path: str, jsonl: Path, extra_archives: Iterable[Path] = ()) -> tuple[str, bytes] | None:
        """(a name for messages, the image's bytes), or None when it is nowhere."""
        if not img_path:
            return None
        for folder in self.folders(jsonl):
            if (folder / img_path).is_file():
                return str(folder / img_path), (folder / img_path).read_bytes()
        for path in [*self.archive_paths(jsonl), *extra_archives]:
            archive = self._archive(path)
            member = archive.find(img_path, img_path.rsplit("/", 1)[-1])
            if member is not None:
                return f"{path.name}:{member}", archive.read(member)
        return None

    def close(self) -> None:
        for archive in self._archives.values():
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
        return _original_sources(records, renderer, report, images, list(archives))
    finally:
        images.close()


def _original_sources(records, renderer: PageRenderer, report: BuildReport, images: QuoteImages,
                      archives: list[Path]) -> Sources:
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
    for doc in sorted(pages_of):
        for page in sorted(pages_of[doc]):
            quotes = [q for q in pages_of[doc][page].values() if q.key not in gold_keys]
            if quotes:
                blocks.append(Block(doc, page, tuple(sorted(quotes, key=lambda q: (q.order, q.id)))))
        # Every text of the document that is no question's evidence: a file holds only the quotes
        # of its questions, so a removed text quote is refilled from its siblings' quotes (never
        # from text its document already holds: the builder checks). Quote ids repeat across
        # questions ("text3"), contents do not.
        refill[doc] = [(f"{doc}:{q.key}", q.text) for page in sorted(pages_of[doc])
                       for q in pages_of[doc][page].values() if q.kind == "text" and q.key not in gold_keys]
    return Sources(sorted(instances, key=lambda i: i.id), blocks, dict(refill), substitute=False,
                   renderer=renderer)


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


def image_files(jsonl: Path) -> list[Path]:
    """The files beside a question-set JSONL that its images may be read from: everything in its
    image folders, and the image archives."""
    files = []
    for folder in QuoteImages.folders(jsonl)[1:]:
        files += sorted(folder.rglob("*")) if folder.is_dir() else []
    return files + QuoteImages.archive_paths(jsonl)
