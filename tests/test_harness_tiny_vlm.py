"""The transformers multimodal path end to end on CPU: a tiny randomly initialised Qwen2-VL built from
a config, with the real Qwen3 tokenizer, embeds an interleaved image-and-text pool."""

import json
from pathlib import Path

import numpy as np
import pytest


from harness.cli import main
from tests._fixtures_harness import make_pool, png, qwen3_tokenizer, save_tiny_qwen2_vl, write_benchmark

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # per test, not at import: a module-level setting would leak into other test modules
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_qwen2_vl(tmp_path_factory) -> Path:
    from transformers import Qwen2VLModel

    return save_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny-qwen2-vl"), qwen3_tokenizer(), Qwen2VLModel)


def test_tiny_qwen2_vl_embeds_interleaved_pool(tmp_path, tiny_qwen2_vl):
    bench = write_benchmark(tmp_path / "mm", [
        make_pool("slides-easy-512", dataset="slides", task="visual_grounding", words=80, images=True, n_queries=3),
        make_pool("govreport-easy-256", words=60, n_queries=3)])
    output = tmp_path / "out"
    code = main(["--dataset", str(bench), "--model", f"hf:{tiny_qwen2_vl}", "--pooling", "last", "--batch-size", "4",
                 "--max-length", "96", "--output", str(output), "--cache-dir", str(tmp_path / "cache"), "--quiet",
                 "--bootstrap", "50", "--no-plots"])
    assert code == 0
    report = json.loads((output / "results.json").read_text())
    rows = {r["pool"]: r for r in report["results"]}
    assert set(rows) == {"slides-easy-512", "govreport-easy-256"} and not report["skipped"]
    mixed = rows["slides-easy-512"]
    assert mixed["embedded"] == 3 + 12
    assert mixed["truncated"]["candidates"] == 12  # ~130 tokens each against a 96-token window
    assert report["models"][0]["identity"]["pooling"] == "last"


def test_images_reach_the_model_and_truncation_keeps_them_whole(tiny_qwen2_vl):
    from harness.data import Item
    from harness.models import HFModel, RunSettings

    model = HFModel(str(tiny_qwen2_vl), RunSettings(max_length=40, pooling="mean"))
    assert model.modalities == {"text", "image"}
    red, blue = png((220, 20, 20)), png((20, 20, 220))
    text = "alpha beta gamma <|image|> delta epsilon"
    vectors, flags = model.embed([Item("a", text, (red,)), Item("b", text, (blue,)),
                                  Item("c", text.replace("<|image|>", ""))])
    assert np.isfinite(vectors).all() and flags == [False, False, False]
    assert not np.allclose(vectors[0], vectors[1])  # the image changed the embedding
    # the image's cost is what the model's own image processor makes of it, plus vision start/end
    units, costs = model._units(Item("a", text, (red,)))
    image_cost = next(c for u, c in zip(units, costs) if isinstance(u, tuple))
    grid = model.image_processor(images=Item("a", text, (red,)).pil_images(), return_tensors="pt")["image_grid_thw"]
    assert image_cost == 2 + int(grid.prod()) // 4
    # an image in the middle of a long input is dropped whole: then its colour cannot matter
    long_text = " ".join(["word"] * 60) + " <|image|> " + " ".join(["tail"] * 60)
    vectors, flags = model.embed([Item("a", long_text, (red,)), Item("b", long_text, (blue,))])
    assert flags == [True, True]
    assert np.allclose(vectors[0], vectors[1], atol=1e-6)
