"""Queries that share no content word with their needle: the lexically matched tier of the text
needles (issue 37 §1; not in the paper).

Why the paper's text cells are a lexical task: a cell's needles are one NeedleBench template with
fresh subjects, and the query names its subject verbatim, so the one content word the query shares
with exactly one document (the subject) decides BM25, which scores 100.

The tier's needles are a family of the ``number`` kind: every subject is one stem and a number
("Crawford-417 Island" against "Crawford-852 Island"), so the number alone tells the needles apart.
Its query refers to that number **in words** ("number four hundred seventeen") and rewords the
rest of the template's question, so it shares no content word (``bm25_tokenize``: NFKC, lower
case, ``\\w+`` runs, stop words out) with its needle: not the stem, not the suffix ("Island"), not
the digits ("417" is one token, "four", "hundred", "seventeen" are others), not the template's
words. Since all needles of a cell share the template and the stem, the query then shares no
content word with any needle of its cell, and BM25 can only score the haystacks around them,
which are drawn without regard to the query: chance (1/k in a cell of k documents). A reader who
maps number words to digits still finds the one needle that answers the query.

The question template comes from the LLM step ``query_paraphrase`` (one request per NeedleBench
template: the needle and question with the subject as ``{N}``, and the words it must avoid), or,
under ``--llm none``, from the deterministic fallback: the first of ``FALLBACK_QUESTIONS``, a few
neutral wordings ("What does the record say about {N}?"), that avoids every word of the template
and its answers. Either way the contract is checked here (``paraphrase_problem``): ``{N}`` once, a
question, no forbidden word, no number of its own; and every filled query again
(``query_problem``): no content word shared with its needle, and its number words parse back to
its needle's number, so the query still names the needle that holds its answer.

Measured at the paper's size (the shared NeedleBench and haystack sources, text needles, 3
backgrounds x 8 lengths 256..32K x 6 depths, 25 needles a cell, ``--llm none``; BM25 over each
cell's own documents, ties at the top shared): P@1 1.000 on the paper's 144 text cells, 0.0397
(95% bootstrap interval 0.0345-0.0450, 3600 queries) on the tier's 144 cells (``--lexical-grid
full``; 0.039 on the 48 rotated cells, 1200 queries), chance 0.04; the label-free audit passes on
every lexical cell of a 1K/4K x 3-depth build.
"""

from __future__ import annotations

import re

from mmlongembed.needles.text import NeedleTemplate
from mmlongembed.ops.bm25 import bm25_tokenize

PLACEHOLDER = "{N}"  # where the question names the needle's subject: "number <the number in words>"
SUBJECT_REFERENCE = "number {words}"
QUERY_PARAPHRASE = "query_paraphrase"
FALLBACK = "fallback_wordings"  # the fallback's name in the step record
# neutral wordings, tried in this order: the first that avoids every word of the template is used
FALLBACK_QUESTIONS = (
    "What does the record say about {N}?",
    "What is stated regarding entry {N}?",
    "Which detail is given for item {N}?",
    "What fact concerns designation {N}?",
)

_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
NUMBER_WORDS = frozenset(_ONES + _TENS[2:] + ("hundred", "thousand", "and"))
_NUMBER_IN_SUBJECT = re.compile(r"-(\d+)\b")


def number_words(n: int) -> str:
    """417 -> "four hundred seventeen", 850 -> "eight hundred fifty" (0 <= n < 1000)."""
    if not 0 <= n < 1000:
        raise ValueError(f"number out of range: {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")


def parse_number_words(text: str) -> list[int]:
    """The numbers written in words in ``text`` (each maximal run of number words), in order:
    "at number four hundred seventeen?" -> [417]."""
    values: list[int] = []
    current, seen = 0, False
    for word in re.findall(r"[a-z]+", text.lower()) + [""]:
        if word in NUMBER_WORDS and word != "and":
            seen = True
            if word == "hundred":
                current = max(current, 1) * 100
            elif word == "thousand":
                current = max(current, 1) * 1000
            elif word in _TENS:
                current += 10 * _TENS.index(word)
            else:
                current += _ONES.index(word)
        elif word == "and" and seen:
            continue
        else:
            if seen:
                values.append(current)
            current, seen = 0, False
    return values


def subject_number(subject: str) -> int | None:
    """The number of a ``number``-kind subject: "Crawford-417 Island" -> 417."""
    match = _NUMBER_IN_SUBJECT.search(subject)
    return int(match.group(1)) if match else None


def content_words(text: str) -> set[str]:
    return set(bm25_tokenize(text))


def template_words(template: NeedleTemplate) -> set[str]:
    """What a paraphrase of ``template`` must avoid: every content word of its needle (its
    subject suffix included) and of every answer it may be filled with."""
    words = content_words(template.needle.replace("{S}", " ").replace("{A}", " ") + " " + template.subject_suffix)
    for answer in template.answers:
        words |= content_words(answer)
    return words


def paraphrase_fields(template: NeedleTemplate) -> dict[str, str]:
    """The request of one template: the needle and its question with the subject as ``{N}``
    (the suffix kept in the needle, where it is read), and the words the reply must avoid."""
    needle = template.needle.replace("{S}", PLACEHOLDER + template.subject_suffix)
    question = template.question.replace("{S}", PLACEHOLDER + template.subject_suffix)
    return {"needle": needle, "question": question, "forbidden_words": ", ".join(sorted(template_words(template)))}


def paraphrase_problem(question: str, template: NeedleTemplate) -> str | None:
    """Why ``question`` is no usable paraphrase of ``template``'s question, or None."""
    if not isinstance(question, str) or question.count(PLACEHOLDER) != 1:
        return f"the question must hold {PLACEHOLDER} exactly once, where the needle's subject is named"
    if not question.rstrip().endswith("?"):
        return "the question must end with a question mark"
    rest = question.replace(PLACEHOLDER, " ")
    shared = sorted(content_words(rest) & template_words(template))
    if shared:
        return f"the question uses words of the needle: {', '.join(shared)}"
    if re.search(r"\d", rest) or content_words(rest) & NUMBER_WORDS:
        return "the question holds a number of its own; only {N} may name one"
    return None


def fallback_question(template: NeedleTemplate) -> str | None:
    """The deterministic paraphrase (``--llm none``): the first neutral wording that avoids
    every word of the template; None where none does."""
    for question in FALLBACK_QUESTIONS:
        if paraphrase_problem(question, template) is None:
            return question
    return None


def fill(question: str, subject: str) -> str | None:
    """The query of one needle: ``{N}`` becomes "number <its number in words>"; None where the
    subject carries no number (not of the ``number`` kind)."""
    n = subject_number(subject)
    if n is None:
        return None
    return question.replace(PLACEHOLDER, SUBJECT_REFERENCE.format(words=number_words(n)))


def query_problem(query: str, needle_text: str, subject: str) -> str | None:
    """Why ``query`` may not ask for this needle in the tier, or None: it shares a content word
    with the needle (``lexical_query_shares_word``: the stem of a drawn subject can be a word of
    the wording), or its number words do not name the needle's number
    (``lexical_query_loses_subject``: it would not ask for this needle's answer)."""
    if content_words(query) & content_words(needle_text):
        return "lexical_query_shares_word"
    if parse_number_words(query) != [subject_number(subject)]:
        return "lexical_query_loses_subject"
    return None
