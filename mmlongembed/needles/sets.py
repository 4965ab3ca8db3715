"""One set of needles, either modality, as the grid uses it: drawn once per needle family (a
NeedleBench template with one core entity varied, or a procedural picture spec with one attribute
varied), with what the queries and the checks need."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from mmlongembed.needles import images as synth
from mmlongembed.needles import paraphrase
from mmlongembed.needles.text import NeedleTemplate, TextNeedle, draw_text_family

LEXICAL_LABEL = "text-lexical"  # needle ids of the lexical tier: text-lexical-n00, ...


@dataclass
class Needle:
    """One needle, either modality, with what the query and the checks need."""

    id: str
    family: str
    modality: str
    text: str = ""  # text needle
    answer: str = ""
    question: str = ""
    spec: synth.ImageSpec | None = None  # image needle
    spec_json: dict = field(default_factory=dict)


def _occurs_in(corpus_lower: str):
    def occurs(subject: str) -> bool:
        """A subject the haystack corpus mentions could answer the query without the needle."""
        lowered = subject.lower()
        if lowered not in corpus_lower:  # fast substring test first; the word-bounded search is slower
            return False
        return re.search(r"\b" + re.escape(lowered) + r"\b", corpus_lower) is not None
    return occurs


def draw_needle_set(needle_modality: str, family_name: str, templates: Sequence[NeedleTemplate], names: list[str],
                     corpus_lower: str, n: int, rng: np.random.Generator) -> tuple[list[Needle], dict]:
    """The set of ``n`` needles of one family, drawn once for the whole grid: every cell
    (background, length, depth) holds the same needles and asks the same queries. ``corpus_lower``:
    the whole haystack text, lower-cased (a text needle's subject must not occur in it)."""
    label = f"{needle_modality}-{family_name}"
    if needle_modality == "text":
        template = templates[int(rng.integers(len(templates)))]
        kind = family_name
        family_id = f"{template.id}/{kind}"

        drawn: list[TextNeedle] = draw_text_family(template, rng, n, names, kind, family_id, _occurs_in(corpus_lower))
        needles = [Needle(id=f"{label}-n{i:02d}", family=family_id, modality="text", text=t.text, answer=t.answer,
                          question=t.question,
                          spec_json={"template": template.needle, "question_template": template.question,
                                     "subject": t.subject, "answer": t.answer, "needle": t.text})
                   for i, t in enumerate(drawn)]
        family = {"id": family_id, "kind": "text", "template": template.needle,
                  "question_template": template.question, "varying": f"subject ({kind})",
                  "subjects": [t.subject for t in drawn]}
        return needles, family
    varying = family_name
    family_id = f"img-{varying}"
    drawn_family = synth.draw_family(rng, varying, n, family_id)
    needles = [Needle(id=f"{label}-n{i:02d}", family=family_id, modality="image", spec=spec,
                      question=synth.describe(spec),
                      spec_json={**json.loads(spec.to_json()), "description": synth.describe(spec)})
               for i, spec in enumerate(drawn_family.members)]
    return needles, {"kind": "image", **drawn_family.as_dict()}


def encode_needle(spec: synth.ImageSpec, side: int, quality: int) -> tuple[bytes, int, int]:
    return synth.encode(spec, side, quality), side, side


def draw_lexical_needle_set(templates: Sequence[NeedleTemplate], questions: dict[str, str], names: list[str],
                            corpus_lower: str, n: int, rng: np.random.Generator) -> tuple[list[Needle], dict]:
    """The lexical tier's set of ``n`` text needles (``mmlongembed.needles.paraphrase``): a
    ``number``-kind family of a template that has a paraphrased question (``questions``:
    template id -> question template with ``{N}``), each needle's query that question about
    its number in words. A subject whose query would share a content word with its needle (the
    drawn stem is a word of the wording) or lose its number is drawn again, like one the
    haystack mentions. Raises ValueError where no template has a question or no family can be
    drawn."""
    usable = [t for t in templates if t.id in questions]
    if not usable:
        raise ValueError("no needle template has a paraphrased question")
    template = usable[int(rng.integers(len(usable)))]
    question = questions[template.id]
    family_id = f"{template.id}/number/lexical"
    occurs = _occurs_in(corpus_lower)

    def refused(subject: str) -> bool:
        query = paraphrase.fill(question, subject)
        needle_words = template.needle.replace("{S}", subject).replace("{A}", " ")  # answers: in template_words
        return occurs(subject) or query is None or paraphrase.query_problem(query, needle_words, subject) is not None

    drawn = draw_text_family(template, rng, n, names, "number", family_id, refused)
    needles = []
    for i, t in enumerate(drawn):
        query = paraphrase.fill(question, t.subject)
        needles.append(Needle(
            id=f"{LEXICAL_LABEL}-n{i:02d}", family=family_id, modality="text", text=t.text, answer=t.answer,
            question=query,
            spec_json={"template": template.needle, "question_template": template.question,
                       "paraphrase_template": question, "original_question": t.question,
                       "subject": t.subject, "answer": t.answer, "needle": t.text}))
    family = {"id": family_id, "kind": "text", "template": template.needle, "question_template": template.question,
              "paraphrase_template": question, "varying": "subject (number, named in words by the query)",
              "subjects": [t.subject for t in drawn]}
    return needles, family
