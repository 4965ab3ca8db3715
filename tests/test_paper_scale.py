"""bench/paper_scale.py's parts: the measured subprocess, the growth verdict, the video lengths and
the ActivityNet sources (the real val_1.json over generated clips)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import paper_scale  # noqa: E402


def test_measure_reports_a_failure_as_one_line_instead_of_stopping():
    result = paper_scale.measure("raise ValueError('no pools here')", timeout=120)
    assert result["error"].startswith("exit 1:") and "ValueError: no pools here" in result["error"]


def test_measure_counts_memory_and_cpu_of_the_step():
    result = paper_scale.measure("block = bytearray(300 * 2**20)\nblock[::4096] = b'x' * len(block[::4096])",
                                 timeout=120)
    assert "error" not in result
    assert result["peak_mb"] >= 300 and result["cpu_s"] > 0


def test_growth_flags_time_growing_faster_than_the_sources():
    reference = {"n": 10, "wall_s": 10.0, "peak_mb": 500}
    assert "(exponent 1.00, target <= 1, ok)" in paper_scale.growth("x", reference, {"n": 80, "wall_s": 80.0,
                                                                                 "peak_mb": 900})
    quadratic = paper_scale.growth("x", reference, {"n": 80, "wall_s": 640.0, "peak_mb": 4000})
    assert "FASTER THAN LINEAR" in quadratic and "OVER 3 GB" in quadratic


def test_video_lengths_keep_the_papers_frames_per_run():
    from mmlongembed.core.tokens import image_tokens

    per_frame = image_tokens(paper_scale.CLIP_SIZE[1], paper_scale.CLIP_SIZE[0])
    for paper, scaled in zip(paper_scale.PAPER_LENGTHS, paper_scale.video_lengths()):
        assert scaled // per_frame == paper // paper_scale.PAPER_FRAME_TOKENS


@pytest.mark.realdata
def test_activitynet_sources_are_the_real_annotations_over_clips_of_their_duration(tmp_path):
    av = pytest.importorskip("av")
    real = paper_scale.SCALE_DATA / "activitynet_captions" / "val_1.json"
    if not real.is_file():
        pytest.skip(f"needs {real}")
    paper_scale.write_activitynet(tmp_path, 2)
    annotations = json.loads(real.read_text(encoding="utf-8"))
    written = json.loads((tmp_path / "activitynet_captions" / "val_1.json").read_text(encoding="utf-8"))
    assert written == {video: annotations[video] for video in sorted(annotations)[:2]}
    for video, entry in written.items():
        with av.open(str(tmp_path / "videos" / f"{video}.mp4")) as container:
            stream = container.streams.video[0]
            assert abs(float(stream.frames / stream.average_rate) - entry["duration"]) <= 1
    assert (tmp_path / "SYNTHETIC").exists()


def test_a_builds_line_gives_its_storage_ratios():
    measured = {"n": 135, "generate_s": 1.0, "wall_s": 2.0, "cpu_s": 2.0, "peak_mb": 100, "queries": 3, "bytes": 2**20,
                "load": "1.0 s, 90 MB", "validate": "1.0 s, 90 MB",
                "storage": {"ratio_to_distinct_payload": 1.0562, "distinct_image_bytes": 10,
                            "image_ratio_to_distinct": 1.0568}, "audit": {"mmlongbench-hard-8k": []}}
    assert paper_scale.line("mmlongbench", measured).endswith(
        "| storage: bytes on disk 1.06x distinct images + text, images 1.06x their distinct bytes | "
        "audit: 1 pools, none fails")


def test_a_builds_line_names_each_rule_the_audit_fails_on():
    failing = {"rule": "max distance from its group's median chars", "p_at_1": 0.4, "chance": 0.25, "z": 3.1,
               "p_value": 0.012}
    summary = paper_scale.audit_summary({"activitynet-easy-48": [failing], "activitynet-hard-48": []})
    assert summary == ("audit: 2 pools, FAILING activitynet-easy-48: max distance from its group's median chars "
                       "P@1 0.40 vs 0.25 (p 0.012)")
