"""The references the model profiles are checked against: mteb's own wrappers (mteb 2.26.24), run on
a tiny randomly initialised model of the real architecture, with the wrappers' own prompt assembly,
image handling, forward pass and pooling.

Two shims, both outside the wrappers' logic, let them run here:
- transformers 5 cannot build Qwen-VL processors without torchvision (their video half), so the
  wrappers get the real processor class built without it (`image_only_processor`);
- GME's Encoder was written for transformers 4 names (`base.model.embed_tokens`, `base.visual`
  returning a tensor): `Transformers4Names` maps them onto transformers 5's modules. RzenEmbed's and
  Ops-MM's wrappers already run on transformers 5.

Each reference takes items as (text, images, instruction, is_query), where the text marks images
with the benchmark's `<|image|>` placeholder, and returns fp32 embeddings.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from mmlongembed.documents import IMAGE_PLACEHOLDER

VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def _processor(directory, min_tokens: int, max_tokens: int, padding_side: str):
    from transformers import Qwen2VLProcessor

    from harness.profile_model import image_only_processor
    from harness.profiles import ImageLimits

    limits = ImageLimits(14, 2, min_tokens * 28 * 28, max_tokens * 28 * 28)
    processor = image_only_processor(Qwen2VLProcessor, str(directory), limits)
    processor.tokenizer.padding_side = padding_side
    return processor


class _Visual:
    """transformers 4's `visual(...)` returned the merged image embeddings as a tensor."""

    def __init__(self, visual):
        self.visual = visual

    def get_dtype(self):
        return self.visual.dtype

    def __call__(self, pixel_values, grid_thw):
        return self.visual(pixel_values, grid_thw=grid_thw).pooler_output


def gme_reference(directory):
    """mteb's GME Encoder (gme_v_models.py) with GmeQwen2VL's processor limits (4..1280 tokens)."""
    import torch
    from mteb.models.model_implementations import gme_v_models
    from transformers import Qwen2VLForConditionalGeneration

    base = Qwen2VLForConditionalGeneration.from_pretrained(directory, dtype=torch.float32).eval()
    names = SimpleNamespace(model=base.model.language_model, visual=_Visual(base.model.visual), config=base.config)
    encoder = gme_v_models._encoder_class()(names, _processor(directory, 4, 1280, "right"), max_length=1 << 20)
    fetch = gme_v_models.fetch_image

    def run(items):
        vectors = []
        for text, images, instruction, is_query in items:
            # The Encoder puts one image before the text; the item's first image leads, and any further
            # image stays at its place in the text (the processor fills the slots in order).
            head, _, rest = text.partition(IMAGE_PLACEHOLDER) if images else ("", "", text)
            assert not head, "a reference item with images starts with its first image"
            rest = rest.replace(IMAGE_PLACEHOLDER, VISION)
            gme_v_models.fetch_image = lambda image: [fetch(i) for i in image]
            try:
                with torch.no_grad():
                    vector = encoder.embed([rest], [list(images)] if images else [None], device="cpu",
                                           instruction=instruction if is_query else None)
            finally:
                gme_v_models.fetch_image = fetch
            vectors.append(vector[0].numpy())
        return np.stack(vectors)

    return run


def ops_reference(directory):
    """mteb's OpsMMEmbeddingWrapper.embed_batch (ops_mm_models.py): its processor (256..1280 tokens, left
    padding), its forward and pooling. Images go before the text, as the wrapper places them."""
    import torch
    from mteb.models.model_implementations.ops_mm_models import OpsMMEmbeddingWrapper
    from transformers import AutoModelForImageTextToText

    wrapper = object.__new__(OpsMMEmbeddingWrapper)
    wrapper.device = "cpu"
    wrapper.base_model = AutoModelForImageTextToText.from_pretrained(directory, dtype=torch.float32).eval()
    wrapper.processor = _processor(directory, 256, 1280, "left")

    def run(items, batch: bool = False):
        groups = [items] if batch else [[item] for item in items]
        vectors = []
        for group in groups:
            texts = [text.replace(IMAGE_PLACEHOLDER, "") for text, *_ in group]
            images = [list(images) or None for _, images, *_ in group]
            assert all(text.startswith(IMAGE_PLACEHOLDER * len(im)) for (text, im, *_) in group)
            is_query = {item[3] for item in group}
            assert len(is_query) == 1, "one side per call, as mteb encodes"
            instruction = group[0][2] if is_query.pop() else None
            vectors.append(wrapper.embed_batch(texts=texts, images=images if any(images) else None,
                                               instruction=instruction).float().numpy())
        return np.concatenate(vectors)

    return run


class _Loader(list):
    """What RzenEmbedWrapper.encode iterates: batches, and a dataset with features."""

    def __init__(self, batches, features):
        super().__init__(batches)
        self.dataset = SimpleNamespace(features=features)


def rzen_reference(directory):
    """mteb's RzenEmbedWrapper.encode (rzen_embed_model.py): its processor (256..1280 tokens, right
    padding), prompt, forward and pooling. Images go before the instruction and text."""
    import torch
    from mteb.models.model_implementations.rzen_embed_model import RzenEmbedWrapper
    from transformers import Qwen2VLForConditionalGeneration

    wrapper = object.__new__(RzenEmbedWrapper)
    wrapper.device, wrapper.max_length, wrapper.default_instruction = "cpu", 1 << 20, "You are a helpful assistant."
    wrapper.model = Qwen2VLForConditionalGeneration.from_pretrained(directory, dtype=torch.float32).eval()
    wrapper.processor = _processor(directory, 256, 1280, "right")

    def run(items):
        vectors = []
        for text, images, instruction, is_query in items:
            assert text.startswith(IMAGE_PLACEHOLDER * len(images))
            wrapper.get_task_instruction = lambda *args: instruction if is_query else None
            batch = {"text": [text.replace(IMAGE_PLACEHOLDER, "")]}
            if images:
                batch["image"] = [list(images)]
            loader = _Loader([batch], {"text": None, **({"image": None} if images else {})})
            vectors.append(np.asarray(wrapper.encode(loader, task_metadata=None, hf_split="test", hf_subset="x"))[0])
        return np.stack(vectors)

    return run
