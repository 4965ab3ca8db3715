"""VLM2Vec-Qwen2VL-2B (a LoRA on Qwen2-VL-2B-Instruct), as its official code runs it (TIGER-AI-Lab/VLM2Vec,
branch v1, the code of the model card's example examples/qwen2vl/demo-qwen2vl-2b.py).

No chat template; each image a bare <|image_pad|> (no vision start/end); the text f"{image tokens}
{instruction} {text}"; the whole model's forward, whose rope index finds images by <|vision_start|> and so,
finding none, gives every token 1-D positions (its modeling_qwen2_vl.py get_rope_index): "sequential"; the
last real token's final state (MMEBModel._pooling 'last'), L2-normalised. load_processor's
min_pixels/max_pixels arguments (256..1280 cells) do not reach the image processor, so Qwen2-VL-2B-Instruct's
own bounds decide: 4..16384 cells of 28 px.
"""

from __future__ import annotations

from harness.profiles.schema import (ModelProfile, SideForm, Source, Verification, model_card, mteb_wrapper,
                                     qwen2_limits, trained_on, wrapper_facts)

_REPO, _COMMIT = "TIGER-AI-Lab/VLM2Vec", "28fdbdd68a66374ec1b53207ad7a24b9979f1ab6"  # branch v1
_DEMO = Source(repo=_REPO, path="examples/qwen2vl/demo-qwen2vl-2b.py", commit=_COMMIT)
_MODEL = Source(repo=_REPO, path="src/model.py", commit=_COMMIT)
_UTILS = Source(repo=_REPO, path="src/model_utils.py", commit=_COMMIT)
_ROPE = Source(repo=_REPO, path="src/vlm_backbone/qwen2_vl/modeling_qwen2_vl.py", commit=_COMMIT)

MODELS = (
    ModelProfile(
        name="vlm2vec-qwen2vl-2b",
        paper_name="VLM2Vec-Qwen2VL-2B",
        repo="TIGER-Lab/VLM2Vec-Qwen2VL-2B",
        revision="7717dee",
        family="qwen2_vl",
        window=32768,
        dim=1536,
        dtype="bfloat16",
        size="2B",
        query=SideForm(template="{content}",
                       instruction_place="text, after the leading images, space-joined (no chat template)",
                       instruction_after_leading_images=True, instruction_joiner=" ", after_leading_images=" "),
        document=SideForm(template="{content}", instruction_place="none", after_leading_images=" "),
        images=qwen2_limits(4, 16384),
        frames="images",
        positions="sequential",
        sources=wrapper_facts(mteb_wrapper("vlm2vec_models.py"), model_card("TIGER-Lab/VLM2Vec-Qwen2VL-2B", "7717dee"),
                              prompt=_DEMO, pooling=_MODEL, images=_UTILS, frames=_UTILS, positions=_ROPE,
                              official=_DEMO),
        image_markup="<|image_pad|>",
        verified=Verification(
            reference=f"the official MMEBModel, load_processor and Qwen2_VL_process_fn ({_REPO}@{_COMMIT[:12]}, "
                      "branch v1, under its transformers 4.46.3) on a tiny Qwen2-VL, golden vectors "
                      "tests/golden/vlm2vec.json",
            max_abs_diff=9.0e-8, test="tests/harness/profiles/test_profiles_vlm2vec.py"),
        training_data=trained_on(("MMEB-train",), model_card("TIGER-Lab/VLM2Vec-Qwen2VL-2B", "7717dee")),
        notes=(
            "the official code has no frame or video input (v1 is images only): a frame sequence is fed as its "
            "images in order, each a bare <|image_pad|>, as the official processor takes an image list",
            "the official eval (eval.py) first resizes every image to 1344 x 1344 (its image_resolution 'high' "
            "default); the model card's example feeds images as they are, as this profile does",
            "MMEB's image candidates carry 'Represent the given image.'; the model card's text candidate is bare, "
            "as documents are here; images inside the text (not leading) stay at their placeholders, with no "
            "space added",
            "the official code truncates nowhere by default (max_len None); this benchmark's rule is the paper's: "
            "the 32768-token window, middle dropped"),
    ),
)
