"""Doubao-Seed-1.6 (an API), as mteb's wrapper calls it (seed_1_6_embedding_models_1215.py); run by
harness/models/doubao_model.py.
"""

from __future__ import annotations

from harness.profiles.schema import ModelProfile, SideForm, mteb_wrapper, paper_tables

MODELS = (
    ModelProfile(
        name="doubao-seed-1.6",
        paper_name="Doubao-Seed-1.6",
        repo="doubao-embedding-vision-251215",
        revision="1",
        family="api",
        window=131072,
        dim=2048,
        dtype="api",
        size="",
        query=SideForm(template="Target_modality:Text.\n Instruction:{instruction}\n Query:{content}",
                       instruction_place="API instruction field"),
        document=SideForm(template="Instruction: Compress the text into one word.\n Query:{content}",
                          instruction_place="API instruction field"),
        images=None,
        frames="images",
        positions="api",
        sources={"api": mteb_wrapper("seed_1_6_embedding_models_1215.py"), "paper_name": paper_tables("Table 5")},
        image_markup="",
        group="Proprietary Models",
        unverified_reason=("an API: no weights to run side by side; its adapter (harness/models/doubao_model.py) is "
                           "tested against a loopback server that speaks the request and response shapes of mteb's "
                           "wrapper"),
        notes=("documents with images use 'Compress the text and image into one word.'; image-only "
               "'Compress the image into one word.' (mteb)",
               "`--model doubao-seed-1.6` runs the adapter at https://ark.cn-beijing.volces.com/api/v3 "
               "(/embeddings/multimodal; `doubao:<model>@<base_url>` for another endpoint), key from ARK_API_KEY "
               "or VOLCES_AUTH_TOKEN"),
    ),
)
