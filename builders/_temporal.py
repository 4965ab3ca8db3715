"""What the two Temporal Summarization builders (``activitynet``, ``youkudc``) share.

A query describes a sequence of events; its positive shows them, in order, as 1-FPS frames;
the hard negatives show the very same frames with the event blocks reversed, the front half
shuffled or the back half shuffled; the easy negatives are runs of other videos cut to the
positive's length. The segment logic and the shuffles are pure operations (``mmlongembed.ops.temporal``),
the band's plan (query runs, queries, easy negatives) is ``_temporal_plan``, the source readers are
in ``mmlongembed.readers`` (``dense_captions``, ``youku``), decoding lives in ``mmlongembed.media``
(each video decoded once into a content-keyed frame store, locally or as a Ray Data job). A
subclass reads its source format (``read_records``) and says whether its captions need
translating first.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from builders._temporal_plan import BandPlanner, runs_by_band
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem
from mmlongembed.build.capacity import LengthLimit, halving_limit
from mmlongembed.core.documents import FRAME, Document, image_segment
from mmlongembed.core.errors import UserError
from mmlongembed.llm import LLMConfig, load_prompt, rewrite_captions, translate
from mmlongembed.output.manifest import files_identity
from mmlongembed.media.frames import DecodeOutcome, FrameStore, decode_all, video_file_sha256
from mmlongembed.media.video import (
    DEFAULT_FRAME_PIXELS, FRAME_RULE, FrameSettings, audio_slice, decoder_identity, wav_bytes)
from mmlongembed.ops.temporal import (
    HARD_VARIANTS, MARGIN_RULES, MIN_BLOCKS_FOR_SHUFFLES, REVERSAL_MODES, Run, arrange, chains, video_events)
from mmlongembed.build.pool_plan import PoolContext
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, pool_name
from mmlongembed.readers.dense_captions import VIDEO_EXTENSIONS, VideoRecord, find_videos, video_file_for
from mmlongembed.core.synthetic import synthetic_marker
from mmlongembed.core.tokens import default_counter, fit_image_size, image_tokens

INSTRUCTION = ("Given a description of a sequence of events, retrieve the video whose frames show exactly "
               "these events in this order.")
CANDIDATE_FORM = "frames"  # pool fact: candidates are ordered frame images (harness: needs "image" only)
# videos whose frames the planner holds at once (the last ones it read): it comes back to a video
# for its hard variants right after its runs, so a few suffice
PLANNING_VIDEOS_HELD = 8
# A downloaded video may run a little shorter or longer than the annotated one (a re-encode, a trimmed
# end); further off, it is another cut of the video or another video, and its events would be cut to
# fit frames they do not describe (real case: 50-176 s annotations over 1-30 s clips).
DURATION_TOLERANCE = 0.1


@dataclass
class TemporalConfig(CommonConfig, LLMConfig):
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; pool T holds runs whose frames count (T/2, T] tokens"})
    margin_rule: str = field(default="tolerate", metadata={
        "help": "reading of the paper's 0.5 s anti-overlap margin between consecutive events: "
                + "; ".join(f"{k}: {v}" for k, v in MARGIN_RULES.items()), "choices": tuple(MARGIN_RULES)})
    margin: float = field(default=0.5, metadata={"help": "the anti-overlap margin in seconds (paper: 0.5)"})
    min_blocks: int = field(default=MIN_BLOCKS_FOR_SHUFFLES, metadata={
        "help": "fewest caption events (blocks) in a query's run; 4 gives both half-shuffles two blocks to permute"})
    easy_min_blocks: int = field(default=2, metadata={
        "help": "fewest caption events in an easy negative's run (it is never shuffled, so it needs fewer; on "
                "ActivityNet val_1 2 instead of 4 lets about ten times as many videos serve the 8K band)"})
    reversal: str = field(default="blocks", metadata={
        "help": "complete reversal of the event blocks (frames inside a block keep their order) or of every "
                "frame", "choices": REVERSAL_MODES})
    fps: float = field(default=1.0, metadata={"help": "frame grid rate (paper: 1 FPS)"})
    frame_max_pixels: int = field(default=DEFAULT_FRAME_PIXELS, metadata={
        "help": "pixel budget per frame (default 640x360; scaled down with aspect kept, never up)"})
    frame_quality: int = field(default=90, metadata={"help": "JPEG quality of the stored frames"})
    audio: bool = field(default=False, metadata={
        "help": "also store each candidate's audio (16 kHz mono WAV of its blocks, in its order) in the audit "
                "config; videos without an audio track are skipped and counted"})
    frame_store: str = field(default=".cache/mmle/frames", metadata={
        "help": "directory of decoded frames, keyed by video sha256 + frame settings + decoder (resume, reuse)"})
    decode_backend: str = field(default="local", metadata={
        "help": "decode videos one after another here (local) or as a Ray Data job (ray; docs/VIDEO.md)",
        "choices": ("local", "ray")})
    decode_concurrency: int = field(default=0, metadata={
        "help": "ray: decoding workers (0: one per CPU of the cluster)"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy negatives per query (paper: 3)"})
    duration_tolerance: float = field(default=DURATION_TOLERANCE, metadata={
        "help": "largest share by which a video's decoded length may differ from its annotation's duration (0.1: "
                "a tenth of it); a video further off is skipped, counted and named in the summary (its annotated "
                "events would not match its frames)"})
    caption_similarity_max: float = field(default=0.5, metadata={
        "help": "blacklist: a video whose run's captions share at least this Jaccard index of content words with "
                "the query's captions is never its easy negative"})


@dataclass
class TemporalSources:
    records: list[VideoRecord]
    store: FrameStore
    keys: dict[str, str]  # video id -> frame-store key
    meta: dict[str, dict]  # video id -> decoded facts (duration, frame size, n frames)
    decode: DecodeOutcome
    synthetic: str = ""  # the SYNTHETIC marker's text: test-written annotations, never to publish
    layout: str = ""  # which source layout was read


def frame_settings(config: TemporalConfig) -> FrameSettings:
    try:
        return FrameSettings(fps=config.fps, max_pixels=config.frame_max_pixels, quality=config.frame_quality,
                             audio=config.audio)
    except UserError:
        raise UserError(f"bad frame options: --fps {config.fps} --frame-max-pixels {config.frame_max_pixels} "
                        f"--frame-quality {config.frame_quality}") from None


def check_options(config: TemporalConfig) -> None:
    """One line naming the option when the segment options cannot make a query."""
    if config.margin_rule not in MARGIN_RULES:
        raise UserError(f"--margin-rule {config.margin_rule!r}: choose from {', '.join(MARGIN_RULES)}")
    if config.min_blocks < MIN_BLOCKS_FOR_SHUFFLES:
        raise UserError(f"--min-blocks {config.min_blocks}: the half shuffles need at least "
                        f"{MIN_BLOCKS_FOR_SHUFFLES} blocks")
    if not config.duration_tolerance >= 0:
        raise UserError(f"--duration-tolerance {config.duration_tolerance}: expected a share of at least 0")
    if not 1 <= config.easy_min_blocks <= config.min_blocks:
        raise UserError(f"--easy-min-blocks {config.easy_min_blocks}: choose 1 to --min-blocks "
                        f"({config.min_blocks})")


def video_path(record: VideoRecord, videos: dict[str, Path]) -> Path | None:
    """The record's video file: where its annotation says (the YoukuDC release), else found by id."""
    path = Path(record.path) if record.path else video_file_for(record.video_id, videos)
    return path if path is not None and path.is_file() else None


def duration_mismatch(annotated: float | None, decoded: float, tolerance: float) -> bool:
    """Whether a video's decoded length is further than ``tolerance`` (a share of the annotated
    duration) from its annotation's duration; an annotation without a duration never is."""
    return bool(annotated) and abs(decoded - annotated) > tolerance * annotated


def usable_records(records: list[VideoRecord], videos: dict[str, Path], config: TemporalConfig,
                   report: BuildReport) -> list[VideoRecord]:
    """The records worth decoding: one per video (the first annotation file wins), with their
    video file, and with a chain of at least ``easy_min_blocks`` events; the rest counted."""
    seen: dict[str, str] = {}
    usable: list[VideoRecord] = []
    for record in sorted(records, key=lambda r: (r.origin.split(":")[0], r.video_id)):
        if record.video_id in seen:  # e.g. val_1 and val_2 annotate the same videos: one serves
            report.skip("duplicate_video_annotation", f"{record.origin} (kept {seen[record.video_id]})")
            continue
        seen[record.video_id] = record.origin
        path = video_path(record, videos)
        if path is None:
            report.skip("video_file_missing", record.video_id)
            continue
        events, _ = video_events(record.timestamps, record.sentences, record.duration or math.inf)
        if max((len(c) for c in chains(events, config.margin_rule, config.margin)),
               default=0) < config.easy_min_blocks:
            report.skip("no_admissible_chain", record.video_id)  # not decoded at all
            continue
        usable.append(VideoRecord(record.video_id, record.duration, record.timestamps, record.sentences,
                                  record.origin, str(path)))
    return usable


def decoded_facts(record: VideoRecord, status: str | None, store: FrameStore, key: str, config: TemporalConfig,
                  report: BuildReport) -> dict | None:
    """A decoded video's facts (``FrameStore.meta``), or None when it cannot serve (counted): not
    decoded, its frame size changes, no audio track where ``--audio`` wants one, or its length
    further from its annotation's than ``--duration-tolerance`` allows."""
    if status != "ok":
        report.skip(f"undecodable_video:{status}", record.video_id)
        return None
    facts = store.meta(key)
    if facts["frame_sizes"] != 1:
        report.skip("frame_size_changes", record.video_id)
    elif config.audio and not facts["has_audio"]:
        report.skip("no_audio_track", record.video_id)
    elif duration_mismatch(record.duration, facts["duration"], config.duration_tolerance):
        report.skip("video_length_differs_from_annotation",
                    f"{record.video_id} (video {facts['duration']:.1f} s, annotation {record.duration:.1f} s)")
    else:
        return facts
    return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


@dataclass
class TemporalPlan:
    """What ``run_steps`` gives ``build_pools``: each band's runs and plan (video, hard orders,
    easy negatives) for the queries the LLM steps wrote, their texts, and the decoded frames of
    every video the pools show (read from the store once)."""

    synthetic: str  # the SYNTHETIC marker load_sources found ("" for real sources)
    bands: list
    chosen: dict[str, dict]  # band -> video -> Run
    plans: dict[str, list]  # band -> [(video, hard orders, easy-negative runs)]
    texts: dict[str, dict]  # band -> video -> (query text, extras)
    frames: dict[str, object]  # video -> decoded frames



class TemporalBuilder(Builder):
    """Base of the Temporal Summarization builders (not registered itself)."""

    task = "temporal_summarization"
    config_class = TemporalConfig
    card_template = "temporal.md.j2"
    translate_captions = False  # YoukuDC: Chinese captions are translated before the rewrite
    source_name = ""
    source_licence = ""
    source_citation = ""

    # -- sources -------------------------------------------------------------------------------
    def read_records(self, root: Path, config: TemporalConfig,
                     report: BuildReport) -> tuple[list[VideoRecord], str]:
        """The annotations under ``root`` with their video paths resolved where the format says
        (else by file stem): (records, layout name)."""
        raise NotImplementedError

    def annotation_files(self, root: Path) -> list[Path]:
        raise NotImplementedError

    def load_sources(self, config: TemporalConfig, report: BuildReport) -> TemporalSources:
        if not config.sources:
            raise UserError(f"{self.name}: videos are not on the Hub; pass --sources DIR with the annotations and "
                            "a folder of videos named by id")
        from mmlongembed.readers.sources import require_dir

        check_options(config)
        root = require_dir(config.sources, f"{self.source_name} annotations and videos")
        usable, layout = self.records_read(root, config, report)
        settings = frame_settings(config)
        store = FrameStore(config.frame_store, settings)
        jobs = [store.job(r.video_id, r.path) for r in usable]
        outcome = decode_all(store, jobs, config.decode_backend,
                             progress=lambda items: report.bar(items, "decoding videos", "video", min_items=4),
                             ray_concurrency=config.decode_concurrency)
        keys, meta, kept = {}, {}, []
        for record, job in zip(usable, jobs):
            facts = decoded_facts(record, outcome.status.get(record.video_id), store, job.key, config, report)
            if facts is not None:
                keys[record.video_id], meta[record.video_id] = job.key, facts
                kept.append(record)
        report.notes.append(f"decoding: {json.dumps(outcome.as_dict(), sort_keys=True)}")
        synthetic = synthetic_marker(root, self.annotation_files(root) + [Path(r.path) for r in usable])
        return TemporalSources(kept, store, keys, meta, outcome, synthetic, layout)

    def video_naming(self, records: list[VideoRecord]) -> str:
        """How the video files must be named for the annotations to find them (the all-videos-missing
        error): by id, as the ActivityNet crawler saves them."""
        example = records[0].video_id
        example = example if example.startswith("v_") else f"v_{example}"
        return (f"name each video by its annotation's id, v_<id>.mp4 (e.g. {example}.mp4; the v_ prefix may be "
                f"dropped; {' '.join(VIDEO_EXTENSIONS)} are read), anywhere under that folder")

    def records_read(self, root: Path, config: TemporalConfig,
                     report: BuildReport) -> tuple[list[VideoRecord], str]:
        """(the annotated videos this build decodes, each with its video file; the layout read):
        what ``load_sources`` reads, and all that ``source_identity`` pins, so that another
        source's videos under the same root (the demo layout's YoukuDC clips beside ActivityNet's)
        are no part of this build's identity. Reads annotations only, no video."""
        records, layout = self.read_records(root, config, report)
        if not records:
            raise UserError(f"no {self.source_name} annotation under {root}")
        videos = find_videos(root)
        if not any(video_path(record, videos) for record in records):
            raise UserError(f"{self.name}: none of the {len({r.video_id for r in records})} videos the annotations "
                            f"name is under {root} (searched with its subfolders): {self.video_naming(records)}")
        return usable_records(records, videos, config, report), layout

    def video_label(self, path: Path, root: Path) -> str:
        """How the manifest names a video read: its path under the sources root."""
        return _relative(path, root)

    def source_identity(self, config: TemporalConfig) -> dict:
        """Annotation files by sha256, and the videos the build reads (hashed once already, for
        the frame store's keys; a folder's other videos are not read at all, and are no part of
        it). Worked out from the annotations, so that a later run finds the same identity
        before it decodes anything (the up-to-date check)."""
        root = Path(config.sources)
        records, _ = self.records_read(root, config, BuildReport(progress=False))
        annotations, videos = self.annotation_files(root), [Path(r.path) for r in records]
        return {"kind": "local", "name": self.source_name, "licence": self.source_licence,
                "annotations": files_identity(annotations, root),
                "videos": [{"file": self.video_label(p, root), "sha256": video_file_sha256(p),
                            "bytes": p.stat().st_size} for p in sorted(videos, key=str)],
                "synthetic": bool(synthetic_marker(root, annotations + videos)),
                "decoder": decoder_identity(),
                "frames": frame_settings(config).identity()}

    # -- pools ---------------------------------------------------------------------------------
    def largest_length(self, sources: TemporalSources, config: TemporalConfig) -> LengthLimit | None:
        """A query's frames are a run of one video: the longest video bounds it."""
        frames = [m["n_frames"] * image_tokens(m["frame_height"], m["frame_width"]) for m in sources.meta.values()]
        return halving_limit(max(frames), "the longest video, all its frames,") if frames else None

    def run_steps(self, sources: TemporalSources, config: TemporalConfig, report: BuildReport) -> TemporalPlan:
        """The declared steps: each band's runs and plan (over frames read from the store), then
        the LLM steps that write their queries (translate, then rewrite); what ``build_pools``
        assembles, the frames of every video it uses included."""
        bands = [LengthBand.halving(t) for t in sorted(set(config.lengths))]
        context = PoolContext(self.name, config, default_counter(), report)
        chosen, fitting = runs_by_band(sources.records, sources.meta, bands, context)

        # The planner looks at many more videos than the pools use (runs that fail, negatives
        # passed over): it reads them from the frame store with only the last few held, and the
        # plan keeps the frames of the videos the pools place, nothing more.
        @functools.lru_cache(maxsize=PLANNING_VIDEOS_HELD)
        def video(video_id: str):
            return sources.store.get(sources.keys[video_id], video_id)

        frame_tokens = {vid: image_tokens(m["frame_height"], m["frame_width"]) for vid, m in sources.meta.items()}
        plans = {band.name: BandPlanner(band, chosen[band.name], fitting[band.name], frame_tokens, video,
                                        context).plan()
                 for band in bands}
        texts = self._query_texts(plans, chosen, config, report)
        kept = {band.name: [(vid, hard, negatives) for vid, hard, negatives in plans[band.name]
                            if vid in texts[band.name]] for band in bands}
        frames: dict[str, object] = {}
        for vid, _, negatives in (entry for plan in kept.values() for entry in plan):
            for used in (vid, *(run.video_id for run in negatives)):
                if used not in frames:
                    frames[used] = video(used)
        video.cache_clear()
        return TemporalPlan(sources.synthetic, bands, chosen, kept, texts, frames)

    def build_pools(self, planned: TemporalPlan, config: TemporalConfig, report: BuildReport) -> list[Pool]:
        """Pure: the planned runs, their query texts and their frames into easy and hard pools."""
        context = PoolContext(self.name, config, default_counter(), report)
        self._segments: dict[str, dict] = {}  # video -> grid index -> Segment, shared by every candidate
        self._synthetic = planned.synthetic
        pools = []
        for band in planned.bands:
            pools += self._assemble(band, planned.plans[band.name], planned.chosen[band.name],
                                    planned.texts[band.name], planned.frames.__getitem__, context)
        return pools

    def _query_texts(self, plans, chosen, config: TemporalConfig, report: BuildReport) -> dict[str, dict]:
        """band -> video -> (query text, extras), through the LLM steps (translate, then rewrite)."""
        runs_wanted = {(band, vid): chosen[band][vid] for band, plan in plans.items() for vid, _, _ in plan}
        sentences: dict[tuple, list[str]] = {key: list(run.sentences) for key, run in runs_wanted.items()}
        translated: dict[tuple, list[str]] = {}
        if self.translate_captions and sentences:
            items = {}
            for (band, vid), run in runs_wanted.items():
                for block in run.blocks:
                    items.setdefault(f"{vid}#{block.event_index}", block.sentence)
            english = translate(sorted(items.items()), config, report)
            for (band, vid), run in runs_wanted.items():
                ids = [f"{vid}#{b.event_index}" for b in run.blocks]
                if all(i in english for i in ids):
                    translated[(band, vid)] = [english[i] for i in ids]
                else:
                    report.skip("translation_missing", f"{vid} ({band})")
        source_for_rewrite = translated if self.translate_captions else sentences
        rewritten = rewrite_captions(
            [(f"{band}|{vid}", captions) for (band, vid), captions in sorted(source_for_rewrite.items())],
            config, report) if source_for_rewrite else {}
        texts: dict[str, dict] = defaultdict(dict)
        for (band, vid), captions in sorted(source_for_rewrite.items()):
            text = rewritten.get(f"{band}|{vid}")
            if not text:
                continue  # rejected by the LLM step: counted there
            extra = {"video_id": vid, "raw_captions": " ".join(c.strip() for c in sentences[(band, vid)])}
            if self.translate_captions:
                extra["translated_captions"] = " ".join(c.strip() for c in captions)
            texts[band][vid] = (text.strip(), extra)
        return texts

    def _assemble(self, band, plan, runs, texts, video, context: PoolContext) -> list[Pool]:
        config = context.config
        facts = {"candidate_form": CANDIDATE_FORM, "fps": config.fps, "frame_rule": FRAME_RULE,
                 "margin_rule": config.margin_rule, "margin": config.margin, "reversal": config.reversal,
                 "min_blocks": config.min_blocks, "easy_min_blocks": config.easy_min_blocks}
        easy = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name, difficulty="easy",
                    band=band, modality="video", facts=dict(facts))
        hard = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name, difficulty="hard",
                    band=band, modality="video", facts=dict(facts))
        for vid, orders, negatives in plan:
            qid = f"q:{vid}:{band.name}"
            text, extra = texts[vid]
            query = Query(id=qid, text=text, instruction=INSTRUCTION, source_id=vid,
                          n_tokens=context.counter.count(text), extra=extra)
            positive = self._candidate(f"d:{vid}:{band.name}", POSITIVE, qid, runs[vid], video(vid), config)
            hard.add_query(query, positive, [
                self._candidate(f"d:{vid}:{band.name}:{variant}", HARD_NEGATIVE, qid, runs[vid], video(vid), config,
                                variant, order) for variant, order in orders.items()])
            easy.add_query(query, positive, [
                self._candidate(f"d:{run.video_id}:{band.name}", EASY_NEGATIVE, qid, run, video(run.video_id), config)
                for run in negatives])
        return [easy, hard]

    def _candidate(self, cid, role, group, run: Run, decoded, config: TemporalConfig, variant: str | None = None,
                   order=None) -> Candidate:
        """One candidate: the run's frames in ``order`` (a hard variant's; default: time order)."""
        frames = {f.grid_index: f for f in decoded.frames}
        segments = self._segments.setdefault(run.video_id, {})
        for j in run.grid:
            if j not in segments:
                f = frames[j]
                segments[j] = image_segment(f.image, f.height, f.width, kind=FRAME, origin=f"video:{run.video_id}",
                                            timestamp=f.pts)
        m = len(run.blocks)
        order = list(order) if order is not None else list(range(m))
        frames_reversed = variant == "reversal" and config.reversal == "frames"
        grid = arrange([b.grid for b in run.blocks], order, frames_reversed)
        block_of = arrange([[k] * b.n_frames for k, b in enumerate(run.blocks)], order, frames_reversed)
        shown = [segments[j] for j in grid]
        document = Document(cid, tuple(shown))
        first = frames[run.grid[0]]
        provenance = {
            "variant": variant or ("original" if role == POSITIVE else "other_video"),
            "video_id": run.video_id, "order": order,
            "blocks": [{"event_index": b.event_index, "start": round(b.start, 3), "end": round(b.end, 3),
                        "n_frames": b.n_frames} for b in run.blocks],
            "margin_rule": config.margin_rule, "margin": config.margin, "fps": config.fps,
            "frame_size": [first.height, first.width], "source_fps": decoded.source_fps,
            "seconds": round(run.seconds, 3),
        }
        if variant == "reversal":
            provenance["reversal"] = config.reversal
        if role == EASY_NEGATIVE:
            provenance["frames_cut"] = run.cut_frames  # left off the end of its video's run
        extra = {"video_id": run.video_id, "grid_index": [int(j) for j in grid],
                 "frame_pts": [round(segments[j].timestamp, 6) for j in grid], "block_of_frame": block_of}
        if config.audio:
            pcm = b"".join(audio_slice(decoded.audio_pcm or b"", decoded.audio_rate, run.blocks[k].start,
                                       run.blocks[k].end) for k in order)
            extra["audio"] = wav_bytes(pcm, decoded.audio_rate)
        return Candidate(id=cid, document=document, role=role, group=group, source_id=run.video_id,
                         n_tokens=document.tokens, provenance=provenance, extra=extra)

    # -- checks and card -----------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        from builders._temporal_checks import check_temporal_pool

        return check_temporal_pool(pool_row, corpus, queries, qrels)

    def sources_marker(self, config: TemporalConfig) -> str:
        """Also a SYNTHETIC marker between the sources root and the files read (demo folders
        copied into a larger tree stay marked), as load_sources found it."""
        return getattr(self, "_synthetic", "") or super().sources_marker(config)

    def card_context(self, config: TemporalConfig, pools: list[Pool], report: BuildReport) -> dict:
        per_pool = []
        for pool in pools:
            frames = [len(c.document.segments) for c in pool.candidates]
            seconds = [c.provenance["seconds"] for c in pool.candidates]
            blocks = [len(c.provenance["blocks"]) for c in pool.candidates]
            cut = [c.provenance["frames_cut"] for c in pool.candidates if c.role == EASY_NEGATIVE]
            per_pool.append({"pool": pool.name, "frames": _percentiles(frames), "seconds": _percentiles(seconds),
                             "blocks": _percentiles(blocks),
                             "easy_cut": f"{sum(1 for n in cut if n)} of {len(cut)}" if cut else "–"})
        prompts = [{"name": p.name, "version": p.version, "hash": p.hash, "role": p.role}
                   for p in (load_prompt("translation"),) * self.translate_captions + (load_prompt("caption_rewrite"),)]
        decoding = next((json.loads(n.split(": ", 1)[1]) for n in report.notes if n.startswith("decoding: ")), {})
        return {
            "instruction": INSTRUCTION, "hard_variants": list(HARD_VARIANTS), "margin_rules": MARGIN_RULES,
            "frame_rule": FRAME_RULE, "per_pool_frames": per_pool, "prompts": prompts, "decoding": decoding,
            "decoder": decoder_identity(), "translate_captions": self.translate_captions,
            "synthetic": getattr(self, "_synthetic", ""), "dataset_name": self.source_name,
            "frame_16x9": (lambda h, w: {"height": h, "width": w, "tokens": image_tokens(h, w)})(
                *fit_image_size(720, 1280, config.frame_max_pixels)),
            "sources": [{"name": self.source_citation, "licence": self.source_licence,
                         "identity": f"local files under `{Path(config.sources).name}` (sha256 in manifest.json)"}],
        }
