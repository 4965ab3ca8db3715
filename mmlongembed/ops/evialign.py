"""EviAlign evidence targets: the units, their boundary tokens, and the 2x3 factorial, as pure functions.

A target is K evidence spans, each opened by its textual role label (``[Entity] ...``) and closed
by its boundary token: ``span_1 <ENT> span_2 <ATT> ... span_K <SUM>`` (paper eq. 4, §3.2). The
factorial of paper §4.3 / Table 2 is built from the same spans:

- *Semantic*: slot k holds unit k (fixed role -> token).
- *Mixed*: slot k holds unit ``perm[k]`` (spans move with their labels; the tokens stay in place);
  ``perm`` is one seeded non-identity permutation per input (``ops.permutations``).
- *Boundary* readout: the tokens at the unit ends; *Trailing*: the same target, only the last
  token is read; *Distributed*: the K tokens inserted into X (the spans alone, in the condition's
  order) after the first ``floor(k*T/K)`` ids of X, k = 1..K, T = len(X) (Table 6's U(X)).

Everything works on token ids (each span encoded on its own, so no BPE merge crosses a span
boundary); the functions take the ids and never a tokenizer. No I/O, explicit generators.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class EvidenceUnit:
    key: str  # the teacher's JSON key
    label: str  # the textual role label, written as "[Label]" at the head of the span
    token: str  # the boundary token that closes the span
    holds: str  # what the unit holds (paper §3.2), for the teacher prompt


ENTITY = EvidenceUnit("entity", "Entity", "<ENT>",
                      "the main objects or concepts, each with the properties that identify it")
ATTRIBUTE = EvidenceUnit("attribute", "Attribute", "<ATT>",
                         "scene-level characteristics: setting, style, colours, lighting, layout, overall condition")
RELATION = EvidenceUnit("relation", "Relation", "<REL>",
                        "actions, interactions and spatial relations between the entities")
DETAIL = EvidenceUnit("detail", "Detail", "<DET>",
                      "locally discriminative cues: visible text, numbers, signs, textures, patterns, small parts")
CONTEXT = EvidenceUnit("context", "Context", "<CTX>",
                       "the scene context: where and in what situation the content takes place")
EMOTION = EvidenceUnit("emotion", "Emotion", "<EMO>",
                       "the emotional tone the input conveys, or that it is neutral")
SUMMARY = EvidenceUnit("summary", "Summary", "<SUM>",
                       "a retrieval-focused global description of the whole input in one or two sentences")

# K -> units in target order, the paper's K ablation (§4.4): "They respectively use Entity;
# Entity/Attribute/Relation; the default five units; and two additional units, Context (scene
# context) and Emotion (emotional tone)". K=5 is the main setting; K=7 places Context and Emotion
# between Detail and Summary (the design notes' reading of the paper), so Summary stays last.
# K=1 and K=3 have no Summary: Trailing reads their last token, the one closing the whole evidence.
UNIT_SETS: dict[int, tuple[EvidenceUnit, ...]] = {
    1: (ENTITY,),
    3: (ENTITY, ATTRIBUTE, RELATION),
    5: (ENTITY, ATTRIBUTE, RELATION, DETAIL, SUMMARY),
    7: (ENTITY, ATTRIBUTE, RELATION, DETAIL, CONTEXT, EMOTION, SUMMARY),
}
ALL_UNITS = UNIT_SETS[7]
ALL_TOKENS = tuple(u.token for u in ALL_UNITS)


def units_for(k: int) -> tuple[EvidenceUnit, ...]:
    if k not in UNIT_SETS:
        raise ValueError(f"K must be one of {sorted(UNIT_SETS)}, got {k}")
    return UNIT_SETS[k]


class TargetFormatError(ValueError):
    """A target or a teacher's units break the format; ``reason`` is the counted skip reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


_WHITESPACE = re.compile(r"\s+")
_LABEL = re.compile(r"^\s*\[(%s)\]\s*[:\-]?\s*" % "|".join(u.label for u in ALL_UNITS), re.IGNORECASE)
_MARKUP = re.compile(r"<\s*/?\s*(think|answer)\s*>|<\|[a-z_]+\|>", re.IGNORECASE)


def clean_unit_text(text: str) -> str:
    """One unit's content as the teacher wrote it, normalised: whitespace runs become one space,
    edges stripped, and a role label the teacher repeated at its head removed (the builder
    writes the label itself)."""
    text = _WHITESPACE.sub(" ", text).strip()
    return _LABEL.sub("", text, count=1).strip()


def unit_spans(units: Sequence[EvidenceUnit], contents: dict) -> list[str]:
    """The spans ``[Label] content`` in unit order, or a TargetFormatError naming what is wrong
    (an empty unit, a boundary token, role label or reasoning markup inside a unit)."""
    spans = []
    for unit in units:
        value = contents.get(unit.key)
        if not isinstance(value, str):
            raise TargetFormatError("missing_unit", unit.key)
        content = clean_unit_text(value)
        if not content:
            raise TargetFormatError("empty_unit", unit.key)
        if any(token in content for token in ALL_TOKENS):
            raise TargetFormatError("boundary_token_in_unit", unit.key)
        if any(f"[{u.label}]".lower() in content.lower() for u in ALL_UNITS):
            raise TargetFormatError("role_label_in_unit", unit.key)
        if _MARKUP.search(content):
            raise TargetFormatError("markup_in_unit", unit.key)
        spans.append(f"[{unit.label}] {content}")
    return spans


def assemble(spans: Sequence[str], tokens: Sequence[str]) -> str:
    """``span_1 tok_1 span_2 tok_2 ... span_K tok_K`` (no separator: the token closes its span)."""
    if len(spans) != len(tokens):
        raise ValueError(f"{len(spans)} spans for {len(tokens)} tokens")
    return "".join(span + token for span, token in zip(spans, tokens))


def parse_target(text: str, units: Sequence[EvidenceUnit], labels_in_order: bool = True) -> list[str]:
    """The K spans of a target text. Exactly K boundary tokens, each once, in unit order, each
    after a non-empty span that starts with a role label, nothing after the last one; with
    ``labels_in_order`` (Semantic) span k must carry unit k's label, else (Mixed) any label of
    the unit set, each once."""
    tokens = [u.token for u in units]
    found = [(m.start(), m.group()) for m in re.finditer("|".join(map(re.escape, ALL_TOKENS)), text)]
    if [t for _, t in found] != tokens:
        seen = Counter(t for _, t in found)
        if any(seen[t] > 1 for t in seen):
            raise TargetFormatError("duplicate_token")
        if any(t not in tokens for t in seen):
            raise TargetFormatError("foreign_token")
        raise TargetFormatError("missing_token" if len(found) < len(tokens) else "token_order")
    spans, start = [], 0
    for position, token in found:
        spans.append(text[start:position])
        start = position + len(token)
    if text[start:]:
        raise TargetFormatError("text_after_last_token")
    labels = []
    for span in spans:
        match = re.match(r"\[([A-Za-z]+)\] \S", span)
        if not match:
            raise TargetFormatError("span_without_label")
        labels.append(match.group(1))
    expected = [u.label for u in units]
    if (labels != expected) if labels_in_order else (sorted(labels) != sorted(expected)):
        raise TargetFormatError("label_order" if labels_in_order else "label_set")
    return spans


# -- the factorial ---------------------------------------------------------------------------------

def permute(spans: Sequence, perm: Sequence[int]) -> list:
    """Slot k holds item ``perm[k]``."""
    return [spans[i] for i in perm]


def boundary_ids(span_ids: Sequence[Sequence[int]], token_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """(ids, readout positions): each span's ids followed by its slot's token id."""
    ids, positions = [], []
    for span, token in zip(span_ids, token_ids, strict=True):
        ids.extend(span)
        positions.append(len(ids))
        ids.append(token)
    return ids, positions


def distributed_positions(t: int, k: int) -> list[int]:
    """0-based positions of the K inserted tokens in a sequence of T ids of X: token k follows
    ``floor(k*T/K)`` ids of X and the k - 1 tokens before it."""
    return [(j * t) // k + j - 1 for j in range(1, k + 1)]


def insert_distributed(x_ids: Sequence[int], token_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """(ids, readout positions): token k inserted after the first ``floor(k*T/K)`` ids of X."""
    k, t = len(token_ids), len(x_ids)
    ids, taken = [], 0
    for j, token in enumerate(token_ids, 1):
        cut = (j * t) // k
        ids.extend(x_ids[taken:cut])
        taken = cut
        ids.append(token)
    return ids, distributed_positions(t, k)


def remove_ids(ids: Sequence[int], drop: Sequence[int]) -> list[int]:
    dropped = set(drop)
    return [i for i in ids if i not in dropped]


# -- filters ---------------------------------------------------------------------------------------

def max_ngram_count(ids: Sequence[int], n: int) -> int:
    """How often the most frequent n-gram of ``ids`` occurs (0 when shorter than n)."""
    if len(ids) < n:
        return 0
    return max(Counter(tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)).values())


def repetition(x_ids: Sequence[int], contents: Sequence[str], n: int, max_repeats: int) -> dict:
    """The excessive-repetition rule (the paper states none; this is ours): the evidence X is
    rejected when one token n-gram occurs more than ``max_repeats`` times in it, or when two
    units say the same thing (identical contents, case and spacing ignored). Returns the
    measures and the verdict."""
    worst = max_ngram_count(x_ids, n)
    bodies = [" ".join(c.lower().split()) for c in contents]
    duplicate = len(set(bodies)) < len(bodies)
    return {"max_ngram_count": worst, "ngram": n, "duplicate_units": duplicate,
            "excessive": worst > max_repeats or duplicate}


# -- readout over generated ids (the harness) -----------------------------------------------------

@dataclass(frozen=True)
class Readout:
    """Where each readout token first occurs in a generated sequence."""

    positions: dict[int, int | None]  # token id -> first position in the generated ids, None if absent
    duplicates: dict[int, int]  # token id -> extra occurrences
    valid_format: bool  # all tokens once, in order, nothing after the last one but end-of-sequence ids
    last: int  # position of the last generated token (-1 when nothing was generated)


def locate_readout(generated: Sequence[int], token_ids: Sequence[int], end_ids: Sequence[int] = ()) -> Readout:
    """The readout positions of paper §3.3-3.4: the first occurrence of each token in the
    generated ids; a missing one is read at the last generated token (the caller's fallback)."""
    positions: dict[int, int | None] = {t: None for t in token_ids}
    counts: Counter = Counter()
    for position, token in enumerate(generated):
        if token in positions:
            counts[token] += 1
            if positions[token] is None:
                positions[token] = position
    order = [positions[t] for t in token_ids]
    ends = set(end_ids)
    valid = bool(order) and all(p is not None for p in order)
    valid = valid and all(counts[t] == 1 for t in token_ids) and all(a < b for a, b in zip(order, order[1:]))
    valid = valid and all(g in ends for g in generated[order[-1] + 1:])
    return Readout(positions, {t: counts[t] - 1 for t in token_ids if counts[t] > 1}, valid, len(generated) - 1)
