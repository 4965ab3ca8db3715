"""A real OpenAI-compatible HTTP server on loopback, for tests and offline demos.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` from a ``ThreadingHTTPServer``
on 127.0.0.1 (port 0: the OS picks a free one). Replies come from a table of canned replies
(matched by a substring of the first user message; a list is served in order, its last item
repeated) or from a responder function. It can be told to fail (an HTTP status), stall (sleep
before answering) or answer with malformed JSON, and it counts what it saw: requests, the most
requests in flight at once, authorisation headers and request bodies.

Run it standing alone (prints its base URL, serves until interrupted)::

    python -m mmlongembed.llm.fake_server --audit --malformed-every 7 --broken-every 23

``--audit`` answers the query-audit prompt with a fixed rule (below), so a build can run
``--llm openai --llm-base-url <URL>`` end to end without a GPU. Domain stand-ins serve themselves
through this server (``python -m mmlongembed.training.evialign``, ``python -m mmlongembed.llm.fake_captions``):
this module knows no domain.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Canned:
    """One scripted answer: a reply text, or an HTTP error status, or a raw (non-JSON) body,
    optionally after a delay."""

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    raw_body: bytes | None = None
    retry_after: str | None = None


Responder = Callable[[dict], "str | Canned"]


class FakeOpenAIServer:
    def __init__(self, replies: dict[str, "str | Canned | list"] | None = None, responder: Responder | None = None,
                 model: str = "fake-model"):
        self.replies = {k: (v if isinstance(v, list) else [v]) for k, v in (replies or {}).items()}
        self._served: dict[str, int] = {}
        self.responder = responder
        self.model = model
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict] = []
        self.authorizations: list[str | None] = []
        self._fail_next: list[Canned] = []
        self.stall_seconds = 0.0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------
    def fail_next(self, count: int, status: int = 503, retry_after: str | None = None) -> None:
        """The next ``count`` requests get HTTP ``status`` (whatever they ask)."""
        with self._lock:
            self._fail_next.extend(Canned(status=status, retry_after=retry_after) for _ in range(count))

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeOpenAIServer":
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- answering -----------------------------------------------------------------------
    def answer(self, body: dict) -> Canned:
        with self._lock:
            if self._fail_next:
                return self._fail_next.pop(0)
        user = first_user_message(body)
        for needle, answers in self.replies.items():
            if needle in user:
                with self._lock:
                    index = self._served.get(needle, 0)
                    self._served[needle] = index + 1
                item = answers[min(index, len(answers) - 1)]
                return item if isinstance(item, Canned) else Canned(content=item)
        if self.responder is not None:
            item = self.responder(body)
            return item if isinstance(item, Canned) else Canned(content=item)
        return Canned(status=404, raw_body=b'{"error": {"message": "no canned reply"}}')

    def serve(self, body: dict, authorization: str | None) -> tuple[int, bytes, str | None]:
        """(status, payload, Retry-After) for one chat completion request, counted as it is seen."""
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.bodies.append(body)
            self.authorizations.append(authorization)
        # The request leaves the in-flight count before its answer is written: once the client
        # reads the answer it may send its next request, which must not find this one counted.
        try:
            canned = self.answer(body)
            delay = canned.delay + self.stall_seconds
            if delay:
                time.sleep(delay)
            if canned.raw_body is not None:
                status, payload = canned.status, canned.raw_body
            elif canned.status != 200:
                status = canned.status
                payload = json.dumps({"error": {"message": f"scripted failure {canned.status}"}}).encode()
            else:
                status, payload = 200, json.dumps(completion_body(canned.content or "", self.model)).encode()
        finally:
            with self._lock:
                self.in_flight -= 1
        return status, payload, canned.retry_after


def first_user_message(body: dict) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def completion_body(content: str, model: str) -> dict:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _make_handler(server: FakeOpenAIServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet in tests
            pass

        def _send(self, status: int, payload: bytes, retry_after: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to do

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": server.model, "object": "model"}]}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                self._send(400, b'{"error": {"message": "body is not JSON"}}')
                return
            self._send(*server.serve(body, self.headers.get("Authorization")))

    return Handler


# -- a responder for the query-audit prompt (stand-alone demos and build tests) --------------

_QUESTION = re.compile(r"^(?:Question|QUERY): (.*)$", re.MULTILINE)


def _stable_bucket(text: str, modulus: int) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % modulus


def audit_responder(malformed_every: int = 0, broken_every: int = 0) -> Responder:
    """Answers the query-audit prompt (either prompt version: the paper's fields for the paper's
    prompt, ``valid``/``reason`` for v1) with a fixed rule that differs from the offline rules:
    a question is valid when it has at least 8 words and names something (a capitalised word
    after the first). Chosen by the question's hash (not by arrival order, so concurrency does
    not change results): every ``malformed_every``-th question first gets invalid JSON and is
    answered properly after the repair turn; every ``broken_every``-th always gets a reply
    missing the verdict key (so it is rejected)."""

    def respond(body: dict) -> str:
        message = first_user_message(body)
        match = _QUESTION.search(message)
        if not match:
            return "I can only audit questions."
        paper = match.group(0).startswith("QUERY:")
        verdict_key = "is_valid" if paper else "valid"
        question = match.group(1).strip()
        repairing = len(body.get("messages", [])) > 2
        if broken_every and _stable_bucket(question, broken_every) == 0:
            return json.dumps({"reason": "forgot the verdict"})
        if malformed_every and _stable_bucket(question, malformed_every) == 1 and not repairing:
            return '{"%s": true, "reason": "unterminated' % verdict_key
        words = question.split()
        names = [w.strip("?,.") for w in words[1:] if w[:1].isupper()]
        valid = len(words) >= 8 and bool(names)
        reason = "specific, anchored question" if valid else "too short or names nothing specific"
        if not paper:
            return json.dumps({"valid": valid, "reason": reason})
        return json.dumps({"is_valid": valid, "strong_linked_anchor": names[0] if names else "",
                           "anchor_type": "entity", "potential_ambiguity": "Low" if valid else "High",
                           "reason": reason})

    return respond


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audit", action="store_true", help="answer the query-audit prompt (see audit_responder)")
    parser.add_argument("--malformed-every", type=int, default=0)
    parser.add_argument("--broken-every", type=int, default=0)
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args(argv)
    responder = audit_responder(args.malformed_every, args.broken_every) if args.audit else None
    return serve_until_interrupted(FakeOpenAIServer(responder=responder, model=args.model).start())


def serve_until_interrupted(server: FakeOpenAIServer) -> int:
    """Print the started server's base URL and serve until Ctrl-C (the stand-alone mode)."""
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    # run the importable module's main, so responders that import this module (for `Canned`)
    # share its classes with the server (as `python -m`, this file is also `__main__`)
    from mmlongembed.llm.fake_server import main as _main

    raise SystemExit(_main())
