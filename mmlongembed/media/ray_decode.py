"""Decoding many videos as a Ray Data job: frames extracted in parallel, written once, resumable.

The same contract as the LLM steps' Ray path (``mmlongembed.llm.ray_backend``): optional extra
``[ray]``, joins an existing cluster when ``RAY_ADDRESS`` is set and otherwise starts a local Ray
instance. Each row of the job is one video (id, path, frame-store key); a worker decodes it with
the same ``decode_video`` as the local path and writes its frames into the frame store
(``mmlongembed.media.frames``), which must be on a filesystem every worker sees (an NFS or
object-store mount on a cluster; any local directory on one machine). Only videos whose key is
not in the store are sent, so a job that stops half way resumes where it stopped, and frames are
byte-identical to the local path's (same decoder, same settings, same key).

    RAY_ADDRESS=auto mmle build activitynet --sources /data/anet --decode-backend ray \\
        --frame-store /mnt/shared/mmle-frames --decode-concurrency 64
"""

from __future__ import annotations

import os
from dataclasses import asdict

from mmlongembed.core.errors import UserError
from mmlongembed.media.frames import DECODE_BACKENDS, DecodeJob, FrameStore
from mmlongembed.media.video import FrameSettings


class _DecodeRow:
    """The Ray Data map function: one video in, its status out (frames go to the store)."""

    def __init__(self, root: str, settings: dict):
        self.store = FrameStore(root, FrameSettings(**settings))

    def __call__(self, row: dict) -> dict:
        job = DecodeJob(row["video_id"], row["path"], row["key"])
        status, source_frames, grid_frames, seconds = self.store.decode_into(job)
        return {"video_id": job.video_id, "status": status, "source_frames": source_frames,
                "grid_frames": grid_frames, "seconds": seconds}


@DECODE_BACKENDS.register("ray")
def decode_with_ray(store: FrameStore, jobs: list[DecodeJob], progress=None, concurrency: int = 0) -> list[tuple]:
    """Decode ``jobs`` into ``store`` on Ray workers (``progress``: unused, Ray reports its own);
    returns (video id, status, source frames, grid frames, seconds) per job, in the order of ``jobs``."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise UserError(f"--decode-backend ray needs the optional extra: pip install 'mmlongembed[ray]' "
                        f"({error})") from None
    if not jobs:
        return []
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False, include_dashboard=False,
                 ignore_reinit_error=True)
    workers = concurrency or max(1, min(len(jobs), int(ray.available_resources().get("CPU", 1))))
    rows = [{"video_id": j.video_id, "path": j.path, "key": j.key} for j in jobs]
    dataset = ray.data.from_items(rows, override_num_blocks=min(len(rows), max(1, workers * 4)))
    results = dataset.map(_DecodeRow, fn_constructor_kwargs={"root": str(store.root.resolve()),
                                                             "settings": asdict(store.settings)},
                          concurrency=workers, num_cpus=1).take_all()
    by_id = {r["video_id"]: r for r in results}
    out = []
    for job in jobs:
        r = by_id.get(job.video_id)
        if r is None:
            out.append((job.video_id, "ray_no_output", 0, 0, 0.0))
        else:
            out.append((job.video_id, r["status"], int(r["source_frames"]), int(r["grid_frames"]),
                        float(r["seconds"])))
    return out
