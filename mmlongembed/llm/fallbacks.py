"""Deterministic stand-ins for LLM steps under ``--llm none`` (documented in the card).

- query audit, prompt version ``paper``: ``audit_rules``, the paper's Table 8 steps as rules on the
  query alone (extract high-specificity candidates, reject broad signals, keep a query only when a
  candidate is specific enough to single out one document), answering the paper's JSON fields;
- query audit, prompt version ``v1``: ``audit_heuristic`` (a proper noun, a number, a date, a quoted
  title or a combination of uncommon words, and a self-contained question);
- caption rewrite: join the captions in order with explicit transition words.
The translation step has none: it refuses to run without an LLM.
"""

from __future__ import annotations

import re

AUDIT_HEURISTIC = "anchor heuristic v1 (no LLM)"
AUDIT_RULES = "anchor rules v2, the paper's Table 8 steps as rules (no LLM)"
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


# -- the paper's audit steps as rules (prompt version "paper") ---------------------------------

# Broad signals: capitalised words that name something too common to single out one document.
BROAD_NAMES = frozenset("""
    american british english french german italian spanish russian chinese japanese korean indian canadian
    australian irish scottish welsh dutch swedish norwegian danish finnish polish greek turkish mexican
    brazilian european african asian western eastern northern southern christian catholic jewish muslim
    america england britain france germany italy spain russia china japan india canada australia ireland
    scotland wales mexico brazil europe africa asia earth world us usa uk un eu united states kingdom
    north south east west new city county state river national international university college church
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december spring summer autumn winter god internet
""".split())
# Capitalised only because they open the question, or words that never name anything.
_FUNCTION_WORDS = frozenset("""
    what which who whom whose when where why how is are was were did do does has have had can could will
    would should in on at of for from by with the a an this that these those and or but if to as i
    name list give tell
""".split())
_NAME_CONNECTORS = frozenset("of the and de da di del von van der le la & for on".split())
_QUOTED_TITLE = re.compile(r"[\"“]([^\"“”]{2,}?)[\"”]")
_YEAR = re.compile(r"\b(?:1\d{3}|20\d{2})s?\b")
_NUMBER = re.compile(r"\b\d[\d,.]*(?:%|\b)")
_IDENTIFIER = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\b")


def _name_runs(text: str) -> list[list[str]]:
    """Runs of capitalised words (joined by 'of', 'the', 'de'...), the query's opening word left
    out when it is a function word."""
    words = re.findall(r"[\w'’.&-]+", text)
    runs, current, pending = [], [], []
    for i, word in enumerate(words):
        bare = word.strip(".'’")
        if bare[:1].isupper() and not (i == 0 and bare.lower() in _FUNCTION_WORDS) and bare != "I":
            current += pending + [bare]
            pending = []
        elif current and bare.lower() in _NAME_CONNECTORS:
            pending.append(bare)
        else:
            if current:
                runs.append(current)
            current, pending = [], []
    if current:
        runs.append(current)
    return runs


def audit_rules(query: str) -> tuple[dict, str]:
    """The paper's audit (Table 8) as rules on the query alone: (the verdict in the paper's JSON
    fields, the rule that decided). Candidates: names (runs of capitalised words), quoted titles,
    identifiers that mix letters and digits (entities), years (events in time), other numbers
    (data). Broad signals (nationalities, countries, months, generic words) do not count. A query
    is kept when a specific entity names one thing, or when a time, a place or subject and a
    figure combine; a broad signal alone ("an American singer", "in 1994") is dropped."""
    text = query.strip()

    def verdict(valid, anchor, kind, ambiguity, reason, rule):
        return ({"is_valid": valid, "strong_linked_anchor": anchor, "anchor_type": kind,
                 "potential_ambiguity": ambiguity, "reason": reason}, rule)

    if len(_WORD.findall(text)) < 4:
        return verdict(False, "", "entity", "High", "The query is too short to stand on its own.", "too_short")
    if _DOCUMENT_REFERENCE.search(text):
        return verdict(False, _DOCUMENT_REFERENCE.search(text).group(0), "entity", "High",
                       "The query points at a document instead of naming what it is about.", "refers_to_a_document")
    specific, broad = [], []
    for title in _QUOTED_TITLE.findall(text):
        specific.append(title.strip())
    for identifier in _IDENTIFIER.findall(text):
        if not _YEAR.fullmatch(identifier) and not identifier.isdigit():
            specific.append(identifier)
    for run in _name_runs(text):
        content = [w for w in run if w.lower() not in _NAME_CONNECTORS]
        phrase = " ".join(run)
        if all(w.lower() in BROAD_NAMES for w in content):
            broad.append(phrase)
        else:
            specific.append(phrase)
    bare = _IDENTIFIER.sub(lambda m: " " if not m.group(0).isdigit() else m.group(0), text)
    years = _YEAR.findall(bare)
    numbers = [n for n in _NUMBER.findall(bare) if not _YEAR.fullmatch(n.rstrip("%"))]
    if specific:
        anchor = max(specific, key=len)
        combined = bool(years or numbers)
        return verdict(True, anchor, "combination" if combined else "entity", "Low",
                       f"'{anchor}' names one specific thing" + (" and is pinned by a time or figure." if combined else "."),
                       "specific_entity")
    kinds = [k for k, found in (("time", years), ("place or subject", broad), ("figure", numbers)) if found]
    if len(kinds) == 3:
        anchor = " / ".join(years[:1] + broad[:1] + numbers[:1])
        return verdict(True, anchor, "combination", "Low",
                       f"A {' and a '.join(kinds)} together single out one target.", "rare_combination")
    if broad or years or numbers:
        anchor = (broad or years or numbers)[0]
        return verdict(False, anchor, "data" if numbers and not broad else "entity", "High",
                       f"'{anchor}' is a broad signal that many documents share.", "only_broad_signals")
    return verdict(False, "", "entity", "High", "The query has no proper noun, title, identifier, date or figure.",
                   "no_specific_candidate")


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
