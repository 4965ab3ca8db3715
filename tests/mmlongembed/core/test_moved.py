"""Old import paths of the modules that moved into stage packages keep working for one release
(mmlongembed.core.moved): the same module object, a DeprecationWarning naming the new path, and
`python -m OLD` for the documented commands."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from mmlongembed.core.moved import MovedModules
from tests.support.python_env import python_env
from tests.support.realdata import REPO_ROOT


def _tables() -> dict[str, str]:
    import harness  # noqa: F401  (installs the harness's table)
    import mmlongembed  # noqa: F401

    tables = {}
    for finder in sys.meta_path:
        if isinstance(finder, MovedModules):
            tables.update(finder.moved)
    return tables


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-c", code], capture_output=True,
                          text=True, cwd=tmp_path, env=python_env(), timeout=300)


def test_every_old_path_names_a_module_that_exists_and_is_no_file_of_its_own():
    tables = _tables()
    assert len(tables) >= 60  # mmlongembed's and the harness's
    for old, new in tables.items():
        assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no such module"
        # a file at the old path would be found before the old name is answered
        assert not (REPO_ROOT / (old.replace(".", "/") + ".py")).exists(), old


def test_an_old_path_gives_the_moved_module_itself_and_warns(tmp_path):
    result = _run("import mmlongembed.layout as old, mmlongembed.output.layout as new\n"
                  "from harness import mteb_retrieval\n"
                  "import harness.mteb.retrieval as retrieval\n"
                  "print(old is new, mteb_retrieval is retrieval, new.__spec__.name)", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "mmlongembed.output.layout"]
    assert "DeprecationWarning: mmlongembed.layout moved to mmlongembed.output.layout" in result.stderr
    assert "DeprecationWarning: harness.mteb_retrieval moved to harness.mteb.retrieval" in result.stderr


def test_a_name_of_the_module_a_package_replaced_is_still_found_there(tmp_path):
    result = _run("from mmlongembed.output import write_tables\n"
                  "from mmlongembed.output.writer import write_tables as new\n"
                  "from mmlongembed.build import run_build\n"
                  "import mmlongembed.output as output\n"
                  "print(write_tables is new, callable(run_build), hasattr(output, 'no_such_name'))", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "False"]
    assert "mmlongembed.output.write_tables moved to mmlongembed.output.writer.write_tables" in result.stderr


@pytest.mark.parametrize("old", ["harness.mteb_retrieval", "mmlongembed.mmeb_samples"])
def test_python_m_on_a_documented_old_path_runs_the_moved_module(old, tmp_path):
    result = subprocess.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, cwd=tmp_path,
                            env=python_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:")
