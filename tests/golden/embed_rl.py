"""What the Embed-RL goldens are made of, shared by the script that writes them (make_embed_rl.py, which
runs the official inference code) and the test that reads them (tests/harness/profiles/test_profiles_embed_rl.py, which
runs the profiles): the tiny model, the inputs, and the fingerprints that tie the goldens to both.

The tiny model is the suite's tiny Qwen3-VL (the architecture both Embed-RL models fine-tune) saved as
Embed-RL's checkpoints are (train/contrastive_learning/merge_lora/merge_qwen3vl.py): the tokenizer holds
the added `<emb>` token and the config names it in `emb_token_ids`; its image processor keeps
Qwen3-VL's own bounds (64..16384 cells), so the official code's 128..768-cell resize is what decides.

The inputs are the Qwen3-VL goldens' (tests/golden/qwen3_vl.py) but the two-image one (the official
eval code embeds one image, or a frame list as video, never several images), and ten frames. Queries carry the task
instruction (a UVRB prompt, as the official UVRB eval prefixes it), documents none.
"""

from __future__ import annotations

from pathlib import Path

from tests.golden import qwen3_vl
from tests.golden.common import fingerprint_of, weights_differ, weights_summary  # noqa: F401 (the goldens' API)

GOLDEN_FILE = Path(__file__).with_name("embed_rl.json")
DATASET = "DREAM-E"  # a UVRB dataset of the official eval: its query prompt is the instruction used here
INSTRUCTION = "Find the video according to the text description."
PLACEHOLDER = qwen3_vl.PLACEHOLDER
EMB_TOKEN = "<emb>"
# Qwen3-VL-Instruct's image processor bounds (preprocessor_config.json: shortest_edge, longest_edge)
PROCESSOR_PIXELS = (65536, 16777216)
SIDES = {"queries": INSTRUCTION, "documents": ""}  # side -> the instruction its items are handed


def inputs() -> list[dict]:
    """Each input: its kind, the benchmark's text (images at placeholders) and its images. A frame input's
    kind ends in "frames"; the long one has more than the official eval's 8 frames (it samples 8, and
    its timestamps' rate depends on the count)."""
    from harness.fixtures import png

    long_frames = tuple(png((20 * k, 60, 240 - 20 * k)) for k in range(10))
    return [item for item in qwen3_vl.inputs() if item["kind"] != "text and images"] + [
        {"kind": "long frames", "text": PLACEHOLDER * len(long_frames), "images": long_frames}]


def make_tiny_embed_rl(directory: Path) -> Path:
    """The suite's tiny Qwen3-VL (seed 0, the real Qwen3 tokenizer) with `<emb>` added to its tokenizer
    (so the embedding table has its row), `emb_token_ids` in its config, Qwen3-VL's processor bounds."""
    from transformers import AutoConfig
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from harness.models.tiny_models import make_tiny, qwen3_tokenizer

    tokenizer = qwen3_tokenizer()
    tokenizer.add_tokens([EMB_TOKEN])
    directory = make_tiny(Path(directory), "qwen3_vl", tokenizer=tokenizer)
    config = AutoConfig.from_pretrained(directory)
    config.emb_token_ids = [tokenizer.convert_tokens_to_ids(EMB_TOKEN)]
    config.save_pretrained(directory)
    Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, min_pixels=PROCESSOR_PIXELS[0],
                             max_pixels=PROCESSOR_PIXELS[1]).save_pretrained(directory)
    return directory


def inputs_fingerprint() -> str:
    return fingerprint_of(inputs(), SIDES)
