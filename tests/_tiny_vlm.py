"""A tiny randomly initialised Qwen2-VL built from a config, with the real Qwen3 tokenizer: the
multimodal transformers path of the harness, end to end on CPU (used by several test modules)."""

from __future__ import annotations

from pathlib import Path


def make_tiny_qwen2_vl(directory: Path) -> Path:
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLModel
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from mmlongembed.tokens import reference_tokenizer_file

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(reference_tokenizer_file()),
                                        pad_token="<|endoftext|>", eos_token="<|im_end|>")
    ids = tokenizer.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"))
    torch.manual_seed(0)
    Qwen2VLModel(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    # small pixel budget: each fixture image becomes a handful of visual tokens
    Qwen2VLImageProcessorPil(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16).save_pretrained(directory)
    return directory
