"""The HotpotQA Multi-Source Reasoning invariants, checked on a pool as written, and the card's
refill statistics.

What a verifier can prove from the parquet alone, without trusting the builder:

1. every positive records as many evidence spans as its question has supporting facts, each
   holding the recorded sentence, at token ranges an independent recount of the final text gives;
2. no candidate but a query's positive holds all of that query's evidence (every query ranks the
   whole pool);
3. a hard negative lacks the evidence it records as removed (and that is the positive's);
4. an easy negative holds none of its query's evidence;
5. no padding range of any candidate holds its query's answer (whole word; yes/no exempt).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from typing import Iterator

from mmlongembed.core.builder import Problem
from mmlongembed.core.digests import short_sha256
from mmlongembed.ops.multisource.evidence import texts_holding, token_offsets_at
from mmlongembed.ops.multisource.padding import answer_pattern
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Pool
from mmlongembed.core.tokens import TokenCounter, default_counter


def check_hotpotqa_pool(pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterator[Problem]:
    name = pool_row["pool"]
    text_of = dict(zip(corpus["_id"], corpus["text"]))
    provenance_of = {cid: json.loads(raw) for cid, raw in zip(corpus["_id"], corpus["provenance"])}
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    evidence_of, problems = _recorded_evidence(name, text_of, provenance_of, positive_of)
    yield from problems
    yield from _second_documents(name, text_of, positive_of, evidence_of)
    counter = default_counter()
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
        yield from _answer_in_padding(name, cid, text, provenance, answer, answers)


def _recorded_evidence(name: str, text_of: dict, provenance_of: dict,
                       positive_of: dict) -> tuple[dict[str, dict[int, str]], list[Problem]]:
    """Each group's evidence sentences as its positive records them (index -> text), and the
    positives that record fewer or more spans than their question's supporting facts."""
    evidence_of: dict[str, dict[int, str]] = {}
    problems = []
    for group, cid in positive_of.items():
        text, provenance = text_of.get(cid, ""), provenance_of.get(cid, {})
        spans = provenance.get("evidence", [])
        evidence_of[group] = {}
        if len(spans) != provenance.get("n_evidence"):
            problems.append(Problem(name, "evidence_positions", f"{cid}: {len(spans)} evidence spans recorded, "
                                                                f"{provenance.get('n_evidence')} expected"))
        for span in spans:
            a, b = span["char_range"]
            evidence_of[group][span["index"]] = text[a:b].strip()
    return evidence_of, problems


def _second_documents(name: str, text_of: dict, positive_of: dict, evidence_of: dict) -> Iterator[Problem]:
    """Every query ranks the whole pool: no candidate but its positive may hold all its evidence."""
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


def _answer_in_padding(name: str, cid: str, text: str, provenance: dict, answer: str,
                       answers: dict[str, tuple]) -> Iterator[Problem]:
    """The first padding range of a candidate that holds its query's answer, if any (``answers``
    remembers each answer's patterns across the pool)."""
    if answer not in answers:
        pattern = answer_pattern(answer)
        # the answer's letters, case and word boundaries aside
        anywhere = re.compile(re.escape(answer.strip()), re.IGNORECASE) if pattern else None
        answers[answer] = (pattern, anywhere)
    pattern, anywhere = answers[answer]
    if pattern is None:
        return
    # only a padding range that holds one of the places where they stand (overlaps too) can hold
    # the answer
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


def refill_statistics(pools: list[Pool]) -> dict:
    """How exactly the refills of the hard pools (the hard negatives' and the positives' own)
    match the sentences they replace (token length of the refill minus that of the removed
    sentence, as measured in place), where they come from, and how far each hard negative's length
    is from its positive's."""
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
        per_pool[pool.name] = _refill_summary(*mine)
        for collected, more in zip(total, mine):
            if isinstance(collected, Counter):
                collected.update(more)
            else:
                collected.extend(more)
    return {"all": _refill_summary(*total), "per_pool": per_pool}


def _refill_summary(diffs: list[int], ratios: list[float], ranks: list[int], kinds: Counter,
                    lengths: list[int]) -> dict:
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
