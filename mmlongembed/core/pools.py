"""Pools: length-stratified sets of queries, candidates and qrels, scored each on its own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from mmlongembed.core.documents import Document

POSITIVE, EASY_NEGATIVE, HARD_NEGATIVE = "positive", "easy_negative", "hard_negative"
EASY, HARD = "easy", "hard"  # the paper's two tiers (a pool's ``difficulty``)
# This toolkit's third tier, beside the paper's: hard negatives that keep the positive's lexical
# relation to the query (a refill as rich in the query's words as what it replaced), so that word
# overlap with the query cannot tell the positive from its variants. Its pools are
# ``<dataset>-lexical-<length>``; the paper's pools are built exactly as without it.
LEXICAL = "lexical"
LEXICAL_TIER_HELP = ("also build the lexically matched Hard tier ('-lexical-' pools, not in the paper): hard "
                     "negatives whose refill carries the query's words as the removed text did, so BM25 cannot "
                     "pick the positive from its variants; the paper's pools are the same with or without it")
TASKS = ("visual_grounding", "multi_source_reasoning", "logical_summarization", "temporal_summarization")


@dataclass(frozen=True)
class LengthBand:
    """Every candidate of a pool has ``lo <= n_tokens <= hi``."""

    target: int
    lo: int
    hi: int

    def __post_init__(self):
        if not 0 < self.lo <= self.hi:
            raise ValueError(f"bad length band [{self.lo}, {self.hi}]")

    @property
    def name(self) -> str:
        if self.target >= 1024 and self.target % 1024 == 0:
            return f"{self.target // 1024}k"
        return str(self.target)

    def contains(self, n_tokens: int) -> bool:
        return self.lo <= n_tokens <= self.hi

    @classmethod
    def halving(cls, target: int) -> "LengthBand":
        """(target/2, target]: consecutive power-of-two targets partition the length axis,
        so each source document falls into exactly one band by its natural length."""
        return cls(target=target, lo=target // 2 + 1, hi=target)

    @classmethod
    def tight_bands(cls, lengths, slack: float) -> list["LengthBand"]:
        """The bands of a builder's ``--lengths``, shortest first."""
        from mmlongembed.core.errors import UserError

        lengths = sorted(set(lengths))
        if not lengths or lengths[0] <= 0:
            raise UserError("--lengths needs positive targets")
        return [cls.tight(t, slack) for t in lengths]

    @classmethod
    def tight(cls, target: int, slack: float = 0.05) -> "LengthBand":
        """[target*(1-slack), target]: for synthetic documents fitted to an exact budget."""
        return cls(target=target, lo=max(1, int(target * (1 - slack))), hi=target)


def parse_length(text: str) -> int:
    """'8k' -> 8192, '256' -> 256."""
    text = text.strip().lower()
    if text.endswith("k"):
        return int(float(text[:-1]) * 1024)
    return int(text)


def hard_negative_tolerance(positive_tokens: int) -> int:
    """How far a hard negative's length may stray from its positive's: max(8 tokens, 1%)."""
    return max(8, positive_tokens // 100)


@dataclass
class Candidate:
    id: str
    document: Document
    role: str
    group: str  # the query this candidate was made for
    source_id: str
    n_tokens: int  # counted on the final assembled text
    provenance: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # task-specific columns
    title: str = ""

    def corpus_row(self) -> dict:
        """Its corpus row's model-visible columns but the id (which the writer makes opaque):
        what is written, and what the label-free audit reads."""
        text, images = self.document.render()
        image_tokens = self.document.image_tokens
        return {"title": self.title, "text": text, "images": images, "n_tokens": self.n_tokens,
                "n_text_tokens": self.n_tokens - image_tokens, "n_image_tokens": image_tokens}


@dataclass
class Query:
    id: str
    text: str
    instruction: str
    source_id: str
    n_tokens: int
    images: list[bytes] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


@dataclass
class Pool:
    name: str
    task: str
    dataset: str
    difficulty: str
    band: LengthBand
    modality: str = "text"
    query_modality: str = "text"
    depth: float | None = None
    queries: list[Query] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    qrels: list[tuple[str, str, int]] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # task-specific pool facts -> the `extra` column

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; expected one of {TASKS}")

    def add_query(self, query: Query, positive: Candidate, negatives: Iterable[Candidate] = ()) -> None:
        """A query, its positive (and the qrel that says so) and the negatives made for it."""
        self.queries.append(query)
        self.candidates.append(positive)
        self.qrels.append((query.id, positive.id, 1))
        self.candidates.extend(negatives)

    def row(self) -> dict:
        return {
            "pool": self.name,
            "task": self.task,
            "dataset": self.dataset,
            "difficulty": self.difficulty,
            "length": self.band.target,
            "band_min": self.band.lo,
            "band_max": self.band.hi,
            "depth": self.depth,
            "modality": self.modality,
            "query_modality": self.query_modality,
            "n_queries": len(self.queries),
            "n_candidates": len(self.candidates),
            "extra": json.dumps(self.facts, sort_keys=True, ensure_ascii=False),
        }


def pool_name(dataset: str, difficulty: str, band: LengthBand) -> str:
    return f"{dataset}-{difficulty}-{band.name}".lower()
