"""Clip containers for MTEB video tasks, made from frames already decoded into the frame store.

Nothing is decoded or re-encoded here. A clip is a run of stored grid frames (baseline JPEGs,
``mmlongembed.media.video``); it is published as an MP4 whose video stream is Motion JPEG and
whose packets *are* those JPEG files, copied byte for byte, timed ``j / fps`` from zero. Any
FFmpeg-based reader (``datasets.Video`` through torchcodec, PyAV, ffmpeg) opens it; demuxing
it gives back the stored JPEGs unchanged (``clip_frames``), which is how the toolkit's own
encoders read clips without a video decoder. The muxer runs with ``+bitexact``, so the same
frames give the same bytes.

Audio is the frame store's 16 kHz mono s16 track sliced to the clip (``audio_slice``) and
written as WAV (``wav_bytes``), the MVEB convention.

``mteb_frame_indices`` is mteb's default frame selection (``FramesCollator``: 2 fps, at most 64
frames), used by the encoders and by the Temporal Summarization export's warnings.
"""

from __future__ import annotations

import io
import wave
from fractions import Fraction
from typing import Sequence

import numpy as np

from mmlongembed.media.video import Frame, require_av

CLIP_FORMAT = "mp4 (Motion JPEG packets = the stored JPEG frames, +bitexact)"
MTEB_FPS = 2.0  # mteb's FramesCollator defaults for variable-length models (MVEB §3.2)
MTEB_MAX_FRAMES = 64
_TIME_BASE = Fraction(1, 1000)


def mux_clip(frames: Sequence[Frame], fps: float) -> bytes:
    """An MP4 whose Motion JPEG packets are ``frames``' JPEG bytes, frame j at j / fps seconds."""
    if not frames:
        raise ValueError("a clip needs at least one frame")
    sizes = {(f.height, f.width) for f in frames}
    if len(sizes) != 1:
        raise ValueError(f"a clip's frames must share one size, got {sorted(sizes)}")
    av = require_av()
    rate = Fraction(fps).limit_denominator(1000)
    step = 1 / rate / _TIME_BASE
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("mjpeg", rate=rate)
        stream.width, stream.height = frames[0].width, frames[0].height
        stream.pix_fmt = "yuvj420p"
        stream.time_base = _TIME_BASE
        for j, frame in enumerate(frames):
            packet = av.Packet(frame.image)
            packet.stream = stream
            packet.time_base = _TIME_BASE  # the muxer may pick its own stream time base (mp4: 1/16000)
            packet.pts = packet.dts = int(round(j * step))
            packet.duration = int(round((j + 1) * step)) - int(round(j * step))
            packet.is_keyframe = True
            container.mux(packet)
    return buffer.getvalue()


def clip_frames(data: bytes) -> tuple[list[bytes], float]:
    """The JPEG frames of a clip made by ``mux_clip`` (its packets, in order) and its duration
    in seconds. Raises ValueError for anything else (a clip must be Motion JPEG)."""
    av = require_av()
    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.video:
                raise ValueError("the clip has no video stream")
            stream = container.streams.video[0]
            if stream.codec_context.name != "mjpeg":
                raise ValueError(f"the clip is {stream.codec_context.name}, not Motion JPEG: decode it with a "
                                 "video decoder")
            packets = [bytes(p) for p in container.demux(stream) if p.size]
            duration = container.duration / 1_000_000 if container.duration else len(packets) / float(
                stream.average_rate or 1)
    except av.error.FFmpegError as error:
        raise ValueError(f"unreadable clip: {error}") from None
    return packets, duration


def mteb_frame_indices(n_source: int, duration: float, fps: float | None = MTEB_FPS,
                       max_frames: int | None = MTEB_MAX_FRAMES, num_frames: int | None = None,
                       min_frames: int = 1) -> list[int]:
    """The frames mteb's ``FramesCollator.resample_video`` selects from a clip of ``n_source``
    frames lasting ``duration`` seconds: fixed ``num_frames``, or ``max(min_frames,
    int(duration * fps))`` capped by ``max_frames`` and by ``n_source``; then mteb's own
    ``frame_indices`` (evenly spaced, rounded)."""
    from mteb.models.modality_collators import frame_indices

    if n_source <= 0:
        return []
    if num_frames is None and fps is None:
        return list(range(n_source))
    if num_frames is not None:
        target = num_frames
    else:
        target = max(min_frames, int(duration * fps))
        if max_frames is not None:
            target = min(target, max_frames)
        target = min(target, n_source)
    return frame_indices(n_source, target)


def wav_samples(data: bytes) -> tuple[np.ndarray, int]:
    """A WAV file's samples as float32 in [-1, 1], mono (channels averaged), and its rate."""
    with wave.open(io.BytesIO(data), "rb") as handle:
        rate, channels, width = handle.getframerate(), handle.getnchannels(), handle.getsampwidth()
        raw = handle.readframes(handle.getnframes())
    if width != 2:
        raise ValueError(f"expected 16-bit WAV, got {8 * width}-bit")
    samples = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return samples, rate
