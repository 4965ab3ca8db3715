"""Temporal segment logic and shuffles (mmlongembed.ops.temporal): rules on hand-made events, and
the segment logic on the real ActivityNet Captions annotations (both splits, all three readings)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mmlongembed.media.video import grid_times, nearest_on_grid
from mmlongembed.ops.temporal import (
    HARD_VARIANTS, MARGIN_RULES, Event, arrange, blocks_of, candidate_runs, caption_similarity, chains, choose_run,
    cut_run, follows, front_size, grid_in, hard_order, length_matched_run, matching_frame_count, order_problem,
    video_events)
from mmlongembed.core.pools import LengthBand
from tests.support.realdata import shared_data_dir


def ev(i, start, end):
    return Event(i, start, end, f"event {i}")


@pytest.mark.parametrize("rule, gap, admitted", [
    ("tolerate", -0.4, True), ("tolerate", -0.5, True), ("tolerate", -0.6, False), ("tolerate", 3.0, True),
    ("gap", 0.4, False), ("gap", 0.5, True), ("gap", 0.0, False), ("gap", -0.2, False),
    ("contiguous", 0.5, True), ("contiguous", -0.5, True), ("contiguous", 0.6, False), ("contiguous", -0.6, False),
])
def test_the_three_readings_of_the_margin(rule, gap, admitted):
    previous = ev(0, 0.0, 10.0)
    assert follows(previous, ev(1, 10.0 + gap, 20.0), rule, 0.5) is admitted


def test_a_nested_event_ends_a_chain_under_every_reading():
    # the opening "whole video" event contains the others: none follows it
    events = [ev(0, 0.0, 60.0), ev(1, 2.0, 10.0), ev(2, 10.0, 20.0), ev(3, 20.2, 30.0)]
    for rule in MARGIN_RULES:
        assert [len(c) for c in chains(events, rule, 0.5)][0] == 1
    assert [len(c) for c in chains(events, "tolerate", 0.5)] == [1, 3]
    assert [len(c) for c in chains(events, "contiguous", 0.5)] == [1, 3]
    assert [len(c) for c in chains(events, "gap", 0.5)] == [1, 1, 1, 1]


def test_blocks_never_share_a_frame_and_an_overlap_goes_to_the_earlier_block():
    events = [ev(0, 0.0, 3.4), ev(1, 3.0, 6.0), ev(2, 6.0, 8.5), ev(3, 8.2, 11.0)]
    blocks = blocks_of(events, 1.0, 12)
    assert [b.grid for b in blocks] == [(0, 1, 2, 3), (4, 5), (6, 7, 8), (9, 10)]
    assert blocks[1].start == 3.4 and blocks[3].start == 8.5
    flat = [j for b in blocks for j in b.grid]
    assert len(flat) == len(set(flat))
    # a gap between events is not shown
    gapped = blocks_of([ev(0, 0.0, 2.0), ev(1, 4.0, 6.0)], 1.0, 8)
    assert [b.grid for b in gapped] == [(0, 1), (4, 5)]


def test_grid_and_nearest_frame_rule():
    assert grid_times(1.1992, 1.0) == [0.0, 1.0]
    assert grid_times(3.0, 1.0) == [0.0, 1.0, 2.0]  # t < duration, not <=
    assert grid_times(2.5, 2.0) == [0.0, 0.5, 1.0, 1.5, 2.0]
    pts = [0.003, 0.25, 0.75, 1.75, 2.25]
    # 0.5 and 2.0: exact ties (0.25/0.75, 1.75/2.25 away) go to the earlier frame; 3.0: past the end
    assert nearest_on_grid(pts, [0.0, 0.5, 1.0, 2.0, 3.0]) == [0, 1, 2, 3, 4]
    assert nearest_on_grid(pts, [1.2, 2.1]) == [2, 4]
    assert grid_in(3.4, 6.0, 1.0, 100) == (4, 5) and grid_in(0.0, 0.5, 2.0, 100) == (0,)
    assert grid_in(2.0, 2.0, 1.0, 10) == () and grid_in(8.0, 12.0, 1.0, 10) == (8, 9)


def test_runs_need_min_blocks_and_non_empty_blocks():
    events = [ev(0, 0.0, 2.0), ev(1, 2.0, 4.0), ev(2, 4.0, 4.6), ev(3, 4.6, 7.0), ev(4, 7.0, 9.0), ev(5, 9.0, 11.0)]
    runs = candidate_runs("v", events, "tolerate", 0.5, 1.0, 12, 4)
    # event 2 spans [4.0, 4.6): grid frame 4 -> non-empty; event 3 [4.6, 7.0): frames 5, 6
    assert all(all(b.grid for b in r.blocks) for r in runs)
    assert {r.key for r in runs} == {(0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (0, 1, 2, 3, 4), (1, 2, 3, 4, 5),
                                     (0, 1, 2, 3, 4, 5)}
    short = [ev(0, 0.0, 2.0), ev(1, 2.0, 2.5), ev(2, 2.5, 4.0), ev(3, 4.0, 6.0), ev(4, 6.0, 8.0)]
    # event 1 [2.0, 2.5) holds frame 2; make it hold none: [2.1, 2.6)
    empty = [ev(0, 0.0, 2.05), ev(1, 2.05, 2.6), ev(2, 2.6, 4.0), ev(3, 4.0, 6.0), ev(4, 6.0, 8.0)]
    assert candidate_runs("v", short, "tolerate", 0.5, 1.0, 10, 4)
    assert candidate_runs("v", empty, "tolerate", 0.5, 1.0, 10, 4) == []  # event 1 holds no grid frame


def test_choose_run_prefers_most_blocks_in_band_and_is_seeded():
    events = [ev(i, 2.0 * i, 2.0 * i + 2.0) for i in range(8)]
    runs = candidate_runs("v", events, "tolerate", 0.5, 1.0, 16, 4)
    band = LengthBand.halving(48)  # 25..48 tokens at 4 tokens/frame: 7..12 frames = 4..6 blocks
    pick = choose_run(runs, lambda r: band.contains(r.n_frames * 4), np.random.default_rng(0))
    assert len(pick.blocks) == 6
    picks = {choose_run(runs, lambda r: band.contains(r.n_frames * 4), np.random.default_rng(s)).key for s in range(30)}
    assert picks == {(0, 1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6), (2, 3, 4, 5, 6, 7)}
    assert choose_run(runs, lambda r: False, np.random.default_rng(0)) is None


def test_length_matched_run_cuts_the_shortest_long_enough_run_to_exactly_the_frames_asked():
    events = [ev(0, 0.0, 1.0), ev(1, 1.0, 6.0), ev(2, 6.0, 9.0), ev(3, 9.0, 12.0)]
    runs = candidate_runs("v", events, "tolerate", 0.5, 1.0, 13, 2)  # frames: (0,1) 6, (1,2) 8, (2,3) 6,
    #                                                                   (0,1,2) 9, (1,2,3) 11, all 12
    for target in range(2, 13):
        for seed in range(10):
            run = length_matched_run(runs, target, 2, 1.0, np.random.default_rng(seed))
            assert run is not None and run.n_frames == target, target  # never merely near: exactly
            assert any(r.grid[:target] == run.grid for r in runs)  # the head of one of its runs, in time order
    exact = length_matched_run(runs, 8, 2, 1.0, np.random.default_rng(0))
    assert exact.key == (1, 2) and exact.blocks == runs[[r.key for r in runs].index((1, 2))].blocks
    cut = length_matched_run(runs, 7, 2, 1.0, np.random.default_rng(0))  # (1,2)'s 8 frames, one off
    assert cut.key == (1, 2) and cut.blocks[-1].grid == (6, 7) and cut.blocks[-1].end == 8.0 and cut.cut_frames == 1
    assert exact.cut_frames == 0
    assert length_matched_run(runs, 10, 2, 1.0, np.random.default_rng(0)).key == (1, 2, 3)  # 11, not 12
    # two frames keep two blocks only from (0,1) (1 + 5 frames); (2,3) ties it in surplus but its
    # cut would be one block, fewer than an easy negative's two
    assert {length_matched_run(runs, 2, 2, 1.0, np.random.default_rng(s)).key for s in range(20)} == {(0, 1)}
    assert {length_matched_run(runs, 6, 2, 1.0, np.random.default_rng(s)).key for s in range(20)} == {(0, 1), (2, 3)}
    assert length_matched_run(runs, 13, 2, 1.0, np.random.default_rng(0)) is None  # the video is too short
    assert cut_run(runs[0], runs[0].n_frames, 1.0) == runs[0]


def test_matching_frame_count_is_the_positives_own_or_within_half_a_frame_in_the_band():
    band = LengthBand.halving(256)  # (128, 256]
    assert matching_frame_count(240, 15, band) == 16  # frames of one size: the same count
    assert matching_frame_count(240, 18, band) == 13  # 234 tokens, 6 off; 14 frames would be 252, 12 off
    assert matching_frame_count(243, 18, band) == 13  # 234 and 252 tie at 9 off: the fewer
    assert matching_frame_count(256, 30, band) is None  # 240 is 16 off (over half a frame), 270 leaves the band
    assert matching_frame_count(130, 60, band) is None  # 120 leaves the band below, 180 is 50 off


@pytest.mark.parametrize("m", range(4, 13))
def test_hard_orders_have_exactly_their_structure(m):
    h = front_size(m)
    for seed in range(40):
        orders = {v: hard_order(v, m, np.random.default_rng(seed)) for v in HARD_VARIANTS}
        assert orders["reversal"] == list(range(m))[::-1]
        assert orders["front_shuffle"][h:] == list(range(h, m)) and orders["front_shuffle"][:h] != list(range(h))
        assert orders["back_shuffle"][:h] == list(range(h)) and orders["back_shuffle"][h:] != list(range(h, m))
        assert len({tuple(o) for o in orders.values()} | {tuple(range(m))}) == 4
        for variant, order in orders.items():
            assert order_problem(variant, order, m) is None
            others = [v for v in HARD_VARIANTS if v != variant]
            assert all(order_problem(v, order, m) for v in others)
    # every non-identity permutation of a half is reachable (uniform draw, not a fixed rotation)
    fronts = {tuple(hard_order("front_shuffle", 6, np.random.default_rng(s))[:3]) for s in range(200)}
    assert len(fronts) == 5


def test_order_problem_rejects_plausible_wrong_shuffles():
    assert order_problem("front_shuffle", [0, 1, 3, 2], 4)  # moved the back half
    assert order_problem("front_shuffle", [0, 1, 2, 3], 4)  # identity
    assert order_problem("back_shuffle", [1, 0, 2, 3], 4)
    assert order_problem("back_shuffle", [0, 1, 2, 3, 4], 5)
    assert order_problem("back_shuffle", [0, 1, 4, 2, 3], 5) is None  # the back half of 5 is 3 blocks
    assert order_problem("reversal", [3, 2, 0, 1], 4)
    assert order_problem("reversal", [3, 2, 1, 1], 4)  # not a permutation


def test_arrange_keeps_frames_inside_blocks_and_frame_reversal_reverses_all():
    blocks = [["a1", "a2"], ["b1"], ["c1", "c2", "c3"], ["d1"]]
    assert arrange(blocks, [3, 2, 1, 0]) == ["d1", "c1", "c2", "c3", "b1", "a1", "a2"]
    assert arrange(blocks, [3, 2, 1, 0], reversal_frames=True) == ["d1", "c3", "c2", "c1", "b1", "a2", "a1"]
    assert sorted(arrange(blocks, [1, 0, 2, 3])) == sorted(x for b in blocks for x in b)


def test_caption_similarity():
    assert caption_similarity("A man rides a bike in the park.", "The man rides his bike in a park") == 1.0
    assert caption_similarity("A man rides a bike.", "Two girls bake bread.") == 0.0


def test_events_are_sorted_clipped_and_bad_ones_counted():
    events, dropped = video_events([[5, 9], [0, 5], [3, 2], [8, 40], ["x", 1]], ["b", " a  ", "bad", "late", "m"], 20.0)
    assert [(e.index, e.start, e.end, e.sentence) for e in events] == [(1, 0.0, 5.0, "a"), (0, 5.0, 9.0, "b"),
                                                                       (3, 8.0, 20.0, "late")]
    assert sorted(dropped) == ["empty_or_inverted_span", "malformed_timestamp"]


# -- the real annotations ------------------------------------------------------------------------

# videos with a chain of >= 2 / >= 4 consecutive admissible events, and runs of >= 4 blocks
# (frames on the 1-FPS grid of the annotated duration), per split and reading
EXPECTED = {
    ("val_1", "tolerate"): (139, 45, 175), ("val_1", "gap"): (89, 20, 73), ("val_1", "contiguous"): (81, 17, 34),
    ("val_2", "tolerate"): (141, 26, 146), ("val_2", "gap"): (98, 10, 16), ("val_2", "contiguous"): (66, 11, 24),
}


@pytest.mark.realdata
@pytest.mark.parametrize("split", ["val_1", "val_2"])
def test_segment_logic_on_real_activitynet_annotations(split):
    path = shared_data_dir("activitynet_captions") / f"{split}_first200.json"
    data = json.loads(path.read_text())
    assert len(data) == 200
    for rule in MARGIN_RULES:
        two = four = n_runs = 0
        for video_id, record in data.items():
            events, _ = video_events(record["timestamps"], record["sentences"], record["duration"])
            for chain in chains(events, rule, 0.5):
                for a, b in zip(chain, chain[1:]):
                    assert follows(a, b, rule, 0.5)
            longest = max(len(c) for c in chains(events, rule, 0.5))
            two += longest >= 2
            four += longest >= 4
            n_grid = len(grid_times(record["duration"], 1.0))
            runs = candidate_runs(video_id, events, rule, 0.5, 1.0, n_grid, 4)
            n_runs += len(runs)
            for run in runs:
                frames = [j for b in run.blocks for j in b.grid]
                assert frames == sorted(set(frames))  # in time order, no frame twice
                for block, nxt in zip(run.blocks, run.blocks[1:]):
                    assert block.end <= nxt.start + 1e-9 or rule == "tolerate"
                    assert nxt.start >= block.end - 1e-9  # effective spans are disjoint
                for block in run.blocks:
                    event = next(e for e in events if e.index == block.event_index)
                    assert event.start <= block.start < block.end == event.end
                    assert all(block.start <= j < block.end for j in block.grid)
                    assert block.grid and math.isclose(block.end, event.end)
        assert (two, four, n_runs) == EXPECTED[(split, rule)], (split, rule, two, four, n_runs)
