"""The benchmark corpus: every text in the shared sample data (or a directory given)."""

from __future__ import annotations

import os
from pathlib import Path

from mmlongembed.testing import texts_under

DEFAULT = Path(os.environ.get("MMLE_SHARED_DATA", Path(__file__).resolve().parent.parent.parent / "shared" / "data"))


def load_texts(root: Path = DEFAULT) -> list[str]:
    if not root.exists():
        raise SystemExit(f"bench corpus {root} not found; set MMLE_SHARED_DATA or pass --corpus")
    return texts_under(root)
