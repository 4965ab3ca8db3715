"""ColQwen2.5 (a multi-vector profile) against its reference, mteb's ColQwen2_5Wrapper over colpali_engine's
ColQwen2_5 (tests/support/profile_references.py), on a tiny randomly initialised ColQwen2.5 (Qwen2.5-VL and its
128-d custom_text_proj): the same weights and inputs (text, one image, text with an image, text with
images, an ordered frame sequence), queries and documents; every token vector and every MaxSim score
within 1e-5 in fp32. Plausible wrong profiles fail the gate, and `mmle score --model colqwen2.5` scores
a release end to end with its own lengths."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import numpy as np
import pytest

from harness.scoring.data import Item
from harness.fixtures import make_pool, png, write_benchmark
from harness.profiles.catalogue import get_profile
from harness.profiles.schema import ImageLimits

pytest.importorskip("mteb")
if importlib.util.find_spec("colpali_engine") is None:  # imported through tests/support/profile_references.py's shim
    pytest.skip("colpali-engine is not installed", allow_module_level=True)
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a tiny model and colpali's: about a minute on a free CPU

GATE = 1e-5
NAME = "colqwen2.5"
RED, BLUE, GREEN = png((220, 20, 20)), png((20, 20, 220)), png((20, 200, 40))
FRAMES = tuple(png((40 * k, 90, 200 - 30 * k)) for k in range(4))
INPUTS = [("What was the rainfall in May?", ()), ("<|image|>", (RED,)), ("<|image|>The red slide.", (RED,)),
          ("<|image|>A chart of rainfall. <|image|> And the legend below it.", (BLUE, GREEN)),
          ("<|image|>" * len(FRAMES), FRAMES)]


def _items(is_query: bool):
    return [Item(f"i{k}", text, images, "Find the passage that answers the question." if is_query else "", is_query)
            for k, (text, images) in enumerate(INPUTS)]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from harness.models.tiny_models import make_tiny

    return make_tiny(tmp_path_factory.mktemp("tiny-colqwen") / "colqwen2_5", "colqwen2_5")


@pytest.fixture(scope="module")
def reference(tiny):
    from tests.support.profile_references import colqwen_reference

    return colqwen_reference(tiny)


def _model(tiny, profile=None, batch_size=8):
    from harness.models.adapters import RunSettings
    from harness.models.profile_multivector import MultiVectorProfileModel

    return MultiVectorProfileModel(profile or get_profile(NAME), RunSettings(progress=False, batch_size=batch_size),
                                   str(tiny))


def _reference_items(items):
    return [(item.text, tuple(item.pil_images()) if item.images else (), item.instruction, item.is_query)
            for item in items]


def _matrix_diff(ours, theirs) -> float:
    """Max abs difference of two lists of token matrices; infinite where a matrix's shape differs."""
    return max(float(np.abs(a - b).max()) if a.shape == b.shape else float("inf") for a, b in zip(ours, theirs))


def _unit(matrix):
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)  # the harness's cache stores unit rows


@pytest.mark.parametrize("is_query", [True, False], ids=["queries", "documents"])
def test_token_matrices_match_mtebs_colqwen_wrapper(tiny, reference, is_query):
    items = _items(is_query)
    ours, truncated = _model(tiny).embed_tokens(items)
    theirs = reference(_reference_items(items))
    assert not any(truncated)
    assert [m.shape[1] for m in ours] == [128] * len(items)
    difference = _matrix_diff([_unit(m) for m in ours], theirs)
    assert difference <= GATE, f"{NAME} {'queries' if is_query else 'documents'}: max |diff| {difference:.2e}"
    assert get_profile(NAME).verified is not None and get_profile(NAME).verified.max_abs_diff <= GATE


def test_maxsim_scores_match_colpalis_own_scoring(tiny, reference):
    """The harness's MaxSim on the profile's matrices against colpali's score_multi_vector on the
    reference's, pair by pair (colpali pads a batch of documents with zero vectors, which could win a max)."""
    from harness.models.multivector import maxsim

    queries, documents = _items(True), _items(False)
    model = _model(tiny)
    ours_q = [_unit(m) for m in model.embed_tokens(queries)[0]]
    ours_d = [_unit(m) for m in model.embed_tokens(documents)[0]]
    theirs_q, theirs_d = reference(_reference_items(queries)), reference(_reference_items(documents))
    ours = np.stack([maxsim(q, ours_d) for q in ours_q])
    theirs = np.array([[reference.score([q], [d])[0, 0] for d in theirs_d] for q in theirs_q])
    assert np.abs(ours - theirs).max() <= GATE * 10  # a sum of ~20-40 terms, each within 1e-5 relative
    assert np.ptp(theirs) > 1e-3  # the scores do differ between candidates


def test_a_batch_of_mixed_inputs_matches_one_by_one(tiny):
    """The scoring path embeds a batch at a time (right padding, every input its own row)."""
    items = _items(False)
    model = _model(tiny)
    batched = model.embed_tokens(items)[0]
    single = [model.embed_tokens([item])[0][0] for item in items]
    assert _matrix_diff(batched, single) <= GATE


def _wrong(**changes):
    return dataclasses.replace(get_profile(NAME), **changes)


def test_documents_without_the_query_prefix_fail_the_gate(tiny, reference):
    """mteb embeds a text document as it embeds a query ('Query: ' + text + 10 augmentation tokens); a
    profile that feeds documents bare, or with jina's 'Passage: ', is caught."""
    items = _items(False)[:1]
    theirs = reference(_reference_items(items))
    right = get_profile(NAME).document
    for template in ("{content}", "Passage: {content}" + "<|endoftext|>" * 10, "Query: {content}"):
        wrong = _wrong(document=dataclasses.replace(right, template=template))
        ours = [_unit(m) for m in _model(tiny, wrong).embed_tokens(items)[0]]
        assert _matrix_diff(ours, theirs) > 1e-3, template


def test_mean_pooling_instead_of_multi_vector_fails_the_gate(tiny, reference):
    """One mean vector per input (a dense reading of the same model) is no token matrix of the reference."""
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel

    form = dataclasses.replace(get_profile(NAME).query, pooling="mean")
    wrong = _wrong(query=form, document=form)
    items = _items(True)[:1]
    vectors, _ = ProfileModel(wrong, RunSettings(progress=False), str(tiny)).embed(items)
    theirs = reference(_reference_items(items))
    assert _matrix_diff([_unit(v[None, :]) for v in vectors], theirs) > 1e-3


def test_32_pixel_limits_instead_of_28_fail_the_gate(tiny, reference):
    """ColQwen2.5's 4..768-token budget written in 32-px cells gives small images another grid."""
    items = _items(False)[1:2]
    wrong = _wrong(images=ImageLimits(patch_size=14, merge_size=2, min_pixels=4 * 32 * 32,
                                      max_pixels=768 * 32 * 32))
    ours = [_unit(m) for m in _model(tiny, wrong).embed_tokens(items)[0]]
    assert _matrix_diff(ours, reference(_reference_items(items))) > 1e-3


def test_one_dimensional_positions_fail_the_gate_with_every_shape_right(tiny, reference):
    """ColQwen2.5 runs the whole Qwen2.5-VL forward (its 3-D rope index over an image's rows and columns);
    the language model run on input embeddings (1-D positions, GME's way) keeps every shape and is
    caught on the image inputs by value."""
    items = _items(False)[1:2]
    ours = [_unit(m) for m in _model(tiny, _wrong(positions="sequential")).embed_tokens(items)[0]]
    assert 1e-4 < _matrix_diff(ours, reference(_reference_items(items))) < float("inf")


def test_images_inside_the_text_input_instead_of_inputs_of_their_own_fail_the_gate(tiny, reference):
    """A text-and-image document read as one sequence (the image in the text's input) is not what mteb
    runs (the text's tokens, then the image's in colpali's visual prompt)."""
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel

    items = _items(False)[2:3]
    model = ProfileModel(get_profile(NAME), RunSettings(progress=False), str(tiny))
    encoded = model.encode_item(items[0])
    hidden = model._forward([encoded]).float()[0]
    projection = _model(tiny).projection
    with torch.no_grad():
        ours = [_unit(projection(hidden).numpy())]
    assert _matrix_diff(ours, reference(_reference_items(items))) > 1e-3


def test_score_colqwen_end_to_end_with_its_own_lengths(tmp_path, tiny):
    from tests.support.fixtures_harness import run_score

    bench = write_benchmark(tmp_path / "bench", [
        make_pool("slides-easy-512", dataset="slides", task="visual_grounding", words=80, images=True, n_queries=3),
        make_pool("govreport-easy-256", words=60, n_queries=3)])
    code, report, output = run_score(tmp_path, bench, "--model", NAME, "--model-path", f"{NAME}={tiny}",
                                     "--max-length", "60", "--no-plots", bootstrap=20)
    assert code == 0
    identity = report["models"][0]["identity"]
    assert identity["profile"] == NAME and identity["status"].startswith("verified")
    assert identity["pooling"] == {"query": "multi_vector", "document": "multi_vector"}
    for row in report["results"]:
        assert row["model"] == NAME and row["scoring"] == "maxsim"
        own = row["own_lengths"]
        assert own["window"] == 60 and own["image_cell_px"] == 28
        assert own["candidates"]["over_window"] == row["truncated"]["candidates"]
        assert own["queries"]["over_window"] == row["truncated"]["queries"]
        assert own["queries"]["own_mean"] > own["queries"]["yardstick_mean"]  # 'Query: ' and 10 augmentation tokens
        assert 0.0 <= row["metrics"]["p@1"]["value"] <= 1.0
        assert not any("unverified" in note for note in row.get("notes", []))
    assert any(row["truncated"]["candidates"] for row in report["results"])  # 60-word texts over 60 tokens
    assert "Each model's own count" in (output / "table.md").read_text()


def test_colqwen_needs_a_local_merged_checkpoint(tmp_path, tiny):
    from harness.models.adapters import RunSettings
    from harness.models.profile_multivector import MultiVectorProfileModel
    from mmlongembed.core.errors import UserError

    with pytest.raises(UserError, match="--model-path colqwen2.5=DIR"):
        MultiVectorProfileModel(get_profile(NAME), RunSettings(progress=False), None)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "x"}))
    with pytest.raises(UserError, match="a LoRA adapter; merge it"):
        MultiVectorProfileModel(get_profile(NAME), RunSettings(progress=False), str(tmp_path / "adapter"))
    from harness.models.tiny_models import make_tiny

    plain = make_tiny(tmp_path / "plain", "qwen2_5_vl")  # a Qwen2.5-VL without colpali's projection
    with pytest.raises(UserError, match="no custom_text_proj weights"):
        MultiVectorProfileModel(get_profile(NAME), RunSettings(progress=False), str(plain))
