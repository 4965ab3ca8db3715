"""Prompt files, output contracts, and the deterministic fallbacks of --llm none."""

from __future__ import annotations

import json

import pytest

from mmlongembed.builder import BuildReport
from mmlongembed.errors import UserError
from mmlongembed.llm import LLMConfig, audit_queries, load_prompt, rewrite_captions, translate
from mmlongembed.llm.fallbacks import audit_anchors, audit_heuristic, rewrite_template
from mmlongembed.llm.prompts import PROMPTS_DIR
from mmlongembed.llm.steps import AuditItem

PROMPT_NAMES = ("query_audit", "caption_rewrite", "translation")


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_every_prompt_file_loads_and_renders_its_fields(name):
    prompt = load_prompt(name)
    assert prompt.version >= 1 and len(prompt.hash) == 16
    messages = prompt.render({f: f"<{f}>" for f in prompt.fields})
    assert messages[0]["role"] == "system" and messages[0]["content"] == prompt.system
    assert all(f"<{f}>" in messages[1]["content"] for f in prompt.fields)
    with pytest.raises(ValueError, match="missing fields"):
        prompt.render({})


def test_prompt_hash_changes_with_what_the_model_sees_only(tmp_path):
    original = (PROMPTS_DIR / "translation.yaml").read_text(encoding="utf-8")
    (tmp_path / "translation.yaml").write_text(original.replace("natural, fluent", "plain", 1), encoding="utf-8")
    assert load_prompt("translation", str(tmp_path)).hash != load_prompt("translation").hash
    # the description is documentation: it does not change a reply, so not the hash either
    (tmp_path / "translation.yaml").write_text(original.replace("faithful, fluent English", "English"), encoding="utf-8")
    load_prompt.cache_clear()
    assert load_prompt("translation", str(tmp_path)).hash == load_prompt("translation").hash


def test_a_template_field_that_is_not_declared_is_refused(tmp_path):
    text = (PROMPTS_DIR / "translation.yaml").read_text(encoding="utf-8").replace("{text}", "{text} {extra}")
    (tmp_path / "translation.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="declares"):
        load_prompt("translation", str(tmp_path))


@pytest.mark.parametrize("reply, reason", [
    ('{"valid": true, "reason": "names a film"}', None),
    ('```json\n{"valid": false, "reason": "vague"}\n```', None),
    ("", "empty_output"),
    ('{"valid": true, "reason": "cut', "invalid_json"),
    ('{"reason": "no verdict"}', "missing_key"),
    ('{"valid": "yes", "reason": "x"}', "wrong_type"),
    ('{"valid": true, "reason": "  "}', "empty_value"),
    ('{"valid": true, "reason": "x", "score": 3}', "unexpected_key"),
    ('[true, "x"]', "wrong_type"),
])
def test_audit_contract(reply, reason):
    value, problem = load_prompt("query_audit").parse(reply)
    if reason is None:
        assert problem is None and isinstance(value["valid"], bool)
    else:
        assert value is None and problem.reason == reason


@pytest.mark.parametrize("reply, reason", [
    ("The board approved the plan in 2019.", None),
    ("Here is the translation: The board approved it.", "rule:preamble"),
    ("The board 批准 the plan.", "rule:chinese_characters"),
    ("   ", "empty_output"),
])
def test_translation_contract(reply, reason):
    value, problem = load_prompt("translation").parse(reply)
    assert (problem is None) if reason is None else (problem.reason == reason)


@pytest.mark.parametrize("reply, reason", [
    ("First, a man enters. Then, he sits down.", None),
    ("At 0:15 a man enters.", "rule:timestamp"),
    ("A man enters after 3.5 seconds.", "rule:timestamp"),
    ("A man enters.\nHe sits.", "rule:line_break"),
])
def test_caption_rewrite_contract(reply, reason):
    _, problem = load_prompt("caption_rewrite").parse(reply)
    assert (problem is None) if reason is None else (problem.reason == reason)


@pytest.mark.parametrize("query, valid, anchor", [
    ("Were Scott Derrickson and Ed Wood of the same nationality?", True, "proper_noun"),
    ("What year was the band formed that released it in 1994?", True, "date"),
    ("How many seats does the arena have, counting 3 tiers?", True, "number"),
    ("which volcanic archipelago experienced simultaneous eruptions?", True, "rare_word_combination"),
    ("What is it?", False, None),
    ("What does the passage say about the war in France?", False, None),
    ("what is the name of the thing that people like?", False, None),
])
def test_audit_heuristic(query, valid, anchor):
    verdict, reason = audit_heuristic(query)
    assert verdict is valid, reason
    if anchor:
        assert anchor in audit_anchors(query)


def test_audit_with_llm_none_uses_the_heuristic_and_records_the_step():
    report = BuildReport()
    items = [AuditItem("a", "Were Scott Derrickson and Ed Wood of the same nationality?", "yes", ("x", "y")),
             AuditItem("b", "What is it?", "it", ("x",))]
    outcome = audit_queries(items, LLMConfig(llm="none"), report)
    assert outcome.kept == {"a"}
    assert report.skipped["query_audit:marked_invalid"] == 1
    step = report.llm_steps[0]
    assert (step["step"], step["backend"], step["kept"], step["marked_invalid"]) == ("query_audit", "none", 1, 1)
    assert "heuristic" in step["model"]
    json.dumps(report.as_dict())  # the manifest must be able to hold it


def test_rewrite_fallback_joins_captions_with_transition_words():
    text = rewrite_template(["A man walks in.", "He sits down.", "The dog barks.", "Everyone leaves."])
    assert text == "First, a man walks in. Then, he sits down. After that, the dog barks. Finally, everyone leaves."
    report = BuildReport()
    out = rewrite_captions([("v1", ["A man walks in.", "He sits down."])], LLMConfig(), report)
    assert out["v1"] == "First, a man walks in. Finally, he sits down."
    assert load_prompt("caption_rewrite").parse(out["v1"])[1] is None  # the fallback meets the LLM contract
    assert report.llm_steps[0]["backend"] == "none"


def test_translation_without_llm_refuses_in_one_line():
    with pytest.raises(UserError, match="needs an LLM") as error:
        translate([("x", "你好")], LLMConfig(llm="none"), BuildReport())
    assert "\n" not in str(error.value)
