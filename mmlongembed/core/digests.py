"""sha256 fingerprints: of a file, and of a piece of content (text as UTF-8, or bytes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

SHORT_DIGITS = 16  # a short fingerprint: the first 64 bits, plenty to tell a build's segments apart


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def short_sha256(data: bytes | str) -> str:
    """The first ``SHORT_DIGITS`` hex digits of ``content_sha256`` (records of removed or placed segments)."""
    return content_sha256(data)[:SHORT_DIGITS]
