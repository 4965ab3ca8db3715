"""manifest.json: everything that made a build, so it can be audited and rebuilt."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Iterable

from mmlongembed import __version__
from mmlongembed.core.digests import file_sha256
from mmlongembed.output.layout import LAYOUT_VERSION

REPO_ROOT = Path(__file__).resolve().parents[2]
# Whole words only: `hf_token` or `api_key` is a secret, `needle_tokens` a length.
SECRET_FIELD = re.compile(r"(^|_)(token|api_key|password|secret)$")


def files_identity(paths: Iterable[Path], root: Path | None = None) -> list[dict]:
    out = []
    for path in sorted(Path(p) for p in paths):
        name = str(path.relative_to(root)) if root else path.name
        out.append({"file": name, "sha256": file_sha256(path), "bytes": path.stat().st_size})
    return out


def toolkit_identity() -> dict:
    commit, dirty = "unknown", None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = bool(subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=10, check=True,
        ).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return {"name": "mmlongembed", "version": __version__, "git_commit": commit, "git_dirty": dirty,
            "layout_version": LAYOUT_VERSION}


def public_config(config) -> dict:
    """The resolved config, with anything secret-looking left out."""
    values = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    return {k: v for k, v in sorted(values.items()) if not SECRET_FIELD.search(k.lower())}
