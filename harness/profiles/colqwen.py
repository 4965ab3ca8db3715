"""ColQwen2.5 (colpali_engine, multi-vector; not in the paper), as mteb's ColQwen2_5Wrapper runs it
(colpali_models.py, ColPaliEngineWrapper).

Text, on either side (its get_text_embeddings serves queries and text documents), is "Query: " + text +
10 x <|endoftext|> (colpali's query augmentation token), no chat template; each image is an input of its
own in colpali's visual prompt; a text-and-image item is the text's tokens then the image's. Every token's
128-d projection (custom_text_proj), L2-normalised; MaxSim.
"""

from __future__ import annotations

from harness.profiles.schema import (END_OF_TEXT, ModelProfile, SideForm, Source, Verification, model_card,
                                     mteb_wrapper, qwen2_limits, trained_on, wrapper_facts)

_FORM = SideForm(template="Query: {content}" + END_OF_TEXT * 10,
                 instruction_place="none (prefix 'Query: ', 10 <|endoftext|> augmentation tokens)",
                 pooling="multi_vector",
                 image_template="<|im_start|>user\n{content}Describe the image.<|im_end|><|endoftext|>")
_COLPALI, _COLPALI_RELEASE = "illuin-tech/colpali", "v0.3.18 (PyPI colpali-engine 0.3.18)"
_COLQWEN_WRAPPER = mteb_wrapper("colqwen_models.py")

MODELS = (
    ModelProfile(
        name="colqwen2.5",
        paper_name="",
        repo="vidore/colqwen2.5-v0.2",
        revision="6f6fcdfd1a114dfe365f529701b33d66b9349014",
        family="qwen2_5_vl",
        window=128000,
        dim=128,
        dtype="bfloat16",
        size="3B",
        query=_FORM,
        document=_FORM,
        images=qwen2_limits(4, 768),
        frames="images",
        positions="mrope",
        sources=wrapper_facts(
            mteb_wrapper("colpali_models.py"),
            model_card("vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014"),
            revision=_COLQWEN_WRAPPER, dim_window_dtype=_COLQWEN_WRAPPER,
            prompt_tokens=Source(repo=_COLPALI, commit=_COLPALI_RELEASE,
                                 path="colpali_engine/models/qwen2_5/colqwen2_5/processing_colqwen2_5.py"),
            pooling=Source(repo=_COLPALI, commit=_COLPALI_RELEASE,
                           path="colpali_engine/models/qwen2_5/colqwen2_5/modeling_colqwen2_5.py")),
        group="Other",
        verified=Verification(reference="mteb's ColQwen2_5Wrapper (colqwen_models.py, colpali_engine 0.3.18's "
                                        "ColQwen2_5) on a tiny ColQwen2.5", max_abs_diff=6.0e-8,
                              test="tests/harness/profiles/test_profile_colqwen.py"),
        training_data=trained_on(("vidore/colpali_train_set",), _COLQWEN_WRAPPER),
        notes=("the Hub repo is a LoRA adapter on vidore/colqwen2.5-base: merge it into the base "
               "(peft's merge_and_unload) and give the merged directory with --model-path colqwen2.5=DIR",
               "mteb embeds a document's text like a query's ('Query: ' prefix and augmentation tokens) and "
               "each image in colpali's visual prompt; frames are images, one input each, concatenated in order "
               "(MaxSim itself ignores their order)",
               "window: mteb's max_tokens (128000); each input (the text, each image) is its own sequence"),
    ),
)
