"""MMEB-train (TIGER-Lab/MMEB-train, VLM2Vec's training set) in its layout: per subset, rows of
``qry``, ``qry_image_path``, ``pos_text``, ``pos_image_path``, as JSON Lines or parquet files, and
the images they name (files, or members of the release's ``images_zip/<Subset>.zip``).

Which subsets a build reads is its builder's choice (``evialign-evidence``); this module finds the
files, reads the rows, and turns one side of a row into what the student sees."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.readers.archives import ZipMembers
from mmlongembed.readers.sources import iter_jsonl

# The four out-of-domain evaluation sets the paper excludes (compared without case or punctuation).
OOD_SUBSETS = ("FashionIQ", "Wiki-SS-NQ", "OVEN", "EDIS")
# MMEB-train's retrieval training subsets (the retrieval group of VLM2Vec's MMEB_TRAIN_SUBSETS; the
# paper's in-domain retrieval sets, its Table 4): what the paper builds its evidence on (B.3). The
# classification, VQA and grounding subsets are read only when named (--subsets) or --all-subsets.
RETRIEVAL_SUBSETS = ("VisDial", "CIRR", "VisualNews_t2i", "VisualNews_i2t", "MSCOCO_t2i", "MSCOCO_i2t", "NIGHTS",
                     "WebQA")
# The Hub release (TIGER-Lab/MMEB-train) holds three parquet files per subset: `original`,
# `diverse_instruction` (the same rows under rewritten instructions) and an older `train` equal to
# `original`. The builder reads `original` (what VLM2Vec trains on), `train` only where a subset has
# no `original`, and never `diverse_instruction`, so each pair is read once.
MMEB_VARIANTS = ("original", "train", "diverse_instruction")
READ_VARIANT = "original"
IMAGES_ZIP = "images_zip"  # the release's images: images_zip/<Subset>.zip
MMEB_IMAGE_TOKEN = re.compile(r"<\|image_\d+\|>")
SIDES = (("query", "qry", "qry_image_path"), ("candidate", "pos_text", "pos_image_path"))


def normalised_subset(subset: str) -> str:
    """A subset's name without case or punctuation (``Wiki-SS-NQ`` and ``wikissnq`` are one)."""
    return re.sub(r"[^a-z0-9]", "", subset.lower())


OOD_KEYS = frozenset(normalised_subset(s) for s in OOD_SUBSETS)


@dataclass(frozen=True)
class SideInput:
    input_id: str
    subset: str
    source_row: int
    side: str
    text: str  # MMEB's text with <|image|> placeholders, the instruction inline as MMEB has it
    images: tuple[bytes, ...]


@dataclass(frozen=True)
class SourcePair:
    subset: str
    row: int
    query: str  # input ids
    candidate: str

    @property
    def pair_id(self) -> str:
        return f"{self.subset}:{self.row}"


def input_id(side: str, text: str, images: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for part in (side, text):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little") + data)
    for image in images:
        digest.update(hashlib.sha256(image).digest())
    return digest.hexdigest()


def _variant(path: Path) -> str | None:
    """The Hub release's file variant of a parquet file (``original-00000-of-00001.parquet``)."""
    return next((v for v in MMEB_VARIANTS if path.suffix == ".parquet" and path.name.startswith(f"{v}-")), None)


def subset_files(root: Path) -> tuple[list[tuple[str, Path]], list[Path]]:
    """((subset, rows file) to read, files left unread). A subset is ``<root>/<subset>/*.jsonl|*.parquet``
    or ``<root>/<subset>.jsonl|.parquet``; where its folder holds the Hub release's variant files, only
    the ``original`` ones are read (``train`` where there is no ``original``), the rest left unread."""
    by_subset: dict[str, list[Path]] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".parquet") and p.is_file()):
        relative = path.relative_to(root)
        if relative.parts[0] in ("images", IMAGES_ZIP):
            continue
        by_subset.setdefault(relative.parts[0] if len(relative.parts) > 1 else path.stem, []).append(path)
    found, unread = [], []
    for subset, paths in by_subset.items():
        variants = {v: [p for p in paths if _variant(p) == v] for v in MMEB_VARIANTS}
        if any(variants.values()):
            chosen = variants[READ_VARIANT] or variants["train"]
            unread += [p for p in paths if p not in chosen]
            paths = chosen
        found += [(subset, p) for p in paths]
    return found, unread


class ImageFiles:
    """The images rows name, relative to the sources root: a file there, or a member of the
    release's ``images_zip/<Subset>.zip`` (read from the zip, never unpacked). A member is looked
    up under the row's path, then without its leading ``images/`` and ``images/<Subset>/``."""

    def __init__(self, root: Path):
        self.root = root
        self._zips: dict[str, ZipMembers | None] = {}
        self.archives: list[Path] = []

    def _zip(self, name: str) -> ZipMembers | None:
        if name not in self._zips:
            path = self.root / IMAGES_ZIP / f"{name}.zip"
            archive = None
            if path.is_file():
                archive = ZipMembers(path)
                self.archives.append(path)
            self._zips[name] = archive
        return self._zips[name]

    def read(self, subset: str, path: str) -> bytes | None:
        file = self.root / path
        if file.is_file():
            return file.read_bytes()
        parts = Path(path).parts
        names = [path]
        if parts[:1] == ("images",):
            names.append("/".join(parts[1:]))
            names.append("/".join(parts[2:]))
        for archive_name in dict.fromkeys([subset, *parts[1:2]] if parts[:1] == ("images",) else [subset]):
            archive = self._zip(archive_name)
            if archive is None:
                continue
            for name in names:
                data = archive.read(name)
                if data is not None:
                    return data
        return None

    def close(self) -> None:
        for archive in self._zips.values():
            if archive is not None:
                archive.close()


def read_rows(path: Path, report: BuildReport) -> Iterable[dict]:
    if path.suffix == ".jsonl":
        yield from iter_jsonl(path, report)
        return
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as error:
        report.skip("unreadable_file", f"{path.name}: {type(error).__name__}")
        return
    yield from table.to_pylist()


def side_input(files: ImageFiles, subset: str, row: int, side: str, record: dict, text_key: str, image_key: str,
               image_cache: dict[str, bytes]) -> tuple[SideInput | None, str]:
    """One side of an MMEB row as the student sees it, or (None, skip reason)."""
    if text_key not in record or any(not isinstance(record.get(k), (str, type(None)))
                                     for k in (text_key, image_key)):
        return None, "malformed_record"
    text = (record.get(text_key) or "").strip()
    path = (record.get(image_key) or "").strip()
    markers = len(MMEB_IMAGE_TOKEN.findall(text))
    if IMAGE_PLACEHOLDER in text:
        return None, "placeholder_in_source_text"
    if markers != (1 if path else 0):
        return None, "image_token_without_image" if markers else "image_without_image_token"
    text = MMEB_IMAGE_TOKEN.sub(IMAGE_PLACEHOLDER, text)
    if not text.replace(IMAGE_PLACEHOLDER, "").strip() and not path:
        return None, "empty_input"
    images: tuple[bytes, ...] = ()
    if path:
        if path not in image_cache:
            data = files.read(subset, path)
            if data is None:
                return None, "image_missing"
            image_cache[path] = data
        images = (image_cache[path],)
    return SideInput(input_id(side, text, images), subset, row, side, text, images), ""


def pair_sides(files: ImageFiles, subset: str, row: int, record: dict,
               image_cache: dict[str, bytes]) -> tuple[list[SideInput], str]:
    """The row's query and candidate sides, or ([], the skip reason of the first that fails)."""
    sides = []
    for side, text_key, image_key in SIDES:
        made, reason = side_input(files, subset, row, side, record, text_key, image_key, image_cache)
        if made is None:
            return [], reason
        sides.append(made)
    return sides, ""


def images_digest(image_cache: dict[str, bytes]) -> str:
    """One sha256 over the images read, by path: the source identity's ``images_sha256``."""
    digest = hashlib.sha256()
    for name in sorted(image_cache):
        digest.update(name.encode() + b"\0" + hashlib.sha256(image_cache[name]).digest())
    return digest.hexdigest()
