"""YoukuDenseCaption Temporal Summarization (paper §3.2.4, appendix A.4).

As ActivityNet Captions, from Chinese dense captions: each caption of a run is first translated
literally into English (an LLM step with greedy decoding and no offline fallback), then the run's
translated captions are rewritten into one paragraph with transition words. The positive is the
run's 1-FPS frames in time order; hard negatives are the same frames with the event blocks
reversed or half-shuffled; easy negatives are runs of other videos of the same band.

Source layouts read (``--sources DIR``):

1. **The YoukuDC release** (ModelScope ``os_ai/Youku_Dense_Caption``): ``meta_files/<Category>.csv``
   with ``data_files/<Category>/{train,val,test}`` holding the videos; ``train`` and ``val`` ship
   zipped (``data_files/<Category>/train.zip``, ``val.zip``) and are read without unzipping them
   by hand: a video a row names is extracted once into ``--video-cache``. The release's column
   names are not published outside the download, so the reader takes, per CSV file: the video
   from the column ``--video-column`` names, else the first of ``video_path``, ``video``, ``path``,
   ``video_file``, ``file``, ``video_name`` (absolute, or relative to the root, to ``data_files/``, to
   ``data_files/<Category>/``, or found by file name anywhere under ``data_files/<Category>/`` or
   in its zip archives); a file with neither stops the build with one line naming its columns. The
   id from ``video_id`` / ``vid`` / ``id`` (else the file stem); the duration from ``duration``
   (optional: else the decoded video's); and the captions either from one JSON column
   (``--caption-column``, else the first of ``captions``, ``caption``, ``annotations``,
   ``dense_captions``, ``events``: a list of objects with
   ``timestamp`` / ``timestamps`` / ``time`` = [start, end] or ``start`` + ``end``, and ``caption`` /
   ``sentence`` / ``text`` / ``description``) or from two JSON columns ``timestamps`` and
   ``sentences`` (ActivityNet's shape). Rows it cannot read are counted skips
   (``malformed_annotation``). The columns actually used are recorded in the manifest notes.
2. **A plain local layout**: ActivityNet Captions JSON files (``{video_id: {duration, timestamps,
   sentences}}``) with Chinese sentences, and video files anywhere under the root named by id.
"""

from __future__ import annotations

import csv
import json
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from builders._temporal import (
    VIDEO_EXTENSIONS, TemporalBuilder, TemporalConfig, VideoRecord, find_videos, is_activitynet_json,
    read_activitynet_json)
from mmlongembed.builder import BuildReport, register
from mmlongembed.errors import UserError

PATH_COLUMNS = ("video_path", "video", "path", "video_file", "file", "video_name")
ID_COLUMNS = ("video_id", "vid", "id")
CAPTION_COLUMNS = ("captions", "caption", "annotations", "dense_captions", "events")
SPAN_KEYS = ("timestamp", "timestamps", "time")
TEXT_KEYS = ("caption", "sentence", "text", "description")


@dataclass
class YoukuDCConfig(TemporalConfig):
    # paper Table 1: 600 queries over 6 pools
    max_queries_per_pool: int = field(default=100, metadata={"help": "cap on queries per pool (paper: 100)"})
    caption_column: str = field(default="", metadata={
        "help": "release layout: the meta_files CSV column holding a video's captions (JSON list of events); "
                "default: the first of " + ", ".join(CAPTION_COLUMNS) + ", or timestamps + sentences"})
    video_column: str = field(default="", metadata={
        "help": "release layout: the meta_files CSV column holding the video file; default: the first of "
                + ", ".join(PATH_COLUMNS)})
    video_cache: str = field(default=".cache/mmle/youkudc-videos", metadata={
        "help": "release layout: where videos named by the CSV are extracted from the zipped train/val folders "
                "(once; the frame store keys them by content)"})


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
        self.index: dict[str, tuple[Path, str]] = {}
        self.extracted = 0
        self.names: dict[str, str] = {}  # extracted file -> "<archive under the root>:<member>"
        for archive in sorted(folder.glob("*.zip")) if folder.is_dir() else []:
            try:
                with zipfile.ZipFile(archive) as opened:
                    members = opened.namelist()
            except (OSError, zipfile.BadZipFile) as error:
                raise UserError(f"{archive}: not a readable zip archive ({error})") from None
            for member in members:
                if member.startswith("__MACOSX/") or Path(member).suffix.lower() not in VIDEO_EXTENSIONS:
                    continue
                self.index.setdefault(member, (archive, member))
                self.index.setdefault(Path(member).name, (archive, member))

    def find(self, raw: str) -> Path | None:
        hit = next((self.index[k] for k in (raw, raw.lstrip("/"), Path(raw).name) if k in self.index), None)
        if hit is None:
            return None
        archive, member = hit
        target = self.cache / archive.stem / member
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            with zipfile.ZipFile(archive) as opened, opened.open(member) as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            partial.replace(target)  # complete or absent: an interrupted extraction is redone
            self.extracted += 1
        self.names[str(target)] = f"{archive.relative_to(self.root).as_posix()}:{member}"
        return target


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
        with open(meta, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            video, captions = _columns(meta, list(reader.fieldnames or []), caption_column, video_column)
            for number, row in enumerate(reader, 2):
                origin = f"{meta.name}:{number}"
                raw_path = row.get(video) or None
                if captions == "timestamps+sentences":
                    try:
                        events = (json.loads(row["timestamps"]), json.loads(row["sentences"]))
                    except (json.JSONDecodeError, TypeError):
                        events = None
                else:
                    events = _events_from_json(row[captions]) if row.get(captions) else None
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


@register
class YoukuDCBuilder(TemporalBuilder):
    """Temporal Summarization from YoukuDenseCaption: Chinese dense captions translated to English,
    then the same task as ActivityNet Captions (a described sequence of events against the same
    frames reversed or half-shuffled)."""

    name = "youkudc"
    version = "1.1.0"  # 1.1.0: zipped train/val folders, --caption-column / --video-column
    title = "MMLongEmbed Temporal Summarization: YoukuDenseCaption"
    config_class = YoukuDCConfig
    licence = "cc-by-nc-sa-4.0"
    languages = ("en",)
    translate_captions = True
    source_name = "YoukuDenseCaption"
    source_licence = "CC BY-NC-SA 4.0"
    source_citation = "Youku Dense Caption (Xiong et al., ICLR 2025)"

    def annotation_files(self, root: Path) -> list[Path]:
        if (root / "meta_files").is_dir():
            return sorted((root / "meta_files").glob("*.csv"))
        return [p for p in sorted(root.rglob("*.json")) if is_activitynet_json(p)]

    def load_sources(self, config: YoukuDCConfig, report: BuildReport):
        self._release_options = config  # read_records takes the root only
        return super().load_sources(config, report)

    def read_records(self, root: Path, report: BuildReport) -> tuple[list[VideoRecord], str]:
        if (root / "meta_files").is_dir():
            options = getattr(self, "_release_options", None) or YoukuDCConfig()
            self._zip_members: dict[str, str] = {}
            records, used = read_youku_release(root, report, options.caption_column, options.video_column,
                                               Path(options.video_cache), self._zip_members)
            report.notes.append(f"YoukuDC release layout: columns used {json.dumps(used, sort_keys=True)}")
            return records, "YoukuDC release (meta_files/*.csv + data_files/)"
        records = []
        for path in self.annotation_files(root):
            records += read_activitynet_json(path, report)
        return records, "plain local layout (ActivityNet-shaped JSON + video files named by id)"

    def video_label(self, path: Path, root: Path) -> str:
        """A video extracted from the release's zips is named by its archive member, not by where
        the cache put it."""
        return getattr(self, "_zip_members", {}).get(str(path)) or super().video_label(path, root)

    def example_config(self, directory) -> YoukuDCConfig:
        """Generated Chinese captions in the release layout; translation has no offline
        fallback, so the example talks to a loopback fake LLM server that it starts."""
        from mmlongembed.llm.fake_captions import start_caption_server
        from mmlongembed.testing import TEMPORAL_FIXTURE_LENGTHS, write_temporal_sources

        directory = Path(directory)
        translations = write_temporal_sources(directory, n_videos=16, language="zh", layout="youku")
        server = start_caption_server(translations)
        return YoukuDCConfig(sources=str(directory), lengths=TEMPORAL_FIXTURE_LENGTHS, max_queries_per_pool=3,
                             frame_store=str(directory / "frame-store"), llm="openai", llm_base_url=server.url,
                             llm_model="fake-model", llm_cache=str(directory / "llm-cache"), llm_backoff=0.01)
