"""Training overlap markers (harness.report.training_overlap): a leaderboard cell whose column's source is
in the model's declared training data is marked; other cells and models that declare nothing are not."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from harness.cli import main as score_main
from harness.fixtures import make_pool, write_benchmark
from harness.report.leaderboard import main as leaderboard_main
from harness.models.adapters import BM25Model
from harness.profiles.training_data import declared_training_data
from harness.report.training_overlap import OVERLAP_MARK, trained_on


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_columns_match_declared_sources_by_name():
    assert trained_on("HotpotQA Easy", ["MSMARCO", "HotpotQA"])
    assert trained_on("HotpotQA Hard", ["HotpotQAHardNegatives"])  # mteb's task names count too
    assert trained_on("MMLB Hard", ["MMLongBench-Doc"]) and trained_on("ActNet Easy", ["ActivityNet Captions"])
    assert not trained_on("GovReport Easy", ["HotpotQA"]) and not trained_on("MMDocRAG Easy", ["MMLongBench-Doc"])
    assert not trained_on("HotpotQA Easy", [])
    assert trained_on("NeedleBench", ["NeedleBench"]) and not trained_on("MM-NIAH*", ["NeedleBench"])


def test_declared_training_data_from_the_model_or_its_profile():
    assert declared_training_data(SimpleNamespace(training_data=("HotpotQA",))) == ["HotpotQA"]
    profile = SimpleNamespace(training_data=(SimpleNamespace(dataset="MSMARCO", stated_in="card"),))
    assert declared_training_data(SimpleNamespace(profile=profile)) == ["MSMARCO"]
    assert declared_training_data(BM25Model()) == []


def test_leaderboard_marks_the_cells_of_sources_a_model_trained_on(tmp_path, monkeypatch, capsys):
    pools = [make_pool("hotpotqa-easy-8192", dataset="hotpotqa", task="multi_source_reasoning", length=8192,
                       words=60),
             make_pool("govreport-easy-8192", length=8192, words=60)]
    root = write_benchmark(tmp_path / "b", pools)
    monkeypatch.setattr(BM25Model, "training_data", ("HotpotQA",), raising=False)
    output = tmp_path / "out"
    assert score_main(["--dataset", str(root), "--output", str(output), "--no-cache", "--quiet",
                       "--bootstrap", "20", "--model", "bm25,random"]) == 0
    models = {m["spec"]: m for m in json.loads((output / "results.json").read_text())["models"]}
    assert models["bm25"]["training_data"] == ["HotpotQA"] and models["random"]["training_data"] == []
    capsys.readouterr()
    assert leaderboard_main([str(output)]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("| Model"))
    columns = [c.strip() for c in header.split("|")[1:-1]]
    row = next(line for line in text.splitlines() if line.startswith("| bm25 |"))
    cells = dict(zip(columns, [c.strip() for c in row.split("|")[1:-1]]))
    assert cells["HotpotQA Easy"].endswith(OVERLAP_MARK) and OVERLAP_MARK not in cells["GovReport Easy"]
    assert OVERLAP_MARK not in next(line for line in text.splitlines() if line.startswith("| random |"))
    assert "declared training data" in text


def _profiled(name: str, training_data=None):
    """A model run through a profile, as harness.models.profile_model's ProfileModel holds it."""
    from harness.profiles.catalogue import get_profile

    profile = get_profile(name)
    if training_data is not None:
        profile = SimpleNamespace(name=profile.name, training_data=training_data)
    return SimpleNamespace(profile=profile)


def test_known_overlaps_naming_a_profile_count_as_its_training_data():
    # RzenEmbed's known overlap (mmlongembed/output/overlaps.json) marks HotpotQA even where the profile's own
    # list were silent; a profile no overlap names gains nothing
    assert "hotpotqa" in declared_training_data(_profiled("rzen-v2-7b", training_data=()))
    assert trained_on("HotpotQA Hard", declared_training_data(_profiled("rzen-v2-7b", training_data=())))
    assert declared_training_data(_profiled("qwen3-vl-2b", training_data=())) == []
    # a source the profile names already is not listed twice under another spelling
    gme = declared_training_data(_profiled("gme-qwen2-vl-2b"))
    assert [n.casefold() for n in gme].count("hotpotqa") == 1
    assert "evialign-evidence" in declared_training_data(_profiled("vlm2vec-qwen2vl-2b"))


def test_every_training_overlap_a_profile_declares_is_disclosed_in_overlaps_json():
    """The card and croissant.json disclose what the leaderboard marks: a Table 3 column a profile's own
    training list covers has a known training overlap naming that profile, and every profile an
    overlap names exists."""
    from harness.profiles.catalogue import PROFILES
    from harness.report.tables import PAPER_DATASETS
    from mmlongembed.output.disclosure import known_overlaps

    columns = [(dataset, f"{title} Easy") for pairs in PAPER_DATASETS.values() for dataset, title in pairs]
    named = {(o["source"], model) for o in known_overlaps([d for d, _ in columns] + ["evialign-evidence", "needle"])
             if o["kind"] == "training" for model in o.get("models", ())}
    assert {model for _, model in named} <= set(PROFILES)
    for profile in PROFILES.values():
        own = [t.dataset for t in profile.training_data]
        for dataset, column in columns:
            if trained_on(column, own):
                assert (dataset, profile.name) in named, f"{profile.name} declares {dataset}: not in overlaps.json"
