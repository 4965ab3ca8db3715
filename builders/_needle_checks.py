"""The Visual Grounding invariants, checked on a pool as written, and the grid's measures.

What a verifier can prove from the parquet alone: each document holds its needle exactly once
at the recorded character range (a text needle) or image index and sha256 (an image needle); no
haystack holds another needle, answer or needle image of its pool; the recorded token index and
realised depth recount from the stored text and image sizes; every qrel joins a query to the
document of the same needle, one document per needle.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import defaultdict
from typing import Iterator

from mmlongembed.core.builder import Problem
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.ops.needle import needle_token_index
from mmlongembed.core.pools import LEXICAL, Pool

LEXICAL_ROW = " (lexical tier)"  # the confusability row of the lexical tier's cells: "text (lexical tier)"
from mmlongembed.core.tokens import default_counter


def check_needle_pool(pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterator[Problem]:
    """The needle invariants of one pool as written (``NeedleBuilder.validate_pool``)."""
    from PIL import Image

    name = pool_row["pool"]
    counter = default_counter()
    provenances = [json.loads(p) for p in corpus["provenance"]]
    needle_texts = [p["needle_text"] for p in provenances if p.get("needle_text")]
    answers = [p["answer"] for p in provenances if p.get("answer")]
    needle_hashes = [p["needle_sha256"] for p in provenances if p.get("needle_sha256")]
    for i, (cid, provenance) in enumerate(zip(corpus["_id"], provenances)):
        text, images = corpus["text"][i], corpus["images"][i]
        a, b = provenance["needle_char_range"]
        image_bytes = [im["bytes"] for im in images]
        if provenance["needle_modality"] == "text":
            needle = provenance["needle_text"]
            if text[a:b] != needle:
                yield Problem(name, "needle_position", f"{cid}: the recorded range does not hold its needle")
                continue
            if text.count(needle) != 1:
                yield Problem(name, "one_needle", f"{cid} holds its needle {text.count(needle)} times")
            haystack_text, haystack_images = text[:a] + text[b:], image_bytes
        else:
            index = provenance["needle_image_index"]
            if text[a:b] != IMAGE_PLACEHOLDER or text[:a].count(IMAGE_PLACEHOLDER) != index \
                    or index >= len(image_bytes) \
                    or hashlib.sha256(image_bytes[index]).hexdigest() != provenance["needle_sha256"]:
                yield Problem(name, "needle_position", f"{cid}: the recorded image is not its needle")
                continue
            haystack_text = text[:a] + text[b:]
            haystack_images = image_bytes[:index] + image_bytes[index + 1:]
        lowered = haystack_text.lower()
        leaked = [s for s in needle_texts + answers if s.lower() in lowered]
        leaked += [h[:12] for h in needle_hashes
                   if any(hashlib.sha256(x).hexdigest() == h for x in haystack_images)]
        if leaked:
            yield Problem(name, "needle_in_haystack", f"{cid}: haystack holds needle material {leaked[:3]}")
        sizes = []
        for im in images:
            with Image.open(io.BytesIO(im["bytes"])) as opened:
                sizes.append((opened.height, opened.width))
        token_index = needle_token_index(text, sizes, a, counter)
        if token_index != corpus["realised_token_index"][i]:
            yield Problem(name, "needle_token_index",
                          f"{cid}: recorded {corpus['realised_token_index'][i]}, recounted {token_index}")
        haystack_tokens = corpus["n_tokens"][i] - provenance["needle_tokens"]
        expected = round(min(1.0, token_index / max(1, haystack_tokens)), 6)
        if abs(expected - corpus["realised_depth"][i]) > 1e-6:
            yield Problem(name, "realised_depth", f"{cid}: recorded {corpus['realised_depth'][i]}, "
                                                  f"recomputed {expected}")
    needle_of_query = dict(zip(queries["_id"], queries["needle_id"]))
    needle_of_candidate = dict(zip(corpus["_id"], corpus["needle_id"]))
    for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]):
        if s > 0 and needle_of_query.get(q) != needle_of_candidate.get(c):
            yield Problem(name, "needle_qrel", f"query {q} and its positive {c} name different needles")
    if len(corpus["_id"]) != len(queries["_id"]):
        yield Problem(name, "one_document_per_needle",
                      f"{len(corpus['_id'])} documents for {len(queries['_id'])} needles")


def confusability(pools: list[Pool], shortcuts: dict[str, dict]) -> dict:
    """BM25 P@1 of each pool's queries ranking all of the pool's candidates (the build's
    shortcut check, ties at the top shared), averaged per needle modality and length."""
    per_pool = {}
    sums: dict[tuple[str, int], list[float]] = defaultdict(list)
    by_background: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for pool in pools:
        p = shortcuts[pool.name]["bm25"]
        per_pool[pool.name] = round(p, 4)
        modality = pool.facts["needle_modality"]
        if pool.difficulty == LEXICAL:  # the lexical tier's cells are their own row, apart from the paper's
            modality += LEXICAL_ROW
        sums[(modality, pool.band.target)].append(p)
        by_background[(modality, pool.facts["background"], pool.band.target)].append(p)
    by_modality: dict[str, dict[int, float]] = defaultdict(dict)
    for (modality, length), values in sums.items():
        by_modality[modality][length] = round(sum(values) / len(values), 4)
    table = defaultdict(dict)
    for (modality, background, length), values in by_background.items():
        table[f"{modality}/{background}"][length] = round(sum(values) / len(values), 4)
    return {"per_pool": per_pool, "by_modality": dict(by_modality), "by_background": dict(table)}


def card_statistics(pools: list[Pool], shortcuts: dict[str, dict]) -> dict:
    """What the card tells of the built grid: the needle sets (one row per needle modality and
    family), each cell's payload, mean realised depth and BM25 P@1, and the confusability figures."""
    figures = confusability(pools, shortcuts)
    cells = []
    for pool in pools:
        payload = 0
        for c in pool.candidates:
            text, images = c.document.render()
            payload += len(text.encode()) + sum(len(b) for b in images)
        realised = [c.extra["realised_depth"] for c in pool.candidates]
        cells.append({"pool": pool.name, "payload_mb": round(payload / 1e6, 2),
                      "realised_depth_mean": round(100 * sum(realised) / len(realised), 1),
                      "bm25": figures["per_pool"].get(pool.name)})
    total_mb = round(sum(c["payload_mb"] for c in cells), 1)
    sets: dict[tuple[str, str], dict] = {}
    for pool in pools:
        facts = pool.facts
        entry = sets.setdefault((facts["needle_modality"], facts["needle_family"]), {
            "modality": facts["needle_modality"], "family": facts["needle_family"],
            "varying": facts["family"].get("varying", ""), "needles": len(pool.queries), "cells": 0})
        entry["cells"] += 1
    return {"needle_sets": list(sets.values()), "cells": cells, "payload_total_mb": total_mb,
            "confusability": figures}
