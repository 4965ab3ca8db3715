"""A small OpenAI-compatible `/v1/embeddings` server for tests and offline demos.

Embeddings are deterministic hashed bags of words (lowercase \\w+) plus one feature per image
(its bytes' hash), L2-normalised: shared words give cosine similarity, so retrieval results
are meaningful. It accepts the OpenAI form (`input`: string or list), vLLM's chat form
(`messages` with text and image_url parts) and, at `/embeddings/multimodal`, the Doubao (Volcengine
Ark) multimodal form (`input`: a list of text and image_url parts; one embedding in `data`). It
counts requests so tests can see cache hits and retries, and can be told to fail the next requests
(`fail_next`).

    python -m harness.models.fake_server --port 8000
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIMENSION = 256
WORD = re.compile(r"\w+")


def _bucket(token: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(token, digest_size=8).digest(), "little") % DIMENSION


def embed_text_and_images(text: str, images: list[bytes] = ()) -> list[float]:
    vector = np.zeros(DIMENSION, dtype=np.float64)
    for word in WORD.findall(text.lower()):
        vector[_bucket(word.encode())] += 1.0
    for image in images:
        vector[_bucket(b"image:" + hashlib.sha256(image).digest())] += 4.0
    norm = np.linalg.norm(vector)
    return (vector / norm if norm else vector).tolist()


class _Handler(BaseHTTPRequestHandler):
    server: "FakeEmbeddingServer"

    def log_message(self, *args):  # keep test output clean
        pass

    def _reply(self, code: int, body: dict, headers: dict | None = None):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            return self._reply(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model"}]})
        self._reply(404, {"error": {"message": "not found"}})

    def do_POST(self):
        multimodal = self.path.rstrip("/").endswith("/embeddings/multimodal")  # the Doubao (Ark) API
        if not (multimodal or self.path.rstrip("/").endswith("/embeddings")):
            return self._reply(404, {"error": {"message": "not found"}})
        if self.server.api_key is not None and self.headers.get("Authorization") != f"Bearer {self.server.api_key}":
            return self._reply(401, {"error": {"message": "unauthorised"}})
        try:
            payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            inputs = self._multimodal_input(payload) if multimodal else self._inputs(payload)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return self._reply(400, {"error": {"message": f"bad request: {exc}"}})
        with self.server.lock:
            self.server.requests += 1
            self.server.received.append({"path": self.path, "payload": payload,
                                         "headers": {k.lower(): v for k, v in self.headers.items()}})
            failure = self.server.failures.pop(0) if self.server.failures else None
            if failure is None:
                self.server.inputs += len(inputs)
        if failure is not None:
            status, retry_after = failure
            return self._reply(status, {"error": {"message": f"scripted failure {status}"}},
                               {"Retry-After": retry_after} if retry_after is not None else None)
        if multimodal:  # one embedding for the whole input, as the Ark API answers
            text, images = inputs[0]
            return self._reply(200, {"object": "list", "model": payload.get("model", ""),
                                     "data": {"object": "embedding", "embedding": embed_text_and_images(text, images)},
                                     "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        data = [{"object": "embedding", "index": i, "embedding": embed_text_and_images(t, ims)}
                for i, (t, ims) in enumerate(inputs)]
        self._reply(200, {"object": "list", "data": data, "model": payload.get("model", ""),
                          "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    @staticmethod
    def _multimodal_input(payload) -> list[tuple[str, list[bytes]]]:
        """The Ark multimodal form: `input` a list of text and image_url (base64 data URL) parts."""
        text, images = [], []
        for part in payload["input"]:
            if part["type"] == "text":
                text.append(part["text"])
            elif part["type"] == "image_url":
                url = part["image_url"]["url"]
                if not url.startswith("data:image/"):
                    raise ValueError("image_url must be a base64 data URL")
                images.append(base64.b64decode(url.split(",", 1)[1]))
            else:
                raise ValueError(f"unknown part type {part['type']!r}")
        if not text and not images:
            raise ValueError("empty input")
        return [(" ".join(text), images)]

    @staticmethod
    def _inputs(payload) -> list[tuple[str, list[bytes]]]:
        if "messages" in payload:
            text, images = [], []
            for message in payload["messages"]:
                content = message["content"]
                for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                    if part["type"] == "text":
                        text.append(part["text"])
                    elif part["type"] == "image_url":
                        images.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
            return [(" ".join(text), images)]
        raw = payload["input"]
        raw = [raw] if isinstance(raw, str) else raw
        if not all(isinstance(x, str) for x in raw):
            raise ValueError("input must be strings")
        return [(x, []) for x in raw]


class FakeEmbeddingServer(ThreadingHTTPServer):
    """Start with `with FakeEmbeddingServer() as server: ... server.base_url ...` (port 0: any free one)."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, model_name: str = "fake-embedder",
                 api_key: str | None = None):
        super().__init__((host, port), _Handler)
        self.model_name = model_name
        self.api_key = api_key  # when set, requests without `Authorization: Bearer <key>` get 401
        self.received: list[dict] = []  # path, payload and headers of each counted request
        self.requests = 0
        self.inputs = 0  # inputs embedded (failed requests not counted)
        self.failures: list[tuple[int, str | None]] = []  # (status, Retry-After) of the next requests
        self.lock = threading.Lock()
        self._thread = None

    def fail_next(self, count: int, status: int = 503, retry_after: str | None = None) -> None:
        """The next ``count`` embedding requests get HTTP ``status`` (and ``Retry-After``, if given)."""
        with self.lock:
            self.failures.extend((status, retry_after) for _ in range(count))

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    args = parser.parse_args()
    server = FakeEmbeddingServer(args.host, args.port)
    print(f"serving {server.base_url}/embeddings")
    server.serve_forever()


if __name__ == "__main__":
    main()
