"""`openai:<model>@<base_url>`: any OpenAI-compatible `/v1/embeddings` server, through the `openai`
client (its retries with backoff on 408, 409, 429, 5xx, timeouts and connection errors; its typed
errors become one-line pool skips). Registered in `harness.models.adapters.MODEL_KINDS`, imported on first use.
"""

from __future__ import annotations

import base64
import os

import httpx
import numpy as np
import openai

from harness.scoring.data import Item
from harness.models.adapters import DenseModel, Model, ModelError, RunSettings, register_model_kind
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER


class OpenAIModel(DenseModel):
    """An OpenAI-compatible `/v1/embeddings` server. Text goes as `input`; an input with images is
    sent alone in vLLM's chat form (`messages` with image_url data URIs). With --max-length,
    text is truncated in the middle on the Qwen3 yardstick (the server's own tokenizer is unknown)."""

    modalities = frozenset({"text", "image"})

    def __init__(self, model: str, base_url: str, settings: RunSettings):
        super().__init__(settings)
        self.model, self.base_url = model, base_url.rstrip("/")
        self.spec = f"openai:{model}@{self.base_url}"
        self.window = settings.max_length
        self._client = None  # the openai client, made on the first request

    def identity(self) -> dict:
        # A server does not tell its weights' revision; the cache trusts model name and URL.
        return {"model": self.spec, "max_length": self.window, "query_template": self.query_template}

    def _make_client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY", "none"), timeout=600)

    def _request(self, path: str, payload: dict) -> dict:
        """POST ``payload`` to ``base_url + path``: the JSON answer, or a one-line ModelError."""
        if self._client is None:
            # The client retries 408, 409, 429, 5xx, timeouts and connection errors (twice, with
            # backoff). The payload goes as it is: the chat form is vLLM's, not the OpenAI API's.
            self._client = self._make_client()
        try:
            return self._client.post(path, body=payload, cast_to=httpx.Response).json()
        except openai.APIStatusError as exc:
            raise ModelError(f"server answered {exc.status_code}: {exc.response.text[:200]}") from None
        except openai.APIConnectionError as exc:  # timeouts too; the cause says which (refused, timed out)
            raise ModelError(f"cannot reach {self.base_url}: {exc.__cause__ or exc}") from None
        except ValueError:  # not JSON
            raise ModelError(f"{self.base_url}{path}: the answer is not JSON") from None

    def _post(self, payload: dict) -> list[list[float]]:
        body = self._request("/embeddings", payload)
        data = sorted(body.get("data", []), key=lambda d: d["index"])
        return [d["embedding"] for d in data]

    def close(self) -> None:
        super().close()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _fit(self, item: Item) -> tuple[Item, bool]:
        if not self.window:
            return item, False
        from mmlongembed.core.tokens import default_counter, image_tokens

        counter = default_counter()
        runs = item.text.split(IMAGE_PLACEHOLDER)
        sizes = [(im.height, im.width) for im in item.pil_images()] if item.images else []
        units, costs = [], []
        for i, run in enumerate(runs):
            for token in counter.encode(run):
                units.append(token)
                costs.append(1)
            if i < len(item.images):
                units.append(("image", item.images[i]))
                costs.append(image_tokens(*sizes[i]))
        kept, truncated = truncate_middle(units, costs, self.window)
        if not truncated:
            return item, False
        text, images, pending = [], [], []
        for unit in kept + [None]:
            if isinstance(unit, int):
                pending.append(unit)
                continue
            text.append(counter.decode(pending))
            pending = []
            if unit is not None:
                text.append(IMAGE_PLACEHOLDER)
                images.append(unit[1])
        return Item(id=item.id, text="".join(text), images=tuple(images), instruction=item.instruction,
                    is_query=item.is_query), True

    def embed(self, items):
        fitted = [self._fit(item) for item in items]
        text_only = [i for i, (item, _) in enumerate(fitted) if not item.images]
        vectors: dict[int, list[float]] = {}
        if text_only:
            got = self._post({"model": self.model, "input": [fitted[i][0].text for i in text_only],
                              "encoding_format": "float"})
            if len(got) != len(text_only):
                raise ModelError(f"server returned {len(got)} embeddings for {len(text_only)} inputs")
            vectors.update(zip(text_only, got))
        for i, (item, _) in enumerate(fitted):
            if item.images:
                vectors[i] = self._post({"model": self.model, "encoding_format": "float",
                                         "messages": [{"role": "user", "content": interleaved_content(item)}]})[0]
        return np.array([vectors[i] for i in range(len(items))], dtype=np.float32), [f for _, f in fitted]


def image_mime(data: bytes) -> str:
    """The media type of encoded image bytes, from their signature (JPEG where unknown)."""
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] in (b"GIF8",):
        return "image/gif"
    return "image/jpeg"


def interleaved_content(item: Item) -> list[dict]:
    """Interleaved chat content: text runs and images (data URIs) in placeholder order."""
    parts = []
    for i, run in enumerate(item.text.split(IMAGE_PLACEHOLDER)):
        if run:
            parts.append({"type": "text", "text": run})
        if i < len(item.images):
            uri = f"data:{image_mime(item.images[i])};base64," + base64.b64encode(item.images[i]).decode()
            parts.append({"type": "image_url", "image_url": {"url": uri}})
    return parts


@register_model_kind("openai", "openai:<model>@<base_url>")
def _openai(argument: str, settings: RunSettings) -> Model | None:
    model, at, url = argument.partition("@")
    if at and model and url.startswith(("http://", "https://")):
        return OpenAIModel(model, url, settings)
    return None
