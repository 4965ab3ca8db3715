"""Release notes, several tasks in one repo, and the large-folder path."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import yaml

from mmlongembed.publish.push import pool_summaries, publish, release_notes
from tests.support.publish_support import REPO, TOKEN, make_pool, write_build

def push(hub, build, version, **kw):
    return publish(build, REPO, version, endpoint=hub.endpoint, token=TOKEN, log=lambda m: None, wait_s=0.01, **kw)


def card_configs(commit) -> set[str]:
    text = commit.files["README.md"].data.decode()
    return {c["config_name"] for c in yaml.safe_load(text.split("---")[1])["configs"]}


def pools_path(commit) -> str:
    text = commit.files["README.md"].data.decode()
    return next(c["data_files"][0]["path"] for c in yaml.safe_load(text.split("---")[1])["configs"]
                if c["config_name"] == "pools")


def test_release_notes_list_changes_since_the_previous_tag(hub, tmp_path):
    v1 = write_build(tmp_path / "v1", [make_pool("govreport", "easy", "logical_summarization", 3),
                                       make_pool("govreport", "hard", "logical_summarization", 2)])
    first = push(hub, v1, "1.0.0")
    assert first.previous_tag is None and "First release: 2 pools" in first.notes

    v2 = write_build(tmp_path / "v2", [make_pool("govreport", "easy", "logical_summarization", 5, seed=1),
                                       make_pool("govreport", "grid", "logical_summarization", 2)])
    notes_file_text = "Fixes the easy pool's candidates."
    second = push(hub, v2, "1.1.0", notes=notes_file_text)

    assert second.previous_tag == "v1.0.0"
    notes = second.notes
    assert notes_file_text in notes
    assert "- pools added: govreport-grid-256" in notes
    assert "- pools removed: govreport-hard-256" in notes
    changed = next(line for line in notes.splitlines() if line.strip().startswith("- govreport-easy-256:"))
    assert "queries 3 -> 5" in changed and "candidates 6 -> 10" in changed and "tokens_max" in changed
    repo = hub.repo(REPO)
    release = repo.commits[repo.tags["v1.1.0"]]
    assert notes in release.description and "mmle-release-id: " in release.description
    # The task's old files (the hard pool's rows among them) went in the same commit.
    old_files = {p for p in repo.commits[repo.tags["v1.0.0"]].files if p.startswith("data/")}
    assert set(second.deleted) == old_files and not old_files & set(release.files)
    assert "govreport-hard-256-corpus" not in card_configs(release)
    # The old release is untouched and still complete.
    assert old_files == {str(p.relative_to(v1)) for p in (v1 / "data").rglob("*.parquet")}


def test_release_notes_diff_lengths():
    old = pool_summaries([{"pool": "p", "n_queries": 2, "n_candidates": 4, "length": 8192,
                           "band_min": 4097, "band_max": 8192}], {"p": {"tokens_median": 6000}})
    new = pool_summaries([{"pool": "p", "n_queries": 2, "n_candidates": 4, "length": 16384,
                           "band_min": 8193, "band_max": 16384}], {"p": {"tokens_median": 12000}})
    notes = release_notes("v2.0.0", "v1.0.0", old, new)
    assert "p: length 8192 -> 16384; band [4097, 8192] -> [8193, 16384]; tokens_median 6000 -> 12000" in notes
    assert "pools changed: none" in release_notes("v2.0.0", "v1.0.0", old, old)


def test_tasks_share_a_repo_and_each_is_replaced_as_a_unit(hub, tmp_path):
    gov = write_build(tmp_path / "gov", [make_pool("govreport", "easy", "logical_summarization", 2)])
    hotpot = write_build(tmp_path / "hot", [make_pool("hotpot", "easy", "multi_source_reasoning", 2),
                                            make_pool("hotpot", "hard", "multi_source_reasoning", 2)])
    push(hub, gov, "1.0.0")
    push(hub, hotpot, "1.1.0")
    repo = hub.repo(REPO)
    both = repo.commits[repo.tags["v1.1.0"]]
    assert card_configs(both) == {"pools"} | {f"{p}-{part}" for p in ("govreport-easy-256", "hotpot-easy-256",
                                                                        "hotpot-hard-256")
                                               for part in ("corpus", "queries", "qrels", "audit")}
    pools = pq.read_table(io.BytesIO(both.files[pools_path(both)].data)).to_pylist()
    assert [r["pool"] for r in pools] == ["govreport-easy-256", "hotpot-easy-256", "hotpot-hard-256"]

    hotpot2 = write_build(tmp_path / "hot2", [make_pool("hotpot", "easy", "multi_source_reasoning", 3)])
    result = push(hub, hotpot2, "1.2.0")
    last = repo.commits[repo.tags["v1.2.0"]]
    assert {p.split("/")[1] for p in last.files if p.startswith("data/") and "/pools/" not in p} == {
        "govreport", "hotpot"}
    assert [r["pool"] for r in pq.read_table(io.BytesIO(last.files[pools_path(last)].data)).to_pylist()] == [
        "govreport-easy-256", "hotpot-easy-256"]
    assert "govreport-easy-256-corpus" in card_configs(last) and "hotpot-hard-256-corpus" not in card_configs(last)
    assert "- pools removed: hotpot-hard-256" in result.notes and "pools added: none" in result.notes
    # The kept task's files are byte-identical to its own release.
    gov_files = [str(p.relative_to(gov)) for p in (gov / "data" / "govreport").rglob("*.parquet")]
    assert gov_files and all(last.files[path].data == (gov / path).read_bytes() for path in gov_files)


def test_large_folder_stages_on_a_branch_then_makes_one_commit_on_main(hub, tmp_path):
    build = write_build(tmp_path / "b", [make_pool("govreport", "easy", "logical_summarization", 3)])
    result = push(hub, build, "2.0.0", large_folder=True)
    repo = hub.repo(REPO)
    assert repo.tags == {"v2.0.0": result.commit} and repo.branches["main"] == result.commit
    assert set(repo.branches) == {"main"}  # the staging branch is gone
    release = repo.commits[result.commit]
    assert repo.commits[release.parent].parent is None  # main got exactly one commit
    for path, entry in release.files.items():
        if path != ".gitattributes":
            assert entry.data == (build / path).read_bytes()
    manifest = json.loads(release.files["manifest.json"].data)
    assert manifest["pools"][0]["pool"] == "govreport-easy-256"
