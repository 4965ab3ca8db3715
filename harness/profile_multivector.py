"""A multi-vector model profile (ColQwen2.5) run as mteb runs it through colpali_engine: the item's text
and each of its images are inputs of their own (the profile's ``template`` and ``image_template``),
every token of each goes through the model's 128-d projection (``custom_text_proj``) and is
L2-normalised, and the item is the concatenation of its inputs' token matrices, text first. Scoring is
MaxSim (harness.multivector), with token matrices in the cache.

Weights come from a local directory holding a merged checkpoint (the backbone and ``custom_text_proj``
in its safetensors); the Hub repo of ColQwen2.5 is a LoRA adapter, which is refused with how to merge it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from harness.data import Item
from harness.multivector import MultiVectorModel
from harness.profile_model import Encoded, ProfileModel, prepared_image
from harness.truncation import truncate_middle
from mmlongembed.documents import IMAGE_PLACEHOLDER
from mmlongembed.errors import UserError

PROJECTION = re.compile(r"(^|\.)custom_text_proj\.(weight|bias)$")


def load_projection(directory: Path, torch):
    """colpali's ``custom_text_proj`` (hidden -> 128) from the checkpoint's safetensors files, under any
    prefix a ColQwen checkpoint uses (``custom_text_proj.``, ``base_model.model.custom_text_proj.``)."""
    from safetensors import safe_open

    tensors = {}
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), "pt") as weights:
            for key in weights.keys():
                match = PROJECTION.search(key)
                if match:
                    tensors[match.group(2)] = weights.get_tensor(key)
    if "weight" not in tensors:
        raise UserError(f"{directory}: no custom_text_proj weights in its safetensors (a ColQwen2.5 checkpoint "
                        "with its projection is needed)")
    out_features, in_features = tensors["weight"].shape
    layer = torch.nn.Linear(in_features, out_features, bias="bias" in tensors)
    layer.load_state_dict(tensors)
    return layer


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
        dtype = next(self.model.parameters()).dtype
        self.projection = load_projection(Path(path), self.torch).to(device=settings.device, dtype=dtype).eval()

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
