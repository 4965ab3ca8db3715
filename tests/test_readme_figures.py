"""The README's figures of the demo release are what its commands build (issue 36: they had
drifted, 2,078 queries in the README against 2,075 built). The test runs the README's own two
commands, as written there, on the shared sample data, and reads the README's figure back."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.realdata import REPO_ROOT, shared_data_dir

FIGURE = re.compile(r"\(`\.\./shared/data` and the demo clips: (?P<pools>\d+) pools, (?P<queries>[\d,]+) queries,\s+"
                    r"(?P<mb>[\d.]+) MB of data\s+files")
MB_TOLERANCE = 0.005  # parquet bytes may move with the writer's version; a stale figure moves more


def _demo_commands(readme: str) -> list[list[str]]:
    """The README's demo release commands: its `mmle demo-sources` and `mmle build mmlongembed` lines."""
    block = readme.split("### The whole benchmark in one release", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(("mmle demo-sources", "mmle build"))]


@pytest.mark.realdata
def test_the_readme_demo_release_figures_are_what_its_commands_build(tmp_path, monkeypatch):
    from mmlongembed.cli import main

    data = shared_data_dir()
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    stated = FIGURE.search(readme)
    assert stated, "the README no longer states the demo release's figures in the form this test reads"
    commands = _demo_commands(readme)
    assert [c[0] for c in commands] == ["demo-sources", "build"]
    monkeypatch.chdir(tmp_path)
    for command in commands:
        command = [str(data) if arg == "../shared/data" else arg for arg in command]
        assert main([*command, *(["--output", "out", "--no-progress"] if command[0] == "build" else [])]) == 0
    manifest = json.loads((tmp_path / "out" / "mmlongembed" / "manifest.json").read_text())
    built = {"pools": len(manifest["pools"]), "queries": sum(p["queries"] for p in manifest["pools"]),
             "mb": sum(f["bytes"] for f in manifest["files"].values()) / 1e6}
    assert int(stated["pools"]) == built["pools"], built
    assert int(stated["queries"].replace(",", "")) == built["queries"], built
    assert float(stated["mb"]) == pytest.approx(built["mb"], rel=MB_TOLERANCE), built
