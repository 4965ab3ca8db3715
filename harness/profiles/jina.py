"""jina-embeddings-v4 (Qwen2.5-VL; not in the paper): facts only. Its custom modelling code
(trust_remote_code) is in the Hub repo, not reachable here, so it is not run.
"""

from __future__ import annotations

from harness.profiles.schema import (ModelProfile, SideForm, Source, model_card, mteb_wrapper, qwen2_limits,
                                     trained_on, wrapper_facts)

_WRAPPER = mteb_wrapper("jina_models.py")
# a third-party copy of the modelling file, read (not run)
_CODE = Source(repo="onlylrs/SmartEmbed", path="jina/models/modeling_jina_embeddings_v4.py",
               commit="567ec80313c3df293b77deb2350f4d685599d4f7")

MODELS = (
    ModelProfile(
        name="jina-embeddings-v4",
        paper_name="",
        repo="jinaai/jina-embeddings-v4",
        revision="4a58ca57710c49f51896e4bc820e202fbf64904b",
        family="qwen2_5_vl",
        window=32768,
        dim=2048,
        dtype="bfloat16",
        size="3.8B",
        query=SideForm(template="Query: {content}", instruction_place="none (retrieval adapter, prefix 'Query: ')",
                       pooling="mean"),
        document=SideForm(template="Passage: {content}",
                          instruction_place="none (retrieval adapter, prefix 'Passage: ')", pooling="mean"),
        images=qwen2_limits(4, 1280),
        frames="images",
        positions="mrope",
        sources=wrapper_facts(
            _WRAPPER, model_card("jinaai/jina-embeddings-v4", "4a58ca57710c49f51896e4bc820e202fbf64904b"),
            modelling_code_read=_CODE),
        group="Other",
        runnable=False,
        unverified_reason=(
            "not runnable: its modelling code (modeling_jina_embeddings_v4.py, its own qwen2_5_vl.py and "
            "custom_lora_module.py: the retrieval LoRA as a multi-task adapter layer, task_label threaded through "
            "every layer) is only in the Hub repo jinaai/jina-embeddings-v4, not reachable here; mteb's "
            "jina_models.py loads it with trust_remote_code; no public GitHub copy from Jina was found "
            "(QuaduxIT/jina-embeddings-v4 and Mazyod/jina-embeddings-v4-vllm-plugin hold none); onlylrs/SmartEmbed "
            "(a third-party training project) holds copies written for transformers 4.x (installed: 5.24), not run"),
        training_data=trained_on(("MSMARCO", "NQ", "STS12", "SICK-R", "CodeSearchNet"), _WRAPPER),
        notes=(f"read in a third-party copy of the modelling file ({_CODE}), not run: an image input is "
               "'<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\\n' "
               "and its single vector the mean over the image span only (vision start to end), a text's the mean "
               "over all its tokens; this profile's forms follow mteb's text prefixes and are not yet those",),
    ),
)
