"""Deterministic stand-ins for LLM steps under ``--llm none`` (documented in the card).

- query audit: keep a query only if it carries a strongly linked anchor (a proper noun, a number,
  a date, a quoted title or a combination of uncommon words) and reads as a self-contained question.
- caption rewrite: join the captions in order with explicit transition words.
The translation step has none: it refuses to run without an LLM.
"""

from __future__ import annotations

import re

AUDIT_HEURISTIC = "anchor heuristic v1 (no LLM)"
REWRITE_TEMPLATE = "transition-word template v1 (no LLM)"

_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec").split()
_DOCUMENT_REFERENCE = re.compile(r"\b(?:the|this|that) (?:passage|text|article|document|paragraph|context)\b|\babove\b",
                                 re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
# Capitalised words that are not names even in mid-sentence.
_NOT_NAMES = frozenset({"I", "I'm", "I've", "The", "A", "An"})
_STOPWORDS = frozenset(
    """about above after again against because before being below between both during further having
    itself other through under until which whose while would should could themselves another""".split())
UNCOMMON_WORD_LENGTH = 9


def audit_anchors(query: str) -> list[str]:
    """The anchor kinds a query carries, in a fixed order."""
    anchors = []
    words = _WORD.findall(query)
    if any(w.lower().rstrip(".") in _MONTHS for w in words) or re.search(r"\b1\d{3}\b|\b20\d{2}\b", query):
        anchors.append("date")
    if re.search(r"\d", query):
        anchors.append("number")
    if any(w[0].isupper() and w not in _NOT_NAMES for w in words[1:]):
        anchors.append("proper_noun")
    if re.search(r"[\"“][^\"”]{2,}[\"”]", query):
        anchors.append("quoted_title")
    uncommon = {w.lower() for w in words if len(w) >= UNCOMMON_WORD_LENGTH and w.lower() not in _STOPWORDS}
    if len(uncommon) >= 2:
        anchors.append("rare_word_combination")
    return anchors


def audit_heuristic(query: str) -> tuple[bool, str]:
    """(valid, reason) for one query, without an LLM."""
    text = query.strip()
    if len(_WORD.findall(text)) < 4:
        return False, "too short to be a self-contained question"
    if _DOCUMENT_REFERENCE.search(text):
        return False, "refers to a document instead of standing alone"
    anchors = audit_anchors(text)
    if not anchors:
        return False, "no strongly linked anchor (proper noun, number, date, rare word combination)"
    return True, "anchors: " + ", ".join(anchors)


_TRANSITIONS = ("Then", "After that", "Next", "Later")
_LOWERCASE_STARTS = frozenset("a an the he she they it we someone somebody everyone people there this that these those his her "
                              "their its one two several many another".split())


def _clause(caption: str) -> str:
    text = caption.strip().rstrip(".!;").strip()
    first = text.split(" ", 1)[0]
    if first.lower() in _LOWERCASE_STARTS:
        text = first.lower() + text[len(first):]
    return text


def rewrite_template(captions: list[str]) -> str:
    """One paragraph: 'First, a. Then, b. After that, c. Finally, d.'"""
    clauses = [_clause(c) for c in captions if c and c.strip()]
    if not clauses:
        return ""
    if len(clauses) == 1:
        return f"{clauses[0][0].upper()}{clauses[0][1:]}."
    sentences = [f"First, {clauses[0]}."]
    for i, clause in enumerate(clauses[1:-1]):
        sentences.append(f"{_TRANSITIONS[i % len(_TRANSITIONS)]}, {clause}.")
    sentences.append(f"Finally, {clauses[-1]}.")
    return " ".join(sentences)
