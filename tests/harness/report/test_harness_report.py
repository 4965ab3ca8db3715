"""One report over several builds or a build of several datasets, and `mmle leaderboard` merging runs
(issue 18 §3), on fixture benchmarks scored with BM25 and MiniLM."""

import json

import pytest

from harness.fixtures import make_pool, write_benchmark
from harness.cli import main as score_main
from harness.report.leaderboard import main as leaderboard_main
from mmlongembed.cli import main as mmle_main


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _govreport():
    # short texts labelled with the paper's lengths (a pool's length is its band's target): the
    # paper's Table 3 columns, without 8K-token documents
    return [make_pool(f"govreport-{d}-{n}", difficulty=d, length=n, words=n // 64, n_queries=q)
            for d in ("easy", "hard") for n, q in ((8192, 5), (16384, 2))]


def _hotpotqa():
    return [make_pool(f"hotpotqa-{d}-8192", dataset="hotpotqa", task="multi_source_reasoning", difficulty=d,
                      length=8192, words=120, n_queries=3) for d in ("easy", "hard")]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("builds")
    return {"govreport": write_benchmark(root / "govreport", _govreport()),
            "hotpotqa": write_benchmark(root / "hotpotqa", _hotpotqa()),
            "mmlongembed": write_benchmark(root / "mmlongembed", _govreport() + _hotpotqa())}


def score(tmp_path, datasets, *extra, name="out"):
    output = tmp_path / name
    code = score_main(["--dataset", *map(str, datasets), "--output", str(output), "--cache-dir",
                       str(tmp_path / "cache"), "--quiet", "--bootstrap", "100", "--no-plots", *extra])
    path = output / "results.json"
    return code, (json.loads(path.read_text()) if path.exists() else None), output


def _cells(result):
    return {(r["model"], r["column"]): (r["p_at_1"], r["queries"]) for r in result["table3"]}


def test_several_builds_score_into_one_table3_equal_to_one_build_of_them_all(tmp_path, builds):
    code, apart, output = score(tmp_path, [builds["govreport"], builds["hotpotqa"]], "--model", "bm25")
    assert code == 0
    assert [d["ref"] for d in apart["datasets"]] == [str(builds["govreport"]), str(builds["hotpotqa"])]
    assert {r["benchmark"] for r in apart["results"]} == {str(builds["govreport"]), str(builds["hotpotqa"])}
    assert output.name == "out"
    columns = [r["column"] for r in apart["table3"]]
    assert columns == ["HotpotQA Easy", "HotpotQA Hard", "GovReport Easy", "GovReport Hard", "Avg"]
    cells = _cells(apart)
    assert cells["bm25", "GovReport Hard"][1] == 7 and cells["bm25", "HotpotQA Easy"][1] == 3
    table = (output / "table.md").read_text()
    assert table.count("| Model | HotpotQA Easy | HotpotQA Hard | GovReport Easy | GovReport Hard | "
                       "Avg (4/14 columns) |") == 1
    # the same pools in one build (one pools table spanning both datasets): the same cells
    code, together, _ = score(tmp_path, [builds["mmlongembed"]], "--model", "bm25", name="together")
    assert code == 0 and _cells(together) == cells
    # comma-separated refs are the same as separate ones
    code, commas, _ = score(tmp_path, [f"{builds['govreport']},{builds['hotpotqa']}"], "--model", "bm25",
                            name="commas")
    assert code == 0 and _cells(commas) == cells


def test_a_pool_in_two_builds_is_refused_in_one_line(tmp_path, builds, capsys):
    code, result, _ = score(tmp_path, [builds["mmlongembed"], builds["govreport"]], "--model", "bm25")
    assert code == 2 and result is None
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pool 'govreport-easy-8192' is in both" in err
    code, _, _ = score(tmp_path, [builds["govreport"], tmp_path / "nothing-here"], "--model", "bm25", name="missing")
    assert code == 2 and "nothing-here" in capsys.readouterr().err


def test_leaderboard_merges_runs_sorted_by_avg_beside_the_published_rows(tmp_path, builds, capsys):
    _, _, both = score(tmp_path, [builds["mmlongembed"]], "--model", "bm25", name="bm25")
    _, minilm_run, minilm = score(tmp_path, [builds["govreport"]], "--model", "minilm", name="minilm")
    assert minilm_run["table3"][-1]["column"] == "Avg"
    capsys.readouterr()
    assert leaderboard_main([str(minilm), str(both / "results.json"), "--output", str(tmp_path / "board.md")]) == 0
    text = capsys.readouterr().out
    assert text == (tmp_path / "board.md").read_text()
    table = text.split("## Table 3")[1].split("\n## ")[0]
    # neither row has the paper's 14 columns: their Avg is partial, headed so, each with its k
    assert ("| Model | Source | HotpotQA Easy | HotpotQA Hard | GovReport Easy | GovReport Hard | "
            "Avg (k/14 columns) |") in table
    rows = [line.split("|", 2)[2] for line in table.splitlines() if "| ours |" in line]  # after the rank
    # bm25 ran more columns: it comes first; MiniLM's run had no HotpotQA
    assert rows[0].startswith(" bm25 | ours |") and rows[1].startswith(" minilm | ours | – (not run) | – (not run) |")
    assert rows[0].endswith("(4/14) |") and rows[1].endswith("(2/14) |")
    assert "paper (published)" not in text
    # beside the paper's rows: labelled as published, their columns added, ours not averaged over them
    assert leaderboard_main([str(minilm), str(both), "--reference", "paper"]) == 0
    text = capsys.readouterr().out
    assert ("| Rzen-v2-7B | paper (published) | 55.97 | 59.17 | 60.21 | 54.58 | 73.33 | 65.63 | 83.06 | 69.72 | "
            "90.83 | 11.67 | 87.67 | 16.00 | 72.67 | 20.00 | 58.61 |") in text
    assert "Published numbers, not measured by this toolkit" in text
    assert "MMLB Easy" in text and "| bm25 | ours | – (not run) |" in text
    header = next(line for line in text.splitlines() if "| Model | Source | NeedleBench" in line)
    assert header.endswith("| Avg | Avg (k/14 columns) |")
    # ours, over 4 and 2 of the 14 columns, are ranked apart from the whole rows (the published ones)
    bm25_line = next(line for line in text.splitlines() if "| bm25 | ours" in line)
    assert bm25_line.endswith(" (4/14) |") and "|  | " in bm25_line
    assert "| Qwen3-VL-2B | paper (published) | unstated | 63.19 | 82.85 | 88.61 | 78.22 ± 13.33 |" in text


def _published_lines(text: str, section: str) -> list[list[str]]:
    body = text.split(f"## {section}")[1].split("\n## ")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()
            if "| paper (published) |" in line]


def test_leaderboard_reference_prints_every_published_row_of_the_paper(tmp_path, capsys):
    """Issue 25 §9: all 11 rows of the paper's Table 3 with every one of their 14 cells and Avg (none
    `n/q`), Table 11's 10 rows, Table 12's 33, and the models; cited from the paper, not a notes file."""
    cell = {"model": "m", "column": "GovReport Easy", "task": "logical_summarization", "p_at_1": 0.5,
            "queries": 3, "ci95": None, "pools": 1, "expected_pools": 1}
    results = {"results": [], "table3": [cell, {"model": "m", "column": "Avg", "p_at_1": 0.5, "queries": 3,
                                                "columns": 1}]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert leaderboard_main([str(tmp_path), "--reference", "paper"]) == 0
    text = capsys.readouterr().out
    rows = _published_lines(text, "Table 3")
    assert [r[0] for r in rows] == ["Qwen3-VL-2B", "Qwen3-VL-8B", "GME-Qwen2-VL-2B", "GME-Qwen2-VL-7B",
                                    "Rzen-v2-7B", "Ops-MM-v1-7B", "Ops-MM-v1-2B", "Embed-RL-2B", "Embed-RL-4B",
                                    "VLM2Vec-Qwen2VL-2B", "Doubao-Seed-1.6"]
    header = next(line for line in text.splitlines() if line.startswith("| Model | Source | NeedleBench"))
    assert header.split("|")[3:5] == [" NeedleBench ", " MM-NIAH* "] and header.endswith("| Avg | Avg (1/14 columns) |")
    for row in rows:
        assert row[-1] == ""  # nothing under ours' partial Avg
        values = [float(v) for v in row[2:-1]]  # every cell published: no n/q
        assert len(values) == 15
        assert values[-1] == pytest.approx(sum(values[:-1]) / 14, abs=0.006)  # the paper's Avg of its columns
    assert rows[0][2:4] == ["48.70", "41.62"]  # the paper's MM-NIAH, printed in our MM-NIAH* column
    assert len(_published_lines(text, "Table 4")) == 10
    table12 = _published_lines(text, "Table 12")
    assert len(table12) == 33 and table12[0] == ["MSR", "Rzen-v2-7B", "paper (published)", "77.19", "65.00",
                                                  "58.13", "71.88", "57.50", "50.94"]
    assert "| Doubao-Seed-1.6 | seed1.6-embedding-1215 | 131072 |" in text
    assert "documents-video.md" not in text and "arXiv 2606.14747" in text
    ours = next(line for line in text.splitlines() if line.startswith("| m | ours |"))
    assert ours.endswith("|  | 50.0 (1/14) |")  # ours over 1 column: a partial Avg, not under the paper's Avg


def test_leaderboard_takes_one_run_per_model_and_names_those_left_out(tmp_path, builds, capsys):
    """Two runs of one model in a folder of runs (a SUBSET look, then a full run, then a newer full
    one): the leaderboard takes the newest full run's cells and names the others, instead of
    refusing the folder; the same run given twice counts once."""
    _, _, subset = score(tmp_path, [builds["govreport"]], "--model", "bm25", "--max-queries", "1", name="runs/a")
    _, _, older = score(tmp_path, [builds["govreport"]], "--model", "bm25", "--bootstrap", "50", name="runs/b")
    _, _, newer = score(tmp_path, [builds["govreport"]], "--model", "bm25", name="runs/c")
    for run, created in ((subset, "2026-12-03T12:00:00+00:00"), (older, "2026-12-01T00:00:00+00:00"),
                         (newer, "2026-12-02T00:00:00+00:00")):  # the SUBSET newest: it still loses
        data = json.loads((run / "results.json").read_text())
        (run / "results.json").write_text(json.dumps({**data, "created": created}))
    capsys.readouterr()
    assert leaderboard_main([str(tmp_path / "runs")]) == 0
    text = capsys.readouterr().out
    left = next(line for line in text.splitlines() if line.startswith("Left out"))
    assert f"{subset / 'results.json'} (bm25: {newer / 'results.json'} taken)" in left
    assert f"{older / 'results.json'} (bm25: {newer / 'results.json'} taken)" in left
    assert "| bm25 | ours |" in text and "SUBSET" not in text.split("## Table 3")[1]
    assert leaderboard_main([str(newer), str(newer / "results.json")]) == 0
    assert "Left out" not in capsys.readouterr().out


def test_leaderboard_refuses_unreadable_files(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert leaderboard_main([str(tmp_path / "bad.json")]) == 2
    assert leaderboard_main([str(tmp_path / "absent")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("mmle: error: ") for line in errors)


def test_leaderboard_is_an_mmle_subcommand(tmp_path, builds, capsys):
    _, _, run = score(tmp_path, [builds["govreport"]], "--model", "bm25")
    assert mmle_main(["leaderboard", str(run)]) == 0
    assert "| bm25 | ours |" in capsys.readouterr().out


@pytest.mark.realdata
def test_govreport_sample_cells_weigh_every_query(tmp_path):
    """The shared GovReport sample: 7, 4 and 1 queries at 8K, 16K and 32K. Each Table 3 cell is the
    hits over all its queries, whatever the pools' sizes, and says how many there are."""
    from builders.govreport import GovReportConfig
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder
    from tests.support.realdata import shared_data_dir

    built = run_build(get_builder("govreport"), GovReportConfig(sources=str(shared_data_dir("govreport"))),
                      tmp_path / "out", progress=False)
    code, result, output = score(tmp_path, [built], "--model", "bm25", name="results")
    assert code == 0
    for difficulty in ("easy", "hard"):
        pools = [r for r in result["results"] if r["difficulty"] == difficulty]
        sizes = [r["n_queries"] for r in pools]
        assert len(pools) == 3 and len(set(sizes)) > 1  # pools of unequal size: where a mean of pools misleads
        hits = sum(r["metrics"]["p@1"]["value"] * r["n_queries"] for r in pools)
        (cell,) = [c for c in result["table3"] if c["column"] == f"GovReport {difficulty.capitalize()}"]
        assert cell["queries"] == sum(sizes) and cell["p_at_1"] == pytest.approx(hits / sum(sizes))
        assert f"n={sum(sizes)}" in (output / "table.md").read_text()


def test_a_leaderboard_row_of_ours_is_the_report_row_with_its_source():
    """One rendering of Tables 3 and 4: the leaderboard prints our rows as `mmle score` does, with the
    Source column after the model."""
    from harness.report import leaderboard
    from harness.report import tables as report

    cell = {"model": "m", "column": "GovReport Easy", "task": "logical_summarization", "p_at_1": 0.5,
            "queries": 12, "ci95": [0.25, 0.75], "pools": 1, "expected_pools": 1}
    average = report.average_cell("m", [cell])
    grid = {"model": "m", "needle_modality": "text", "metric": "p@1", "mean": 0.5, "std": 0.0,
            "backgrounds": {b: {"p@1": 0.5, "cell": {**cell, "column": b}} for b in report.BACKGROUNDS}}
    run = {"_path": "r.json", "results": [], "table3": [cell, average], "table4": [grid]}
    ours = report.table3_markdown([{"model": "m", "cells": {cell["column"]: cell}, "average": average}],
                                  ["GovReport Easy"], {"GovReport Easy": "logical_summarization"}).splitlines()
    board = leaderboard.table3([run]).splitlines()
    assert board[-1] == ours[-1].replace("| m |", "| m | ours |", 1) == "| m | ours | 50.0 [25.0, 75.0] n=12 | 50.0 (1/14) |"
    assert board[2] == ours[2].replace("| Model |", "| Model | Source |", 1)
    ours = report.table4([], data=[grid]).splitlines()
    board = leaderboard.table4([run]).splitlines()
    assert board[-1] == ours[-1].replace("| m |", "| m | ours |", 1)
    assert board[0] == ours[0].replace("| Model |", "| Model | Source |", 1)


def test_a_source_the_release_left_out_is_excluded_not_not_run(tmp_path, capsys):
    """Beside the paper's rows, a column whose source the scored release excluded (its manifest's
    `absent`) says so, with why; a column the release has and the model was not run on says
    "not run"."""
    bench = write_benchmark(tmp_path / "release", _govreport())
    manifest = json.loads((bench / "manifest.json").read_text())
    (bench / "manifest.json").write_text(json.dumps({**manifest, "absent": {"youkudc": "left out with --exclude"}}))
    code, result, run = score(tmp_path, [bench], "--model", "bm25")
    assert code == 0 and result["datasets"][0]["absent"] == {"youkudc": "left out with --exclude"}
    capsys.readouterr()
    assert leaderboard_main([str(run), "--reference", "paper"]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "| Model | Source | NeedleBench" in line)
    row = next(line for line in text.splitlines() if "| bm25 | ours |" in line)
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["YoukuDC Easy"] == cells["YoukuDC Hard"] == "– (excluded from the release: left out with --exclude)"
    assert cells["HotpotQA Easy"] == "– (not run)" and cells["GovReport Easy"].endswith("n=7")  # 5 + 2 queries
