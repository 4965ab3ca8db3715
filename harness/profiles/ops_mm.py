"""Ops-MM-embedding-v1 (Qwen2-VL, 2B and 7B), as mteb's OpsMMEmbeddingWrapper runs it (ops_mm_models.py).

The instruction is the system prompt (documents get the default system prompt); images before the
text; the whole model's forward (mrope), left padding, the last position.
"""

from __future__ import annotations

from harness.profiles.schema import (DEFAULT_SYSTEM, END_OF_TEXT, ModelProfile, SideForm, Verification, chat_prompt,
                                     model_card, mteb_wrapper, qwen2_limits, wrapper_facts)

_QUERY = SideForm(template=chat_prompt("{instruction}", END_OF_TEXT), instruction_place="system prompt",
                  default_instruction=DEFAULT_SYSTEM)
_DOCUMENT = SideForm(template=chat_prompt(DEFAULT_SYSTEM, END_OF_TEXT), instruction_place="none")
_WRAPPER = mteb_wrapper("ops_mm_models.py")
_VERIFIED = Verification(reference="mteb's OpsMMEmbeddingWrapper.embed_batch (ops_mm_models.py) on a tiny Qwen2-VL",
                         max_abs_diff=3.0e-8)

MODELS = (
    ModelProfile(
        name="ops-mm-v1-2b",
        paper_name="Ops-MM-v1-2B",
        repo="OpenSearch-AI/Ops-MM-embedding-v1-2B",
        revision="69c23ac5595bb7fb3a9959df96fe155b3650c01e",
        family="qwen2_vl",
        window=32768,
        dim=1536,
        dtype="bfloat16",
        size="2B",
        query=_QUERY,
        document=_DOCUMENT,
        images=qwen2_limits(256, 1280),
        frames="images",
        positions="mrope",
        sources=wrapper_facts(
            _WRAPPER, model_card("OpenSearch-AI/Ops-MM-embedding-v1-2B", "69c23ac5595bb7fb3a9959df96fe155b3650c01e")),
        verified=_VERIFIED,
        paper_dim=2048,
        notes=("Table 2 gives 2048 dimensions; mteb's ModelMeta 1536 (the Qwen2-VL-2B hidden size)",),
    ),
    ModelProfile(
        name="ops-mm-v1-7b",
        paper_name="Ops-MM-v1-7B",
        repo="OpenSearch-AI/Ops-MM-embedding-v1-7B",
        revision="e9179f601f9bf21d2fd20136c11eb4ae2ea42859",
        family="qwen2_vl",
        window=32768,
        dim=3584,
        dtype="bfloat16",
        size="8B",
        query=_QUERY,
        document=_DOCUMENT,
        images=qwen2_limits(256, 1280),
        frames="images",
        positions="mrope",
        sources=wrapper_facts(
            _WRAPPER, model_card("OpenSearch-AI/Ops-MM-embedding-v1-7B", "e9179f601f9bf21d2fd20136c11eb4ae2ea42859")),
        verified=_VERIFIED,
    ),
)
