"""The openai backend, the cache and replay, against a real HTTP server on loopback."""

from __future__ import annotations

import json
import threading

import pytest

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.llm import LLMConfig, audit_queries, load_prompt, run_llm_step, translate
from mmlongembed.llm.backends import Reply
from mmlongembed.llm.cache import LLMCache
from mmlongembed.llm.fake_server import FakeOpenAIServer, audit_responder, first_user_message
from mmlongembed.llm.openai_backend import OpenAIBackend
from mmlongembed.llm.steps import AuditItem

VALID = ('{"is_valid": true, "strong_linked_anchor": "Paris", "anchor_type": "entity", '
         '"potential_ambiguity": "Low", "reason": "anchored"}')
INVALID = ('{"is_valid": false, "strong_linked_anchor": "Paris", "anchor_type": "entity", '
           '"potential_ambiguity": "High", "reason": "vague"}')


def config(server, tmp_path, **overrides) -> LLMConfig:
    values = dict(llm="openai", llm_model="fake-model", llm_base_url=server.url, llm_cache=str(tmp_path / "cache"),
                  llm_concurrency=4, llm_timeout=5.0, llm_max_retries=2, llm_backoff=0.01, llm_output_retries=2)
    values.update(overrides)
    return LLMConfig(**values)


def items(n: int, prefix: str = "q") -> list[AuditItem]:
    return [AuditItem(f"{prefix}{i}", f"Question number {i} about Paris?", "Paris", ("Paris is a city.",))
            for i in range(n)]


@pytest.fixture
def server():
    with FakeOpenAIServer(responder=lambda body: VALID) as running:
        yield running


def test_requests_are_greedy_and_ask_for_structured_json(server, tmp_path):
    outcome = audit_queries(items(2), config(server, tmp_path), BuildReport())
    assert outcome.kept == {"q0", "q1"}
    body = server.bodies[0]
    assert body["temperature"] == 0.0 and body["model"] == "fake-model"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == load_prompt("query_audit").json_schema
    assert body["messages"][0]["content"] == load_prompt("query_audit").system


def test_concurrency_is_bounded_and_used(tmp_path):
    """The server answers only when three requests are in flight together (a barrier): a client
    that sent one at a time would never be answered, one that sent more would be seen. No
    timing is assumed; the barrier's timeout is a safety net that fails the test."""
    barrier = threading.Barrier(3)

    def responder(body):
        barrier.wait(timeout=60)
        return VALID

    with FakeOpenAIServer(responder=responder) as server:
        outcome = audit_queries(items(9), config(server, tmp_path, llm_concurrency=3, llm_timeout=120,
                                                 llm_max_retries=0), BuildReport())
    assert outcome.kept == {f"q{i}" for i in range(9)}
    assert server.max_in_flight == 3 and server.requests == 9


def test_retries_with_backoff_on_5xx_and_429(server, tmp_path):
    server.fail_next(1, status=503)
    server.fail_next(1, status=429, retry_after="0")
    result = run_llm_step("query_audit", load_prompt("query_audit"), [("only", {"query": "Who?"})],
                          config(server, tmp_path, llm_concurrency=1), BuildReport())
    assert result.values["only"]["is_valid"] is True
    assert server.requests == 3


def chat_request(text: str = "x"):
    from mmlongembed.llm.backends import ChatRequest

    return ChatRequest([{"role": "user", "content": text}], None, "t", {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8})


def recording_backend(server, waits: list, **overrides):
    """The openai backend against ``server``, its waits between tries recorded instead of slept."""
    async def record(seconds: float) -> None:
        waits.append(seconds)

    values = dict(llm="openai", llm_base_url=server.url, llm_max_retries=3, llm_backoff=0.5)
    values.update(overrides)
    return OpenAIBackend(LLMConfig(**values), sleep=record)


def test_backoff_doubles_and_honours_retry_after():
    waits = []
    with FakeOpenAIServer(responder=lambda body: VALID) as server:
        backend = recording_backend(server, waits)
        server.fail_next(2, status=500)
        server.fail_next(1, status=429, retry_after="7")
        reply = backend.complete([chat_request()])[0]
    assert reply.ok and waits == [0.5, 1.0, 7.0] and server.requests == 4


def test_retries_on_500_stop_at_max_retries_and_the_failure_is_recorded(tmp_path):
    """--llm-max-retries 2: three tries, two waits, then the record fails with http_500; the
    failure is in the cache, so replay fails it the same way."""
    waits = []
    with FakeOpenAIServer(responder=lambda body: VALID) as server:
        server.fail_next(5, status=500)
        reply = recording_backend(server, waits, llm_max_retries=2).complete([chat_request()])[0]
        assert reply.error == "http_500" and waits == [0.5, 1.0] and server.requests == 3
        server.fail_next(3, status=500)
        report = BuildReport()
        audit_queries(items(2), config(server, tmp_path, llm_concurrency=1), report)
        replay = config(server, tmp_path, llm="replay")
    assert report.llm_steps[0]["rejected"] == {"request_failed:http_500": 1}
    replayed = BuildReport()
    audit_queries(items(2), replay, replayed)  # the server is gone
    assert replayed.skipped == report.skipped


def test_a_body_that_is_not_a_completion_is_retried_then_counted():
    """Malformed JSON (or JSON without choices) in a 200 is retried like a dropped connection;
    once the tries run out the reply fails with bad_response_body."""
    from mmlongembed.llm.fake_server import Canned

    waits = []
    replies = {"once": [Canned(raw_body=b'{"choices": [{"mess'), VALID],
               "always": Canned(raw_body=b'{"object": "chat.completion"}')}
    with FakeOpenAIServer(replies=replies) as server:
        backend = recording_backend(server, waits, llm_max_retries=1, llm_concurrency=1)
        once, always = backend.complete([chat_request("once"), chat_request("always")])
    assert once == Reply(text=VALID)
    assert always == Reply(error="bad_response_body")
    assert server.requests == 4 and waits == [0.5, 0.5]


def test_a_missing_key_sends_no_authorization_header(server, monkeypatch):
    monkeypatch.delenv("MMLE_LLM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert recording_backend(server, []).complete([chat_request()])[0].ok
    assert server.authorizations == [None]


def test_the_wire_body_is_the_chat_payload(server):
    """The client sends exactly the payload the other HTTP paths (Ray's) send: no field renamed
    or dropped, the JSON schema included."""
    from mmlongembed.llm.backends import ChatRequest, chat_payload

    schema = load_prompt("query_audit").json_schema
    request = ChatRequest([{"role": "user", "content": [{"type": "text", "text": "hi"}, {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}], schema, "query_audit",
        {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8})
    recording_backend(server, []).complete([request])
    assert server.bodies == [chat_payload(LLMConfig().llm_model, request)]


def test_exhausted_retries_reject_the_record_and_a_rerun_asks_again(server, tmp_path):
    cfg = config(server, tmp_path, llm_max_retries=1, llm_concurrency=1)
    server.fail_next(2, status=502)  # both tries of the first record
    report = BuildReport()
    outcome = audit_queries(items(2), cfg, report)
    assert outcome.kept == {"q1"}
    assert report.llm_steps[0]["rejected"] == {"request_failed:http_502": 1}
    assert report.skipped["query_audit:request_failed:http_502"] == 1
    # the failure is recorded for replay, which fails the record the same way without a server
    replayed = BuildReport()
    assert audit_queries(items(2), config(server, tmp_path, llm="replay"), replayed).kept == {"q1"}
    assert replayed.skipped["query_audit:request_failed:http_502"] == 1 and server.requests == 3
    again = audit_queries(items(2), cfg, BuildReport())  # a live rerun asks the failed request again
    assert again.kept == {"q0", "q1"} and server.requests == 4
    # ... and its answer replaces the recorded failure
    assert audit_queries(items(2), config(server, tmp_path, llm="replay"), BuildReport()).kept == {"q0", "q1"}


def test_client_errors_are_not_retried(server, tmp_path):
    server.fail_next(1, status=400)
    report = BuildReport()
    audit_queries(items(2), config(server, tmp_path, llm_concurrency=1), report)
    assert report.llm_steps[0]["rejected"] == {"request_failed:http_400": 1}
    assert server.requests == 2


def test_a_stalled_request_times_out(tmp_path):
    """The server holds the first record's request until the client has given up on it: a
    client that waited for the reply would never return (the hold's own limit fails the test).
    The timeout is long enough that the other record's immediate answer beats it on a loaded machine."""
    released, held_until_released = threading.Event(), []

    def responder(body):
        if "number 0 " in first_user_message(body):
            held_until_released.append(released.wait(timeout=60))
        return VALID

    with FakeOpenAIServer(responder=responder) as server:
        report = BuildReport()
        outcome = audit_queries(items(2), config(server, tmp_path, llm_timeout=2.0, llm_max_retries=0), report)
        released.set()
        replay = config(server, tmp_path, llm="replay")
    assert outcome.kept == {"q1"}
    assert report.llm_steps[0]["rejected"] == {"request_failed:timeout": 1}
    assert held_until_released in ([], [True])  # the client returned while the reply was still held
    replayed = BuildReport()  # the timeout is recorded: replay, without a server, fails the record the same way
    assert audit_queries(items(2), replay, replayed).kept == {"q1"}
    assert replayed.skipped == report.skipped


def test_an_unreachable_server_is_one_line_error(tmp_path):
    with FakeOpenAIServer() as server:
        url = server.url
    cfg = LLMConfig(llm="openai", llm_base_url=url, llm_cache=str(tmp_path), llm_max_retries=1, llm_backoff=0.01)
    with pytest.raises(UserError, match="every request to the LLM failed") as error:
        audit_queries(items(2), cfg, BuildReport())
    assert "\n" not in str(error.value)


def test_cache_hits_skip_the_server_and_give_identical_answers(tmp_path):
    with FakeOpenAIServer(responder=audit_responder()) as server:
        cfg = config(server, tmp_path)
        first = audit_queries(items(6) + [AuditItem("short", "Who won?", "x", ("x",))], cfg, BuildReport())
        calls = server.requests
        report = BuildReport()
        second = audit_queries(items(6) + [AuditItem("short", "Who won?", "x", ("x",))], cfg, report)
    assert calls == 7 and server.requests == 7
    assert report.llm_steps[0]["cache_hits"] == 7 and report.llm_steps[0]["calls"] == 0
    assert first.verdicts == second.verdicts and "short" not in second.kept


def test_a_rerun_is_current_only_while_the_cache_holds_exactly_the_answers_a_step_used(server, tmp_path):
    """What makes a build an LLM answered up to date: a rerun asks the cache first, so it calls no
    model and writes the same data while every answer the step used is cached as it was."""
    from mmlongembed.llm import rerun_problem

    cfg = config(server, tmp_path)
    report = BuildReport()
    audit_queries(items(3), cfg, report)
    steps = report.llm_steps
    assert steps[0]["calls"] == 3 and len(steps[0]["answer_keys"]) == 3
    assert rerun_problem(steps, cfg.llm_cache) is None
    assert "not in the cache" in rerun_problem(steps, str(tmp_path / "elsewhere"))
    assert not (tmp_path / "elsewhere").exists()  # asking creates no cache
    cache = LLMCache(cfg.llm_cache)
    key = steps[0]["answer_keys"][0]
    cache._db.execute("UPDATE answers SET reply = ? WHERE key = ?", (INVALID, key))  # another answer now
    cache.close()
    assert "no longer those in the cache" in rerun_problem(steps, cfg.llm_cache)
    failed = [{**steps[0], "rejected": {"request_failed:http_500": 1}}]
    assert "a rerun would ask again" in rerun_problem(failed, cfg.llm_cache)
    assert rerun_problem([{"step": "query_audit", "calls": 0, "cache_hits": 3}], None) is None


def test_the_cache_key_covers_model_revision_and_prompt(server, tmp_path):
    audit_queries(items(2), config(server, tmp_path), BuildReport())
    audit_queries(items(2), config(server, tmp_path, llm_model_revision="abc123"), BuildReport())
    audit_queries(items(2), config(server, tmp_path, llm_max_output_len=64), BuildReport())
    assert server.requests == 6


def test_an_interrupted_run_resumes_without_repeating_calls(tmp_path, monkeypatch):
    """Three replies are stored, then Ctrl-C arrives while the fourth is stored. With one slot,
    the next request waits until the reply before it is stored, whatever the timing: so exactly
    four requests were asked, and the rerun asks exactly the five whose answers were not stored."""
    original_put = LLMCache.put
    stored = []

    def put_then_interrupt(self, *args, **kwargs):
        if len(stored) == 3:
            raise KeyboardInterrupt
        stored.append(args[0])
        return original_put(self, *args, **kwargs)

    with FakeOpenAIServer(responder=lambda body: VALID) as server:
        cfg = config(server, tmp_path, llm_concurrency=1)
        monkeypatch.setattr(LLMCache, "put", put_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            audit_queries(items(8), cfg, BuildReport())
        monkeypatch.setattr(LLMCache, "put", original_put)
        asked_before = server.requests
        assert asked_before == 4  # four answered (three stored); the four queued were never sent
        report = BuildReport()
        outcome = audit_queries(items(8), cfg, report)
    assert outcome.kept == {f"q{i}" for i in range(8)}
    assert report.llm_steps[0]["cache_hits"] == 3
    assert server.requests - asked_before == 5


def test_malformed_replies_are_repaired_then_rejected_with_a_counted_reason(tmp_path):
    replies = {
        "number 0 ": ['{"is_valid": tru', VALID],  # repaired on the second ask
        "number 1 ": "not json at all",  # never repaired
        "number 2 ": '{"reason": "no verdict"}',
        "number 3 ": INVALID,
    }
    with FakeOpenAIServer(replies=replies, responder=lambda body: VALID) as server:
        report = BuildReport()
        outcome = audit_queries(items(5), config(server, tmp_path, llm_output_retries=2), report)
        repair_body = next(b for b in server.bodies if len(b["messages"]) == 4 and "number 0 " in b["messages"][1]["content"])
    assert outcome.kept == {"q0", "q4"}
    step = report.llm_steps[0]
    assert step["rejected"] == {"invalid_output:invalid_json": 1, "invalid_output:missing_key": 1}
    assert step["marked_invalid"] == 1 and step["kept"] == 2
    assert server.requests == 5 + 1 + 2 + 2  # first asks, one repair for q0, two repairs each for q1 and q2
    assert repair_body["messages"][2] == {"role": "assistant", "content": '{"is_valid": tru'}
    assert "not valid JSON" in repair_body["messages"][3]["content"]
    assert report.skipped["query_audit:invalid_output:invalid_json"] == 1


def test_replay_answers_from_the_cache_only_and_names_a_missing_entry(tmp_path):
    replies = {"number 1 ": ['{"is_valid": tru', INVALID], "number 2 ": "garbage"}
    with FakeOpenAIServer(replies=replies, responder=lambda body: VALID) as server:
        cfg = config(server, tmp_path, llm_output_retries=1)
        live_report = BuildReport()
        live = audit_queries(items(4), cfg, live_report)
    replay_cfg = LLMConfig(llm="replay", llm_model="fake-model", llm_cache=cfg.llm_cache, llm_output_retries=1)
    replay_report = BuildReport()
    replayed = audit_queries(items(4), replay_cfg, replay_report)  # the server is gone: cache only
    assert replayed.verdicts == live.verdicts and replayed.kept == live.kept == {"q0", "q3"}
    assert replay_report.skipped == live_report.skipped
    step = replay_report.llm_steps[0]
    assert step["backend"] == "replay" and step["replayed_from"] == ["openai"] and step["calls"] == 0
    with pytest.raises(UserError, match=r"no cached answer for step query_audit, record x "):
        audit_queries(items(1, prefix="new") + [AuditItem("x", "Question number 77 about Rome?", "R", ("R",))],
                      replay_cfg, BuildReport())


def test_replay_with_another_model_finds_nothing(server, tmp_path):
    cfg = config(server, tmp_path)
    audit_queries(items(1), cfg, BuildReport())
    with pytest.raises(UserError, match="no cached answer"):
        audit_queries(items(1), LLMConfig(llm="replay", llm_model="other-model", llm_cache=cfg.llm_cache), BuildReport())


def test_api_key_is_sent_but_never_recorded(server, tmp_path, monkeypatch, capsys):
    secret = "sk-test-0123456789-secret"
    monkeypatch.setenv("MMLE_LLM_API_KEY", secret)
    cfg = config(server, tmp_path)
    report = BuildReport()
    translate([("t1", "你好")], cfg, report)
    assert server.authorizations[-1] == f"Bearer {secret}"
    server.fail_next(1, status=401)  # a refused key: the failure is counted by status, never with the client's text
    translate([("t1", "你好"), ("t2", "早上好")], config(server, tmp_path, llm_concurrency=1), report)
    assert report.skipped["translation:request_failed:http_401"] == 1
    backend = OpenAIBackend(cfg)
    recorded = json.dumps(report.as_dict()) + repr(backend) + str(vars(backend)) + "".join(capsys.readouterr())
    cache_bytes = (tmp_path / "cache" / "llm-cache.sqlite3").read_bytes()
    assert secret not in recorded and secret.encode() not in cache_bytes


def test_translation_rejects_replies_that_keep_chinese(tmp_path):
    with FakeOpenAIServer(replies={"你好": "Hello 你好"}, responder=lambda body: "Good morning.") as server:
        report = BuildReport()
        out = translate([("a", "你好"), ("b", "早上好")], config(server, tmp_path, llm_output_retries=1), report)
        assert "response_format" not in server.bodies[0]  # plain-text prompt: no schema
    assert out == {"b": "Good morning."}
    assert report.llm_steps[0]["rejected"] == {"invalid_output:rule:chinese_characters": 1}


def test_the_paper_audit_reads_the_query_alone_and_v1_stays_selectable(tmp_path):
    v1_valid = '{"valid": true, "reason": "anchored"}'
    with FakeOpenAIServer(responder=lambda body: VALID if "QUERY:" in body["messages"][1]["content"] else v1_valid) \
            as server:
        paper_report, v1_report = BuildReport(), BuildReport()
        paper = audit_queries(items(2), config(server, tmp_path), paper_report)
        v1 = audit_queries(items(2), config(server, tmp_path, llm_prompt_version="v1"), v1_report)
        paper_body, v1_body = server.bodies[0], server.bodies[-1]
    assert paper.kept == v1.kept == {"q0", "q1"}
    assert paper_body["messages"][1]["content"] in {f"QUERY: Question number {i} about Paris?" for i in (0, 1)}
    assert "Reference answer: Paris" in v1_body["messages"][1]["content"]
    assert set(paper_body["response_format"]["json_schema"]["schema"]["required"]) == {
        "is_valid", "strong_linked_anchor", "anchor_type", "potential_ambiguity", "reason"}
    assert paper.details["q0"]["anchor_type"] == "entity"
    steps = paper_report.llm_steps[0], v1_report.llm_steps[0]
    assert [s["prompt_version_name"] for s in steps] == ["paper", "v1"]
    assert steps[0]["prompt_hash"] != steps[1]["prompt_hash"]
    assert steps[0]["kept_by_anchor_type"] == {"entity": 2}


def test_the_paper_rewrite_reads_the_original_caption_concatenated(tmp_path):
    from mmlongembed.llm import rewrite_captions

    with FakeOpenAIServer(responder=lambda body: "First, a man walks in. Then, he sits down.") as server:
        out = rewrite_captions([("v1", ["A man walks in.", " He sits down. "])], config(server, tmp_path),
                               BuildReport())
        assert server.bodies[0]["messages"][1]["content"] == "Original caption: A man walks in. He sits down."
        assert "transition words only" in server.bodies[0]["messages"][0]["content"]
    assert out == {"v1": "First, a man walks in. Then, he sits down."}
