"""Text needles in the NeedleBench format, drawn as confusable families.

A NeedleBench record (``needle``, ``retrieval_question``, ``arg1``, ``arg2``) is turned into a
template by cutting out its core entity (``arg1``, the subject the question names) and its
answer (``arg2``): "The first band to play on {S} was the {A}." / "Which band was the first to
perform on {S}?". A family is one template with fresh subjects: its members share syntax and
wording and differ in the one core entity, so a pool of them can only be told apart by reading
the entity the query names. Subjects are built from surnames (``names.json``), invented place
names, or numbered designations that share a stem ("Crawford-417" against "Crawford-852"), so
any number of fresh needle sets can be drawn.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

SUBJECT_KINDS = ("name", "place", "number")
PLACE_ENDINGS = ("ton", "ville", "burg", "field", "haven", "ford", "port", "mere")
_NAME_SUFFIXES = frozenset({"md", "phd", "dds", "dvm", "jr", "jr.", "sr", "sr.", "ii", "iii", "iv"})


@dataclass(frozen=True)
class NeedleTemplate:
    id: str
    needle: str  # with {S} and {A}
    question: str  # with {S}
    subjects: tuple[str, ...]  # the original arg1 values
    answers: tuple[str, ...]  # the original arg2 values
    subject_suffix: str  # words every original subject ends with (" Island"), kept on fresh ones

    def fill(self, subject: str, answer: str) -> tuple[str, str]:
        return self.needle.replace("{S}", subject).replace("{A}", answer), self.question.replace("{S}", subject)


@dataclass(frozen=True)
class TextNeedle:
    id: str
    family: str
    text: str
    question: str
    subject: str
    answer: str


def _question_only(question: str) -> str:
    """NeedleBench questions end with an answer-format instruction for generation; retrieval
    needs the question alone."""
    head = question.split("?")[0].strip()
    return head + "?" if head else ""


def _common_suffix(values: list[str]) -> str:
    if len(values) < 2:
        return ""
    split = [v.split(" ") for v in values]
    common: list[str] = []
    for words in zip(*(reversed(w) for w in split)):
        if len(set(words)) != 1:
            break
        common.insert(0, words[0])
    if any(len(w) <= len(common) for w in split):  # a whole value is shared: no head to vary
        return ""
    return " " + " ".join(common) if common else ""


def parse_templates(records: list[dict], language: str = "English") -> tuple[list[NeedleTemplate], dict[str, int]]:
    """Templates from NeedleBench records, and counts of records left out by reason."""
    skipped: dict[str, int] = {}
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def skip(reason):
        skipped[reason] = skipped.get(reason, 0) + 1

    for r in records:
        if r.get("language", language) != language:
            skip("needle_other_language")
            continue
        needle, subject, answer = r.get("needle"), r.get("arg1"), r.get("arg2")
        question = _question_only(str(r.get("retrieval_question", "")))
        if not all(isinstance(x, str) and x.strip() for x in (needle, subject, answer)) or not question:
            skip("needle_missing_field")
            continue
        # the template must name the subject once in each string, and the answer apart from it
        if (needle.count(subject) != 1 or needle.count(answer) != 1 or question.count(subject) != 1
                or subject in answer or answer in subject):
            skip("needle_not_a_template")
            continue
        template = needle.replace(subject, "{S}").replace(answer, "{A}")
        groups.setdefault((template, question.replace(subject, "{S}")), []).append((subject, answer))
    templates = []
    for (needle_t, question_t), pairs in sorted(groups.items()):
        subjects = tuple(sorted({s for s, _ in pairs}))
        answers = tuple(sorted({a for _, a in pairs}))
        digest = hashlib.sha256(f"{needle_t}\x1f{question_t}".encode()).hexdigest()[:8]
        templates.append(NeedleTemplate(
            id=f"nb-{digest}", needle=needle_t, question=question_t, subjects=subjects, answers=answers,
            subject_suffix=_common_suffix(list(subjects))))
    return templates, skipped


def surnames(names_text: str) -> list[str]:
    """Distinct surnames from NeedleBench's comma-separated ``names.json`` entry."""
    out: list[str] = []
    seen: set[str] = set()
    for full in names_text.split(","):
        words = [w for w in full.strip().split() if w.lower() not in _NAME_SUFFIXES]
        if len(words) >= 2 and re.fullmatch(r"[A-Z][a-z]+", words[-1]) and words[-1] not in seen:
            seen.add(words[-1])
            out.append(words[-1])
    return out


def draw_text_family(
    template: NeedleTemplate, rng: np.random.Generator, n: int, names: list[str], kind: str, family_id: str,
    forbidden=lambda s: False,
) -> list[TextNeedle]:
    """``n`` needles of one template whose subjects differ in one core entity of the given kind.
    ``forbidden(subject)`` rejects a subject (e.g. one that occurs in the haystack corpus)."""
    if kind not in SUBJECT_KINDS:
        raise ValueError(f"unknown subject kind {kind!r}; expected one of {SUBJECT_KINDS}")
    if not names:
        raise ValueError("no names to build subjects from")
    stem = names[int(rng.integers(len(names)))]
    heads: list[str] = []
    seen: set[str] = set()
    for _ in range(200 * n):
        if len(heads) == n:
            break
        name = names[int(rng.integers(len(names)))]
        if kind == "name":
            head = name
        elif kind == "place":
            head = name + PLACE_ENDINGS[int(rng.integers(len(PLACE_ENDINGS)))]
        else:  # all share one stem and differ in the number alone; same digit count, so none contains another
            head = f"{stem}-{int(rng.integers(100, 1000))}"
        subject = head + template.subject_suffix
        if head.lower() in seen or forbidden(subject):
            continue
        seen.add(head.lower())
        heads.append(head)
    if len(heads) < n:
        raise ValueError(f"could draw only {len(heads)} of {n} distinct {kind} subjects for {template.id}")
    needles = []
    for i, head in enumerate(heads):
        subject = head + template.subject_suffix
        answer = template.answers[int(rng.integers(len(template.answers)))]
        text, question = template.fill(subject, answer)
        needles.append(TextNeedle(id=f"{family_id}-{i:02d}", family=family_id, text=text, question=question,
                                  subject=subject, answer=answer))
    return needles
