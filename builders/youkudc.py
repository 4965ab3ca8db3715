"""YoukuDenseCaption Temporal Summarization (paper §3.2.4, appendix A.4).

As ActivityNet Captions, from Chinese dense captions: each caption of a run is first translated
literally into English (an LLM step with greedy decoding and no offline fallback), then the run's
translated captions are rewritten into one paragraph with transition words. The positive is the
run's 1-FPS frames in time order; hard negatives are the same frames with the event blocks
reversed or half-shuffled; easy negatives are runs of other videos of the same band.

Source layouts read (``--sources DIR``):

1. **The YoukuDC release** (ModelScope ``os_ai/Youku_Dense_Caption``): ``meta_files/<Category>.csv``
   with ``data_files/<Category>/{train,val,test}/`` holding the videos (unzipped). The release's
   column names are not published outside the download, so the reader takes, per CSV row:
   the video from the first of ``video_path``, ``video``, ``path``, ``video_file``, ``file``,
   ``video_name`` (absolute, or relative to the root, to ``data_files/``, to
   ``data_files/<Category>/`` or found by file name anywhere under ``data_files/<Category>/``); the
   id from ``video_id`` / ``vid`` / ``id`` (else the file stem); the duration from ``duration``
   (optional: else the decoded video's); and the captions either from one JSON column
   (``captions``, ``caption``, ``annotations``, ``dense_captions``, ``events``: a list of objects with
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
from dataclasses import dataclass, field
from pathlib import Path

from builders._temporal import (
    TemporalBuilder, TemporalConfig, VideoRecord, find_videos, is_activitynet_json, read_activitynet_json)
from mmlongembed.builder import BuildReport, register

PATH_COLUMNS = ("video_path", "video", "path", "video_file", "file", "video_name")
ID_COLUMNS = ("video_id", "vid", "id")
CAPTION_COLUMNS = ("captions", "caption", "annotations", "dense_captions", "events")
SPAN_KEYS = ("timestamp", "timestamps", "time")
TEXT_KEYS = ("caption", "sentence", "text", "description")


@dataclass
class YoukuDCConfig(TemporalConfig):
    # paper Table 1: 600 queries over 6 pools
    max_queries_per_pool: int = field(default=100, metadata={"help": "cap on queries per pool (paper: 100)"})


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


def _resolve(raw: str, root: Path, category: str, by_name: dict[str, Path]) -> Path | None:
    candidate = Path(raw)
    places = [candidate] if candidate.is_absolute() else [
        root / candidate, root / "data_files" / candidate, root / "data_files" / category / candidate]
    return next((p for p in places if p.is_file()), None) or by_name.get(candidate.name)


def read_youku_release(root: Path, report: BuildReport) -> tuple[list[VideoRecord], dict]:
    records, used = [], {}
    for meta in sorted((root / "meta_files").glob("*.csv")):
        category = meta.stem
        by_name = {p.name: p for p in find_videos(root / "data_files" / category).values()} \
            if (root / "data_files" / category).is_dir() else {}
        with open(meta, encoding="utf-8-sig", newline="") as handle:
            for number, row in enumerate(csv.DictReader(handle), 2):
                origin = f"{meta.name}:{number}"
                raw_path = _first(row, PATH_COLUMNS)
                events = None
                caption_column = next((c for c in CAPTION_COLUMNS if row.get(c)), None)
                if caption_column:
                    events = _events_from_json(row[caption_column])
                elif row.get("timestamps") and row.get("sentences"):
                    try:
                        events = (json.loads(row["timestamps"]), json.loads(row["sentences"]))
                    except json.JSONDecodeError:
                        events = None
                    caption_column = "timestamps+sentences"
                if raw_path is None or events is None:
                    report.skip("malformed_annotation", origin)
                    continue
                path = _resolve(raw_path, root, category, by_name)
                video_id = _first(row, ID_COLUMNS) or Path(raw_path).stem
                try:
                    duration = float(row["duration"]) if row.get("duration") else None
                except ValueError:
                    duration = None
                used.setdefault("path", next(c for c in PATH_COLUMNS if row.get(c)))
                used.setdefault("captions", caption_column)
                records.append(VideoRecord(str(video_id), duration, tuple(events[0]), tuple(events[1]), origin,
                                           str(path) if path else None))
    return records, used


@register
class YoukuDCBuilder(TemporalBuilder):
    """Temporal Summarization from YoukuDenseCaption: Chinese dense captions translated to English,
    then the same task as ActivityNet Captions (a described sequence of events against the same
    frames reversed or half-shuffled)."""

    name = "youkudc"
    version = "1.0.0"
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

    def read_records(self, root: Path, report: BuildReport) -> tuple[list[VideoRecord], str]:
        if (root / "meta_files").is_dir():
            records, used = read_youku_release(root, report)
            report.notes.append(f"YoukuDC release layout: columns used {json.dumps(used, sort_keys=True)}")
            return records, "YoukuDC release (meta_files/*.csv + data_files/)"
        records = []
        for path in self.annotation_files(root):
            records += read_activitynet_json(path, report)
        return records, "plain local layout (ActivityNet-shaped JSON + video files named by id)"

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
