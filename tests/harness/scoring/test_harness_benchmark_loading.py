"""harness.scoring.data.Benchmark reads a build through `datasets` as `load_dataset(path, config)` does, with the
card's configs resolved once per benchmark (a release card lists thousands of configs, and
`load_dataset_builder` parses the card again on every call)."""

from __future__ import annotations

import datasets
import pytest

from harness.scoring.data import Benchmark
from harness.fixtures import make_pool, write_benchmark


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def test_every_config_reads_as_load_dataset_reads_it_with_the_card_parsed_once(tmp_path, monkeypatch):
    pools = [make_pool("govreport-easy-256", words=40), make_pool("hotpotqa-easy-256", dataset="hotpotqa",
                                                                 task="multi_source_reasoning", words=40)]
    root = write_benchmark(tmp_path / "bench", pools)
    configs = ["pools"] + [f"{p.name}-{part}" for p in pools for part in ("corpus", "queries", "qrels")]
    expected = {c: datasets.load_dataset(str(root), c, split="test").to_list() for c in configs}

    import datasets.load as load

    made = []
    original = load.dataset_module_factory
    monkeypatch.setattr(load, "dataset_module_factory", lambda *a, **k: made.append(a) or original(*a, **k))
    benchmark = Benchmark(str(root))
    for config in configs:
        assert benchmark.load(config).to_list() == expected[config], config
    assert len(made) == 1  # one view of the card for every config read
