"""The YoukuDenseCaption release (ModelScope ``os_ai/Youku_Dense_Caption``) in its own layout:
``meta_files/<Category>.csv`` with ``data_files/<Category>/{train,val,test}`` holding the videos,
``train`` and ``val`` zipped (read in place; a video a row names is extracted once into a cache).
The column rules are the ``youkudc`` builder's docstring's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.readers.archives import ZipMembers
from mmlongembed.readers.dense_captions import VIDEO_EXTENSIONS, VideoRecord, find_videos

PATH_COLUMNS = ("video_path", "video", "path", "video_file", "file", "video_name")
ID_COLUMNS = ("video_id", "vid", "id")
CAPTION_COLUMNS = ("captions", "caption", "annotations", "dense_captions", "events")
SPAN_KEYS = ("timestamp", "timestamps", "time")
TEXT_KEYS = ("caption", "sentence", "text", "description")



def _first(row: dict, names) -> str | None:
    for name in names:
        value = row.get(name)
        if value not in (None, ""):
            return value
    return None


def _events_from_json(value) -> tuple[list, list] | None:
    try:
        items = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return None
    if not isinstance(items, list):
        return None
    spans, texts = [], []
    for item in items:
        if not isinstance(item, dict):
            return None
        span = next((item[k] for k in SPAN_KEYS if k in item), None)
        if span is None and "start" in item and "end" in item:
            span = [item["start"], item["end"]]
        text = next((item[k] for k in TEXT_KEYS if k in item), None)
        if span is None or text is None:
            return None
        spans.append(span)
        texts.append(text)
    return spans, texts


class ZippedVideos:
    """The videos inside a category's zip archives (``data_files/<Category>/*.zip``: the release
    ships ``train`` and ``val`` zipped), found by member path or file name and extracted on first
    use into ``cache/<Category>/<archive stem>/<member>`` (kept: a rebuild extracts nothing)."""

    def __init__(self, folder: Path, cache: Path, root: Path):
        self.cache, self.root = cache, root
        self.archives = [ZipMembers(archive, keep=_is_video_member)
                         for archive in (sorted(folder.glob("*.zip")) if folder.is_dir() else [])]
        self.extracted = 0
        self.names: dict[str, str] = {}  # extracted file -> "<archive under the root>:<member>"

    def find(self, raw: str) -> Path | None:
        keys = (raw, raw.lstrip("/"), Path(raw).name)
        archive, member = next(((a, m) for k in keys for a in self.archives if (m := a.find(k))), (None, None))
        if archive is None:
            return None
        target = self.cache / archive.path.stem / member
        if not target.is_file():
            archive.extract(member, target)
            self.extracted += 1
        self.names[str(target)] = f"{archive.path.relative_to(self.root).as_posix()}:{member}"
        return target

    def close(self) -> None:
        for archive in self.archives:
            archive.close()

    def __enter__(self) -> "ZippedVideos":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_video_member(member: str) -> bool:
    return not member.startswith("__MACOSX/") and Path(member).suffix.lower() in VIDEO_EXTENSIONS


def _row_events(row: dict, captions: str) -> tuple[list, list] | None:
    """(spans, texts) of a row, from its caption column or its timestamps + sentences columns;
    None when they do not parse."""
    if captions == "timestamps+sentences":
        try:
            return json.loads(row["timestamps"]), json.loads(row["sentences"])
        except (json.JSONDecodeError, TypeError):
            return None
    return _events_from_json(row[captions]) if row.get(captions) else None


def _resolve(raw: str, root: Path, category: str, by_name: dict[str, Path], zipped: ZippedVideos) -> Path | None:
    candidate = Path(raw)
    places = [candidate] if candidate.is_absolute() else [
        root / candidate, root / "data_files" / candidate, root / "data_files" / category / candidate]
    return (next((p for p in places if p.is_file()), None) or by_name.get(candidate.name)
            or zipped.find(raw) or zipped.find(f"{category}/{raw}"))


def _columns(meta: Path, header: list[str], caption_column: str, video_column: str) -> tuple[str, str]:
    """(video column, caption column or "timestamps+sentences") of one meta CSV; one line
    naming the file's columns and the accepted ones when either cannot be found."""
    for flag, named in (("--video-column", video_column), ("--caption-column", caption_column)):
        if named and named not in header:
            raise UserError(f"{meta.name}: no column {named!r} ({flag}); the file has: {', '.join(header)}")
    video = video_column or next((c for c in PATH_COLUMNS if c in header), "")
    captions = caption_column or next((c for c in CAPTION_COLUMNS if c in header), "")
    if not captions and {"timestamps", "sentences"} <= set(header):
        captions = "timestamps+sentences"
    if not video or not captions:
        missing = [f"video column (accepted: {', '.join(PATH_COLUMNS)}; or name it: --video-column NAME)"] * (
            not video) + [f"caption column (accepted: {', '.join(CAPTION_COLUMNS)}, or timestamps + sentences; or "
                          "name it: --caption-column NAME)"] * (not captions)
        raise UserError(f"{meta.name} has columns {', '.join(header) or '(none)'}, but no {' and no '.join(missing)}")
    return video, captions


def read_youku_release(root: Path, report: BuildReport, caption_column: str = "", video_column: str = "",
                       cache: Path = Path(".cache/mmle/youkudc-videos"),
                       names: dict[str, str] | None = None) -> tuple[list[VideoRecord], dict]:
    """The release's rows as records (see the module docstring); ``names`` receives, for each video
    extracted from a zip archive, the archive member it came from."""
    records, used, extracted = [], {}, 0
    for meta in sorted((root / "meta_files").glob("*.csv")):
        category = meta.stem
        folder = root / "data_files" / category
        by_name = {p.name: p for p in find_videos(folder).values()} if folder.is_dir() else {}
        zipped = ZippedVideos(folder, Path(cache) / category, root)
        with zipped, open(meta, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            video, captions = _columns(meta, list(reader.fieldnames or []), caption_column, video_column)
            for number, row in enumerate(reader, 2):
                origin = f"{meta.name}:{number}"
                raw_path = row.get(video) or None
                events = _row_events(row, captions)
                if raw_path is None or events is None:
                    report.skip("malformed_annotation", origin)
                    continue
                path = _resolve(raw_path, root, category, by_name, zipped)
                video_id = _first(row, ID_COLUMNS) or Path(raw_path).stem
                try:
                    duration = float(row["duration"]) if row.get("duration") else None
                except ValueError:
                    duration = None
                used.setdefault("path", video)
                used.setdefault("captions", captions)
                records.append(VideoRecord(str(video_id), duration, tuple(events[0]), tuple(events[1]), origin,
                                           str(path) if path else None))
        extracted += zipped.extracted
        if names is not None:
            names.update(zipped.names)
    if extracted:
        report.notes.append(f"YoukuDC release: {extracted} videos extracted from zipped train/val folders into "
                            f"{cache}")
    return records, used
