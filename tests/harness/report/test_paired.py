"""Paired comparisons (issue 36 §1, §2): differences on the same queries, rank ranges, `mmle compare`."""

import json

import numpy as np
import pytest

from harness.cli import main as score_main
from harness.fixtures import make_pool, write_benchmark
from harness.report import paired
from harness.report.compare import main as compare_main
from harness.report.leaderboard import main as leaderboard_main
from mmlongembed.core.rng import derive_rng
from mmlongembed.cli import main as mmle_main


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_a_small_gap_on_the_same_queries_is_certain_where_two_independent_intervals_overlap():
    """A beats B on 12 of 100 queries and ties the rest: their own intervals overlap (a comparison
    of two unpaired figures says nothing), the paired interval excludes 0 and p is small."""
    rng = np.random.default_rng(7)
    b = (rng.random(100) < 0.4).astype(float)
    a = b.copy()
    a[np.flatnonzero(b == 0)[:12]] = 1.0
    delta, ci, p = paired.paired_difference([(a, b)], derive_rng(0, "t"), 2000)
    assert delta == pytest.approx(0.12)
    assert ci[0] > 0 and p < 0.01
    # resampling each model's queries on their own (the unpaired mistake) gives an interval over 0
    unpaired = [a[rng.integers(0, 100, 100)].mean() - b[rng.integers(0, 100, 100)].mean() for _ in range(2000)]
    assert np.quantile(unpaired, 0.025) < 0 < np.quantile(unpaired, 0.975)


def test_disagreements_both_ways_are_not_significant_and_agreement_is_p_one():
    a = np.array([1.0, 0.0] * 20)
    b = np.array([0.0, 1.0] * 20)
    delta, ci, p = paired.paired_difference([(a, b)], derive_rng(0, "t"), 1000)
    assert delta == 0 and ci[0] < 0 < ci[1] and p > 0.9
    assert paired.paired_difference([(a, a)], derive_rng(0, "t"), 1000)[2] == 1.0


def test_holm_adjusts_step_down_and_stays_monotone():
    assert paired.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert paired.holm([0.5]) == [0.5] and paired.holm([0.6, 0.7]) == [1.0, 1.0]


def test_rank_ranges_share_ranks_where_the_difference_is_not_significant():
    def diff(a, b, delta, p):
        return paired.Difference(a, b, "Avg", 10, delta, (delta, delta), p, p)

    found = [diff("x", "y", 0.2, 0.001), diff("x", "z", 0.25, 0.001), diff("y", "z", 0.05, 0.4)]
    assert paired.rank_ranges(["x", "y", "z"], found) == {"x": (1, 1), "y": (2, 3), "z": (2, 3)}
    assert paired.rank_text((2, 3)) == "2–3" and paired.rank_text((1, 1)) == "1"


def test_differences_do_not_depend_on_which_other_models_are_compared():
    outcomes = {m: {"C": {("p", str(q)): float((q * k) % 3 == 0) for q in range(30)}} for k, m in
                enumerate(("a", "b", "c"), start=1)}
    three = {(d.a, d.b, d.column): d for d in paired.compare(outcomes, ["a", "b", "c"], ["C"], n_resamples=500)}
    two = {(d.a, d.b, d.column): d for d in paired.compare(outcomes, ["a", "b"], ["C"], n_resamples=500)}
    assert three["a", "b", "C"].ci95 == two["a", "b", "C"].ci95 and three["a", "b", "C"].p == two["a", "b", "C"].p
    assert three["a", "b", "C"].p_holm >= two["a", "b", "C"].p_holm  # three pairs: a larger family


def _pools():
    pools = [make_pool(f"govreport-{d}-{n}", difficulty=d, length=n, words=60, n_queries=15)
             for d in ("easy", "hard") for n in (8192, 16384)]
    pools += [make_pool(f"hotpotqa-{d}-8192", dataset="hotpotqa", task="multi_source_reasoning", difficulty=d,
                        length=8192, words=60, n_queries=15) for d in ("easy", "hard")]
    # one pool with images, which MiniLM skips: the models still rank on the columns both have
    return pools + [make_pool("mmdocrag-easy-8192", dataset="mmdocrag", task="multi_source_reasoning", length=8192,
                              words=60, n_queries=15, images=True)]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A fixture build at the paper's lengths scored by BM25, MiniLM and random, each run in the
    folder of runs `mmle score` makes."""
    root = tmp_path_factory.mktemp("paired")
    bench = write_benchmark(root / "bench", _pools())
    runs = {}
    text = ["--modalities", "text"]  # MiniLM takes no images: the image pool deselected, not a failure
    for model, extra in (("bm25", []), ("minilm", text), ("random", []), ("minilm", [*text, "--max-length", "24"])):
        name = model + ("-short" if "--max-length" in extra else "")
        assert score_main(["--dataset", str(bench), "--output", str(root / "runs" / name), "--cache-dir",
                           str(root / "cache"), "--quiet", "--no-plots", "--bootstrap", "200", "--model", model,
                           *extra]) == 0
        runs[name] = root / "runs" / name
    return runs


def test_leaderboard_ranks_with_ranges_and_prints_the_paired_table(scored, capsys):
    capsys.readouterr()
    assert leaderboard_main([str(scored[m]) for m in ("bm25", "minilm", "random")]) == 0
    text = capsys.readouterr().out
    table = text.split("## Table 3\n")[1].split("\n## ")[0]
    assert "| Rank | Model | Source |" in table
    ranks = {line.split("|")[2].strip(): line.split("|")[1].strip() for line in table.splitlines()
             if line.startswith("| ") and "| ours |" in line}
    assert set(ranks) == {"bm25", "minilm"} and all(r for r in ranks.values())  # random: a diagnostic, apart
    assert "over the 4 of the table's 5 columns every model has a number in: HotpotQA Easy" in table
    assert "MMDocRAG Easy" not in table.split("every model has a number in:")[1].splitlines()[0]
    pairs = text.split("## Pairwise differences (Table 3)")[1].split("\n## ")[0]
    rows = [line for line in pairs.splitlines() if line.startswith("| ") and "| Avg |" in line]
    assert {frozenset(c.strip() for c in line.split("|")[1:3]) for line in rows} == {
        frozenset(("bm25", "minilm")), frozenset(("bm25", "random")), frozenset(("minilm", "random"))}
    assert all("[" in line and "]" in line for line in rows)  # each with its paired interval
    assert "| HotpotQA Easy |" not in pairs  # per column only with --pairs
    capsys.readouterr()
    assert mmle_main(["leaderboard", *map(str, (scored["bm25"], scored["minilm"])), "--pairs",
                      "--reference", "paper"]) == 0
    text = capsys.readouterr().out
    assert "| bm25 | minilm | HotpotQA Easy |" in text
    published = [line for line in text.splitlines() if "| paper (published) |" in line and "| Rzen-v2-7B |" in line]
    assert published and published[0].startswith("|  | Rzen-v2-7B |")  # a reference: no rank


def test_compare_names_the_changed_setting_first_and_lists_the_flipped_queries(scored, capsys, tmp_path):
    capsys.readouterr()
    code = mmle_main(["compare", str(scored["minilm"]), str(scored["minilm-short"]), "--explore", "site/index.html",
                      "--output", str(tmp_path / "compare.md")])
    text = capsys.readouterr().out
    assert text == (tmp_path / "compare.md").read_text()
    what = next(line for line in text.splitlines() if line.startswith("What differs"))
    assert what.split("`")[1] in ("model.max_length", "settings.max_length") and "batch_size" not in what
    settings = text.split("## Settings")[1].split("\n## ")[0]
    first = [line for line in settings.splitlines() if line.startswith("| ≠")]
    assert {line.split("|")[2].strip() for line in first} == {"model.max_length", "settings.max_length"}
    assert settings.splitlines()[4].startswith("| ≠")  # the differences come first
    flips = text.split("## Queries that flipped")[1]
    links = [part for part in flips.split("(site/index.html#pool=")[1:]]
    assert links and all("&qid=" in link for link in links)
    # the flip counts are those of the two runs' predictions
    import pyarrow.parquet as pq

    before = {(r["pool"], r["_id"]): r["p_at_1"] for r in pq.read_table(scored["minilm"] / "predictions.parquet").to_pylist()}
    after = {(r["pool"], r["_id"]): r["p_at_1"] for r in pq.read_table(scored["minilm-short"] / "predictions.parquet").to_pylist()}
    changed = sum((before[k] >= 0.5) != (after[k] >= 0.5) for k in before)
    rows = [line.split("|") for line in flips.splitlines() if line.startswith("| ") and not line.startswith("| Pool")]
    counted = sum(int(row[3]) + int(row[4]) for row in rows)
    assert changed == counted > 0
    significant = "cell(s) differ beyond chance" in text
    assert code == (1 if significant else 0)


def test_compare_of_a_run_with_itself_exits_zero_and_bad_calls_are_one_line(scored, capsys):
    assert compare_main([str(scored["bm25"]), str(scored["bm25"])]) == 0
    out = capsys.readouterr().out
    assert "The two runs' recorded settings are identical." in out and "None: every query" in out
    assert "No cell differs beyond chance" in out
    assert compare_main([str(scored["bm25"]), str(scored["minilm"]), str(scored["random"])]) == 2
    assert compare_main([str(scored["bm25"]), str(scored["minilm"]), "--model", "minilm"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and "run A has no model 'minilm'" in errors[1]


def test_compare_against_the_paper_says_whether_each_published_figure_is_in_our_interval(tmp_path, capsys):
    cell = {"model": "gme-qwen2-vl-2b", "column": "GovReport Easy", "task": "logical_summarization", "p_at_1": 0.90,
            "queries": 40, "ci95": [0.85, 0.95], "pools": 3, "expected_pools": 3}
    other = {**cell, "column": "GovReport Hard", "p_at_1": 0.5, "ci95": [0.4, 0.6]}
    run = {"results": [], "models": [{"spec": "gme-qwen2-vl-2b"}], "table3": [cell, other]}
    (tmp_path / "results.json").write_text(json.dumps(run))
    from harness.report.leaderboard import reference

    published = {r["column"]: r["p_at_1"] for r in reference("paper")["table3"] if r["model"] == "GME-Qwen2-VL-2B"}
    inside = {c: 100 * lo <= published[c] <= 100 * hi for c, (lo, hi) in
              (("GovReport Easy", cell["ci95"]), ("GovReport Hard", other["ci95"]))}
    code = compare_main([str(tmp_path), "--reference", "paper"])
    text = capsys.readouterr().out
    for column, expected in inside.items():
        line = next(line for line in text.splitlines() if f"| {column} |" in line)
        assert line.split("|")[-2].strip() == ("yes" if expected else "no")
    assert code == (0 if all(inside.values()) else 1)


def test_two_samples_of_one_distribution_do_not_differ_and_a_shift_does():
    rng = np.random.default_rng(3)
    a, b = (rng.random(120) < 0.5).astype(float), (rng.random(90) < 0.5).astype(float)
    delta, ci, p = paired.unpaired_difference([(a, b)], derive_rng(0, "u"), 2000)
    assert delta == pytest.approx(a.mean() - b.mean()) and ci[0] < delta < ci[1]
    assert (ci[0] < 0 < ci[1]) == (p >= 0.05)
    worse = (rng.random(90) < 0.2).astype(float)
    delta, ci, p = paired.unpaired_difference([(a, worse)], derive_rng(0, "u"), 2000)
    assert ci[0] > 0 and p < 0.01


def test_a_fresh_draw_is_compared_unpaired_and_a_drop_beyond_the_interval_is_flagged(scored, tmp_path, capsys):
    """Issue 37 §5, the contamination check: the same recipe drawn with another seed gives other pools
    (here: other documents and queries under the same pool names and query ids). The runs share no
    query, so `--draws` compares each cell's two samples; a model that does as well on the fresh draw
    passes, one whose score drops beyond the interval (here `random`, standing for a model that fitted
    the published pools) is flagged. Without `--draws`, the differing data files are called out."""
    fresh = write_benchmark(tmp_path / "fresh", [make_pool(p.name, dataset=p.dataset, task=p.task,
                                                           difficulty=p.difficulty, length=p.band.target, words=60,
                                                           n_queries=15, images=p.modality != "text", seed=1)
                                                 for p in _pools()])
    runs = {}
    for model in ("bm25", "random"):
        runs[model] = tmp_path / model
        assert score_main(["--dataset", str(fresh), "--output", str(runs[model]), "--cache-dir", str(tmp_path / "c"),
                           "--quiet", "--no-plots", "--bootstrap", "200", "--model", model]) == 0
    capsys.readouterr()
    assert compare_main([str(scored["bm25"]), str(runs["bm25"]), "--draws", "--bootstrap", "500"]) == 0
    text = capsys.readouterr().out
    assert "A - B on two draws" in text and "None to list: two draws share no query." in text
    assert "**No cell differs beyond chance**" in text
    assert compare_main([str(scored["bm25"]), str(runs["random"]), "--model", "bm25=random", "--draws",
                         "--bootstrap", "500"]) == 1
    assert "cell(s) differ beyond chance" in capsys.readouterr().out
    compare_main([str(scored["bm25"]), str(runs["bm25"]), "--bootstrap", "200"])
    assert "**The runs scored different data files:**" in capsys.readouterr().out
