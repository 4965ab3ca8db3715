"""RzenEmbed (Qwen2-VL), as mteb's RzenEmbedWrapper runs it (rzen_embed_model.py).

A fixed system prompt; the instruction prefixes the user turn's text, after the item's leading images,
with no separator; the LLM run on input embeddings; right padding, the last real token.
"""

from __future__ import annotations

from harness.profiles.schema import (DEFAULT_SYSTEM, END_OF_TEXT, ModelProfile, SideForm, Verification, chat_prompt,
                                     model_card, mteb_wrapper, qwen2_limits, trained_on, wrapper_facts)

_WRAPPER = mteb_wrapper("rzen_embed_model.py")

MODELS = (
    ModelProfile(
        name="rzen-v2-7b",
        paper_name="Rzen-v2-7B",
        repo="qihoo360/RzenEmbed",
        revision="ea95c339008f9639420fcb33ba2ba606ea94be78",
        family="qwen2_vl",
        window=32768,
        dim=3584,
        dtype="bfloat16",
        size="8B",
        query=SideForm(template=chat_prompt(DEFAULT_SYSTEM, END_OF_TEXT),
                       instruction_place="user turn, after the leading images", instruction_after_leading_images=True),
        document=SideForm(template=chat_prompt(DEFAULT_SYSTEM, END_OF_TEXT), instruction_place="none"),
        images=qwen2_limits(256, 1280, pre_resize=True),
        frames="images",
        positions="sequential",
        sources=wrapper_facts(_WRAPPER, model_card("qihoo360/RzenEmbed", "ea95c339008f9639420fcb33ba2ba606ea94be78")),
        verified=Verification(reference="mteb's RzenEmbedWrapper (rzen_embed_model.py) on a tiny Qwen2-VL",
                              max_abs_diff=3.0e-8),
        training_data=trained_on(("MSMARCO", "NQ", "HotpotQA", "FEVER", "MMEB-train", "mmE5-synthetic",
                                  "VideoChat-Flash"), _WRAPPER),
        notes=("frames: 8 evenly spaced frames as images at 160-180 visual tokens each (mteb's video processor); "
               "a frame pool's frames are fed as images at the image limits",
               "mteb truncates at 2000 tokens"),
    ),
)
