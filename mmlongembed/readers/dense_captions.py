"""Dense-caption video sources (ActivityNet Captions and sources in its shape): the annotation
records, the video files they name, and ActivityNet Captions' JSON.

ActivityNet Captions JSON is ``{video_id: {"duration": s, "timestamps": [[start, end], ...],
"sentences": [...]}}``; videos are files anywhere under the sources root, named by id."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from mmlongembed.core.builder import BuildReport

VIDEO_EXTENSIONS = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".m4v", ".flv", ".mpg", ".mpeg", ".ts")


@dataclass(frozen=True)
class VideoRecord:
    video_id: str
    duration: float | None  # from the annotation (None: from the video)
    timestamps: tuple
    sentences: tuple  # in the source language
    origin: str
    path: str | None = None


def find_videos(root: Path) -> dict[str, Path]:
    """Video files under ``root`` by file stem (the first in sorted order wins)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() in VIDEO_EXTENSIONS and path.is_file():
            found.setdefault(path.stem, path)
    return found


def video_file_for(video_id: str, videos: dict[str, Path]) -> Path | None:
    """ActivityNet ids carry a ``v_`` prefix that downloaded files often drop."""
    return videos.get(video_id) or videos.get(video_id.removeprefix("v_")) or videos.get(f"v_{video_id}")


def placeholder_token(sentences: list[str]) -> str | None:
    """The one token that every caption of a file repeats (PDVC's ``fake_test.json``: captions
    "a a" over the unannotated test videos, in the real files' shape), else None."""
    tokens = [t for sentence in sentences for t in re.findall(r"\w+", sentence.lower())]
    return tokens[0] if len(tokens) > 1 and len(set(tokens)) == 1 else None


def read_activitynet_json(path: Path, report: BuildReport) -> list[VideoRecord]:
    """``{video_id: {"duration": s, "timestamps": [[start, end], ...], "sentences": [...]}}``. A
    file of placeholder captions (``placeholder_token``) is no annotation: its records are counted
    skips (``placeholder_captions``)."""
    from mmlongembed.readers.sources import read_json

    data = read_json(path, report)
    if not isinstance(data, dict):
        return []
    records = _activitynet_records(path, data, report)
    token = placeholder_token([s for r in records for s in r.sentences if isinstance(s, str)])
    if token is not None:
        for record in records:
            report.skip("placeholder_captions", f"{record.origin} (every caption is {token!r} repeated)")
        return []
    return records


def _activitynet_records(path: Path, data: dict, report: BuildReport) -> list[VideoRecord]:
    records = []
    for video_id, value in data.items():
        if not isinstance(value, dict) or "timestamps" not in value or "sentences" not in value:
            report.skip("malformed_annotation", f"{path.name}:{video_id}")
            continue
        duration = value.get("duration")
        records.append(VideoRecord(str(video_id), float(duration) if isinstance(duration, (int, float)) else None,
                                   tuple(value["timestamps"] or ()), tuple(value["sentences"] or ()),
                                   f"{path.name}:{video_id}"))
    return records


def activitynet_annotations(path: Path) -> dict | None:
    """The file's video id -> annotation mapping when it is ActivityNet Captions JSON, else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    shaped = isinstance(data, dict) and bool(data) and all(
        isinstance(v, dict) and "timestamps" in v and "sentences" in v for v in list(data.values())[:20])
    return data if shaped else None


def is_activitynet_json(path: Path) -> bool:
    return activitynet_annotations(path) is not None


def activitynet_files(root: Path) -> list[Path]:
    """The ActivityNet Captions JSON files under ``root`` (any ``.json`` of that shape)."""
    return [p for p in sorted(root.rglob("*.json")) if is_activitynet_json(p)]


def read_activitynet_files(paths: list[Path], report: BuildReport) -> list[VideoRecord]:
    """The records of every file, in order."""
    records = []
    for path in paths:
        records += read_activitynet_json(path, report)
    return records
