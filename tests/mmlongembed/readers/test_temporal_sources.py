"""What the Temporal Summarization builders make of real-world source folders (issue 24): videos
that are not there, videos of another length than their annotation, and annotation files of
placeholder captions (PDVC's `fake_test.json`). Generated clips with made-up captions (marked
SYNTHETIC)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")

from builders._temporal_fixtures import TEMPORAL_FIXTURE_LENGTHS, write_temporal_sources  # noqa: E402
from mmlongembed.core.builder import BuildReport  # noqa: E402
from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.output.layout import pool_rows, read_built_pool  # noqa: E402
from mmlongembed.readers.dense_captions import placeholder_token, read_activitynet_json  # noqa: E402


def build_args(sources: Path, out: Path, store: Path, *extra: str) -> list[str]:
    return ["build", "activitynet", "--sources", str(sources), "--output", str(out), "--lengths",
            *map(str, TEMPORAL_FIXTURE_LENGTHS), "--max-queries-per-pool", "3", "--frame-store", str(store),
            "--no-progress", *extra]


def built_pools(out: Path) -> list:
    return [read_built_pool(out, row["pool"]) for row in pool_rows(out)]


def annotations(root: Path) -> dict:
    return json.loads((root / "annotations" / "val_1.json").read_text(encoding="utf-8"))


def test_all_videos_missing_is_one_line_naming_the_folder_and_the_file_names(tmp_path, capsys):
    write_temporal_sources(tmp_path / "src", n_videos=4)
    shutil.rmtree(tmp_path / "src" / "videos")
    assert cli_main(build_args(tmp_path / "src", tmp_path / "out", tmp_path / "store")) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert f"none of the 4 videos the annotations name is under {tmp_path / 'src'}" in error
    assert "v_<id>.mp4" in error and "e.g. v_fixture000.mp4" in error
    assert "{'" not in error  # not a Python dict of skip counts


def test_a_video_far_from_its_annotated_length_is_skipped_and_named_in_the_summary(tmp_path, capsys):
    root = tmp_path / "src"
    write_temporal_sources(root, n_videos=16)
    data = annotations(root)
    far, near = "v_fixture001", "v_fixture002"
    # the annotation of a clip three times as long (its events spread over the whole of it): cut to
    # the clip, its events would describe frames they do not show
    data[far] = {**data[far], "duration": data[far]["duration"] * 3,
                 "timestamps": [[a * 3, b * 3] for a, b in data[far]["timestamps"]]}
    data[near]["duration"] = round(data[near]["duration"] * 1.05, 2)  # within the tolerance of a tenth
    (root / "annotations" / "val_1.json").write_text(json.dumps(data), encoding="utf-8")

    assert cli_main(build_args(root, tmp_path / "out", tmp_path / "store")) == 0
    summary = capsys.readouterr().err  # the build's summary
    line = next(row for row in summary.splitlines() if row.startswith("video_length_differs_from_annotation"))
    assert line.split()[1] == "1" and f"{far} (video " in line and "annotation" in line
    manifest = json.loads((tmp_path / "out" / "activitynet" / "manifest.json").read_text())
    assert manifest["report"]["skipped"]["video_length_differs_from_annotation"] == 1
    shown = {v for tables in built_pools(tmp_path / "out" / "activitynet") for v in tables.corpus["source_id"]}
    assert far not in shown
    # a stricter tolerance turns the 5% one away too; a looser one keeps the far one
    assert cli_main(build_args(root, tmp_path / "out2", tmp_path / "store", "--duration-tolerance", "0.02")) == 0
    skipped = json.loads((tmp_path / "out2" / "activitynet" / "manifest.json").read_text())["report"]["skipped"]
    assert skipped["video_length_differs_from_annotation"] == 2
    assert cli_main(build_args(root, tmp_path / "out3", tmp_path / "store", "--duration-tolerance", "5")) == 0
    skipped = json.loads((tmp_path / "out3" / "activitynet" / "manifest.json").read_text())["report"]["skipped"]
    assert "video_length_differs_from_annotation" not in skipped


def test_a_negative_duration_tolerance_is_one_line(tmp_path, capsys):
    write_temporal_sources(tmp_path / "src", n_videos=2)
    assert cli_main(build_args(tmp_path / "src", tmp_path / "out", tmp_path / "store",
                               "--duration-tolerance", "-0.1")) == 2
    assert "--duration-tolerance -0.1: expected a share of at least 0" in capsys.readouterr().err


def test_placeholder_caption_token_is_told_from_real_captions():
    assert placeholder_token(["a a", "a a", "A a."]) == "a"
    assert placeholder_token(["A man walks in.", "He sits down."]) is None
    assert placeholder_token(["Run."]) is None  # one word once is a (short) caption, not a placeholder
    assert placeholder_token([]) is None


def test_a_file_of_placeholder_captions_is_skipped_and_counted(tmp_path):
    """PDVC ships `fake_test.json` beside `val_1.json`: the real file's shape, every caption
    "a a". Sorted first, it once won every video over the real annotations."""
    root = tmp_path / "src"
    write_temporal_sources(root, n_videos=16)
    real = annotations(root)
    fake = {vid: {"duration": a["duration"], "timestamps": a["timestamps"], "sentences": ["a a"] * len(a["sentences"])}
            for vid, a in real.items()}
    (root / "annotations" / "fake_test.json").write_text(json.dumps(fake), encoding="utf-8")

    report = BuildReport(progress=False)
    assert read_activitynet_json(root / "annotations" / "fake_test.json", report) == []
    assert report.skipped == {"placeholder_captions": 16}
    assert report.examples["placeholder_captions"][0] == "fake_test.json:v_fixture000 (every caption is 'a' repeated)"

    assert cli_main(build_args(root, tmp_path / "out", tmp_path / "store", "--llm", "none")) == 0
    manifest = json.loads((tmp_path / "out" / "activitynet" / "manifest.json").read_text())
    skipped = manifest["report"]["skipped"]
    assert skipped["placeholder_captions"] == 16 and "duplicate_video_annotation" not in skipped
    queries = [q for tables in built_pools(tmp_path / "out" / "activitynet") for q in zip(
        tables.queries["text"], tables.queries["raw_captions"])]
    assert queries and not any(" a a " in f" {text} {extra} " for text, extra in queries)
