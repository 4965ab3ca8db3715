"""Sources that are generated or test-written, not real: a file named SYNTHETIC says so (what the
test fixtures and `mmle demo-sources` leave), and every build records it (manifest `synthetic`;
`mmle push` refuses such a build without --allow-synthetic)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

SYNTHETIC_MARKER = "SYNTHETIC"  # a file of this name in a sources root marks generated or test-written sources


def synthetic_marker(root: str | Path | None, files: Iterable[Path] = ()) -> str:
    """The text of the first SYNTHETIC marker file in ``root`` or in any folder between it and one
    of ``files`` (what the build reads), so demo folders copied into a larger tree stay marked:
    what was generated, and by what; "" where there is none: the sources are real."""
    if not root:
        return ""
    root = Path(root).resolve()
    folders = [root]
    for file in files:
        for folder in Path(file).resolve().parents:
            if folder == root or root not in folder.parents:
                break
            folders.append(folder)
    for folder in dict.fromkeys(folders):
        marker = folder / SYNTHETIC_MARKER
        if marker.is_file():
            return (marker.read_text(encoding="utf-8", errors="replace").strip()
                    or "synthetic sources (SYNTHETIC marker)")
    return ""
