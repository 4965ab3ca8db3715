"""Image pricing of the vLLM adapter, on CPU without vLLM: a model's own image processor prices
an image (a 28-pixel model pays 324 tokens for 512x512, not the 256 of the 32-pixel yardstick)."""

from __future__ import annotations

import pytest

from harness.scoring.data import Item
from harness.models.adapters import VISION_WRAP, ImagePricer, image_token_cost, interleaved_units
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.tokens import image_tokens
from harness.fixtures import png


class StubQwen2VLProcessor:
    """The one method the pricing uses, with Qwen2-VL's resizing rule (nearest multiple of 28 px,
    within its pixel budget) and its 2x2 merge, so the test needs neither transformers nor vLLM."""

    patch_size, merge_size = 14, 2
    min_pixels, max_pixels = 56 * 56, 28 * 28 * 1280

    def get_number_of_image_patches(self, height: int, width: int, images_kwargs: dict) -> int:
        factor = self.patch_size * self.merge_size
        h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
        if h * w > self.max_pixels:
            scale = (height * width / self.max_pixels) ** 0.5
            h, w = int(height / scale // factor) * factor, int(width / scale // factor) * factor
        return (h // self.patch_size) * (w // self.patch_size)


@pytest.mark.parametrize("processor", ["stub", "transformers"])
def test_a_28_pixel_model_prices_images_with_its_own_processor(processor):
    if processor == "transformers":
        transformers = pytest.importorskip("transformers")
        try:
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil as Proc
        except ImportError:
            Proc = transformers.Qwen2VLImageProcessor
        processor = Proc(patch_size=14, merge_size=2)  # built from its config, no download
    else:
        processor = StubQwen2VLProcessor()
    price = ImagePricer(processor)
    assert image_token_cost(processor, 512, 512) == price(512, 512) == 18 * 18 == 324  # 504x504 after resizing
    assert image_tokens(512, 512) == 256  # what the 32-pixel yardstick would have charged
    assert price(1000, 700) == 36 * 25  # 1008x700: 72x50 patches, merged 2x2
    assert "processor" in price.method


def test_a_processor_without_a_patch_count_falls_back_to_the_yardstick_and_says_so():
    price = ImagePricer(object())
    assert price(512, 512) == 256 and "yardstick" in price.method


def test_interleaved_units_cost_the_priced_image_and_truncation_drops_it_whole():
    """The vLLM adapter's input assembly: with the processor's price, a window that the yardstick
    would have said fits a 512x512 image no longer does."""
    item = Item(id="d", text=f"alpha beta{IMAGE_PLACEHOLDER}gamma", images=(png((10, 20, 30), size=(512, 512)),))
    encode = lambda run: [ord(c) for c in run.strip() if c != " "]  # noqa: E731  (one id per letter)
    units, costs = interleaved_units(item, encode, ImagePricer(StubQwen2VLProcessor()))
    assert costs == [1] * 9 + [324 + VISION_WRAP] + [1] * 5
    assert units[9][0] == "image" and units[9][1].size == (512, 512)
    window = 9 + 5 + 256 + VISION_WRAP  # enough on the yardstick
    kept, truncated = truncate_middle(units, costs, window)
    assert truncated and not any(isinstance(u, tuple) for u in kept)
    yardstick_units, yardstick_costs = interleaved_units(item, encode, ImagePricer(None))
    assert not truncate_middle(yardstick_units, yardstick_costs, window)[1]
