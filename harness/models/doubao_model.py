"""`doubao:<model>@<base_url>`: the Doubao-Seed-1.6 multimodal embedding API (Volcengine Ark,
`POST <base_url>/embeddings/multimodal`), e.g.
`doubao:doubao-embedding-vision-251215@https://ark.cn-beijing.volces.com/api/v3`.

Request and response shapes, and the instructions, are those of mteb's wrapper
(mteb/models/model_implementations/seed_1_6_embedding_models_1215.py): one input per request,
`{"model", "instruction", "input": [{"type": "text", "text"} | {"type": "image_url", "image_url":
{"url": "data:image/...;base64,..."}}]}`, the header `x-ark-vlm1: true`, and the answer
`{"data": {"embedding": [...]}}`. Queries get `Target_modality:Text.\\n Instruction:<the pool's
instruction>\\n Query:`; candidates `Instruction: Compress the text (and image | the image) into one
word.\\n Query:`. Differences from mteb, on purpose: the parts go in the input's own interleaved
order (mteb puts every image before the text), and the instruction is sent with images too (mteb
drops it there). The key comes from `ARK_API_KEY` (Volcengine's name) or `VOLCES_AUTH_TOKEN`
(mteb's), and is never part of the spec, the identity, the cache key or a message. Retries are the
`openai:` adapter's (the same client: 408, 409, 429, 5xx, timeouts, connection errors, twice with
backoff).
"""

from __future__ import annotations

import os

import numpy as np
import openai

from harness.scoring.data import Item
from harness.models.adapters import Model, ModelError, RunSettings, register_model_kind
from harness.models.openai_model import OpenAIModel, interleaved_content
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError

KEY_VARIABLES = ("ARK_API_KEY", "VOLCES_AUTH_TOKEN")
ARK_BASE_URL = "https://ark.cn-beijing.volces.com/api/v3"  # mteb's endpoint; `--model doubao-seed-1.6` uses it
MULTIMODAL_PATH = "/embeddings/multimodal"
QUERY_INSTRUCTION = "Target_modality:Text.\n Instruction:{instruction}\n Query:"
DOCUMENT_INSTRUCTIONS = {  # (has text, has images) -> mteb's candidate instruction
    (True, False): "Instruction: Compress the text into one word.\n Query:",
    (True, True): "Instruction: Compress the text and image into one word.\n Query:",
    (False, True): "Instruction: Compress the image into one word.\n Query:",
}


def api_key() -> str:
    for name in KEY_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    raise UserError(f"doubao: no API key: set {' or '.join(KEY_VARIABLES)}")


def instruction_for(item: Item) -> str:
    """The API's `instruction` field for an input, as mteb's wrapper words it."""
    if item.is_query:
        return QUERY_INSTRUCTION.format(instruction=item.instruction.rstrip("\n"))
    has_text = bool(item.text.replace(IMAGE_PLACEHOLDER, "").strip())
    has_images = bool(item.images)
    if not (has_text or has_images):
        raise ModelError("doubao: an input with neither text nor images")
    return DOCUMENT_INSTRUCTIONS[has_text, has_images]


class DoubaoModel(OpenAIModel):
    """One request per input; text, images (base64 data URLs) and both interleaved."""

    def __init__(self, model: str, base_url: str, settings: RunSettings):
        super().__init__(model, base_url, settings)
        self.spec = f"doubao:{model}@{self.base_url}"
        self._key = api_key()  # checked now: a missing key is one line before any pool is read

    def __repr__(self) -> str:
        return f"DoubaoModel({self.spec!r})"

    def identity(self) -> dict:
        return {**super().identity(), "api": "ark embeddings/multimodal", "instructions": "mteb 1215 wrapper"}

    def _make_client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=self._key, timeout=600,
                             default_headers={"x-ark-vlm1": "true"})

    def embed(self, items):
        fitted = [self._fit(item) for item in items]
        vectors = []
        for item, _ in fitted:
            payload = {"model": self.model, "instruction": instruction_for(item), "input": interleaved_content(item)}
            body = self._request(MULTIMODAL_PATH, payload)
            try:
                vectors.append(body["data"]["embedding"])
            except (KeyError, TypeError):
                raise ModelError(f"{self.base_url}{MULTIMODAL_PATH}: no data.embedding in the answer") from None
        return np.array(vectors, dtype=np.float32), [truncated for _, truncated in fitted]


@register_model_kind("doubao", "doubao:<model>@<base_url>")
def _doubao(argument: str, settings: RunSettings) -> Model | None:
    model, at, url = argument.partition("@")
    if at and model and url.startswith(("http://", "https://")):
        return DoubaoModel(model, url, settings)
    return None
