"""The frame store: each video decoded once, its frames written once, reused by every later build.

A decoded video is one parquet file ``<root>/<key[:2]>/<key>.parquet`` (one row per grid frame:
grid index, pts, JPEG bytes, size; the video's facts in the file metadata) plus, when audio was
asked for and exists, ``<key>.s16`` (raw 16-bit mono samples). The key is a content hash of
everything that decides the frames: the video file's sha256, the frame settings (rule, fps,
pixel budget, quality, audio), the decoder's identity (PyAV and libav* versions) and
``STORE_VERSION``. A changed file, setting or decoder therefore never reuses stale frames, and
a build that stops half way resumes where it stopped: files are written to a temporary name and
renamed into place when complete. A video that cannot be decoded leaves a small ``.failed``
JSON file with its reason, so a rerun counts the same skip without decoding it again.

Decoding many videos runs here one after another (``decode_all``) or as a Ray Data job on a
cluster (``mmlongembed.media.ray_decode``); both write the same files.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from mmlongembed.core.digests import file_sha256
from mmlongembed.core.errors import UserError
from mmlongembed.media.video import DecodedVideo, Frame, FrameSettings, VideoDecodeError, decode_video, \
    decoder_identity
from mmlongembed.core.plugins import PluginRegistry

STORE_VERSION = 1
# How the videos missing from the store get decoded -> the module that registers each (Ray's
# pulls in the optional extra).
DECODE_BACKENDS: PluginRegistry[Callable[..., list[tuple]]] = PluginRegistry("decode backend", {
    "local": "mmlongembed.media.frames", "ray": "mmlongembed.media.ray_decode"})


def video_file_sha256(path: Path, _cache: dict = {}) -> str:  # noqa: B006  (memo per process: each file hashed once)
    """``file_sha256`` of a video, remembered per (file, size, modification time): a build names each
    video by its hash more than once, and videos are large."""
    path = Path(path)
    stat = path.stat()
    memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo not in _cache:
        _cache[memo] = file_sha256(path)
    return _cache[memo]


def store_key(video_sha256: str, settings: FrameSettings, decoder: dict) -> str:
    material = json.dumps({"video": video_sha256, "settings": settings.identity(), "decoder": decoder,
                           "store_version": STORE_VERSION}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


@dataclass(frozen=True)
class DecodeJob:
    video_id: str
    path: str
    key: str


@dataclass
class DecodeOutcome:
    """What a decode pass did: per video, ``ok`` or the skip reason; timings for the report."""

    status: dict[str, str] = field(default_factory=dict)  # video id -> "ok" | reason
    decoded_now: int = 0  # videos decoded by this pass (the rest came from the store)
    source_frames: int = 0  # decoded source frames, videos decoded now
    grid_frames: int = 0  # grid frames written, videos decoded now
    seconds: float = 0.0  # wall time of the videos decoded now

    def as_dict(self) -> dict:
        rate = self.grid_frames / self.seconds if self.seconds else None
        source_rate = self.source_frames / self.seconds if self.seconds else None
        return {"videos": len(self.status), "ok": sum(1 for s in self.status.values() if s == "ok"),
                "decoded_now": self.decoded_now, "from_store": len(self.status) - self.decoded_now,
                "source_frames_decoded": self.source_frames, "grid_frames_written": self.grid_frames,
                "seconds": round(self.seconds, 3),
                "grid_frames_per_second": round(rate, 2) if rate else None,
                "source_frames_per_second": round(source_rate, 1) if source_rate else None}


class FrameStore:
    def __init__(self, root: str | Path, settings: FrameSettings):
        self.root = Path(root)
        self.settings = settings
        self.decoder = decoder_identity()

    def job(self, video_id: str, path: str | Path) -> DecodeJob:
        return DecodeJob(video_id, str(path), store_key(video_file_sha256(Path(path)), self.settings, self.decoder))

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / f"{key}{suffix}"

    def status(self, key: str) -> str | None:
        """'ok', a recorded failure reason, or None (not decoded yet)."""
        if self._path(key, ".parquet").is_file():
            return "ok"
        failed = self._path(key, ".failed")
        if failed.is_file():
            try:
                return json.loads(failed.read_text(encoding="utf-8"))["reason"]
            except (ValueError, KeyError, OSError):
                return None
        return None

    # -- writing -------------------------------------------------------------------------------
    def _atomic_write(self, path: Path, writer: Callable[[Path], None]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.writing")
        writer(scratch)
        os.replace(scratch, path)

    def put(self, key: str, video: DecodedVideo) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if video.audio_pcm is not None:
            self._atomic_write(self._path(key, ".s16"), lambda p: p.write_bytes(video.audio_pcm))
        table = pa.table({
            "grid_index": pa.array([f.grid_index for f in video.frames], pa.int32()),
            "pts": pa.array([f.pts for f in video.frames], pa.float64()),
            "image": pa.array([f.image for f in video.frames], pa.binary()),
            "height": pa.array([f.height for f in video.frames], pa.int32()),
            "width": pa.array([f.width for f in video.frames], pa.int32()),
        })
        sizes = sorted({(f.height, f.width) for f in video.frames})
        facts = {**video.meta(), "has_audio": video.audio_pcm is not None, "n_frames": len(video.frames),
                 "frame_height": sizes[0][0] if sizes else 0, "frame_width": sizes[0][1] if sizes else 0,
                 "frame_sizes": len(sizes)}
        table = table.replace_schema_metadata({"mmle_video": json.dumps(facts, sort_keys=True)})
        self._atomic_write(self._path(key, ".parquet"), lambda p: pq.write_table(table, str(p), compression="none"))

    def put_failure(self, key: str, video_id: str, reason: str, detail: str) -> None:
        record = json.dumps({"video_id": video_id, "reason": reason, "detail": detail[:300]})
        self._atomic_write(self._path(key, ".failed"), lambda p: p.write_text(record, encoding="utf-8"))

    def decode_into(self, job: DecodeJob) -> tuple[str, int, int, float]:
        """Decode one job into the store unless it is there: (status, source frames, grid
        frames, seconds), seconds 0 when nothing was decoded."""
        known = self.status(job.key)
        if known is not None:
            return known, 0, 0, 0.0
        start = time.perf_counter()
        try:
            video = decode_video(job.path, self.settings, job.video_id)
        except VideoDecodeError as error:
            self.put_failure(job.key, job.video_id, error.reason, str(error))
            return error.reason, 0, 0, time.perf_counter() - start
        self.put(job.key, video)
        return "ok", video.source_frames, len(video.frames), time.perf_counter() - start

    # -- reading -------------------------------------------------------------------------------
    def meta(self, key: str) -> dict:
        """A stored video's facts without reading its frames: duration, fps, source fps, codec,
        n_frames, frame_height/width, frame_sizes (distinct sizes), has_audio."""
        import pyarrow.parquet as pq

        return json.loads(pq.read_schema(str(self._path(key, ".parquet"))).metadata[b"mmle_video"])

    def get(self, key: str, video_id: str | None = None) -> DecodedVideo:
        import pyarrow.parquet as pq

        table = pq.read_table(str(self._path(key, ".parquet")))
        meta = json.loads(table.schema.metadata[b"mmle_video"])
        has_audio = meta.pop("has_audio")
        for derived in ("n_frames", "frame_height", "frame_width", "frame_sizes"):
            meta.pop(derived)
        video = DecodedVideo(**{**meta, "video_id": video_id or meta["video_id"]})
        columns = table.to_pydict()
        video.frames = [Frame(int(g), float(p), bytes(im), int(h), int(w)) for g, p, im, h, w in zip(
            columns["grid_index"], columns["pts"], columns["image"], columns["height"], columns["width"])]
        if has_audio:
            video.audio_pcm = self._path(key, ".s16").read_bytes()
        return video


def decode_all(store: FrameStore, jobs: Iterable[DecodeJob], backend: str = "local", progress=None,
               ray_concurrency: int = 0) -> DecodeOutcome:
    """Make sure every job is in the store; ``backend`` 'local' decodes one video after another
    in this process, 'ray' runs the missing ones as a Ray Data job (``ray_decode``)."""
    jobs = list(jobs)
    outcome = DecodeOutcome()
    missing = []
    for job in jobs:
        known = store.status(job.key)
        if known is None:
            missing.append(job)
        else:
            outcome.status[job.video_id] = known
    decode = DECODE_BACKENDS.get(backend)
    if decode is None:
        raise UserError(f"decode backend {backend!r}: expected one of {', '.join(DECODE_BACKENDS.names())}")
    results = decode(store, missing, progress=progress, concurrency=ray_concurrency) if missing else []
    for video_id, status, source_frames, grid_frames, seconds in results:
        outcome.status[video_id] = status
        outcome.decoded_now += 1
        outcome.source_frames += source_frames
        outcome.grid_frames += grid_frames
        outcome.seconds += seconds
    return outcome


@DECODE_BACKENDS.register("local")
def decode_here(store: FrameStore, jobs: list[DecodeJob], progress=None, concurrency: int = 0) -> list[tuple]:
    """Decode ``jobs`` into ``store`` one after another in this process (``concurrency``: unused);
    returns (video id, status, source frames, grid frames, seconds) per job, in order."""
    iterator = progress(jobs) if progress else jobs
    return [(job.video_id, *store.decode_into(job)) for job in iterator]
