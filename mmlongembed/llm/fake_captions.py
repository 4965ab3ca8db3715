"""A loopback stand-in for the two LLM steps of the temporal builders: translation and caption
rewrite, served by ``FakeOpenAIServer`` (tests, offline demos of ``youkudc``).

It tells the steps apart by the role their system prompt names ("Translator" or "Caption
Editor", the paper's Tables 10 and 9), so it does not depend on the rest of the prompt wording:

- translation: the Chinese text of the user message (after its label, e.g. ``Text:``) looked up
  in a table of known translations; unknown text gets a placeholder sentence, never Chinese;
- rewrite: the captions of the user message (numbered lines or concatenated sentences) joined
  as "To begin, a. Next, b. In the end, c." (deliberately not the ``--llm none`` template's
  wording, so tests can tell the paths apart).

Stand-alone, for ``make build-dataset DATASET=youkudc ... BUILD_ARGS="--llm openai ..."``::

    python -m mmlongembed.llm.fake_captions --translations translations.json
    # prints http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re

from mmlongembed.llm.fake_server import FakeOpenAIServer, Responder, first_user_message, serve_until_interrupted

_LABEL = re.compile(r"^\s*[A-Za-z][A-Za-z ()]*:\s*", re.MULTILINE)
_NUMBER = re.compile(r"^\s*\d+[.)]\s*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _body_text(message: str) -> str:
    """The payload of a one-field user message: the message without its leading label."""
    return _LABEL.sub("", message, count=1).strip()


def _captions(message: str) -> list[str]:
    text = _body_text(message)
    lines = [_NUMBER.sub("", line).strip() for line in text.splitlines() if line.strip()]
    if len(lines) == 1:
        lines = [s for s in re.split(r"(?<=[.!?])\s+", lines[0]) if s]
    return [line.rstrip(".!?") for line in lines]


def caption_responder(translations: dict[str, str] | None = None) -> Responder:
    table = {k.strip(): v for k, v in (translations or {}).items()}

    def respond(body: dict) -> str:
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        user = first_user_message(body)
        if "Translator" in system:
            text = _body_text(user)
            if text in table:
                return table[text]
            return f"Untranslated segment {hashlib.sha256(text.encode()).hexdigest()[:8]}."
        if "Caption Editor" in system:
            captions = [c for c in _captions(user) if c and not _CJK.search(c)]
            if not captions:
                return "Nothing happens."
            words = ["To begin"] + ["Next"] * (len(captions) - 2) + ["In the end"] if len(captions) > 1 else [""]
            parts = [f"{w}, {c[0].lower() + c[1:]}." if w else f"{c}." for w, c in zip(words, captions)]
            return " ".join(parts)
        return "I only translate and rewrite captions."

    return respond


def start_caption_server(translations: dict[str, str] | None = None) -> FakeOpenAIServer:
    """A started server (daemon thread, 127.0.0.1, a free port) answering both steps."""
    return FakeOpenAIServer(responder=caption_responder(translations)).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--translations", default=None, help="JSON object {Chinese text: English translation}")
    args = parser.parse_args(argv)
    table = json.loads(open(args.translations, encoding="utf-8").read()) if args.translations else {}
    return serve_until_interrupted(start_caption_server(table))


if __name__ == "__main__":
    raise SystemExit(main())
