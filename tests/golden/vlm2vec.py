"""What the VLM2Vec-Qwen2VL-2B goldens are made of, shared by the script that writes them (make_vlm2vec.py,
which runs the official inference code) and the test that reads them (tests/harness/profiles/test_profiles_vlm2vec.py): the
tiny model, the inputs, the text the official code is handed, and the fingerprints tying them together.

The tiny model is the suite's tiny Qwen2-VL (seed 0, the real Qwen3 tokenizer) with the image processor
bounds of Qwen/Qwen2-VL-2B-Instruct (4..16384 cells of 28 px), the processor the official loader reads.
The inputs are the Qwen3-VL goldens' (text, one image, text with two images, four frames, an image under
the minimum budget); queries carry the model card's instruction, documents none.
"""

from __future__ import annotations

from pathlib import Path

from tests.golden import qwen3_vl
from tests.golden.common import fingerprint_of, weights_differ, weights_summary  # noqa: F401 (the goldens' API)

GOLDEN_FILE = Path(__file__).with_name("vlm2vec.json")
# the model card's query instruction (TIGER-AI-Lab/VLM2Vec v1: examples/qwen2vl/demo-qwen2vl-2b.py)
INSTRUCTION = "Represent the given image with the following question:"
PLACEHOLDER = qwen3_vl.PLACEHOLDER
IMAGE_TOKEN = "<|image_pad|>"  # the official vlm_image_tokens[QWEN2_VL]
# Qwen/Qwen2-VL-2B-Instruct's preprocessor_config.json (min_pixels, max_pixels): 4..16384 cells of 28 px
PROCESSOR_PIXELS = (3136, 12845056)
SIDES = {"queries": INSTRUCTION, "documents": ""}  # side -> the instruction its items are handed


def inputs() -> list[dict]:
    return qwen3_vl.inputs()


def official_text(text: str, instruction: str) -> str:
    """The text the official code is handed, as its model card writes it: the image tokens, then a
    space, then the instruction and the text joined by a space (f'{vlm_image_tokens[QWEN2_VL]} Represent
    the given image with the following question: What is in the image'); no chat template."""
    images = text.count(PLACEHOLDER)
    leading = 0
    while text.startswith(PLACEHOLDER, leading * len(PLACEHOLDER)):
        leading += 1
    assert leading == images, "the inputs lead with their images"
    words = " ".join(part for part in (instruction, text[leading * len(PLACEHOLDER):]) if part)
    return IMAGE_TOKEN * images + (" " if images and words else "") + words


def make_tiny_vlm2vec(directory: Path) -> Path:
    """The suite's tiny Qwen2-VL with Qwen2-VL-2B-Instruct's image processor bounds."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from harness.models.tiny_models import make_tiny

    directory = make_tiny(Path(directory), "qwen2_vl")
    Qwen2VLImageProcessorPil(patch_size=14, merge_size=2, min_pixels=PROCESSOR_PIXELS[0],
                             max_pixels=PROCESSOR_PIXELS[1]).save_pretrained(directory)
    return directory


def inputs_fingerprint() -> str:
    return fingerprint_of(inputs(), SIDES)
