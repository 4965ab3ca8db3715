"""Runs are kept (issue 36 §5): each `mmle score` run gets a folder of its own, an earlier run is
replaced only when asked and then whole, and `--max-queries` scores a seeded sample marked SUBSET
everywhere."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from harness.cli import main as score
from harness.report.leaderboard import leaderboard, load_runs
from harness.report.run_folder import new_run_folder, run_id, write_run
from tests.support.fixtures_harness import standard_benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return standard_benchmark(tmp_path_factory.mktemp("bench") / "fixture")


def quick(bench, *extra) -> list[str]:
    return ["--dataset", str(bench), "--pools", "govreport-*-256", "--quiet", "--bootstrap", "50", *extra]


def test_a_second_run_with_another_model_keeps_the_first(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert score(quick(bench, "--model", "bm25")) == 0
    assert score(quick(bench, "--model", "random")) == 0
    runs = sorted(Path("results/fixture").iterdir())
    assert len(runs) == 2 and [r.name.split("-", 2)[2] for r in runs] == ["bm25", "random"]
    first = json.loads((runs[0] / "results.json").read_text())
    assert {r["model"] for r in first["results"]} == {"bm25"}
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(", ")[0] for line in printed] == [f"wrote {run / 'results.json'}" for run in runs]
    # the folder of runs is what `mmle leaderboard` reads: both models, one table
    assert [run["models"][0]["spec"] for run in load_runs(["results/fixture"])] == ["bm25", "random"]


def test_a_run_id_names_its_start_and_its_models():
    started = dt.datetime(2026, 12, 3, 10, 15, 0, tzinfo=dt.timezone.utc)
    assert run_id(started, ["bm25", "st:/models/all-MiniLM-L6-v2"]) == "20261203-101500-bm25+all-MiniLM-L6-v2"


def test_two_runs_started_in_one_second_never_share_a_folder(tmp_path):
    """Both runs were proposed the same default name when they started; the one that finishes
    second finds it taken and takes the next, the first untouched. An --output run replaces."""
    started = dt.datetime(2026, 12, 3, 10, 15, 0, tzinfo=dt.timezone.utc)
    first, second = (new_run_folder("fixture", started, ["bm25"], root=tmp_path) for _ in range(2))
    assert first == second  # neither exists yet when both start

    def writing(text):
        return lambda folder: (folder / "results.json").write_text(text)

    assert write_run(first, writing("one"), replace=False)[1] == first
    _, where = write_run(second, writing("two"), replace=False)
    assert where == first.with_name(first.name + "-2") and (where / "results.json").read_text() == "two"
    assert (first / "results.json").read_text() == "one"
    _, where = write_run(first, writing("three"))  # --output DIR --overwrite: the run replaced whole
    assert where == first and (first / "results.json").read_text() == "three"
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name, first.name + "-2"]


def test_a_folder_of_runs_skips_a_run_still_being_written(bench, tmp_path):
    """`mmle leaderboard results/<dataset>` while a run is being written: its hidden temporary
    folder already holds a results.json, and is not read as a run."""
    assert score(quick(bench, "--model", "bm25", "--output", str(tmp_path / "runs" / "done"))) == 0
    writing = tmp_path / "runs" / ".next.tmp-1-2"
    writing.mkdir()
    (writing / "results.json").write_text((tmp_path / "runs" / "done" / "results.json").read_text())
    assert [Path(run["_path"]).parent.name for run in load_runs([tmp_path / "runs"])] == ["done"]


def test_a_folder_that_holds_a_run_is_refused_before_anything_is_scored(bench, tmp_path, capsys):
    folder = tmp_path / "mine"
    assert score(quick(bench, "--model", "bm25", "--output", str(folder))) == 0
    before = (folder / "results.json").read_bytes()
    capsys.readouterr()
    assert score(quick(bench, "--model", "random", "--output", str(folder))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a run; pass --overwrite" in err[0], err
    assert (folder / "results.json").read_bytes() == before
    # a folder holding something else is never replaced, --overwrite or not
    other = tmp_path / "notes"
    other.mkdir()
    (other / "paper.tex").write_text("draft")
    assert score(quick(bench, "--model", "bm25", "--output", str(other), "--overwrite")) == 2
    assert "not an `mmle score` run" in capsys.readouterr().err
    assert score(quick(bench, "--model", "bm25", "--output", str(other))) == 2
    assert "not an `mmle score` run" in capsys.readouterr().err
    assert (other / "paper.tex").read_text() == "draft"


def test_overwrite_without_output_is_one_line_not_ignored(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert score(quick(bench, "--model", "bm25", "--overwrite")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "without --output each run gets a new folder" in err[0], err
    assert not Path("results").exists()  # refused before anything was scored or written


def test_an_overwrite_leaves_no_file_of_the_earlier_run(bench, tmp_path):
    folder = tmp_path / "grid"
    assert score(["--dataset", str(bench), "--pools", "needle-*", "--model", "bm25", "--quiet", "--bootstrap", "50",
                  "--output", str(folder)]) == 0
    heatmaps = sorted(p.name for p in folder.glob("heatmap_*.png"))
    assert heatmaps
    assert score(quick(bench, "--model", "bm25", "--output", str(folder), "--overwrite")) == 0
    assert not list(folder.glob("heatmap_*.png"))  # the earlier run's plots went with it
    assert {r["pool"] for r in json.loads((folder / "results.json").read_text())["results"]} == {
        "govreport-easy-256", "govreport-hard-256"}
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_max_queries_scores_the_same_seeded_sample_and_marks_it_everywhere(bench, tmp_path, capsys):
    outputs = []
    for model in ("bm25", "random"):
        outputs.append(tmp_path / model)
        assert score(["--dataset", str(bench), "--pools", "govreport-*-256", "--bootstrap", "50", "--no-plots",
                      "--model", model, "--max-queries", "3", "--output", str(outputs[-1])]) == 0
    console = capsys.readouterr().out
    assert "SUBSET: 3 of 4 queries" in console
    # the console prints a pool's P@1 as table.md does: x100, below 10 queries n= and no interval
    lines = [line for line in console.splitlines() if line.startswith("govreport-easy-256 ")]
    assert lines and all(" P@1 " in line and " n=3 " in line and "[" not in line for line in lines), lines
    reports = [json.loads((o / "results.json").read_text()) for o in outputs]
    for report in reports:
        assert report["settings"]["max_queries"] == 3
        assert all(r["n_queries"] == 3 and r["query_sample"] == {"queries": 3, "of": 4} for r in report["results"])
    predictions = [__import__("pandas").read_parquet(o / "predictions.parquet") for o in outputs]
    assert sorted(predictions[0]["_id"]) == sorted(predictions[1]["_id"])  # the same queries for both models
    assert "**SUBSET:** at most 3 queries per pool" in (outputs[0] / "table.md").read_text()
    board = leaderboard(load_runs(outputs))
    assert "SUBSET: at most 3 queries per pool" in board and "ours, SUBSET" in board
    # a full run is not marked
    full = tmp_path / "full"
    assert score(quick(bench, "--model", "bm25", "--output", str(full))) == 0
    assert "SUBSET" not in (full / "table.md").read_text()
    assert "SUBSET" not in leaderboard(load_runs([full]))


def test_new_run_folder_counts_up_within_a_second(tmp_path):
    started = dt.datetime(2026, 12, 3, 10, 15, 0, tzinfo=dt.timezone.utc)
    first = new_run_folder("fixture", started, ["bm25"], root=tmp_path)
    first.mkdir(parents=True)
    assert new_run_folder("fixture", started, ["bm25"], root=tmp_path).name == first.name + "-2"
