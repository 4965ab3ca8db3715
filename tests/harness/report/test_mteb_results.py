"""A run in mteb's results layout (issue 36 §7): read back by mteb's own ResultCache, the main
score the run's P@1 per pool, skipped pools absent, subset runs refused."""

import json
import sys

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


def test_a_run_over_two_releases_writes_one_task_each_with_its_own_pools_and_revision(tmp_path, capsys):
    from mteb import TaskResult

    releases = {name: write_benchmark(tmp_path / "out" / name, [make_pool(f"{name}-easy-8192", dataset=name, length=8192,
                                                                          words=60, n_queries=6)])
                for name in ("govreport", "hotpotqa")}
    out = tmp_path / "mteb"
    assert score_main(["--dataset", *map(str, releases.values()), "--output", str(tmp_path / "run"), "--cache-dir",
                       str(tmp_path / "c"), "--quiet", "--no-plots", "--bootstrap", "20", "--model", "bm25",
                       "--mteb-results", str(out)]) == 0
    capsys.readouterr()
    run = json.loads((tmp_path / "run" / "results.json").read_text())
    digest = {d["ref"]: d["data_files_sha256"] for d in run["datasets"]}
    folder = out / "results" / "mmle__bm25" / "no_revision_available"
    assert sorted(p.name for p in folder.glob("MMLongEmbed*.json")) == ["MMLongEmbedGovreport.json",
                                                                        "MMLongEmbedHotpotqa.json"]
    for name, release in releases.items():
        result = TaskResult.from_disk(folder / f"MMLongEmbed{name.title()}.json")
        (row,) = [r for r in run["results"] if r["benchmark"] == str(release)]
        assert [s["hf_subset"] for s in result.scores["test"]] == [f"{name}-easy-8192"]  # no pool of the other release
        assert result.scores["test"][0]["main_score"] == pytest.approx(row["metrics"]["p@1"]["value"], abs=1e-9)
        assert result.dataset_revision == digest[str(release)]
    assert len(set(digest.values())) == 2  # the two releases' revisions tell them apart


@pytest.mark.parametrize("problem, expected", [
    ("file", "is a file, not a folder"),
    ("same task", "would both be mteb task MMLongEmbedGovreport"),
    ("no mteb", "pip install 'mmlongembed[mteb]'"),
])
def test_what_would_stop_the_mteb_files_is_one_line_before_anything_is_scored(bench, tmp_path, capsys, monkeypatch,
                                                                               problem, expected):
    monkeypatch.chdir(tmp_path)
    datasets, target = [str(bench)], tmp_path / "mteb"
    if problem == "file":
        target.write_text("not a folder")
    if problem == "same task":  # two releases whose folders share a name: one task file would hold both
        datasets = [str(write_benchmark(tmp_path / side / "govreport", [make_pool(f"govreport-{side}-8192", length=8192,
                                                                                  words=60, n_queries=4)]))
                    for side in ("a", "b")]
    if problem == "no mteb":
        monkeypatch.setitem(sys.modules, "mteb", None)  # what `import mteb` meets without the extra
    assert score_main(["--dataset", *datasets, "--output", "run", "--quiet", "--model", "bm25",
                       "--mteb-results", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run").exists()


def test_a_pool_a_model_was_not_measured_on_has_no_entry_for_that_model(tmp_path, capsys):
    from mteb import TaskResult

    needle = make_pool("needle-image-8192", length=8192, words=60, n_queries=4)
    needle.facts = {**needle.facts, "needle_modality": "image"}  # BM25 reads no image: not measured there
    release = write_benchmark(tmp_path / "release", [make_pool("govreport-easy-8192", length=8192, words=60,
                                                               n_queries=4), needle])
    out = tmp_path / "mteb"
    assert score_main(["--dataset", str(release), "--output", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "c"),
                       "--quiet", "--no-plots", "--bootstrap", "20", "--model", "bm25,random",
                       "--mteb-results", str(out)]) == 0
    capsys.readouterr()
    run = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [(s["model"], s["pool"]) for s in run["skipped"] if s.get("not_measured")] == [("bm25", "needle-image-8192")]
    subsets = {model: {s["hf_subset"] for s in TaskResult.from_disk(
        out / "results" / f"mmle__{model}" / "no_revision_available" / "MMLongEmbedRelease.json").scores["test"]}
        for model in ("bm25", "random")}
    assert subsets == {"bm25": {"govreport-easy-8192"}, "random": {"govreport-easy-8192", "needle-image-8192"}}
