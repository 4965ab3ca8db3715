"""The transformers multimodal path end to end on CPU: a tiny randomly initialised Qwen2-VL built from
a config, with the real Qwen3 tokenizer, embeds an interleaved image-and-text pool."""

import json
from pathlib import Path

import numpy as np
import pytest


from harness.cli import main
from harness.fixtures import make_pool, png, write_benchmark
from tests.support.tiny_vlm import make_tiny_qwen2_vl

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # per test, not at import: a module-level setting would leak into other test modules
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_qwen2_vl(tmp_path_factory) -> Path:
    return make_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny-qwen2-vl"))


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
    from harness.scoring.data import Item
    from harness.models.adapters import HFModel, RunSettings

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


@pytest.mark.parametrize("name", ["mmlongbench", "mmdocrag"])
def test_tiny_qwen2_vl_scores_document_builds(name, tmp_path, tiny_qwen2_vl):
    """A page-image pool (mmlongbench: placeholders only) and an interleaved pool (mmdocrag) from
    the builders' own fixture builds, scored end to end with BM25 and the tiny VLM."""
    pytest.importorskip("pypdfium2")
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import registered

    builder = registered()[name]()
    config = builder.example_config(tmp_path / "sources")
    bench = run_build(builder, config, tmp_path / "build", progress=False)
    output = tmp_path / "out"
    shortest = f"*-{'512' if name == 'mmlongbench' else '1k'}"  # the shortest length of each fixture build
    code = main(["--dataset", str(bench), "--pools", shortest, "--model", f"bm25,hf:{tiny_qwen2_vl}",
                 "--pooling", "mean",
                 "--batch-size", "4", "--max-length", "2048", "--output", str(output), "--cache-dir",
                 str(tmp_path / "cache"), "--quiet", "--bootstrap", "20", "--no-plots"])
    assert code == 0
    report = json.loads((output / "results.json").read_text())
    rows = [r for r in report["results"] if r["pool"].startswith(name)]
    if name == "mmlongbench":
        # placeholders only: BM25 receives no word of any candidate, so it measures nothing there
        # (issue 25 §2): not measured, no failure, and no number
        assert {(s["model"], s["pool"]) for s in report["skipped"]} == {
            ("bm25", f"mmlongbench-{d}-512") for d in ("easy", "hard")}
        assert all(s["not_measured"] and not s["counts_as_failure"] for s in report["skipped"])
        assert {r["model"] for r in rows} == {f"hf:{tiny_qwen2_vl}"} and len(rows) == 2
    else:
        assert not report["skipped"]
        assert {r["model"] for r in rows} == {"bm25", f"hf:{tiny_qwen2_vl}"}
        assert len(rows) == 2 * 2  # easy and hard, two models
    for row in rows:
        assert row["n_candidates"] == 4 * row["n_queries"] and 0 <= row["metrics"]["p@1"]["value"] <= 1
        if row["model"] != "bm25":
            assert row["truncated"]["candidates"] == 0  # every page and quote reached the model


def test_kept_characters_are_what_middle_truncation_keeps_of_an_interleaved_input(tiny_qwen2_vl):
    """The characters of an input a transformers model keeps (issue 25 §2's needle-cut marks read
    them): head and tail of the text, an image as its whole placeholder or not at all."""
    from harness.scoring.data import Item
    from harness.models.adapters import HFModel, RunSettings
    from harness.scoring.truncation import range_kept

    model = HFModel(str(tiny_qwen2_vl), RunSettings(max_length=40, pooling="mean"))
    words = " ".join(f"w{k}" for k in range(60))
    text = f"start {words} <|image|> middle {words} end"
    item = Item("a", text, (png((220, 20, 20)),))
    kept = model.kept_characters(item)
    assert len(kept) == 2 and kept[0][0] == 0 and kept[1][1] == len(text)
    assert range_kept((0, 5), kept) and range_kept((len(text) - 3, len(text)), kept)  # "start", "end"
    middle = text.index("middle")
    assert not range_kept((middle, middle + 6), kept)
    placeholder = text.index("<|image|>")
    assert not range_kept((placeholder, placeholder + len("<|image|>")), kept)
    short = Item("b", "alpha <|image|> beta", (png((20, 20, 220)),))
    assert model.kept_characters(short) == [(0, len(short.text))]  # nothing has to go
