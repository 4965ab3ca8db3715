"""The harness end to end on fixture benchmarks: CLI, reports, skips, cache and resume, OpenAI server."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


from harness.fixtures import make_pool, write_benchmark
from tests.support.fixtures_harness import blank_images, drop_column, rewrite_table, run_score, standard_benchmark
from harness.cli import main
from harness.models.fake_server import FakeEmbeddingServer

@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # per test, not at import: a module-level setting would leak into other test modules
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return standard_benchmark(tmp_path_factory.mktemp("bench") / "fixture")


score = run_score


def by_pool(report, model):
    return {r["pool"]: r for r in report["results"] if r["model"] == model}


def test_default_run_scores_text_pools_and_writes_reports(tmp_path, bench, capsys):
    code, report, output = score(tmp_path, bench)
    assert code == 0
    bm25, minilm = by_pool(report, "bm25"), by_pool(report, "minilm")
    assert set(bm25) == {"govreport-easy-256", "govreport-easy-512", "govreport-hard-256", "govreport-hard-512",
                         "slides-easy-512", "needle-text-essay-256-d25", "needle-text-essay-256-d75"}
    assert "slides-easy-512" not in minilm  # MiniLM takes no images: skipped, and by default not a failure
    assert [{k: v for k, v in s.items() if k != "facts"} for s in report["skipped"]] == [
        {"model": "minilm", "pool": "slides-easy-512", "counts_as_failure": False,
         "reason": "minilm cannot take image (takes text)"}]
    facts = report["skipped"][0]["facts"]  # what the tables need to place the skip in its column
    assert (facts["task"], facts["dataset"], facts["difficulty"], facts["n_queries"]) == (
        "visual_grounding", "slides", "easy", 4)
    row = minilm["govreport-hard-512"]
    assert row["n_queries"] == 4 and row["n_candidates"] == 16 and row["embedded"] == 20
    assert set(row["metrics"]) == {"p@1", "p@5", "hit@5", "hit@k", "ndcg@10", "mrr"}
    lo, hi = row["metrics"]["p@1"]["ci95"]
    assert lo <= row["metrics"]["p@1"]["value"] <= hi
    # the fixture's 512 pools exceed MiniLM's 256-token window: every candidate is truncated, no query
    assert row["truncated"] == {"queries": 0, "candidates": 16}
    assert minilm["govreport-easy-256"]["truncated"]["candidates"] == 0
    assert report["models"][1]["identity"]["revision"]
    table = (output / "table.md").read_text()
    # pools at 256 and 512 tokens: none in the paper's Table 3 columns, all in the other lengths' table
    assert "## Table 3 layout: by task" not in table and "## Table 3 layout at other lengths" in table
    assert "| Model | slides Easy (512) | GovReport Easy (256, 512) | GovReport Hard (256, 512) | Avg |" in table
    assert report["table3"] == [] and report["table3_other_lengths"][-1]["column"] == "Avg"
    # MiniLM skipped the image pool: a mark in its column, and no Avg
    assert "| minilm | – (skipped 1/1 pools: minilm cannot take image (takes text)) |" in table
    assert table.split("| minilm |")[1].splitlines()[0].endswith("| – (lacks 1/3 columns) |")
    assert "| LS | minilm |" in table and "| Task | Model | Easy 256 | Easy 512 | Hard 256 | Hard 512 |" in table
    assert "needle-text-essay" in table
    # per-variant breakdowns from the audit config (the fixture's negatives carry no variant: their role)
    breakdown = bm25["govreport-hard-512"]["breakdown"]["by_variant"]
    assert set(breakdown) == {"hard_negative", "easy_negative"}
    assert breakdown["hard_negative"]["pairs"] == 4 and breakdown["easy_negative"]["pairs"] == 8
    assert 0 <= breakdown["hard_negative"]["positive_beats"] <= 1
    assert "| bm25 | govreport-hard-512 | hard_negative | hard_negative | 4 |" in table
    for png in ("p1_by_length.png", "heatmap_bm25_needle-text-essay.png", "heatmap_minilm_needle-text-essay.png"):
        assert (output / png).read_bytes()[:4] == b"\x89PNG"
    assert "Table 3 layout" not in capsys.readouterr().out  # --quiet: the table is in table.md, not printed


def test_bm25_ranks_by_words(tmp_path):
    # a pool where the query shares no word with any candidate: every score ties at 0 -> P@1 is chance
    pool = make_pool("x-easy-256", words=60)
    for query in pool.queries:
        query.text = "zzzz qqqq"
    bench = write_benchmark(tmp_path / "nowords", [pool, make_pool("y-easy-256", words=60)])
    code, report, _ = score(tmp_path, bench, "--model", "bm25")
    assert code == 0
    blind = by_pool(report, "bm25")["x-easy-256"]
    assert blind["metrics"]["p@1"]["value"] == pytest.approx(1 / blind["n_candidates"])
    assert blind["tied_positives"] == blind["n_queries"]
    assert by_pool(report, "bm25")["y-easy-256"]["metrics"]["p@1"]["value"] == 1.0


def test_explicit_text_model_on_image_pool_fails_unless_deselected(tmp_path, bench):
    code, report, _ = score(tmp_path, bench, "--model", "minilm", "--pools", "slides-*,govreport-easy-256")
    assert code == 1
    assert [s["pool"] for s in report["skipped"] if s["counts_as_failure"]] == ["slides-easy-512"]
    assert list(by_pool(report, "minilm")) == ["govreport-easy-256"]
    code, report, _ = score(tmp_path, bench, "--model", "minilm", "--pools", "slides-*,govreport-easy-256",
                            "--modalities", "text", name="out2")
    assert code == 0
    assert report["skipped"][0]["reason"] == "modality image deselected"


def test_bad_pools_are_skipped_with_reasons_and_the_run_goes_on(tmp_path):
    pools = [make_pool("a-easy-256", words=60), make_pool("b-easy-256", words=60),
             make_pool("c-easy-256", words=60, images=True, task="visual_grounding"),
             make_pool("d-easy-256", words=60)]
    bench = write_benchmark(tmp_path / "bad", pools)
    rewrite_table(bench, "a-easy-256", "corpus", drop_column("text"))
    rewrite_table(bench, "c-easy-256", "corpus", blank_images)
    rewrite_table(bench, "d-easy-256", "qrels", lambda t: t.slice(1))  # first query loses its positive
    code, report, _ = score(tmp_path, bench, "--model", "bm25")
    assert code == 1
    reasons = {s["pool"]: s["reason"] for s in report["skipped"]}
    assert reasons["a-easy-256"] == "layout: config 'a-easy-256-corpus' lacks columns ['text']"
    assert reasons["c-easy-256"].startswith("missing image in")
    assert re.fullmatch(r"layout: query '[0-9a-f]{20}' has 0 positives in qrels \(expected exactly 1\)",
                        reasons["d-easy-256"])
    assert list(by_pool(report, "bm25")) == ["b-easy-256"]


def test_user_errors_are_one_line(tmp_path, bench, capsys):
    assert main(["--dataset", str(tmp_path / "nope"), "--quiet"]) == 2
    assert main(["--dataset", str(bench), "--model", "word2vec", "--quiet"]) == 2
    assert main(["--dataset", str(bench), "--pools", "zzz*", "--quiet"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("mmle: error: ") for line in errors)
    assert "Traceback" not in "".join(errors)


def test_cache_makes_a_rerun_embed_nothing(tmp_path, bench):
    args = ("--model", "minilm", "--pools", "govreport-*-256")
    _, first, _ = score(tmp_path, bench, *args)
    _, second, _ = score(tmp_path, bench, *args, name="again")
    assert [r["embedded"] for r in first["results"]] == [20, 20]
    assert [(r["embedded"], r["cached"]) for r in second["results"]] == [(0, 20), (0, 20)]
    assert [r["metrics"] for r in first["results"]] == [r["metrics"] for r in second["results"]]
    # a different window is a different model: nothing reused
    _, third, _ = score(tmp_path, bench, *args, "--max-length", "64", name="short")
    assert [r["embedded"] for r in third["results"]] == [20, 20]
    assert all(r["truncated"]["candidates"] == 16 for r in third["results"])


def test_openai_server_scores_text_and_image_pools_and_resumes(tmp_path, bench, monkeypatch):
    from harness.models.openai_model import OpenAIModel

    with FakeEmbeddingServer() as server:
        spec = f"openai:fake-embedder@{server.base_url}"
        # interrupt the run after the first successful request: what was embedded stays cached
        real_post, calls = OpenAIModel._post, []

        def flaky_post(self, payload):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real_post(self, payload)

        monkeypatch.setattr(OpenAIModel, "_post", flaky_post)
        code, _, _ = score(tmp_path, bench, "--model", spec, "--batch-size", "4", "--pools", "govreport-easy-256")
        assert code == 130 and server.inputs == 4
        monkeypatch.setattr(OpenAIModel, "_post", real_post)
        code, report, _ = score(tmp_path, bench, "--model", spec, "--batch-size", "4", "--pools", "govreport-easy-256")
        assert code == 0
        assert (report["results"][0]["embedded"], report["results"][0]["cached"]) == (16, 4)

        code, report, _ = score(tmp_path, bench, "--model", spec, "--pools", "slides-*", "govreport-hard-256",
                                name="mm")
        assert code == 0
        rows = by_pool(report, spec)
        assert set(rows) == {"slides-easy-512", "govreport-hard-256"}
        assert rows["slides-easy-512"]["metrics"]["p@1"]["value"] == 1.0
        requests = server.requests
        code, report, _ = score(tmp_path, bench, "--model", spec, "--pools", "slides-*", "govreport-hard-256",
                                name="mm2")
        assert code == 0 and server.requests == requests  # everything from the cache


def test_openai_server_truncates_in_the_middle(tmp_path, bench):
    with FakeEmbeddingServer() as server:
        code, report, _ = score(tmp_path, bench, "--model", f"openai:fake@{server.base_url}", "--max-length", "64",
                                "--pools", "slides-*", "--no-cache")
    assert code == 0
    assert report["results"][0]["truncated"] == {"queries": 0, "candidates": 16}


def test_openai_server_failures_are_retried_then_skip_the_pool_in_one_line(tmp_path, bench, monkeypatch, capsys):
    """The openai: adapter rides the openai client: a 503 is retried (twice at most, waiting the
    server's Retry-After), a 400 is not; a pool whose request still fails is skipped with one
    line that never carries the API key."""
    secret = "sk-harness-0123456789-secret"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    pool = ("--pools", "govreport-easy-256", "--no-cache", "--batch-size", "32")
    with FakeEmbeddingServer() as server:
        spec = f"openai:fake-embedder@{server.base_url}"
        server.fail_next(2, status=503, retry_after="0.01")
        code, report, _ = score(tmp_path, bench, "--model", spec, *pool)
        assert code == 0 and server.requests == 4  # two failures, then the queries and the candidates
        assert report["results"][0]["embedded"] == 20

        server.fail_next(3, status=500, retry_after="0.01")
        code, report, _ = score(tmp_path, bench, "--model", spec, *pool, name="exhausted")
        assert server.requests == 7  # one try and two retries, then the pool is skipped
        assert code == 1 and report["skipped"][0]["reason"].startswith("server answered 500: ")

        server.fail_next(1, status=400)
        code, report, _ = score(tmp_path, bench, "--model", spec, *pool, name="client-error")
        assert server.requests == 8 and code == 1  # a client error is not asked again
    reason = report["skipped"][0]["reason"]
    assert reason.startswith("server answered 400: ") and "\n" not in reason
    with FakeEmbeddingServer() as gone:
        url = gone.base_url
    code, report, output = score(tmp_path, bench, "--model", f"openai:fake-embedder@{url}", *pool, name="gone")
    reason = report["skipped"][0]["reason"]
    assert code == 1 and reason.startswith(f"cannot reach {url}: ") and "refused" in reason and "\n" not in reason
    written = b"".join(p.read_bytes() for p in output.rglob("*") if p.is_file())  # predictions.parquet too
    assert secret.encode() not in written and secret not in "".join(capsys.readouterr())


def test_module_entry_point_help():
    result = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0
    for option in ("--dataset", "--model", "--pools", "--batch-size", "--output", "--cache-dir", "--max-length",
                   "--modalities", "--pooling", "--instruction"):
        assert option in result.stdout


def test_two_builds_with_one_name_are_never_confused(tmp_path):
    """`datasets` caches a local directory by dataset name and config alone; a rebuilt or second
    build of the same name must still be read from its own files."""
    from harness.scoring.data import Benchmark

    first = write_benchmark(tmp_path / "a" / "bench", [make_pool("x-easy-256", n_queries=3, words=40)])
    second = write_benchmark(tmp_path / "b" / "bench", [make_pool("x-easy-256", n_queries=5, words=40)])
    assert [p.n_queries for p in Benchmark(str(first)).pools] == [3]
    assert [p.n_queries for p in Benchmark(str(second)).pools] == [5]
    assert len(Benchmark(str(second)).load("x-easy-256-queries")) == 5
