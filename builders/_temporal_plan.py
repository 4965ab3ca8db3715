"""The pool plan of the Temporal Summarization builders (``activitynet``, ``youkudc``): which run of
caption events each video offers per length band, and, per band, which videos become queries
(with their hard orders) and which serve as their easy negatives.

Every choice comes from a generator derived from the seed, the band and the videos concerned
(``PoolContext.rng``); the decoded frames are read only to compare their bytes (identical frames
of two videos must not sit in two groups, and must not hide a shuffle).
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable

from mmlongembed.ops.temporal import (
    HARD_VARIANTS, Run, candidate_runs, caption_similarity, choose_run, distinct_hard_orders, length_matched_run,
    matching_frame_count, video_events)
from mmlongembed.build.pool_plan import PoolContext
from mmlongembed.core.rng import seeded_order
from mmlongembed.core.pools import LengthBand
from mmlongembed.readers.dense_captions import VideoRecord
from mmlongembed.core.tokens import image_tokens

Plan = list[tuple[str, dict, list[Run]]]  # (query video, variant -> block order, easy negatives' runs)


def runs_by_band(records: list[VideoRecord], meta: dict[str, dict], bands: list[LengthBand],
                 context: PoolContext) -> tuple[dict[str, dict[str, Run]], dict[str, dict[str, list[Run]]]]:
    """(band -> video -> its query run, band -> video -> its runs): a query run has the most
    blocks among the band's runs with at least ``min_blocks`` (a seeded choice among ties); a
    video with a run in the band may stand as an easy negative, cut from any of its runs."""
    config, report = context.config, context.report
    chosen: dict[str, dict[str, Run]] = {band.name: {} for band in bands}  # band -> video -> query run
    fitting: dict[str, dict[str, list[Run]]] = {band.name: {} for band in bands}  # band -> video -> all its runs
    for record in records:
        facts = meta[record.video_id]
        duration = min(record.duration or math.inf, facts["duration"])
        events, dropped = video_events(record.timestamps, record.sentences, duration)
        for reason in dropped:
            report.skip(f"event_{reason}", record.video_id)
        runs = candidate_runs(record.video_id, events, config.margin_rule, config.margin, config.fps,
                              facts["n_frames"], config.easy_min_blocks)
        if not runs:
            report.skip("no_admissible_run", record.video_id)
            continue
        per_frame = image_tokens(facts["frame_height"], facts["frame_width"])
        placed = False
        for band in bands:
            in_band = [r for r in runs if band.contains(r.n_frames * per_frame)]
            if not in_band:
                continue
            fitting[band.name][record.video_id] = runs
            placed = True
            rng = context.rng(band.name, record.video_id, "run")
            run = choose_run(in_band, lambda r: len(r.blocks) >= config.min_blocks, rng)
            if run is not None:
                chosen[band.name][record.video_id] = run
        if not placed:
            lengths = sorted({r.n_frames * per_frame for r in runs})
            report.skip("no_run_in_any_band", f"{record.video_id} ({lengths[0]}..{lengths[-1]} tokens)")
    return chosen, fitting


class BandPlanner:
    """One band's plan: queries (each with its hard orders) and their easy negatives, each a run
    of another video cut to the positive's length; a video serves the band once (as a query or
    as one negative), and no frame's bytes sit in two of its groups."""

    def __init__(self, band: LengthBand, query_runs: dict[str, Run], fitting: dict[str, list[Run]],
                 frame_tokens: dict[str, int], video: Callable[[str], object], context: PoolContext):
        self.band, self.query_runs, self.fitting, self.video, self.context = band, query_runs, fitting, video, context
        self.frame_tokens = frame_tokens  # video -> tokens of one of its frames
        self._hashes: dict[tuple, set] = {}
        self.taken: set[str] = set()  # frames already in the band's groups: byte-identical frames of two
        #                               videos (black intros) must not sit in two groups

    def frames_of(self, run: Run) -> set:
        key = (run.video_id, run.key, run.n_frames)  # a cut run has its run's key
        if key not in self._hashes:
            by_grid = {f.grid_index: f.image for f in self.video(run.video_id).frames}
            self._hashes[key] = {hashlib.sha256(by_grid[j]).hexdigest() for j in run.grid}
        return self._hashes[key]

    def plan(self) -> Plan:
        order = seeded_order(sorted(self.fitting), self.context.rng(self.band.name, "partition"))
        queries, failed = self._queries(order)
        query_ids = {vid for vid, _ in queries}
        supply = [vid for vid in order if vid not in query_ids and vid not in failed]
        used: set[str] = set()
        plan = []
        for vid, hard in queries:
            picks = self._easy_negatives(vid, supply, used)
            if picks is None:
                continue
            used.update(p.video_id for p in picks)
            for run in picks:
                self.taken |= self.frames_of(run)
            plan.append((vid, hard, picks))
        return plan

    def _queries(self, order: list[str]) -> tuple[list[tuple[str, dict]], set[str]]:
        """(query video, its hard orders) in the band's order, as many as the cap and the videos
        left for negatives allow; and the videos that failed as queries (counted)."""
        k = self.context.config.negatives_per_query
        queries, failed = [], set()
        i = 0
        while i < len(order) and len(queries) < min(self.context.cap, (len(order) - len(failed)) // (k + 1)):
            vid = order[i]
            i += 1
            if vid not in self.query_runs:  # no run long enough to shuffle: an easy negative only
                continue
            hard = self.hard_orders(vid, self.query_runs[vid])
            if hard is None or self.frames_of(self.query_runs[vid]) & self.taken:
                failed.add(vid)
                self.context.report.skip("indistinct_shuffles" if hard is None else "frames_shared_across_videos",
                                         f"{vid} ({self.band.name})")
                continue
            self.taken |= self.frames_of(self.query_runs[vid])
            queries.append((vid, hard))
        return queries, failed

    def _easy_negatives(self, vid: str, supply: list[str], used: set[str]) -> list[Run] | None:
        """The query's k easy negatives from the videos of ``supply`` not yet used, or None
        (counted) when there are too few; a video whose frames are taken is used up. Videos whose
        frames are the positive's size come first (each in ``supply``'s order): cut to the frame
        count nearest the positive's tokens, a video of other-sized frames lands up to half a
        frame away, and three of them alike leave the positive the odd one out in tokens and
        frame count (issue 37: at real ActivityNet's mixed resolutions, "the most characters"
        found the positive 65% of the time against 50%)."""
        config, report, band = self.context.config, self.context.report, self.band.name
        positive = self.query_runs[vid]
        positive_tokens = positive.n_frames * self.frame_tokens[vid]
        captions = " ".join(positive.sentences)
        picks: list[Run] = []
        own_size = self.frame_tokens[vid]
        for other in sorted(supply, key=lambda v: self.frame_tokens[v] != own_size):  # stable: same size first
            if other in used:
                continue
            n_frames = matching_frame_count(positive_tokens, self.frame_tokens[other], self.band)
            run = None if n_frames is None else length_matched_run(
                self.fitting[other], n_frames, config.easy_min_blocks, config.fps,
                self.context.rng(band, vid, other, "easy_run"))
            if run is None:  # no run as long as this positive: left for a shorter one
                continue
            if caption_similarity(captions, " ".join(run.sentences)) >= config.caption_similarity_max:
                report.skip("blacklisted_negative_similar_captions", f"{other} for {vid} ({band})")
                continue
            if self.frames_of(run) & self.taken:
                used.add(other)
                report.skip("frames_shared_across_videos", f"{other} ({band})")
                continue
            picks.append(run)
            if len(picks) == config.negatives_per_query:
                break
        if len(picks) < config.negatives_per_query:
            report.skip("easy_not_enough_negatives", f"{vid} ({band})")
            return None
        return picks

    def hard_orders(self, vid: str, run: Run) -> dict[str, list[int]] | None:
        """The three hard variants' block orders, or None when their frames would not differ."""
        frames = {f.grid_index: f for f in self.video(vid).frames}
        block_hashes = [[hashlib.sha256(frames[j].image).hexdigest() for j in block.grid] for block in run.blocks]
        rngs = {variant: self.context.rng(self.band.name, vid, variant) for variant in HARD_VARIANTS}
        return distinct_hard_orders(block_hashes, rngs, self.context.config.reversal == "frames")
