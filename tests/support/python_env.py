"""Subprocesses of the tests run this checkout's code from the test's own temporary directory."""

from __future__ import annotations

import os

from tests.support.realdata import REPO_ROOT


def python_env(env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) with this checkout first on PYTHONPATH, so
    `python -m mmlongembed.cli` imports it whatever the working directory."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env
