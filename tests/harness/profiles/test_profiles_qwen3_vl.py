"""The Qwen3-VL-Embedding profiles against the official inference code's golden vectors
(tests/golden/qwen3_vl.json, written by tests/golden/make_qwen3_vl.py from QwenLM/Qwen3-VL-Embedding's
embedder on the suite's tiny Qwen3-VL): the same weights, the same inputs (text, one image, text and
images, an ordered frame sequence fed as video, an image under the minimum budget), queries and
documents; gate max abs difference <= 1e-5 in fp32. The official checkout is not needed: the goldens
are committed, and the weights and inputs fingerprints say when the tiny model or the inputs no longer
match them. A plausible wrong profile (instruction on the document side, mean pooling, 28-px cells)
fails the gate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.scoring.data import InMemoryPool, Item
from harness.profiles.catalogue import get_profile
from harness.profiles.schema import ImageLimits
from tests.support.golden_profiles import GoldenCheck, golden_fixtures
from tests.golden import qwen3_vl as golden

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # one tiny model built and run on ten inputs per profile: about a minute

GATE = 1e-5
check = GoldenCheck(golden)
PROFILES = ("qwen3-vl-2b", "qwen3-vl-8b")


_offline, goldens, tiny = golden_fixtures(golden, golden.make_tiny_qwen3_vl, "tiny-qwen3-vl")


def test_the_goldens_match_this_tiny_model_and_these_inputs(tiny, goldens):
    """Fails when the tiny model (seed, config, tokenizer) or the inputs drift from what the official
    code ran on: regenerate the goldens then (docs/MODELS.md)."""
    check.assert_made_from(goldens, tiny)
    official = goldens["official"]
    assert (official["repo"], official["path"]) == ("QwenLM/Qwen3-VL-Embedding", "src/models/qwen3_vl_embedding.py")
    assert len(official["commit"]) == 40


def test_the_weights_check_tolerates_another_cpus_last_bits_not_another_model(goldens):
    """A CPU that draws the seeded weights a few ULPs apart still runs the goldens' model; a changed
    tensor, shape or vocabulary is another model."""
    import copy

    recorded = goldens["weights"]
    last_bits = copy.deepcopy(recorded)
    for figures in last_bits["tensors"].values():
        figures[2:] = [value * (1 + 1e-7) for value in figures[2:]]
    assert golden.weights_differ(recorded, last_bits) == []
    name = sorted(recorded["tensors"])[0]
    other = copy.deepcopy(recorded)
    other["tensors"][name][3] *= 1.01
    assert golden.weights_differ(recorded, other) == [name]
    # a sum that cancels to near zero (lm_head's -7.36, norm 44) is judged on its norm's scale: torch's
    # sampler without AVX2 (ATEN_CPU_CAPABILITY=default) moves it by 2.4e-4 of itself, another seed by ~the norm
    for moved, differ in ((recorded["tensors"]["lm_head.weight"][2] * 3e-4, []),
                          (recorded["tensors"]["lm_head.weight"][3] ** 0.5, ["lm_head.weight"])):
        other = copy.deepcopy(recorded)
        other["tensors"]["lm_head.weight"][2] += moved
        assert golden.weights_differ(recorded, other) == differ
    other = copy.deepcopy(recorded)
    other["vocab_sha256"] = "0" * 64
    assert golden.weights_differ(recorded, other) == ["the tokenizer's vocabulary"]


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("side", ["queries", "documents"])
def test_profile_matches_the_official_code(name, side, tiny, goldens):
    profile = get_profile(name)
    differences = check.differences(profile, tiny, goldens, side)
    check.assert_within_gate(profile, f"{name} {side}", differences, GATE)  # the recorded figure: reported, not a bound


def test_the_profile_writes_the_official_token_ids(tiny, goldens):
    """The prompt, image slots and video blocks token for token (the vectors' gate could hide a
    dropped token whose state happens to be close)."""
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel

    model = ProfileModel(get_profile("qwen3-vl-2b"), RunSettings(progress=False), str(tiny))
    for side in golden.SIDES:
        for (kind, item), expected in zip(check.items(side), goldens[side]["input_ids"]):
            model.frame_sequences = kind == "frames"
            assert model.encode_item(item).ids == expected, f"{side}, {kind}"


def _wrong(**changes):
    return dataclasses.replace(get_profile("qwen3-vl-2b"), **changes)


def test_instruction_on_the_document_side_fails_the_gate(tiny, goldens):
    """Documents handed the task instruction: the profile keeps the default system prompt, as the
    official code embeds a document without one; a profile that puts it in is caught."""
    right = get_profile("qwen3-vl-2b")
    handed = {"instruction": golden.INSTRUCTION}
    assert max(check.differences(right, tiny, goldens, "documents", **handed).values()) <= GATE
    wrong = check.differences(_wrong(document=right.query), tiny, goldens, "documents", **handed)
    assert min(wrong.values()) > 1e-3, wrong


def test_mean_pooling_fails_the_gate(tiny, goldens):
    right = get_profile("qwen3-vl-2b")
    wrong = _wrong(document=dataclasses.replace(right.document, pooling="mean"))
    differences = check.differences(wrong, tiny, goldens, "documents")
    assert min(differences.values()) > 1e-3, differences


def test_28_pixel_cells_instead_of_32_fail_the_gate(tiny, goldens):
    """Qwen3-VL's 4..1800-cell image budget written in Qwen2-VL's 28-px cells (4 x 28 x 28 px): the
    image under the minimum is enlarged less (one row of cells instead of two), caught; the larger
    images are not touched by the minimum and still match."""
    wrong = _wrong(images=ImageLimits(patch_size=14, merge_size=2, min_pixels=4 * 28 * 28,
                                      max_pixels=1800 * 28 * 28))
    differences = check.differences(wrong, tiny, goldens, "queries", kinds={"image", "small image"})
    assert differences["small image"] > 1e-3, differences
    assert differences["image"] <= GATE, differences


class FramePool(InMemoryPool):
    """A frame-sequence pool (a temporal build's, as harness.scoring.data reads it): text queries, candidates
    of ordered frames only, with the benchmark's yardstick lengths."""

    def __init__(self):
        from harness.scoring.data import PoolInfo
        from harness.fixtures import png
        from mmlongembed.core.documents import IMAGE_PLACEHOLDER

        self.info = PoolInfo("clips-hard-256", "temporal_summarization", "clips", "hard", 256, "video", "text",
                             extra={"candidate_form": "frames"})
        frames = [[png((40 * k + 9 * i, 10 * i, 90)) for i in range(5)] for k in range(3)]
        self.candidates = [Item(f"c{k}", IMAGE_PLACEHOLDER * 5, tuple(f)) for k, f in enumerate(frames)]
        self.queries = [Item("q0", "the dog jumps, then it sits", (), golden.INSTRUCTION, True)]
        self.query_ids, self.corpus_ids = ["q0"], [c.id for c in self.candidates]
        self.query_tokens, self.candidate_tokens = [8], [5 * 16] * 3


def test_a_frame_pool_feeds_its_candidates_as_video_batched_as_one_by_one(tiny):
    """Scored through the harness: the frames become the video input (five frames: padded to six,
    three two-frame groups with their timestamps), three clips in one batch embed as each alone does,
    and the model's own count prices the video as it is fed."""
    from harness.scoring.cache import EmbeddingCache
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel

    pool = FramePool()
    model = ProfileModel(get_profile("qwen3-vl-2b"), RunSettings(batch_size=8, progress=False), str(tiny))
    scores = model.score_pool(pool, EmbeddingCache(None), RunSettings(batch_size=8, progress=False))
    assert any("video input" in note for note in scores.notes)
    encoded = model.encode_item(pool.candidates[0])
    text = model.tokenizer.decode(encoded.ids)
    assert [text.count(f"<{t} seconds>") for t in ("0.2", "1.2", "2.2")] == [1, 1, 1]
    assert not encoded.images and len(encoded.videos) == 1 and encoded.videos[0].shape[0] == 6
    together = model.embed(pool.candidates)[0]
    alone = np.concatenate([model.embed([c])[0] for c in pool.candidates])
    assert np.abs(together - alone).max() <= GATE
    own = scores.details["own_lengths"]["candidates"]
    assert own["own_max"] == len(encoded.ids) and own["over_window"] == 0


def test_a_long_frame_sequence_is_capped_at_64_evenly_spaced_frames_and_sizes_must_agree():
    from harness.models import qwen_vision
    from harness.models.adapters import ModelError

    video = get_profile("qwen3-vl-2b").video
    assert qwen_vision.sampled(list(range(100)), 64) == np.linspace(0, 99, 64, dtype=int).tolist()
    assert qwen_vision.sampled(list(range(5)), 64) == list(range(5))
    n_frames, height, width, per_group = qwen_vision.layout([(48, 64)] * 100, 32, video)
    # 64 frames share 10 x 768 cells' pixels: each frame at most 240 cells, at least 128 (x1.05)
    assert n_frames == 64 and height % 32 == 0 and width % 32 == 0 and 128 <= per_group <= 240
    with pytest.raises(ModelError, match="differ in size"):
        qwen_vision.layout([(48, 64), (480, 640)], 32, video)
