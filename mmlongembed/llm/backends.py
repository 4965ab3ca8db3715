"""LLM backends: each turns a batch of chat requests into replies (or per-request failures).

- ``openai``: any OpenAI-compatible server over HTTP (``vllm serve``, a hosted API), through the
  ``openai`` client: bounded concurrency, per-request timeout, retries with exponential backoff on
  429, 5xx, timeouts and connection errors (honouring ``Retry-After``). In ``llm/openai_backend.py``.
- ``vllm``: the in-process vLLM offline engine (``LLM.chat``), greedy, structured JSON output
  where the prompt has a schema. Optional extra ``[vllm]``; needs a GPU.
- ``ray``: the same requests as a Ray Data batch job (``ray.data.llm``), over vLLM on the cluster's
  GPUs or over an OpenAI-compatible server (the HTTP request stage). Optional extra ``[ray]``.

A backend never raises for one bad request: it returns ``Reply(error=...)`` and the step counts it.
``complete(requests, on_reply)`` calls ``on_reply(index, reply)`` as each reply arrives (the
runner stores it in the cache right away, so an interrupted run loses at most what was in flight).
The API key is read from the environment when a batch is sent, and is never stored on the
backend, logged or put in an error message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Optional

from mmlongembed.core.errors import UserError
from mmlongembed.llm.config import LLMConfig
from mmlongembed.core.plugins import PluginRegistry

API_KEY_VARIABLES = ("MMLE_LLM_API_KEY", "OPENAI_API_KEY")
# The backends that call a model -> the module that registers each (Ray's pulls in the optional extra).
BACKENDS: PluginRegistry[Callable[[LLMConfig], object]] = PluginRegistry("LLM backend", {
    "openai": "mmlongembed.llm.openai_backend", "vllm": "mmlongembed.llm.backends", "ray": "mmlongembed.llm.ray_backend"})


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict]
    schema: dict | None  # JSON schema of the reply, when the prompt has one
    schema_name: str
    decoding: dict


OnReply = Callable[[int, "Reply"], None]

NOT_SENT = "not_sent"  # a Reply's error for a request an interrupt left unsent: not a failure to record


@dataclass(frozen=True)
class Reply:
    text: str | None = None
    error: str | None = None  # short counted reason: timeout, http_503, connection_error...

    @property
    def ok(self) -> bool:
        return self.error is None


def api_key() -> str | None:
    for variable in API_KEY_VARIABLES:
        value = os.environ.get(variable)
        if value:
            return value
    return None


def chat_payload(model: str, request: ChatRequest) -> dict:
    payload = {
        "model": model,
        "messages": request.messages,
        "temperature": request.decoding["temperature"],
        "top_p": request.decoding["top_p"],
        "max_tokens": request.decoding["max_tokens"],
    }
    if request.schema is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
        }
    return payload


def reply_text(body: dict) -> str:
    """The message text of an OpenAI chat completion body; KeyError/TypeError when it has none."""
    content = body["choices"][0]["message"]["content"]
    return content if isinstance(content, str) else ""


@BACKENDS.register("vllm")
class VLLMBackend:
    """In-process vLLM. Import-guarded: the extra is optional and needs a GPU."""

    name = "vllm"

    def __init__(self, config: LLMConfig):
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise UserError("--llm vllm needs the optional extra: pip install 'mmlongembed[vllm]' (and a GPU)") from None
        self.model = config.llm_model
        self.model_revision = config.llm_model_revision
        self.tensor_parallel = config.llm_tensor_parallel
        self._engine = None

    def _llm(self):
        if self._engine is None:
            from vllm import LLM

            self._engine = LLM(model=self.model, revision=self.model_revision or None,
                               tensor_parallel_size=self.tensor_parallel, seed=0)
        return self._engine

    def complete(self, requests: list[ChatRequest], on_reply: Optional[OnReply] = None) -> list[Reply]:
        if not requests:
            return []
        # Requests with the same schema share sampling parameters; vLLM batches each group.
        replies: list[Reply | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(json.dumps(request.schema, sort_keys=True), []).append(i)
        for indices in groups.values():
            params = vllm_sampling_params(requests[indices[0]])
            try:
                outputs = self._llm().chat([requests[i].messages for i in indices], params, use_tqdm=False)
            except Exception as error:  # noqa: BLE001  (one failed batch is counted, not fatal)
                for i in indices:
                    replies[i] = Reply(error=f"vllm_error:{type(error).__name__}")
                continue
            for i, output in zip(indices, outputs):
                replies[i] = Reply(text=output.outputs[0].text if output.outputs else "")
                if on_reply is not None:
                    on_reply(i, replies[i])
        return [r or Reply(error="vllm_no_output") for r in replies]


def vllm_sampling_params(request: ChatRequest):
    """Greedy SamplingParams, with JSON-schema constrained decoding where the prompt has a schema.
    vLLM renamed guided decoding to structured outputs; both spellings are supported."""
    from vllm import SamplingParams

    kwargs = {"temperature": request.decoding["temperature"], "top_p": request.decoding["top_p"],
              "max_tokens": request.decoding["max_tokens"]}
    if request.schema is None:
        return SamplingParams(**kwargs)
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(**kwargs, structured_outputs=StructuredOutputsParams(json=request.schema))
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return SamplingParams(**kwargs, guided_decoding=GuidedDecodingParams(json=request.schema))


def make_backend(config: LLMConfig):
    """The live backend for ``config.llm`` (not ``none`` or ``replay``, which never call a model)."""
    backend = BACKENDS.get(config.llm)
    if backend is None:
        raise ValueError(f"backend {config.llm!r} does not call a model")
    return backend(config)
