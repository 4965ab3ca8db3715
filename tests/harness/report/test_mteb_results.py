"""A run in mteb's results layout (issue 36 §7): read back by mteb's own ResultCache, the main
score the run's P@1 per pool, skipped pools absent, subset runs refused."""

import json

import pytest

from harness.cli import main as score_main
from harness.fixtures import make_pool, write_benchmark


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    pools = [make_pool(f"govreport-{d}-8192", difficulty=d, length=8192, words=60, n_queries=12) for d in ("easy", "hard")]
    pools.append(make_pool("mmdocrag-easy-8192", dataset="mmdocrag", task="multi_source_reasoning", length=8192,
                           words=60, n_queries=4, images=True))
    return write_benchmark(tmp_path_factory.mktemp("m") / "release", pools)


def test_mteb_reads_the_run_back_with_the_runs_p1_as_main_score(bench, tmp_path, capsys):
    from mteb import ResultCache
    from mteb.models.model_meta import ModelMeta

    out = tmp_path / "mteb"
    assert score_main(["--dataset", str(bench), "--output", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "c"),
                       "--quiet", "--no-plots", "--bootstrap", "50", "--model", "bm25,random",
                       "--modalities", "text", "--mteb-results", str(out)]) == 0
    run = json.loads((tmp_path / "run" / "results.json").read_text())
    printed = capsys.readouterr().out
    cache = ResultCache(cache_path=out)
    for model in ("bm25", "random"):
        folder = out / "results" / f"mmle__{model}" / "no_revision_available"
        assert (folder / "model_meta.json").is_file() and f"wrote {folder / 'MMLongEmbedRelease.json'}" in printed
        meta = ModelMeta.model_validate(json.loads((folder / "model_meta.json").read_text()))
        result = cache.load_task_result("MMLongEmbedRelease", meta)
        assert result.task_name == "MMLongEmbedRelease"
        got = {s["hf_subset"]: s for s in result.scores["test"]}
        mine = {r["pool"]: r for r in run["results"] if r["model"] == model}
        assert set(got) == set(mine) == {"govreport-easy-8192", "govreport-hard-8192"}  # the image pool: not run
        for pool, row in mine.items():
            assert got[pool]["main_score"] == pytest.approx(row["metrics"]["p@1"]["value"], abs=1e-9)
            assert got[pool]["tie_aware_precision_at_1"] == got[pool]["main_score"]
            assert got[pool]["tie_aware_ndcg_at_10"] == pytest.approx(row["metrics"]["ndcg@10"]["value"], abs=1e-6)  # mteb keeps 6 places
        assert result.get_score() == pytest.approx(sum(r["metrics"]["p@1"]["value"] for r in mine.values()) / 2)


def test_without_the_flag_nothing_is_written_and_a_subset_run_is_refused(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert score_main(["--dataset", str(bench), "--output", "run", "--cache-dir", "c", "--quiet", "--no-plots",
                       "--model", "bm25", "--modalities", "text"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "run"]
    capsys.readouterr()
    assert score_main(["--dataset", str(bench), "--output", "sub", "--quiet", "--model", "bm25", "--modalities", "text",
                       "--max-queries", "3", "--mteb-results", "mteb"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-queries run scores a sample" in err[0]
    assert not (tmp_path / "mteb").exists() and not (tmp_path / "sub").exists()
