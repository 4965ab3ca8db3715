"""The persistent LLM answer cache: one SQLite file, one row per request.

The key is the sha256 of the sorted JSON of (backend, model, model revision, prompt hash,
messages, decoding parameters). Every reply is committed as soon as it arrives, so an
interrupted build resumes without repeating a call, and two builds that share a cache read the
same answers. A second column keys the same request without the backend, which is how
``--llm replay`` finds answers that any backend produced.

A request that failed in transport (HTTP 5xx, timeouts, connection errors: whatever the backend
still returned as a failure after its retries) is recorded too, in the table ``failures``, so that
``--llm replay`` walks the same failures and gives the same data and the same counts. A live
build never reads a failure (it asks again), and an answer to the same request replaces it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from mmlongembed.core.errors import UserError

CACHE_FILE = "llm-cache.sqlite3"


def _digest(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def keyed_messages(messages: list[dict]) -> list[dict]:
    """The messages as the cache keys and stores them: an image sent as a data URL is replaced by
    ``sha256:<digest of the URL>`` (the key still pins the exact bytes, the cache stays small).
    Text-only messages are returned unchanged."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
                if url.startswith("data:"):
                    digest = hashlib.sha256(url.encode("ascii")).hexdigest()
                    part = {**part, "image_url": {**part["image_url"], "url": f"sha256:{digest}"}}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def request_keys(*, backend: str, model: str, model_revision: str, prompt_hash: str, messages: list[dict],
                 decoding: dict) -> tuple[str, str]:
    """(key, replay lookup): the lookup is the key without the backend."""
    material = {"model": model, "model_revision": model_revision, "prompt_hash": prompt_hash,
                "messages": keyed_messages(messages), "decoding": decoding}
    return _digest({"backend": backend, **material}), _digest(material)


class LLMCache:
    def __init__(self, directory: str | Path):
        self.path = Path(directory) / CACHE_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, lookup TEXT NOT NULL, backend TEXT NOT NULL,"
                " model TEXT NOT NULL, prompt_hash TEXT NOT NULL, messages TEXT NOT NULL, reply TEXT NOT NULL,"
                " created REAL NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS answers_lookup ON answers (lookup)")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, lookup TEXT NOT NULL, backend TEXT NOT NULL,"
                " model TEXT NOT NULL, prompt_hash TEXT NOT NULL, messages TEXT NOT NULL, error TEXT NOT NULL,"
                " created REAL NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS failures_lookup ON failures (lookup)")
        except (OSError, sqlite3.Error) as error:
            raise UserError(f"cannot open the LLM cache {self.path}: {error}") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM answers WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def find_for_replay(self, lookup: str, backend: str = "") -> dict[str, str]:
        """Cached replies to this request, by the backend that produced them."""
        return self._by_backend("answers", "reply", lookup, backend)

    def failures_for_replay(self, lookup: str, backend: str = "") -> dict[str, str]:
        """Recorded transport failures of this request (the error reason), by backend."""
        return self._by_backend("failures", "error", lookup, backend)

    def _by_backend(self, table: str, column: str, lookup: str, backend: str) -> dict[str, str]:
        """backend -> ``column`` of the rows of ``table`` for this request (one backend, if named)."""
        query, args = f"SELECT backend, {column} FROM {table} WHERE lookup = ?", [lookup]
        if backend:
            query, args = query + " AND backend = ?", [lookup, backend]
        with self._lock:
            return dict(self._db.execute(query, args).fetchall())

    def put(self, key: str, lookup: str, *, backend: str, model: str, prompt_hash: str, messages: list[dict],
            reply: str) -> None:
        with self._lock:
            self._insert("answers", key, lookup, backend, model, prompt_hash, messages, reply)
            self._db.execute("DELETE FROM failures WHERE key = ?", (key,))

    def put_failure(self, key: str, lookup: str, *, backend: str, model: str, prompt_hash: str,
                    messages: list[dict], error: str) -> None:
        with self._lock:
            self._insert("failures", key, lookup, backend, model, prompt_hash, messages, error)

    def _insert(self, table: str, key: str, lookup: str, backend: str, model: str, prompt_hash: str,
                messages: list[dict], value: str) -> None:
        """One row of ``table`` (answers: the reply; failures: the error), under the lock."""
        self._db.execute(
            f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, lookup, backend, model, prompt_hash,
             json.dumps(keyed_messages(messages), ensure_ascii=False), value, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
