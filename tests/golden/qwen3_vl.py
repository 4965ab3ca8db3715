"""What the Qwen3-VL goldens are made of, shared by the script that writes them (make_qwen3_vl.py, which
runs the official inference code) and the test that reads them (tests/harness/profiles/test_profiles_qwen3_vl.py, which
runs the profile): the tiny model, the inputs, and the fingerprints that tie the goldens to both.

The inputs are those of the Qwen2-VL side-by-side test (text, one image, text with images, an ordered
frame sequence) and an image under the minimum pixel budget, each as a query (with the task instruction) and as a document (none). The official
embedder places every image before the text, so the images lead here; the frames are a video there.
"""

from __future__ import annotations

from pathlib import Path

from tests.golden.common import fingerprint_of, weights_differ, weights_summary  # noqa: F401 (the goldens' API)

GOLDEN_FILE = Path(__file__).with_name("qwen3_vl.json")
INSTRUCTION = "Find the passage that answers the question"  # no final stop: the official code adds "."
PLACEHOLDER = "<|image|>"  # the benchmark's image placeholder (mmlongembed.core.documents.IMAGE_PLACEHOLDER)


def _images():
    from harness.fixtures import png

    red, blue, green = png((220, 20, 20)), png((20, 20, 220)), png((20, 200, 40))
    frames = tuple(png((40 * k, 90, 200 - 30 * k)) for k in range(4))
    # 100 x 32 px: under the minimum of 4 cells, so the budget's cell size decides how far it is
    # enlarged (4 x 32 x 32 px: 2 x 4 cells; 4 x 28 x 28 px: 1 x 4 cells)
    banner = png((200, 120, 30), size=(100, 32))
    return red, blue, green, frames, banner


def inputs() -> list[dict]:
    """Each input: its kind, the benchmark's text (images at placeholders) and its images."""
    red, blue, green, frames, banner = _images()
    return [
        {"kind": "text", "text": "What was the rainfall in May?", "images": ()},
        {"kind": "image", "text": PLACEHOLDER + "The red slide.", "images": (red,)},
        {"kind": "text and images", "text": PLACEHOLDER * 2 + "A chart of rainfall and the legend below it.",
         "images": (blue, green)},
        {"kind": "frames", "text": PLACEHOLDER * len(frames), "images": frames},
        {"kind": "small image", "text": PLACEHOLDER + "A thin banner.", "images": (banner,)},
    ]


SIDES = {"queries": INSTRUCTION, "documents": ""}  # side -> the instruction its items are handed


def make_tiny_qwen3_vl(directory: Path) -> Path:
    """The suite's tiny Qwen3-VL (harness.models.tiny_models: seed 0, the real Qwen3 tokenizer)."""
    from harness.models.tiny_models import make_tiny

    return make_tiny(Path(directory), "qwen3_vl")


def inputs_fingerprint() -> str:
    return fingerprint_of(inputs(), SIDES)
