"""Each verified profile against its reference (mteb's own wrapper, tests/support/profile_references.py) on a tiny
randomly initialised Qwen2-VL: the same weights, the same inputs (text, one image, text and images, an
ordered frame sequence), queries and documents; gate max abs difference <= 1e-5 in fp32. And a plausible
wrong profile (instruction on the document side, wrong pooling, 32-px instead of 28-px limits) fails it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.scoring.data import Item
from harness.fixtures import png
from harness.profiles.catalogue import get_profile
from tests.support import profile_references as references

pytest.importorskip("mteb")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two tiny models and three mteb wrappers: about two minutes on a free CPU

GATE = 1e-5
INSTRUCTION = "Find the passage that answers the question."
RED, BLUE, GREEN, GREY = png((220, 20, 20)), png((20, 20, 220)), png((20, 200, 40)), png((128, 128, 128))
FRAMES = tuple(png((40 * k, 90, 200 - 30 * k)) for k in range(4))


def _inputs(interleaved: bool):
    """(text, images) pairs: text, one image, text with images, an ordered frame sequence. `interleaved`:
    the second image sits inside the text (GME's reference takes that); else images lead (Ops, Rzen)."""
    mixed = ("<|image|>A chart of rainfall. <|image|> And the legend below it." if interleaved
             else "<|image|><|image|>A chart of rainfall and the legend below it.")
    return [("What was the rainfall in May?", ()), ("<|image|>The red slide.", (RED,)),
            (mixed, (BLUE, GREEN)), ("<|image|>" * len(FRAMES), FRAMES)]


def _items(interleaved: bool, is_query: bool):
    return [Item(f"i{k}", text, images, INSTRUCTION if is_query else "", is_query)
            for k, (text, images) in enumerate(_inputs(interleaved))]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import Qwen2VLForConditionalGeneration

    from tests.support.fixtures_harness import qwen3_tokenizer, save_tiny_qwen2_vl

    return save_tiny_qwen2_vl(tmp_path_factory.mktemp("tiny-qwen2-vl-lm"), qwen3_tokenizer(),
                              Qwen2VLForConditionalGeneration)


def _profile_vectors(profile, directory, items, batch_size=1):
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel

    model = ProfileModel(profile, RunSettings(progress=False), str(directory))
    vectors = [model.embed(items[i:i + batch_size])[0] for i in range(0, len(items), batch_size)]
    vectors = np.concatenate(vectors)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # the harness normalises (DenseModel)


def _reference_items(items):
    """The reference wrappers take PIL images (mteb's datasets hand them decoded)."""
    return [(item.text, tuple(item.pil_images()) if item.images else (), item.instruction, item.is_query)
            for item in items]


REFERENCES = {  # profile -> (reference, whether it takes an image inside the text)
    "gme-qwen2-vl-2b": (references.gme_reference, True),
    "gme-qwen2-vl-7b": (references.gme_reference, True),
    "ops-mm-v1-2b": (references.ops_reference, False),
    "ops-mm-v1-7b": (references.ops_reference, False),
    "rzen-v2-7b": (references.rzen_reference, False),
}


@pytest.fixture(scope="module")
def reference_runs(tiny):
    return {}


def _reference(name, tiny, cache):
    make, interleaved = REFERENCES[name]
    if make not in cache:
        cache[make] = make(tiny)
    return cache[make], interleaved


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("is_query", [True, False], ids=["queries", "documents"])
def test_profile_matches_its_reference(name, is_query, tiny, reference_runs):
    profile = get_profile(name)
    reference, interleaved = _reference(name, tiny, reference_runs)
    items = _items(interleaved, is_query)
    ours = _profile_vectors(profile, tiny, items)
    theirs = reference(_reference_items(items))
    difference = np.abs(ours - theirs).max()
    assert difference <= GATE, f"{name} {'queries' if is_query else 'documents'}: max |diff| {difference:.2e}"
    assert profile.verified is not None and profile.verified.max_abs_diff <= GATE


def test_a_batch_of_mixed_lengths_matches_one_by_one(tiny, reference_runs):
    """Ops-MM's reference pads on the left; the profile pads on the right and reads the last real token."""
    reference, _ = _reference("ops-mm-v1-2b", tiny, reference_runs)
    items = [Item("a", "short", (), INSTRUCTION, True), Item("b", " ".join(["longer words"] * 20), (), INSTRUCTION, True)]
    ours = _profile_vectors(get_profile("ops-mm-v1-2b"), tiny, items, batch_size=2)
    theirs = reference(_reference_items(items), batch=True)
    assert np.abs(ours - theirs).max() <= GATE


def _wrong(name, **changes):
    return dataclasses.replace(get_profile(name), **changes)


def _off_by(profile, reference, items) -> float:
    return float(np.abs(_profile_vectors(profile, reference[1], items) - reference[0](_reference_items(items))).max())


def test_instruction_on_the_document_side_fails_the_gate(tiny, reference_runs):
    """Documents handed the task instruction: the profile keeps it out (GME's documents get the default
    system prompt); a profile that puts it in the document's system prompt is caught."""
    reference, interleaved = _reference("gme-qwen2-vl-2b", tiny, reference_runs)
    items = [dataclasses.replace(item, instruction=INSTRUCTION) for item in _items(interleaved, False)[:2]]
    right = get_profile("gme-qwen2-vl-2b")
    wrong = _wrong("gme-qwen2-vl-2b", document=right.query)
    assert _off_by(right, (reference, tiny), items) <= GATE
    assert _off_by(wrong, (reference, tiny), items) > 1e-3


def test_wrong_pooling_fails_the_gate(tiny, reference_runs):
    reference, interleaved = _reference("rzen-v2-7b", tiny, reference_runs)
    right = get_profile("rzen-v2-7b")
    wrong = _wrong("rzen-v2-7b", document=dataclasses.replace(right.document, pooling="mean"))
    items = _items(interleaved, False)[:2]
    assert _off_by(wrong, (reference, tiny), items) > 1e-3


def test_32_pixel_limits_instead_of_28_fail_the_gate(tiny, reference_runs):
    """Ops-MM's 256..1280-token budget written in 32-px cells (256*32*32 pixels, a common slip) resizes
    every small image to another grid: caught on the image inputs."""
    from harness.profiles.schema import ImageLimits

    reference, interleaved = _reference("ops-mm-v1-2b", tiny, reference_runs)
    wrong = _wrong("ops-mm-v1-2b", images=ImageLimits(patch_size=14, merge_size=2, min_pixels=256 * 32 * 32,
                                                    max_pixels=1280 * 32 * 32))
    items = _items(interleaved, True)[1:2]
    assert _off_by(wrong, (reference, tiny), items) > 1e-3


def test_positions_matter_gme_run_with_the_models_rope_index_fails(tiny, reference_runs):
    """GME's code runs the language model on input embeddings (1-D positions); a profile that runs the
    whole model (3-D rope index over image rows and columns) differs on image inputs."""
    reference, interleaved = _reference("gme-qwen2-vl-2b", tiny, reference_runs)
    wrong = _wrong("gme-qwen2-vl-2b", positions="mrope")
    items = _items(interleaved, True)[1:2]
    assert _off_by(wrong, (reference, tiny), items) > 1e-4
