"""Embedding cache keyed by (model identity incl. revision and settings, input hash), in SQLite:
one vector per input, or for multi-vector models one token matrix per input.

Each batch is committed as soon as it is embedded, so an interrupted run resumes where it
stopped, and re-scoring or adding a pool embeds only inputs never seen before.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

from harness.scoring.data import Item


def add_cache_arguments(parser) -> None:
    """``--cache-dir`` and ``--no-cache``: every command that embeds (``mmle score``, the mteb
    path) reads and fills the same cache by default."""
    parser.add_argument("--cache-dir", default=None,
                        help="embedding cache directory (default $MMLE_CACHE or ~/.cache/mmlongembed/embeddings); "
                             "re-runs and interrupted runs reuse what is there")
    parser.add_argument("--no-cache", action="store_true", help="embed everything afresh and store nothing")


def cache_directory(args) -> Path | None:
    """The embedding cache the parsed ``add_cache_arguments`` options name (None: no cache)."""
    if args.no_cache:
        return None
    return Path(args.cache_dir or os.environ.get("MMLE_CACHE") or Path.home() / ".cache" / "mmlongembed" / "embeddings")


def model_key(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def input_key(item: Item) -> str:
    """Hash of everything that reaches the model: role, instruction, text, image bytes (not the id)."""
    digest = hashlib.sha256()
    digest.update(b"Q" if item.is_query else b"D")
    for part in (item.instruction, item.text):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little") + data)
    for image in item.images:
        digest.update(hashlib.sha256(image).digest())
    return digest.hexdigest()


class EmbeddingCache:
    """``directory`` None (``--no-cache``): a private folder for this run, removed on ``close``, so that
    the executors (a process per device, Ray's driver) hand vectors back the same way as with a cache."""

    def __init__(self, directory: str | Path | None):
        self._scratch = None
        if directory is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="mmle-embeddings-")
            directory = self._scratch.name
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # a device's process writes its calls while the others read and write theirs: WAL, and a wait on a lock
        self.connection = sqlite3.connect(str(self.directory / "embeddings.sqlite"), timeout=600)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT, input TEXT, truncated INTEGER, "
            "dim INTEGER, vector BLOB, PRIMARY KEY (model, input))")
        # multi-vector (late interaction) models: one [tokens, dim] matrix per input
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS token_matrices (model TEXT, input TEXT, truncated INTEGER, "
            "rows INTEGER, dim INTEGER, matrix BLOB, PRIMARY KEY (model, input))")
        self.connection.commit()

    def _select(self, query: str, model: str, keys: list[str]):
        """The rows of ``query`` (ending in `input IN`) for ``keys``, in chunks: SQLite caps the
        number of bound parameters."""
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            yield from self.connection.execute(f"{query} ({','.join('?' * len(chunk))})", [model, *chunk])

    @property
    def persistent(self) -> bool:
        """False for a run's private cache (``--no-cache``): nothing in it outlives the run."""
        return self._scratch is None

    def cached_keys(self, model: str, keys: list[str]) -> set[str]:
        """Which of ``keys`` have a vector of ``model`` stored."""
        if self.connection is None or not keys:
            return set()
        return {key for (key,) in self._select("SELECT input FROM embeddings WHERE model = ? AND input IN", model, keys)}

    def get_many(self, model: str, keys: list[str]) -> dict[str, tuple[np.ndarray, bool]]:
        if self.connection is None or not keys:
            return {}
        rows = self._select("SELECT input, truncated, vector FROM embeddings WHERE model = ? AND input IN", model, keys)
        return {key: (np.frombuffer(blob, dtype=np.float32), bool(truncated)) for key, truncated, blob in rows}

    def get_matrices(self, model: str, keys: list[str]) -> dict[str, tuple[np.ndarray, bool]]:
        """{input key: (token matrix [rows, dim], truncated)} of the keys cached for ``model``."""
        if self.connection is None or not keys:
            return {}
        rows = self._select("SELECT input, truncated, rows, dim, matrix FROM token_matrices WHERE model = ? "
                            "AND input IN", model, keys)
        return {key: (np.frombuffer(blob, dtype=np.float32).reshape(n, dim), bool(truncated))
                for key, truncated, n, dim, blob in rows}

    def put_matrices(self, model: str, entries: list[tuple[str, np.ndarray, bool]]) -> None:
        if self.connection is None or not entries:
            return
        matrices = [(key, np.ascontiguousarray(matrix, dtype=np.float32), truncated)
                    for key, matrix, truncated in entries]
        self.connection.executemany(
            "INSERT OR REPLACE INTO token_matrices VALUES (?, ?, ?, ?, ?, ?)",
            [(model, key, int(truncated), m.shape[0], m.shape[1], m.tobytes()) for key, m, truncated in matrices])
        self.connection.commit()

    def put_many(self, model: str, entries: list[tuple[str, np.ndarray, bool]]) -> None:
        if self.connection is None or not entries:
            return
        self.connection.executemany(
            "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?)",
            [(model, key, int(truncated), len(vec), np.asarray(vec, dtype=np.float32).tobytes())
             for key, vec, truncated in entries])
        self.connection.commit()

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
