"""Scoring at scale gives the plain run's figures: token budgets, loader workers, several devices (CPU
processes here), Ray with two local actors (one killed mid-run), and the out-of-memory back-off; every
result row carries its throughput."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.support.fixtures_harness import run_score, standard_benchmark

TINY = "gme-qwen2-vl-2b"
THROUGHPUT_FIELDS = ("inputs", "own_tokens", "padded_tokens", "wall_s", "tokens_per_s", "batches", "backoffs",
                     "peak_memory_bytes", "peak_memory_source", "devices")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from harness.models.tiny_models import make_tiny

    root = tmp_path_factory.mktemp("executors")
    bench = standard_benchmark(root / "bench")
    tiny = make_tiny(root / "tiny", "qwen2_vl")
    models = ["--model", f"bm25,minilm,{TINY}", "--model-path", f"{TINY}={tiny}"]
    code, report, output = run_score(root, bench, *models, name="plain")
    assert report is not None and code == 1  # MiniLM cannot take the image pool: counted, as in any run
    return bench, models, figures(report, output), root


def figures(report: dict, output) -> dict:
    """Per (model, pool): P@1 per query, ties, and each query's positive rank range."""
    ranks = pq.read_table(output / "predictions.parquet",
                          columns=["model", "pool", "_id", "positive_rank_best", "positive_rank_worst"]).to_pylist()
    by_row = {}
    for row in report["results"]:
        by_row[(row["model"], row["pool"])] = {
            "p@1": row["per_query"]["p@1"], "tied": row["tied_positives"], "all_tied": row["all_tied"],
            "ranks": sorted((r["_id"], r["positive_rank_best"], r["positive_rank_worst"]) for r in ranks
                            if (r["model"], r["pool"]) == (row["model"], row["pool"]))}
    return by_row


def _run(setup, tmp_path, *extra, name="run"):
    bench, models, plain, _ = setup
    code, report, output = run_score(tmp_path, bench, *models, *extra, name=name)
    assert report is not None, f"no results.json (exit {code})"
    return code, report, figures(report, output), plain


@pytest.mark.parametrize("budget", ["48", "700", "100000"])
def test_figures_do_not_depend_on_the_token_budget(setup, tmp_path, budget):
    _, report, scored, plain = _run(setup, tmp_path, "--batch-tokens", budget)
    assert scored == plain
    calls = {row["pool"]: row["throughput"]["batches"] for row in report["results"] if row["model"] == TINY}
    if budget == "48":  # below any input: one input per call
        assert all(n == 20 for n in calls.values())


def test_every_row_carries_its_throughput(setup):
    _, _, _, root = setup
    report = json.loads((root / "plain" / "results.json").read_text())
    assert report["results"]
    for row in report["results"]:
        throughput = row["throughput"]
        assert all(field in throughput for field in THROUGHPUT_FIELDS), row["model"]
        assert throughput["inputs"] == row["embedded"]
        assert throughput["peak_memory_bytes"] > 0 and throughput["wall_s"] >= 0
        if row["model"] != "bm25":  # BM25 pads nothing; the embedders' calls pad to their longest input
            assert throughput["padded_tokens"] >= throughput["own_tokens"] > 0
            assert throughput["batches"] >= 2  # queries and candidates are calls of their own
    table = (root / "plain" / "table.md").read_text()
    assert "tokens/s by length" in table and TINY in table


def test_out_of_memory_backs_off_finishes_and_is_recorded(setup, tmp_path):
    _, report, scored, plain = _run(setup, tmp_path, "--batch-tokens", "4000", "--simulate-memory-tokens", "600")
    assert scored == plain
    backoffs = [b for row in report["results"] if row["model"] == TINY for b in row["throughput"]["backoffs"]]
    # only calls past the (simulated) memory failed, and each halved the budget
    assert backoffs and all(b["padded_tokens"] > 600 and b["budget_after"] == b["padded_tokens"] // 2
                            for b in backoffs)
    assert report["settings"]["simulate_memory_tokens"] == 600


def test_an_input_that_cannot_fit_alone_skips_its_pool_naming_it(setup, tmp_path):
    code, report, _, _ = _run(setup, tmp_path, "--simulate-memory-tokens", "20", "--pools", "govreport-easy-256")
    reasons = [s["reason"] for s in report["skipped"] if s["model"] == TINY]
    assert code == 1 and reasons and "does not fit" in reasons[0] and "tokens)" in reasons[0]


def test_loader_workers_give_the_same_figures(setup, tmp_path):
    _, report, scored, plain = _run(setup, tmp_path, "--loader-workers", "2")
    assert scored == plain
    assert report["settings"]["loader_workers"] == 2


def test_two_devices_give_one_device_s_figures_and_resume(setup, tmp_path):
    code, first, _, _ = _run(setup, tmp_path, "--devices", "cpu,cpu", "--pools", "govreport-easy-*", name="first")
    embedded_first = {(r["model"], r["pool"]): r["embedded"] for r in first["results"]}
    assert all(n > 0 for (model, _), n in embedded_first.items() if model != "bm25")
    # the same cache: a rerun over every pool embeds only the pools the first left out; each device's
    # process has loader workers of its own (processes that a device's process starts)
    _, report, scored, plain = _run(setup, tmp_path, "--devices", "cpu,cpu", "--loader-workers", "1", name="second")
    assert scored == plain
    for row in report["results"]:
        if row["model"] != "bm25" and row["pool"].startswith("govreport-easy-"):
            assert row["embedded"] == 0 and row["cached"] == 20
    spread = [row["throughput"]["devices"] for row in report["results"] if row["model"] == TINY and row["embedded"]]
    assert spread and all(devices == ["cpu"] or len(devices) == 2 for devices in spread)


def test_ray_with_two_actors_one_killed_mid_run_gives_the_plain_figures(setup, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    fault = tmp_path / "actor-killed"
    monkeypatch.setenv("MMLE_RAY_FAULT_FILE", str(fault))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _, report, scored, plain = _run(setup, tmp_path, "--executor", "ray", "--replicas", "2")
    assert fault.exists()  # an actor ended its process on its second row; Ray restarted it and retried the row
    assert scored == plain
    assert report["settings"]["executor"] == "ray"
    # each row's inputs and own tokens are the plain run's: the joint job's costs go to the pools they belong to
    plain_report = json.loads((setup[3] / "plain" / "results.json").read_text())
    assert cost_by_row(report) == cost_by_row(plain_report)


def cost_by_row(report: dict) -> dict:
    return {(row["model"], row["pool"]): (row["embedded"], row["cached"], row["throughput"]["own_tokens"])
            for row in report["results"] if row["model"] == TINY}


def test_one_job_over_several_pools_embeds_a_shared_input_once(tmp_path):
    """An Easy and a Hard pool ask the same questions: the joint job (Ray's) embeds each question once, for
    the first pool, as a pool-by-pool run would, so no row's throughput counts another's inputs."""
    from harness.fixtures import make_pool, write_benchmark
    from harness.models.adapters import RunSettings
    from harness.runner import prefill
    from harness.scoring.cache import EmbeddingCache
    from harness.scoring.data import Benchmark

    easy = make_pool("govreport-easy-256", length=256, words=60)
    hard = make_pool("govreport-hard-256", difficulty="hard", length=256, words=60)
    for shared, query in zip(easy.queries, hard.queries):
        query.text = shared.text
    benchmark = Benchmark(str(write_benchmark(tmp_path / "bench", [easy, hard])))

    class RecordingExecutor:
        def __init__(self):
            self.jobs = []

        def embed_many(self, model, jobs, cache, key_of_model, progress=None):
            self.jobs = [(pool.info.name, work.side, [work.keys[i] for i in work.missing]) for pool, work in jobs]
            return {}

    class TextModel:
        executor = RecordingExecutor()
        prefilled = {}
        settings = RunSettings(progress=False)
        spec = "text"

        def identity(self):
            return {"name": "text"}

        def begin_pool(self, pool):
            pass

        def format_query(self, item):
            return item

        def format_candidate(self, item):
            return item

    model = TextModel()
    cache = EmbeddingCache(None)
    try:
        prefill(model, benchmark, benchmark.pools, cache, log=print)
    finally:
        cache.close()
    sent = {(pool, side): keys for pool, side, keys in model.executor.jobs}
    assert len(sent[("govreport-easy-256", "queries")]) == len(easy.queries)
    assert ("govreport-hard-256", "queries") not in sent  # every question already planned for the Easy pool
    assert len(sent[("govreport-hard-256", "candidates")]) == len(hard.candidates)
    everything = [key for keys in sent.values() for key in keys]
    assert len(everything) == len(set(everything))


def test_a_replica_that_cannot_load_skips_every_pool_without_loading_again(setup, tmp_path):
    from harness.execution.devices import DeviceExecutor
    from harness.models.adapters import RunSettings
    from harness.scoring.cache import EmbeddingCache
    from harness.scoring.data import Benchmark, ModelError
    from harness.scoring.embedding import SideWork

    bench = Benchmark(str(setup[0]))
    pool = bench.open_pool(bench.pools[0])
    cache = EmbeddingCache(tmp_path / "cache")
    executor = DeviceExecutor("no-such-model", RunSettings(progress=False), ["cpu"], tmp_path / "cache")
    work = SideWork("queries", ["k0"], [10], [0])

    class Named:
        spec = "no-such-model"

    try:
        with pytest.raises(ModelError, match="cannot load no-such-model"):
            executor.embed(Named(), pool, work, cache, "m", None)
        started = [worker[1] for worker in executor._workers]
        with pytest.raises(ModelError, match="cannot load no-such-model"):
            executor.embed(Named(), pool, work, cache, "m", None)
        assert [worker[1] for worker in executor._workers] == started  # no process started to load it again
    finally:
        executor.close()
        cache.close()
