"""Cells that measure nothing do not look like results (issue 25 §2): a model that received no content
of a pool's candidates is not measured there, a cell whose every query tied says so instead of a
zero-width interval."""

import json

import pytest

from harness.cli import main
from harness.fixtures import make_pool, png, write_benchmark
from mmlongembed.core.documents import image_segment
from tests.support.fixtures_harness import MISS_QUERY


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def page_pool(name: str, difficulty: str):
    """MMLongBench-like: every candidate is page images alone (placeholders, no text)."""
    pool = make_pool(name, dataset="mmlongbench", difficulty=difficulty, length=8192, words=40, n_queries=3)
    pool.modality = "image"
    for k, candidate in enumerate(pool.candidates):
        pages = tuple(image_segment(png((30 * k % 256, 60, 120 + k)), height=48, width=64) for _ in range(2))
        candidate.document = candidate.document.with_segments(pages)
        candidate.n_tokens = candidate.document.tokens
    return pool


def tied_pool(name: str, every_candidate: bool, n_queries: int = 12, **kind):
    """Every query ties its positive: with every candidate (its words are in none), or with one
    other (a hard negative that is the positive's copy)."""
    pool = make_pool(name, difficulty="hard", length=8192, words=60, n_queries=n_queries, **kind)
    for query in pool.queries:
        if every_candidate:
            query.text = MISS_QUERY
        else:
            positive, copy = [c for c in pool.candidates if c.group == query.id][:2]
            copy.document, copy.n_tokens = positive.document, positive.n_tokens
    return pool


def score(tmp_path, root, *extra):
    output = tmp_path / "out"
    code = main(["--dataset", str(root), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                 "--quiet", "--bootstrap", "50", "--no-plots", "--model", "bm25", *extra])
    return code, json.loads((output / "results.json").read_text()), (output / "table.md").read_text()


def test_bm25_on_page_images_alone_is_not_measured_and_leaves_avg_out(tmp_path):
    root = write_benchmark(tmp_path / "b", [page_pool("mmlongbench-easy-8192", "easy"),
                                            page_pool("mmlongbench-hard-8192", "hard"),
                                            make_pool("govreport-easy-8192", length=8192, words=60, n_queries=3)])
    code, result, table = score(tmp_path, root)
    assert code == 0  # not a failure: nothing went wrong, there was nothing to measure
    assert [r["pool"] for r in result["results"]] == ["govreport-easy-8192"]
    cells = {c["column"]: c for c in result["table3"]}
    for column in ("MMLB Easy", "MMLB Hard"):
        assert cells[column]["p_at_1"] is None
        assert cells[column]["not_measured"]["reason"] == (
            "bm25 saw no content: no candidate has a text token (images are ignored)")
    assert cells["GovReport Easy"]["p_at_1"] is not None
    assert cells["Avg"]["p_at_1"] is None and cells["Avg"]["leaves_out"] == ["MMLB Easy", "MMLB Hard"]
    row = next(line for line in table.splitlines() if line.startswith("| bm25 |"))
    assert "| n/m (not measured in 1/1 pools: bm25 saw no content: no candidate has a text token" in row
    assert row.endswith("| – (lacks 2/3 columns) |")
    skipped = {s["pool"]: s for s in result["skipped"]}
    assert skipped["mmlongbench-hard-8192"]["not_measured"] and not skipped["mmlongbench-hard-8192"]["counts_as_failure"]


def test_a_cell_whose_every_query_tied_prints_no_interval(tmp_path):
    root = write_benchmark(tmp_path / "b", [tied_pool("govreport-hard-8192", every_candidate=True),
                                            tied_pool("hotpotqa-hard-8192", every_candidate=False, dataset="hotpotqa",
                                                      task="multi_source_reasoning"),
                                            make_pool("govreport-easy-8192", length=8192, words=60, n_queries=12)])
    code, result, table = score(tmp_path, root)
    assert code == 0
    cells = {c["column"]: c for c in result["table3"]}
    every = cells["GovReport Hard"]
    assert every["p_at_1"] == pytest.approx(1 / 48, abs=1e-5) and every["ci95"] is None  # chance: 48 candidates
    assert every["tie"] == "tie: every candidate scored alike"
    assert "| 2.1 (tie: every candidate scored alike) n=12 |" in table
    assert "2.1 [2.1, 2.1]" not in table and "50.0 [50.0, 50.0]" not in table
    easy = cells["GovReport Easy"]
    assert easy["tie"] is None and easy["ci95"] is not None  # a cell the model decided keeps its interval
    pools = {r["pool"]: r for r in result["results"]}
    assert pools["govreport-hard-8192"]["all_tied"] == 12 and pools["govreport-easy-8192"]["all_tied"] == 0
    copied = cells["HotpotQA Hard"]
    assert copied["p_at_1"] == pytest.approx(0.5) and copied["ci95"] is None
    assert "| 50.0 (tie: every query's positive scored alike with another candidate) n=12 |" in table
    # the per-pool table says so too
    assert "| bm25 | govreport-hard-8192 | 12 | 48 | 2.1 (tie: every candidate scored alike) |" in table


def _pool_row(dataset, task, difficulty, length, value):
    return {"model": "m", "pool": f"{dataset}-{difficulty}-{length}", "task": task, "dataset": dataset,
            "difficulty": difficulty, "length": length, "depth": None, "extra": {},
            "metrics": {"p@1": {"value": value}}, "n_queries": 4}


def test_table12_never_puts_demo_lengths_under_the_papers_length_columns():
    """Issue 25 §8: a release of real 8K-32K pools and demo video pools at 48 and 96 frames' tokens
    printed `Easy 48 | Easy 96` among the 8K-32K columns; each task sits under its own lengths."""
    from harness.report import tables as report

    rows = [_pool_row("govreport", "logical_summarization", d, n, 0.5) for d in ("easy", "hard")
            for n in (8192, 16384, 32768)]
    rows += [_pool_row("activitynet", "temporal_summarization", d, n, 0.25) for d in ("easy", "hard") for n in (48, 96)]
    text = report.table12(rows)
    headers = [line for line in text.splitlines() if line.startswith("| Task | Model |")]
    assert headers == ["| Task | Model | Easy 8K | Easy 16K | Easy 32K | Hard 8K | Hard 16K | Hard 32K |",
                       "| Task | Model | Easy 48 | Easy 96 | Hard 48 | Hard 96 |"]
    assert "At 48, 96 tokens (the paper's Table 12: 8K, 16K, 32K): Temporal Summarization." in text
    ls = next(line for line in text.splitlines() if line.startswith("| LS |"))
    ts = next(line for line in text.splitlines() if line.startswith("| TS |"))
    assert ls.count("50.0 n=4") == 6 and "–" not in ls
    assert ts.count("25.0 n=4") == 4 and "–" not in ts  # no empty cells under lengths it was not built at


def needle_pool(depth: float, length: int = 256):
    """A text-needle grid cell whose every candidate holds a needle sentence at `depth` % of its text,
    its character range recorded in the audit's provenance as the needle builder records it."""
    from mmlongembed.core.documents import text_document
    from mmlongembed.core.tokens import default_counter

    name = f"needle-text-text-{length}-d{depth:g}"
    pool = make_pool(name, dataset="needle", task="visual_grounding", difficulty="grid", length=length,
                     depth=depth, n_queries=3, negatives=2, words=160)
    pool.facts = {"needle_modality": "text", "background": "text", "fixture": True}
    counter = default_counter()
    for k, candidate in enumerate(pool.candidates):
        text, _ = candidate.document.render()
        cut = text.rfind(" ", 0, max(1, int(len(text) * depth / 100))) + 1 if depth else 0
        needle = f"The hidden number of this report is {1000 + k}. "
        text = text[:cut] + needle + text[cut:]
        candidate.document = text_document(candidate.id, text, counter)
        candidate.n_tokens = candidate.document.tokens
        start = candidate.document.render()[0].index(needle.strip())
        candidate.provenance = {"needle_char_range": [start, start + len(needle.strip())]}
    return pool


def test_a_needle_cut_away_by_middle_truncation_is_marked_and_counted(tmp_path):
    """Issue 25 §2: MiniLM's `0.0` at depth 50% came from the harness's middle truncation, not the
    model: the heatmap marks the cell and the report counts the queries."""
    import matplotlib.pyplot as plt

    from harness.report import tables as report

    root = write_benchmark(tmp_path / "b", [needle_pool(0.0), needle_pool(50.0)])
    output = tmp_path / "out"
    code = main(["--dataset", str(root), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                 "--quiet", "--bootstrap", "50", "--no-plots", "--model", "minilm", "--max-length", "32"])
    assert code == 0
    result = json.loads((output / "results.json").read_text())
    rows = {r["pool"]: r for r in result["results"]}
    assert rows["needle-text-text-256-d50"]["needle_truncated"] == 3  # the middle went, the needle with it
    assert rows["needle-text-text-256-d0"]["needle_truncated"] == 0  # the head is kept
    table = (output / "table.md").read_text()
    assert "(needle cut 3/3)" in table and "minilm 3 queries in 1 pools" in table
    ((_, _, fig),) = list(report.depth_heatmap_figures(result["results"]))
    try:
        (ax,) = [a for a in fig.axes if a.get_images()]
        marks = [p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("needle cut")]
        assert marks == ["needle cut 50 256"]
        assert any("needle cut 3/3" in t.get_text() for t in ax.texts)
    finally:
        plt.close(fig)


def test_sentence_transformer_kept_characters_map_back_over_image_placeholders():
    """MiniLM reads each image placeholder as one space; the characters it keeps are given in the
    stored text's own positions, so a needle's recorded range can be compared with them."""
    from harness.scoring.data import Item
    from harness.models.adapters import RunSettings, load_model
    from harness.scoring.truncation import range_kept

    model = load_model("minilm", RunSettings(max_length=24, progress=False))
    head = "<|image|> alpha beta gamma"
    text = head + " " + " ".join(f"filler{k}" for k in range(80)) + " <|image|> omega end"
    kept = model.kept_characters(Item("a", text))
    assert kept[0][0] == 0 and kept[-1][1] == len(text) and len(kept) == 2
    assert range_kept((text.index("alpha"), text.index("alpha") + 5), kept)
    assert range_kept((text.index("omega"), text.index("omega") + 5), kept)
    assert not range_kept((text.index("filler40"), text.index("filler40") + 8), kept)


def test_chance_is_marked_and_bm25_does_not_measure_an_image_needle(tmp_path):
    """Issue 36 §4: BM25 on image needles printed `4.0 [1.8, 6.7] n=225` in Table 4 and the heatmap
    painted it deep red: BM25 reads only the haystack's words, so its ranking does not depend on
    what the query asks. Now it is `n/m` in Table 4, the grid and the heatmap; a model that guesses
    (`random`) gets `(at chance: c)` beside its figure and a dotted frame in the heatmap, and
    BM25's real text-needle figures carry no such mark."""
    import matplotlib.pyplot as plt

    from harness.report import tables as report

    def grid_pool(needle: str):
        """12 queries over 36 candidates (enough for a test against chance), each query's words in its positive."""
        pool = make_pool(f"needle-{needle}-text-256-d0", dataset="needle", task="visual_grounding", difficulty="grid",
                         length=256, depth=0.0, n_queries=12, negatives=2, words=160)
        pool.facts = {"needle_modality": needle, "background": "text", "fixture": True}
        return pool

    pools = [grid_pool("image"), grid_pool("text")]
    root = write_benchmark(tmp_path / "b", pools)
    output = tmp_path / "out"
    assert main(["--dataset", str(root), "--output", str(output), "--cache-dir", str(tmp_path / "cache"), "--quiet",
                 "--bootstrap", "50", "--no-plots", "--model", "bm25", "--model", "random"]) == 0
    result = json.loads((output / "results.json").read_text())
    table = (output / "table.md").read_text()
    skipped = {(s["model"], s["pool"]): s for s in result["skipped"]}
    assert skipped["bm25", "needle-image-text-256-d0"]["reason"] == (
        "bm25 saw none of the needle: it is an image (images are ignored)")
    table4 = {(r["model"], r["needle_modality"]): r for r in result["table4"]}
    assert table4["bm25", "image"]["backgrounds"]["text"]["p@1"] is None
    bm25_image = next(line for line in table.splitlines() if line.startswith("| bm25 | Image |"))
    assert "n/m (not measured in 1/1 pools: bm25 saw none of the needle" in bm25_image
    bm25_text = next(line for line in table.splitlines() if line.startswith("| bm25 | Text |"))
    assert "at chance" not in bm25_text and "100.0" in bm25_text
    random_rows = [line for line in table.splitlines() if line.startswith("| random | ")]
    assert random_rows and all("(at chance: 2.8)" in line for line in random_rows if "Image" in line or "Text" in line)
    assert "| bm25 | needle-image-text | 0 | n/m |" in table and "| random | needle-text-text | 0 | 8.3 (at chance) |" in table
    # no heatmap of a family the model measured nothing of (Table 4 says n/m); one where it measured some
    (text_fig,) = [f for m, _, f in report.depth_heatmap_figures(result["results"], skipped=result["skipped"])
                   if m == "bm25"]
    try:
        (ax,) = [a for a in text_fig.axes if a.get_images()]
        assert not [p for p in ax.patches if (p.get_gid() or "").startswith("at chance")]
    finally:
        plt.close(text_fig)
    text_row = next(r for r in result["results"] if r["model"] == "bm25")
    partly = {**skipped["bm25", "needle-image-text-256-d0"],
              "facts": {**text_row, "pool": "needle-text-text-512-d0", "length": 512}}
    ((_, _, fig),) = [x for x in report.depth_heatmap_figures([text_row], skipped=[partly])]
    try:
        (ax,) = [a for a in fig.axes if a.get_images()]
        assert [p.get_gid() for p in ax.patches] == ["not measured 0 512"]
        assert "n/m" in [t.get_text() for t in ax.texts] and "n/m: no content received" in ax.get_title()
    finally:
        plt.close(fig)
    marked = [f for m, _, f in report.depth_heatmap_figures(result["results"], skipped=result["skipped"])
              if m == "random"]
    try:
        for fig in marked:
            (ax,) = [a for a in fig.axes if a.get_images()]
            assert [p.get_gid() for p in ax.patches] == ["at chance 0 256"] and "at chance" in ax.get_title()
    finally:
        for fig in marked:
            plt.close(fig)
