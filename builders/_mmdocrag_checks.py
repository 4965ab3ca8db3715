"""The MMDocRAG gold-quote invariants, checked on a pool as written, and the card's evidence
statistics.

What a verifier can prove from the parquet alone (text, image bytes, provenance):

1. a candidate's image placeholders match its images in number, and every recorded evidence
   position (a character range, an image slot) holds the quote it names;
2. the positive records 2 to 5 gold quotes and holds them all; exactly one candidate per query
   (its positive) holds all of them;
3. a hard negative holds every gold quote but the ones it dropped, and an image refill costs the
   removed image's tokens exactly; an easy negative holds none;
4. no candidate of a query is padded with a page of the query's own document.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterator

from mmlongembed.core.builder import Problem
from mmlongembed.core.digests import short_sha256
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Pool
from mmlongembed.readers.mmdocrag import MAX_EVIDENCE, MIN_EVIDENCE


def evidence_statistics(pools: list[Pool]) -> dict:
    """Evidence per query (text and image quotes), images per candidate, for the card."""
    per_pool = []
    for pool in pools:
        kinds = Counter()
        n_evidence = []
        for c in pool.candidates:
            if c.role != POSITIVE:
                continue
            evidence = c.provenance.get("evidence", [])
            n_evidence.append(len(evidence))
            kinds.update(e["kind"] for e in evidence)
        images = [sum(1 for s in c.document.segments if s.is_visual) for c in pool.candidates]
        if n_evidence:
            per_pool.append({"pool": pool.name, "queries": len(pool.queries), "text_quotes": kinds.get("text", 0),
                             "image_quotes": kinds.get("image", 0), "evidence_min": min(n_evidence),
                             "evidence_max": max(n_evidence), "images_min": min(images), "images_max": max(images)})
    return {"pools": per_pool}


def check_quote_pool(pool_row: dict, corpus: dict, qrels: dict) -> Iterator[Problem]:
    """Gold-quote invariants on the data as written (issue: exactly one candidate per query holds
    all its gold quotes, and it is the positive; placeholders match the images in order)."""
    name = pool_row["pool"]
    rows = _written_rows(corpus)
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    for cid, row in rows.items():
        yield from _placement_problems(name, cid, row)
    gold_of: dict[str, dict[int, tuple[str, str]]] = {}
    for group, pid in positive_of.items():
        positive = rows.get(pid)
        if positive is None:
            continue
        gold = gold_of[group] = _gold_of(positive)
        if len(gold) != positive["provenance"].get("n_evidence") or not MIN_EVIDENCE <= len(gold) <= MAX_EVIDENCE:
            yield Problem(name, "evidence_count", f"{pid}: {len(gold)} gold quotes recorded")
    for group, gold in gold_of.items():
        if gold:
            yield from _group_problems(name, group, gold, positive_of[group], rows)


def _written_rows(corpus: dict) -> dict[str, dict]:
    """Candidate id -> its text, image hashes, role, group, document name and provenance."""
    return {cid: {"text": corpus["text"][i], "images": [short_sha256(im["bytes"]) for im in corpus["images"][i]],
                  "role": corpus["role"][i], "group": corpus["group"][i], "doc_name": corpus["doc_name"][i],
                  "provenance": json.loads(corpus["provenance"][i])}
            for i, cid in enumerate(corpus["_id"])}


def _placement_problems(name: str, cid: str, row: dict) -> Iterator[Problem]:
    """Placeholders match the images, and each recorded evidence position holds its quote."""
    if row["text"].count(IMAGE_PLACEHOLDER) != len(row["images"]):
        yield Problem(name, "image_placeholders", f"{cid}: placeholders and images differ in number")
    for e in row["provenance"].get("evidence", []):
        if e["kind"] == "image":
            slot = e["image_slot"]
            if slot >= len(row["images"]) or row["images"][slot] != e["sha256"]:
                yield Problem(name, "image_slots", f"{cid}: evidence {e['index']} is not image {slot}")
        else:
            a, b = e["char_range"]
            if short_sha256(row["text"][a:b].strip()) != e["sha256"]:
                yield Problem(name, "evidence_positions", f"{cid}: evidence {e['index']} is not at {a}:{b}")


def _gold_of(positive: dict) -> dict[int, tuple[str, str]]:
    """Evidence index -> ("image", its hash) or ("text", the quote as the positive holds it)."""
    gold = {}
    for e in positive["provenance"].get("evidence", []):
        if e["kind"] == "image":
            gold[e["index"]] = ("image", e["sha256"])
        else:
            a, b = e["char_range"]
            gold[e["index"]] = ("text", positive["text"][a:b].strip())
    return gold


def _group_problems(name: str, group: str, gold: dict, positive_id: str, rows: dict) -> Iterator[Problem]:
    """Which candidates hold which of one query's gold quotes, against what their roles allow."""
    for cid, row in rows.items():
        present = {k for k, (kind, value) in gold.items()
                   if (value in row["images"] if kind == "image" else value in row["text"])}
        if cid != positive_id and present == set(gold):
            yield Problem(name, "all_gold_in_one_candidate",
                          f"{cid} holds every gold quote of {group}, whose positive is {positive_id}")
        if row["group"] != group:
            continue
        if row["role"] == POSITIVE and present != set(gold):
            yield Problem(name, "positive_gold", f"{cid} lacks gold quotes {sorted(set(gold) - present)}")
        elif row["role"] == HARD_NEGATIVE:
            yield from _hard_negative_problems(name, cid, row, present, gold)
        elif row["role"] == EASY_NEGATIVE and present:
            yield Problem(name, "easy_negative_gold", f"{cid} holds gold quotes {sorted(present)} of {group}")
    own = rows[positive_id]["doc_name"]
    for cid, row in rows.items():
        if row["group"] == group and any(p["doc"] == own for p in row["provenance"].get("padding", [])):
            yield Problem(name, "padding_source", f"{cid} is padded with a block of its query's own document")


def _hard_negative_problems(name: str, cid: str, row: dict, present: set, gold: dict) -> Iterator[Problem]:
    dropped = {r["index"] for r in row["provenance"].get("removed", [])}
    if present & dropped or present != set(gold) - dropped:
        yield Problem(name, "removed_quote", f"{cid}: holds gold {sorted(present)}, dropped {sorted(dropped)}")
    for r in row["provenance"].get("removed", []):
        if r["kind"] == "image" and r["replacement"]["tokens"] != r["tokens"]:
            yield Problem(name, "image_refill", f"{cid}: image refill of {r['replacement']['tokens']} "
                                                f"tokens for {r['tokens']}")
