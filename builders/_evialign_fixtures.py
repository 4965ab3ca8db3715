"""The EviAlign-Evidence fixture: generated retrieval pairs in the MMEB-train layout, for the
builder's example build and its tests."""

from __future__ import annotations

import json
import random
from pathlib import Path

from mmlongembed.core.rng import derive_rng
from mmlongembed.testing import made_up_word


def write_mmeb_fixture(root: Path, n_rows: int = 4, seed: int = 5) -> Path:
    """Generated retrieval pairs in the MMEB-train layout (``<subset>/train.jsonl`` with ``qry``,
    ``qry_image_path``, ``pos_text``, ``pos_image_path``; images under ``images/``): a text-to-image,
    an image-to-text and a text-to-text subset, plus rows of the excluded OVEN subset."""
    from PIL import Image

    rng = random.Random(seed)
    root = Path(root)

    def sentence() -> str:
        return " ".join(made_up_word(rng) for _ in range(rng.randint(5, 10))).capitalize() + "."

    def image(subset: str, i: int) -> str:
        relative = f"images/{subset}/{i}.png"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        pixels = (derive_rng(seed, subset, i).random((24, 32, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(root / relative)
        return relative

    subsets = {
        "MSCOCO_t2i": [{"qry": f"Find me an everyday image that matches the given caption: {sentence()}",
                        "qry_image_path": "", "pos_text": "<|image_1|>\nRepresent the given image.",
                        "pos_image_path": image("MSCOCO_t2i", i)} for i in range(n_rows)],
        "MSCOCO_i2t": [{"qry": "<|image_1|>\nFind an image caption describing the given everyday image.",
                        "qry_image_path": image("MSCOCO_i2t", i), "pos_text": sentence(), "pos_image_path": ""}
                       for i in range(n_rows)],
        "WebQA": [{"qry": f"Find a Wikipedia paragraph that answers this question: {sentence()[:-1]}?",
                   "qry_image_path": "", "pos_text": f"{made_up_word(rng).title()}\n{sentence()} {sentence()}",
                   "pos_image_path": ""} for _ in range(n_rows)],
        "OVEN": [{"qry": "<|image_1|>\nRetrieve a Wikipedia image-description pair for the entity.",
                  "qry_image_path": image("OVEN", i), "pos_text": sentence(), "pos_image_path": ""}
                 for i in range(2)],
    }
    for subset, rows in subsets.items():
        (root / subset).mkdir(parents=True, exist_ok=True)
        with open(root / subset / "train.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    return root
