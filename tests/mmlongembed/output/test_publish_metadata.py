"""What a build publishes about itself: croissant.json (checked by mlcroissant, read back as
load_dataset reads the build), the card's Hub YAML (checked through huggingface_hub), the
per-source licences, known overlaps and datasheet answers, all rendered from the manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder, registered
from mmlongembed.output.disclosure import DATASHEET_MARKER, OVERLAPS_FILE, LICENCES_FILE, hub_metadata
from mmlongembed.output.layout import split_card
from mmlongembed.build.validate import validate_build
from tests.support.croissant import assert_croissant_matches, check_card_with_huggingface_hub

DATASHEET_QUESTIONS = ("**Motivation.**", "**Composition.**", "**Collection.**", "**Preprocessing.**", "**Uses.**",
                       "**Uses to avoid:**", "**Distribution.**", "**Maintenance.**")


@pytest.fixture(scope="module")
def govreport_build(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("govreport")
    builder = get_builder("govreport")
    return run_build(builder, builder.example_config(root / "sources"), root / "out", progress=False, quiet=True)


def test_croissant_validates_and_its_records_are_load_datasets_rows(govreport_build):
    assert_croissant_matches(govreport_build)


def test_croissant_lists_every_data_file_with_its_sha256_and_the_responsible_ai_fields(govreport_build):
    manifest = json.loads((govreport_build / "manifest.json").read_text())
    croissant = json.loads((govreport_build / "croissant.json").read_text())
    assert {d["contentUrl"]: d["sha256"] for d in croissant["distribution"]} == \
        {path: facts["sha256"] for path, facts in manifest["files"].items()}
    assert "croissant.json" not in manifest["files"] and "README.md" not in manifest["files"]
    assert len(croissant["recordSet"]) == len(manifest["files"])
    corpus = next(r for r in croissant["recordSet"] if "/corpus/" in r["@id"])
    assert {f["name"]: f["dataType"] for f in corpus["field"]}["n_tokens"] == "sc:Integer"
    assert next(f for f in corpus["field"] if f["name"] == "images")["dataType"] == "sc:ImageObject"
    assert "https://spdx.org/licenses/CC-BY-4.0.html" in croissant["license"]
    assert croissant["rai:hasSyntheticData"] is True  # the example's sources are generated
    assert "SYNTHETIC" in croissant["rai:dataCollection"]
    assert any("hard negatives have 25%/50% of the report replaced" in step
               for step in croissant["rai:dataPreprocessingProtocol"])
    for key in ("rai:dataLimitations", "rai:dataBiases", "rai:personalSensitiveInformation", "rai:dataUseCases"):
        assert croissant[key], key
    assert any("SCROLLS" in line for line in croissant["rai:dataLimitations"])  # the known overlaps
    assert croissant["citeAs"].startswith("@misc{mmlongembed")


def test_validate_names_a_croissant_that_describes_other_files(govreport_build, tmp_path):
    copy = shutil.copytree(govreport_build, tmp_path / "copy")
    croissant = json.loads((copy / "croissant.json").read_text())
    croissant["distribution"][0]["sha256"] = "0" * 64
    (copy / "croissant.json").write_text(json.dumps(croissant))

    problems = validate_build(copy).problems

    assert [p.check for p in problems] == ["croissant"]
    assert croissant["distribution"][0]["contentUrl"] in problems[0].detail


def test_card_yaml_passes_huggingface_hub_and_answers_the_datasheet(govreport_build):
    header = check_card_with_huggingface_hub(govreport_build / "README.md")
    assert header["license"] == "cc-by-4.0"  # GovReport's one licence
    assert header["source_datasets"] == ["extended|ccdv/govreport-summarization"]
    assert header["annotations_creators"] == ["machine-generated"]
    _, body = split_card((govreport_build / "README.md").read_text(), "card")
    assert body.count(DATASHEET_MARKER) == 1
    for question in DATASHEET_QUESTIONS:
        assert question in body, question
    assert "do not train or tune on the test pools" in body
    assert "| `govreport` | GovReport (Huang et al., NAACL 2021) | CC BY 4.0" in body
    assert "SCROLLS, ZeroSCROLLS, LongBench and L-Eval" in body


def test_licence_is_other_where_sources_differ_and_llm_written_text_is_machine_generated():
    release = {"builder": {"name": "mmlongembed"}, "components": [{"name": "hotpotqa"}, {"name": "govreport"}],
               "llm_steps": [{"step": "query_audit", "backend": "openai", "model": "m"}]}
    facts = hub_metadata(release, ["en"], "cc-by-4.0")
    assert facts["license"] == "other"
    assert "extended|hotpotqa/hotpot_qa" in facts["source_datasets"]
    assert "machine-generated" in facts["language_creators"]
    rules_only = {"builder": {"name": "govreport"}, "llm_steps": [{"step": "s", "backend": "none"}]}
    assert hub_metadata(rules_only, ["en"], "other")["language_creators"] == ["found"]
    assert hub_metadata(rules_only, ["en"], "other")["license"] == "cc-by-4.0"
    # the parts a source is made of depend on how it was read: OBELICS only without local files
    local_needle = {"builder": {"name": "needle"}, "sources": {"kind": "local", "files": []}}
    hub_needle = {"builder": {"name": "needle"}, "sources": {"kind": "hub"}}
    assert "extended|HuggingFaceM4/OBELICS" not in hub_metadata(local_needle, ["en"], "other")["source_datasets"]
    assert "extended|HuggingFaceM4/OBELICS" in hub_metadata(hub_needle, ["en"], "other")["source_datasets"]


def test_licences_and_overlaps_are_keyed_by_source_name_and_say_where_they_are_stated():
    builders = set(registered())
    licences = {k: v for k, v in json.loads(LICENCES_FILE.read_text()).items() if not k.startswith("_")}
    overlaps = {k: v for k, v in json.loads(OVERLAPS_FILE.read_text()).items() if not k.startswith("_")}
    assert set(licences) <= builders and set(overlaps) <= builders
    assert {"hotpotqa", "govreport", "mmlongbench", "evialign-evidence"} <= {k for k, v in overlaps.items() if v}
    for entries in overlaps.values():
        for entry in entries:
            assert entry["kind"] in ("training", "benchmark") and entry["appears_in"] and entry["stated_in"]
    for parts in licences.values():
        assert all(part["licence"] and part["url"] for part in parts)
