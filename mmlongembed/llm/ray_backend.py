"""The same LLM step as a Ray Data batch job (``ray.data.llm``), for users who outgrow one GPU.

Optional extra ``[ray]`` (``pip install 'mmlongembed[ray]'``; the vLLM engine also needs
``[vllm]`` on the GPU workers). Two engines:

- ``--llm-ray-engine vllm``: ``vLLMEngineProcessorConfig``: vLLM replicas on the cluster's GPUs,
  greedy, JSON-schema structured output where the prompt has a schema.
- ``--llm-ray-engine http``: ``HttpRequestProcessorConfig``: the HTTP request stage calls an
  OpenAI-compatible server (``--llm-base-url``), e.g. a ``vllm serve`` fleet behind a load balancer.

It connects to an existing cluster when ``RAY_ADDRESS`` is set (``ray start --head`` on the head
node, then for example)::

    RAY_ADDRESS=auto mmle build hotpotqa --llm ray --llm-ray-engine vllm \\
        --llm-model Qwen/Qwen2.5-32B-Instruct --llm-tensor-parallel 4 --llm-concurrency 2

and otherwise starts a local Ray instance. The answers go into the same cache as every other
backend, so ``--llm replay`` rebuilds a Ray-made benchmark on a laptop.
"""

from __future__ import annotations

import os

from mmlongembed.core.errors import UserError
from mmlongembed.llm.backends import BACKENDS, ChatRequest, Reply, api_key, chat_payload, reply_text
from mmlongembed.llm.config import LLMConfig

REQUEST_INDEX = "mmle_request_index"


@BACKENDS.register("ray")
class RayBackend:
    name = "ray"

    def __init__(self, config: LLMConfig):
        try:
            import ray  # noqa: F401
            import ray.data.llm  # noqa: F401
        except ImportError as error:
            raise UserError(f"--llm ray needs the optional extra: pip install 'mmlongembed[ray]' ({error})") from None
        self.config = config
        self.model = config.llm_model
        self.model_revision = config.llm_model_revision
        self.engine = config.llm_ray_engine

    def _ensure_ray(self) -> None:
        import ray

        if not ray.is_initialized():
            # RAY_ADDRESS (if set) makes ray.init join the existing cluster.
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                     include_dashboard=False, ignore_reinit_error=True)

    def processor(self):
        """The Ray Data LLM processor for this config; rows carry ``payload`` or ``messages``."""
        from ray.data.llm import build_processor

        config = self.config
        if self.engine == "http":
            from ray.data.llm import HttpRequestProcessorConfig

            headers = {"Content-Type": "application/json"}
            key = api_key()
            if key:
                headers["Authorization"] = f"Bearer {key}"
            processor_config = HttpRequestProcessorConfig(
                url=config.llm_base_url.rstrip("/") + "/chat/completions",
                headers=headers, concurrency=1, qps=None, batch_size=max(1, config.llm_concurrency),
                max_retries=config.llm_max_retries, base_retry_wait_time_in_s=config.llm_backoff,
            )
            return build_processor(
                processor_config,
                preprocess=lambda row: {"payload": row["payload"]},
                postprocess=_http_postprocess,
            )
        from ray.data.llm import vLLMEngineProcessorConfig

        engine_kwargs = {"tensor_parallel_size": config.llm_tensor_parallel, "seed": 0}
        if config.llm_model_revision:
            engine_kwargs["revision"] = config.llm_model_revision
        processor_config = vLLMEngineProcessorConfig(
            model_source=config.llm_model, engine_kwargs=engine_kwargs,
            concurrency=max(1, config.llm_concurrency), batch_size=32,
        )
        return build_processor(
            processor_config,
            preprocess=_vllm_preprocess,
            postprocess=lambda row: {REQUEST_INDEX: row[REQUEST_INDEX], "text": row.get("generated_text") or "",
                                     "error": ""},
        )

    def rows(self, requests: list[ChatRequest]) -> list[dict]:
        import json

        rows = []
        for i, request in enumerate(requests):
            row = {REQUEST_INDEX: i}
            if self.engine == "http":
                row["payload"] = chat_payload(self.model, request)
            else:
                # Arrow columns need one type per column: nested dicts travel as JSON text.
                row["request_json"] = json.dumps({"messages": request.messages, "schema": request.schema,
                                                  "decoding": request.decoding})
            rows.append(row)
        return rows

    def complete(self, requests: list[ChatRequest], on_reply=None) -> list[Reply]:
        if not requests:
            return []
        import ray.data

        self._ensure_ray()
        try:
            results = self.processor()(ray.data.from_items(self.rows(requests))).take_all()
        except Exception as error:  # noqa: BLE001  (a failed job is counted per request, never a crash)
            return [Reply(error=f"ray_error:{type(error).__name__}")] * len(requests)
        replies: list[Reply] = [Reply(error="ray_no_output")] * len(requests)
        for row in results:
            replies[int(row[REQUEST_INDEX])] = Reply(text=row["text"]) if not row["error"] else Reply(error=row["error"])
        if on_reply is not None:
            for index, reply in enumerate(replies):
                on_reply(index, reply)
        return replies


def _http_postprocess(row: dict) -> dict:
    try:
        return {REQUEST_INDEX: row[REQUEST_INDEX], "text": reply_text(row["http_response"]), "error": ""}
    except (KeyError, IndexError, TypeError):
        return {REQUEST_INDEX: row[REQUEST_INDEX], "text": "", "error": "bad_response_body"}


def _vllm_preprocess(row: dict) -> dict:
    import json

    request = json.loads(row["request_json"])
    sampling = {"temperature": request["decoding"]["temperature"], "top_p": request["decoding"]["top_p"],
                "max_tokens": request["decoding"]["max_tokens"]}
    if request["schema"] is not None:
        sampling["structured_outputs"] = {"json": request["schema"]}
    return {REQUEST_INDEX: row[REQUEST_INDEX], "messages": request["messages"], "sampling_params": sampling}
