"""A multi-vector model profile (ColQwen2.5) run as mteb runs it through colpali_engine: the item's text
and each of its images are inputs of their own (the profile's ``template`` and ``image_template``),
every token of each goes through the model's 128-d projection (``custom_text_proj``) and is
L2-normalised, and the item is the concatenation of its inputs' token matrices, text first. Scoring is
MaxSim (harness.models.multivector), with token matrices in the cache.

Weights come from a local directory holding a merged checkpoint (the backbone and ``custom_text_proj``,
under colpali's keys); the Hub repo of ColQwen2.5 is a LoRA adapter, which is refused with how to merge it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.scoring.data import Item
from harness.models.multivector import MultiVectorModel
from harness.models.profile_model import Encoded, ProfileModel, prepared_image
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError

# colpali_engine's ColQwen2_5._checkpoint_conversion_mapping: the key prefixes of the Hub's ColQwen checkpoints
COLPALI_KEYS = {r"^base_model\.model\.custom_text_proj": "custom_text_proj",
                r"^model\.layers": "language_model.layers", r"^model\.embed_tokens": "language_model.embed_tokens",
                r"^model\.norm": "language_model.norm"}


def colqwen_class():
    """colpali_engine's ColQwen2_5 layout without colpali_engine: the Qwen2.5-VL backbone (Qwen2_5_VLModel)
    and ``custom_text_proj`` (hidden -> 128), under the same keys and architecture name."""
    import torch
    import transformers

    class ColQwen2_5(transformers.Qwen2_5_VLModel):  # noqa: N801 (the name colpali's checkpoints carry)
        def __init__(self, config):
            super().__init__(config)
            self.custom_text_proj = torch.nn.Linear(config.text_config.hidden_size, 128)
            self.post_init()

    return ColQwen2_5


class MultiVectorProfileModel(ProfileModel, MultiVectorModel):
    """A profile whose pooling is ``multi_vector``: token matrices, MaxSim."""

    def __init__(self, profile, settings, path: str | None = None):
        if path is None:
            raise UserError(f"--model {profile.name} runs from a local merged checkpoint: --model-path "
                            f"{profile.name}=DIR ({profile.notes[0] if profile.notes else ''})")
        if (Path(path) / "adapter_config.json").is_file():
            raise UserError(f"--model-path {profile.name}={path}: a LoRA adapter; merge it into its base model "
                            "first (peft's merge_and_unload) and give the merged directory")
        super().__init__(profile, settings, path)
        self.projection = self.model.custom_text_proj

    def load_weights(self, source: str, dtype, kwargs: dict):
        model_class = colqwen_class()
        mapping = {**getattr(model_class, "_checkpoint_conversion_mapping", {}), **COLPALI_KEYS}
        model, info = model_class.from_pretrained(source, dtype=dtype, key_mapping=mapping, output_loading_info=True,
                                                  **kwargs)
        if any("custom_text_proj" in key for key in info["missing_keys"]):
            raise UserError(f"--model-path {self.profile.name}={source}: no custom_text_proj weights (a ColQwen2.5 "
                            "checkpoint with its projection is needed)")
        return model

    def identity(self) -> dict:
        return {**super().identity(), "image_template": self.profile.document.image_template,
                "scoring": "multi-vector (every token, custom_text_proj), MaxSim"}

    def encode_parts(self, item: Item, with_images: bool = True) -> list[Encoded]:
        """The item's inputs: its text (placeholders removed) unless it has only images, then each image.
        Each input is tokenised whole, as the processor does; a text over the window loses its middle."""
        form = self.profile.side(item.is_query)
        text = item.text.replace(IMAGE_PLACEHOLDER, "")
        parts = []
        if text.strip() or not item.images:
            ids = self._ids(form.prompt(text, item.instruction))
            kept, truncated = truncate_middle(ids, [1] * len(ids), self.window)
            parts.append(Encoded(kept, [], len(ids), truncated))
        for data in item.images:
            slots = "<|image_pad|>" * self.image_cost(data)
            ids = self._ids(form.image_template.replace("{content}", self.profile.image_markup.replace(
                "<|image_pad|>", slots)))
            image = prepared_image(data, self.profile.images) if with_images else None
            parts.append(Encoded(ids, [image], len(ids), False))
        return parts

    def own_count(self, item: Item) -> tuple[int, bool]:
        parts = self.encode_parts(item, with_images=False)
        return sum(p.own_tokens for p in parts), any(p.truncated for p in parts)

    def embed_tokens(self, items: list[Item]):
        torch = self.torch
        parts = [self.encode_parts(item) for item in items]
        flat = [p for item_parts in parts for p in item_parts]
        with torch.no_grad():
            tokens = self.projection(self._forward(flat)).float()
        tokens = torch.nn.functional.normalize(tokens, dim=-1).cpu().numpy()
        matrices, row = [], 0
        for item_parts in parts:
            pieces = [tokens[row + k, :len(p.ids)] for k, p in enumerate(item_parts)]
            matrices.append(np.concatenate(pieces))
            row += len(item_parts)
        return matrices, [any(p.truncated for p in item_parts) for item_parts in parts]

    def embed(self, items):
        raise NotImplementedError(f"{self.spec} is multi-vector: embed_tokens gives its token matrices")
