"""The YoukuDC release as downloaded from ModelScope: `meta_files/<Category>.csv` whose column names
are not published (the user names them when the reader cannot), and `data_files/<Category>/` with
`train` and `val` zipped. Generated clips with made-up Chinese captions (marked SYNTHETIC)."""

from __future__ import annotations

import csv
import json
import zipfile

import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")

from builders._temporal_fixtures import write_temporal_sources  # noqa: E402
from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.demo_sources import zip_split  # noqa: E402
from mmlongembed.llm.fake_captions import start_caption_server  # noqa: E402
from mmlongembed.build.validate import validate_dir  # noqa: E402

RENAMED = {"video_path": "clip_file", "captions": "dense_caption"}  # column names the reader does not know


def write_release(root):
    """The fixture's release layout, then as the download has it: Agriculture's clips moved into
    `train.zip` (members `train/<name>`, plus a macOS entry), its rows pointing into `train/`, and
    the CSV columns renamed."""
    translations = write_temporal_sources(root, n_videos=12, language="zh", layout="youku")
    assert zip_split(root, "Agriculture") == 6
    with zipfile.ZipFile(root / "data_files" / "Agriculture" / "train.zip", "a") as archive:
        archive.writestr("__MACOSX/train/._x.mp4", b"not a video")
    for meta in (root / "meta_files").glob("*.csv"):
        with open(meta, encoding="utf-8", newline="") as handle:
            rows = [{RENAMED.get(k, k): v for k, v in row.items()} for row in csv.DictReader(handle)]
        with open(meta, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return translations


def build_args(root, out, tmp_path, *extra):
    return ["build", "youkudc", "--sources", str(root), "--output", str(out), "--lengths", "48", "96",
            "--max-queries-per-pool", "3", "--frame-store", str(tmp_path / "frames"), "--video-cache",
            str(tmp_path / "videos"), "--no-progress", *extra]


def test_unknown_columns_are_one_line_naming_them_and_the_accepted_ones(tmp_path, capsys):
    write_release(tmp_path / "youku")
    assert cli_main(build_args(tmp_path / "youku", tmp_path / "out", tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "Agriculture.csv has columns video_id, clip_file, duration, dense_caption" in err
    assert "video_path" in err and "--video-column NAME" in err and "--caption-column NAME" in err
    assert cli_main(build_args(tmp_path / "youku", tmp_path / "out", tmp_path, "--video-column", "clip")) == 2
    assert "no column 'clip' (--video-column); the file has: video_id, clip_file" in capsys.readouterr().err


def test_named_columns_and_zipped_train_folder_build(tmp_path):
    translations = write_release(tmp_path / "youku")
    server = start_caption_server(translations)
    llm = ["--video-column", "clip_file", "--caption-column", "dense_caption", "--llm", "openai",
           "--llm-base-url", server.url, "--llm-model", "fake-model", "--llm-cache", str(tmp_path / "llm")]
    try:
        assert cli_main(build_args(tmp_path / "youku", tmp_path / "out", tmp_path, *llm)) == 0
        assert cli_main(build_args(tmp_path / "youku", tmp_path / "again", tmp_path, *llm)) == 0
    finally:
        server.stop()
    problems, _ = validate_dir(tmp_path / "out" / "youkudc")
    assert not problems
    manifest = json.loads((tmp_path / "out" / "youkudc" / "manifest.json").read_text())
    assert "video_file_missing" not in manifest["report"]["skipped"]
    notes = manifest["report"]["notes"]
    assert any('"captions": "dense_caption"' in n and '"path": "clip_file"' in n for n in notes)
    assert any("6 videos extracted from zipped train/val folders" in n for n in notes)
    read = [v["file"] for v in manifest["sources"]["videos"]]
    zipped = [f for f in read if f.startswith("data_files/Agriculture/train.zip:train/")]
    assert len(zipped) == 6 and not any(str(tmp_path) in f for f in read)  # named by archive member, not cache
    again = json.loads((tmp_path / "again" / "youkudc" / "manifest.json").read_text())
    assert not any("extracted" in n for n in again["report"]["notes"])  # already in --video-cache
