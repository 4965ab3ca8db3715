"""`mmle build mmlongembed`: one release of every task, assembled from component builds that are
built once; what is synthetic is recorded and `mmle push` refuses it unasked."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

import mmlongembed.build.run as build_module
import mmlongembed.release.composite as composite
import mmlongembed.build.pipeline as pipeline_module
from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder, registered
from mmlongembed.cli import main
from mmlongembed.release.composite import COMPONENTS_FOLDER, MMLongEmbedConfig, example_release_config
from mmlongembed.release.plan import COMPONENT_NAMES, parse_component_option
from mmlongembed.release.tables import table1_key
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import configs_from_card, pool_rows, read_built_pool
from mmlongembed.output.manifest import file_sha256, toolkit_identity
from mmlongembed.publish.push import publish
from mmlongembed.publish.reproduce import reproduce
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.publish_support import REPO, TOKEN
from tests.support.realdata import shared_data_dir
from tests.support.croissant import assert_croissant_matches, check_card_with_huggingface_hub


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The example release (every component but YoukuDC, from generated sources), built once."""
    root = tmp_path_factory.mktemp("release")
    builder = get_builder("mmlongembed")
    config = builder.example_config(root / "sources")
    out = run_build(builder, config, root / "out", progress=False)
    return out


def test_the_release_holds_every_component_and_validates_as_one_build(release):
    problems, checked = validate_dir(release)  # what `mmle validate` runs: the full recount
    assert not problems, format_report(problems, checked)
    rows = pool_rows(release)
    components = release.parent / COMPONENTS_FOLDER
    expected = []
    for name in ("needle", "mmdocrag", "hotpotqa", "govreport", "mmlongbench", "activitynet"):
        own = pool_rows(components / name)
        assert own and all(r["dataset"] == name for r in own)
        expected += own
    assert rows == expected  # the components' rows, the same columns, in the paper's order
    assert checked["pools"] == len(rows)
    specs = configs_from_card(release / "README.md")
    for name in {r["dataset"] for r in rows}:  # every pool reads back through the release's card
        pool = next(r["pool"] for r in rows if r["dataset"] == name)
        tables = read_built_pool(release, pool)
        assert len(tables.queries["_id"]) == next(r["n_queries"] for r in rows if r["pool"] == pool)
    # every data file is the component's own file, unchanged
    manifest = json.loads((release / "manifest.json").read_text())
    for path, facts in manifest["files"].items():
        if path.startswith("data/pools/"):
            continue
        owner = next(c["name"] for c in manifest["components"] if (components / c["name"] / path).is_file())
        assert file_sha256(release / path) == file_sha256(components / owner / path) == facts["sha256"]
    assert specs["pools"].path in manifest["files"]
    assert (release / "figures" / "figure1_candidate_lengths.png").stat().st_size > 1000


def test_the_manifest_records_every_component_and_what_is_absent(release):
    manifest = json.loads((release / "manifest.json").read_text())
    components = release.parent / COMPONENTS_FOLDER
    recorded = {c["name"]: c for c in manifest["components"]}
    assert list(recorded) == ["needle", "mmdocrag", "hotpotqa", "govreport", "mmlongbench", "activitynet"]
    for name, facts in recorded.items():
        own = json.loads((components / name / "manifest.json").read_text())
        assert facts["builder"] == own["builder"] and facts["builder"]["version"] == registered()[name].version
        assert facts["config"] == own["config"] and facts["seed"] == 0
        assert facts["sources"] == own["sources"] and facts["sources"]["files" if name != "activitynet"
                                                                        else "annotations"]
        assert facts["manifest_sha256"] == file_sha256(components / name / "manifest.json")
    assert recorded["needle"]["config"]["lengths"] == [256, 512]  # the example's --set
    assert "youkudc" in manifest["absent"] and "--exclude" in manifest["absent"]["youkudc"]
    card = (release / "README.md").read_text()
    assert "**Absent:** `youkudc`" in card


def test_table1_counts_what_a_query_ranks_beside_the_papers_figures(release):
    manifest = json.loads((release / "manifest.json").read_text())
    rows = pool_rows(release)
    table = {r["key"]: r for r in manifest["table1"]}
    assert set(table) == {"needle-text", "needle-image", "mmdocrag", "hotpotqa", "govreport", "mmlongbench",
                          "activitynet"}
    for key, entry in table.items():
        members = [r for r in rows if table1_key(r) == key]
        assert entry["queries"] == sum(r["n_queries"] for r in members)
        assert entry["corpus"] == sum(r["n_candidates"] for r in members)
    # a needle query ranks every document of its cell (4 in the example), not "1.0 per query"
    assert table["needle-text"]["candidates_ranked_per_query"] == 4.0
    govreport = [r for r in rows if r["dataset"] == "govreport"]
    assert table["govreport"]["candidates_ranked_per_query"] == pytest.approx(
        sum(r["n_queries"] * r["n_candidates"] for r in govreport) / sum(r["n_queries"] for r in govreport), abs=0.05)
    # the other figure has its own name: the candidates made for each query (positive and negatives)
    assert table["govreport"]["candidates_made_per_query"] == pytest.approx(
        sum(r["n_candidates"] for r in govreport) / sum(r["n_queries"] for r in govreport), abs=0.05)
    card = (release / "README.md").read_text()
    line = next(x for x in card.splitlines() if x.startswith("| GovReport | Logical Summarization"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[4:8] == [str(table["govreport"]["queries"]), str(table["govreport"]["corpus"]),
                          str(table["govreport"]["candidates_ranked_per_query"]),
                          str(table["govreport"]["candidates_made_per_query"])]
    assert cells[8:11] == ["720", "2880", "480"]  # the paper's, shipped as data
    assert "| candidates ranked per query | candidates made per query |" in card
    assert "candidates per query" not in card.lower().replace("made per query", "").replace("ranked per query", "")
    assert card.index("NOT FOR PUBLICATION") < card.index("## Table 1")  # what is synthetic comes first


def test_push_refuses_a_synthetic_release_unless_allowed(release, hub, tmp_path, capsys):
    manifest = json.loads((release / "manifest.json").read_text())
    assert any(s.startswith("activitynet: sources: SYNTHETIC") for s in manifest["synthetic"])
    assert any(s.startswith("mmlongbench: queries:") for s in manifest["synthetic"])
    with pytest.raises(UserError, match="--allow-synthetic"):
        publish(release, REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None)
    assert ("dataset", REPO) not in hub.repos  # refused before anything reached the Hub
    # one component alone, through the CLI: one line, exit 2, nothing published
    component = release.parent / COMPONENTS_FOLDER / "activitynet"
    code = main(["push", str(component), "--repo", REPO, "--version", "1.0.0", "--endpoint", hub.endpoint])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--allow-synthetic" in error and "SYNTHETIC" in error
    assert ("dataset", REPO) not in hub.repos
    result = publish(component, REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None,
                     wait_s=0.01, allow_synthetic=True)
    assert hub.repo(REPO).tags["v1.0.0"] == result.commit


def test_a_build_says_last_what_in_it_is_synthetic(tmp_path, capsys):
    builder = get_builder("govreport")
    config = builder.example_config(tmp_path / "sources")
    out = run_build(builder, config, tmp_path / "out", progress=False)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert lines[-1].startswith("SYNTHETIC: sources: SYNTHETIC sources written by mmlongembed.testing")
    assert json.loads((out / "manifest.json").read_text())["synthetic"] == [lines[-1].split("SYNTHETIC: ", 1)[1]
                                                                              .split(" (recorded in", 1)[0]]
    (tmp_path / "sources" / "SYNTHETIC").unlink()  # the same files, not marked: nothing is synthetic
    out = run_build(builder, config, tmp_path / "again", progress=False)
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("synthetic: nothing")
    assert json.loads((out / "manifest.json").read_text())["synthetic"] == []


def test_a_missing_source_stops_the_build_with_one_line_naming_it(tmp_path, capsys):
    sources = tmp_path / "sources"
    get_builder("govreport").example_config(sources / "govreport")
    code = main(["build", "mmlongembed", "--sources", str(sources), "--output", str(tmp_path / "out"),
                 "--exclude", "needle,hotpotqa,youkudc"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1, error
    assert "activitynet (put " in error and "--exclude activitynet" in error and "activitynet/" in error
    for name in ("mmdocrag", "mmlongbench"):  # published on the Hub: read from there, not missing
        assert f"{name} (put " not in error
    assert not (tmp_path / "out" / "mmlongembed").exists() and not (tmp_path / "out" / COMPONENTS_FOLDER).exists()
    with pytest.raises(UserError, match="unknown component"):
        composite.plan(MMLongEmbedConfig(sources=(str(sources),), exclude="govreport,videos"))


def test_activitynet_annotations_without_their_videos_are_not_a_source(tmp_path):
    """The sample data's layout holds ActivityNet annotations and unrelated videos: the release
    looks on in the next --sources root (demo sources), and names activitynet when none has both."""
    annotation = {"v_abc": {"duration": 10.0, "timestamps": [[0, 5], [5, 10]], "sentences": ["A.", "B."]}}
    for root, video in ((tmp_path / "sample", "unrelated.mp4"), (tmp_path / "demo", "abc.mp4")):
        (root / "activitynet_captions").mkdir(parents=True)
        (root / "activitynet_captions" / "val_1.json").write_text(json.dumps(annotation))
        (root / "videos").mkdir()
        (root / "videos" / video).write_bytes(b"")
    others = "needle,mmdocrag,hotpotqa,govreport,mmlongbench,youkudc"
    with pytest.raises(UserError, match=r"no sources for activitynet \(put ActivityNet Captions JSON"):
        composite.plan(MMLongEmbedConfig(sources=(str(tmp_path / "sample"),), exclude=others))
    planned = composite.plan(MMLongEmbedConfig(sources=(str(tmp_path / "sample"), str(tmp_path / "demo")),
                                               exclude=others)).to_build
    assert [(p.builder.name, p.sources) for p in planned] == [("activitynet", tmp_path / "demo")]


def test_component_options_are_parsed_by_the_components_own_flags():
    assert parse_component_option("needle.lengths=256,1024") == ("needle", {"lengths": (256, 1024)})
    assert parse_component_option("needle.shared-haystack=true") == ("needle", {"shared_haystack": True})
    assert parse_component_option("govreport.max_queries_per_pool=7") == ("govreport", {"max_queries_per_pool": 7})
    for bad, message in (("needle.lengths=abc", "invalid int"), ("nothing.lengths=1", "unknown component"),
                         ("needle.colour=red", "no option"), ("govreport.seed=3", "no option"),
                         ("needle-lengths", "COMPONENT.OPTION=VALUE")):
        with pytest.raises(UserError, match=message):
            parse_component_option(bad)


def _clean_toolkit(monkeypatch):
    """A fixed, clean toolkit identity (the up-to-date rule compares clean commits only)."""
    identity = {**toolkit_identity(), "git_commit": "1" * 40, "git_dirty": False}
    monkeypatch.setattr(pipeline_module, "toolkit_identity", lambda: dict(identity))
    monkeypatch.setattr(composite, "toolkit_identity", lambda: dict(identity))


def test_components_are_built_once_and_a_new_source_builds_only_itself(tmp_path, monkeypatch, capsys):
    _clean_toolkit(monkeypatch)
    sources = tmp_path / "sources"
    few = ("needle", "mmdocrag", "mmlongbench", "activitynet", "youkudc")
    config = example_release_config(sources, exclude=few)  # HotpotQA and GovReport sources
    shutil.move(sources / "govreport", tmp_path / "govreport-later")  # GovReport's files arrive later
    builder = get_builder("mmlongembed")
    first = dataclasses.replace(config, exclude=",".join(few + ("govreport",)))
    out = run_build(builder, first, tmp_path / "out", progress=False)
    assert {r["dataset"] for r in pool_rows(out)} == {"hotpotqa"}
    assert "govreport" in json.loads((out / "manifest.json").read_text())["absent"]

    built = []
    for name in ("hotpotqa", "govreport"):
        cls = type(get_builder(name))
        monkeypatch.setattr(cls, "build_pools", lambda self, *a, _original=cls.build_pools, **k: (
            built.append(self.name), _original(self, *a, **k))[1])
    shutil.move(tmp_path / "govreport-later", sources / "govreport")
    assert run_build(builder, config, tmp_path / "out", progress=False) == out
    assert built == ["govreport"]  # hotpotqa's build was up to date
    assert {r["dataset"] for r in pool_rows(out)} == {"hotpotqa", "govreport"}
    assert "govreport" not in json.loads((out / "manifest.json").read_text())["absent"]
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)

    before = {p: file_sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}
    capsys.readouterr()
    assert run_build(builder, config, tmp_path / "out", progress=False) == out
    assert built == ["govreport"]  # nothing built again
    assert f"{out} is up to date" in capsys.readouterr().err
    assert {p: file_sha256(p) for p in sorted(out.rglob("*")) if p.is_file()} == before
    # the release's pipeline answers the up-to-date question as every kind's does
    assert build_module.why_not_current(builder, config, out) is None
    assert build_module.why_not_current(builder, first, out) == "another config made it"


def test_a_release_is_planned_once_then_its_components_are_built_then_it_is_assembled_then_checked(
        tmp_path, monkeypatch, clean_toolkit):
    """`mmle build mmlongembed` in order, through one object: the plan made once from the config,
    each component built from it (in the paper's order), then the release assembled and checked,
    both handed the one Release that carries that plan. Run again, it plans once and keeps it all."""
    calls, plans = [], []

    def spy(name):
        real = getattr(composite, name)

        def called(*args, **kwargs):
            calls.append((name, args))
            result = real(*args, **kwargs)
            if name == "plan":
                plans.append(result)
            return result
        monkeypatch.setattr(composite, name, called)

    for name in ("plan", "run_build", "assemble", "check_assembled"):
        spy(name)
    few = tuple(n for n in COMPONENT_NAMES if n not in ("hotpotqa", "govreport"))
    config = example_release_config(tmp_path / "sources", exclude=few)
    out = run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False, quiet=True)

    assert [name for name, _ in calls] == ["plan", "run_build", "run_build", "assemble", "check_assembled"]
    (made,) = plans
    assert calls[0][1] == (config,)
    assert made.config is config and [item.builder.name for item in made.to_build] == ["hotpotqa", "govreport"]
    for (_, (builder, component_config, *_)), item in zip(calls[1:3], made.to_build):
        assert builder is item.builder and component_config is item.config  # as planned, not planned again
    release = calls[3][1][0]
    assert calls[4][1][0] is release and release.plan is made and release.final_dir == out

    calls.clear()
    assert run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False, quiet=True) == out
    assert [name for name, _ in calls] == ["plan"]  # every component and the release are up to date


def test_a_release_over_one_sources_root_of_several_sources_is_up_to_date_when_run_again(tmp_path, clean_toolkit,
                                                                                           capsys):
    """The README's flow: one --sources root holding several sources, ActivityNet's demo clips
    beside YoukuDC's (left out) and GovReport's files. A component's source identity is what its
    builder reads, nothing more, so the same command again builds nothing and writes nothing,
    and so does the component built alone from that root."""
    pytest.importorskip("av", reason="the optional extra [video] is not installed")
    from mmlongembed.demo_sources import write_demo_sources
    from tests.support.rebuild import files_state

    root = tmp_path / "sources"
    config = example_release_config(root, exclude=tuple(n for n in COMPONENT_NAMES if n != "govreport"))
    write_demo_sources(root, n_videos=8)
    video = ("activitynet.lengths=48,96", "activitynet.max_queries_per_pool=3",
             f"activitynet.frame_store={tmp_path / 'frames'}")
    others = ",".join(n for n in COMPONENT_NAMES if n not in ("govreport", "activitynet"))  # youkudc among them
    config = dataclasses.replace(config, exclude=others, set=config.set + video)
    out = run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False)
    assert {r["dataset"] for r in pool_rows(out)} == {"govreport", "activitynet"}
    before = files_state(tmp_path / "out")
    capsys.readouterr()
    assert run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False) == out
    err = capsys.readouterr().err
    assert f"{out} is up to date" in err and "reassembling" not in err
    assert files_state(tmp_path / "out") == before
    # ActivityNet alone from the same root, twice: the second run is up to date
    alone = get_builder("activitynet").config_class(sources=str(root), lengths=(48, 96), max_queries_per_pool=3,
                                                    frame_store=str(tmp_path / "frames"))
    built = run_build(get_builder("activitynet"), alone, tmp_path / "alone", progress=False)
    assert build_module.why_not_current(get_builder("activitynet"), alone, built) is None
    read = {v["file"].split("/")[0] for v in json.loads((built / "manifest.json").read_text())["sources"]["videos"]}
    assert read == {"videos"}  # the videos its annotations name, none of YoukuDC's


PUSHABLE = ("for a pushable release, build it with --set mmlongbench.llm=openai mmlongbench.llm-base-url=URL "
            "mmlongbench.llm-model=MODEL (an LLM writes the document summaries), or --exclude mmlongbench")


def test_a_release_push_would_refuse_says_so_first_and_last_with_the_command_for_one_it_takes(tmp_path, capsys):
    """The README's flow from real sources: MMLongBench-Doc has no summaries, so under the
    default --llm none its queries are stand-ins and the release is synthetic. The build says
    so before it starts and at its end, with the options that make a release `mmle push` takes."""
    root = tmp_path / "sources"
    config = example_release_config(root, exclude=tuple(n for n in COMPONENT_NAMES if n != "mmlongbench"))
    for marker in root.rglob("SYNTHETIC"):
        marker.unlink()  # the example's pages stand for real ones: only the queries are stand-ins
    assert main(["build", "mmlongembed", "--sources", str(root), "--exclude", config.exclude, "--set", *config.set,
                 "--output", str(tmp_path / "out"), "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("note: this release will be marked synthetic, and `mmle push` refuses it "
                             "(mmlongbench: queries: built with --llm none")
    assert err[0].endswith(f"; {PUSHABLE}")
    assert err[-2].startswith("SYNTHETIC: mmlongbench: queries:")
    assert err[-1] == f"NOT PUSHABLE: {PUSHABLE}"
    _, options = parse_component_option("mmlongbench.llm=openai")  # the advised options are the component's own
    assert options == {"llm": "openai"}
    assert parse_component_option("mmlongbench.llm-model=MODEL") == ("mmlongbench", {"llm_model": "MODEL"})


def test_the_pushable_advice_sets_an_llm_only_where_it_replaces_every_synthetic_part():
    from mmlongembed.release.plan import pushable_advice

    stand_ins = ["queries: 31 queries are text-layer stand-ins made without an LLM (--llm none), not summaries"]
    demo = ["sources: SYNTHETIC demo sources written by `mmle demo-sources`"]
    assert pushable_advice({"mmlongbench": stand_ins, "activitynet": demo}) == (
        "for a pushable release, build it with --set mmlongbench.llm=openai mmlongbench.llm-base-url=URL "
        "mmlongbench.llm-model=MODEL (an LLM writes the document summaries) --exclude activitynet, "
        "or --exclude mmlongbench,activitynet")
    assert pushable_advice({"mmlongbench": demo + stand_ins}) == (
        "for a pushable release, build it with --exclude mmlongbench")


def test_an_existing_folder_that_is_not_a_release_is_not_replaced(tmp_path):
    (tmp_path / "out" / "mmlongembed").mkdir(parents=True)
    (tmp_path / "out" / "mmlongembed" / "notes.txt").write_text("mine")
    config = example_release_config(tmp_path / "sources", exclude=("needle", "mmdocrag", "hotpotqa", "mmlongbench",
                                                                   "activitynet", "youkudc"))
    with pytest.raises(UserError, match="not an mmlongembed release"):
        run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "mmlongembed" / "notes.txt").read_text() == "mine"


@pytest.mark.realdata
def test_the_release_has_one_datasheet_for_all_its_sources_and_a_valid_croissant(release):
    from mmlongembed.output.disclosure import DATASHEET_MARKER
    from mmlongembed.output.layout import split_card

    assert_croissant_matches(release)  # no mlcroissant error or warning; its records are load_dataset's
    header = check_card_with_huggingface_hub(release / "README.md")
    assert header["license"] == "other"  # the components' sources have different licences
    _, body = split_card((release / "README.md").read_text(), "card")
    assert body.count(DATASHEET_MARKER) == 1  # the components' own datasheets are cut
    assert "| `hotpotqa` | HotpotQA (Yang et al., EMNLP 2018), distractor setting | CC BY-SA 4.0" in body
    assert "MMEB-V2" in body and "ActivityNet Captions (Krishna et al., ICCV 2017)" in body


def test_a_release_from_the_shared_sample_data_is_real_and_validates(tmp_path):
    """The shared sample data in its own layout, small lengths: the sources are found by their
    folders, nothing in the release is synthetic, and it validates."""
    data = shared_data_dir()
    config = MMLongEmbedConfig(sources=(str(data),), exclude="activitynet,youkudc,mmdocrag,mmlongbench",
                               set=("needle.lengths=256,1024", "needle.depths=0,100", "needle.needles_per_pool=5",
                                    "hotpotqa.lengths=2048", "hotpotqa.max_queries_per_pool=5",
                                    "govreport.lengths=4096", "govreport.max_queries_per_pool=5"))
    out = run_build(get_builder("mmlongembed"), config, tmp_path / "out", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["synthetic"] == []
    assert next(c for c in manifest["components"] if c["name"] == "govreport")["sources"]["kind"] == "local"
    assert {r["dataset"] for r in pool_rows(out)} == {"needle", "hotpotqa", "govreport"}
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    assert_croissant_matches(out)
    check_card_with_huggingface_hub(out / "README.md")
    assert reproduce(str(out)) is True  # rebuilt from its manifest into a fresh folder: identical


@pytest.mark.parametrize("name", ["mmlongbench", "mmdocrag"])
def test_a_page_rendering_component_run_again_is_up_to_date(name, tmp_path, monkeypatch, capsys):
    """How long rendering took is a fact of one build, not of its sources: a second run of the
    same build must find it up to date (else every release rebuilds these components)."""
    _clean_toolkit(monkeypatch)
    builder = get_builder(name)
    config = builder.example_config(tmp_path / "sources")
    out = run_build(builder, config, tmp_path / "out", progress=False)
    assert build_module.why_not_current(get_builder(name), config, out) is None
    capsys.readouterr()
    assert run_build(get_builder(name), config, tmp_path / "out", progress=False) == out
    assert "is up to date" in capsys.readouterr().out


def test_figure1_bars_sit_side_by_side_in_their_legend_colours_and_mark_synthetic_sources():
    """Issue 25 §8: two sources of one task (NeedleBench and MM-NIAH) are never drawn over each other
    in a blend of their colours, and a source made from synthetic or demo data says so."""
    from matplotlib.colors import to_rgba

    from mmlongembed.release.tables import figure1_figure

    lengths = {"visual_grounding": {"needle-text": [300, 300, 900], "needle-image": [300, 310, 880]},
               "temporal_summarization": {"activitynet": [50, 90, 95]}}
    fig = figure1_figure(lengths, synthetic={"activitynet"})
    grounding, temporal = fig.axes
    handles, labels = grounding.get_legend_handles_labels()
    assert labels == ["MM-NIAH (3; synthetic task)", "NeedleBench (3; synthetic task)"]
    bars = [list(container.patches) for container in grounding.containers]
    assert [group[0] for group in bars] == handles  # each legend entry is its own bars' first patch
    for handle, group in zip(handles, bars):
        assert group and all(p.get_facecolor() == handle.get_facecolor() for p in group)
        assert all(p.get_alpha() in (None, 1.0) for p in group)  # no see-through blend of two colours
    # the same bin: side by side, not on top of each other
    first = [min(group, key=lambda p: p.get_x()) for group in bars]
    assert first[0].get_x() + first[0].get_width() <= first[1].get_x() + 1e-9 or \
        first[1].get_x() + first[1].get_width() <= first[0].get_x() + 1e-9
    assert to_rgba(bars[0][0].get_facecolor()) != to_rgba(bars[1][0].get_facecolor())
    (label,) = temporal.get_legend_handles_labels()[1]
    assert label == "ActivityNet Captions (3; SYNTHETIC/demo data)"
    assert all(p.get_hatch() == "//" for p in temporal.patches) and not any(p.get_hatch() for p in grounding.patches)
    assert "SYNTHETIC" in fig._suptitle.get_text()


def test_the_release_summary_gives_each_builders_storage_ratio(release, capsys):
    manifest = json.loads((release / "manifest.json").read_text())
    storage = manifest["storage"]
    assert storage["distinct_image_bytes"] and storage["image_bytes_on_disk"]
    assert storage["image_ratio_to_distinct"] == round(storage["image_bytes_on_disk"] / storage["distinct_image_bytes"], 4)
    composite._print_end(manifest)
    printed = capsys.readouterr().err
    for component in manifest["components"]:
        own = component["storage"]
        line = next(x for x in printed.splitlines() if x.startswith(f"  {component['name']}: bytes on disk"))
        assert f"{own['ratio_to_distinct_payload']:.2f}x" in line
        assert ("their distinct bytes" in line) == bool(own["distinct_image_bytes"])
