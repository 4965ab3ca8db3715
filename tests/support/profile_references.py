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

import contextlib
from types import SimpleNamespace

import numpy as np

from mmlongembed.core.documents import IMAGE_PLACEHOLDER

VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def _processor(directory, min_tokens: int, max_tokens: int, padding_side: str):
    from transformers import Qwen2VLProcessor

    from harness.models.profile_model import image_only_processor
    from harness.profiles.schema import ImageLimits

    limits = ImageLimits(patch_size=14, merge_size=2, min_pixels=min_tokens * 28 * 28,
                         max_pixels=max_tokens * 28 * 28)
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


# ---- ColQwen2.5: mteb's ColQwen2_5Wrapper (colqwen_models.py) over colpali_engine's ColQwen2_5 --------
# Two more shims, again outside the wrapper's logic, for a venv without torchvision (the PyPI torchvision
# wheel is a CUDA build that cannot load beside the CPU torch): colpali_engine imports `smart_resize`
# from transformers' torchvision image-processor module, and gets it from the PIL module (the same
# function, "Copied from" it); mteb's image path imports torchvision.transforms.functional only to turn
# tensors into PIL images, which it never does for the PIL images given here.

def _without_torchvision() -> bool:
    import importlib.util

    return importlib.util.find_spec("torchvision") is None


def colpali_classes():
    """colpali_engine's (ColQwen2_5, ColQwen2_5_Processor)."""
    import sys
    import types

    name = "transformers.models.qwen2_vl.image_processing_qwen2_vl"
    stub = None
    if _without_torchvision() and name not in sys.modules:
        from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl

        stub = sys.modules[name] = types.ModuleType(name)
        stub.smart_resize = image_processing_pil_qwen2_vl.smart_resize
    try:
        with _transformers_conversion_mappings_kept():
            from colpali_engine.models import ColQwen2_5, ColQwen2_5_Processor
    finally:
        if stub is not None:
            del sys.modules[name]
    return ColQwen2_5, ColQwen2_5_Processor


@contextlib.contextmanager
def _transformers_conversion_mappings_kept():
    """colpali_engine registers, on import, checkpoint key renamings in transformers for whole model
    types (ColQwen3's for every "qwen3_vl" model): every Qwen3-VL saved later in the process would
    carry its keys. ColQwen2.5 needs none of them, so transformers' registry is put back as it was."""
    from transformers import conversion_mapping

    conversion_mapping.get_checkpoint_conversion_mapping("qwen3_vl")  # builds the registry if not yet built
    registry = dict(conversion_mapping._checkpoint_conversion_mapping_cache)
    users = set(conversion_mapping.USER_REGISTERED_MAPPINGS)
    try:
        yield
    finally:
        conversion_mapping._checkpoint_conversion_mapping_cache.clear()
        conversion_mapping._checkpoint_conversion_mapping_cache.update(registry)
        conversion_mapping.USER_REGISTERED_MAPPINGS.clear()
        conversion_mapping.USER_REGISTERED_MAPPINGS.update(users)


class _PilOnlyTorchvision:
    """`import torchvision.transforms.functional` for the duration of one mteb call, where torchvision is
    missing: a function that is only reached for non-PIL images, which fails if it ever is."""

    NAMES = ("torchvision", "torchvision.transforms", "torchvision.transforms.functional")

    def __enter__(self):
        import sys
        import types

        self.added = []
        if not _without_torchvision():
            return self
        modules = [types.ModuleType(name) for name in self.NAMES]
        modules[0].transforms, modules[1].functional = modules[1], modules[2]

        def to_pil_image(*_):
            raise AssertionError("the reference is given PIL images only")

        modules[2].to_pil_image = to_pil_image
        for module in modules:
            sys.modules[module.__name__] = module
            self.added.append(module.__name__)
        return self

    def __exit__(self, *exc):
        import sys

        for name in self.added:
            del sys.modules[name]


def colqwen_reference(directory):
    """mteb's ColQwen2_5Wrapper.encode: colpali's ColQwen2_5 and ColQwen2_5_Processor (left padding, the
    'Query: ' prefix mteb sets, 4..768 visual tokens as the profile states). An item is one mteb row:
    its text (placeholders removed) and its image; an item with several images (frames) is its text
    then one row per image, concatenated in order, as the wrapper concatenates text and image. Returns
    the token matrices [n_tokens, 128] and `score(queries, documents)`: colpali's own MaxSim."""
    import torch
    from mteb.models.model_implementations.colqwen_models import ColQwen2_5Wrapper

    from harness.models.profile_model import image_only_processor
    from harness.profiles.schema import ImageLimits

    model_class, processor_class = colpali_classes()
    wrapper = object.__new__(ColQwen2_5Wrapper)
    wrapper.device = "cpu"
    wrapper.mdl = model_class.from_pretrained(str(directory), dtype=torch.float32).eval()
    limits = ImageLimits(patch_size=14, merge_size=2, min_pixels=4 * 28 * 28, max_pixels=768 * 28 * 28)
    processor = image_only_processor(processor_class, str(directory), limits)
    processor.tokenizer.padding_side = "left"  # as ColQwen2_5_Processor.__init__ sets it
    processor.query_prefix = "Query: "  # mteb's ColQwen2_5Wrapper(query_prefix="Query: ")
    wrapper.processor = processor

    def encode(text, image):
        row = {**({"text": [text]} if text is not None else {}), **({"image": [image]} if image is not None else {})}
        with _PilOnlyTorchvision():
            matrices = wrapper.encode(_Loader([row], dict.fromkeys(row)), task_metadata=None, hf_split="test",
                                      hf_subset="x")
        return matrices[0].numpy()

    def run(items):
        out = []
        for text, images, _instruction, _is_query in items:
            rest = text.replace(IMAGE_PLACEHOLDER, "")
            rest = rest if rest.strip() or not images else None
            if len(images) <= 1:
                out.append(encode(rest, images[0] if images else None))
            else:
                parts = ([encode(rest, None)] if rest is not None else []) + [encode(None, i) for i in images]
                out.append(np.concatenate(parts))
        return out

    def score(queries, documents):
        return processor.score([torch.from_numpy(q) for q in queries], [torch.from_numpy(d) for d in documents],
                               device="cpu").numpy()

    run.score = score
    return run
