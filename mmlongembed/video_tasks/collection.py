"""Reading a labelled local video collection into ``Clip`` entries (all I/O of the sources).

Three layouts, found in this order under ``--sources``:

- a table: ``--sources`` is a ``.csv``, ``.json`` or ``.jsonl`` file, or a directory holding
  ``collection.csv|json|jsonl``. One entry per row/object with ``path`` (required; relative to
  the table's directory or absolute) and any of ``label``, ``split`` (train/test), ``start``
  and ``end`` (seconds; a time range of the video), ``caption`` (CSV) or ``captions`` (JSON
  list), ``question``, ``candidates`` (JSON list, or ``|``-separated in CSV), ``answer``, ``id``;
- class folders: ``<root>/<label>/**/<video>``, or ``<root>/<split>/<label>/**/<video>`` when
  the top-level folders are ``train`` and/or ``test``.

Bad rows are counted skips (``report``), never a traceback.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.ops.mveb import TEST, TRAIN, Clip

VIDEO_EXTENSIONS = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".m4v", ".flv", ".mpg", ".mpeg", ".ts")
TABLE_NAMES = ("collection.csv", "collection.json", "collection.jsonl")
SPLITS = (TRAIN, TEST)


def find_table(root: Path) -> Path | None:
    if root.is_file():
        return root
    for name in TABLE_NAMES:
        if (root / name).is_file():
            return root / name
    return None


def _number(value, what: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is not a number: {value!r}") from None


def _entry(raw: dict, base: Path, root: Path, origin: str) -> Clip:
    path = str(raw.get("path") or "").strip()
    if not path:
        raise ValueError("no path")
    file = Path(path) if Path(path).is_absolute() else base / path
    if not file.is_file():
        raise FileNotFoundError(path)
    split = (str(raw.get("split") or "").strip().lower()) or None
    if split is not None and split not in SPLITS:
        raise ValueError(f"split {split!r} is not train or test")
    start, end = _number(raw.get("start"), "start"), _number(raw.get("end"), "end")
    if start is not None and end is not None and end <= start:
        raise ValueError(f"end {end} is not after start {start}")
    captions = raw.get("captions")
    if captions is None:
        captions = [raw["caption"]] if raw.get("caption") else []
    if isinstance(captions, str):
        captions = [captions]
    candidates = raw.get("candidates") or []
    if isinstance(candidates, str):
        candidates = [c for c in candidates.split("|")]
    absolute, base_dir = Path(os.path.abspath(file)), Path(os.path.abspath(root))  # symlinks kept as named
    try:
        source = absolute.relative_to(base_dir).as_posix()
    except ValueError:
        source = str(absolute)
    label = str(raw.get("label") or "").strip()
    clip_id = str(raw.get("id") or "").strip()
    return Clip(clip_id=clip_id, source=source, label=label, start=start or 0.0, end=end, split=split,
                captions=tuple(str(c) for c in captions), question=raw.get("question") or None,
                candidates=tuple(str(c) for c in candidates),
                answer=None if raw.get("answer") is None else str(raw.get("answer")), origin=origin)


def _rows(table: Path) -> list[tuple[str, dict]]:
    try:
        if table.suffix == ".csv":
            with open(table, newline="", encoding="utf-8") as handle:
                return [(f"{table.name}:{n}", dict(row)) for n, row in enumerate(csv.DictReader(handle), start=2)]
        if table.suffix == ".jsonl":
            lines = table.read_text(encoding="utf-8").splitlines()
            return [(f"{table.name}:{n}", json.loads(line)) for n, line in enumerate(lines, start=1) if line.strip()]
        data = json.loads(table.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as error:
        raise UserError(f"cannot read the collection table {table}: {error}") from None
    if isinstance(data, dict):
        data = data.get("clips") or data.get("videos") or []
    if not isinstance(data, list):
        raise UserError(f"{table}: expected a list of clip objects")
    return [(f"{table.name}:{n}", row) for n, row in enumerate(data)]


def read_collection(sources: str | Path, report: BuildReport) -> tuple[list[Clip], Path, str]:
    """The entries of a collection, its root (paths in the manifest are relative to it) and the
    layout read. Entries without an ``id`` get one from their source and time range later."""
    path = Path(sources)
    if not path.exists():
        raise UserError(f"--sources {sources}: no such file or directory")
    table = find_table(path)
    if table is not None:
        if table.suffix not in (".csv", ".json", ".jsonl"):
            raise UserError(f"--sources {sources}: expected a .csv, .json or .jsonl table or a folder")
        root = table.parent
        clips = []
        for origin, raw in _rows(table):
            if not isinstance(raw, dict):
                report.skip("malformed_entry", origin)
                continue
            try:
                clips.append(_entry(raw, table.parent, root, origin))
            except FileNotFoundError as error:
                report.skip("video_file_missing", f"{origin} ({error})")
            except ValueError as error:
                report.skip("malformed_entry", f"{origin} ({error})")
        return clips, root, f"table {table.name}"
    root = path
    top = sorted(p for p in root.iterdir() if p.is_dir())
    split_dirs = bool(top) and all(p.name.lower() in SPLITS for p in top)
    clips = []
    for split_dir in (top if split_dirs else [root]):
        split = split_dir.name.lower() if split_dirs else None
        for label_dir in sorted(p for p in split_dir.iterdir() if p.is_dir()):
            for file in sorted(label_dir.rglob("*")):
                if file.is_file() and file.suffix.lower() in VIDEO_EXTENSIONS:
                    clips.append(Clip(clip_id="", source=file.relative_to(root).as_posix(), label=label_dir.name,
                                      split=split, origin=file.relative_to(root).as_posix()))
    if not clips:
        raise UserError(f"no videos under {root}: expected <label>/<video> folders or a collection table "
                        f"({', '.join(TABLE_NAMES)})")
    return clips, root, "class folders" + (" with train/test folders" if split_dirs else "")
