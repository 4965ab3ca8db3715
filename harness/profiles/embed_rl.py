"""Embed-RL (Qwen3-VL-2B / -4B, the Embedder), as its official evaluation code runs it (ZoengHN/Embed-RL).

Qwen3-VL's chat format with no system turn; the user turn holds the image (before the text) or the text
then the frame list (as the video input), the instruction prefixing the text with a space, then "Summarize
the above content in one word:"; an assistant turn "<emb>" (an added token) whose state is the embedding,
L2-normalised; images snapped to 32-px cells within [128, 768] cells (qwen-vl-utils, patch 16); 8 frames
at [128, 768] cells each.
"""

from __future__ import annotations

from harness.profiles.schema import (UNPINNED, ImageLimits, ModelProfile, SideForm, Source, Verification, VideoInput,
                                     paper_tables, trained_on)

_REPO, _COMMIT = "ZoengHN/Embed-RL", "87b52f735d75140207851982d1a8a7dcf77005c4"
_UVRB = Source(repo=_REPO, path="eval/uvrb_eval/uvrb_dataset.py", commit=_COMMIT)
_EVAL = Source(repo=_REPO, path="eval/uvrb_eval/eval_uvrb_recall.py", commit=_COMMIT)
_TOY = Source(repo=_REPO, path="eval/toy_eval/image_eval.py", commit=_COMMIT)
_MMEB = Source(repo=_REPO, path="eval/mmeb_eval/vlm2vec/src/model/processor.py", commit=_COMMIT)
_SOURCES = {"paper_name": paper_tables(), "architecture": Source(repo=_REPO, path="README.md", commit=_COMMIT),
            "prompt": _UVRB, "prompt_image_eval": _TOY, "pooling": _EVAL, "images": _TOY, "frames": _UVRB,
            "cot": _MMEB, "dim_window_dtype": _EVAL}
# their contrastive training sets (the MMEB-train subsets with the Reasoner's CoT, LLaVA-Hound video, ViDoRe and
# VisRAG samples): train/contrastive_learning/train_script/qwen3vl{2b,4b}/weight_train_data_config.yaml (the same)
_TRAINING = ("MMEB-train", "A-OKVQA", "CIRR", "ChartQA", "DocVQA", "ImageNet-1K", "InfographicsVQA", "MSCOCO",
             "NIGHTS", "OK-VQA", "SUN397", "VisDial", "Visual7W", "VisualNews", "WebQA", "LLaVA-Hound",
             "ViDoRe", "VisRAG")
_TURNS = "<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n<emb><|im_end|>\n"
_SUFFIX = "Summarize the above content in one word:"
_QUERY = SideForm(template=_TURNS, instruction_place="user turn, before the text (after a leading image), space-joined",
                  instruction_after_leading_images=True, instruction_joiner=" ", content_suffix=_SUFFIX,
                  after_pooled="<|im_end|>\n")
_DOCUMENT = SideForm(template=_TURNS, instruction_place="none", content_suffix=_SUFFIX, after_pooled="<|im_end|>\n")
_IMAGES = ImageLimits(patch_size=16, merge_size=2, min_pixels=64 * 32 * 32, max_pixels=16384 * 32 * 32,
                      pre_resize=(128 * 32 * 32, 768 * 32 * 32))
_VIDEO = VideoInput(max_frames=8, total_pixels=768 * 32 * 32 * 8, timestamp_fps=2.0,
                    frame_pixels=(128 * 32 * 32, 768 * 32 * 32), fps_over_frames=8 * 8.0, text_first=True)
_VERIFIED = Verification(
    reference=f"the official UVRB eval ({_UVRB.path}, {_EVAL.path} @{_COMMIT[:12]}) on a tiny "
              "Qwen3-VL with <emb>, golden vectors tests/golden/embed_rl.json",
    max_abs_diff=1.5e-7, test="tests/harness/profiles/test_profiles_embed_rl.py")
_NOTES = (
    "Embed-RL is reasoning-driven: its Reasoner writes a traceability CoT offline (data_pipe/eval_cot_generate) "
    "that the official evaluations append to the Embedder's input (eval/mmeb_eval processor.py: "
    "process_cot_with_visual_content; the UVRB script's --concat_query_cot/--concat_corpus_cot); this harness "
    "runs the Embedder alone, without CoT, as the official code does for an input without one, so its scores "
    "are not the paper's protocol",
    "frames: the model's video input as the official UVRB eval feeds a frame list: the item's text first, at "
    "most 8 frames evenly spaced, each at 128..768 cells of 32 px, timestamps at 8 x 8 / (frames) fps",
    "several images in one item: the official code has no such input (MMEB's processor takes an image list as "
    "frames: text first, then each image); an item's images stay at their placeholders here, not checked",
    "the official code strips the text and cuts it at 512 characters (toy eval) or the UVRB configs' 8192 "
    "characters and a "
    "text-only input at 8192 tokens; this benchmark's rule is the paper's: the 32768-token window, middle dropped",
    "the Hub repos' revisions could not be read here (no Hub access): unpinned")


def _training_config(size: str) -> Source:
    """Where a size's training sets are declared (the two configs list the same sets)."""
    return Source(repo=_REPO, commit=_COMMIT,
                  path=f"train/contrastive_learning/train_script/qwen3vl{size}/weight_train_data_config.yaml")


MODELS = (
    ModelProfile(
        name="embed-rl-2b",
        paper_name="Embed-RL-2B",
        repo="ZoengHouNaam/Embed-RL-2B",
        revision=UNPINNED,
        family="qwen3_vl",
        window=32768,
        dim=2048,
        dtype="bfloat16",
        size="2B",
        query=_QUERY,
        document=_DOCUMENT,
        images=_IMAGES,
        frames="video",
        positions="mrope",
        sources=_SOURCES,
        video=_VIDEO,
        added_tokens=("<emb>",),
        verified=_VERIFIED,
        training_data=trained_on(_TRAINING, _training_config("2b")),
        paper_dim=1536,
        notes=(*_NOTES, "dimension: 2048, Qwen3-VL-2B's hidden size (the <emb> state is the last hidden state, no "
                        "projection); the paper's Table 2 gives 1536"),
    ),
    ModelProfile(
        name="embed-rl-4b",
        paper_name="Embed-RL-4B",
        repo="ZoengHouNaam/Embed-RL-4B",
        revision=UNPINNED,
        family="qwen3_vl",
        window=32768,
        dim=2560,
        dtype="bfloat16",
        size="4B",
        query=_QUERY,
        document=_DOCUMENT,
        images=_IMAGES,
        frames="video",
        positions="mrope",
        sources=_SOURCES,
        video=_VIDEO,
        added_tokens=("<emb>",),
        verified=_VERIFIED,
        training_data=trained_on(_TRAINING, _training_config("4b")),
        notes=(*_NOTES, "dimension: 2560, Qwen3-VL-4B's hidden size, as Table 2 gives"),
    ),
)
