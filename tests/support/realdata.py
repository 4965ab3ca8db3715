"""Locating ../shared/data for the real-data tests.

In CI (CI=true) a real-data test must run, so missing data fails it; elsewhere it is skipped
with the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir(*parts: str) -> Path:
    root = Path(os.environ.get("MMLE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    path = root.joinpath(*parts)
    if not path.exists():
        message = f"real-data test needs {path} (the shared sample data)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
