"""The Ray Data path (``--llm ray --llm-ray-engine http``) against the loopback test server.

Skipped where the optional extra is not installed. It starts a local Ray instance (about 20 s on
two cores), so it is one test that checks everything the path owes: the requests reach the
server with the key, repair turns work, and the answers equal the openai backend's."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.data.llm", reason="the optional extra [ray] is not installed")

from mmlongembed.core.builder import BuildReport  # noqa: E402
from mmlongembed.llm import LLMConfig, audit_queries  # noqa: E402
from mmlongembed.llm.fake_server import FakeOpenAIServer, audit_responder  # noqa: E402
from mmlongembed.llm.ray_backend import RayBackend  # noqa: E402
from mmlongembed.llm.steps import AuditItem  # noqa: E402


@pytest.mark.slow
def test_ray_http_stage_gives_the_openai_backends_answers(tmp_path, monkeypatch):
    import ray

    monkeypatch.setenv("MMLE_LLM_API_KEY", "sk-ray-test")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    items = [AuditItem(f"q{i}", question, "x", ("x",)) for i, question in enumerate([
        "Which French river flows through Paris and Rouen?", "Who won?",
        "In which year did the Eiffel Tower open to visitors in Paris?", "What is the capital city of Peru?"])]
    with FakeOpenAIServer(responder=audit_responder(malformed_every=2)) as server:
        common = dict(llm_base_url=server.url, llm_model="fake-model", llm_concurrency=4, llm_backoff=0.01)
        openai_report = BuildReport()
        via_http = audit_queries(items, LLMConfig(llm="openai", llm_cache=str(tmp_path / "a"), **common), openai_report)
        ray_config = LLMConfig(llm="ray", llm_ray_engine="http", llm_cache=str(tmp_path / "b"), **common)
        ray_report = BuildReport()
        try:
            via_ray = audit_queries(items, ray_config, ray_report, backend=RayBackend(ray_config))
        finally:
            ray.shutdown()
        ray_bodies = server.bodies[openai_report.llm_steps[0]["calls"]:]
        authorizations = server.authorizations[openai_report.llm_steps[0]["calls"]:]
    assert via_ray.verdicts == via_http.verdicts and via_ray.kept == {"q0", "q2"}
    step = ray_report.llm_steps[0]
    assert step["backend"] == "ray" and step["calls"] == openai_report.llm_steps[0]["calls"] > len(items)
    assert all(b["temperature"] == 0.0 and "response_format" in b for b in ray_bodies)
    assert set(authorizations) == {"Bearer sk-ray-test"}
