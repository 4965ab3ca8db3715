"""Models as mteb encoders for the video tasks (``mmle mveb eval``), and the evaluation itself.

``HarnessEncoder`` wraps any dense model the harness loads (``harness.models.adapters.load_model``): a
clip becomes its frames, selected by mteb's default frame rule (``FramesCollator``: 2 fps, at
most 64), placed after the text as images in order, exactly as the harness scores Temporal
Summarization pools; models without an audio pathway are not run on tasks with audio.
``SeededMediaEncoder`` (spec ``seeded-media``) is a stand-in that needs no weights: fixed
random projections of simple content features (frame thumbnails, audio band energies, hashed
words), so clips of one source land near each other; it exists for tests and plumbing checks,
like mteb's own random baseline, and is no model of anything.

Clip values arrive as mteb hands them over: ``{"bytes", "path"}`` dicts (media left encoded,
see ``mteb_tasks.py``) or torchcodec decoders carrying their encoded source (``_hf_encoded``).
Clips made by ``mmle mveb build`` are Motion JPEG, whose packets are the stored JPEG frames
(``mmlongembed.media.clips``); any other video goes through the toolkit's decoder
(``mmlongembed.media.video.decode_video``) at the sampling rate.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from mmlongembed.media.clips import MTEB_FPS, MTEB_MAX_FRAMES, clip_frames, mteb_frame_indices, wav_samples

SEEDED_SPEC = "seeded-media"


@dataclass
class Row:
    """One input as the encoders see it: text, frames (JPEG bytes, in order), audio samples."""

    text: str | None = None
    frames: tuple[bytes, ...] = ()
    audio: np.ndarray | None = None
    audio_rate: int = 16_000


def _encoded_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    encoded = value if isinstance(value, dict) else getattr(value, "_hf_encoded", None)
    if not isinstance(encoded, dict):
        raise UserError(f"cannot read a media value of type {type(value).__name__} (expected encoded bytes)")
    if encoded.get("bytes"):
        return bytes(encoded["bytes"])
    if encoded.get("path") and Path(encoded["path"]).is_file():
        return Path(encoded["path"]).read_bytes()
    raise UserError("a media value has neither bytes nor a readable path")


def video_frames(value: Any, fps: float | None = MTEB_FPS, max_frames: int | None = MTEB_MAX_FRAMES,
                 num_frames: int | None = None) -> tuple[bytes, ...]:
    """The frames an encoder sees for a clip value, selected by mteb's frame rule."""
    data = _encoded_bytes(value)
    try:
        frames, duration = clip_frames(data)
    except ValueError:  # not Motion JPEG: decode it (the Temporal Summarization decoder)
        frames, duration = _decoded_frames(data, fps or 1.0)
    return tuple(frames[i] for i in mteb_frame_indices(len(frames), duration, fps, max_frames, num_frames))


def _decoded_frames(data: bytes, fps: float) -> tuple[list[bytes], float]:
    from mmlongembed.media.video import FrameSettings, VideoDecodeError, decode_video

    with tempfile.NamedTemporaryFile(suffix=".video") as handle:
        handle.write(data)
        handle.flush()
        try:
            decoded = decode_video(handle.name, FrameSettings(fps=fps))
        except VideoDecodeError as error:
            raise UserError(f"cannot decode a clip: {error}") from None
    return [f.image for f in decoded.frames], decoded.duration


def audio_samples(value: Any) -> tuple[np.ndarray, int]:
    if hasattr(value, "__getitem__") and not isinstance(value, dict) and getattr(value, "_hf_encoded", None) is None:
        return np.asarray(value["array"], dtype=np.float32), int(value["sampling_rate"])  # a decoded AudioDecoder
    return wav_samples(_encoded_bytes(value))


def batch_rows(batch: dict, fps: float | None, max_frames: int | None) -> list[Row]:
    n = len(next(iter(batch.values())))
    rows = []
    for i in range(n):
        row = Row()
        if batch.get("text") is not None:
            row.text = batch["text"][i]
        if batch.get("video") is not None and batch["video"][i] is not None:
            row.frames = video_frames(batch["video"][i], fps, max_frames)
        if batch.get("audio") is not None and batch["audio"][i] is not None:
            row.audio, row.audio_rate = audio_samples(batch["audio"][i])
        rows.append(row)
    return rows


class MediaEncoder:
    """mteb's EncoderProtocol for the toolkit's encoders: rows in, unit vectors out."""

    modalities: tuple[str, ...] = ("text",)

    def __init__(self, name: str, revision: str, fps: float | None = MTEB_FPS, max_frames: int | None = MTEB_MAX_FRAMES):
        from mteb.models.model_meta import ModelMeta

        self.spec, self.fps, self.max_frames = name, fps, max_frames
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:80] or "model"
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": f"mmlongembed/{safe}", "revision": revision, "similarity_fn_name": "cosine",
            "modalities": list(self.modalities)})

    def embed_rows(self, rows: list[Row]) -> np.ndarray:
        raise NotImplementedError

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None, **kwargs):
        vectors = []
        for batch in inputs:
            rows = batch_rows(batch, self.fps, self.max_frames)
            if rows:
                vectors.append(np.asarray(self.embed_rows(rows), dtype=np.float32))
        matrix = np.concatenate(vectors) if vectors else np.zeros((0, 1), np.float32)
        return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)

    def similarity(self, embeddings1, embeddings2):
        from mteb.similarity_functions import cos_sim

        return cos_sim(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2):
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(embeddings1, embeddings2)


class SeededMediaEncoder(MediaEncoder):
    """Content features through fixed seeded projections; each present modality gives a unit
    vector, and a row's embedding is their mean (late fusion). Deterministic, no weights."""

    modalities = ("text", "video", "audio")
    THUMB = 8  # frame thumbnails of 8x8 RGB
    BANDS = 24  # audio: log energy in 24 frequency bands
    BUCKETS = 256  # text: hashed words

    def __init__(self, dim: int = 32, seed: int = 0, **kwargs):
        super().__init__(f"{SEEDED_SPEC}-{dim}-{seed}", f"seed{seed}", **kwargs)
        rng = np.random.default_rng([seed, dim])
        self.projections = {
            "video": rng.standard_normal((3 * self.THUMB * self.THUMB, dim)),
            "audio": rng.standard_normal((self.BANDS, dim)),
            "text": rng.standard_normal((self.BUCKETS, dim)),
        }

    def _video(self, frames: Sequence[bytes]) -> np.ndarray:
        import io

        from PIL import Image

        thumbs = [np.asarray(Image.open(io.BytesIO(f)).convert("RGB").resize((self.THUMB, self.THUMB), Image.BILINEAR),
                             dtype=np.float64).ravel() / 255.0 for f in frames]
        features = np.mean(thumbs, axis=0)
        return features - features.mean()

    def _audio(self, samples: np.ndarray) -> np.ndarray:
        if samples.size == 0:
            return np.zeros(self.BANDS)
        window = 512
        usable = samples[: max(window, samples.size - samples.size % window)]
        if usable.size < window:
            usable = np.pad(usable, (0, window - usable.size))
        spectrum = np.abs(np.fft.rfft(usable.reshape(-1, window), axis=1)) ** 2
        bands = np.array_split(spectrum.mean(axis=0), self.BANDS)
        energy = np.log1p(np.array([b.mean() for b in bands]) * 1e3)
        return energy - energy.mean()

    def _text(self, text: str) -> np.ndarray:
        counts = np.zeros(self.BUCKETS)
        for word in re.findall(r"\w+", text.lower()):
            counts[zlib.crc32(word.encode()) % self.BUCKETS] += 1
        return counts

    def embed_rows(self, rows):
        out = []
        for row in rows:
            parts = []
            if row.text:
                parts.append(self._text(row.text) @ self.projections["text"])
            if row.frames:
                parts.append(self._video(row.frames) @ self.projections["video"])
            if row.audio is not None:
                parts.append(self._audio(row.audio) @ self.projections["audio"])
            parts = [p / max(np.linalg.norm(p), 1e-12) for p in parts]
            out.append(np.mean(parts, axis=0) if parts else np.zeros(self.projections["text"].shape[1]))
        return np.array(out)


class HarnessEncoder(MediaEncoder):
    """A harness dense model: text, then the clip's frames as images in order."""

    def __init__(self, model, **kwargs):
        from harness.models.adapters import DenseModel

        if not isinstance(model, DenseModel):
            raise UserError(f"{model.spec}: not an embedding model (mveb eval needs dense embeddings)")
        self.modalities = ("text", "video") if "image" in model.modalities else ("text",)
        identity = model.identity()
        revision = str(identity.get("revision") or hashlib.sha256(repr(sorted(identity.items())).encode())
                       .hexdigest()[:12])
        super().__init__(model.spec, revision, **kwargs)
        self.model = model

    def embed_rows(self, rows):
        from harness.scoring.data import Item

        items = []
        for k, row in enumerate(rows):
            if row.audio is not None:
                raise UserError(f"{self.spec} has no audio pathway")
            text = (row.text or "") + IMAGE_PLACEHOLDER * len(row.frames)
            items.append(Item(id=str(k), text=text, images=row.frames))
        size = max(1, self.model.settings.batch_size)
        vectors = []
        for start in range(0, len(items), size):
            embedded, _ = self.model.embed(items[start:start + size])
            vectors.append(np.asarray(embedded, dtype=np.float32))
        return np.concatenate(vectors)


def make_encoder(spec: str, settings, fps: float | None = MTEB_FPS, max_frames: int | None = MTEB_MAX_FRAMES):
    """``seeded-media[:DIM]`` or any harness ``--model`` spec."""
    if spec == SEEDED_SPEC or spec.startswith(SEEDED_SPEC + ":"):
        dim = spec.partition(":")[2]
        return SeededMediaEncoder(int(dim) if dim else 32, fps=fps, max_frames=max_frames)
    from harness.models.adapters import load_model

    return HarnessEncoder(load_model(spec, settings), fps=fps, max_frames=max_frames)


def supports(encoder: MediaEncoder, task) -> bool:
    return set(task.metadata.modalities) <= set(encoder.modalities)


def evaluate(encoder: MediaEncoder, tasks: list, prediction_folder: Path | None = None) -> dict:
    """mteb's own evaluation of ``tasks``: {task name: {"main_score", "scores", "seconds"}} and
    the tasks skipped (modalities the model lacks)."""
    import mteb

    runnable = [t for t in tasks if supports(encoder, t)]
    skipped = {t.metadata.name: f"needs {sorted(set(t.metadata.modalities) - set(encoder.modalities))}"
               for t in tasks if not supports(encoder, t)}
    out: dict[str, dict] = {}
    if runnable:
        result = mteb.evaluate(encoder, runnable, cache=None, show_progress_bar=False,
                               prediction_folder=prediction_folder)
        for task_result in result.task_results:
            scores = task_result.scores["test"]
            out[task_result.task_name] = {
                "main_score": float(np.mean([s["main_score"] for s in scores])),
                "scores": {s["hf_subset"]: {k: v for k, v in s.items() if isinstance(v, (int, float))} for s in scores},
                "seconds": task_result.evaluation_time}
    return {"results": out, "skipped": skipped}
