"""predictions.parquet and the variant-confusion table: what each model picked for each query."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from harness.cli import main
from harness.scoring.metrics import per_query, variant_breakdown
from harness.report.tables import confusion_data, confusion_markdown
from tests.support.fixtures_harness import standard_benchmark


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predictions")
    bench = standard_benchmark(tmp / "fixture")
    output = tmp / "out"
    code = main(["--dataset", str(bench), "--output", str(output), "--cache-dir", str(tmp / "cache"), "--quiet",
                 "--bootstrap", "200", "--no-plots"])
    assert code == 0
    return json.loads((output / "results.json").read_text()), pq.read_table(output / "predictions.parquet"), output


def test_one_row_per_model_and_query_whose_ranks_reproduce_every_p_at_1(scored):
    report, table, _ = scored
    rows = table.to_pylist()
    assert len(rows) == sum(r["n_queries"] for r in report["results"])
    assert len({(r["model"], r["pool"], r["_id"]) for r in rows}) == len(rows)
    for result in report["results"]:
        mine = [r for r in rows if r["model"] == result["model"] and r["pool"] == result["pool"]]
        ranks = np.array([[r["positive_rank_best"], r["positive_rank_worst"]] for r in mine])
        p_at_1 = per_query(ranks)["p@1"]
        assert float(p_at_1.mean()) == result["metrics"]["p@1"]["value"]  # exactly, not approximately
        assert [round(v, 6) for v in p_at_1] == result["per_query"]["p@1"]
        assert [r["p_at_1"] for r in mine] == list(p_at_1)


def test_top_k_is_ranked_and_labelled_from_the_audit(scored):
    _, table, _ = scored
    rows = [r for r in table.to_pylist() if r["pool"] == "govreport-hard-512"]
    assert rows and all(r["k"] == 10 and len(r["top_ids"]) == 10 for r in rows)
    for r in rows:
        assert r["top_scores"] == sorted(r["top_scores"], reverse=True)
        if r["positive_id"] in r["top_ids"]:
            at = r["top_ids"].index(r["positive_id"])
            assert r["top_labels"][at] == "positive" and r["top_scores"][at] == r["positive_score"]
            assert r["positive_rank_best"] <= at + 1 <= r["positive_rank_worst"]
        # the fixture's group has one hard and two easy negatives; the rest are other queries' candidates
        assert set(r["top_labels"]) <= {"positive", "hard_negative", "easy_negative", "other_query"}
        assert r["top_labels"].count("hard_negative") <= 1 and r["top_labels"].count("easy_negative") <= 2
        assert r["top_labels"].count("other_query") >= 10 - 4


def test_top1_shares_split_ties_and_the_positive_share_is_p_at_1():
    scores = np.array([[0.9, 0.5, 0.9, 0.1, 0.2, 0.3],    # Q0: positive tied with its tail25 at the top
                       [0.0, 0.0, 0.0, 0.4, 0.6, 0.1],    # Q1: its head25 on top
                       [0.7, 0.1, 0.1, 0.2, 0.1, 0.3]])   # Q2: Q0's positive (another query's) on top
    audit = {"_id": ["Q0", "Q1", "Q2", "p0", "h0", "t0", "p1", "h1", "o1"],
             "kind": ["query"] * 3 + ["candidate"] * 6,
             "role": ["query"] * 3 + ["positive", "hard_negative", "hard_negative", "positive", "hard_negative",
                                      "easy_negative"],
             "group": ["Q0", "Q1", "Q2", "Q0", "Q0", "Q0", "Q1", "Q1", "Q1"],
             "variant": ["", "", "", "original", "head25", "tail25", "original", "head25", "other_report"]}
    out = variant_breakdown(scores, ["Q0", "Q1", "Q2"], ["p0", "h0", "t0", "p1", "h1", "o1"], [0, 3, 5], audit)
    assert out["top1"] == {"head25": [0.0, 1.0, 0.0], "other_query": [0.0, 0.0, 1.0],
                           "positive": [0.5, 0.0, 0.0], "tail25": [0.5, 0.0, 0.0]}


def test_confusion_cells_pool_queries_and_sum_to_one(scored):
    report, _, output = scored
    records = report["variant_confusion"]
    assert records and not any(r["dataset"] == "needle" for r in records)
    hard = {r["model"]: r for r in records if (r["dataset"], r["difficulty"], r["length"]) == ("govreport", "hard", 512)}
    for model, record in hard.items():
        row = next(r for r in report["results"] if r["model"] == model and r["pool"] == "govreport-hard-512")
        assert record["queries"] == 4 and record["top1"]["positive"]["share"] == pytest.approx(row["metrics"]["p@1"]["value"])
        assert sum(v["share"] for v in record["top1"].values()) == pytest.approx(1.0)
        assert all(v["ci95"] is None for v in record["top1"].values())  # 4 queries: no interval
    table = (output / "table.md").read_text()
    assert "## Variant confusion" in table and "**govreport** (Logical Summarization): top-1 is ..." in table


def test_confusion_weights_queries_and_gives_intervals_from_ten():
    def row(pool, values, model="m"):
        return {"model": model, "pool": pool, "task": "logical_summarization", "dataset": "govreport",
                "difficulty": "hard", "length": 8192, "n_queries": len(values),
                "breakdown": {"by_variant": {"head25": {}}, "top1": {"positive": values,
                                                                      "head25": [1 - v for v in values]}}}
    records = confusion_data([row("a", [1.0] * 2), row("b", [0.0] * 10)], n_resamples=200)
    assert len(records) == 1 and records[0]["pools"] == 2 and records[0]["queries"] == 12
    assert records[0]["top1"]["positive"]["share"] == pytest.approx(2 / 12)  # query-weighted, not 0.5
    lo, hi = records[0]["top1"]["positive"]["ci95"]
    assert 0 <= lo <= 2 / 12 <= hi <= 1
    text = confusion_markdown(records)
    assert "| Difficulty | Length | Model | n | positive | head25 |" in text
    assert "| hard | 8k | m | 12 | 16.7 [" in text


def test_leaderboard_shows_the_confusion_of_several_runs_side_by_side():
    from harness.report.leaderboard import leaderboard

    def run(model, path, share):
        record = {"model": model, "task": "multi_source_reasoning", "dataset": "hotpotqa", "difficulty": "hard",
                  "length": 8192, "pools": 1, "queries": 160,
                  "top1": {"positive": {"share": share, "ci95": [share - 0.05, share + 0.05]},
                           "drop_first": {"share": 1 - share, "ci95": None}}}
        return {"_path": path, "results": [], "table3": [], "variant_confusion": [record], "dataset": {"ref": "x"}}

    text = leaderboard([run("bm25", "runs/a/results.json", 0.25), run("minilm", "runs/b/results.json", 0.5)])
    assert "## Variant confusion" in text
    assert "| hard | 8k | bm25 | a | 160 | 25.0 [20.0, 30.0] | 75.0 |" in text
    assert "| hard | 8k | minilm | b | 160 | 50.0 [45.0, 55.0] | 50.0 |" in text
    # two runs of one model: one is taken (the newest; here neither says when it ran: the later path)
    text = leaderboard([run("bm25", "runs/a/results.json", 0.25), run("bm25", "runs/c/results.json", 0.5)])
    assert "| hard | 8k | bm25 | c | 160 | 50.0 [45.0, 55.0] | 50.0 |" in text and "| bm25 | a |" not in text


def test_confusion_columns_put_the_positive_then_hard_variants_then_easy_ones():
    record = {"model": "m", "task": "logical_summarization", "dataset": "govreport", "difficulty": "hard",
              "length": 8192, "pools": 1, "queries": 3,
              "top1": {name: {"share": 0.25, "ci95": None}
                       for name in ("other_query", "tail25", "other_report", "positive", "head25")}}
    assert "| n | positive | head25 | tail25 | other_report | other_query |" in confusion_markdown([record])
