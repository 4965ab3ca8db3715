"""Qwen3-VL-Embedding (2B, 8B), as its official embedder (Qwen3VLEmbedder) runs it.

The instruction is the system prompt ("Represent the user's input." by default), "." appended; images
before the text; 32-px cells within [4, 1800] cells; the whole model's forward (mrope), right padding,
the last real token. A frame list is a video: at most 64 frames, 10 x 768 tokens' pixels in all, stamped
at qwen-vl-utils' 2 fps (fps 1 applies to video files only).
"""

from __future__ import annotations

from harness.profiles.schema import (ImageLimits, ModelProfile, SideForm, Source, Verification, VideoInput,
                                     chat_prompt, model_card, mteb_wrapper, wrapper_facts)

_DEFAULT_INSTRUCTION = "Represent the user's input."
_QUERY = SideForm(template=chat_prompt("{instruction}"), instruction_place="system prompt",
                  default_instruction=_DEFAULT_INSTRUCTION, instruction_end=".")
_DOCUMENT = SideForm(template=chat_prompt(_DEFAULT_INSTRUCTION), instruction_place="none")
_IMAGES = ImageLimits(patch_size=16, merge_size=2, min_pixels=4 * 32 * 32, max_pixels=1800 * 32 * 32)
_VIDEO = VideoInput(max_frames=64, total_pixels=10 * 768 * 32 * 32, timestamp_fps=2.0)
_WRAPPER = mteb_wrapper("qwen3_vl_embedding_models.py")
_SCRIPT = Source(repo="Qwen/Qwen3-VL-Embedding-2B", path="scripts/qwen3_vl_embedding.py",
                 commit="9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda")
# the official embedder (Qwen3VLEmbedder): the prompt, pooling, image and frame facts, and the reference
# the profile is checked against (its golden vectors: tests/golden/qwen3_vl.json)
_OFFICIAL = Source(repo="QwenLM/Qwen3-VL-Embedding", path="src/models/qwen3_vl_embedding.py",
                   commit="8ce3aab1fbcc7b7143b094f0b2005dd89e7246b9")
_OFFICIAL_FACTS = {"prompt": _OFFICIAL, "pooling": _OFFICIAL, "images": _OFFICIAL, "frames": _OFFICIAL,
                   "official": _SCRIPT}
_VERIFIED = Verification(reference=f"the official Qwen3VLEmbedder ({_OFFICIAL}) on a tiny Qwen3-VL, "
                                   "golden vectors tests/golden/qwen3_vl.json",
                         max_abs_diff=6.0e-8, test="tests/harness/profiles/test_profiles_qwen3_vl.py")
_NOTES = ("frames: the model's video input as the official code feeds a frame list: at most 64 frames, "
          "10 x 768 tokens' pixels in all, timestamps at 2 fps (its fps 1 is for video files); a "
          "frame-sequence pool's own grid rate (1 fps) cannot be passed to it",
          "the official code truncates at 8192 tokens, keeping the head; this benchmark's rule is the "
          "paper's: the 32768-token window, middle dropped",
          "the official code puts every image before the text; an item's images stay at their "
          "placeholders here (the side-by-side inputs lead with their images)")

MODELS = (
    ModelProfile(
        name="qwen3-vl-2b",
        paper_name="Qwen3-VL-2B",
        repo="Qwen/Qwen3-VL-Embedding-2B",
        revision="9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda",
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
        sources=wrapper_facts(
            _WRAPPER, model_card("Qwen/Qwen3-VL-Embedding-2B", "9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda"),
            **_OFFICIAL_FACTS),
        video=_VIDEO,
        verified=_VERIFIED,
        notes=_NOTES,
    ),
    ModelProfile(
        name="qwen3-vl-8b",
        paper_name="Qwen3-VL-8B",
        repo="Qwen/Qwen3-VL-Embedding-8B",
        revision="2c4565515e0f265c6511776e7193b22c0968ddc7",
        family="qwen3_vl",
        window=32768,
        dim=4096,
        dtype="bfloat16",
        size="8B",
        query=_QUERY,
        document=_DOCUMENT,
        images=_IMAGES,
        frames="video",
        positions="mrope",
        sources=wrapper_facts(
            _WRAPPER, model_card("Qwen/Qwen3-VL-Embedding-8B", "2c4565515e0f265c6511776e7193b22c0968ddc7"),
            **_OFFICIAL_FACTS),
        video=_VIDEO,
        verified=_VERIFIED,
        notes=_NOTES,
    ),
)
