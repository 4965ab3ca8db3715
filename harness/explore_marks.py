"""What each edit of a hard negative changed, as character ranges a viewer can mark in place.

A hard negative is its query's positive with a part replaced (HotpotQA: an evidence sentence
removed and refilled; GovReport: a span replaced by a donor's). The audit's provenance records
how it was made, but not always where the result sits in the finished text; the finished texts
do say it. Both are cut into sentences and aligned (difflib): the sentences of the positive that
the variant lacks are what was removed, the sentences of the variant that the positive lacks are
what replaced them. Images (MMLongBench's swapped pages) are aligned the same way by content.
"""

from __future__ import annotations

import difflib
import re

# a sentence ends at . ! ? followed by white space, or at a line end
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_CHANGED_SHARE = 0.75  # a "variant" that differs in more than this is not an edit of the positive


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence of `text`, separators left out."""
    spans, start = [], 0
    for match in _BREAK.finditer(text):
        if match.start() > start:
            spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _ranges(spans: list[tuple[int, int]], first: int, last: int) -> tuple[int, int] | None:
    return (spans[first][0], spans[last - 1][1]) if last > first else None


def text_edits(positive: str, variant: str) -> tuple[list[dict], list[dict]] | None:
    """(removed: ranges of `positive`, inserted: ranges of `variant`), each {"start", "end"} in
    characters, paired by `pair` (the k-th edit); None where the two share too little to be an
    edit of one another."""
    a_spans, b_spans = sentence_spans(positive), sentence_spans(variant)
    a = [positive[s:e] for s, e in a_spans]
    b = [variant[s:e] for s, e in b_spans]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    removed, inserted = [], []
    changed = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pair = len(removed) + len(inserted)
        changed += max(i2 - i1, j2 - j1)
        if (span := _ranges(a_spans, i1, i2)) is not None:
            removed.append({"start": span[0], "end": span[1], "pair": pair})
        if (span := _ranges(b_spans, j1, j2)) is not None:
            inserted.append({"start": span[0], "end": span[1], "pair": pair})
    if changed > MAX_CHANGED_SHARE * max(len(a), len(b), 1):
        return None
    return removed, inserted


def image_edits(positive: list[str], variant: list[str]) -> tuple[list[int], list[int]]:
    """Image positions (by content key, in order) of the positive that the variant lacks, and of
    the variant that the positive lacks: swapped-out and swapped-in pages."""
    matcher = difflib.SequenceMatcher(None, positive, variant, autojunk=False)
    out, into = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out += range(i1, i2)
            into += range(j1, j2)
    return out, into
