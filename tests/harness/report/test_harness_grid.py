"""The Visual Grounding grid in the reports: paper Table 4 (model x needle modality by background, mean and
std across backgrounds) and the Figure 3 depth x length heatmaps, on a fixture grid with a known score pattern."""

import json
import re

import pytest

from tests.support.fixtures_harness import grid_benchmark
from harness.report import tables as report
from harness.cli import main


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# Missed queries (of 4) per pool, in the order (256, d25), (256, d75), (512, d25), (512, d75). Every other
# query shares its topic words with its positive only, so BM25 ranks it first; a missed query shares no word
# with any candidate, so all candidates tie and it scores chance, 1/n. The image background's candidates
# hold no text: BM25 receives nothing of them, so it is not measured there (issue 25 §2), whatever this says.
MISSES = {
    ("text", "text"): [0, 1, 2, 1],
    ("text", "mixed"): [2, 2, 3, 1],
    ("text", "image"): [0, 0, 0, 0],
    ("image", "text"): [4, 4, 0, 0],
    ("image", "mixed"): [1, 1, 1, 2],
    ("image", "image"): [0, 0, 0, 0],
}
CELLS = [(256, "25"), (256, "75"), (512, "25"), (512, "75")]


def expected_p1(needle: str, background: str, misses: int, n_candidates: int) -> float:
    return (4 - misses + misses / n_candidates) / 4


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return grid_benchmark(tmp_path_factory.mktemp("grid") / "needle", MISSES)


def run(tmp_path, dataset, *extra, name="out"):
    output = tmp_path / name
    code = main(["--dataset", str(dataset), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                 "--quiet", "--bootstrap", "50", *extra])
    return code, json.loads((output / "results.json").read_text()), output


def test_table4_bm25_on_a_known_score_pattern(tmp_path, grid, capsys):
    code, result, output = run(tmp_path, grid, "--model", "bm25")
    # not measured, no failure: the image background (BM25 received no text of any candidate) and the image
    # needle (BM25 reads the haystack's words, never the needle the query asks about: issue 36 §4)
    no_text = {f"needle-text-image-{length}-d{depth}" for length, depth in CELLS}
    no_needle = {f"needle-image-{b}-{length}-d{depth}" for b in ("text", "mixed", "image") for length, depth in CELLS}
    assert code == 0 and {s["pool"] for s in result["skipped"]} == no_text | no_needle
    reasons = {s["pool"]: s["reason"] for s in result["skipped"]}
    assert all(s["not_measured"] and not s["counts_as_failure"] for s in result["skipped"])
    assert all("no candidate has a text token" in reasons[p] for p in no_text)
    assert all(reasons[p] == "bm25 saw none of the needle: it is an image (images are ignored)" for p in no_needle)
    p1 = {r["pool"]: r["metrics"]["p@1"]["value"] for r in result["results"]}
    n = {r["pool"]: r["n_candidates"] for r in result["results"]}
    expected = {}
    for background in ("text", "mixed"):
        cells = [expected_p1("text", background, m, n[f"needle-text-{background}-{length}-d{depth}"])
                 for (length, depth), m in zip(CELLS, MISSES["text", background])]
        for (length, depth), value in zip(CELLS, cells):
            assert p1[f"needle-text-{background}-{length}-d{depth}"] == pytest.approx(value)
        expected[background] = sum(cells) / len(cells)
    rows = {(e["model"], e["needle_modality"]): e for e in result["table4"]}
    assert list(rows) == [("bm25", "text"), ("bm25", "image")]
    table = (output / "table.md").read_text()
    entry = rows["bm25", "text"]
    cells = [expected[b] for b in ("text", "mixed")]
    assert {b: c["p@1"] for b, c in entry["backgrounds"].items()} == pytest.approx(
        dict(zip(("text", "mixed", "image"), cells + [None])))
    image = entry["backgrounds"]["image"]["cell"]
    assert image["p_at_1"] is None and len(image["not_measured"]["pools"]) == 4
    assert "bm25 saw no content" in image["not_measured"]["reason"]
    assert entry["mean"] is None and entry["std"] is None  # over all three backgrounds or none
    # each measured background cell rests on its 16 queries (4 pools of 4): interval and count printed
    assert all(entry["backgrounds"][b]["queries"] == 16 for b in ("text", "mixed"))
    line = (r"\| bm25 \| Text \| " + r" \| ".join(rf"{100 * c:.1f} \[\d+\.\d, \d+\.\d\] n=16" for c in cells)
            + r" \| n/m \(not measured in 4/4 pools: bm25 saw no content[^|]*\) \| – \|")
    assert re.search(line, table), line
    assert all(c["p@1"] is None for c in rows["bm25", "image"]["backgrounds"].values())
    assert "| bm25 | Image | n/m (not measured in 4/4 pools: bm25 saw none of the needle" in table
    assert "sample standard deviation (n-1)" in table and "| Model | Needle | Text | Mix | Image | Mean ± std |" in table
    assert not re.search(line, capsys.readouterr().out)  # --quiet: in table.md only
    # Figure 3: one depth x length heatmap per (model, needle modality, background) BM25 measured
    for needle, background in MISSES:
        path = output / f"heatmap_bm25_needle-{needle}-{background}.png"
        assert path.exists() == (needle == "text" and background != "image")
    assert len(list(output.glob("heatmap_*.png"))) == 2


def test_default_pair_skips_image_pools_for_minilm_without_failing(tmp_path, grid):
    code, result, output = run(tmp_path, grid, "--pools", "needle-text-*")
    assert code == 0
    minilm_skips = [s for s in result["skipped"] if s["model"] == "minilm"]
    skipped = {(s["model"], s["pool"]) for s in minilm_skips}
    assert all(not s["counts_as_failure"] and s["reason"] == "minilm cannot take image (takes text)"
               for s in minilm_skips)
    assert len(skipped) == 8 and ("minilm", "needle-text-mixed-256-d25") in skipped
    # BM25 on the image background (no candidate text): not measured, no failure either
    assert {s["pool"] for s in result["skipped"] if s["model"] == "bm25"} == {
        f"needle-text-image-{length}-d{depth}" for length, depth in CELLS}
    assert all(s["not_measured"] for s in result["skipped"] if s["model"] == "bm25")
    minilm = next(e for e in result["table4"] if e["model"] == "minilm")
    assert minilm["needle_modality"] == "text" and minilm["backgrounds"]["text"]["n_pools"] == 4
    assert minilm["backgrounds"]["mixed"]["p@1"] is None and minilm["mean"] is None and minilm["std"] is None
    assert "| minilm | Text | " in (output / "table.md").read_text()
    assert [p.name for p in output.glob("heatmap_minilm_*.png")] == ["heatmap_minilm_needle-text-text.png"]
    # the same pair spelled out is the same run; MiniLM alone on image pools still fails
    code, _, _ = run(tmp_path, grid, "--pools", "needle-text-*", "--model", "bm25,minilm", name="explicit")
    assert code == 0
    code, _, _ = run(tmp_path, grid, "--pools", "needle-text-mixed-256-d25", "--model", "minilm", name="alone")
    assert code == 1


def _row(model, pool, value, extra=None, n_queries=4):
    parts = pool.split("-")
    return {"model": model, "pool": pool, "length": int(parts[3]), "depth": float(parts[4][1:]),
            "extra": extra if extra is not None else {}, "metrics": {"p@1": {"value": value}},
            "n_queries": n_queries}


def test_table4_marks_partial_cells_and_reads_names_without_facts():
    rows = [_row("a", "needle-text-text-256-d0", 1.0), _row("a", "needle-text-text-256-d100", 0.5),
            _row("a", "needle-text-mixed-256-d0", 0.25), _row("a", "needle-text-image-256-d0", 0.0),
            _row("b", "needle-text-text-256-d0", 0.5),  # b lacks one text pool and both other backgrounds
            _row("a", "needle-text-essay-256-d0", 1.0),  # not a grid background: left out
            {**_row("a", "needle-text-text-256-d0", 1.0), "pool": "govreport-easy-256", "depth": None}]
    data = report.table4_data(rows)
    assert [(e["model"], e["needle_modality"]) for e in data] == [("a", "text"), ("b", "text")]
    text = data[0]["backgrounds"]["text"]
    assert (text["p@1"], text["n_pools"], text["expected_pools"], text["queries"]) == (0.75, 2, 2, 8)
    assert data[0]["mean"] == pytest.approx(1 / 3)
    # b missed a pool of its text cell: no number there (a mark says what it missed), no mean
    text = data[1]["backgrounds"]["text"]
    assert (text["p@1"], text["n_pools"], text["expected_pools"]) == (None, 1, 2)
    assert text["cell"]["skipped"] == {"pools": ["needle-text-text-256-d100"], "reasons": ["not run"]}
    assert data[1]["mean"] is None
    table = report.table4(rows)
    assert "| a | Text | 75.0 n=8 | 25.0 n=4 | 0.0 n=4 | 33.3 ± 38.2 |" in table
    assert "| b | Text | – (skipped 1/2 pools: not run) | – (skipped 1/1 pools: not run) |" in table
    # the builder's facts win over the name
    facts = [_row("c", "needle-x-y-256-d0", 0.5, {"needle_modality": "image", "background": "mixed"})]
    assert report.table4_data(facts)[0]["backgrounds"]["mixed"]["p@1"] == 0.5


def test_table4_spread_is_the_sample_standard_deviation_the_paper_prints():
    """Qwen3-VL-2B in the paper: 63.19 / 82.85 / 88.61 across backgrounds, printed sigma 13.33
    (the population std would be 10.89)."""
    rows = [{**_row("qwen", f"needle-text-{b}-256-d0", v / 100, {"needle_modality": "text", "background": b}),
             "task": "visual_grounding", "dataset": "needle", "difficulty": "grid"}
            for b, v in (("text", 63.19), ("mixed", 82.85), ("image", 88.61))]
    entry = report.table4_data(rows)[0]
    assert round(100 * entry["std"], 2) == 13.33 and round(100 * entry["mean"], 2) == 78.22
    assert "| qwen | Text | 63.2 n=4 | 82.8 n=4 | 88.6 n=4 | 78.2 ± 13.3 |" in report.table4(rows)


def _real(model, dataset, task, difficulty, length, value, n_queries=4):
    return {"model": model, "pool": f"{dataset}-{difficulty}-{length}", "task": task, "dataset": dataset,
            "difficulty": difficulty, "length": length, "depth": None, "extra": {},
            "metrics": {"p@1": {"value": value}}, "n_queries": n_queries}


def _grid(model, values):
    return [{**_row(model, f"needle-{n}-{b}-256-d{d}", v), "task": "visual_grounding", "dataset": "needle",
             "difficulty": "grid"} for n, v in values for b in ("text", "mixed", "image") for d in (0, 100)]


def test_table3_has_the_papers_columns_in_its_order_and_averages_every_column():
    rows = (_grid("m", (("text", 0.9), ("image", 0.3)))
            + [_real("m", dataset, task, diff, n, v) for dataset, task in
               (("hotpotqa", "multi_source_reasoning"), ("govreport", "logical_summarization"),
                ("mmdocrag", "multi_source_reasoning"), ("activitynet", "temporal_summarization"))
               for diff, v in (("easy", 0.8), ("hard", 0.2)) for n in (8192, 16384)])
    data = report.table3_data(rows)[0]
    assert list(data["cells"]) == ["NeedleBench", "MM-NIAH*", "MMDocRAG Easy", "MMDocRAG Hard", "HotpotQA Easy",
                                   "HotpotQA Hard", "GovReport Easy", "GovReport Hard", "ActNet Easy", "ActNet Hard"]
    assert data["cells"]["NeedleBench"]["p_at_1"] == pytest.approx(0.9)
    assert data["cells"]["NeedleBench"]["queries"] == 24  # 6 pools of 4 queries
    assert data["average"]["p_at_1"] == pytest.approx((0.9 + 0.3 + 4 * (0.8 + 0.2)) / 10)  # VG included
    table = report.table3(rows)
    assert ("Columns by task: Visual Grounding: NeedleBench, MM-NIAH* · Multi-Source Reasoning: MMDocRAG Easy, "
            "MMDocRAG Hard, HotpotQA Easy, HotpotQA Hard · Logical Summarization: GovReport Easy, GovReport Hard · "
            "Temporal Summarization: ActNet Easy, ActNet Hard.") in table
    assert "| m | 90.0 n=24 | 30.0 n=24 | 80.0 n=8 | 20.0 n=8 | 80.0 n=8 |" in table
    # ten of the paper's 14 columns: a partial Avg, under a header that says so, never the paper's Avg
    assert table.splitlines()[-1].endswith("| 20.0 n=8 | 52.0 (10/14) |")
    assert "| ActNet Hard | Avg (10/14 columns) |" in table and "| Avg |" not in table
    # Table 12 in the paper's layout: a row per task and model, Easy then Hard at each length
    rows += [_real("m", "mmlongbench", "logical_summarization", "easy", 8192, 0.4)]
    table12 = report.table12(rows)
    assert "| Task | Model | Easy 8K | Easy 16K | Hard 8K | Hard 16K |" in table12
    assert "| LS | m | 60.0 n=8 | 80.0 n=4 | 20.0 n=4 | 20.0 n=4 |" in table12  # 8K Easy: govreport and mmlb


def test_table3_cells_weigh_queries_not_pools():
    """GovReport Hard for BM25 as issue 18 found it: a 32K pool of one query scoring 0 weighed as much
    as the 8K pool of seven queries, so the cell showed the mean of pool means."""
    rows = [_real("bm25", "govreport", "logical_summarization", "hard", 8192, 6 / 7, n_queries=7),
            _real("bm25", "govreport", "logical_summarization", "hard", 16384, 0.5, n_queries=4),
            _real("bm25", "govreport", "logical_summarization", "hard", 32768, 0.0, n_queries=1)]
    cell = report.table3_data(rows)[0]["cells"]["GovReport Hard"]
    assert cell["p_at_1"] == pytest.approx((6 + 2 + 0) / 12)  # 66.7, where the mean of pools gives 45.2
    assert cell["queries"] == 12 and cell["pools"] == 3
    assert "| bm25 | 66.7 n=12 | 66.7 (1/14) |" in report.table3(rows)


def test_table3_marks_what_a_model_skipped_and_leaves_it_out_of_avg():
    """MiniLM takes no images: in a column whose pools it ran only in part it gets no number (today's
    table showed its text-background mean beside BM25's three-background one), and no Avg."""
    rows = _grid("bm25", (("text", 0.5),)) + [r for r in _grid("minilm", (("text", 1.0),)) if "-text-256" in r["pool"]]
    rows += [_real(m, "govreport", "logical_summarization", "easy", 8192, 0.5) for m in ("bm25", "minilm")]
    skipped = [{"model": "minilm", "pool": r["pool"], "reason": "minilm cannot take image (takes text)",
                "counts_as_failure": False, "facts": r} for r in rows if r["model"] == "bm25" and r.get("depth") is not None
               and "-text-256" not in r["pool"]]
    data = {e["model"]: e for e in report.table3_data(rows, skipped)}
    assert data["bm25"]["cells"]["NeedleBench"]["p_at_1"] == pytest.approx(0.5)
    minilm = data["minilm"]["cells"]["NeedleBench"]
    assert minilm["p_at_1"] is None and minilm["queries"] == 8 and len(minilm["skipped"]["pools"]) == 4
    assert data["minilm"]["average"]["p_at_1"] is None
    assert data["minilm"]["average"]["leaves_out"] == ["NeedleBench"]
    assert data["bm25"]["average"]["p_at_1"] == pytest.approx(0.5)
    table = report.table3(rows, skipped)
    assert ("| minilm | – (skipped 4/6 pools: minilm cannot take image (takes text)) | 50.0 n=4 | "
            "– (lacks 1/2 columns) |") in table
    records = {(r["model"], r["column"]): r for r in report.table3_records(report.table3_data(rows, skipped))}
    assert records["minilm", "NeedleBench"]["p_at_1"] is None
    assert records["bm25", "Avg"]["p_at_1"] == pytest.approx(0.5)


def test_intervals_are_over_queries_and_absent_below_a_few():
    one = {**_real("m", "govreport", "logical_summarization", "hard", 32768, 0.0, n_queries=1),
           "per_query": {"p@1": [0.0]}}
    many = [{**_real("m", "hotpotqa", "multi_source_reasoning", "easy", n, 0.5, n_queries=20),
             "per_query": {"p@1": [1.0] * 10 + [0.0] * 10}} for n in (8192, 16384)]
    data = report.table3_data([one, *many], n_resamples=400, seed=1)[0]["cells"]
    assert data["GovReport Hard"]["ci95"] is None and report.cell_text(data["GovReport Hard"]) == "0.0 n=1"
    lo, hi = data["HotpotQA Easy"]["ci95"]
    assert lo < 0.5 < hi and hi - lo < 0.4  # a bootstrap over the column's 40 queries
    assert re.fullmatch(r"50\.0 \[\d+\.\d, \d+\.\d\] n=40", report.cell_text(data["HotpotQA Easy"]))
