"""HotpotQA Multi-Source Reasoning (paper §3.2.2, appendix A.2).

The query is a multi-hop HotpotQA question (distractor setting) that the query audit kept, with
2 to 5 evidence sentences (supporting facts). The positive is the question's own context (gold
and distractor paragraphs) padded with whole Wikipedia articles to the pool's length; at longer
lengths the same document grows by whole articles inserted between its units so that the
evidence keeps its relative depth. Hard negatives drop the first, the last or a middle evidence
sentence (both, when there are two) for whole sentences on the receiving paragraph's topic of
exactly the same token length; easy negatives are other questions' documents padded to the same
length.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import accumulate
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from mmlongembed import parallel
from mmlongembed.bm25 import BM25Index, bm25_tokenize
from mmlongembed.capacity import LengthLimit
from mmlongembed.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.documents import TEXT, Document, Segment, text_segments
from mmlongembed.digests import short_sha256
from mmlongembed.errors import FitError, UserError
from mmlongembed.llm import AuditItem, LLMConfig, audit_queries
from mmlongembed.manifest import files_identity
from mmlongembed.ops.answers import answer_pattern as whole_word_answer
from mmlongembed.ops.donor import exchangeable_offsets
from mmlongembed.ops.evidence import (
    EVIDENCE_ORIGIN, LineIndex, Refill, SentenceRuns, Unit, find_evidence, find_refill, grow, texts_holding,
    token_offsets_at, unit_spans, units_document)
from mmlongembed.ops.lexical import choose_balanced
from mmlongembed.ops.length import edge_whitespace, fit_block_edges, segment_token_offsets, summed_tokens, trim_edges
from mmlongembed.pools import (
    EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, hard_negative_tolerance, pool_name)
from mmlongembed.rng import derive_rng
from mmlongembed.sources import HubSource, hub_rows, iter_jsonl, read_json, read_text_file, require_dir
from mmlongembed.text import normalise_newlines
from mmlongembed.tokens import MemoCounter, TokenCounter, default_counter
from mmlongembed.wordstats import FEATURES as WORD_FEATURES, WordStats, features_replacing

INSTRUCTION = "Given a multi-hop question, retrieve the document that contains all the evidence needed to answer it."
HUB_SOURCE = HubSource(repo="hotpotqa/hotpot_qa", revision="1908d6afbbead072334abe2965f91bd2709910ab",
                       config="distractor", split="validation", licence="CC BY-SA 4.0")
HUB_PADDING = HubSource(repo="Salesforce/wikitext", revision="b08601e04326c79dfdd32d625aee71d232d685c3",
                        config="wikitext-103-raw-v1", split="train", licence="CC BY-SA 3.0 / GFDL")
LOCAL_PADDING = Path("haystack_text") / "wikitext-2-raw"
MIN_EVIDENCE, MAX_EVIDENCE = 2, 5
# Room left for the few tokens a final recount can differ from the sum of unit counts.
RECOUNT_MARGIN = 4
YES_NO = frozenset({"yes", "no"})
GROWTH_PIECES = 4  # a longer positive grows by at least this many whole units
REFILL_CHOICES = 16  # exact-length refill runs compared for their characters and words (more: less topical refills)
# what a refill is chosen to leave unmoved (``choose_balanced``): the character count, then the
# word statistics of ``mmlongembed.wordstats``
REFILL_STATISTICS = ("chars", *WORD_FEATURES)
POSITIVE_REFILL = "positive"  # the plan's entry for the positive's own refilled sentences
POSITIVE_ALTERNATIVES = 8  # sentences tried in turn for each of the positive's refills (the first with an exact one)


@dataclass
class HotpotQAConfig(CommonConfig, LLMConfig):
    # paper Table 1: 960 queries over 6 pools
    max_queries_per_pool: int = field(default=160, metadata={"help": "cap on queries per pool (paper: 160)"})
    lengths: tuple[int, ...] = field(default=(8192, 16384, 32768), metadata={
        "help": "pool length targets in tokens; the smallest is built first and each longer one grows from it"})
    band_slack: float = field(default=0.1, metadata={
        "help": "every candidate of pool T lies in [T*(1-slack), T]"})
    negatives_per_query: int = field(default=3, metadata={"help": "easy and hard negatives per query (paper: 3)"})
    padding: str | None = field(default=None, metadata={
        "help": "WikiText raw file or directory of padding articles; default: <sources>/haystack_text/wikitext-2-raw "
                "(or next to --sources), else the Hub's WikiText-103 at a pinned revision"})
    padding_articles: int = field(default=2000, metadata={"help": "most Hub padding articles to read"})
    split: str = field(default="all", metadata={
        "choices": ("all", "train", "dev"),
        "help": "which HotpotQA split to read: a local file's split is told by its name (train: 'train' in it; dev: "
                "'dev' or 'validation'), the Hub source is dev (its validation split); all: every file"})


@dataclass(frozen=True)
class Instance:
    id: str
    question: str
    answer: str
    kind: str  # bridge / comparison
    level: str
    context: tuple[tuple[str, tuple[str, ...]], ...]
    supporting: tuple[tuple[str, int], ...]  # (title, sentence index), in document order
    origin: str


@dataclass(frozen=True)
class Sources:
    instances: list[Instance]
    articles: list[tuple[str, str]]  # (id, cleaned text)


# -- reading ---------------------------------------------------------------------------------

def parse_instance(record: dict, origin: str) -> tuple[Instance | None, str]:
    """An Instance from the original HotpotQA format or the Hub's column layout, else a skip reason."""
    try:
        rid = str(record.get("_id", record.get("id", "")))
        question, answer = record["question"], record["answer"]
        context, facts = record["context"], record["supporting_facts"]
        if isinstance(context, dict):  # Hub layout: {"title": [...], "sentences": [[...]]}
            context = list(zip(context["title"], context["sentences"]))
        if isinstance(facts, dict):
            facts = list(zip(facts["title"], facts["sent_id"]))
        context = tuple((str(t), tuple(str(s) for s in sentences)) for t, sentences in context)
        facts = [(str(t), int(i)) for t, i in facts]
    except (KeyError, TypeError, ValueError):
        return None, "malformed_record"
    if not rid or not isinstance(question, str) or not question.strip() or not isinstance(answer, str):
        return None, "malformed_record"
    facts = sorted(set(facts), key=lambda f: (next((k for k, (t, _) in enumerate(context) if t == f[0]), -1), f[1]))
    if not MIN_EVIDENCE <= len(facts) <= MAX_EVIDENCE:
        return None, "evidence_count_outside_2_to_5"
    sentences = dict(context)
    if len(sentences) != len(context):
        return None, "duplicate_paragraph_title"
    for title, index in facts:
        if title not in sentences or not 0 <= index < len(sentences[title]):
            return None, "supporting_fact_missing"
        if not sentences[title][index].strip():
            return None, "empty_evidence"
    return Instance(rid, question.strip(), answer.strip(), str(record.get("type", "")), str(record.get("level", "")),
                    context, tuple(facts), origin), ""


def _origin_file(origin: str) -> str:
    """The file a record came from (its origin is ``<file>:<record number>``, or ``hub``)."""
    return origin.rsplit(":", 1)[0]


def file_split(name: str) -> str:
    """The HotpotQA split a local file holds, by its name: train, dev, or unknown (the records
    themselves do not say)."""
    lowered = name.lower()
    if "train" in lowered:
        return "train"
    if "dev" in lowered or "validation" in lowered:
        return "dev"
    return "unknown"


def local_files(root: Path, split: str = "all") -> list[Path]:
    """The *.jsonl and *.json files under ``root`` of ``split`` (all: every file)."""
    files = sorted(root.rglob("*.jsonl")) + sorted(root.rglob("*.json"))
    return [path for path in files if split == "all" or file_split(path.name) == split]


def read_local_instances(root: Path, report: BuildReport, split: str = "all") -> Iterator[tuple[dict, str]]:
    """Records of *.jsonl files and *.json files (a JSON list: the official release format) of
    ``split`` (``local_files``)."""
    files = local_files(root, split)
    if not files:
        raise UserError(f"no HotpotQA file of split {split!r} under {root} (a file's split is told by its name: "
                        "'train', or 'dev' / 'validation'); pass --split all to read every file")
    for path in (p for p in files if p.suffix == ".jsonl"):
        for number, record in enumerate(iter_jsonl(path, report), 1):
            yield record, f"{path.name}:{number}"
    for path in (p for p in files if p.suffix == ".json"):
        records = read_json(path, report)
        if not isinstance(records, list):
            report.skip("not_a_hotpotqa_file", path.name)
            continue
        for number, record in enumerate(records, 1):
            if isinstance(record, dict):
                yield record, f"{path.name}:{number}"
            else:
                report.skip("malformed_record", f"{path.name}:{number}")


_WIKITEXT_TITLE = re.compile(r"^ = ([^=].*?) = $")
_WIKITEXT_HEADING = re.compile(r"^ (?:= )+(.*?) (?:= )+$|^ =(?: =)+ (.*?) =(?: =)+ $")
_DETOKENIZE = [(re.compile(p), r) for p, r in (
    (r" @(.)@ ", r"\1"), (r" ([,.;:!?%)\]}])", r"\1"), (r"([(\[{$]) ", r"\1"), (r" (n't|'s|'re|'ve|'m|'ll|'d)\b", r"\1"),
)]


def detokenize_wikitext(line: str) -> str:
    """Undo WikiText's spacing around punctuation and its @-@ escapes (plain text reads better)."""
    for pattern, replacement in _DETOKENIZE:
        line = pattern.sub(replacement, line)
    return line.strip()


def wikitext_articles(raw: str, prefix: str) -> list[tuple[str, str]]:
    """WikiText raw text -> (id, article) pairs. Each article is its title line, then section
    headings and paragraphs, each paragraph followed by a blank line."""
    articles: list[tuple[str, list[str]]] = []
    for line in normalise_newlines(raw).split("\n"):
        if not line.strip():
            continue
        title = _WIKITEXT_TITLE.match(line)
        if title and not line.startswith(" = ="):
            articles.append((detokenize_wikitext(title.group(1)), []))
            continue
        if not articles:
            continue
        heading = _WIKITEXT_HEADING.match(line)
        if heading:
            articles[-1][1].append(detokenize_wikitext(heading.group(1) or heading.group(2) or "") + "\n")
        else:
            articles[-1][1].append(detokenize_wikitext(line) + "\n\n")
    out = []
    for number, (title, parts) in enumerate(articles):
        body = "".join(parts)
        if body.strip():
            out.append((f"{prefix}:{number}:{title}", f"{title}\n{body}"))
    return out


# -- documents -------------------------------------------------------------------------------

def context_units(instance: Instance, counter: TokenCounter, counts: dict[str, int]) -> list[Unit]:
    """The instance's paragraphs as units: a title line, then one segment per sentence (so each
    supporting fact is exactly one segment, marked ``evidence:<k>`` in document order)."""
    evidence_index = {fact: k for k, fact in enumerate(instance.supporting)}
    units = []
    for title, sentences in instance.context:
        kept = [(i, s) for i, s in enumerate(sentences) if s.strip()]
        if not kept:
            continue
        segments = [Segment(kind=TEXT, tokens=counts[title + "\n"], text=title + "\n", paragraph_end=True, origin="source")]
        for position, (i, sentence) in enumerate(kept):
            text = sentence if position == 0 else (" " + sentence.lstrip())
            text = text.lstrip() if position == 0 else text
            if position == len(kept) - 1:
                text = text.rstrip() + "\n\n"
            k = evidence_index.get((title, i))
            origin = f"{EVIDENCE_ORIGIN}{k}" if k is not None else "source"
            segments.append(Segment(kind=TEXT, tokens=counts[text], text=text,
                                    paragraph_end=position == len(kept) - 1, origin=origin))
        units.append(Unit(id=f"context:{title}", kind="context", segments=tuple(segments)))
    return units


def context_pieces(instance: Instance) -> list[str]:
    """Every text piece ``context_units`` counts (to count them all in one batch)."""
    pieces = []
    for title, sentences in instance.context:
        kept = [s for s in sentences if s.strip()]
        if not kept:
            continue
        pieces.append(title + "\n")
        for position, sentence in enumerate(kept):
            text = sentence.lstrip() if position == 0 else " " + sentence.lstrip()
            pieces.append(text.rstrip() + "\n\n" if position == len(kept) - 1 else text)
    return pieces


def evidence_texts(instance: Instance) -> list[str]:
    sentences = dict(instance.context)
    return [sentences[t][i].strip() for t, i in instance.supporting]


def answer_pattern(answer: str) -> re.Pattern | None:
    """Whole-word pattern of the answer; None for yes/no answers, which every article contains
    as words and which are not a retrievable anchor."""
    return whole_word_answer(answer, not_anchors=YES_NO)


@dataclass
class Built:
    units: list[Unit]
    document: Document
    n_tokens: int
    # the token offsets of its evidence segments' edges (segment index -> offset), if measured
    offsets: dict[int, int] | None = None

    @cached_property
    def evidence(self) -> list[dict]:
        """Where its evidence lies (``_evidence_provenance``), worked out once per document."""
        return _evidence_provenance(self.document, self.n_tokens, self.offsets)

    @classmethod
    def measured(cls, units: list[Unit], document: Document, counter: TokenCounter) -> "Built":
        """The document with its exact length and its evidence offsets, from one pass over its
        segments' counts (``segment_token_offsets``)."""
        edges = [j for i, x in enumerate(document.segments) if x.origin.startswith(EVIDENCE_ORIGIN) for j in (i, i + 1)]
        offsets = segment_token_offsets(document, counter, edges)
        return cls(units, document, offsets[len(document.segments)], offsets)

    @cached_property
    def padding(self) -> list[dict]:
        return _padding_provenance(self.units)

    @cached_property
    def word_stats(self) -> WordStats:
        """Its words' counts (``mmlongembed.wordstats``), what a refill is matched against."""
        return WordStats.of(self.document.text)


class PaddingSupply:
    """The padding corpus: whole articles and whole HotpotQA paragraphs (by title). For each
    query it lists the units it may use: none holds its answer or its evidence, and no
    paragraph has one of its own titles."""

    def __init__(self, articles: list[Unit], paragraphs: list[Unit]):
        self.articles, self.paragraphs = articles, paragraphs
        self._text = {u.id: u.text for u in (*articles, *paragraphs)}
        self._lowered = {k: v.lower() for k, v in self._text.items()}
        self._lines = LineIndex(self._text)  # which units hold an evidence sentence
        self._memo: dict[str, tuple[list[Unit], list[Unit]]] = {}

    def _clean(self, unit: Unit, answer: re.Pattern | None, answer_lower: str, with_evidence: set[str]) -> bool:
        # the plain substring test is a fast filter; the whole-word pattern decides
        if answer is not None and answer_lower in self._lowered[unit.id] and answer.search(self._text[unit.id]):
            return False
        return unit.id not in with_evidence

    def usable(self, instance: "Instance", exclude_titles: set[str] = frozenset(),
               exclude_ids: set[str] = frozenset()) -> tuple[list[Unit], list[Unit]]:
        if instance.id not in self._memo:
            answer = answer_pattern(instance.answer)
            with_evidence = set().union(*(self._lines.holding(e) for e in evidence_texts(instance)))
            own = {t for t, _ in instance.context}
            answer_lower = instance.answer.strip().lower()
            self._memo[instance.id] = (
                [u for u in self.articles if self._clean(u, answer, answer_lower, with_evidence)],
                [u for u in self.paragraphs
                 if u.id[len("paragraph:"):] not in own and self._clean(u, answer, answer_lower, with_evidence)],
            )
        articles, paragraphs = self._memo[instance.id]
        if not exclude_titles and not exclude_ids:
            return articles, paragraphs
        return ([u for u in articles if u.id not in exclude_ids],
                [u for u in paragraphs if u.id not in exclude_ids and u.id[len("paragraph:"):] not in exclude_titles])


class PoolEvidenceGuard:
    """Keeps a pool free of second documents that hold a query's evidence. Every query ranks the
    whole pool, so no candidate but a query's positive may carry that query's gold paragraphs,
    whether as its own context or as padding (whole HotpotQA paragraphs of other questions)."""

    def __init__(self):
        self.titles_in_pool: set[str] = set()  # every paragraph title any candidate holds
        self.gold_in_pool: set[str] = set()  # the gold paragraph titles of the pool's queries

    @staticmethod
    def titles(units: Iterable[Unit]) -> set[str]:
        return {u.id.split(":", 1)[1] for u in units if u.id.startswith(("context:", "paragraph:"))}

    def admit(self, instance: Instance, candidates: list[Iterable[Unit]]) -> bool:
        """Take a query with its candidates (positive first) if no earlier candidate holds its
        gold paragraphs, none of its candidates holds an earlier query's, and its negatives hold
        its gold only as their own context (a hard variant is the positive minus one sentence)."""
        gold = {title for title, _ in instance.supporting}
        held = [self.titles(units) for units in candidates]
        if gold & self.titles_in_pool or set().union(*held) & self.gold_in_pool:
            return False
        own_context = {t for t, _ in instance.context}
        padding_of_negatives = set().union(*held[1:]) - own_context if len(held) > 1 else set()
        if gold & padding_of_negatives:
            return False
        self.titles_in_pool |= set().union(*held)
        self.gold_in_pool |= gold
        return True


_ANCHOR = re.compile(r"[A-Z][\w'’-]*\w|\d[\d,.]*\d|\d")


def fact_anchors(sentence: str, rest: str) -> set[str]:
    """What carries a sentence's fact: its names and numbers (capitalised words, digit runs) that
    occur nowhere else in ``rest`` (the rest of the instance's context). A refill that holds none
    of them cannot restate the removed fact."""
    lowered = rest.lower()
    return {a for a in _ANCHOR.findall(sentence)
            if not re.search(r"(?<!\w)" + re.escape(a.lower()) + r"(?!\w)", lowered)}


def mentions_pattern(words: Iterable[str]) -> re.Pattern | None:
    """A pattern for lower-cased text that finds any of the words, lower-cased, as a whole word
    (None for no words)."""
    words = sorted(words)
    if not words:
        return None
    return re.compile("|".join(r"(?<!\w)" + re.escape(w.lower()) + r"(?!\w)" for w in words))


class RefillGuard:
    """What a refill must not hold: the answer (whole word), any evidence sentence of the query,
    or a name or number of the removed fact (``fact_anchors``). ``allows(unit, text)`` judges the
    fitted text of one run of ``unit``. A run's text is the unit's text between two of its
    sentence boundaries (the edges' whitespace aside), so a unit whose whole text does not even
    hold these as plain substrings (case aside) passes every run unread: the refill search tries
    hundreds of runs, from a few dozen units, most of which hold none of them."""

    def __init__(self, answer: str, evidence: list[str], anchors: set[str]):
        self.pattern = answer_pattern(answer)
        # the answer anywhere, word boundaries aside (a superset of the pattern's matches)
        self.plain = re.compile(re.escape(answer.strip()), re.IGNORECASE) if self.pattern is not None else None
        self.evidence = evidence
        self.mentions = mentions_pattern(anchors)
        self.anchors = [a.lower() for a in anchors]
        self._clear: dict[str, bool] = {}

    def _unit_clear(self, unit: Unit) -> bool:
        if unit.id not in self._clear:
            text = unit.text
            # lower() maps character by character (a substring's lowering is a substring of the
            # lowering) except for the Greek final sigma, which depends on what follows
            self._clear[unit.id] = not (
                (self.plain is not None and self.plain.search(text)) or any(e in text for e in self.evidence)
                or (self.anchors and ("Σ" in text or any(a in text.lower() for a in self.anchors))))
        return self._clear[unit.id]

    def allows(self, unit: Unit, text: str) -> bool:
        if self._unit_clear(unit):
            return True
        return not ((self.pattern is not None and self.pattern.search(text)) or any(e in text for e in self.evidence)
                    or (self.mentions is not None and self.mentions.search(text.lower())))


def paragraph_pieces(unit: Unit) -> list[Unit]:
    """A padding article's paragraphs of two or more sentences, each as a unit of its own, named
    ``<article id>#<paragraph>``."""
    pieces, start, number = [], 0, 0
    segments = unit.segments
    for i, segment in enumerate(segments):
        if segment.paragraph_end or i == len(segments) - 1:
            if i + 1 - start > 1:
                pieces.append(Unit(f"{unit.id}#{number}", unit.kind, segments[start:i + 1]))
            start, number = i + 1, number + 1
    return pieces


class RefillSource:
    """Where the refill of a removed evidence sentence comes from: runs of whole sentences of
    HotpotQA distractor paragraphs (paragraphs that no question of the sources uses as evidence)
    and of padding-article paragraphs, ranked by BM25 against the paragraph that receives the
    refill (as it was), so that the refill is on that paragraph's topic. A unit already in the
    document is never a source (its sentence would appear twice), nor one that holds the answer or
    the evidence, nor one of the instance's own paragraphs (``PaddingSupply.usable``)."""

    def __init__(self, supply: PaddingSupply, gold_titles: set[str]):
        self.supply = supply
        self.pieces = [u for u in supply.paragraphs if u.id[len("paragraph:"):] not in gold_titles]
        self.whole = [u.id for u in self.pieces]  # per piece: the unit a document holds or not
        for article in supply.articles:
            pieces = paragraph_pieces(article)
            self.pieces += pieces
            self.whole += [article.id] * len(pieces)
        # each piece as a refill: its segments carry where they come from (fit_block_edges keeps it)
        self.pieces = [Unit(u.id, u.kind, tuple(_with_origin(x, f"replacement:{u.id}") for x in u.segments))
                       for u in self.pieces]
        self.index = BM25Index.from_texts([u.text for u in self.pieces]) if self.pieces else None
        self._ranked: dict[str, list[int]] = {}
        self._usable: dict[str, set[str]] = {}
        self._runs: dict[str, SentenceRuns] = {}
        self.edge_counter = MemoCounter(default_counter())  # the recounted edges of fitted runs
        # What refilling one place learns holds for the same place at every length (a positive
        # grows by padding only): the removed fact's anchors, and each run fitted there.
        self._anchors: dict[tuple[str, str], set[str]] = {}
        self._guards: dict[tuple, RefillGuard] = {}
        self._fitted: dict[tuple, dict] = {}
        self._runs_fitted: dict[tuple, list[Segment]] = {}

    def runs(self, unit: Unit) -> SentenceRuns:
        """The unit's sentence runs, indexed once per build (``find_refill``)."""
        if unit.id not in self._runs:
            self._runs[unit.id] = SentenceRuns(unit)
        return self._runs[unit.id]

    def anchors(self, sentence: str, context: str) -> set[str]:
        """``fact_anchors`` of a removed sentence in its instance's context, remembered."""
        if (sentence, context) not in self._anchors:
            self._anchors[(sentence, context)] = fact_anchors(sentence, context.replace(sentence, " "))
        return self._anchors[(sentence, context)]

    def guard(self, instance: "Instance", evidence: list[str], anchors: set[str]) -> "RefillGuard":
        """The ``RefillGuard`` of a variant (the same at every length), made once."""
        key = (instance.id, frozenset(anchors))
        if key not in self._guards:
            self._guards[key] = RefillGuard(instance.answer, evidence, anchors)
        return self._guards[key]

    def fitted_run(self, source: Unit, a: int, b: int, lead: str, tail: str) -> list[Segment]:
        """``fit_block_edges`` of a run of ``source`` for a place with that edge whitespace
        (most places share a few kinds of edges), made once."""
        key = (source.id, a, b, lead, tail)
        if key not in self._runs_fitted:
            self._runs_fitted[key] = fit_block_edges(source.segments[a:b], lead, tail, self.edge_counter,
                                                     f"replacement:{source.id}")
        return self._runs_fitted[key]

    def fitted(self, place: tuple) -> dict:
        """The runs already fitted into one place (``place`` names everything a fit depends on
        but the run), by (unit id, start, end): what ``fit`` returned for each."""
        return self._fitted.setdefault(place, {})

    def ranked(self, query_text: str) -> list[int]:
        """Piece indices, the most similar to ``query_text`` first (ties: lower index)."""
        if query_text not in self._ranked:
            if self.index is None:
                self._ranked[query_text] = []
            else:
                scores = self.index.scores(bm25_tokenize(query_text))
                self._ranked[query_text] = np.argsort(-scores, kind="stable").tolist()  # ties: lower index
        return self._ranked[query_text]

    def candidates(self, instance: "Instance", query_text: str, exclude_ids: set[str]) -> Iterator[Unit]:
        """The usable pieces, the most topical first (lazily: a search reads only a few)."""
        if instance.id not in self._usable:
            articles, paragraphs = self.supply.usable(instance)
            self._usable[instance.id] = {u.id for u in (*articles, *paragraphs)}
        usable = self._usable[instance.id]
        return (self.pieces[i] for i in self.ranked(query_text)
                if self.whole[i] in usable and self.whole[i] not in exclude_ids)


def locate(units: list[Unit], place) -> tuple[int, int]:
    """(unit index, segment index) of a place to refill: evidence sentence ``k`` (an int), or a
    context paragraph's segment by (unit id, segment index), which growth never changes."""
    if isinstance(place, int):
        return find_evidence(units, place)
    unit_id, s = place
    return next(u for u, unit in enumerate(units) if unit.id == unit_id), s


def _sentence_class(unit: Unit, s: int) -> tuple[bool, bool]:
    """Whether segment ``s`` of a context paragraph (its title line is segment 0) is the first
    and whether it is the last of its sentences."""
    return s == 1, s == len(unit.segments) - 1


def _sentence_shape(segment: Segment) -> tuple[int, int]:
    """(words, tokens) of a sentence: a refilled sentence of the positive mirrors an evidence
    sentence in both (as many words for its tokens: names and numbers take more tokens a word)."""
    return WordStats.of(segment.text).words, segment.tokens


def positive_places(units: list[Unit], removals: list[list[int]], evidence: list[str],
                    rng: np.random.Generator) -> list[list[tuple[str, int]]]:
    """The positive's own sentences to refill, so that it carries refilled text as its variants do
    and no statistic of the words can tell which of a group's documents lost a sentence: as many
    as a variant drawn at random removes (a two-sentence drop is matched as often as the variants
    have one), each a sentence that is no evidence, at the same place in its paragraph (first,
    last, or between) as the evidence sentence it mirrors and as near it in words and tokens, from the
    question's distractor paragraphs (its gold paragraphs stay whole), else from any of its
    paragraphs, else at any place in them. For each mirrored sentence, up to
    ``POSITIVE_ALTERNATIVES`` places in that order (ties drawn at random), to be tried in turn."""
    drawn = removals[int(rng.integers(len(removals)))]
    context = [unit for unit in units if unit.kind == "context"]
    gold = {unit.id for unit in context for x in unit.segments if x.origin.startswith(EVIDENCE_ORIGIN)}
    # not the document's last sentence, whose trailing newlines trim_edges strips (the refill's
    # last characters could then count differently than in place); a title line comes first
    sentences = [(unit, s) for unit in context for s in range(1, len(unit.segments))
                 if unit.segments[s].origin == "source" and unit.segments[s].text.strip() not in evidence
                 and not (unit is units[-1] and s == len(unit.segments) - 1)]
    taken: set[str] = set()  # the paragraphs an earlier mirrored sentence may use
    out = []
    for k in drawn:
        u, s = find_evidence(units, k)
        mirrored, shape = _sentence_class(units[u], s), _sentence_shape(units[u].segments[s])
        ties = rng.random(len(sentences))
        ranked = sorted(range(len(sentences)), key=lambda i: (
            (0 if sentences[i][0].id not in gold else 1) if _sentence_class(*sentences[i]) == mirrored else 2,
            sum(abs(a - b) for a, b in zip(_sentence_shape(sentences[i][0].segments[sentences[i][1]]), shape)),
            ties[i]))
        # one refill per paragraph: a refill's run shifts the segment indices after it
        alternatives = [(sentences[i][0].id, sentences[i][1]) for i in ranked
                        if sentences[i][0].id not in taken][:POSITIVE_ALTERNATIVES]
        if alternatives:
            out.append(alternatives)
            taken.update(unit_id for unit_id, _ in alternatives)
    return out


@register
class HotpotQABuilder(Builder):
    """Multi-Source Reasoning from HotpotQA: find the document that holds every piece of evidence
    for a multi-hop question, against copies that lack one piece."""

    name = "hotpotqa"
    # 1.1: an instance serves a pool once; positives share no paragraph
    # 1.2: refills of exactly the removed sentence's length, on the receiving paragraph's topic
    # 1.3: easy negatives grow as positives do; refills balanced in characters
    # 1.5: one growth rule (ops.evidence.grow) caps padding paragraphs as well as articles
    # 1.6: the positive carries refilled sentences as its variants do; refills chosen to leave the
    # word statistics unmoved (issue 19: the variants' new words told them from the positive)
    version = "1.6.0"
    task = "multi_source_reasoning"
    title = "MMLongEmbed Multi-Source Reasoning: HotpotQA"
    config_class = HotpotQAConfig
    card_template = "hotpotqa.md.j2"
    licence = "cc-by-sa-4.0"

    # -- sources ---------------------------------------------------------------------------
    def _local_roots(self, config: HotpotQAConfig) -> tuple[Path, Path | None]:
        root = require_dir(config.sources, "HotpotQA files in the original format")
        data = root / "hotpotqa" if (root / "hotpotqa").is_dir() else root
        if config.padding:
            return data, require_dir(config.padding, "WikiText raw padding text")
        for base in (root, root.parent):
            if (base / LOCAL_PADDING).exists():
                return data, base / LOCAL_PADDING
        return data, None

    def load_sources(self, config: HotpotQAConfig, report: BuildReport) -> Sources:
        if config.sources:
            data_root, padding_root = self._local_roots(config)
            records = read_local_instances(data_root, report, config.split)
        else:
            if config.split == "train":
                raise UserError(f"the Hub source {HUB_SOURCE.repo} is read at its validation split (dev): "
                                "--split train needs local files (--sources)")
            records = ((row, "hub") for row in hub_rows(HUB_SOURCE, self.name))
            padding_root = Path(config.padding) if config.padding else None
        instances, seen = [], set()
        read: Counter = Counter()  # records per file
        for record, origin in records:
            read[_origin_file(origin)] += 1
            instance, reason = parse_instance(record, origin)
            if instance is None:
                report.skip(reason, origin)
            elif instance.id in seen:
                report.skip("duplicate_id", origin)
            else:
                seen.add(instance.id)
                instances.append(instance)
        if not instances:
            raise UserError(f"no usable HotpotQA record (2 to 5 supporting facts) in {config.sources or HUB_SOURCE.repo}")
        usable = Counter(_origin_file(i.origin) for i in instances)
        report.stats["source_files"] = [
            {"file": name, "split": "dev" if name == "hub" else file_split(name), "records": n, "usable": usable[name]}
            for name, n in read.items()]
        articles: list[tuple[str, str]] = []
        if padding_root is not None:
            files = [padding_root] if padding_root.is_file() else sorted(padding_root.rglob("*.raw")) + sorted(
                padding_root.rglob("*.txt"))
            for path in files:
                raw = read_text_file(path, report)
                if raw is not None:
                    articles.extend(wikitext_articles(raw, path.stem))
        elif not config.sources:
            articles = self._hub_articles(config)
        return Sources(sorted(instances, key=lambda i: i.id), articles)

    def _hub_articles(self, config: HotpotQAConfig) -> list[tuple[str, str]]:
        lines, articles = [], []
        for row in hub_rows(HUB_PADDING, self.name):
            line = row.get("text", "")
            if _WIKITEXT_TITLE.match(line.rstrip("\n")) and not line.startswith(" = =") and lines:
                articles.extend(wikitext_articles("".join(lines), "wikitext-103"))
                lines = []
                if len(articles) >= config.padding_articles:
                    break
            lines.append(line)
        return articles[: config.padding_articles]

    def source_identity(self, config: HotpotQAConfig) -> dict:
        if config.sources:
            data_root, padding_root = self._local_roots(config)
            identity = {"kind": "local", "name": "HotpotQA", "licence": HUB_SOURCE.licence, "split": config.split,
                        "files": files_identity(local_files(data_root, config.split), data_root)}
            if padding_root is not None:
                files = [padding_root] if padding_root.is_file() else [*padding_root.rglob("*.raw"),
                                                                       *padding_root.rglob("*.txt")]
                identity["padding"] = {"name": "WikiText (local)", "licence": HUB_PADDING.licence,
                                       "files": files_identity(files, padding_root.parent)}
            return identity
        return {"kind": "hub", "name": "HotpotQA", "licence": HUB_SOURCE.licence, **HUB_SOURCE.identity,
                "padding": {"name": "WikiText-103", "licence": HUB_PADDING.licence, **HUB_PADDING.identity,
                            "articles": config.padding_articles}}

    # -- pools -----------------------------------------------------------------------------
    def largest_length(self, sources: Sources, config: HotpotQAConfig) -> LengthLimit | None:
        """A document grows from its own paragraphs by whole padding articles and other records'
        paragraphs: all of them together bound it."""
        paragraphs = {title: "".join(sentences) for i in sources.instances for title, sentences in i.context}
        total = sum(default_counter().count_many([*(text for _, text in sources.articles), *paragraphs.values()]))
        return LengthLimit(total, f"a document grows from paragraphs and padding articles, and the "
                                  f"{len(paragraphs)} paragraphs and {len(sources.articles)} articles of these sources "
                                  f"hold {total} tokens in all")

    def build_pools(self, sources: Sources, config: HotpotQAConfig, report: BuildReport) -> list[Pool]:
        counter = default_counter()
        bands = LengthBand.tight_bands(config.lengths, config.band_slack)
        instances = sources.instances

        audit = audit_queries(
            [AuditItem(i.id, i.question, i.answer, tuple(evidence_texts(i))) for i in instances], config, report)
        kept = [i for i in instances if i.id in audit.kept]

        pieces = sorted({p for i in instances for p in context_pieces(i)})
        counts = dict(zip(pieces, counter.count_many(pieces)))
        units_of = {i.id: context_units(i, counter, counts) for i in instances}
        supply = self._padding_supply(sources, units_of, counter)
        if not supply.articles and not supply.paragraphs:
            raise UserError("no padding text: pass --padding with a WikiText raw file or directory")
        refills = RefillSource(supply, {title for i in instances for title, _ in i.supporting})

        order_rng = derive_rng(config.seed, self.name, "order")
        order = [kept[int(k)] for k in order_rng.permutation(len(kept))]
        memo: dict[str, list[Built]] = {}

        def positives_of(instance: Instance) -> list[Built]:
            """Built on first use, so a small build touches only the instances it needs."""
            if instance.id not in memo:
                memo[instance.id] = self._positives(instance, units_of[instance.id], bands, supply, config, counter,
                                                    report)
            return memo[instance.id]

        planned = self._prefetch_hard_plans(order, positives_of, bands, refills, config, counter, report)
        pools = []
        for level, band in enumerate(bands):
            # Pools take instances in one seeded order and skip those they cannot use, so a
            # failure is replaced by the next instance. The hard pool of a length comes first and
            # the easy pool takes its queries among the hard pool's (the paper's paired comparison
            # of the two); an easy query needs three other instances as its negatives, so the easy
            # pool is the smaller.
            hard_positives: dict[str, tuple[Built, list[dict]]] = {}
            hard = self._hard_pool(band, level, order, positives_of, refills, config, counter, report, planned,
                                   hard_positives)
            easy = self._easy_pool(bands, level, [i for i in order if i.id in hard_positives], instances, units_of,
                                   supply, config, counter, report, hard_positives)
            pools += [easy, hard]
        report.stats["refills"] = refill_statistics(pools)
        # how many of each file's records the pools use, as a query or in a negative
        file_of = {i.id: _origin_file(i.origin) for i in instances}
        for entry in report.stats.get("source_files", []):
            entry["in_pools"] = len({c.source_id for pool in pools for c in pool.candidates
                                     if file_of.get(c.source_id) == entry["file"]})
            entry["queries"] = {pool.name: sum(file_of.get(q.source_id) == entry["file"] for q in pool.queries)
                                for pool in pools}
        return pools

    def _padding_supply(self, sources: Sources, units_of: dict[str, list[Unit]], counter: TokenCounter) -> PaddingSupply:
        articles = []
        for article_id, text in sources.articles:
            segments = text_segments(text, counter, origin=f"padding:{article_id}")
            articles.append(Unit(id=f"article:{article_id}", kind="article", segments=tuple(segments)))
        paragraphs, seen = [], set()
        for instance in sources.instances:  # sorted by id: the first copy of a title wins
            for unit in units_of[instance.id]:
                title = unit.id.split(":", 1)[1]
                if title in seen:
                    continue
                seen.add(title)
                origin = f"padding:paragraph:{title}"
                paragraphs.append(Unit(id=f"paragraph:{title}", kind="paragraph",
                                       segments=tuple(_with_origin(s, origin) for s in unit.segments)))
        return PaddingSupply(articles, paragraphs)

    def _window(self, band: LengthBand) -> tuple[int, int]:
        """Where a positive's length must lie so that every negative can match it within the
        hard-negative tolerance and stay in the band."""
        tolerance = hard_negative_tolerance(band.hi)
        return band.lo + tolerance, band.hi - tolerance - RECOUNT_MARGIN

    def _positives(self, instance: Instance, context: list[Unit], bands: list[LengthBand], supply: PaddingSupply,
                   config: HotpotQAConfig, counter: TokenCounter, report: BuildReport) -> list[Built]:
        """The positive at each length, each grown from the previous one; stops at the first
        length that cannot be built (counted)."""
        articles, paragraphs = supply.usable(instance)
        out: list[Built] = []
        units = list(context)
        for level, band in enumerate(bands):
            lo, hi = self._window(band)
            rng = derive_rng(config.seed, self.name, instance.id, band.target, "positive")
            try:
                units = grow(units, level, lo, hi, articles, paragraphs, rng, GROWTH_PIECES)
            except FitError as error:
                reason = f"context_longer_than_{band.name}" if error.reason == "already_longer" else \
                    f"positive_{band.name}_{error.reason}"
                report.skip(reason, instance.id)
                break
            built = Built.measured(units, trim_edges(units_document(f"{instance.id}@{band.name}", units), counter),
                                   counter)
            if not lo <= built.n_tokens <= band.hi - hard_negative_tolerance(band.hi):
                report.skip(f"positive_{band.name}_recount_outside_window", instance.id)
                break
            out.append(built)
        return out

    def _query(self, instance: Instance) -> Query:
        return Query(id=f"q:{instance.id}", text=instance.question, instruction=INSTRUCTION, source_id=instance.id,
                     n_tokens=default_counter().count(instance.question))

    def _positive_candidate(self, instance: Instance, built: Built, refilled: list[dict]) -> Candidate:
        return Candidate(
            id=f"d:{instance.id}", document=built.document, role=POSITIVE, group=f"q:{instance.id}",
            source_id=instance.id, n_tokens=built.n_tokens,
            provenance={"variant": "original", "answer": instance.answer, "n_evidence": len(instance.supporting),
                        "evidence": built.evidence, "refilled": refilled, "padding": built.padding})

    def _easy_pool(self, bands, level, order, instances, units_of, supply, config, counter, report,
                   hard_positives: dict) -> Pool:
        """Queries from ``order`` (the hard pool's, in the seeded order), each with its positive
        (the hard pool's, ``hard_positives``) and ``negatives_per_query`` other instances'
        contexts padded alike."""
        band = bands[level]
        queries = {instance.id for instance in order}
        # no easy negative is padded with the gold paragraph of a query the pool may take
        # (PoolEvidenceGuard would turn that query away)
        gold = {title for instance in order for title, _ in instance.supporting}
        pool = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name, difficulty="easy",
                    band=band)
        k = config.negatives_per_query
        # Every query ranks every candidate of the pool, so an instance serves a pool once: as a
        # positive or as one easy negative, never both (its context would then be a second
        # document holding that query's evidence); see also PoolEvidenceGuard.
        claimed: set[str] = set()
        guard = PoolEvidenceGuard()
        bar = report.progress_bar(min(config.max_queries_per_pool, len(order)), pool.name, "query")
        for instance in order:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            if instance.id in claimed:
                continue  # already an easy negative of an earlier query
            positive, refilled = hard_positives[instance.id]
            titles = {t for t, _ in instance.context}
            rng = derive_rng(config.seed, self.name, pool.name, instance.id, "negatives")
            evidence = evidence_texts(instance)
            offsets = exchangeable_offsets(positive.n_tokens, k, derive_rng(config.seed, pool.name, instance.id, "offsets"))
            negatives = []
            drawn = [instances[int(j)] for j in rng.permutation(len(instances))]
            # instances that are not queries of the pool first: each one claimed as a negative
            # could otherwise have been an easy query itself
            for other in [o for o in drawn if o.id not in queries] + [o for o in drawn if o.id in queries]:
                if len(negatives) == k:
                    break
                if other.id == instance.id or other.id in claimed or titles & {t for t, _ in other.context}:
                    continue  # a shared Wikipedia paragraph could carry this query's evidence
                other_units = units_of[other.id]
                if any(e in u.text for u in other_units for e in evidence):
                    continue
                made = self._other_document(instance, other, other_units, positive.n_tokens + offsets[len(negatives)],
                                            bands, level, evidence, supply, config, counter, gold)
                if made is not None:
                    negatives.append((other, made))
            if len(negatives) < k:
                report.skip(f"easy_{band.name}_not_enough_negatives", instance.id)
                continue
            if not guard.admit(instance, [positive.units, *(made.units for _, made in negatives)]):
                report.skip(f"easy_{band.name}_evidence_shared_with_another_query", instance.id)
                continue
            claimed |= {instance.id, *(other.id for other, _ in negatives)}
            pool.add_query(self._query(instance), self._positive_candidate(instance, positive, refilled), [Candidate(
                id=f"d:{other.id}:for:{instance.id}", document=made.document, role=EASY_NEGATIVE,
                group=f"q:{instance.id}", source_id=other.id, n_tokens=made.n_tokens,
                provenance={"variant": "other_instance", "instance": other.id, "padding": made.padding})
                for other, made in negatives])
            bar.update(1)
        bar.close()
        return pool

    def _other_document(self, instance, other, other_units, aim, bands, level, evidence, supply, config,
                        counter, avoid_titles: set[str] = frozenset()) -> Built | None:
        """Another instance's context padded to about ``aim`` tokens with padding that carries
        neither this query's answer nor its evidence, grown level by level exactly as a positive
        grows (``grow``): padded in one pass instead, a longer easy negative would hold fewer,
        larger units than the positive, and its paragraph-break density would tell them apart."""
        band = bands[level]
        tolerance = hard_negative_tolerance(aim)
        articles, paragraphs = supply.usable(instance, exclude_titles={t for t, _ in other.context} | avoid_titles)
        units = list(other_units)
        try:
            for step in range(level + 1):
                lo, hi = self._window(bands[step]) if step < level else (
                    max(band.lo + RECOUNT_MARGIN, aim - tolerance // 2), min(band.hi - RECOUNT_MARGIN, aim + tolerance // 2))
                rng = derive_rng(config.seed, self.name, bands[step].target, instance.id, other.id, "easy")
                units = grow(units, step, lo, hi, articles, paragraphs, rng, GROWTH_PIECES)
        except FitError:
            return None
        document = trim_edges(units_document(f"{other.id}@{band.name}:for:{instance.id}", units), counter)
        n_tokens = summed_tokens(document, counter)
        text = document.text
        if not band.contains(n_tokens) or any(e in text for e in evidence):
            return None
        return Built(units, document, n_tokens)

    def _prefetch_hard_plans(self, order, positives_of, bands, refills, config, counter, report) -> dict:
        """The refill plans (``_hard_plan``) that the hard pools will ask for whatever happens, by
        (instance id, level): at each length, those of the first ``max_queries_per_pool``
        instances of the seeded order that have a positive of that length (a pool cannot fill
        up before it has seen them). Worked out on all cores (``fork_map``; each worker takes
        whole instances, so what it learns about a place serves every length), before the pools
        are assembled in order. The positives this needs are the first the pools would build,
        built here in the same order; the pools find them built."""
        if parallel.available_cores() < 2 or not parallel.can_fork():
            return {}
        wanted: list[tuple[Instance, list[int]]] = []
        seen = [0] * len(bands)
        bar = report.progress_bar(len(order), "positives", "instance")
        for instance in order:
            if all(n >= config.max_queries_per_pool for n in seen):
                break
            levels = [level for level in range(len(positives_of(instance))) if seen[level] < config.max_queries_per_pool]
            bar.update(1)
            for level in levels:
                seen[level] += 1
            if levels:
                wanted.append((instance, levels))
        bar.close()
        workers = min(parallel.available_cores(), len(wanted))

        def plan_share(worker: int, advance) -> dict:
            plans = {}
            for instance, levels in wanted[worker::workers]:
                for level in levels:
                    plans[(instance.id, level)] = self._hard_plan(instance, positives_of(instance)[level],
                                                                  pool_name(self.name, "hard", bands[level]), refills,
                                                                  config, counter)
                    advance(1)
            return plans

        planned: dict = {}
        total = sum(len(levels) for _, levels in wanted)
        for share in parallel.fork_map(plan_share, workers, workers,
                                       bar=lambda: report.progress_bar(total, "refills of hard negatives", "query")):
            planned.update(share)
        return planned

    def _hard_pool(self, band, level, order, positives_of, refills, config, counter, report, planned=None,
                   hard_positives: dict | None = None) -> Pool:
        """The hard pool of a length; ``hard_positives`` gets each query's refilled positive and
        its refilled sentences (instance id -> (Built, provenance)), for the easy pool."""
        hard_positives = {} if hard_positives is None else hard_positives
        pool = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name, difficulty="hard",
                    band=band)
        guard = PoolEvidenceGuard()
        bar = report.progress_bar(min(config.max_queries_per_pool, len(order)), pool.name, "query")
        for instance in order:
            if len(pool.queries) >= config.max_queries_per_pool:
                break
            built = positives_of(instance)
            if len(built) <= level:
                continue
            positive = built[level]
            plan = (planned or {}).pop((instance.id, level), None)
            if plan is None:
                plan = self._hard_plan(instance, positive, pool.name, refills, config, counter)
            assembled = self._hard_assemble(instance, positive, band, plan, counter)
            if isinstance(assembled, str):
                report.skip(f"hard_{band.name}_{assembled}", instance.id)
                continue
            positive, refilled, variants = assembled
            if not guard.admit(instance, [positive.units, *(made.units for _, made, _ in variants)]):
                report.skip(f"hard_{band.name}_evidence_shared_with_another_query", instance.id)
                continue
            hard_positives[instance.id] = (positive, refilled)
            pool.add_query(self._query(instance), self._positive_candidate(instance, positive, refilled), [Candidate(
                id=f"d:{instance.id}:{variant}", document=made.document, role=HARD_NEGATIVE,
                group=f"q:{instance.id}", source_id=instance.id, n_tokens=made.n_tokens,
                provenance={"variant": variant, "removed": removed, "evidence": made.evidence, "padding": made.padding})
                for variant, made, removed in variants])
            bar.update(1)
        bar.close()
        return pool

    def _hard_variants(self, instance, positive: Built, band, pool_label, refills: RefillSource, config, counter):
        """Three copies of the positive, each lacking evidence (first / last / a random middle
        one, or both of two). Each removed sentence is refilled in place with a run of whole
        sentences on the receiving paragraph's topic (``RefillSource``) of exactly its token
        length wherever one exists, holding neither the answer nor the removed fact's names and
        numbers; the positive has as many of its other sentences refilled (``positive_places``).
        Returns (refilled positive, its refilled sentences, the variants), or the skip reason."""
        plan = self._hard_plan(instance, positive, pool_label, refills, config, counter)
        return self._hard_assemble(instance, positive, band, plan, counter)

    def _hard_plan(self, instance, positive: Built, pool_label, refills: RefillSource, config,
                   counter) -> list[tuple[str, list, list[tuple[object, Refill]] | str]]:
        """The refills of the positive and of each variant (the search, ``_hard_variants``'s
        costly part): per entry (name, places, [(place, refill)]), the positive's first (name
        ``POSITIVE_REFILL``, its places ``(unit id, segment)``), then the variants' (their places
        the removed evidence indices), or the reason in place of the refills of the first entry
        for which a sentence has none (later entries are not planned). A pure function of its
        arguments: plans can be worked out anywhere."""
        n = len(instance.supporting)
        rng = derive_rng(config.seed, self.name, pool_label, instance.id, "hard")
        variants = [("drop_first", [0]), ("drop_last", [n - 1])]
        variants.append(("drop_middle", [int(rng.integers(1, n - 1))]) if n >= 3 else ("drop_both", [0, 1]))
        variants = variants[: config.negatives_per_query]
        evidence = evidence_texts(instance)
        in_document = {u.id for u in positive.units}
        # Where no run is exact, the variants aim at exchangeable lengths (see exchangeable_offsets).
        offsets = exchangeable_offsets(positive.n_tokens, len(variants), derive_rng(config.seed, pool_label, instance.id,
                                                                                    "offsets"))
        tolerance = hard_negative_tolerance(positive.n_tokens)
        context_text = "".join(u.text for u in positive.units if u.kind == "context")
        original = positive.word_stats.features()
        # The positive is refilled too, first: as many non-evidence sentences as a variant drawn at
        # random removes evidence sentences, each at the same place in its paragraph as one of them
        # (``positive_places``: for each, the sentences that may stand in, tried in turn until one
        # has an exact refill), refilled in the same way.
        places = positive_places(positive.units, [removed for _, removed in variants], evidence,
                                 derive_rng(config.seed, pool_label, instance.id, "positive-refill"))
        entries = [(POSITIVE_REFILL, places, 0), *((v, [[k] for k in removed], offset)
                                                   for (v, removed), offset in zip(variants, offsets))]
        plans = []
        for variant, choices, offset in entries:
            units = list(positive.units)
            picks = []
            stats = positive.word_stats  # the variant's, as its refills go in
            share = offset // max(1, len(choices))
            # a positive's refilled sentence holds no fact: only evidence has anchors to keep out
            anchors = set().union(*(refills.anchors(evidence[k], context_text)
                                    for alternatives in choices for k in alternatives if isinstance(k, int)))
            guard = refills.guard(instance, evidence, anchors)

            def search(k, units, stats, n_places=len(choices), share=share, guard=guard, variant=variant):
                """(refill, unit index, segment index, the receiving paragraph's WordStats), or None."""
                u, s = locate(units, k)
                unit = units[u]
                segment = unit.segments[s]
                lead, tail = edge_whitespace(segment.text)
                before = "".join(x.text for x in unit.segments[:s])
                after = "".join(x.text for x in unit.segments[s + 1:])
                paragraph_tokens = counter.count(before + segment.text + after)
                edges = ([before, after], [counter.count(before), counter.count(after)])
                fitted = refills.fitted((instance.id, frozenset(anchors), before, segment.text, after))

                def fit(source: Unit, a: int, b: int):
                    if (source.id, a, b) not in fitted:
                        fitted[(source.id, a, b)] = fit_in_place(source, a, b)
                    return fitted[(source.id, a, b)]

                def fit_in_place(source: Unit, a: int, b: int):
                    run = refills.fitted_run(source, a, b, lead, tail)
                    if not guard.allows(source, "".join(x.text for x in run)):
                        return None  # the refill must not give back the answer or the removed fact
                    # the receiving paragraph as counted alone, from its pieces' counts (exact)
                    pieces, counts = edges
                    measured = counter.count_joined([pieces[0], *(x.text for x in run), pieces[1]],
                                                    [counts[0], *(x.tokens for x in run), counts[1]])[0]
                    return run, segment.tokens + measured - paragraph_tokens

                slack = max(1, (tolerance - RECOUNT_MARGIN) // n_places)
                window = (max(1, segment.tokens - slack), segment.tokens + slack)
                aim = min(max(segment.tokens + share, window[0]), window[1])
                # The receiving paragraph whole (the removed sentence too) says what it is about;
                # the anchor check above keeps the removed fact out of the refill.
                candidates = refills.candidates(instance, before + segment.text + after, in_document)
                # Among the first exact runs, the one that leaves the document's character count
                # and word statistics nearest the original's, each moved to a side drawn at random
                # (``choose_balanced``): a refill longer in characters more often than shorter, or
                # one that moves a word statistic one way more often than the other, would mark
                # the documents that hold refills.
                sides = derive_rng(config.seed, pool_label, instance.id, variant, str(k), "sides").choice(
                    [-1, 1], size=len(REFILL_STATISTICS))
                removed_stats = WordStats.of(unit.text)

                def choose(exact):
                    rows = []
                    for refill in exact:
                        text = "".join(x.text for x in refill.segments)
                        made = features_replacing(stats, removed_stats, WordStats.of(before + text + after))
                        rows.append([len(text) - len(segment.text), *(made[f] - original[f] for f in WORD_FEATURES)])
                    return choose_balanced(np.array(rows), sides)

                try:
                    found = find_refill(candidates, segment.tokens, window, aim, fit, choose_among=REFILL_CHOICES,
                                        choose=choose, runs=refills.runs)
                except FitError:
                    return None
                return found, u, s, removed_stats, found.tokens == segment.tokens

            for alternatives in choices:
                searched = None
                for k in alternatives:  # the first place with an exact refill; else the first with any
                    result = search(k, units, stats)
                    if result is not None and (searched is None or result[4]):
                        searched = (k, *result)
                        if result[4]:
                            break
                if searched is None:
                    plans.append((variant, [a[0] for a in choices], "no_replacement_sentences"))
                    return plans
                k, found, u, s, removed_stats, _ = searched
                unit = units[u]
                units[u] = Unit(unit.id, unit.kind, (*unit.segments[:s], *found.segments, *unit.segments[s + 1:]))
                if len(choices) > 1:
                    stats = stats.replacing(removed_stats, WordStats.of(units[u].text))
                picks.append((k, found))
            plans.append((variant, [k for k, _ in picks], picks))
        return plans

    def _hard_assemble(self, instance, original: Built, band, plan, counter):
        """The refilled positive and the variants of a plan (``_hard_plan``), each measured and
        checked: its length in the band and within the tolerance of the refilled positive's (that
        one within the tolerance of the original's), the variants' removed evidence gone. Returns
        (positive, its refilled sentences, the variants), or the first reason (in plan order) one
        fails for."""
        evidence = evidence_texts(instance)
        out = []
        positive = original
        for variant, removed_indices, picks in plan:
            if isinstance(picks, str):
                return picks
            units = list(original.units)
            removed = []
            for k, found in picks:
                u, s = locate(units, k)
                unit = units[u]
                segment = unit.segments[s]
                units[u] = Unit(unit.id, unit.kind, (*unit.segments[:s], *found.segments, *unit.segments[s + 1:]))
                where = {"index": k} if isinstance(k, int) else {"paragraph": k[0].split(":", 1)[1], "sentence": k[1] - 1}
                removed.append({**where, "sha256": short_sha256(segment.text.strip()), "tokens": segment.tokens,
                                "replacement": {"source": found.unit.id, "kind": found.unit.kind,
                                                "sentences": [found.start, found.end], "tokens": found.tokens,
                                                "topic_rank": found.rank}})
            name = f"{instance.id}@{band.name}" + ("" if variant == POSITIVE_REFILL else f":{variant}")
            made = Built.measured(units, trim_edges(units_document(name, units), counter), counter)
            if not band.contains(made.n_tokens) or abs(made.n_tokens - positive.n_tokens) > hard_negative_tolerance(
                    positive.n_tokens):
                return "length_mismatch"
            text = made.document.text
            if any(evidence[k] in text for k in removed_indices if isinstance(k, int)):
                return "removed_evidence_still_present"
            if variant == POSITIVE_REFILL:
                if not all(e in text for e in evidence):
                    return "positive_refill_took_evidence"
                positive, refilled = made, removed
            else:
                out.append((variant, made, removed))
        return positive, refilled, out

    # -- checks and card -------------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        name = pool_row["pool"]
        counter = default_counter()
        text_of = dict(zip(corpus["_id"], corpus["text"]))
        provenance_of = {cid: json.loads(raw) for cid, raw in zip(corpus["_id"], corpus["provenance"])}
        positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
        evidence_of: dict[str, dict[int, str]] = {}
        for group, cid in positive_of.items():
            text, provenance = text_of.get(cid, ""), provenance_of.get(cid, {})
            spans = provenance.get("evidence", [])
            evidence_of[group] = {}
            if len(spans) != provenance.get("n_evidence"):
                yield Problem(name, "evidence_positions", f"{cid}: {len(spans)} evidence spans recorded, "
                                                          f"{provenance.get('n_evidence')} expected")
            for span in spans:
                a, b = span["char_range"]
                evidence_of[group][span["index"]] = text[a:b].strip()
        # Every query ranks the whole pool: no candidate but its positive may hold all its evidence.
        sentences_of = {group: sorted((e for e in evidence.values() if e), key=len, reverse=True)
                        for group, evidence in evidence_of.items()}
        # the texts that hold a group's longest sentence (one without a newline where there is one)
        holding = texts_holding(text_of, {group: next((e for e in sentences if "\n" not in e), sentences[0])
                                          for group, sentences in sentences_of.items() if sentences})
        for group, sentences in sentences_of.items():
            if not sentences:
                continue
            for cid, text in text_of.items():
                if cid in holding[group] and cid != positive_of[group] and all(e in text for e in sentences):
                    yield Problem(name, "second_document_with_all_evidence",
                                  f"{cid} holds all the evidence of {group}, whose positive is {positive_of[group]}")
        counted: dict[str, int] = {}  # paragraph -> tokens: the pool's documents share most paragraphs
        answers: dict[str, tuple] = {}
        for cid, role, group in zip(corpus["_id"], corpus["role"], corpus["group"]):
            text, provenance = text_of[cid], provenance_of[cid]
            yield from _check_positions(name, cid, text, provenance.get("evidence", []), counter, counted)
            evidence = evidence_of.get(group, {})
            if role == HARD_NEGATIVE:
                for removed in provenance.get("removed", []):
                    gone = evidence.get(removed["index"], "")
                    if short_sha256(gone) != removed["sha256"]:
                        yield Problem(name, "removed_segment", f"{cid}: removed segment does not match the positive's")
                    elif gone in text:
                        yield Problem(name, "removed_segment", f"{cid} still contains removed evidence {removed['index']}")
            elif role == EASY_NEGATIVE:
                if any(e and e in text for e in evidence.values()):
                    yield Problem(name, "easy_negative_evidence", f"{cid} contains its query's evidence")
            answer = provenance_of.get(positive_of.get(group, ""), {}).get("answer", "")
            if answer not in answers:
                pattern = answer_pattern(answer)
                # the answer's letters, case and word boundaries aside
                anywhere = re.compile(re.escape(answer.strip()), re.IGNORECASE) if pattern else None
                answers[answer] = (pattern, anywhere)
            pattern, anywhere = answers[answer]
            if pattern is not None:
                # only a padding range that holds one of the places where they stand (overlaps
                # too) can hold the answer
                places, found = [], anywhere.search(text)
                while found is not None:
                    places.append(found.start())
                    found = anywhere.search(text, found.start() + 1)
                width = len(answer.strip())
                for item in provenance.get("padding", []) if places else ():
                    a, b = item["char_range"]
                    k = bisect.bisect_left(places, a)
                    if k < len(places) and places[k] + width <= b and pattern.search(text[a:b]):
                        yield Problem(name, "answer_in_padding", f"{cid}: padding {item['id']} contains the answer")
                        break

    def example_config(self, directory) -> HotpotQAConfig:
        root = Path(directory)
        from mmlongembed.testing import write_hotpotqa_sources

        write_hotpotqa_sources(root, padding_dir=LOCAL_PADDING)
        return HotpotQAConfig(sources=str(root), lengths=(1024, 2048), max_queries_per_pool=4)

    def card_context(self, config: HotpotQAConfig, pools: list[Pool], report: BuildReport) -> dict:
        local = bool(config.sources)
        pairing = []
        for easy in (p for p in pools if p.difficulty == "easy"):
            hard = next((p for p in pools if p.difficulty == "hard" and p.band == easy.band), None)
            if hard is not None:
                shared = {q.id for q in easy.queries} & {q.id for q in hard.queries}
                pairing.append({"length": easy.band.name, "easy": len(easy.queries), "hard": len(hard.queries),
                                "shared": len(shared)})
        return {
            "instruction": INSTRUCTION,
            "pairing": pairing,
            "refill_choices": REFILL_CHOICES,
            "source_files": report.stats.get("source_files", []),
            "split": config.split,
            "refills": report.stats.get("refills") or refill_statistics(pools),
            "sources": [
                {"name": "HotpotQA (Yang et al., EMNLP 2018), distractor setting", "licence": HUB_SOURCE.licence,
                 "identity": (f"local files under `{Path(config.sources).name}`, split `{config.split}` "
                              "(its files and records: *Source records in this build*; sha256 in manifest.json)" if local
                              else f"`{HUB_SOURCE.repo}` @ `{HUB_SOURCE.revision}`, split `{HUB_SOURCE.split}` (dev)")},
                {"name": "WikiText (Merity et al., 2016), padding articles", "licence": HUB_PADDING.licence,
                 "identity": ("local WikiText raw files (sha256 in manifest.json)" if local or config.padding
                              else f"`{HUB_PADDING.repo}` `{HUB_PADDING.config}` @ `{HUB_PADDING.revision}`")},
            ],
        }


def refill_statistics(pools: list[Pool]) -> dict:
    """How exactly the refills of the hard pools (the hard negatives' and the positives' own)
    match the sentences they replace (token length of the refill minus that of the removed
    sentence, as measured in place), where they come from, and how far each hard negative's length
    is from its positive's."""

    def summary(diffs: list[int], ratios: list[float], ranks: list[int], kinds: Counter, lengths: list[int]) -> dict:
        ranks = sorted(ranks)
        return {
            "refills": len(diffs), "exact": sum(d == 0 for d in diffs), "within_1": sum(abs(d) <= 1 for d in diffs),
            "within_5": sum(abs(d) <= 5 for d in diffs), "max_abs_difference": max(map(abs, diffs), default=0),
            "ratio_min": round(min(ratios, default=1.0), 3), "ratio_max": round(max(ratios, default=1.0), 3),
            "difference_counts": {str(d): n for d, n in sorted(Counter(diffs).items())},
            "topic_rank_median": ranks[len(ranks) // 2] if ranks else None,
            "topic_rank_p90": ranks[(9 * len(ranks)) // 10] if ranks else None,
            "sources": dict(sorted(kinds.items())),
            "variants": len(lengths), "variants_of_equal_length": sum(d == 0 for d in lengths),
            "variant_max_abs_length_difference": max(map(abs, lengths), default=0),
        }

    per_pool, total = {}, ([], [], [], Counter(), [])
    for pool in pools:
        if pool.difficulty != "hard":
            continue
        mine = ([], [], [], Counter(), [])
        positive_tokens = {c.group: c.n_tokens for c in pool.candidates if c.role == POSITIVE}
        for c in pool.candidates:
            if c.role == HARD_NEGATIVE:
                mine[4].append(c.n_tokens - positive_tokens[c.group])
            for removed in c.provenance.get("removed" if c.role == HARD_NEGATIVE else "refilled") or ():
                refill = removed["replacement"]
                mine[0].append(refill["tokens"] - removed["tokens"])
                mine[1].append(refill["tokens"] / removed["tokens"])
                mine[2].append(refill["topic_rank"])
                mine[3][refill["kind"]] += 1
        per_pool[pool.name] = summary(*mine)
        for collected, more in zip(total, mine):
            if isinstance(collected, Counter):
                collected.update(more)
            else:
                collected.extend(more)
    return {"all": summary(*total), "per_pool": per_pool}


def _with_origin(segment: Segment, origin: str) -> Segment:
    return replace(segment, origin=origin)


def _evidence_provenance(document: Document, n_tokens: int, offsets: dict[int, int] | None = None) -> list[dict]:
    """Each remaining evidence segment: its character and token range in the final text, its
    relative depth, and a hash of its text. Token positions are what counting the final text
    up to each boundary gives (``token_offsets_at``, which validation recounts), worked out from
    the segments' counts (``segment_token_offsets``: exact also where two pieces fuse)."""
    segments = document.segments
    marked = sorted((int(x.origin[len(EVIDENCE_ORIGIN):]), i) for i, x in enumerate(segments)
                    if x.origin.startswith(EVIDENCE_ORIGIN))
    if offsets is None:
        offsets = segment_token_offsets(document, default_counter(), [j for _, i in marked for j in (i, i + 1)])
    chars = [0, *accumulate(len(x.text) for x in segments)]
    out = []
    for k, i in marked:
        start, end = offsets[i], offsets[i + 1]
        out.append({"index": k, "char_range": [chars[i], chars[i + 1]], "token_range": [start, end],
                    "relative_position": round(start / n_tokens, 4), "sha256": short_sha256(segments[i].text.strip())})
    return out


def _padding_provenance(units: list[Unit]) -> list[dict]:
    """Every padding unit (and every replacement run) with its character range."""
    out = []
    for unit, span in zip(units, unit_spans(units)):
        if unit.kind != "context":
            out.append({"id": unit.id, "kind": unit.kind, "char_range": [span.char_start, span.char_end]})
            continue
        chars = span.char_start
        run_start, run_source = None, None
        for segment in (*unit.segments, None):
            source = segment.origin if segment is not None and segment.origin.startswith("replacement:") else None
            if source != run_source and run_source is not None:
                out.append({"id": run_source.split(":", 1)[1], "kind": "replacement", "char_range": [run_start, chars]})
            if source is not None and source != run_source:
                run_start = chars
            run_source = source
            if segment is not None:
                chars += len(segment.text)
    return out


def _check_positions(pool: str, cid: str, text: str, spans: list[dict], counter: TokenCounter,
                     memo: dict[str, int] | None = None) -> Iterator[Problem]:
    """Recorded evidence ranges hold the recorded text, and the recorded token ranges match an
    independent recount of the final text (by paragraphs, remembered in ``memo`` across the
    pool's documents: ``token_offsets_at``)."""
    if not spans:
        return
    offsets = token_offsets_at(text, [p for s in spans for p in s["char_range"]], counter, memo)
    for span in spans:
        a, b = span["char_range"]
        if short_sha256(text[a:b].strip()) != span["sha256"]:
            yield Problem(pool, "evidence_positions", f"{cid}: evidence {span['index']} is not at {a}:{b}")
        elif [offsets[a], offsets[b]] != span["token_range"]:
            yield Problem(pool, "evidence_positions",
                          f"{cid}: evidence {span['index']} recounts at tokens {[offsets[a], offsets[b]]}, "
                          f"recorded {span['token_range']}")
