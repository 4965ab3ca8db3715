"""The LLM options every builder config inherits (``class XConfig(CommonConfig, LLMConfig)``).

The CLI turns each field into a flag (``--llm``, ``--llm-model``, ...). No field name contains
"token", "key" or "secret": the manifest drops such fields, and the API key is never a field at
all; it is read from the environment (``MMLE_LLM_API_KEY``, else ``OPENAI_API_KEY``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

BACKENDS = ("none", "openai", "vllm", "ray", "replay")
PAPER_MODEL = "Qwen/Qwen2.5-32B-Instruct"  # the paper's model, with greedy decoding


@dataclass
class LLMConfig:
    OPTIONS_TITLE = "LLM options (the builder's LLM steps; docs/LLM.md)"  # its flags' group in --help
    llm: str = field(default="none", metadata={
        "help": "backend for LLM steps: none (deterministic fallbacks; steps without one refuse), "
                "openai (an OpenAI-compatible server), vllm (in-process vLLM), ray (Ray Data batch job), "
                "replay (answers only from the cache)",
        "choices": BACKENDS})
    llm_model: str = field(default=PAPER_MODEL, metadata={"help": "model name (as the server or vLLM knows it)"})
    llm_prompt_version: str = field(default="paper", metadata={
        "help": "prompt wording: paper (the inputs, rules and output fields of the paper's Tables 8-10; its "
                "rule-based audit filter under --llm none) or v1 (the toolkit's first prompts and heuristic)",
        "choices": ("paper", "v1")})
    llm_model_revision: str = field(default="", metadata={
        "help": "model revision (commit) the answers come from; part of the cache key"})
    llm_base_url: str = field(default="http://127.0.0.1:8000/v1", metadata={
        "help": "base URL of the OpenAI-compatible server (openai backend, ray with --llm-ray-engine http)"})
    llm_cache: str = field(default=".cache/mmle/llm", metadata={
        "help": "directory of the persistent LLM answer cache (resume, replay)"})
    llm_concurrency: int = field(default=8, metadata={"help": "requests in flight at once (openai, ray http)"})
    llm_timeout: float = field(default=120.0, metadata={"help": "seconds before one HTTP request is abandoned"})
    llm_max_retries: int = field(default=4, metadata={
        "help": "retries of one request after 429, 5xx, timeouts or connection errors (exponential backoff)"})
    llm_output_retries: int = field(default=2, metadata={
        "help": "re-asks after a reply that breaks the prompt's output contract, before the record is rejected"})
    llm_max_output_len: int = field(default=512, metadata={"help": "most tokens the model may generate per reply"})
    llm_backoff: float = field(default=1.0, metadata={"help": "first retry delay in seconds (doubles each retry)"})
    llm_replay_from: str = field(default="", metadata={
        "help": "replay: the backend whose cached answers to use, when the cache holds several for one request"})
    llm_ray_engine: str = field(default="vllm", metadata={
        "help": "ray: run vLLM on the cluster's GPUs (vllm) or call an OpenAI-compatible server (http)",
        "choices": ("vllm", "http")})
    llm_tensor_parallel: int = field(default=1, metadata={"help": "vllm/ray: GPUs per model replica"})


def decoding_parameters(config: LLMConfig) -> dict:
    """Greedy decoding, as in the paper. Part of every cache key."""
    return {"temperature": 0.0, "top_p": 1.0, "max_tokens": config.llm_max_output_len}
