"""Prompts: one versioned YAML file each in ``prompts/``, with its output contract.

Prompt versions (``--llm-prompt-version``): ``paper`` (the default, ``prompts/<name>.yaml``) has
exactly the inputs, rules and output fields of the paper's Tables 8-10; ``v1``
(``prompts/v1/<name>.yaml``) is the toolkit's first wording, kept selectable.

A prompt file holds the system text, a user template with named ``{fields}``, and the contract
its reply must meet: a JSON schema (``output.type: json``) or rules for plain text
(``output.type: text``: not empty, at most ``max_chars``, none of the ``forbid`` patterns).
The prompt hash covers everything that can change a reply (texts, fields, contract, version),
so it pins the prompt in the manifest, the card and the LLM cache key.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from mmlongembed.core.errors import UserError

PROMPTS_DIR = Path(__file__).resolve().parent.parent.parent / "prompts"
# version name -> subdirectory of the prompts directory ("" = the directory itself)
PROMPT_VERSIONS = {"paper": "", "v1": "v1"}
DEFAULT_PROMPT_VERSION = "paper"


@dataclass(frozen=True)
class OutputProblem:
    """Why a reply breaks its prompt's contract: a short reason (counted) and a detail (fed back)."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    role: str
    system: str
    user: str
    fields: tuple[str, ...]
    output: dict = field(hash=False, compare=False)
    description: str = ""
    variant: str = DEFAULT_PROMPT_VERSION  # the prompt version it belongs to (``PROMPT_VERSIONS``)

    @property
    def hash(self) -> str:
        material = json.dumps(
            {"name": self.name, "version": self.version, "system": self.system, "user": self.user,
             "fields": list(self.fields), "output": self.output},
            sort_keys=True, ensure_ascii=False,
        )
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]

    @property
    def json_schema(self) -> dict | None:
        return self.output.get("schema") if self.output.get("type") == "json" else None

    def render(self, values: dict, images: Sequence[bytes] = ()) -> list[dict]:
        """Chat messages for one record. Every declared field must be given, and no other.
        With ``images`` (encoded bytes), the user turn is OpenAI-style content parts: the images
        as data URLs, then the text."""
        missing = set(self.fields) - set(values)
        extra = set(values) - set(self.fields)
        if missing or extra:
            raise ValueError(f"prompt {self.name}: missing fields {sorted(missing)}, unexpected {sorted(extra)}")
        user = self.user.format_map({k: str(v) for k, v in values.items()})
        content: str | list[dict] = user
        if images:
            content = [*({"type": "image_url", "image_url": {"url": image_data_url(image)}} for image in images),
                       {"type": "text", "text": user}]
        return [{"role": "system", "content": self.system}, {"role": "user", "content": content}]

    def parse(self, reply: str) -> tuple[object, OutputProblem | None]:
        """The reply as the step's value (a dict for JSON prompts, the stripped text otherwise),
        or the contract problem that makes it unusable. With ``output.strip_reasoning`` the
        model's reasoning block is removed first (``strip_reasoning``)."""
        if self.output.get("strip_reasoning"):
            reply, problem = strip_reasoning(reply)
            if problem is not None:
                return None, problem
        if self.output.get("type") == "json":
            return _parse_json(reply, self.json_schema or {})
        return _parse_text(reply, self.output.get("rules", {}))


_ANSWER = re.compile(r"^\s*<answer>(.*?)(?:</answer>\s*)?$", flags=re.DOTALL)
_BOX = re.compile(r"<\|(?:begin|end)_of_box\|>")


def strip_reasoning(reply: str) -> tuple[str, OutputProblem | None]:
    """A thinking model's answer without its reasoning: everything up to the first ``</think>``
    is removed (chat templates that open ``<think>`` in the prompt leave only the closing tag in
    the reply), then an ``<answer>...</answer>`` wrapper and GLM-4.1V's ``<|begin_of_box|>`` /
    ``<|end_of_box|>`` markers are unwrapped. A reasoning block that never closes (the model ran
    out of tokens while thinking) is a contract problem."""
    text = reply or ""
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    if "<think>" in text or "</think>" in text:
        return "", OutputProblem("unclosed_reasoning", "the reasoning block is not closed before the answer")
    answer = _ANSWER.match(text)
    if answer:
        text = answer.group(1)
    return _BOX.sub("", text).strip(), None


def image_data_url(image: bytes) -> str:
    """``data:<mime>;base64,...`` for encoded image bytes (PNG, JPEG, GIF or WebP by signature)."""
    mime = ("image/png" if image.startswith(b"\x89PNG") else "image/gif" if image.startswith(b"GIF8")
            else "image/webp" if image[8:12] == b"WEBP" else "image/jpeg")
    return f"data:{mime};base64," + base64.b64encode(image).decode("ascii")


def _parse_json(reply: str, schema: dict) -> tuple[object, OutputProblem | None]:
    text = (reply or "").strip()
    # Models without structured output sometimes wrap the object in a Markdown fence; the
    # object itself is what the contract is about, so the fence is tolerated.
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1)
    if not text:
        return None, OutputProblem("empty_output", "the reply was empty")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, OutputProblem("invalid_json", f"the reply is not valid JSON ({error.msg})")
    problem = check_schema(value, schema, "$")
    return (value, None) if problem is None else (None, problem)


def check_schema(value, schema: dict, where: str) -> OutputProblem | None:
    """The subset of JSON Schema our prompts use: type, properties, required,
    additionalProperties, enum, minLength, items."""
    kind = schema.get("type")
    type_ok = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        None: lambda v: True,
    }
    if kind not in type_ok:
        raise ValueError(f"schema type {kind!r} is not supported")
    if not type_ok[kind](value):
        return OutputProblem("wrong_type", f"{where} must be of type {kind}")
    if "enum" in schema and value not in schema["enum"]:
        return OutputProblem("not_allowed_value", f"{where} must be one of {schema['enum']}")
    if kind == "string" and len(value.strip()) < schema.get("minLength", 0):
        return OutputProblem("empty_value", f"{where} must not be empty")
    if kind == "object":
        for key in schema.get("required", []):
            if key not in value:
                return OutputProblem("missing_key", f"{where} lacks the key {key!r}")
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            unknown = sorted(set(value) - set(properties))
            if unknown:
                return OutputProblem("unexpected_key", f"{where} has keys the contract does not allow: {unknown}")
        for key, sub in properties.items():
            if key in value:
                problem = check_schema(value[key], sub, f"{where}.{key}")
                if problem:
                    return problem
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            problem = check_schema(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def _parse_text(reply: str, rules: dict) -> tuple[object, OutputProblem | None]:
    text = (reply or "").strip()
    if not text:
        return None, OutputProblem("empty_output", "the reply was empty")
    max_chars = rules.get("max_chars")
    if max_chars and len(text) > max_chars:
        return None, OutputProblem("too_long", f"the reply has {len(text)} characters, at most {max_chars} allowed")
    for rule, pattern in rules.get("forbid", {}).items():
        if re.search(pattern, text, flags=re.IGNORECASE):
            return None, OutputProblem(f"rule:{rule}", f"the reply breaks the rule {rule!r}")
    return text, None


@functools.lru_cache(maxsize=None)
def load_prompt(name: str, directory: str | None = None, version: str | None = None) -> Prompt:
    """The prompt ``name`` of prompt version ``version`` (default: the paper's)."""
    version = version or DEFAULT_PROMPT_VERSION
    if version not in PROMPT_VERSIONS:
        raise UserError(f"unknown prompt version {version!r}; choose from {', '.join(PROMPT_VERSIONS)}")
    path = Path(directory) if directory else PROMPTS_DIR
    path = path / PROMPT_VERSIONS[version] / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"no prompt file {path}")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        prompt = Prompt(
            name=data["name"], version=int(data["version"]), role=data.get("role", ""),
            system=data["system"], user=data["user"], fields=tuple(data["fields"]), output=data["output"],
            description=data.get("description", ""), variant=version,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise UserError(f"prompt file {path} is malformed: {error}") from None
    if prompt.name != name:
        raise UserError(f"prompt file {path} names itself {prompt.name!r}")
    used = {f for _, f, _, _ in string.Formatter().parse(prompt.user) if f}
    if used != set(prompt.fields):
        raise UserError(f"prompt {name}: template uses {sorted(used)} but declares {sorted(prompt.fields)}")
    if prompt.output.get("type") not in ("json", "text"):
        raise UserError(f"prompt {name}: output.type must be json or text")
    return prompt
