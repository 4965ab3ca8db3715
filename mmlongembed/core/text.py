"""Lossless splitting of text into paragraphs and sentences (English and Chinese).

Every split is lossless: ``"".join(pieces) == text``. Whitespace is attached so that piece
boundaries fall on Qwen pre-token boundaries wherever the language allows it: newline runs end
the piece before them, spaces start the piece after them (" Next sentence."). Then the token
count of a concatenation equals the sum of the pieces' counts, which is what makes incremental
length fitting exact. Chinese full stops can fuse with the next character into one pre-token,
so assembled text is recounted, or summed with its seams checked (``TokenCounter.count_joined``,
``ops.length.summed_tokens``).
"""

from __future__ import annotations

import re

# A paragraph ends at a blank line, or at a single newline (many sources, GovReport among
# them, put one paragraph per line). The newline run stays with the paragraph before it.
_PARAGRAPH_END = re.compile(r"[^\S\r\n]*(?:\r?\n)+")

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e u.s u.k u.n no nos fig figs vol inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec gen gov sen rep pp p al approx dept est""".split()
)

# Latin: terminal punctuation, optional closing quotes/brackets, then whitespace, then a likely
# sentence start. Chinese/Japanese: full-width terminal punctuation, optional closing marks; no
# whitespace is needed.
_LATIN_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9])")
_CJK_END = re.compile(r"[。！？；…][”’」』）》]*")


def _cut(text: str, cuts) -> list[str]:
    """Cut text at the given offsets, never leaving a piece of whitespace alone: it joins the
    piece before it (or, at the very start, the piece after it)."""
    pieces: list[str] = []
    start = 0
    for cut in cuts:
        if cut > start and text[start:cut].strip():
            pieces.append(text[start:cut])
            start = cut
    if start < len(text):
        tail = text[start:]
        if pieces and not tail.strip():
            pieces[-1] += tail
        else:
            pieces.append(tail)
    return pieces


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs, each with the newline run that ends it. Leading blank lines stay with the first."""
    return _cut(text, (m.end() for m in _PARAGRAPH_END.finditer(text)))


def _is_abbreviation(text: str, dot_index: int) -> bool:
    word_start = dot_index
    while word_start > 0 and (text[word_start - 1].isalnum() or text[word_start - 1] == "."):
        word_start -= 1
    word = text[word_start:dot_index].lower()
    if not word:
        return False
    if word in _ABBREVIATIONS:
        return True
    # Single capital initials ("J. K. Rowling") are not sentence ends.
    return len(word) == 1 and text[word_start].isupper()


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph. The space before a sentence belongs to it; the paragraph's
    trailing newline run stays with its last sentence."""
    cuts: list[int] = []
    for match in _LATIN_END.finditer(paragraph):
        if paragraph[match.start()] == "." and _is_abbreviation(paragraph, match.start()):
            continue
        cuts.append(match.end())
    for match in _CJK_END.finditer(paragraph):
        end = match.end()
        if paragraph[end:].strip():
            cuts.append(end)
    return _cut(paragraph, sorted(set(cuts)))


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{2,}")


def normalise_whitespace(text: str, paragraph_separator: str = "\n") -> str:
    """One whitespace convention for every source a benchmark mixes (reports from two agencies,
    a donor and its host, padding and context): no tabs, no runs of spaces, no spaces at line
    ends, paragraphs separated by ``paragraph_separator`` (``"\n"``: one paragraph per line,
    blank lines dropped; ``"\n\n"``: blank-line separated, single newlines kept), no
    whitespace at either end. Otherwise spliced text would carry its source in its spacing."""
    lines = [_HORIZONTAL_SPACE.sub(" ", line).strip() for line in normalise_newlines(text).split("\n")]
    joined = "\n".join(lines).strip()
    if paragraph_separator == "\n":
        return "\n".join(line for line in joined.split("\n") if line)
    if paragraph_separator == "\n\n":
        return _BLANK_LINES.sub("\n\n", joined)
    raise ValueError(f"paragraph separator must be '\\n' or '\\n\\n', got {paragraph_separator!r}")
