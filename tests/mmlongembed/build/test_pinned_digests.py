"""The data files of two small builds, pinned: any change to what a build writes shows here.

GovReport (BM25 donors replacing spans) and HotpotQA (evidence removed and refilled) are built from
their generated example sources. Each data file is pinned twice:

- by its rows: a sha256 of its schema and its rows as read back, which holds whatever pyarrow
  wrote the file (the file's bytes carry the writer's version in their metadata);
- by its bytes: the file's own sha256, checked only under the pyarrow version that recorded it.

A change that is meant to alter built data bumps the builder's version and records the new pins:
`python -m tests.mmlongembed.build.test_pinned_digests` writes them into pinned_digests.json.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pyarrow
import pyarrow.parquet as pq
import pytest

from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder

BUILDERS = ("govreport", "hotpotqa")
PINS_FILE = Path(__file__).with_name("pinned_digests.json")


def rows_sha256(path: Path) -> str:
    """sha256 of a parquet file's schema (without the writer's metadata) and its rows as read."""
    table = pq.read_table(path)
    digest = hashlib.sha256(str(table.schema.remove_metadata()).encode())
    for row in table.to_pylist():
        digest.update(json.dumps(row, sort_keys=True, default=lambda v: v.hex()).encode())
    return digest.hexdigest()


def file_key(root: Path, path: Path) -> str:
    """The file's place in the build, without the content hash its name ends in."""
    return re.sub(r"-[0-9a-f]{12}\.parquet$", ".parquet", str(path.relative_to(root)))


def digests(root: Path) -> dict[str, dict[str, str]]:
    return {file_key(root, path): {"rows": rows_sha256(path), "bytes": hashlib.sha256(path.read_bytes()).hexdigest()}
            for path in sorted(root.rglob("*.parquet"))}


def build(name: str, directory: Path) -> Path:
    builder = get_builder(name)
    config = builder.example_config(directory / "sources")
    return run_build(builder, config, directory / "out", progress=False)


@pytest.mark.parametrize("name", BUILDERS)
def test_a_small_build_writes_the_pinned_data(name, tmp_path, clean_toolkit):
    pins = json.loads(PINS_FILE.read_text())
    found = digests(build(name, tmp_path))
    pinned = pins["builds"][name]
    assert sorted(found) == sorted(pinned), "the build writes other files than the pinned ones"
    changed = [key for key in pinned if found[key]["rows"] != pinned[key]["rows"]]
    assert not changed, f"{name}: these files' rows changed: {changed} (new pins: python -m {__name__})"
    if pyarrow.__version__ == pins["pyarrow"]:
        changed = [key for key in pinned if found[key]["bytes"] != pinned[key]["bytes"]]
        assert not changed, f"{name}: these files' bytes changed under the same pyarrow: {changed}"


def test_the_row_digest_sees_one_changed_value_and_not_the_writers_metadata(tmp_path):
    table = pyarrow.table({"_id": ["a", "b"], "text": ["one", "two"]})
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.replace_schema_metadata({"writer": "another"}), tmp_path / "b.parquet")
    pq.write_table(pyarrow.table({"_id": ["a", "b"], "text": ["one", "twO"]}), tmp_path / "c.parquet")
    assert rows_sha256(tmp_path / "a.parquet") == rows_sha256(tmp_path / "b.parquet")
    assert rows_sha256(tmp_path / "a.parquet") != rows_sha256(tmp_path / "c.parquet")


if __name__ == "__main__":  # record the pins of today's code
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        builds = {name: digests(build(name, Path(scratch) / name)) for name in BUILDERS}
    PINS_FILE.write_text(json.dumps({"pyarrow": pyarrow.__version__, "builds": builds}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS_FILE}", file=sys.stderr)
