"""What the rebuild tests compare: a build folder's files as a second run would find them."""

from __future__ import annotations

from pathlib import Path

from mmlongembed.core.digests import file_sha256


def files_state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder`` (path relative to it) -> (sha256, mtime in ns): a run that
    writes nothing leaves it unchanged, even one that rewrites a file with the same bytes."""
    return {path.relative_to(folder).as_posix(): (file_sha256(path), path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}
