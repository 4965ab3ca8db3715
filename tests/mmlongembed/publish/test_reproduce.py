"""`mmle reproduce`: a build rebuilt from its manifest is `identical`; a source changed by one
byte is named, and so are the first data file, pool and row that come out different; a build
of another builder version says so before anything is rebuilt; a release on the (loopback) Hub
is reproduced from its tag."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder
from mmlongembed.core.errors import UserError
from mmlongembed.publish.reproduce import first_difference, first_row_difference, reproduce, source_differences
from tests.support.publish_support import REPO, client_env, run_push_cli
from tests.support.python_env import python_env


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, Path]:
    """(the sources, the build) of GovReport's example."""
    root = tmp_path_factory.mktemp("reproduce")
    builder = get_builder("govreport")
    sources = root / "sources"
    built = run_build(builder, builder.example_config(sources), root / "out", progress=False, quiet=True)
    return sources, built


def one_byte_changed(sources: Path, into: Path) -> Path:
    """A copy of ``sources`` with one letter of its first report changed."""
    copy = shutil.copytree(sources, into)
    path = copy / "reports.jsonl"
    data = bytearray(path.read_bytes())
    at = data.index(b"Section 1: ") + len(b"Section 1: ") + 1
    data[at] = ord("Q") if data[at] != ord("Q") else ord("R")
    path.write_bytes(bytes(data))
    return copy


def test_a_build_reproduced_from_its_manifest_is_identical(example, capsys):
    _, built = example

    assert reproduce(str(built)) is True

    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("identical: 9 data files")
    assert "sources: every file has the sha256 the manifest records" in err


def test_a_source_changed_by_one_byte_is_named_and_so_is_the_first_differing_row(example, tmp_path, capsys):
    sources, built = example
    changed = one_byte_changed(sources, tmp_path / "changed")

    assert reproduce(str(built), sources=[str(changed)]) is False

    out, err = capsys.readouterr()
    assert "source differs: govreport: reports.jsonl differs (sha256 recorded" in err
    verdict = out.splitlines()[-1]
    assert verdict.startswith("differs: data/govreport/") and "): pool govreport-" in verdict and ", row " in verdict


def test_another_builder_version_is_named_before_anything_is_rebuilt(example, tmp_path, monkeypatch, capsys):
    _, built = example
    old = shutil.copytree(built, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["builder"]["version"] = "0.0.1"
    (old / "manifest.json").write_text(json.dumps(manifest))
    said_before = []

    def rebuild(*args, **kwargs):
        said_before.append(capsys.readouterr().err)
        raise UserError("stop here")

    monkeypatch.setattr("mmlongembed.build.run.run_build", rebuild)
    with pytest.raises(UserError, match="stop here"):
        reproduce(str(old))
    version = get_builder("govreport").version
    assert f"version differs: builder: built by govreport version 0.0.1, this toolkit has version {version}" \
        in said_before[0]


def test_source_differences_name_missing_new_and_changed_files():
    recorded = {"files": [{"file": "a.jsonl", "sha256": "1" * 64}, {"file": "b.jsonl", "sha256": "2" * 64}],
                "padding": {"files": [{"file": "w.raw", "sha256": "3" * 64}]}}
    given = {"files": [{"file": "a.jsonl", "sha256": "9" * 64}, {"file": "c.jsonl", "sha256": "4" * 64}],
             "padding": {"files": [{"file": "w.raw", "sha256": "3" * 64}]}}
    assert source_differences("x", recorded, given) == [
        "x: a.jsonl differs (sha256 recorded 111111111111, given 999999999999)",
        "x: b.jsonl is recorded but not among the given sources",
        "x: c.jsonl is not recorded (a file the build did not read)"]


def test_the_first_difference_ignores_the_content_hash_in_file_names(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    recorded = {"data/d/corpus/8k-aaaaaaaaaaaa.parquet": {"sha256": "1"}, "data/pools/test-bbbbbbbbbbbb.parquet":
                {"sha256": "2"}}
    same = {"data/d/corpus/8k-cccccccccccc.parquet": {"sha256": "1"}, "data/pools/test-dddddddddddd.parquet":
            {"sha256": "2"}}
    assert first_difference(recorded, same) is None
    changed = {**same, "data/pools/test-dddddddddddd.parquet": {"sha256": "3"}}
    assert first_difference(recorded, changed) == ("pools/test", "data/pools/test-bbbbbbbbbbbb.parquet",
                                                   "data/pools/test-dddddddddddd.parquet")
    rows = [{"pool": "p1", "text": "a"}, {"pool": "p2", "text": "b"}, {"pool": "p2", "text": "c"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "old.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:2] + [{"pool": "p2", "text": "C"}]), tmp_path / "new.parquet")
    assert first_row_difference(tmp_path / "old.parquet", tmp_path / "new.parquet") == \
        "pool p2, row 1 (file row 2), column text"


def test_a_release_pushed_to_the_hub_is_reproduced_from_its_tag(hub, example, tmp_path):
    sources, built = example
    env = client_env(hub, tmp_path)
    pushed = run_push_cli([str(built), "--repo", REPO, "--version", "1.0.0", "--allow-synthetic"], env)
    assert pushed.returncode == 0, pushed.stderr[-2000:]

    def mmle_reproduce(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mmlongembed.cli", "reproduce", f"{REPO}@v1.0.0", "--no-progress",
                               *args], env=python_env(env), capture_output=True, text=True, timeout=600)

    same = mmle_reproduce("--sources", str(sources))
    assert same.returncode == 0, same.stderr[-2000:]
    assert same.stdout.splitlines()[-1].startswith(f"identical: 9 data files, each with the sha256 {REPO}@v1.0.0")

    changed = mmle_reproduce("--sources", str(one_byte_changed(sources, tmp_path / "changed")))
    assert changed.returncode == 1, changed.stderr[-2000:]
    assert "reports.jsonl differs" in changed.stderr and "Traceback" not in changed.stderr
    assert changed.stdout.splitlines()[-1].startswith("differs: data/govreport/")


def test_a_release_names_each_component_whose_builder_version_differs():
    from mmlongembed.output.layout import LAYOUT_VERSION
    from mmlongembed.output.manifest import toolkit_identity
    from mmlongembed.publish.reproduce import version_differences

    hotpotqa = get_builder("hotpotqa")
    manifest = {"toolkit": toolkit_identity(), "builder": {"name": "mmlongembed", "version": get_builder(
        "mmlongembed").version}, "components": [
        {"name": "hotpotqa", "builder": {"name": "hotpotqa", "version": hotpotqa.version}},
        {"name": "govreport", "builder": {"name": "govreport", "version": "0.0.9"}}]}
    assert version_differences(manifest) == [
        f"component govreport: built by govreport version 0.0.9, this toolkit has version "
        f"{get_builder('govreport').version}"]
    manifest["toolkit"] = {**manifest["toolkit"], "layout_version": "1"}
    assert version_differences(manifest)[0] == f"layout version 1 (this toolkit writes {LAYOUT_VERSION})"
