"""`mmle push-results` (issue 36 §7): a run published as a Hub dataset at a tag, through the loopback
Hub, read back byte for byte; bad input in one line; the token in no output."""

import pytest

from harness.cli import main as score_main
from harness.fixtures import make_pool, write_benchmark
from mmlongembed.cli import main as mmle_main
from tests.support.publish_support import TOKEN

REPO = "alice/mmle-results"


@pytest.fixture()
def scored(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bench = write_benchmark(tmp_path / "release", [make_pool(f"govreport-{d}-8192", difficulty=d, length=8192, words=60,
                                                             n_queries=10) for d in ("easy", "hard")])
    run = tmp_path / "run"
    assert score_main(["--dataset", str(bench), "--output", str(run), "--cache-dir", str(tmp_path / "c"), "--quiet",
                       "--bootstrap", "50", "--model", "bm25"]) == 0
    monkeypatch.delenv("HF_HUB_OFFLINE")
    return run


def test_a_run_is_published_at_its_tag_and_reads_back_byte_for_byte(hub, scored, tmp_path, monkeypatch, capsys):
    from huggingface_hub import snapshot_download

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert mmle_main(["push-results", str(scored), "--repo", REPO, "--version", "1.0.0", "--endpoint",
                      hub.endpoint, "--retries", "1"]) == 0
    out, err = capsys.readouterr()
    assert "tag: v1.0.0" in out and TOKEN not in out + err
    got = tmp_path / "got"
    snapshot_download(REPO, repo_type="dataset", revision="v1.0.0", endpoint=hub.endpoint, token=TOKEN, local_dir=got)
    capsys.readouterr()  # the download's progress bars
    mine = sorted(p.relative_to(scored).as_posix() for p in scored.rglob("*") if p.is_file())
    assert {"results.json", "predictions.parquet", "table.md"} <= set(mine)
    assert all((got / name).read_bytes() == (scored / name).read_bytes() for name in mine)
    card = (got / "README.md").read_text()
    assert "`bm25`" in card and "data files sha256" in card and (scored / "table.md").read_text().strip() in card
    # a version is never moved
    assert mmle_main(["push-results", str(scored), "--repo", REPO, "--version", "1.0.0", "--endpoint",
                      hub.endpoint]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already has release v1.0.0" in err[0] and TOKEN not in err[0]


def test_a_folder_that_is_not_a_run_is_one_line(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (tmp_path / "notes").mkdir()
    assert mmle_main(["push-results", str(tmp_path / "notes"), "--repo", REPO, "--version", "1.0.0",
                      "--endpoint", hub.endpoint]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such results file" in err[0] and "Traceback" not in err[0]
    assert ("dataset", REPO) not in hub.repos  # refused before the Hub was asked anything
