"""The VLM2Vec-Qwen2VL-2B profile against the official inference code's golden vectors (tests/golden/vlm2vec.json,
written by tests/golden/make_vlm2vec.py from TIGER-AI-Lab/VLM2Vec's v1 code, the model card's MMEBModel,
load_processor and Qwen2_VL_process_fn, on the tiny Qwen2-VL of tests/golden/vlm2vec.py): the same weights,
the same inputs (text, one image, text with two images, four frames fed as images, an image under the minimum
budget), queries and documents; gate max abs difference <= 1e-5 in fp32. The official checkout is not needed:
the goldens are committed, and the fingerprints say when the tiny model or the inputs no longer match them.
A plausible wrong profile (instruction on the document side, wrong pooling, 32-px cells, the model's 3-D rope
index, the instruction before the images) fails the gate."""

from __future__ import annotations

import dataclasses

import pytest

from harness.profiles.catalogue import get_profile
from harness.profiles.schema import ImageLimits
from tests.support.golden_profiles import GoldenCheck, golden_fixtures
from tests.golden import vlm2vec as golden

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # one tiny model built and run on ten inputs per profile

GATE = 1e-5
check = GoldenCheck(golden)
NAME = "vlm2vec-qwen2vl-2b"


_offline, goldens, tiny = golden_fixtures(golden, golden.make_tiny_vlm2vec, "tiny-vlm2vec")


def _wrong(**changes):
    return dataclasses.replace(get_profile(NAME), **changes)


def test_the_goldens_match_this_tiny_model_and_these_inputs(tiny, goldens):
    """Fails when the tiny model or the inputs drift from what the official code ran on: regenerate the
    goldens then (docs/MODELS.md)."""
    check.assert_made_from(goldens, tiny)
    official = goldens["official"]
    assert official["repo"] == "TIGER-AI-Lab/VLM2Vec" and len(official["commit"]) == 40
    assert {"src/model.py", "src/model_utils.py"} <= set(official["paths"])
    assert official["commit"][:12] in get_profile(NAME).verified.reference
    assert get_profile(NAME).sources["pooling"].commit == official["commit"]
    assert goldens["ran_with"]["transformers"] == "4.46.3"  # the official code's pin (its requirements.txt)


@pytest.mark.parametrize("side", ["queries", "documents"])
def test_profile_matches_the_official_code(side, tiny, goldens):
    profile = get_profile(NAME)
    differences = check.differences(profile, tiny, goldens, side)
    check.assert_within_gate(profile, side, differences, GATE)  # the recorded figure: reported, not a bound


def test_the_profile_writes_the_official_token_ids(tiny, goldens):
    """Bare <|image_pad|> slots, a space after the leading images, the instruction before the text: token
    for token the official processor's input_ids (" Represent" is one token)."""
    model = check.model(get_profile(NAME), tiny)
    for side in golden.SIDES:
        for (kind, item), expected in zip(check.items(side), goldens[side]["input_ids"]):
            model.frame_sequences = kind.endswith("frames")
            assert model.encode_item(item).ids == expected, f"{side}, {kind}"


def test_instruction_on_the_document_side_fails_the_gate(tiny, goldens):
    """Documents handed the task instruction: the profile leaves it out (the model card's candidate is
    bare); a profile that puts it in is caught."""
    right = get_profile(NAME)
    handed = {"instruction": golden.INSTRUCTION}
    assert max(check.differences(right, tiny, goldens, "documents", **handed).values()) <= GATE
    wrong = check.differences(_wrong(document=right.query), tiny, goldens, "documents", **handed)
    assert min(wrong.values()) > 1e-3, wrong


def test_the_instruction_before_the_images_fails_the_gate(tiny, goldens):
    """The form this profile had before it was run side by side ("{instruction} {content}"): caught on
    every query with an image."""
    query = dataclasses.replace(get_profile(NAME).query, template="{instruction} {content}",
                                instruction_after_leading_images=False, after_leading_images="")
    differences = check.differences(_wrong(query=query), tiny, goldens, "queries",
                               kinds={"image", "text and images", "frames", "small image"})
    assert min(differences.values()) > 1e-3, differences


def test_wrong_pooling_fails_the_gate(tiny, goldens):
    right = get_profile(NAME)
    wrong = _wrong(document=dataclasses.replace(right.document, pooling="mean"))
    differences = check.differences(wrong, tiny, goldens, "documents")
    assert min(differences.values()) > 1e-3, differences


def test_32_pixel_cells_instead_of_28_fail_the_gate(tiny, goldens):
    """The 4..16384-cell budget written in 32-px cells: the images are resized to other sizes, caught."""
    cells = ImageLimits(patch_size=16, merge_size=2, min_pixels=4 * 32 * 32, max_pixels=16384 * 32 * 32)
    differences = check.differences(_wrong(images=cells), tiny, goldens, "queries", kinds={"image", "small image"})
    assert min(differences.values()) > 1e-3, differences


def test_the_models_own_3d_rope_index_fails_the_gate(tiny, goldens):
    """The official text has no <|vision_start|>, so its model's rope index finds no image and numbers
    every token in 1-D; the model's 3-D (mrope) positions for the image tokens are caught (the tiny model's
    two layers move less with positions than with inputs: over ten times the gate, not 1e-3)."""
    differences = check.differences(_wrong(positions="mrope"), tiny, goldens, "documents", kinds={"image", "small image"})
    assert min(differences.values()) > 10 * GATE, differences


def test_an_unverified_profile_says_so_in_its_results(tiny):
    """Every open paper model is now verified: an unverified copy of this one carries its reason in the
    pool's notes (the results' "profile unverified:" line)."""
    from harness.scoring.cache import EmbeddingCache
    from harness.models.adapters import RunSettings
    from tests.harness.profiles.test_profiles_qwen3_vl import FramePool

    settings = RunSettings(batch_size=8, progress=False)
    unverified = _wrong(verified=None, unverified_reason="not yet run side by side")
    scores = check.model(unverified, tiny).score_pool(FramePool(), EmbeddingCache(None), settings)
    assert "profile unverified: not yet run side by side" in scores.notes
    verified = check.model(get_profile(NAME), tiny).score_pool(FramePool(), EmbeddingCache(None), settings)
    assert not any(note.startswith("profile unverified:") for note in verified.notes)
