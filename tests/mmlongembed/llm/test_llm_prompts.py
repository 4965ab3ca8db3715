"""Prompt files, output contracts, and the deterministic fallbacks of --llm none."""

from __future__ import annotations

import json

import pytest

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.llm import LLMConfig, audit_queries, load_prompt, rewrite_captions, translate
from mmlongembed.llm.fallbacks import audit_anchors, audit_heuristic, audit_rules, rewrite_template
from mmlongembed.llm.prompts import PROMPT_VERSIONS, PROMPTS_DIR
from mmlongembed.llm.steps import AuditItem

PROMPT_NAMES = ("query_audit", "caption_rewrite", "translation")


@pytest.mark.parametrize("version", PROMPT_VERSIONS)
@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_every_prompt_file_loads_and_renders_its_fields(name, version):
    prompt = load_prompt(name, version=version)
    assert prompt.version >= 1 and len(prompt.hash) == 16 and prompt.variant == version
    messages = prompt.render({f: f"<{f}>" for f in prompt.fields})
    assert messages[0]["role"] == "system" and messages[0]["content"] == prompt.system
    assert all(f"<{f}>" in messages[1]["content"] for f in prompt.fields)
    with pytest.raises(ValueError, match="missing fields"):
        prompt.render({})


def test_prompt_hash_changes_with_what_the_model_sees_only(tmp_path):
    original = (PROMPTS_DIR / "translation.yaml").read_text(encoding="utf-8")
    (tmp_path / "translation.yaml").write_text(original.replace("Strict fidelity", "Fidelity", 1), encoding="utf-8")
    assert load_prompt("translation", str(tmp_path)).hash != load_prompt("translation").hash
    # the description is documentation: it does not change a reply, so not the hash either
    (tmp_path / "translation.yaml").write_text(original.replace("into English literally", "into English"),
                                               encoding="utf-8")
    load_prompt.cache_clear()
    assert load_prompt("translation", str(tmp_path)).hash == load_prompt("translation").hash


def test_the_default_prompts_are_the_papers_and_v1_is_selectable():
    """Tables 8-10: the audit reads the query alone and answers the paper's five fields; the
    rewrite takes the original caption concatenated; the translation asks for a literal one."""
    audit = load_prompt("query_audit")
    assert audit.fields == ("query",) and audit.variant == "paper"
    schema = audit.json_schema
    assert set(schema["required"]) == set(schema["properties"]) == {
        "is_valid", "strong_linked_anchor", "anchor_type", "potential_ambiguity", "reason"}
    assert schema["properties"]["anchor_type"]["enum"] == ["entity", "event", "data", "combination"]
    assert schema["properties"]["potential_ambiguity"]["enum"] == ["High", "Low"]
    assert "10 million" in audit.system and "95%" in audit.system
    rewrite, translation = load_prompt("caption_rewrite"), load_prompt("translation")
    assert rewrite.fields == ("original_caption",) and "Original caption: {original_caption}" in rewrite.user
    assert "transition words only" in rewrite.system and "No additions" in translation.system
    assert "No paraphrasing" in translation.system and "No omissions" in translation.system
    assert "fluent" not in translation.system
    v1 = load_prompt("query_audit", version="v1")
    assert v1.fields == ("query", "answer", "evidence") and v1.hash != audit.hash
    with pytest.raises(UserError, match="unknown prompt version"):
        load_prompt("query_audit", version="v9")


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
def test_audit_contract_v1(reply, reason):
    value, problem = load_prompt("query_audit", version="v1").parse(reply)
    if reason is None:
        assert problem is None and isinstance(value["valid"], bool)
    else:
        assert value is None and problem.reason == reason


PAPER_VERDICT = {"is_valid": True, "strong_linked_anchor": "Ed Wood", "anchor_type": "entity",
                 "potential_ambiguity": "Low", "reason": "names one filmmaker"}


@pytest.mark.parametrize("change, reason", [
    ({}, None),
    ({"anchor_type": "person"}, "not_allowed_value"),
    ({"potential_ambiguity": "medium"}, "not_allowed_value"),
    ({"valid": True}, "unexpected_key"),
    ({"is_valid": "true"}, "wrong_type"),
])
def test_audit_contract_paper(change, reason):
    verdict = {**PAPER_VERDICT, **change}
    value, problem = load_prompt("query_audit").parse(json.dumps(verdict))
    assert (problem is None and value == verdict) if reason is None else problem.reason == reason
    missing = {k: v for k, v in PAPER_VERDICT.items() if k != "potential_ambiguity"}
    assert load_prompt("query_audit").parse(json.dumps(missing))[1].reason == "missing_key"


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
def test_caption_rewrite_contract_v1(reply, reason):
    _, problem = load_prompt("caption_rewrite", version="v1").parse(reply)
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
def test_audit_heuristic_v1(query, valid, anchor):
    verdict, reason = audit_heuristic(query)
    assert verdict is valid, reason
    if anchor:
        assert anchor in audit_anchors(query)


@pytest.mark.parametrize("query, valid, rule", [
    ("Were Scott Derrickson and Ed Wood of the same nationality?", True, "specific_entity"),
    ('Which magazine was started first, "Arthur\'s Magazine" or "First for Women"?', True, "specific_entity"),
    ("In which year was the F-16 first flown?", True, "specific_entity"),
    ("Which American city had 3 million people in 1990?", True, "rare_combination"),
    ("What is it?", False, "too_short"),
    ("What does the passage say about the war in France?", False, "refers_to_a_document"),
    ("What American singer released an album in 1994?", False, "only_broad_signals"),
    ("How many seats does the arena have, counting 3 tiers?", False, "only_broad_signals"),
    ("Which volcanic archipelago experienced simultaneous eruptions?", False, "no_specific_candidate"),
])
def test_audit_rules_follow_the_papers_steps(query, valid, rule):
    """Specific entities pass; broad signals alone (a nationality, a year, a small number) and
    generic words do not; a verdict has the paper's fields, so it meets the LLM contract."""
    verdict, decided_by = audit_rules(query)
    assert (verdict["is_valid"], decided_by) == (valid, rule), verdict
    assert load_prompt("query_audit").parse(json.dumps(verdict))[1] is None
    if verdict["strong_linked_anchor"] and rule != "rare_combination":
        assert verdict["strong_linked_anchor"] in query  # the exact phrase


def test_audit_with_llm_none_filters_by_the_rules_and_records_what_it_kept_and_dropped():
    report = BuildReport()
    items = [AuditItem("a", "Were Scott Derrickson and Ed Wood of the same nationality?", "yes", ("x", "y")),
             AuditItem("b", "What is it?", "it", ("x",)),
             AuditItem("c", "What American singer released an album in 1994?", "x", ("x",))]
    outcome = audit_queries(items, LLMConfig(llm="none"), report)
    assert outcome.kept == {"a"}
    assert report.skipped["query_audit:marked_invalid"] == 2
    step = report.llm_steps[0]
    assert (step["step"], step["backend"], step["kept"], step["marked_invalid"]) == ("query_audit", "none", 1, 2)
    assert "rules" in step["model"] and step["prompt_version_name"] == "paper"
    assert step["kept_by_anchor_type"] == {"entity": 1}
    assert step["dropped_by"] == {"only_broad_signals": 1, "too_short": 1}
    assert step["dropped_examples"]["too_short"] == ["What is it?"]
    json.dumps(report.as_dict())  # the manifest must be able to hold it
    v1_report = BuildReport()
    v1 = audit_queries(items, LLMConfig(llm="none", llm_prompt_version="v1"), v1_report)
    assert v1.kept == {"a", "c"} and "heuristic" in v1_report.llm_steps[0]["model"]


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
