"""Where an answer string is a checkable anchor in a document, and its pattern."""

from __future__ import annotations

import re


def answer_pattern(answer: str, not_anchors: frozenset[str] = frozenset(), min_chars: int = 1,
                   needs_letter: bool = False) -> re.Pattern | None:
    """Case-insensitive whole-word pattern of ``answer``; None where it is no anchor: shorter
    than ``min_chars``, without a letter where ``needs_letter`` (numbers such as "8" or "21%"
    occur in any document), or one of ``not_anchors`` (lower-case: yes/no answers, which every
    article holds as words)."""
    text = answer.strip()
    if len(text) < max(1, min_chars) or text.lower() in not_anchors:
        return None
    if needs_letter and not re.search(r"[A-Za-z]", text):
        return None
    left = r"\b" if re.match(r"\w", text) else ""
    right = r"\b" if re.search(r"\w$", text) else ""
    return re.compile(left + re.escape(text) + right, re.IGNORECASE)
