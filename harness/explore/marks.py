"""What each edit of a hard negative changed, as character ranges a viewer can mark in place.

A hard negative is its query's positive with a part replaced (HotpotQA: an evidence sentence
removed and refilled; GovReport: a span replaced by a donor's). The audit's provenance records
how it was made, but not always where the result sits in the finished text; the finished texts
do say it. Both are cut into sentence pieces (`pieces`, the unit the site stores texts in) and
aligned (difflib, on piece ids): the pieces of the positive that the variant lacks are what was
removed, the pieces of the variant that the positive lacks what replaced them. Images
(MMLongBench's swapped pages) are aligned the same way by content.
"""

from __future__ import annotations

import difflib
import re
from itertools import accumulate

# a piece ends after . ! ? and one white space character, or after a line end; never inside a word,
# so word and sentence counts of a text are the sums of its pieces' (mmlongembed.ops.wordstats)
_PIECE_END = re.compile(r"[.!?]\s|\n")
MAX_CHANGED_SHARE = 0.75  # a "variant" that differs in more than this is not an edit of the positive


def pieces(text: str) -> list[str]:
    """`text` cut after each sentence end (and line end); the pieces join back into `text`."""
    out, start = [], 0
    for match in _PIECE_END.finditer(text):
        out.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each piece of `text`, its trailing white space left out."""
    spans, start = [], 0
    for piece in pieces(text):
        stripped = piece.rstrip()
        if stripped:
            spans.append((start, start + len(stripped)))
        start += len(piece)
    return spans


def _changes(a: list, b: list) -> list[tuple]:
    """difflib's non-equal opcodes of `a` against `b`, the common head and tail set aside first
    (a variant differs from its positive in a few places). difflib's autojunk (pieces that make
    more than 1% of a long text, e.g. blank lines) keeps a 32K-token text fast; matches still
    extend over them."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail], autojunk=True)
    return [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in matcher.get_opcodes()
            if tag != "equal"]


def piece_edits(positive: list[int], variant: list[int], texts: list[str]):
    """(removed, inserted) for two texts given as piece ids (`texts[id]`: the piece): removed as
    {"start", "end", "pair", "pieces"} character ranges of the positive (trailing white space
    left out), inserted as ranges of the variant, the k-th edit's two sides sharing `pair`; None
    where the two share too little to be an edit of one another."""
    starts_a = [0, *accumulate(len(texts[k]) for k in positive)]
    starts_b = [0, *accumulate(len(texts[k]) for k in variant)]

    def side(ids, starts, i1, i2, pair):
        trailing = len(texts[ids[i2 - 1]]) - len(texts[ids[i2 - 1]].rstrip())
        return {"start": starts[i1], "end": max(starts[i1], starts[i2] - trailing), "pair": pair, "pieces": ids[i1:i2]}

    removed, inserted, changed = [], [], 0
    for pair, (tag, i1, i2, j1, j2) in enumerate(_changes(positive, variant)):
        changed += max(i2 - i1, j2 - j1)
        if i2 > i1:
            removed.append(side(positive, starts_a, i1, i2, pair))
        if j2 > j1:
            inserted.append(side(variant, starts_b, j1, j2, pair))
    if changed > MAX_CHANGED_SHARE * max(len(positive), len(variant), 1):
        return None
    return removed, inserted


def text_edits(positive: str, variant: str):
    """`piece_edits` of two texts."""
    ids: dict[str, int] = {}
    a = [ids.setdefault(p, len(ids)) for p in pieces(positive)]
    b = [ids.setdefault(p, len(ids)) for p in pieces(variant)]
    return piece_edits(a, b, list(ids))


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
