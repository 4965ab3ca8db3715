"""The benchmark corpus: every text in the shared sample data (or a directory given)."""

from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT = Path(os.environ.get("MMLE_SHARED_DATA", Path(__file__).resolve().parent.parent.parent / "shared" / "data"))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def load_texts(root: Path = DEFAULT) -> list[str]:
    if not root.exists():
        raise SystemExit(f"bench corpus {root} not found; set MMLE_SHARED_DATA or pass --corpus")
    texts: list[str] = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".txt", ".raw", ".csv", ".md"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    texts.extend(_strings(json.loads(line)))
        elif path.suffix == ".json":
            texts.extend(_strings(json.loads(path.read_text(encoding="utf-8"))))
    return [t for t in texts if t.strip()]
