"""Temporal Summarization pools exported as an mteb text-to-video retrieval task: the clips are the
release's frames (byte for byte, in candidate order), ids and qrels are the release's, mteb
evaluates every pool as an hf_subset, and the card's sampling warning counts the hard negatives
that mteb's default frame selection cannot tell from their positive."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")
pytest.importorskip("mteb", reason="the optional extra [mteb] is not installed")

from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.output.layout import pool_rows, read_built_pool  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from builders.activitynet import ActivityNetBuilder
    from mmlongembed.build.run import run_build

    root = tmp_path_factory.mktemp("temporal")
    builder = ActivityNetBuilder()
    config = builder.example_config(root / "sources")
    build = run_build(builder, config, root / "out", progress=False)
    assert cli_main(["mveb", "export-temporal", str(build), "--output", str(root / "mteb")]) == 0
    return build, root / "mteb" / "activitynet-mteb"


def test_export_keeps_frames_ids_and_qrels(exported):
    import datasets

    from mmlongembed.media.clips import clip_frames
    from mmlongembed.video_tasks.mteb_tasks import _encoded

    build, out = exported
    pools = [r["pool"] for r in pool_rows(build) if r["modality"] == "video"]
    spec = json.loads((out / "tasks.json").read_text())
    assert [t["name"] for t in spec["tasks"]] == ["ActivitynetTemporalT2VRetrieval"]
    assert sorted(spec["tasks"][0]["metadata"]["eval_langs"]) == sorted(pools)
    assert spec["tasks"][0]["metadata"]["category"] == "t2v"
    for pool in pools:
        release = read_built_pool(build, pool)
        corpus = _encoded(datasets.load_dataset(str(out), f"{pool}-corpus", split="test"))
        clips = dict(zip(corpus["id"], corpus["video"]))
        assert set(clips) == set(release.corpus["_id"])
        for i, doc in enumerate(release.corpus["_id"]):
            frames, duration = clip_frames(clips[doc]["bytes"])
            assert frames == [image["bytes"] for image in release.corpus["images"][i]]  # same JPEGs, same order
            assert duration == pytest.approx(len(frames) / json.loads(
                next(r for r in pool_rows(build) if r["pool"] == pool)["extra"])["fps"])
        queries = datasets.load_dataset(str(out), f"{pool}-queries", split="test")
        assert dict(zip(queries["id"], queries["text"])) == dict(zip(release.queries["_id"], release.queries["text"]))
        qrels = datasets.load_dataset(str(out), f"{pool}-qrels", split="test")
        assert sorted(zip(qrels["query-id"], qrels["corpus-id"])) == sorted(
            zip(release.qrels["query-id"], release.qrels["corpus-id"]))


def test_sampling_warning_counts_what_the_default_sampling_hides(exported):
    from mmlongembed.media.clips import mteb_frame_indices
    from mmlongembed.video_tasks.temporal import pool_warnings

    build, out = exported
    card = (out / "README.md").read_text()
    assert "SYNTHETIC" in card  # the fixture build's annotations are made up: so is the export
    assert "Every candidate has at most 64 frames" in card  # fixture candidates are short
    pool = next(r["pool"] for r in pool_rows(build) if r["pool"].endswith("hard-96"))
    corpus = read_built_pool(build, pool).corpus
    # a model that reads 4 frames: the warning must match a direct look at every back-half shuffle
    warning = pool_warnings(pool, corpus, 1.0, fps=2.0, max_frames=4)
    positives = {g: s for g, s, r in zip(corpus["group"], corpus["grid_index"], corpus["role"]) if r == "positive"}
    hidden = lost = 0
    for group, grid, variant in zip(corpus["group"], corpus["grid_index"], corpus["variant"]):
        if variant == "back_shuffle":
            chosen = mteb_frame_indices(len(grid), float(len(grid)), fps=2.0, max_frames=4)
            hidden += [positives[group][k] for k in chosen] == [grid[k] for k in chosen]
            lost += any(positives[group][k] != grid[k] for k in range(len(grid)) if k not in chosen)
    back = warning["variants"]["back_shuffle"]
    assert back["negatives"] == sum(1 for v in corpus["variant"] if v == "back_shuffle") > 0
    assert back["indistinguishable"] == hidden
    assert back["some_changed_frames_dropped"] == lost > 0
    assert warning["candidates_over_limit"] == sum(1 for g in corpus["grid_index"] if len(g) > 4)


def test_mteb_scores_every_pool(exported):
    from harness.mteb.video import SeededMediaEncoder, evaluate
    from mmlongembed.video_tasks.cli import load_task_dir

    build, out = exported
    outcome = evaluate(SeededMediaEncoder(), load_task_dir(out))
    scores = outcome["results"]["ActivitynetTemporalT2VRetrieval"]["scores"]
    assert set(scores) == {r["pool"] for r in pool_rows(build) if r["modality"] == "video"}
    assert all(0.0 <= s["ndcg_at_10"] <= 1.0 and np.isfinite(s["ndcg_at_10"]) for s in scores.values())
