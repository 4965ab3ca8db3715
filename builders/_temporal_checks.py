"""The Temporal Summarization invariants, checked on a pool as written (audit joined in).

What a verifier can prove from the parquet alone (frame bytes, the audit's extras and
provenance), without trusting the builder:

1. a candidate's text is image placeholders only, one per frame, and its frames share one size;
   its extras (`grid_index`, `frame_pts`, `block_of_frame`) have one entry per frame;
2. each group is one positive and its negatives, all four of a query's candidates;
3. the positive is in time order: grid indices strictly increasing, consecutive inside a block,
   each grid time inside its block's recorded span, every block non-empty and blocks in order,
   and every frame's pts within one source frame interval of its grid time;
4. a hard negative holds exactly the positive's frames (sha256 multiset) and the structure its
   variant names: block by block the same frames as the positive's block, in the order
   `reversal` (all blocks reversed, or every frame reversed), `front_shuffle` (a non-identity
   permutation of the first floor(m/2) blocks, the rest in place) or `back_shuffle` (the
   converse); the three variants differ pairwise and from the positive, frame by frame;
5. easy negatives come from other videos, are in time order and have their positive's length to
   the nearest frame (the same frames wherever the videos' frames are one size);
6. no video appears in two groups of the pool, and no frame of one group in another.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter, defaultdict
from typing import Iterator

from mmlongembed.core.builder import Problem
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.ops.temporal import HARD_VARIANTS, order_problem
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE

PTS_SLACK = 1e-6


def _size(image: dict) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(image["bytes"])) as im:
        return im.height, im.width


def _blocks(hashes: list[str], block_of: list[int]) -> tuple[list[int], dict[int, tuple[str, ...]]] | None:
    """The candidate as contiguous blocks: (block ids in shown order, block id -> its frames);
    None when a block id comes back after another block (a block split apart)."""
    order: list[int] = []
    frames: dict[int, list[str]] = defaultdict(list)
    for h, b in zip(hashes, block_of):
        if not order or order[-1] != b:
            if b in frames:
                return None
            order.append(b)
        frames[b].append(h)
    return order, {b: tuple(v) for b, v in frames.items()}


def check_temporal_pool(pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterator[Problem]:
    name = pool_row["pool"]
    try:
        facts = json.loads(pool_row.get("extra") or "{}")
    except json.JSONDecodeError:
        facts = {}
    fps = float(facts.get("fps") or 1.0)

    def problem(check: str, detail: str) -> Problem:
        return Problem(name, check, detail)

    rows, problems = _candidate_rows(problem, corpus)
    yield from problems
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["group"]].append(row)
    videos_in: dict[str, set] = defaultdict(set)
    frames_in: dict[str, set] = defaultdict(set)
    for group, members in groups.items():
        positives = [r for r in members if r["role"] == POSITIVE]
        if len(positives) != 1 or len(members) != 4:
            yield problem("group", f"group {group}: {len(positives)} positives among {len(members)} candidates "
                                   "(expected 1 of 4)")
            continue
        for row in members:
            videos_in[row["video"]].add(group)
            frames_in[group].update(row["hashes"])
        yield from _check_group(problem, group, members, positives[0], fps)
    for video, in_groups in sorted(videos_in.items()):
        if len(in_groups) > 1:
            yield problem("video_once", f"video {video} appears in {len(in_groups)} groups")
    owner: dict[str, str] = {}
    for group, hashes in sorted(frames_in.items()):
        for h in hashes:
            if owner.setdefault(h, group) != group:
                yield problem("frame_once", f"a frame of group {group} is also in group {owner[h]}")
                break


def _candidate_rows(problem, corpus: dict) -> tuple[list[dict], list[Problem]]:
    """The corpus's candidates as rows (frame hashes, extras, provenance), and the problems of
    their frames and extras (rule 1); a candidate whose extras do not match its frames is left
    out."""
    rows, problems = [], []
    for i, cid in enumerate(corpus["_id"]):
        images = corpus["images"][i] or []
        text = corpus["text"][i]
        provenance = json.loads(corpus["provenance"][i] or "{}")
        row = {"id": cid, "role": corpus["role"][i], "group": corpus["group"][i],
               "video": corpus["video_id"][i], "n_tokens": corpus["n_tokens"][i], "grid": list(corpus["grid_index"][i] or []),
               "pts": list(corpus["frame_pts"][i] or []), "block_of": list(corpus["block_of_frame"][i] or []),
               "variant": corpus["variant"][i], "provenance": provenance,
               "hashes": [hashlib.sha256(im["bytes"]).hexdigest() for im in images]}
        if text != IMAGE_PLACEHOLDER * len(images):
            problems.append(problem("placeholders_only", f"{cid}: the text is not {len(images)} image placeholders "
                                                         "alone"))
        if len({_size(im) for im in images}) > 1:
            problems.append(problem("frame_size", f"{cid}: its frames differ in size"))
        if not len(row["grid"]) == len(row["pts"]) == len(row["block_of"]) == len(images):
            problems.append(problem("frame_extras", f"{cid}: {len(images)} frames but {len(row['grid'])} grid "
                                                    f"indices, {len(row['pts'])} pts, "
                                                    f"{len(row['block_of'])} block ids"))
            continue
        rows.append(row)
    return rows, problems


def _check_group(problem, group: str, members: list[dict], positive: dict, fps: float) -> Iterator[Problem]:
    """One group (rules 2 to 5): the positive in time order, each hard negative its positive's
    frames in its variant's structure, each easy negative another video's frames in time order."""
    yield from _check_chronological(problem, positive, fps, strict_blocks=True)
    structure = _blocks(positive["hashes"], positive["block_of"])
    seen = {tuple(positive["hashes"]): "positive"}
    for row in members:
        if row is positive:
            continue
        if row["role"] == EASY_NEGATIVE:
            if row["video"] == positive["video"]:
                yield problem("easy_other_video", f"{row['id']}: from the query's own video {row['video']}")
            frame_tokens = row["n_tokens"] / max(1, len(row["hashes"]))
            if abs(row["n_tokens"] - positive["n_tokens"]) > frame_tokens / 2:
                yield problem("easy_length", f"{row['id']}: {row['n_tokens']} tokens beside its positive's "
                                             f"{positive['n_tokens']} (an easy negative has the positive's length, "
                                             "to the nearest frame)")
            yield from _check_chronological(problem, row, fps, strict_blocks=False)
            continue
        if row["role"] != HARD_NEGATIVE:
            yield problem("role", f"{row['id']}: unexpected role {row['role']!r}")
            continue
        if row["video"] != positive["video"]:
            yield problem("hard_same_video", f"{row['id']}: not from its positive's video")
        if Counter(row["hashes"]) != Counter(positive["hashes"]):
            yield problem("hard_same_frames", f"{row['id']}: its frames are not exactly its positive's")
            continue
        key = tuple(row["hashes"])
        if key in seen:
            yield problem("hard_distinct", f"{row['id']} ({row['variant']}) shows the frames in the same order "
                                           f"as the {seen[key]}")
        seen[key] = row["variant"]
        yield from _check_structure(problem, row, positive, structure)
    variants = sorted(r["variant"] for r in members if r["role"] == HARD_NEGATIVE)
    if variants and variants != sorted(HARD_VARIANTS):
        yield problem("hard_variants", f"group {group}: hard variants {variants}, expected {sorted(HARD_VARIANTS)}")


def _check_chronological(problem, row: dict, fps: float, strict_blocks: bool) -> Iterator[Problem]:
    grid, pts, block_of = row["grid"], row["pts"], row["block_of"]
    if any(b <= a for a, b in zip(grid, grid[1:])) or any(b <= a for a, b in zip(pts, pts[1:])):
        yield problem("time_order", f"{row['id']}: frames are not in time order")
        return
    if any(b < a for a, b in zip(block_of, block_of[1:])):
        yield problem("time_order", f"{row['id']}: blocks are not in time order")
        return
    source_fps = row["provenance"].get("source_fps")
    slack = (1.0 / source_fps if source_fps else 1.0 / fps) + PTS_SLACK
    for j, t in zip(grid, pts):
        if abs(t - j / fps) > slack:
            yield problem("frame_pts", f"{row['id']}: grid frame {j} has pts {t}, beyond one source frame interval")
            break
    if not strict_blocks:
        return
    blocks = row["provenance"].get("blocks") or []
    if sorted(set(block_of)) != list(range(len(blocks))):
        yield problem("blocks", f"{row['id']}: frames name blocks {sorted(set(block_of))}, provenance has "
                                f"{len(blocks)} (every block must hold a frame)")
        return
    for k, block in enumerate(blocks):
        members = [j for j, b in zip(grid, block_of) if b == k]
        if any(b - a != 1 for a, b in zip(members, members[1:])):
            yield problem("blocks", f"{row['id']}: block {k}'s grid frames are not consecutive")
        if any(not block["start"] - PTS_SLACK <= j / fps < block["end"] + PTS_SLACK for j in members):
            yield problem("blocks", f"{row['id']}: a frame of block {k} lies outside [{block['start']}, {block['end']})")
        if len(members) != block["n_frames"]:
            yield problem("blocks", f"{row['id']}: block {k} holds {len(members)} frames, provenance says "
                                    f"{block['n_frames']}")
    if any(b["start"] < a["end"] - PTS_SLACK for a, b in zip(blocks, blocks[1:])):
        yield problem("blocks", f"{row['id']}: blocks overlap in time")


def _check_structure(problem, row: dict, positive: dict, structure) -> Iterator[Problem]:
    variant = row["variant"]
    if variant not in HARD_VARIANTS:
        yield problem("hard_variants", f"{row['id']}: unknown variant {variant!r}")
        return
    if variant == "reversal" and row["provenance"].get("reversal") == "frames":
        if row["hashes"] != positive["hashes"][::-1]:
            yield problem("hard_structure", f"{row['id']}: not the positive's frames in reverse order")
        return
    mine = _blocks(row["hashes"], row["block_of"])
    if structure is None or mine is None:
        yield problem("hard_structure", f"{row['id']}: its event blocks are not contiguous")
        return
    order, frames = mine
    _, positive_frames = structure
    if any(frames.get(b) != positive_frames.get(b) for b in set(frames) | set(positive_frames)):
        yield problem("hard_structure", f"{row['id']}: a block does not hold exactly its positive's block's frames "
                                        "in their order")
        return
    why = order_problem(variant, order, len(positive_frames))
    if why:
        yield problem("hard_structure", f"{row['id']} ({variant}): {why}")
