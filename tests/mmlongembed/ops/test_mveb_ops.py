"""The pure MVEB operations (cutting, splits, caps, pairs), mteb's frame selection, and the Borda
ranking (against mteb's own leaderboard code) and task pruning, on fixtures (no data, no model)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from harness.mteb.ranking import agreement, borda, priority_order, prune, read_scores_csv, write_scores_csv
from mmlongembed.ops.mveb import (
    TEST, TRAIN, Clip, Dropped, assign_splits, cap_per_class, cut_windows, drop_small_classes, filter_durations,
    first_caption, mveb_pairs, qa_candidates)


def clips(spec: dict[str, int], split=None) -> list[Clip]:
    return [Clip(f"{label}-{k:02d}", f"{label}.mp4", label, k, k + 1.0, split=split)
            for label, n in spec.items() for k in range(n)]


# -- clips -------------------------------------------------------------------------------------------

def test_cut_windows_keeps_whole_windows_and_long_enough_last_ones():
    assert cut_windows(3.0, 1.0, 0.5) == [(0, 1), (1, 2), (2, 3)]
    assert cut_windows(3.4, 1.0, 0.5) == [(0, 1), (1, 2), (2, 3)]  # 0.4 s tail dropped
    assert cut_windows(3.6, 1.0, 0.5) == [(0, 1), (1, 2), (2, 3), (3, 3.6)]
    assert cut_windows(0.8, 1.0, 0.5) == [(0, 0.8)]
    assert cut_windows(0.3, 1.0, 0.5) == [] and cut_windows(5, 0, 0.5) == []


def test_duration_filters_and_small_classes_are_counted():
    dropped = Dropped()
    items = [Clip("a", "a", "x", 0, 0.5), Clip("b", "b", "x", 0, 2), Clip("c", "c", "y", 0, 70)]
    kept = filter_durations(items, 1.0, 60.0, dropped)
    assert [c.clip_id for c in kept] == ["b"]
    assert dropped.counts() == {"longer_than_max_duration": 1, "shorter_than_min_duration": 1}
    kept = drop_small_classes(clips({"x": 3, "y": 1}), 2, dropped)
    assert {c.label for c in kept} == {"x"} and dropped.counts()["class_below_min_clips"] == 1


def test_splits_are_per_class_seeded_and_keep_given_splits():
    items = clips({"a": 10, "b": 3, "c": 1}) + clips({"d": 4}, split=TRAIN)
    first = assign_splits(items, 0.3, 42, "col")
    assert first == assign_splits(list(reversed(items)), 0.3, 42, "col")[::-1]  # order does not matter
    per = Counter((c.label, c.split) for c in first)
    assert per[("a", TEST)] == 3 and per[("a", TRAIN)] == 7
    assert per[("b", TEST)] == 1 and per[("b", TRAIN)] == 2  # every class with two clips reaches test
    assert per[("c", TRAIN)] == 1 and per[("d", TRAIN)] == 4  # one clip cannot be split; given splits stay
    other = assign_splits(items, 0.3, 7, "col")
    assert {c.clip_id for c in first if c.split == TEST} != {c.clip_id for c in other if c.split == TEST}


def test_caps_are_per_class_and_split_a_seeded_choice_in_input_order():
    items = assign_splits(clips({"a": 40, "b": 5}), 0.5, 42, "col")
    dropped = Dropped()
    capped = cap_per_class(items, 8, 42, "col", dropped)
    per = Counter((c.label, c.split) for c in capped)
    assert per == {("a", TRAIN): 8, ("a", TEST): 8, ("b", TRAIN): 3, ("b", TEST): 2}  # round(2.5) = 2
    assert dropped.counts() == {"over_class_cap": 24}
    assert [c for c in items if c in capped] == capped  # input order kept
    a_train = sorted(c.clip_id for c in items if c.label == "a" and c.split == TRAIN)
    assert sorted(c.clip_id for c in capped if c.label == "a" and c.split == TRAIN) != a_train[:8]  # not "first 8"
    again = cap_per_class(items, 8, 42, "col", Dropped())
    assert again == capped and cap_per_class(items, 8, 1, "col", Dropped()) != capped
    assert cap_per_class(items, 0, 42, "col", Dropped()) == items


# -- pairs ---------------------------------------------------------------------------------------------

def test_pairs_are_balanced_capped_correctly_labelled_and_pinned():
    labels = [f"c{i % 5}" for i in range(60)]
    baked = mveb_pairs(labels, seed=42, max_per_side=1024)
    same = [p for p in baked if p[2] == 1]
    assert len(same) == len(baked) - len(same) == 60  # one of each per row, cut to the shorter side
    assert all((labels[a] == labels[b]) == bool(s) and a != b for a, b, s in baked)
    assert mveb_pairs(labels) == baked and mveb_pairs(labels, seed=1) != baked
    capped = mveb_pairs(labels, max_per_side=7)
    assert Counter(s for _, _, s in capped) == {1: 7, 0: 7}
    # what mteb's scripts/upload_video_pair_classification.py bakes from these labels with seed 42
    assert mveb_pairs(["x", "y", "x", "y", "z"], 42) == [(1, 2, 0), (1, 3, 1), (2, 1, 0), (3, 1, 1), (2, 0, 1),
                                                         (3, 0, 0), (4, 0, 0), (0, 2, 1)]
    assert mveb_pairs(["x", "y"], 42) == []  # no same-class partner: nothing to balance against


def test_captions_and_questions():
    assert first_caption(Clip("a", "a", "x", captions=(" ", " A dog runs. ", "other"))) == "A dog runs."
    good = Clip("a", "a", "x", question="Who?", candidates=("cat", "dog", "bird"), answer="dog")
    assert qa_candidates(good) == (("cat", "dog", "bird"), 1)
    for bad in (Clip("a", "a", "x", question="Who?", candidates=("cat", "cat", "dog"), answer="dog"),
                Clip("a", "a", "x", question="Who?", candidates=("cat", "bird"), answer="dog"),
                Clip("a", "a", "x", question="", candidates=("cat", "dog"), answer="dog")):
        assert qa_candidates(bad) is None


# -- mteb's frame selection ----------------------------------------------------------------------------

class FakeDecoder:
    """What mteb's FramesCollator reads from a torchcodec VideoDecoder."""

    def __init__(self, n, seconds):
        self.metadata = type("M", (), {"num_frames": n, "end_stream_seconds": seconds})()
        self.asked = None

    def get_frames_at(self, indices):
        self.asked = list(indices)
        return type("F", (), {"data": indices})()


@pytest.mark.parametrize("n,seconds", [(4, 1.0), (8, 2.0), (40, 10.0), (200, 50.0), (400, 100.0), (3, 20.0)])
def test_frame_selection_is_mteb_collators(n, seconds):
    from mteb.models.modality_collators import FramesCollator

    from mmlongembed.media.clips import mteb_frame_indices

    decoder = FakeDecoder(n, seconds)
    FramesCollator.resample_video(decoder, fps=2.0, max_frames=64)
    assert mteb_frame_indices(n, seconds) == decoder.asked
    decoder = FakeDecoder(n, seconds)
    FramesCollator.resample_video(decoder, num_frames=16)
    assert mteb_frame_indices(n, seconds, num_frames=16) == decoder.asked


def test_sampling_check_finds_back_half_changes_the_default_sampling_skips():
    from mmlongembed.media.clips import mteb_frame_indices
    from mmlongembed.video_tasks.temporal import sampling_check

    positive = list(range(100))
    chosen = set(mteb_frame_indices(100, 100.0))
    hidden = [k for k in range(50, 100) if k not in chosen][:2]  # two back-half positions between samples
    swapped = list(positive)
    swapped[hidden[0]], swapped[hidden[1]] = swapped[hidden[1]], swapped[hidden[0]]
    check = sampling_check(positive, swapped, clip_fps=1.0)
    assert check == {"frames": 100, "selected": 64, "changed": 2, "changed_dropped": 2, "indistinguishable": True}
    visible = list(positive)
    visible[98], visible[99] = 99, 98  # the last frame is always selected
    assert sampling_check(positive, visible, 1.0)["indistinguishable"] is False
    assert sampling_check(positive[:60], swapped[:60], 1.0)["changed_dropped"] == 0  # <= 64 frames: all kept


# -- Borda, mean, pruning --------------------------------------------------------------------------------

def mteb_borda(scores: dict[str, dict[str, float | None]]) -> dict[str, int]:
    """mteb's leaderboard Borda (wide and long forms must agree, and we must equal both), on the
    models with a score (the leaderboard drops all-null rows before ranking)."""
    import polars as pl

    from mteb.benchmarks._create_table import _borda_rank_from_long, _get_borda_rank

    scores = {m: row for m, row in scores.items() if any(v is not None for v in row.values())}

    tasks = sorted({t for row in scores.values() for t in row})
    wide = pl.DataFrame({"model_name": sorted(scores),
                         **{t: [scores[m].get(t) for m in sorted(scores)] for t in tasks}},
                        schema={"model_name": pl.Utf8, **{t: pl.Float64 for t in tasks}})
    ranks = dict(zip(wide["model_name"], wide.select(_get_borda_rank(tasks))[:, 0].to_list()))
    long = pl.DataFrame([{"model_name": m, "task_name": t, "score": v} for m in scores
                         for t, v in scores[m].items() if v is not None])
    long_ranks = dict(_borda_rank_from_long(long, n_models=len(scores)).iter_rows())
    assert long_ranks == ranks
    return ranks


def test_borda_equals_mteb_on_a_matrix_with_ties():
    scores = {"m1": {"t1": 0.9, "t2": 0.5, "t3": 0.7}, "m2": {"t1": 0.9, "t2": 0.6, "t3": 0.7},
              "m3": {"t1": 0.8, "t2": 0.6, "t3": 0.1}, "m4": {"t1": 0.1, "t2": 0.55, "t3": 0.95}}
    ours = borda(scores)
    # points = 4 - rank, ties share the average rank: t1 m1/m2 1.5 -> 2.5 each, m3 1, m4 0; t2 m2/m3 2.5 each,
    # m4 1, m1 0; t3 m4 3, m1/m2 1.5 each, m3 0. m1 and m4 tie on 4 points and share rank 2 ("min").
    assert {m: r["borda_points"] for m, r in ours.items()} == {"m1": 4.0, "m2": 6.5, "m3": 3.5, "m4": 4.0}
    assert {m: r["borda_rank"] for m, r in ours.items()} == mteb_borda(scores) == {"m1": 2, "m2": 1, "m3": 4, "m4": 2}
    assert ours["m1"]["mean"] == pytest.approx(0.7)


def test_borda_equals_mteb_on_random_matrices_with_ties_and_missing_scores():
    rng = np.random.default_rng(3)
    for trial in range(30):
        n_models, n_tasks = int(rng.integers(2, 9)), int(rng.integers(1, 7))
        values = rng.integers(0, 4, size=(n_models, n_tasks)) / 4  # few levels: many ties
        missing = rng.random((n_models, n_tasks)) < 0.15
        scores = {f"m{i}": {f"t{j}": (None if missing[i, j] else float(values[i, j])) for j in range(n_tasks)}
                  for i in range(n_models)}
        if all(v is None for row in scores.values() for v in row.values()):
            continue
        ours = borda(scores)
        assert {m: r["borda_rank"] for m, r in ours.items()} == mteb_borda(scores), trial
        for m, r in ours.items():  # MVEB: the mean over the model's evaluated tasks
            row = [v for v in scores[m].values() if v is not None]
            assert r["mean"] == pytest.approx(float(np.mean(row))) and r["tasks_evaluated"] == len(row)


# MVEB Tables 3, 11-13: "Mean is the arithmetic mean over the model's evaluated tasks"; Macro averages the
# task categories, each weighted equally whatever its task count.
MIXED = {"m1": {"r1": 0.9, "r2": 0.7, "r3": 0.5, "c1": 0.4, "z1": 0.1},
         "m2": {"r1": 0.8, "r2": 0.6, "r3": 0.4, "c1": 0.6, "z1": None},  # no joint space: no zero-shot task
         "m3": {"r1": 0.1, "r2": 0.2, "r3": 0.3, "c1": 0.2, "z1": 0.3}}
MIXED_CATEGORIES = {"r1": "retrieval", "r2": "retrieval", "r3": "retrieval", "c1": "classification",
                    "z1": "zero-shot"}


def test_mean_over_evaluated_tasks_and_macro_over_categories():
    ranked = borda(MIXED, categories=MIXED_CATEGORIES)
    assert ranked["m2"]["mean"] == pytest.approx((0.8 + 0.6 + 0.4 + 0.6) / 4) and ranked["m2"]["tasks_evaluated"] == 4
    assert ranked["m1"]["mean"] == pytest.approx(2.6 / 5) and ranked["m1"]["tasks_evaluated"] == 5
    # Macro: retrieval's three tasks count as one category beside classification and zero-shot
    assert ranked["m1"]["macro"] == pytest.approx((0.7 + 0.4 + 0.1) / 3) and ranked["m1"]["categories_evaluated"] == 3
    assert ranked["m2"]["macro"] == pytest.approx((0.6 + 0.6) / 2) and ranked["m2"]["categories_evaluated"] == 2
    assert ranked["m1"]["macro"] != pytest.approx(ranked["m1"]["mean"])
    # Borda stays mteb's
    assert {m: r["borda_rank"] for m, r in ranked.items()} == mteb_borda(MIXED)


def test_rank_command_prints_mean_with_task_count_and_macro(tmp_path, capsys):
    from mmlongembed.cli import main

    write_scores_csv(tmp_path / "scores.csv", MIXED)
    (tmp_path / "categories.json").write_text(json.dumps(MIXED_CATEGORIES))
    assert main(["mveb", "rank", str(tmp_path / "scores.csv"), "--categories", str(tmp_path / "categories.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["rank", "(Borda)", "model", "Borda", "points", "mean", "tasks", "Macro", "categories"]
    rows = {line.split()[1]: line.split() for line in lines[2:5]}
    assert rows["m2"][3:] == ["0.6000", "4/5", "0.6000", "2/3"]
    assert rows["m1"][3:] == ["0.5200", "5/5", "0.4000", "3/3"]
    assert "categories: retrieval 3; classification 1; zero-shot 1" in lines
    # mveb eval's results.json carries the tasks' mteb types; a category nobody gives leaves Macro out, said
    (tmp_path / "results.json").write_text(json.dumps({"task_types": {
        "r1": "Any2AnyRetrieval", "r2": "Any2AnyRetrieval", "r3": "Any2AnyRetrieval", "c1": "VideoClassification"}}))
    assert main(["mveb", "rank", str(tmp_path / "scores.csv"), "--categories", str(tmp_path / "results.json")]) == 0
    printed = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in printed.splitlines()[2:5]}
    assert rows["m2"][3:] == ["0.6000", "4/5", "-", "-"] and "Macro: no category for z1" in printed
    (tmp_path / "bad.json").write_text(json.dumps({"r1": "Retreival"}))
    assert main(["mveb", "rank", str(tmp_path / "scores.csv"), "--categories", str(tmp_path / "bad.json")]) == 2


def test_rank_command_finds_mveb_task_categories_in_mtebs_registry(tmp_path, capsys):
    from mmlongembed.cli import main

    scores = {"a": {"HMDB51ZeroShot": 0.5, "MSVDT2VRetrieval": 0.3, "ActivityNetCaptionsT2VRetrieval": 0.1},
              "b": {"HMDB51ZeroShot": None, "MSVDT2VRetrieval": 0.2, "ActivityNetCaptionsT2VRetrieval": 0.4}}
    write_scores_csv(tmp_path / "scores.csv", scores)
    assert main(["mveb", "rank", str(tmp_path / "scores.csv")]) == 0
    printed = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in printed.splitlines()[2:4]}
    assert rows["a"][3:] == ["0.3000", "3/3", "0.3500", "2/2"] and rows["b"][3:] == ["0.3000", "2/3", "0.3000", "1/2"]
    assert "categories: retrieval 2; zero-shot 1" in printed


def score_table(n_models=8, seed=0) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    base = rng.random(n_models)
    noise = rng.random(n_models)
    table = {}
    for i in range(n_models):
        table[f"m{i}"] = {
            "A": base[i], "B": 2 * base[i] + 1,  # B ranks models exactly as A: rho 1
            "C": noise[i],  # unrelated to A
            "D": -base[i],  # the reverse of A: rho -1, not redundant
            "E": base[i] ** 3,  # rank-identical to A again
        }
    return table


def test_prune_drops_rank_duplicates_in_priority_order_and_never_protected_tasks():
    table = score_table()
    result = prune(table, 0.85, cost={"A": 5.0, "B": 1.0, "C": 3.0, "D": 2.0, "E": 9.0})
    assert result.order == ["B", "D", "C", "A", "E"]  # equal coverage: cheaper first
    assert result.kept == ["B", "D", "C"]
    assert result.dropped == {"A": ("B", pytest.approx(1.0)), "E": ("B", pytest.approx(1.0))}
    protected = prune(table, 0.85, protected=["E"], cost={"A": 5.0, "B": 1.0, "C": 3.0, "D": 2.0, "E": 9.0})
    assert protected.kept[0] == "E" and "B" in protected.dropped and "A" in protected.dropped
    # coverage beats cost: a task scored for fewer models goes later
    sparse = {m: dict(row) for m, row in table.items()}
    sparse["m0"]["B"] = None
    assert priority_order(sparse, ["A", "B", "C", "D", "E"], cost={"B": 0.1})[-1] == "B"
    # deterministic whatever the table's order
    shuffled = {m: dict(reversed(list(table[m].items()))) for m in reversed(list(table))}
    assert prune(shuffled, 0.85, cost={"A": 5.0, "B": 1.0, "C": 3.0, "D": 2.0, "E": 9.0}).kept == result.kept
    with pytest.raises(ValueError):
        prune(table, protected=["Z"])


def test_agreement_is_pearson_and_spearman_of_the_mean_scores():
    from scipy.stats import pearsonr, spearmanr

    table = score_table(10, seed=4)
    result = prune(table, 0.85)
    models = sorted(table)
    full = [np.mean([table[m][t] for t in "ABCDE"]) for m in models]
    kept = [np.mean([table[m][t] for t in result.kept]) for m in models]
    assert result.agreement["pearson_mean"] == pytest.approx(pearsonr(full, kept).statistic)
    assert result.agreement["spearman_mean"] == pytest.approx(spearmanr(full, kept).statistic)
    assert agreement(table, list("ABCDE"), list("ABCDE"))["spearman_borda"] == pytest.approx(1.0)
    assert agreement({"m0": table["m0"]}, ["A"], ["A"])["pearson_mean"] is None  # too few models


def test_scores_csv_round_trip(tmp_path):
    table = {"m1": {"A": 0.5, "B": None}, "m2": {"A": 1 / 3, "B": 0.25}}
    write_scores_csv(tmp_path / "s.csv", table)
    back = read_scores_csv(tmp_path / "s.csv")
    assert back == table and not math.isnan(back["m2"]["A"])


def test_rank_and_prune_commands(tmp_path, capsys):
    from mmlongembed.cli import main

    write_scores_csv(tmp_path / "scores.csv", score_table())
    (tmp_path / "costs.json").write_text(json.dumps({"A": 5.0, "B": 1.0, "C": 3.0, "D": 2.0, "E": 9.0}))
    assert main(["mveb", "rank", str(tmp_path / "scores.csv")]) == 0
    ranking = capsys.readouterr().out
    assert ranking.splitlines()[2].split()[:3] == ["1", "m4", "25"]  # the best model under Borda
    assert main(["mveb", "prune", str(tmp_path / "scores.csv"), "--costs", str(tmp_path / "costs.json"),
                 "--output", str(tmp_path / "prune.json")]) == 0
    printed = capsys.readouterr().out
    assert "drop  A  (rho 1.000 with B)" in printed and "kept 3 of 5 tasks" in printed
    decision = json.loads((tmp_path / "prune.json").read_text())
    assert decision["kept"] == ["B", "D", "C"] and decision["agreement"]["models"] == 8
    assert main(["mveb", "prune", str(tmp_path / "scores.csv"), "--protect", "Z"]) == 2


def test_collection_layouts_and_bad_rows(tmp_path):
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.video_tasks.collection import read_collection

    for split, label, name in (("train", "dog", "a.mp4"), ("test", "dog", "b.webm"), ("train", "cat", "c.mkv")):
        (tmp_path / "folders" / split / label).mkdir(parents=True, exist_ok=True)
        (tmp_path / "folders" / split / label / name).write_bytes(b"")
    (tmp_path / "folders" / "train" / "cat" / "notes.txt").write_text("not a video")
    report = BuildReport(progress=False)
    found, root, layout = read_collection(tmp_path / "folders", report)
    assert layout == "class folders with train/test folders"
    assert [(c.source, c.label, c.split) for c in found] == [
        ("test/dog/b.webm", "dog", "test"), ("train/cat/c.mkv", "cat", "train"), ("train/dog/a.mp4", "dog", "train")]

    table = tmp_path / "table"
    table.mkdir()
    (table / "v.mp4").write_bytes(b"")
    (table / "collection.json").write_text(json.dumps([
        {"path": "v.mp4", "label": "x", "start": 1, "end": 3, "captions": ["first", "second"],
         "question": "Q?", "candidates": ["a", "b"], "answer": "b", "id": "clip-1"},
        {"path": "missing.mp4", "label": "x"},
        {"path": "v.mp4", "label": "x", "split": "dev"},
        {"path": "v.mp4", "start": 3, "end": 2},
        "not an object"]))
    report = BuildReport(progress=False)
    found, root, layout = read_collection(table, report)
    assert layout == "table collection.json" and root == table
    (clip,) = found
    assert (clip.clip_id, clip.source, clip.start, clip.end, clip.captions, clip.candidates, clip.answer) == (
        "clip-1", "v.mp4", 1.0, 3.0, ("first", "second"), ("a", "b"), "b")
    assert dict(report.skipped) == {"video_file_missing": 1, "malformed_entry": 3}
