"""The LLM layer: versioned prompts, backends (none, openai, vllm, ray, replay), a persistent
answer cache, contract checks with bounded repair retries, and the steps builders call. Imports
``core`` only."""

from mmlongembed.llm.config import BACKENDS, LLMConfig
from mmlongembed.llm.prompts import Prompt, load_prompt
from mmlongembed.llm.runner import StepResult, rerun_problem, run_llm_step
from mmlongembed.llm.steps import Audited, AuditItem, AuditOutcome, audit_queries, rewrite_captions, translate

__all__ = ["BACKENDS", "LLMConfig", "Prompt", "load_prompt", "StepResult", "rerun_problem", "run_llm_step",
           "Audited", "AuditItem", "AuditOutcome", "audit_queries", "rewrite_captions", "translate"]
