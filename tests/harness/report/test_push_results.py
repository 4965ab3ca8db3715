"""`mmle push-results` (issue 36 §7): a run published as a Hub dataset at a tag, through the loopback
Hub, read back byte for byte; bad input in one line; the token in no output."""

import json
from pathlib import Path

import pytest

from harness.cli import main as score_main
from harness.report.push_results import push_results
from mmlongembed.core.errors import UserError
from harness.fixtures import make_pool, write_benchmark
from mmlongembed.cli import main as mmle_main
from tests.support.publish_support import TOKEN

REPO = "alice/mmle-results"


def score_run(tmp_path, monkeypatch, releases=("release",), options=()):
    """A bm25 run over tiny releases (one folder each, named as given) in tmp_path/run."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    benches = [write_benchmark(tmp_path / name, [make_pool(f"{name}-{d}-8192", difficulty=d, length=8192, words=60,
                                                           n_queries=10) for d in ("easy", "hard")])
               for name in releases]
    run = tmp_path / "run"
    assert score_main(["--dataset", *map(str, benches), "--output", str(run), "--cache-dir", str(tmp_path / "c"),
                       "--quiet", "--bootstrap", "50", "--model", "bm25", *options]) == 0
    monkeypatch.delenv("HF_HUB_OFFLINE")
    return run


@pytest.fixture()
def scored(tmp_path, monkeypatch):
    return score_run(tmp_path, monkeypatch)


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


def push(hub, run, version, **options):
    return push_results(run, REPO, version, endpoint=hub.endpoint, token=TOKEN, log=lambda message: None, wait_s=0.01,
                        **options)


def test_a_private_run_is_not_pushed_into_a_public_repo(hub, scored):
    push(hub, scored, "1.0.0")
    with pytest.raises(UserError, match="is public; refusing"):
        push(hub, scored, "1.1.0", private=True)
    assert list(hub.repo(REPO).tags) == ["v1.0.0"]


def test_a_commit_or_tag_whose_answer_was_lost_is_made_once_and_the_push_succeeds(hub, scored):
    hub.drop_connection(r"/commit/main", times=1, after=True)  # the commit lands; its answer never comes
    hub.drop_connection(r"/tag/", times=1, after=True)  # so does the tag
    tag, commit, _ = push(hub, scored, "1.0.0", attempts=3)
    repo = hub.repo(REPO)
    assert len(repo.commits) == 2  # the repo's initial commit and this run's, not a second copy
    assert repo.tags == {tag: commit} and repo.branches["main"] == commit


def test_the_card_marks_a_subset_run_and_names_each_release_scored(hub, tmp_path, monkeypatch):
    from huggingface_hub import hf_hub_download

    run = score_run(tmp_path, monkeypatch, ("govreport", "hotpotqa"), ("--max-queries", "3"))
    push(hub, run, "1.0.0")
    card = Path(hf_hub_download(REPO, "README.md", repo_type="dataset", revision="v1.0.0", endpoint=hub.endpoint,
                                token=TOKEN, local_dir=tmp_path / "got")).read_text()
    assert "**SUBSET:** at most 3 queries per pool" in card
    for dataset in json.loads((run / "results.json").read_text())["datasets"]:
        assert f"`{dataset['ref']}`" in card and f"sha256 `{dataset['data_files_sha256']}`" in card
