"""`mmle demo-sources DIR`: generated clips with made-up captions in the ActivityNet Captions and
YoukuDC release layouts, one subfolder per source, that both video builders build offline and
whose cards and manifests say they are synthetic, also when their folders are copied elsewhere."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")

from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.demo_sources import DEMO_NOTE, demo_commands  # noqa: E402
from mmlongembed.llm.fake_captions import start_caption_server  # noqa: E402
from mmlongembed.build.validate import validate_dir  # noqa: E402

SMALL = ["--lengths", "48", "96", "--max-queries-per-pool", "3", "--no-progress"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo") / "sources"
    assert cli_main(["demo-sources", str(root), "--videos", "12"]) == 0
    return root


def _build(name: str, sources, out, store, *extra: str) -> dict:
    assert cli_main(["build", name, "--sources", str(sources), "--output", str(out), "--frame-store", str(store),
                     *SMALL, *extra]) == 0
    problems, _ = validate_dir(out / name)
    assert not problems
    return {"card": (out / name / "README.md").read_text(encoding="utf-8"),
            "manifest": json.loads((out / name / "manifest.json").read_text(encoding="utf-8"))}


def test_writes_one_subfolder_per_source_in_the_real_formats(demo):
    annotations = json.loads((demo / "activitynet_captions" / "val_1.json").read_text(encoding="utf-8"))
    assert len(annotations) == 12 and all(k.startswith("v_") for k in annotations)
    first = next(iter(annotations.values()))
    assert set(first) == {"duration", "timestamps", "sentences"} and len(first["timestamps"]) == len(first["sentences"])
    assert len(list((demo / "videos").glob("*.mp4"))) == 12
    metas = sorted(p.name for p in (demo / "youkudc" / "meta_files").glob("*.csv"))
    assert metas == ["Agriculture.csv", "Children.csv"]
    assert len(list((demo / "youkudc" / "data_files").glob("Children/test/*.mp4"))) == 6
    with zipfile.ZipFile(demo / "youkudc" / "data_files" / "Agriculture" / "train.zip") as archive:
        assert len([m for m in archive.namelist() if m.startswith("train/") and m.endswith(".mp4")]) == 6
    for folder in (demo, demo / "activitynet_captions", demo / "videos", demo / "youkudc"):
        assert (folder / "SYNTHETIC").read_text(encoding="utf-8").strip() == DEMO_NOTE
    readme = (demo / "README.md").read_text(encoding="utf-8")
    assert all(command in readme for command in demo_commands(demo))


def test_activitynet_builds_from_the_demo_and_says_it_is_synthetic(demo, tmp_path):
    built = _build("activitynet", demo, tmp_path / "out", tmp_path / "store")
    assert f"SYNTHETIC — NOT FOR PUBLICATION.** {DEMO_NOTE}" in built["card"]
    assert built["manifest"]["sources"]["synthetic"] is True
    read = [v["file"] for v in built["manifest"]["sources"]["videos"]]
    assert read and all(f.startswith("videos/") for f in read)  # never the YoukuDC demo's clips under DIR/youkudc


def test_the_mark_travels_with_the_subfolders(demo, tmp_path):
    """Copied into a larger sources tree without the root marker, the build is still marked."""
    tree = tmp_path / "tree"
    for folder in ("activitynet_captions", "videos"):
        shutil.copytree(demo / folder, tree / folder)
    assert not (tree / "SYNTHETIC").exists()
    built = _build("activitynet", tree, tmp_path / "out", tmp_path / "store")
    assert DEMO_NOTE in built["card"] and built["manifest"]["sources"]["synthetic"] is True


def test_youkudc_builds_from_the_demo_through_the_loopback_translator(demo, tmp_path):
    translations = json.loads((demo / "youkudc" / "translations.json").read_text(encoding="utf-8"))
    server = start_caption_server(translations)
    try:
        built = _build("youkudc", demo / "youkudc", tmp_path / "out", tmp_path / "store", "--video-cache",
                       str(tmp_path / "videos"), "--llm", "openai",
                       "--llm-base-url", server.url, "--llm-model", "fake-model", "--llm-cache", str(tmp_path / "c"))
    finally:
        server.stop()
    assert DEMO_NOTE in built["card"] and built["manifest"]["sources"]["synthetic"] is True
    assert "video_file_missing" not in built["manifest"]["report"]["skipped"]  # train.zip's clips are read
    assert any("videos extracted from zipped train/val folders" in n for n in built["manifest"]["report"]["notes"])


def test_refuses_to_write_over_existing_source_folders(demo, capsys):
    assert cli_main(["demo-sources", str(demo)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "already has activitynet_captions, videos, youkudc/" in err


def test_activitynet_reads_videos_as_the_official_crawler_names_them(demo, tmp_path):
    """The crawler saves `$VIDEO_PATH/v_<youtube id>.mp4`; an unfinished download (`.mp4.part`)
    is not a video: that clip is a counted skip."""
    tree = tmp_path / "anet"
    shutil.copytree(demo / "activitynet_captions", tree / "captions")
    ids = sorted(json.loads((demo / "activitynet_captions" / "val_1.json").read_text(encoding="utf-8")))
    (tree / "crawled").mkdir()
    for clip in (demo / "videos").glob("*.mp4"):
        video_id = clip.stem if clip.stem.startswith("v_") else f"v_{clip.stem}"
        shutil.copy(clip, tree / "crawled" / (f"{video_id}.mp4.part" if video_id == ids[0] else f"{video_id}.mp4"))
    built = _build("activitynet", tree, tmp_path / "out", tmp_path / "store")
    assert built["manifest"]["report"]["skipped"]["video_file_missing"] == 1
    read = [v["file"] for v in built["manifest"]["sources"]["videos"]]
    assert read and all(f.startswith("crawled/v_") and f.endswith(".mp4") for f in read)
