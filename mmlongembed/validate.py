"""`mmle validate <dir>`: recount every length and check every invariant of a written build.

It reads the build the way a user would (parquet files of the published layout), recounts tokens
from the final text and the stored image sizes, and runs the generic checks below plus the
builder's own (`Builder.validate_pool`). Problems are collected, never raised one by one.
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from pathlib import Path

from mmlongembed.builder import Problem, get_builder
from mmlongembed.documents import count_rendered
from mmlongembed.errors import UserError
from mmlongembed.output import data_files_from_card
from mmlongembed.pools import POSITIVE, hard_negative_tolerance
from mmlongembed.tokens import default_counter


def read_table(path: Path) -> dict:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pydict()


def _image_size(image: dict) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(image["bytes"])) as im:
        return im.height, im.width


def check_pool(pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> list[Problem]:
    name = pool_row["pool"]
    problems: list[Problem] = []
    counter = default_counter()

    def problem(check: str, detail: str) -> None:
        problems.append(Problem(name, check, detail))

    ids = corpus["_id"]
    if len(set(ids)) != len(ids):
        problem("duplicate_candidate_id", f"{len(ids) - len(set(ids))} repeated ids")
    texts_seen: dict[tuple, str] = {}
    lengths: dict[str, int] = {}
    for i, cid in enumerate(ids):
        text, images = corpus["text"][i], corpus["images"][i]
        try:
            text_tokens, image_tokens = count_rendered(text, [_image_size(im) for im in images], counter)
        except ValueError as error:
            problem("image_placeholders", f"{cid}: {error}")
            continue
        total = text_tokens + image_tokens
        lengths[cid] = total
        if total != corpus["n_tokens"][i]:
            problem("recount", f"{cid}: stored {corpus['n_tokens'][i]} tokens, recounted {total}")
        if not pool_row["band_min"] <= total <= pool_row["band_max"]:
            problem("length_band", f"{cid}: {total} tokens outside [{pool_row['band_min']}, {pool_row['band_max']}]")
        key = (text, tuple(im["bytes"] for im in images))
        if key in texts_seen:
            problem("duplicate_candidate", f"{cid} has the same content as {texts_seen[key]}")
        texts_seen[key] = cid

    query_ids = queries["_id"]
    if len(set(query_ids)) != len(query_ids):
        problem("duplicate_query_id", f"{len(query_ids) - len(set(query_ids))} repeated ids")
    positives: dict[str, list[str]] = defaultdict(list)
    id_set, query_set = set(ids), set(query_ids)
    for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]):
        if q not in query_set:
            problem("qrels", f"qrel names unknown query {q}")
        if c not in id_set:
            problem("qrels", f"qrel names unknown candidate {c}")
        if s > 0:
            positives[q].append(c)
    roles = dict(zip(ids, corpus["role"]))
    for q in query_ids:
        if len(positives.get(q, [])) != 1:
            problem("one_positive", f"query {q} has {len(positives.get(q, []))} positives")
        elif roles.get(positives[q][0]) != POSITIVE:
            problem("one_positive", f"query {q}'s positive {positives[q][0]} has role {roles.get(positives[q][0])}")

    positive_of_group = {q: c[0] for q, c in positives.items() if len(c) == 1}
    for cid, role, group in zip(ids, corpus["role"], corpus["group"]):
        if role == "hard_negative" and group in positive_of_group and cid in lengths:
            positive_len = lengths.get(positive_of_group[group])
            if positive_len is not None and abs(lengths[cid] - positive_len) > hard_negative_tolerance(positive_len):
                problem("hard_negative_length",
                        f"{cid}: {lengths[cid]} tokens vs positive {positive_len} (tolerance "
                        f"{hard_negative_tolerance(positive_len)})")
    if len(ids) != pool_row["n_candidates"] or len(query_ids) != pool_row["n_queries"]:
        problem("pool_counts", "pools table counts differ from the pool's files")
    return problems


def validate_dir(root: Path) -> tuple[list[Problem], dict]:
    root = Path(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        raise UserError(f"{root} is not a build directory (no manifest.json)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    builder = get_builder(manifest["builder"]["name"])
    files = data_files_from_card(root / "README.md")
    pools = read_table(root / files["pools"])
    problems: list[Problem] = []
    checked = Counter()
    for i, name in enumerate(pools["pool"]):
        row = {k: v[i] for k, v in pools.items()}
        try:
            corpus = read_table(root / files[f"{name}-corpus"])
            queries = read_table(root / files[f"{name}-queries"])
            qrels = read_table(root / files[f"{name}-qrels"])
        except (KeyError, OSError) as error:
            problems.append(Problem(name, "files", f"missing or unreadable: {error}"))
            continue
        problems.extend(check_pool(row, corpus, queries, qrels))
        problems.extend(builder.validate_pool(row, corpus, queries, qrels))
        checked["pools"] += 1
        checked["candidates"] += len(corpus["_id"])
        checked["queries"] += len(queries["_id"])
    return problems, dict(checked)


def format_report(problems: list[Problem], checked: dict, limit: int = 50) -> str:
    head = (f"validated {checked.get('pools', 0)} pools, {checked.get('queries', 0)} queries, "
            f"{checked.get('candidates', 0)} candidates: ")
    if not problems:
        return head + "all invariants hold"
    by_check = Counter(p.check for p in problems)
    lines = [head + f"{len(problems)} problems (" + ", ".join(f"{k}: {v}" for k, v in by_check.most_common()) + ")"]
    lines += [f"  {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)
