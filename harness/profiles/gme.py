"""GME (Qwen2-VL, 2B and 7B), as mteb's GME Encoder runs it (gme_v_models.py: Encoder.embed / forward,
GmeQwen2VL.encode).

The system prompt is the instruction for queries, the default system prompt for documents; the image
before the text; the LLM run on input embeddings (1-D positions); an <|endoftext|> suffix whose state is
the embedding.
"""

from __future__ import annotations

from harness.profiles.schema import (DEFAULT_SYSTEM, END_OF_TEXT, ModelProfile, SideForm, Source, Verification,
                                     chat_prompt, model_card, mteb_wrapper, qwen2_limits, trained_on, wrapper_facts)

_QUERY = SideForm(template=chat_prompt("{instruction}", END_OF_TEXT), instruction_place="system prompt",
                  default_instruction=DEFAULT_SYSTEM, instruction_end=".")
_DOCUMENT = SideForm(template=chat_prompt(DEFAULT_SYSTEM, END_OF_TEXT), instruction_place="none")
_WRAPPER = mteb_wrapper("gme_v_models.py")
_TRAINING = trained_on(("MSMARCO", "NQ", "HotpotQA", "FEVER", "TriviaQA", "SQuAD", "AllNLI", "ImageNet", "LAION",
                        "MSCOCO", "Docmatix", "M-BEIR"), _WRAPPER)
_VERIFIED = Verification(reference="mteb's GME Encoder.embed (gme_v_models.py) on a tiny Qwen2-VL", max_abs_diff=3.0e-8)
_NOTES = ("mteb truncates at 1800 tokens (its default max_length); this benchmark's rule is the paper's: "
          "the 32768-token window, middle dropped",
          "the official code takes one image, before the text; interleaved items keep each image at its "
          "placeholder and frames go in as images in order (the video path is commented out upstream)")

MODELS = (
    ModelProfile(
        name="gme-qwen2-vl-2b",
        paper_name="GME-Qwen2-VL-2B",
        repo="Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
        revision="ce765ae71b8cdb208203cd8fb64a170b1b84293a",
        family="qwen2_vl",
        window=32768,
        dim=1536,
        dtype="float16",
        size="2B",
        query=_QUERY,
        document=_DOCUMENT,
        images=qwen2_limits(4, 1280, pre_resize=True),
        frames="images",
        positions="sequential",
        sources=wrapper_facts(
            _WRAPPER, model_card("Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", "ce765ae71b8cdb208203cd8fb64a170b1b84293a"),
            official=Source(repo="Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", path="gme_inference.py",
                            commit="ce765ae71b8cdb208203cd8fb64a170b1b84293a")),
        verified=_VERIFIED,
        training_data=_TRAINING,
        notes=_NOTES,
    ),
    ModelProfile(
        name="gme-qwen2-vl-7b",
        paper_name="GME-Qwen2-VL-7B",
        repo="Alibaba-NLP/gme-Qwen2-VL-7B-Instruct",
        revision="477027a6480f8630363be77751f169cc3434b673",
        family="qwen2_vl",
        window=32768,
        dim=3584,
        dtype="float16",
        size="8B",
        query=_QUERY,
        document=_DOCUMENT,
        images=qwen2_limits(4, 1280, pre_resize=True),
        frames="images",
        positions="sequential",
        sources=wrapper_facts(
            _WRAPPER, model_card("Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", "477027a6480f8630363be77751f169cc3434b673")),
        verified=_VERIFIED,
        training_data=_TRAINING,
        notes=_NOTES,
    ),
)
