"""Video decoding for the temporal tasks: 1-FPS frames with their real timestamps, fitted to a
pixel budget and encoded with fixed parameters; optional 16 kHz mono audio.

The sampling rule (one rule, recorded in every manifest as ``FRAME_RULE``):

    grid times t_j = j / fps for j = 0, 1, 2, ... while t_j < duration;
    grid frame j = the decoded frame whose presentation time (pts, in seconds) is nearest to
    t_j, ties going to the earlier frame.

Every grid frame keeps the pts of the decoded frame it is (``Frame.pts``), so nothing about the
sampling has to be trusted: ``|pts - t_j|`` is at most half a source frame interval inside the
video. FFmpeg's ``fps`` filter and mteb's frame collator use other rules (FFmpeg keeps the last
frame before t_j + 0.5/fps; mteb strides frame indices), which is why the rule is fixed here and
cross-checked in the tests against the decoded pts that the static ``ffmpeg`` of
``imageio-ffmpeg`` reports for the same files.

A frame is converted to RGB, scaled down (never up, aspect kept) to at most ``max_pixels``
pixels (``mmlongembed.core.tokens.fit_image_size``; 1280x720 -> 640x360 at the default budget) and
encoded as baseline JPEG at a fixed quality with no metadata, so the same file, settings and
library versions give byte-identical frames. Its length is ``ceil(H/32) * ceil(W/32)`` tokens.

Decoding uses PyAV (``av``, the optional extra ``video``; its wheel bundles FFmpeg). The
decoder's identity (PyAV and libav* versions) goes into the manifest and into the frame store's
keys (``mmlongembed.media.frames``).
"""

from __future__ import annotations

import io
import wave
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from mmlongembed.core.errors import UserError

FRAME_RULE = "nearest-pts-to-grid-v1: t_j = j/fps while t_j < duration; nearest decoded frame, ties to the earlier"
DEFAULT_FRAME_PIXELS = 640 * 360
AUDIO_RATE = 16_000  # the MVEB convention: 16 kHz mono


class VideoDecodeError(Exception):
    """A clip that cannot be decoded; ``reason`` is a short counted skip reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class FrameSettings:
    """Everything that decides the stored frames (part of every frame-store key)."""

    fps: float = 1.0
    max_pixels: int = DEFAULT_FRAME_PIXELS
    quality: int = 90
    audio: bool = False
    audio_rate: int = AUDIO_RATE

    def __post_init__(self):
        if self.fps <= 0 or self.max_pixels <= 0 or not 1 <= self.quality <= 100 or self.audio_rate <= 0:
            raise UserError(f"bad frame settings: {self}")
        # one key for one rule: fps=4 and fps=4.0 decode the same frames
        object.__setattr__(self, "fps", float(self.fps))

    def identity(self) -> dict:
        return {**asdict(self), "rule": FRAME_RULE, "format": "JPEG baseline, no EXIF, 4:2:0 (Pillow default)",
                "resize": "Pillow BICUBIC, aspect kept, never upscaled"}


@dataclass(frozen=True)
class Frame:
    grid_index: int
    pts: float  # presentation time of the decoded frame used, seconds
    image: bytes
    height: int
    width: int


@dataclass
class DecodedVideo:
    video_id: str
    duration: float
    fps: float  # the grid rate
    source_fps: float | None
    codec: str
    source_height: int
    source_width: int
    frames: list[Frame] = field(default_factory=list)
    source_frames: int = 0  # decoded frames read from the stream
    audio_pcm: bytes | None = None  # s16le mono at audio_rate; None: no audio track (or not asked for)
    audio_rate: int = AUDIO_RATE
    has_audio_track: bool = False

    def grid_time(self, grid_index: int) -> float:
        return grid_index / self.fps

    @property
    def frame_interval(self) -> float | None:
        return 1.0 / self.source_fps if self.source_fps else None

    def meta(self) -> dict:
        """Everything but the frame images and the audio samples (the frame store's metadata)."""
        return {"video_id": self.video_id, "duration": self.duration, "fps": self.fps, "source_fps": self.source_fps,
                "codec": self.codec, "source_height": self.source_height, "source_width": self.source_width,
                "source_frames": self.source_frames, "audio_rate": self.audio_rate,
                "has_audio_track": self.has_audio_track}


def require_av():
    try:
        import av
    except ImportError:
        raise UserError("video decoding needs PyAV: pip install 'mmlongembed[video]'") from None
    return av


def decoder_identity() -> dict:
    """What decodes: PyAV and the FFmpeg libraries it bundles (manifest and frame-store keys)."""
    av = require_av()
    libs = {name: ".".join(map(str, version)) for name, version in sorted(av.library_versions.items())}
    return {"name": "pyav", "av": av.__version__, "ffmpeg_libraries": libs}


# -- the sampling rule (pure) ----------------------------------------------------------------------

def grid_times(duration: float, fps: float) -> list[float]:
    """t_j = j / fps for j = 0, 1, ... while t_j < duration."""
    if duration <= 0:
        return []
    count = int(duration * fps)
    if count / fps < duration:  # duration not on the grid: one more time before it
        count += 1
    while count and (count - 1) / fps >= duration:  # float guard
        count -= 1
    return [j / fps for j in range(count)]


def nearest_on_grid(pts: Sequence[float], grid: Sequence[float]) -> list[int]:
    """For each grid time, the index (into ascending ``pts``) of the nearest frame, ties to the
    earlier frame. The decoder below applies the same rule while streaming."""
    out, i = [], 0
    if not pts:
        return out
    for t in grid:
        while i + 1 < len(pts) and pts[i + 1] < t:
            i += 1
        best = i
        if i + 1 < len(pts) and abs(pts[i + 1] - t) < abs(pts[i] - t):
            best = i + 1
        out.append(best)
    return out


# -- decoding --------------------------------------------------------------------------------------

def _encode(frame, settings: FrameSettings) -> tuple[bytes, int, int]:
    from mmlongembed.core.documents import encode_image

    return encode_image(frame.to_image(), settings.max_pixels, "JPEG", settings.quality)


def _duration(container, stream, last_pts: float | None, interval: float | None) -> float:
    if container.duration:
        return container.duration / 1_000_000  # AV_TIME_BASE
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if last_pts is not None:
        return last_pts + (interval or 0.0)
    return 0.0


def decode_video(path: str | Path, settings: FrameSettings, video_id: str | None = None) -> DecodedVideo:
    """Decode one file once: its grid frames (encoded) and, if asked, its audio as 16 kHz mono.
    Raises ``VideoDecodeError`` for anything that is not a decodable video."""
    av = require_av()
    path = Path(path)
    video_id = video_id or path.stem
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError, ValueError) as error:
        raise VideoDecodeError("unreadable_container", f"{path.name}: {error}") from None
    with container:
        if not container.streams.video:
            raise VideoDecodeError("no_video_stream", path.name)
        vstream = container.streams.video[0]
        vstream.thread_type = "AUTO"
        astream = container.streams.audio[0] if container.streams.audio else None
        rate = vstream.average_rate or vstream.guessed_rate
        source_fps = float(rate) if rate else None
        interval = 1.0 / source_fps if source_fps else None
        duration = _duration(container, vstream, None, interval)
        grid = grid_times(duration, settings.fps) if duration > 0 else None
        decoded = DecodedVideo(video_id=video_id, duration=duration, fps=settings.fps, source_fps=source_fps,
                               codec=vstream.codec_context.name, source_height=vstream.height,
                               source_width=vstream.width, has_audio_track=astream is not None,
                               audio_rate=settings.audio_rate)
        resampler = (av.AudioResampler(format="s16", layout="mono", rate=settings.audio_rate)
                     if settings.audio and astream is not None else None)
        streams = [vstream] + ([astream] if resampler is not None else [])
        try:
            previous, j, pcm = _demux(container, streams, resampler, grid, decoded, settings)
        except (av.error.FFmpegError, ValueError, MemoryError) as error:
            raise VideoDecodeError("decode_error", f"{path.name}: {error}") from None
        if previous is None:
            raise VideoDecodeError("no_decodable_frame", path.name)
        if grid is None:  # no duration in the headers: the decoded frames tell it
            decoded.duration = duration = _duration(container, vstream, previous[0], interval)
            grid = grid_times(duration, settings.fps)
        while j < len(grid):  # grid times after the last frame's pts: the last frame is nearest
            image, h, w = _encode(previous[1], settings)
            decoded.frames.append(Frame(j, previous[0], image, h, w))
            j += 1
    if resampler is not None:
        decoded.audio_pcm = bytes(pcm)
    return decoded


def _demux(container, streams, resampler, grid: list[float] | None, decoded: DecodedVideo,
           settings: FrameSettings):
    """One pass over the container: each grid time takes the decoded frame nearest it (appended to
    ``decoded.frames``), the audio goes through ``resampler``. Returns the last frame as
    (pts, frame), or None where no frame decoded; the next grid index; the audio's s16 bytes."""
    pcm = bytearray()
    previous = None  # (pts, frame): the last decoded frame before the current grid time
    j = 0
    for packet in container.demux(*streams):
        for frame in packet.decode():
            if packet.stream.type == "audio":
                for out in resampler.resample(frame):
                    pcm += bytes(out.planes[0])[: out.samples * 2]
                continue
            if frame.pts is None or frame.time is None:
                continue
            t_frame = float(frame.time)
            if previous is not None and t_frame <= previous[0]:
                continue  # a repeated or out-of-order timestamp: the first one wins
            decoded.source_frames += 1
            while grid is not None and j < len(grid) and t_frame >= grid[j]:
                chosen = previous if previous is not None and \
                    abs(previous[0] - grid[j]) <= abs(t_frame - grid[j]) else (t_frame, frame)
                image, h, w = _encode(chosen[1], settings)
                decoded.frames.append(Frame(j, chosen[0], image, h, w))
                j += 1
            previous = (t_frame, frame)
    if resampler is not None:
        for out in resampler.resample(None):
            pcm += bytes(out.planes[0])[: out.samples * 2]
    return previous, j, pcm


# -- audio -----------------------------------------------------------------------------------------

def audio_slice(pcm: bytes, rate: int, start: float, end: float) -> bytes:
    """The s16 mono samples in [start, end) seconds."""
    a, b = max(0, int(round(start * rate))), max(0, int(round(end * rate)))
    return pcm[2 * a: 2 * b]


def wav_bytes(pcm: bytes, rate: int = AUDIO_RATE) -> bytes:
    """s16 mono samples as a WAV file (no timestamps or other metadata: byte-identical reruns)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(pcm)
    return buffer.getvalue()
