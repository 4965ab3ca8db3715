"""``mmle mveb export-temporal``: a Temporal Summarization build (``activitynet``, ``youkudc``) as
an mteb ``Any2AnyRetrieval`` task (text -> video), one hf_subset per pool.

Each candidate's ordered frames become one clip (``mmlongembed.media.clips.mux_clip``: the
stored JPEGs as Motion JPEG packets, at the pool's frame rate, so frame j plays at j / fps); the
queries are the release's query texts; ids and qrels are the release's own (opaque). The card
warns where mteb's default frame sampling (``FramesCollator``: 2 fps, at most 64 frames) drops
frames that a hard negative changes: a candidate of more than 64 frames is seen through 64
evenly spaced frames, and when every position a back-half shuffle moved falls between them the
negative looks exactly like the positive.
"""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from pathlib import Path

from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import pool_rows, read_built_pool
from mmlongembed.output.manifest import toolkit_identity
from mmlongembed.media.clips import CLIP_FORMAT, MTEB_FPS, MTEB_MAX_FRAMES, mteb_frame_indices, mux_clip
from mmlongembed.media.video import Frame
from mmlongembed.ops.mveb import TEST
from mmlongembed.core.pools import HARD_NEGATIVE, POSITIVE
from mmlongembed.video_tasks.tasks import TaskOutput, camel
from mmlongembed.video_tasks.writer import write_repo, write_task_folder

HARD_VARIANTS = ("back_shuffle", "front_shuffle", "reversal")


def _frame(image: bytes, index: int) -> Frame:
    from PIL import Image

    with Image.open(io.BytesIO(image)) as handle:
        width, height = handle.size
    return Frame(index, float(index), image, height, width)


def sampling_check(positive: list[int], negative: list[int], clip_fps: float, **sampling) -> dict:
    """How mteb's frame selection treats one hard negative: the positions where its frames differ
    from the positive's (``changed``), how many of them the selection drops, and whether the
    selected frames of the two are identical (then no model can tell them apart)."""
    n = len(positive)
    chosen = set(mteb_frame_indices(n, n / clip_fps, **sampling))
    changed = [k for k in range(n) if positive[k] != negative[k]]
    dropped = [k for k in changed if k not in chosen]
    return {"frames": n, "selected": len(chosen), "changed": len(changed), "changed_dropped": len(dropped),
            "indistinguishable": bool(changed) and len(dropped) == len(changed)}


def pool_warnings(pool: str, corpus: dict, clip_fps: float, **sampling) -> dict:
    """Per hard variant: negatives checked, negatives with dropped changed frames, negatives the
    default sampling makes identical to their positive; and frame counts."""
    positives = {corpus["group"][i]: corpus["grid_index"][i] for i in range(len(corpus["_id"]))
                 if corpus["role"][i] == POSITIVE}
    per_variant: dict[str, Counter] = {}
    for i in range(len(corpus["_id"])):
        variant = corpus["variant"][i]
        if corpus["role"][i] != HARD_NEGATIVE or variant not in HARD_VARIANTS:
            continue
        check = sampling_check(list(positives[corpus["group"][i]]), list(corpus["grid_index"][i]), clip_fps,
                               **sampling)
        counts = per_variant.setdefault(variant, Counter())
        counts["negatives"] += 1
        counts["some_changed_frames_dropped"] += check["changed_dropped"] > 0
        counts["indistinguishable"] += check["indistinguishable"]
    frames = [len(g) for g in corpus["grid_index"]]
    limit = sampling.get("max_frames", MTEB_MAX_FRAMES)
    return {"pool": pool, "frames_min": min(frames), "frames_max": max(frames),
            "candidates_over_limit": sum(1 for n in frames if limit is not None and n > limit),
            "candidates": len(frames), "variants": {k: dict(v) for k, v in sorted(per_variant.items())}}


def _pool_configs(build_dir: Path, row: dict) -> tuple[dict, dict, dict, dict]:
    """One video pool of the build as the task's three configs: (configs, their features, the
    pool's sampling warnings, its figures)."""
    import datasets

    string = datasets.Value("string")
    pool = row["pool"]
    fps = float(json.loads(row["extra"] or "{}").get("fps") or 1.0)
    tables = read_built_pool(build_dir, pool)
    corpus, queries, qrels = tables.corpus, tables.queries, tables.qrels
    clips = []
    for i in range(len(corpus["_id"])):
        frames = [_frame(image["bytes"], k) for k, image in enumerate(corpus["images"][i])]
        clips.append({"id": corpus["_id"][i], "video": {"bytes": mux_clip(frames, fps),
                                                        "path": f"{corpus['_id'][i]}.mp4"}})
    configs = {
        f"{pool}-corpus": {TEST: clips},
        f"{pool}-queries": {TEST: [{"id": queries["_id"][i], "text": queries["text"][i]}
                                   for i in range(len(queries["_id"]))]},
        f"{pool}-qrels": {TEST: [{"query-id": q, "corpus-id": c, "score": int(s)}
                                 for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"])]},
    }
    features = {
        f"{pool}-corpus": datasets.Features({"id": string, "video": datasets.Video()}),
        f"{pool}-queries": datasets.Features({"id": string, "text": string}),
        f"{pool}-qrels": datasets.Features({"query-id": string, "corpus-id": string,
                                            "score": datasets.Value("int64")}),
    }
    warnings = pool_warnings(pool, corpus, fps, fps=MTEB_FPS, max_frames=MTEB_MAX_FRAMES)
    return configs, features, warnings, {"queries": len(queries["_id"]), "corpus": len(corpus["_id"]), "fps": fps}


def export_temporal(build_dir: Path, output: Path, name: str = "", overwrite: bool = False, language: str = "eng-Latn",
                    progress: bool = True) -> Path:
    build_dir = Path(build_dir)
    manifest = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8")) if (
        build_dir / "manifest.json").is_file() else None
    if manifest is None:
        raise UserError(f"{build_dir}: not a build directory (no manifest.json)")
    pools = [r for r in pool_rows(build_dir) if r["modality"] == "video"]
    if not pools:
        raise UserError(f"{build_dir}: no video (frame-sequence) pool to export")
    name = name or f"{build_dir.name}-mteb"
    final_dir = Path(output) / name
    if final_dir.exists() and not overwrite:
        raise UserError(f"output directory {final_dir} already exists; pass --overwrite to replace it")
    task_name = f"{camel(build_dir.name)}TemporalT2VRetrieval"
    configs, features, warnings, stats = {}, {}, [], {}
    for row in pools:
        pool_configs, pool_features, pool_warning, stats[row["pool"]] = _pool_configs(build_dir, row)
        configs.update(pool_configs)
        features.update(pool_features)
        warnings.append(pool_warning)
    title = f"{build_dir.name}: Temporal Summarization as an mteb task"
    metadata = {"name": task_name, "description": f"Temporal Summarization pools of the MMLongEmbed build "
                f"'{build_dir.name}' (text -> ordered frames, as video clips at the pools' frame rate).",
                "reference": None, "type": "Any2AnyRetrieval", "category": "t2v", "modalities": ["text", "video"],
                "eval_splits": [TEST], "eval_langs": {p["pool"]: [language] for p in pools},
                "main_score": "ndcg_at_10", "date": None, "domains": None, "task_subtypes": None,
                "license": "not specified", "annotations_creators": None, "dialect": [],
                "sample_creation": "created", "bibtex_citation": ""}
    task = TaskOutput(task_name, "retrieval", metadata, None, {}, configs=configs, features=features,
                      stats={"pools": stats, "sampling_warnings": warnings}, family="temporal", variant="t2v")
    context = {"build": build_dir.name, "builder": manifest.get("builder", {}), "warnings": warnings,
               "pools": stats, "clip_format": CLIP_FORMAT, "mteb_fps": MTEB_FPS, "mteb_max_frames": MTEB_MAX_FRAMES,
               "synthetic": bool((manifest.get("sources") or {}).get("synthetic"))}
    export_manifest = {"builder": {"name": "mveb-export-temporal", "kind": "mteb-video-tasks"},
                       "toolkit": toolkit_identity(), "source_build": {
                           "directory": build_dir.name, "builder": manifest.get("builder"),
                           "manifest_files": len(manifest.get("files", {}))},
                       "clip_format": CLIP_FORMAT}
    write_task_folder(final_dir, overwrite, lambda tmp_dir: write_repo(
        tmp_dir, [task], title=title, licence="not specified", template="mveb_temporal.md.j2", context=context,
        manifest=export_manifest, tags=["temporal-summarization"]))
    _print_sampling_warnings(warnings)
    return final_dir


def _print_sampling_warnings(warnings: list[dict]) -> None:
    for w in warnings:
        back = w["variants"].get("back_shuffle", {})
        if w["candidates_over_limit"]:
            print(f"warning: {w['pool']}: {w['candidates_over_limit']} of {w['candidates']} candidates exceed "
                  f"{MTEB_MAX_FRAMES} frames; mteb's default sampling makes {back.get('indistinguishable', 0)} of "
                  f"{back.get('negatives', 0)} back-half shuffles identical to their positive", file=sys.stderr)
