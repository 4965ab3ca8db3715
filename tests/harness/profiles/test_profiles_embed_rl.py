"""The Embed-RL profiles against the official inference code's golden vectors (tests/golden/embed_rl.json,
written by tests/golden/make_embed_rl.py from ZoengHN/Embed-RL's UVRB evaluation on the tiny Embed-RL of
tests/golden/embed_rl.py): the same weights, the same inputs (text, one image, an ordered frame sequence
fed as video, an image under the minimum budget), queries and documents; gate max abs difference <= 1e-5
in fp32. The official checkout is not needed: the goldens are committed, and the weights and inputs
fingerprints say when the tiny model or the inputs no longer match them. A plausible wrong profile
(instruction on the document side, mean pooling, pooling the last token instead of <emb>, 28-px cells)
fails the gate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.profiles.catalogue import get_profile
from harness.profiles.schema import ImageLimits
from tests.support.golden_profiles import GoldenCheck, golden_fixtures
from tests.golden import embed_rl as golden

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # one tiny model built and run on eight inputs per profile

GATE = 1e-5
check = GoldenCheck(golden)
PROFILES = ("embed-rl-2b", "embed-rl-4b")


_offline, goldens, tiny = golden_fixtures(golden, golden.make_tiny_embed_rl, "tiny-embed-rl")


def test_the_goldens_match_this_tiny_model_and_these_inputs(tiny, goldens):
    """Fails when the tiny model (seed, config, tokenizer) or the inputs drift from what the official
    code ran on: regenerate the goldens then (docs/MODELS.md)."""
    check.assert_made_from(goldens, tiny)
    official = goldens["official"]
    assert official["repo"] == "ZoengHN/Embed-RL" and len(official["commit"]) == 40
    assert official["paths"] == ["eval/uvrb_eval/uvrb_dataset.py", "eval/uvrb_eval/eval_uvrb_recall.py"]
    assert official["commit"] in get_profile("embed-rl-2b").verified.reference or \
        official["commit"].startswith(get_profile("embed-rl-2b").sources["prompt"].commit)


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("side", ["queries", "documents"])
def test_profile_matches_the_official_code(name, side, tiny, goldens):
    profile = get_profile(name)
    differences = check.differences(profile, tiny, goldens, side)
    check.assert_within_gate(profile, f"{name} {side}", differences, GATE)  # the recorded figure: reported, not a bound


def test_the_profile_writes_the_official_token_ids(tiny, goldens):
    """The prompt, the <emb> turn, image slots and video blocks token for token (".Sum" is one token:
    the suffix is tokenized with the text before it, as the chat template's output is)."""
    model = check.model(get_profile("embed-rl-2b"), tiny)
    for side in golden.SIDES:
        for (kind, item), expected in zip(check.items(side), goldens[side]["input_ids"]):
            model.frame_sequences = kind.endswith("frames")
            assert model.encode_item(item).ids == expected, f"{side}, {kind}"


def test_a_tokenizer_without_emb_gets_it_added_and_weights_without_its_row_are_refused(tmp_path):
    """The official code adds <emb> to a tokenizer that lacks it (the embedding table has spare rows, as
    Qwen3-VL's 151936 do); so does the profile, one token. Weights without a row for it are not an
    Embed-RL checkpoint: a clear error, not an index error mid-run."""
    from harness.models.tiny_models import make_tiny, qwen3_tokenizer
    from mmlongembed.core.errors import UserError

    spare = golden.make_tiny_embed_rl(tmp_path / "spare")
    qwen3_tokenizer().save_pretrained(spare)  # the checkpoint's tokenizer without <emb>
    model = check.model(get_profile("embed-rl-2b"), spare)
    assert model._ids("<emb>") == [len(qwen3_tokenizer())]
    with pytest.raises(UserError, match="no embedding for <emb>"):
        check.model(get_profile("embed-rl-2b"), make_tiny(tmp_path / "plain", "qwen3_vl"))


def _wrong(**changes):
    return dataclasses.replace(get_profile("embed-rl-2b"), **changes)


def test_instruction_on_the_document_side_fails_the_gate(tiny, goldens):
    """Documents handed the task instruction: the profile leaves it out, as the official code embeds a
    candidate without its prompt; a profile that puts it in is caught."""
    right = get_profile("embed-rl-2b")
    handed = {"instruction": golden.INSTRUCTION}
    assert max(check.differences(right, tiny, goldens, "documents", **handed).values()) <= GATE
    wrong = check.differences(_wrong(document=right.query), tiny, goldens, "documents", **handed)
    assert min(wrong.values()) > 1e-3, wrong


@pytest.mark.parametrize("change", [{"pooling": "mean"}, {"after_pooled": ""}], ids=["mean", "last-token"])
def test_wrong_pooling_fails_the_gate(change, tiny, goldens):
    """Mean pooling, or the last token's state (the final newline) instead of <emb>'s."""
    right = get_profile("embed-rl-2b")
    wrong = _wrong(document=dataclasses.replace(right.document, **change))
    differences = check.differences(wrong, tiny, goldens, "documents")
    assert min(differences.values()) > 1e-3, differences


def test_28_pixel_cells_instead_of_32_fail_the_gate(tiny, goldens):
    """The 128..768-cell image budget written in Qwen2-VL's 28-px cells: the images are resized to
    other sizes and priced in other counts, caught."""
    cells = ImageLimits(patch_size=14, merge_size=2, min_pixels=64 * 28 * 28, max_pixels=16384 * 28 * 28,
                        pre_resize=(128 * 28 * 28, 768 * 28 * 28))
    differences = check.differences(_wrong(images=cells), tiny, goldens, "queries", kinds={"image", "small image"})
    assert min(differences.values()) > 1e-3, differences


def test_the_cache_key_names_the_suffix_and_the_pooled_token(tiny):
    """Two forms that differ only around the content (the pooled token) are two cache entries."""
    right = check.model(get_profile("embed-rl-2b"), tiny).identity()
    document = dataclasses.replace(get_profile("embed-rl-2b").document, after_pooled="")
    wrong = check.model(_wrong(document=document), tiny).identity()
    assert right["document_form"]["after_pooled"] == "<|im_end|>\n" and right["added_tokens"] == ["<emb>"]
    assert right != wrong


def test_a_frame_pool_feeds_its_candidates_as_video_text_first_batched_as_one_by_one(tiny):
    """Scored through the harness: a clip of five frames becomes the video input (padded to six, three
    two-frame groups stamped at 64 / 5 fps), three clips in one batch embed as each alone does, the
    model's own count prices the video as it is fed, and the notes say how frames were fed."""
    from harness.scoring.cache import EmbeddingCache
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel
    from tests.harness.profiles.test_profiles_qwen3_vl import FramePool

    pool = FramePool()
    settings = RunSettings(batch_size=8, progress=False)
    model = ProfileModel(get_profile("embed-rl-2b"), settings, str(tiny))
    scores = model.score_pool(pool, EmbeddingCache(None), settings)
    assert any("64 / frames fps" in note for note in scores.notes)
    encoded = model.encode_item(pool.candidates[0])
    text = model.tokenizer.decode(encoded.ids)
    assert [text.count(f"<{t} seconds>") for t in ("0.0", "0.2", "0.4")] == [1, 1, 1]
    assert not encoded.images and len(encoded.videos) == 1 and encoded.videos[0].shape[0] == 6
    together = model.embed(pool.candidates)[0]
    alone = np.concatenate([model.embed([c])[0] for c in pool.candidates])
    assert np.abs(together - alone).max() <= GATE
    own = scores.details["own_lengths"]["candidates"]
    assert own["own_max"] == len(encoded.ids) and own["over_window"] == 0
