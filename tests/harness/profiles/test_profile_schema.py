"""The profiles' schema (harness/profiles/schema.py) and the checks the catalogue runs when it loads: an unknown
field, a missing required field or a positional argument is refused when an entry is built; a profile without
a source for a fact group it states, or two profiles of one name, are refused when the catalogue loads."""

from __future__ import annotations

import dataclasses
import importlib
import re

import pytest

from harness.profiles import catalogue, doubao, embed_rl, gme
from harness.profiles.catalogue import checked_catalogue, get_profile
from harness.profiles.schema import (ImageLimits, ModelProfile, ProfileError, SideForm, Source, TrainingData,
                                     Verification, VideoInput)

# the fields an entry must name, per schema class; any other field has a default
REQUIRED = {
    ModelProfile: {"name", "paper_name", "repo", "revision", "family", "window", "dim", "dtype", "size", "query",
                   "document", "images", "frames", "positions", "sources"},
    Source: {"repo", "path", "commit"},
    SideForm: {"template", "instruction_place"},
    ImageLimits: {"patch_size", "merge_size", "min_pixels", "max_pixels"},
    VideoInput: {"max_frames", "total_pixels", "timestamp_fps"},
    TrainingData: {"dataset", "stated_in"},
    Verification: {"reference", "max_abs_diff"},
}


def _entry(instance) -> dict:
    """An existing entry's fields, by name, as an entry writes them."""
    return {field.name: getattr(instance, field.name) for field in dataclasses.fields(instance)}


def _examples():
    profile = get_profile("embed-rl-2b")  # sets every kind of schema class
    return {ModelProfile: profile, Source: profile.sources["prompt"], SideForm: profile.query,
            ImageLimits: profile.images, VideoInput: profile.video, TrainingData: profile.training_data[0],
            Verification: profile.verified}


@pytest.mark.parametrize("schema_class", list(REQUIRED), ids=lambda c: c.__name__)
def test_an_unknown_field_is_refused(schema_class):
    fields = _entry(_examples()[schema_class])
    assert schema_class(**fields) == _examples()[schema_class]
    with pytest.raises(TypeError, match="unexpected keyword argument 'windw'"):
        schema_class(**fields, windw=32768)


@pytest.mark.parametrize("schema_class", list(REQUIRED), ids=lambda c: c.__name__)
def test_a_missing_required_field_is_refused(schema_class):
    fields = _entry(_examples()[schema_class])
    for name in sorted(REQUIRED[schema_class]):
        with pytest.raises(TypeError, match=f"missing 1 required keyword-only argument: '{name}'"):
            schema_class(**{k: v for k, v in fields.items() if k != name})


@pytest.mark.parametrize("schema_class", list(REQUIRED), ids=lambda c: c.__name__)
def test_fields_are_named_not_counted(schema_class):
    """Keyword-only: an entry cannot give its fields by position, where a reader would count commas."""
    values = list(_entry(_examples()[schema_class]).values())
    with pytest.raises(TypeError, match="positional argument"):
        schema_class(*values)


def _without_sources(profile: ModelProfile, *keys: str) -> ModelProfile:
    return dataclasses.replace(profile, sources={k: v for k, v in profile.sources.items() if k not in keys})


@pytest.mark.parametrize("name, dropped, group", [
    ("gme-qwen2-vl-2b", ("pooling",), "pooling"),
    ("gme-qwen2-vl-2b", ("paper_name",), "paper_name"),
    ("gme-qwen2-vl-2b", ("revision",), "revision"),
    ("gme-qwen2-vl-2b", ("card",), "architecture"),
    ("embed-rl-4b", ("images",), "images"),
    ("embed-rl-4b", ("dim_window_dtype",), "dim_window_dtype"),
    ("colqwen2.5", ("frames",), "frames"),
    ("doubao-seed-1.6", ("api",), "prompt"),  # an API's wrapper is the source of how it is called
])
def test_a_missing_source_is_refused(name, dropped, group):
    profile = get_profile(name)
    assert checked_catalogue([profile]) == {name: profile}
    with pytest.raises(ProfileError, match=f"model profile '{name}': .*no source for its {group} facts"):
        checked_catalogue([_without_sources(profile, *dropped)])


def test_a_fact_the_profile_does_not_state_needs_no_source():
    """No paper name, no image limits, an unpinned revision: nothing stated, nothing to source."""
    assert embed_rl.MODELS[0].revision == "unpinned" and "revision" not in embed_rl.MODELS[0].sources
    assert doubao.MODELS[0].images is None and "images" not in doubao.MODELS[0].sources
    unnamed = dataclasses.replace(_without_sources(get_profile("gme-qwen2-vl-7b"), "paper_name"), paper_name="")
    assert list(checked_catalogue([unnamed])) == ["gme-qwen2-vl-7b"]


def test_a_model_card_at_another_revision_is_refused():
    profile = get_profile("ops-mm-v1-7b")
    other = dataclasses.replace(profile, revision="0" * 40)
    with pytest.raises(ProfileError, match="model card source .* is not its repo at its revision"):
        checked_catalogue([other])


@pytest.mark.parametrize("changes, fault", [
    ({"frames": "hologram"}, "frames 'hologram' is not one of images, video"),
    ({"positions": "nowhere"}, "positions 'nowhere' is not one of mrope, sequential, api"),
    ({"frames": "video", "video": None}, "frames 'video' needs `video`"),
    ({"dim": -5}, "window and dimension are positive"),
])
def test_a_value_the_runner_does_not_know_is_refused(changes, fault):
    with pytest.raises(ProfileError, match=re.escape(fault)):
        checked_catalogue([dataclasses.replace(get_profile("qwen3-vl-2b"), **changes)])


def test_an_api_source_stands_only_for_an_apis_facts():
    profile = get_profile("gme-qwen2-vl-2b")
    api_only = dataclasses.replace(profile, sources={"api": profile.sources["prompt"],
                                                     "paper_name": profile.sources["paper_name"]})
    with pytest.raises(ProfileError, match="an `api` source stands for an API's facts"):
        checked_catalogue([api_only])
    assert checked_catalogue([get_profile("doubao-seed-1.6")])  # the API's own profile passes


def test_a_duplicate_name_is_refused():
    twin = dataclasses.replace(get_profile("qwen3-vl-8b"), name="qwen3-vl-2b")
    with pytest.raises(ProfileError, match="two model profiles are named 'qwen3-vl-2b'"):
        checked_catalogue([get_profile("qwen3-vl-2b"), twin])


def test_the_catalogue_refuses_a_bad_entry_when_it_loads(monkeypatch):
    """The checks run at import: a family module's entry without a source stops the catalogue loading."""
    broken = _without_sources(gme.MODELS[1], "prompt")
    monkeypatch.setattr(gme, "MODELS", (gme.MODELS[0], broken))
    try:
        with pytest.raises(ProfileError, match="'gme-qwen2-vl-7b': no source for its prompt facts"):
            importlib.reload(catalogue)
    finally:
        monkeypatch.undo()
        importlib.reload(catalogue)
    assert catalogue.PROFILES["gme-qwen2-vl-7b"] == gme.MODELS[1]
