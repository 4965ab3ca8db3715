"""The EviAlign target operations (mmlongembed.ops.evialign) and the LLM-layer pieces they rely on:
property tests over the target grammar, the Distributed insertion, the
readout locator; reasoning-block stripping; image-carrying requests and their cache keys."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlongembed.llm.cache import keyed_messages, request_keys
from mmlongembed.llm.prompts import strip_reasoning
from mmlongembed.ops.evialign import (
    UNIT_SETS, TargetFormatError, assemble, boundary_ids, distributed_positions, insert_distributed,
    locate_readout, parse_target, permute, remove_ids, repetition, unit_spans, units_for)
from mmlongembed.ops.permutations import non_identity_permutation
from mmlongembed.core.rng import derive_rng

TOKEN_IDS = [900, 901, 902, 903, 904, 905, 906]
content = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(
    lambda s: s.split() and all(t not in s for t in ("<", ">", "[", "]")))


@settings(max_examples=60, deadline=None)
@given(k=st.sampled_from(sorted(UNIT_SETS)), data=st.data())
def test_spans_assemble_and_parse_back(k, data):
    units = units_for(k)
    contents = {u.key: data.draw(content) for u in units}
    spans = unit_spans(units, contents)
    target = assemble(spans, [u.token for u in units])
    assert parse_target(target, units) == spans
    assert target.endswith(units[-1].token)
    for span, unit in zip(spans, units):
        assert span.startswith(f"[{unit.label}] ") and span == span.strip()
    # Mixed: the spans move with their labels, the tokens stay
    perm = non_identity_permutation(derive_rng(0, "t", target), k)
    mixed = assemble(permute(spans, perm), [u.token for u in units])
    assert parse_target(mixed, units, labels_in_order=False) == permute(spans, perm)
    assert sorted(parse_target(mixed, units, labels_in_order=False)) == sorted(spans)
    if k > 1:
        with pytest.raises(TargetFormatError, match="label_order"):
            parse_target(mixed, units)


@pytest.mark.parametrize("text, reason", [
    ("[Entity] a<ENT>[Attribute] b<ATT>[Relation] c<REL>[Detail] d<DET>[Summary] e<SUM> tail", "text_after_last_token"),
    ("[Entity] a<ENT>[Attribute] b<ATT>[Relation] c<REL>[Detail] d<DET>[Summary] e", "missing_token"),
    ("[Entity] a<ENT>[Attribute] b<REL>[Relation] c<ATT>[Detail] d<DET>[Summary] e<SUM>", "token_order"),
    ("[Entity] a<ENT>[Attribute] b<ATT>[Relation] c<REL>[Detail] d<DET><DET>[Summary] e<SUM>", "duplicate_token"),
    ("[Entity] a<ENT>[Attribute] b<ATT>[Relation] c<REL>[Detail] d<CTX>[Summary] e<SUM>", "foreign_token"),
    ("[Entity] a<ENT><ATT>[Relation] c<REL>[Detail] d<DET>[Summary] e<SUM>", "span_without_label"),
    ("[Entity] a<ENT>[Detail] b<ATT>[Relation] c<REL>[Attribute] d<DET>[Summary] e<SUM>", "label_order"),
])
def test_malformed_targets_are_named(text, reason):
    with pytest.raises(TargetFormatError) as error:
        parse_target(text, units_for(5))
    assert error.value.reason == reason


def test_units_are_cleaned_and_checked():
    units = units_for(5)
    good = {"entity": "  [Entity]: a red   car ", "attribute": "sunny\nstreet", "relation": "parked by a tree",
            "detail": "plate AB-123", "summary": "A red car parked on a sunny street."}
    spans = unit_spans(units, good)
    assert spans[0] == "[Entity] a red car" and spans[1] == "[Attribute] sunny street"
    for key, value, reason in (("detail", "   ", "empty_unit"), ("detail", "plate <SUM>", "boundary_token_in_unit"),
                               ("detail", "see [Summary] below", "role_label_in_unit"),
                               ("detail", "</think> plate", "markup_in_unit")):
        with pytest.raises(TargetFormatError) as error:
            unit_spans(units, {**good, key: value})
        assert error.value.reason == reason
    with pytest.raises(TargetFormatError, match="missing_unit"):
        unit_spans(units, {k: v for k, v in good.items() if k != "summary"})


@settings(max_examples=300, deadline=None)
@given(x=st.lists(st.integers(0, 500), min_size=0, max_size=60), k=st.sampled_from([1, 3, 5, 7]))
def test_distributed_insertion(x, k):
    tokens = TOKEN_IDS[:k]
    ids, positions = insert_distributed(x, tokens)
    t = len(x)
    assert remove_ids(ids, tokens) == x  # deleting the inserted ids gives X back exactly
    assert positions == distributed_positions(t, k) == [(j * t) // k + j - 1 for j in range(1, k + 1)]
    assert [ids[p] for p in positions] == tokens
    for j, p in enumerate(positions, 1):  # the j-th token follows exactly floor(jT/K) ids of X
        assert sum(1 for i in ids[:p] if i not in tokens) == math.floor(j * t / k)
    assert positions[-1] == len(ids) - 1


def test_distributed_insertion_by_hand():
    # T = 7, K = 5: after floor(7/5)=1, floor(14/5)=2, floor(21/5)=4, floor(28/5)=5, 7 ids of X
    ids, positions = insert_distributed([1, 2, 3, 4, 5, 6, 7], TOKEN_IDS[:5])
    assert ids == [1, 900, 2, 901, 3, 4, 902, 5, 903, 6, 7, 904]
    assert positions == [1, 3, 6, 8, 11]


def test_boundary_ids_put_each_token_after_its_span():
    ids, positions = boundary_ids([[1, 2], [3], [4, 5, 6]], [900, 901, 902])
    assert ids == [1, 2, 900, 3, 901, 4, 5, 6, 902] and positions == [2, 4, 8]


def test_repetition_rule():
    looping = [7, 8, 9, 10] * 4  # the 4-gram (7, 8, 9, 10) four times
    assert repetition(looping, ["a", "b"], 4, 3)["excessive"]
    assert not repetition(looping[:12] + [7, 8, 9], ["a", "b"], 4, 3)["excessive"]  # three times is allowed
    assert repetition([1, 2, 3], ["Same  thing", "same thing"], 4, 3)["duplicate_units"]


@settings(max_examples=200, deadline=None)
@given(generated=st.lists(st.sampled_from([1, 2, 3, 900, 901, 902, 0]), max_size=20))
def test_locate_readout_matches_a_plain_reading(generated):
    tokens, end = [900, 901, 902], [0]
    readout = locate_readout(generated, tokens, end)
    for t in tokens:
        assert readout.positions[t] == (generated.index(t) if t in generated else None)
        assert readout.duplicates.get(t, 0) == max(0, generated.count(t) - 1)
    order = [generated.index(t) for t in tokens if t in generated]
    expected = (all(generated.count(t) == 1 for t in tokens) and order == sorted(order)
                and all(g == 0 for g in generated[generated.index(902) + 1:]))
    assert readout.valid_format == expected
    assert readout.last == len(generated) - 1


def test_strip_reasoning():
    units = '{"summary": "a cat"}'
    assert strip_reasoning(f"<think>hmm {{\"x\": 1}}</think><answer>{units}</answer>") == (units, None)
    assert strip_reasoning(f"reasoning opened in the prompt</think>\n{units}") == (units, None)
    assert strip_reasoning(f"<think>a</think><answer><|begin_of_box|>{units}<|end_of_box|></answer>") == (units, None)
    assert strip_reasoning(units) == (units, None)
    text, problem = strip_reasoning("<think>still thinking when the tokens ran out")
    assert problem is not None and problem.reason == "unclosed_reasoning"


def test_images_travel_as_data_urls_and_are_keyed_by_digest():
    from mmlongembed.training.evialign import evidence_prompt

    prompt = evidence_prompt(5)
    png = b"\x89PNG\r\n\x1a\n" + b"x" * 50
    values = {"side": "query", "text": "<|image|>\nRepresent the given image.", "units": "- entity: e"}
    messages = prompt.render(values, [png])
    parts = messages[1]["content"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,") and parts[-1]["type"] == "text"
    keyed = keyed_messages(messages)
    assert keyed[1]["content"][0]["image_url"]["url"].startswith("sha256:") and "base64" not in json.dumps(keyed)
    assert keyed_messages(prompt.render(values)) == prompt.render(values)  # text-only requests keep their keys
    common = dict(backend="openai", model="m", model_revision="", prompt_hash=prompt.hash, decoding={})
    other = prompt.render(values, [png + b"y"])
    assert request_keys(messages=messages, **common) != request_keys(messages=other, **common)
    # the narrowed contract asks exactly for the K units
    assert evidence_prompt(1).json_schema["required"] == ["entity"]
    assert evidence_prompt(3).json_schema["required"] == ["entity", "attribute", "relation"]
    assert len({evidence_prompt(k).hash for k in UNIT_SETS}) == len(UNIT_SETS)
