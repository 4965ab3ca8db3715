"""A tiny randomly initialised Qwen2-VL built from a config, with the real Qwen3 tokenizer: the
multimodal transformers path of the harness, end to end on CPU (used by several test modules)."""

from __future__ import annotations

from pathlib import Path


def make_tiny_qwen2_vl(directory: Path) -> Path:
    from transformers import Qwen2VLModel

    from tests.support.fixtures_harness import qwen3_tokenizer, save_tiny_qwen2_vl

    return save_tiny_qwen2_vl(directory, qwen3_tokenizer(), Qwen2VLModel)
