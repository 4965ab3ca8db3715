"""The MMLongBench page-window invariants, checked on a pool as written, and the card's page
statistics (private: the registry scan skips it).

What a verifier can prove from the parquet alone: candidates are page images behind one
placeholder each (no page number, file name or title); a positive is a head window of its
document; a hard negative is that window with the slots covering its token fraction replaced by
a contiguous run of unseen pages of the same document, every other page byte-identical to the
positive's; an easy negative is another document's head window; no page of one query's positive
appears in another query's group.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from typing import Iterator

from mmlongembed.core.builder import Problem
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.ops.pages import HARD_VARIANTS
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, Pool
from mmlongembed.core.tokens import image_tokens


def page_statistics(pools: list[Pool]) -> dict:
    """Stored page sizes (distinct pages) and pages per candidate per pool, for the card."""
    sizes: Counter = Counter()
    seen: set[int] = set()
    per_pool = []
    for pool in pools:
        counts = [len(c.document.segments) for c in pool.candidates]
        per_page = [s.tokens for c in pool.candidates for s in c.document.segments]
        for c in pool.candidates:
            for s in c.document.segments:
                if id(s.image) not in seen:
                    seen.add(id(s.image))
                    sizes[(s.height, s.width)] += 1
        if counts:
            per_pool.append({"pool": pool.name, "pages_min": min(counts), "pages_median": statistics.median(counts),
                             "pages_max": max(counts), "page_tokens_min": min(per_page),
                             "page_tokens_max": max(per_page)})
    return {"sizes": [{"height": h, "width": w, "tokens": image_tokens(h, w), "pages": n}
                      for (h, w), n in sorted(sizes.items(), key=lambda kv: -kv[1])],
            "pools": per_pool, "distinct_pages": len(seen)}


def query_sources(pools: list[Pool]) -> dict:
    found: Counter = Counter()
    for pool in pools:
        for q in pool.queries:
            found[q.extra.get("query_source", "")] += 1
    return dict(sorted(found.items()))


def check_page_pool(pool_row: dict, corpus: dict, qrels: dict) -> Iterator[Problem]:
    """The page-window invariants (issue: intra-document replacement), on the data as written."""
    name = pool_row["pool"]
    n_rows = len(corpus["_id"])
    rows = {corpus["_id"][i]: {k: corpus[k][i] for k in ("text", "images", "role", "group", "source_id",
                                                           "page_indices", "provenance")} for i in range(n_rows)}
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    groups: dict[str, list[str]] = defaultdict(list)
    for cid, row in rows.items():
        groups[row["group"]].append(cid)
        images = [im["bytes"] for im in row["images"]]
        if row["text"] != IMAGE_PLACEHOLDER * len(images):
            yield Problem(name, "placeholders_only", f"{cid}: the text is more than one placeholder per page")
        row["bytes"] = images
    positive_pages = {}
    for group, pid in positive_of.items():
        positive = rows.get(pid)
        if positive is None:
            continue
        n = len(positive["bytes"])
        positive_pages[group] = set(positive["bytes"])
        if list(positive["page_indices"] or []) != list(range(n)):
            yield Problem(name, "positive_window", f"{pid}: pages {positive['page_indices']} are not a head window")
        sizes = [_size(b) for b in positive["bytes"]]
        costs = [image_tokens(h, w) for h, w in sizes]
        for cid in groups[group]:
            row = rows[cid]
            if row["role"] == HARD_NEGATIVE:
                yield from _check_hard(name, cid, row, positive, n, costs)
            elif row["role"] == EASY_NEGATIVE:
                if row["source_id"] == positive["source_id"]:
                    yield Problem(name, "easy_negative", f"{cid} comes from its query's own document")
                if list(row["page_indices"] or []) != list(range(len(row["bytes"]))):
                    yield Problem(name, "easy_negative", f"{cid} is not a head window of its document")
        roles = Counter(rows[c]["role"] for c in groups[group])
        if roles[HARD_NEGATIVE] not in (0, len(HARD_VARIANTS)) or (roles[HARD_NEGATIVE] and roles[EASY_NEGATIVE]):
            yield Problem(name, "group", f"{group}: {dict(roles)}")
    for group, pages in positive_pages.items():
        for cid, row in rows.items():
            if row["group"] != group and pages & set(row["bytes"]):
                yield Problem(name, "page_exclusivity", f"{cid} (group {row['group']}) holds a page of {group}'s "
                                                        "positive")


def _size(data: bytes) -> tuple[int, int]:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.height, im.width


def _check_hard(name, cid, row, positive, n, costs) -> Iterator[Problem]:
    plan = json.loads(row["provenance"])
    a, b = plan["replaced_slots"]
    c, d = plan["donor_pages"]
    pages = list(row["page_indices"] or [])
    if row["source_id"] != positive["source_id"]:
        yield Problem(name, "hard_negative", f"{cid} comes from another document")
    if pages != [*range(a), *range(c, d), *range(b, n)]:
        yield Problem(name, "replaced_slots", f"{cid}: pages {pages} are not the window with [{a}, {b}) replaced by "
                                              f"unseen pages [{c}, {d})")
    if c < n:
        yield Problem(name, "replaced_slots", f"{cid}: donor pages [{c}, {d}) overlap the window [0, {n})")
    kept_head, kept_tail = row["bytes"][:a], row["bytes"][a + (d - c):]
    if kept_head != positive["bytes"][:a] or kept_tail != positive["bytes"][b:]:
        yield Problem(name, "kept_pages", f"{cid}: pages outside the replaced slots differ from the positive's")
    if set(row["bytes"][a:a + (d - c)]) & set(positive["bytes"]):
        yield Problem(name, "replaced_slots", f"{cid}: a replacement page is one of the positive's pages")
    total = sum(costs)
    start, end = plan["fraction"]
    removed = sum(costs[a:b])
    if abs(removed - (end - start) * total) > max(costs[a:b] or [0]) or abs(sum(costs[:a]) - start * total) > max(costs):
        yield Problem(name, "replaced_fraction", f"{cid}: slots [{a}, {b}) are {removed / total:.0%} of the tokens "
                                                 f"from {sum(costs[:a]) / total:.0%}, not within one page of "
                                                 f"{end - start:.0%} from {start:.0%}")
