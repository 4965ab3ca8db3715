"""The Visual Grounding grid in the reports: paper Table 4 (model x needle modality by background, mean and
std across backgrounds) and the Figure 3 depth x length heatmaps, on a fixture grid with a known score pattern."""

import json

import pytest

from tests._fixtures_harness import grid_benchmark
from harness import report
from harness.cli import main


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# Missed queries (of 4) per pool, in the order (256, d25), (256, d75), (512, d25), (512, d75). Every other
# query shares its topic words with its positive only, so BM25 ranks it first; a missed query shares no word
# with any candidate, so all candidates tie and it scores chance, 1/n. The image background's candidates
# hold no text, so every query there ties with everything, whatever this says.
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
    if background == "image":
        return 1 / n_candidates
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
    assert code == 0 and not result["skipped"]
    p1 = {r["pool"]: r["metrics"]["p@1"]["value"] for r in result["results"]}
    n = {r["pool"]: r["n_candidates"] for r in result["results"]}
    expected = {}
    for (needle, background), counts in MISSES.items():
        cells = [expected_p1(needle, background, m, n[f"needle-{needle}-{background}-{length}-d{depth}"])
                 for (length, depth), m in zip(CELLS, counts)]
        for (length, depth), value in zip(CELLS, cells):
            assert p1[f"needle-{needle}-{background}-{length}-d{depth}"] == pytest.approx(value)
        expected[needle, background] = sum(cells) / len(cells)
    rows = {(e["model"], e["needle_modality"]): e for e in result["table4"]}
    assert list(rows) == [("bm25", "text"), ("bm25", "image")]
    for needle in ("text", "image"):
        entry = rows["bm25", needle]
        cells = [expected[needle, b] for b in ("text", "mixed", "image")]
        assert {b: c["p@1"] for b, c in entry["backgrounds"].items()} == pytest.approx(
            dict(zip(("text", "mixed", "image"), cells)))
        assert all(c["n_pools"] == c["expected_pools"] == 4 for c in entry["backgrounds"].values())
        # mean and sample std (ddof=1, as the paper prints it) across the three backgrounds
        mean = sum(cells) / 3
        std = (sum((c - mean) ** 2 for c in cells) / 2) ** 0.5
        assert entry["mean"] == pytest.approx(mean) and entry["std"] == pytest.approx(std)
        line = (f"| bm25 | {needle.title()} | " + " | ".join(f"{100 * c:.1f}" for c in cells)
                + f" | {100 * mean:.1f} ± {100 * std:.1f} |")
        expected[needle] = line
    table = (output / "table.md").read_text()
    assert "| Model | Needle | Text | Mix | Image | Mean ± std |" in table
    assert "sample standard deviation (n-1)" in table
    assert expected["text"] in table and expected["image"] in table
    assert expected["image"] not in capsys.readouterr().out  # --quiet: in table.md only
    # Figure 3: one depth x length heatmap per (model, needle modality, background)
    for needle, background in MISSES:
        assert (output / f"heatmap_bm25_needle-{needle}-{background}.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list(output.glob("heatmap_*.png"))) == 6


def test_default_pair_skips_image_pools_for_minilm_without_failing(tmp_path, grid):
    code, result, output = run(tmp_path, grid, "--pools", "needle-text-*")
    assert code == 0
    skipped = {(s["model"], s["pool"]) for s in result["skipped"]}
    assert all(not s["counts_as_failure"] and s["reason"] == "minilm cannot take image (takes text)"
               for s in result["skipped"])
    assert len(skipped) == 8 and ("minilm", "needle-text-mixed-256-d25") in skipped
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


def _row(model, pool, value, extra=None):
    parts = pool.split("-")
    return {"model": model, "pool": pool, "length": int(parts[3]), "depth": float(parts[4][1:]),
            "extra": extra if extra is not None else {}, "metrics": {"p@1": {"value": value}}}


def test_table4_marks_partial_cells_and_reads_names_without_facts():
    rows = [_row("a", "needle-text-text-256-d0", 1.0), _row("a", "needle-text-text-256-d100", 0.5),
            _row("a", "needle-text-mixed-256-d0", 0.25), _row("a", "needle-text-image-256-d0", 0.0),
            _row("b", "needle-text-text-256-d0", 0.5),  # b lacks one text pool and both other backgrounds
            _row("a", "needle-text-essay-256-d0", 1.0),  # not a grid background: left out
            {**_row("a", "needle-text-text-256-d0", 1.0), "pool": "govreport-easy-256", "depth": None}]
    data = report.table4_data(rows)
    assert [(e["model"], e["needle_modality"]) for e in data] == [("a", "text"), ("b", "text")]
    assert data[0]["backgrounds"]["text"] == {"p@1": 0.75, "n_pools": 2, "expected_pools": 2}
    assert data[0]["mean"] == pytest.approx(1 / 3)
    assert data[1]["backgrounds"]["text"] == {"p@1": 0.5, "n_pools": 1, "expected_pools": 2}
    assert data[1]["mean"] is None
    table = report.table4(rows)
    assert "| a | Text | 75.0 | 25.0 | 0.0 | 33.3 ± 38.2 |" in table
    assert "| b | Text | 50.0 (1/2 pools) | – | – | – |" in table
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
    assert "| qwen | Text | 63.2 | 82.8 | 88.6 | 78.2 ± 13.3 |" in report.table4(rows)


def test_table3_has_the_visual_grounding_columns_and_averages_every_column():
    def real(model, dataset, task, difficulty, length, value):
        return {"model": model, "pool": f"{dataset}-{difficulty}-{length}", "task": task, "dataset": dataset,
                "difficulty": difficulty, "length": length, "depth": None, "extra": {},
                "metrics": {"p@1": {"value": value}}}

    grid = [{**_row("m", f"needle-{n}-{b}-256-d{d}", v), "task": "visual_grounding", "dataset": "needle",
             "difficulty": "grid"}
            for n, v in (("text", 0.9), ("image", 0.3)) for b in ("text", "mixed", "image") for d in (0, 100)]
    rows = grid + [real("m", "govreport", "logical_summarization", diff, n, v)
                   for diff, v in (("easy", 0.8), ("hard", 0.2)) for n in (8192, 16384)]
    data = report.table3_data(rows)[0]
    assert list(data["columns"]) == ["VG: text needle", "VG: image needle", "LS: govreport Easy", "LS: govreport Hard"]
    assert data["columns"]["VG: text needle"] == pytest.approx(0.9)
    assert data["average"] == pytest.approx((0.9 + 0.3 + 0.8 + 0.2) / 4)  # VG included, as in the paper
    table = report.table3(rows)
    assert "| Model | VG: text needle | VG: image needle | LS: govreport Easy | LS: govreport Hard | Avg |" in table
    assert "| m | 90.0 | 30.0 | 80.0 | 20.0 | 55.0 |" in table
    # Table 12 in the paper's layout: a row per task and model, Easy then Hard at each length
    rows += [real("m", "mmlb", "logical_summarization", "easy", 8192, 0.4)]
    table12 = report.table12(rows)
    assert "| Task | Model | Easy 8K | Easy 16K | Hard 8K | Hard 16K |" in table12
    assert "| LS | m | 60.0 | 80.0 | 20.0 | 20.0 |" in table12  # 8K Easy: govreport 80 and mmlb 40 averaged
