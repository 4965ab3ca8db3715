"""``mmle mveb build``: a labelled local video collection -> MTEB video tasks (V and VA variants).

Sources are read by ``collection.read_collection``; each source video is decoded once into the
frame store (``mmlongembed.media.frames``: the Temporal Summarization decoding, grid frames at
``--fps`` and 16 kHz mono audio); a clip is a time range of those frames, published as an MP4
whose Motion JPEG packets are the stored frames (``mmlongembed.media.clips``), with its audio
slice as WAV. The pure steps (cutting, duration filters, splits, caps, pairs) are in
``mmlongembed.ops.mveb``; the task families in ``tasks``; writing in ``writer``.

These are not MMLongEmbed pools (no queries against length-banded candidate pools, no token
yardstick, no shortcut audit), so they do not go through the ``Builder`` registry and its pool
layout: they have their own config, output directory and card, and share the frame store,
the atomic output directory, the parquet writer and the manifest helpers.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.output.manifest import public_config, toolkit_identity
from mmlongembed.media.clips import CLIP_FORMAT, MTEB_FPS, MTEB_MAX_FRAMES, mux_clip
from mmlongembed.media.frames import FrameStore, decode_all, video_file_sha256
from mmlongembed.media.video import DEFAULT_FRAME_PIXELS, FrameSettings, audio_slice, decoder_identity, wav_bytes
from mmlongembed.ops.mveb import (
    MVEB_PAIRS_PER_SIDE, MVEB_SEED, TEST, Clip, Dropped, assign_splits, cap_per_class, cut_windows,
    drop_small_classes, filter_durations)
from mmlongembed.video_tasks.collection import read_collection
from mmlongembed.video_tasks.tasks import FAMILIES, VARIANTS, ClipMedia, TaskContext, build_tasks, camel
from mmlongembed.video_tasks.writer import write_repo, write_task_folder

VERSION = "1.0.0"  # bump when a change alters built data


@dataclass
class MvebConfig:
    """Options of ``mmle mveb build`` (MVEB's conventions are the defaults)."""

    sources: Optional[str] = field(default=None, metadata={
        "help": "the collection: a folder of <label>/<video> (optionally under train/ and test/), or a CSV/JSON/JSONL "
                "table of path, label, split, start, end, caption(s), question, candidates, answer (or a folder "
                "holding collection.csv|json|jsonl)"})
    name: str = field(default="", metadata={"help": "collection name: output folder and task-name prefix "
                                                    "(default: the sources' folder name)"})
    seed: int = field(default=MVEB_SEED, metadata={"help": "seed of every choice: caps, splits, shuffles, pairs "
                                                           "(MVEB: 42)"})
    clip_seconds: float = field(default=0.0, metadata={
        "help": "cut every entry without its own start/end into consecutive clips of this many seconds (0: one "
                "clip per entry)"})
    min_clip_seconds: float = field(default=0.5, metadata={
        "help": "keep a last, shorter clip of a cut video when it lasts at least this long"})
    min_duration: Optional[float] = field(default=None, metadata={"help": "drop clips shorter than this (s)"})
    max_duration: Optional[float] = field(default=None, metadata={
        "help": "drop clips longer than this (s; MVEB: WorldSense < 60, OmniVideoBench < 300)"})
    test_fraction: float = field(default=0.3, metadata={
        "help": "share of each class sent to test, for entries without a split of their own (fixed by the seed)"})
    max_per_class: int = field(default=32, metadata={
        "help": "at most this many clips per class and split, a seeded choice (MVEB: 32 for HAC, SSv2, VGGSound; "
                "0: no cap)"})
    min_per_class: int = field(default=2, metadata={"help": "leave out classes with fewer clips than this"})
    eval_clips: str = field(default="test", metadata={
        "help": "clips of the clustering, pair, zero-shot, retrieval and QA tasks: the test split or all clips",
        "choices": ("test", "all")})
    pairs_per_side: int = field(default=MVEB_PAIRS_PER_SIDE, metadata={
        "help": "at most this many same-class and this many different-class pairs (MVEB: 1024)"})
    families: tuple[str, ...] = field(default=FAMILIES, metadata={
        "help": f"task families to build, from {', '.join(FAMILIES)} (retrieval needs captions or audio, qa "
                "questions)"})
    variants: tuple[str, ...] = field(default=VARIANTS, metadata={
        "help": "v (video only) and/or va (video + audio; clips whose audio extraction failed are left out)"})
    cluster_sample: int = field(default=16_384, metadata={
        "help": "clips drawn (with replacement) per clustering run, mteb's max_documents_per_cluster (mteb: 16384)"})
    zeroshot_template: str = field(default="a video of {label}", metadata={
        "help": "zero-shot prompt per class ({label} is the class name)"})
    fps: float = field(default=4.0, metadata={
        "help": f"frames per second stored per clip (mteb samples {MTEB_FPS:g} fps, at most {MTEB_MAX_FRAMES})"})
    frame_max_pixels: int = field(default=DEFAULT_FRAME_PIXELS, metadata={
        "help": "pixel budget per frame (scaled down with aspect kept, never up)"})
    frame_quality: int = field(default=90, metadata={"help": "JPEG quality of the stored frames"})
    frame_store: str = field(default=".cache/mmle/frames", metadata={
        "help": "directory of decoded frames, keyed by video sha256 + frame settings + decoder (resume, reuse)"})
    language: str = field(default="eng-Latn", metadata={"help": "eval language of the tasks (mteb code)"})
    licence: str = field(default="not specified", metadata={"help": "licence of the data (mteb TaskMetadata)"})


@dataclass
class Prepared:
    clips: dict[str, ClipMedia]
    root: Path
    layout: str
    dropped: Dropped
    sources: dict[str, dict]  # source -> decoded facts (duration, has_audio, n_frames, ...)
    audio_failures: dict[str, str] = field(default_factory=dict)  # source -> reason


def collection_name(config: MvebConfig) -> str:
    if config.name:
        return config.name
    path = Path(config.sources)
    return (path.parent if path.is_file() else path).resolve().name


def check_config(config: MvebConfig) -> None:
    if not config.sources:
        raise UserError("mveb build: pass --sources (a folder of <label>/<video> or a collection table)")
    unknown = set(config.families) - set(FAMILIES)
    if unknown:
        raise UserError(f"--families: unknown {sorted(unknown)}; choose from {', '.join(FAMILIES)}")
    if set(config.variants) - set(VARIANTS) or not config.variants:
        raise UserError(f"--variants: choose from {', '.join(VARIANTS)}")
    if not 0 <= config.test_fraction < 1:
        raise UserError(f"--test-fraction {config.test_fraction}: expected 0 <= f < 1")
    if config.clip_seconds < 0 or config.pairs_per_side < 1 or config.max_per_class < 0 or config.cluster_sample < 1:
        raise UserError("--clip-seconds and --max-per-class must not be negative, --pairs-per-side and "
                        "--cluster-sample must be positive")
    if "{label}" not in config.zeroshot_template:
        raise UserError("--zeroshot-template must contain {label}")


def _ranges(entry: Clip, duration: float, config: MvebConfig) -> list[tuple[float, float]]:
    if entry.end is None and entry.start == 0 and config.clip_seconds > 0:
        return cut_windows(duration, config.clip_seconds, config.min_clip_seconds)
    end = duration if entry.end is None else min(entry.end, duration)
    return [(entry.start, end)] if entry.start < end else []


def prepare(config: MvebConfig, report: BuildReport) -> Prepared:
    """Read, decode (frame store), cut, filter, split and cap; then the clips' MP4 and WAV."""
    entries, root, layout = read_collection(config.sources, report)
    name = collection_name(config)
    settings = FrameSettings(fps=config.fps, max_pixels=config.frame_max_pixels, quality=config.frame_quality,
                             audio=True)
    store = FrameStore(config.frame_store, settings)
    sources = sorted({e.source for e in entries})
    jobs = {s: store.job(s, root / s if not Path(s).is_absolute() else s) for s in sources}
    outcome = decode_all(store, jobs.values(), progress=lambda items: report.bar(items, "decoding videos", "video",
                                                                                  min_items=4))
    report.notes.append(f"decoding: {json.dumps(outcome.as_dict(), sort_keys=True)}")
    facts = {s: store.meta(jobs[s].key) for s in sources if outcome.status.get(s) == "ok"}
    dropped = Dropped()
    clips: list[Clip] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.source not in facts:
            report.skip(f"undecodable_video:{outcome.status.get(entry.source)}", entry.origin)
            continue
        if facts[entry.source]["frame_sizes"] != 1:  # a clip's frames must share one size
            report.skip("frame_size_changes", entry.origin)
            continue
        ranges = _ranges(entry, facts[entry.source]["duration"], config)
        if not ranges:
            report.skip("range_outside_video", entry.origin)
        for k, (start, end) in enumerate(ranges):
            base = entry.clip_id or f"{entry.source}@{start:g}-{end:g}"
            clip_id = base if len(ranges) == 1 or not entry.clip_id else f"{base}#{k}"
            if clip_id in seen:
                report.skip("duplicate_clip_id", clip_id)
                continue
            seen.add(clip_id)
            clips.append(replace(entry, clip_id=clip_id, start=start, end=end))
    clips = filter_durations(clips, config.min_duration, config.max_duration, dropped)
    clips = assign_splits(clips, config.test_fraction, config.seed, name)
    clips = cap_per_class(clips, config.max_per_class, config.seed, name, dropped)
    labelled = drop_small_classes([c for c in clips if c.label], config.min_per_class, dropped)
    clips = labelled + [c for c in clips if not c.label]
    media, failures = _media(clips, store, jobs, config, dropped, report)
    return Prepared(media, root, layout, dropped, facts, failures)


def _media(clips: list[Clip], store: FrameStore, jobs: dict, config: MvebConfig, dropped: Dropped,
           report: BuildReport) -> tuple[dict[str, ClipMedia], dict[str, str]]:
    by_source: dict[str, list[Clip]] = defaultdict(list)
    for clip in clips:
        by_source[clip.source].append(clip)
    media: dict[str, ClipMedia] = {}
    failures: dict[str, str] = {}
    for source in report.bar(sorted(by_source), "cutting clips", "video", min_items=4):
        video = store.get(jobs[source].key, source)
        if not video.has_audio_track:
            failures[source] = "no_audio_track"
        for clip in by_source[source]:
            frames = [f for f in video.frames if clip.start - 1e-9 <= f.grid_index / video.fps < clip.end - 1e-9]
            if not frames:
                dropped.add("no_frames_in_range", clip.clip_id)
                continue
            audio, failure, seconds = None, None, 0.0
            if not video.has_audio_track:
                failure = "no_audio_track"
            else:
                pcm = audio_slice(video.audio_pcm or b"", video.audio_rate, clip.start, clip.end)
                if not pcm:
                    failure = "audio_empty"
                    failures.setdefault(source, failure)
                else:
                    audio, seconds = wav_bytes(pcm, video.audio_rate), len(pcm) / 2 / video.audio_rate
            media[clip.clip_id] = ClipMedia(clip, mux_clip(frames, config.fps), len(frames), audio, failure, seconds)
    return media, failures


def run_mveb_build(config: MvebConfig, output: Path, overwrite: bool = False, progress: bool = True) -> Path:
    check_config(config)
    name = collection_name(config)
    final_dir = Path(output) / name
    if final_dir.exists() and not overwrite:
        raise UserError(f"output directory {final_dir} already exists; pass --overwrite to replace it")
    report = BuildReport(progress=progress)
    prepared = prepare(config, report)
    if not prepared.clips:
        raise UserError(f"mveb build: no clip survived ({dict(report.skipped)}, {prepared.dropped.counts()})")
    all_ids = sorted(prepared.clips)
    eval_ids = all_ids if config.eval_clips == "all" else [c for c in all_ids
                                                           if prepared.clips[c].clip.split == TEST]
    ctx = TaskContext(collection=name, prefix=camel(name), clips=prepared.clips, eval_ids=eval_ids, seed=config.seed,
                      language=config.language, licence=config.licence, pairs_per_side=config.pairs_per_side,
                      zeroshot_template=config.zeroshot_template, cluster_sample=config.cluster_sample,
                      description=f"Clips of the video collection '{name}' (built by mmlongembed).")
    tasks = build_tasks(ctx, config.families, config.variants)
    if not tasks:
        raise UserError(f"mveb build: no task could be built ({'; '.join(ctx.notes)})")
    summary = clip_summary(prepared, eval_ids)
    manifest = {
        "builder": {"name": "mveb", "version": VERSION, "kind": "mteb-video-tasks"},
        "toolkit": toolkit_identity(), "config": public_config(config), "seed": config.seed,
        "sources": {"kind": "local", "layout": prepared.layout,
                    "videos": [{"file": s, "sha256": video_file_sha256(_source_path(prepared.root, s)),
                                "bytes": _source_path(prepared.root, s).stat().st_size,
                                "duration": round(f["duration"], 3), "has_audio_track": f["has_audio"]}
                               for s, f in sorted(prepared.sources.items())]},
        "decoder": decoder_identity(), "frames": FrameSettings(
            fps=config.fps, max_pixels=config.frame_max_pixels, quality=config.frame_quality, audio=True).identity(),
        "clip_format": CLIP_FORMAT, "audio": "16 kHz mono s16 WAV, the frame store's track sliced to the clip",
        "report": report.as_dict(), "dropped": prepared.dropped.counts(), "audio_failures": prepared.audio_failures,
        "clips": summary, "notes": ctx.notes,
    }
    context = {"name": name, "config": public_config(config), "summary": summary, "notes": ctx.notes,
               "skipped": dict(sorted(report.skipped.items())), "dropped": prepared.dropped.counts(),
               "audio_failures": prepared.audio_failures, "clip_format": CLIP_FORMAT, "mteb_fps": MTEB_FPS,
               "mteb_max_frames": MTEB_MAX_FRAMES, "version": VERSION, "layout": prepared.layout}
    write_task_folder(final_dir, overwrite, lambda tmp_dir: write_repo(
        tmp_dir, tasks, title=f"{name}: MTEB video tasks", licence=config.licence, template="mveb.md.j2",
        context=context, manifest=manifest, tags=["mveb"],
        progress=lambda items: report.bar(items, "writing configs", "config", min_items=8)))
    print(summary_text(tasks, prepared, report), file=sys.stderr)
    return final_dir


def _source_path(root: Path, source: str) -> Path:
    return Path(source) if Path(source).is_absolute() else root / source


def clip_summary(prepared: Prepared, eval_ids: list[str]) -> dict:
    clips = prepared.clips.values()
    per_class: dict[str, Counter] = defaultdict(Counter)
    for m in clips:
        per_class[m.clip.label or "(none)"][m.clip.split] += 1
        per_class[m.clip.label or "(none)"]["with_audio" if m.audio is not None else "without_audio"] += 1
    without_audio = Counter(m.clip.source for m in clips if m.audio is None)
    return {"clips": len(prepared.clips), "eval_clips": len(eval_ids),
            "with_audio": sum(1 for m in clips if m.audio is not None),
            "frames": sum(m.n_frames for m in clips),
            "per_class": {k: dict(sorted(v.items())) for k, v in sorted(per_class.items())},
            "without_audio_by_source": dict(sorted(without_audio.items())),
            "seconds": round(sum(m.clip.duration for m in clips), 3)}


def summary_text(tasks, prepared: Prepared, report: BuildReport) -> str:
    from mmlongembed.checks.summary import format_table

    rows = []
    for t in tasks:
        s = t.stats
        size = (" / ".join(f"{k} {v}" for k, v in s["rows"].items()) if "rows" in s
                else f"queries {s['queries']}, corpus {s.get('corpus', s.get('candidates'))}")
        dropped = sum(s.get("audio_dropped", {}).values())
        rows.append((t.name, t.metadata["type"], t.metadata["category"], size, dropped))
    text = format_table(["task", "type", "category", "rows", "dropped (no audio)"], rows)
    if report.skipped or prepared.dropped.counts():
        text += "\n\n" + format_table(["left out: reason", "clips/entries"],
                                      sorted({**report.skipped, **prepared.dropped.counts()}.items()))
    if prepared.audio_failures:
        text += "\n\nno audio (VA variants leave these clips out): " + ", ".join(
            f"{s} ({r})" for s, r in sorted(prepared.audio_failures.items()))
    return text
