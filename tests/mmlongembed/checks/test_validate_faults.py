"""Nothing invalid leaves the machine: `mmle validate` on broken and tampered builds.

A build that cannot be read (a data file corrupt, empty or missing, no card, a malformed
manifest) is one line naming the file, exit 1. A build that reads but was edited after it was
built (a query replaced, an easy-pool text changed at the same token count, a pool dropped from
the pools table) fails validation, each through the check meant for it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builders._govreport_fixtures import write_govreport_jsonl
from builders.govreport import GovReportConfig
from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder
from mmlongembed.cli import main
from mmlongembed.output.layout import configs_from_card
from mmlongembed.core.tokens import default_counter
from mmlongembed.output.manifest import file_sha256
from mmlongembed.build.validate import validate_dir


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    sources = tmp_path_factory.mktemp("sources")
    write_govreport_jsonl(sources / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
    config = GovReportConfig(sources=str(sources), lengths=(2048, 4096), max_queries_per_pool=4)
    return run_build(get_builder("govreport"), config, tmp_path_factory.mktemp("out"), progress=False)


@pytest.fixture()
def copy(built, tmp_path) -> Path:
    target = tmp_path / "govreport"
    shutil.copytree(built, target)
    return target


def _file(build: Path, config: str) -> Path:
    return build / configs_from_card(build / "README.md")[config].path


def _rewrite(path: Path, table: pa.Table) -> None:
    pq.write_table(table, path)


def _refresh_manifest_hash(build: Path, path: Path) -> None:
    """What a careful forger does: record the edited file's sha256 too, so that only the
    content checks are left to catch the edit."""
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["files"][path.relative_to(build).as_posix()]["sha256"] = file_sha256(path)
    (build / "manifest.json").write_text(json.dumps(manifest))
    croissant = json.loads((build / "croissant.json").read_text())  # which lists every data file's sha256 too
    for entry in croissant["distribution"]:
        if entry["contentUrl"] == path.relative_to(build).as_posix():
            entry["sha256"] = file_sha256(path)
    (build / "croissant.json").write_text(json.dumps(croissant))


def _validate_cli(build: Path, capsys) -> tuple[int, str, str]:
    code = main(["validate", str(build), "--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def _corrupt(build):
    path = _file(build, "govreport-hard-4k-corpus")
    path.write_bytes(b"PAR1" + bytes(range(256)) * 4)
    return path


def _empty(build):
    path = _file(build, "govreport-easy-2k-queries")
    path.write_bytes(b"")
    return path


def _truncated(build):
    path = _file(build, "govreport-easy-4k-qrels")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def _no_pools_file(build):
    path = _file(build, "pools")
    path.unlink()
    return path


def _no_card(build):
    path = build / "README.md"
    path.unlink()
    return path


def _manifest_not_json(build):
    path = build / "manifest.json"
    path.write_text('{"builder": {"name": "govreport"', encoding="utf-8")
    return path


def _manifest_without_builder(build):
    path = build / "manifest.json"
    path.write_text("[1, 2, 3]\n", encoding="utf-8")
    return path


def _no_manifest(build):
    path = build / "manifest.json"
    path.unlink()
    return path


@pytest.mark.parametrize("damage", [_corrupt, _empty, _truncated, _no_pools_file, _no_card, _manifest_not_json,
                                    _manifest_without_builder, _no_manifest], ids=lambda f: f.__name__.strip("_"))
def test_an_unreadable_build_is_one_line_naming_the_file_exit_1(copy, capsys, damage):
    path = damage(copy)
    code, out, err = _validate_cli(copy, capsys)
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmle: error: "), err
    assert str(path) in lines[0], (path, lines[0])
    assert "Traceback" not in out + err


def test_a_replaced_query_text_is_recounted(copy):
    path = _file(copy, "govreport-hard-4k-queries")
    table = pq.read_table(path)
    texts = table.column("text").to_pylist()
    texts[0] = "A different summary: the agency's spending on roads and bridges rose sharply in 2019."
    _rewrite(path, table.set_column(table.column_names.index("text"), "text", pa.array(texts)))
    assert "file_hashes" in {p.check for p in validate_dir(copy)[0]}
    _refresh_manifest_hash(copy, path)
    problems, _ = validate_dir(copy)
    assert [p.check for p in problems] == ["query_recount"], problems


def _same_length_edit(text: str, counter) -> str:
    """``text`` with two neighbouring words inside it swapped, at the same token count."""
    words = text.split(" ")
    for i in range(len(words) // 2, len(words) - 2):
        a, b = words[i], words[i + 1]
        if a != b and a.isalpha() and b.isalpha():
            edited = " ".join([*words[:i], b, a, *words[i + 2:]])
            if counter.count(edited) == counter.count(text):
                return edited
    raise AssertionError("no same-length edit found")


def test_an_easy_pool_text_edited_at_the_same_token_count_fails_the_file_hash(copy):
    path = _file(copy, "govreport-easy-4k-corpus")
    table = pq.read_table(path)
    pools, texts = table.column("pool").to_pylist(), table.column("text").to_pylist()
    row = pools.index("govreport-easy-4k")
    texts[row] = _same_length_edit(texts[row], default_counter())
    _rewrite(path, table.set_column(table.column_names.index("text"), "text", pa.array(texts)))
    problems, _ = validate_dir(copy)
    assert [p.check for p in problems] == ["file_hashes"], problems  # nothing but the hash can see it
    assert path.name in problems[0].detail


def test_a_row_dropped_from_the_pools_table_fails(copy):
    path = _file(copy, "pools")
    table = pq.read_table(path)
    keep = [name != "govreport-hard-2k" for name in table.column("pool").to_pylist()]
    _rewrite(path, table.filter(pa.array(keep)))
    assert "file_hashes" in {p.check for p in validate_dir(copy)[0]}
    _refresh_manifest_hash(copy, path)
    problems, _ = validate_dir(copy)
    assert problems and {p.check for p in problems} == {"configs"}, problems
    assert all(p.pool == "govreport-hard-2k" for p in problems)


def test_validate_shows_progress_unless_told_not_to(built, capsys):
    assert main(["validate", str(built)]) == 0
    err = capsys.readouterr().err
    assert "validating" in err and "row" in err
    assert main(["validate", str(built), "--no-progress"]) == 0
    assert "validating" not in capsys.readouterr().err


def test_one_core_or_several_find_the_same_problems_in_the_same_order(copy, monkeypatch):
    """The recount runs in worker processes where there are cores for them (the largest pools
    first), else in a thread: the report must not depend on it."""
    from mmlongembed.core import parallel

    path = _file(copy, "govreport-easy-4k-corpus")
    table = pq.read_table(path)
    texts = table.column("text").to_pylist()
    texts[0], texts[-1] = texts[0] + " and a few more words", " " + texts[-1]  # two pools of the shard
    _rewrite(path, table.set_column(table.column_names.index("text"), "text", pa.array(texts)))
    _refresh_manifest_hash(copy, path)
    found = {}
    for cores in (1, 2, 3):
        monkeypatch.setattr(parallel, "available_cores", lambda: cores)
        problems, checked = validate_dir(copy)
        found[cores] = ([(p.pool, p.check, p.detail) for p in problems], checked)
    problems, checked = found[1]
    assert {pool for pool, _, _ in problems} == {"govreport-easy-4k", "govreport-hard-4k"}, problems
    assert {"recount", "edge_whitespace", "donor_block"} <= {check for _, check, _ in problems}  # generic and own
    assert checked["pools"] == 4 and found[2] == found[1] and found[3] == found[1]
