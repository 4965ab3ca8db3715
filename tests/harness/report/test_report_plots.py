"""Plots a reader can trust: nothing drawn over anything else, scales that match the numbers, and
legends that tell every line apart (issue 18 §3). Checked on the drawn figures' geometry."""

from types import SimpleNamespace

import numpy as np
import pytest

from harness.report import tables as harness_report
from mmlongembed.checks import summary as build_report
from mmlongembed.core.pools import LengthBand
from tests.support.plots import legend_overlaps_axes, overlapping_tick_labels


def _pools(ranges, seed=0):
    rng = np.random.default_rng(seed)
    return [SimpleNamespace(band=LengthBand(target, lo, target), difficulty=difficulty,
                            candidates=[SimpleNamespace(n_tokens=int(n)) for n in rng.integers(lo, target + 1, 160)])
            for target, lo in ranges for difficulty in ("easy", "hard")]


@pytest.mark.parametrize("lo16", [8193, 10000, 12000, 15000, 16300])
def test_length_histogram_tick_labels_do_not_run_together(lo16):
    """The MMDocRAG 16K panel: candidates spread over 10,000-16,384 tokens drew ticks at every 1,000,
    five digits each, which ran together in a 3.2-inch panel."""
    import matplotlib.pyplot as plt

    fig = build_report.length_histogram_figure(_pools(((8192, 4097), (16384, lo16), (32768, 16385)), seed=lo16))
    try:
        assert overlapping_tick_labels(fig) == []
        ax = fig.axes[1]
        lo, hi = ax.get_xlim()
        shown = [t.get_text() for x, t in zip(ax.get_xticks(), ax.get_xticklabels()) if lo <= x <= hi]
        assert 2 <= len(shown) <= 5 and all(label.endswith("k") for label in shown)
    finally:
        plt.close(fig)


def test_length_histogram_of_a_long_grid_wraps_without_overlap():
    import matplotlib.pyplot as plt

    targets = (256, 1024, 2048, 4096, 8192, 16384, 32768)
    fig = build_report.length_histogram_figure(_pools([(t, max(1, t // 2)) for t in targets]))
    try:
        assert overlapping_tick_labels(fig) == []
    finally:
        plt.close(fig)


def _row(model, dataset, difficulty, length, value, task="logical_summarization", n_queries=4, n_candidates=16):
    return {"model": model, "pool": f"{dataset}-{difficulty}-{length}", "task": task, "dataset": dataset,
            "difficulty": difficulty, "length": length, "depth": None, "extra": {}, "n_queries": n_queries,
            "n_candidates": n_candidates, "metrics": {"p@1": {"value": value}}}


def test_p1_by_length_legend_tells_easy_from_hard_and_sits_outside_the_panels():
    import matplotlib.pyplot as plt

    rows = [_row(m, d, diff, n, v) for m, v in (("bm25", 0.9), ("minilm", 0.6)) for d in ("govreport", "mmlongbench")
            for diff in ("easy", "hard") for n in (8192, 16384, 32768)]
    rows += [_row(m, "hotpotqa", diff, n, 0.5, "multi_source_reasoning") for m in ("bm25", "minilm")
             for diff in ("easy", "hard") for n in (8192, 16384, 32768)]
    fig = harness_report.by_length_figure(rows)
    try:
        (legend,) = fig.legends
        styles = {t.get_text(): h.get_linestyle() for t, h in zip(legend.get_texts(), legend.legend_handles)}
        assert styles["Easy"] == "-" and styles["Hard"] == "--"
        assert {"bm25", "minilm", "govreport", "mmlongbench", "hotpotqa"} <= set(styles)
        # two datasets of one task and one model differ by marker (same colour, same line style)
        lines = [ln for ln in fig.axes[1].get_lines() if (ln.get_gid() or "").startswith("series")]
        # (Logical Summarization: Multi-Source Reasoning comes first)
        assert len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in lines}) == len(lines) == 8
        assert not legend_overlaps_axes(fig)
        assert overlapping_tick_labels(fig) == []
        assert fig.axes[0].get_ylim()[1] > 100 and "x100" in fig.axes[0].get_ylabel()  # the tables' scale
    finally:
        plt.close(fig)


def test_p1_by_length_draws_chance_per_pool_n_on_each_point_and_hollow_points_below_ten_queries():
    """Issue 25 §2: a fall from 75 to 0 on one query is not a trend: each point says its n, a point on
    fewer than 10 queries is hollow, and chance (1 / the pool's candidates) is drawn for every pool."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    rows = [_row("minilm", "govreport", "hard", 8192, 0.75, n_queries=12, n_candidates=48),
            _row("minilm", "govreport", "hard", 16384, 0.5, n_queries=10, n_candidates=40),
            _row("minilm", "govreport", "hard", 32768, 0.0, n_queries=1, n_candidates=4)]
    fig = harness_report.by_length_figure(rows)
    try:
        (ax,) = fig.axes
        lines = {ln.get_gid(): ln for ln in ax.get_lines()}
        chance = lines["chance govreport hard"]
        assert list(chance.get_xdata()) == [8192, 16384, 32768]
        assert list(chance.get_ydata()) == pytest.approx([100 / 48, 100 / 40, 100 / 4])
        assert sorted(t.get_text() for t in ax.texts if not (t.get_gid() or "").startswith("chance")) == [
            "n=1", "n=10", "n=12"]
        # each pool's chance labelled with its figure
        assert sorted(t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("chance label")) == sorted([
            f"chance {100 / 4:.1f}", f"chance {100 / 40:.1f}", f"chance {100 / 48:.1f}"])
        (series,) = [ln for gid, ln in lines.items() if gid.startswith("series")]
        assert list(series.get_markevery()) == [0, 1]  # filled markers: the points on 10 queries or more
        (hollow,) = [ln for gid, ln in lines.items() if gid.startswith("few")]
        assert hollow.get_gid() == "few govreport-hard-32768 minilm" and list(hollow.get_ydata()) == [0.0]
        assert to_rgba(hollow.get_markerfacecolor()) != to_rgba(series.get_markerfacecolor())
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert "fewer than 10 queries" in labels and "chance (1 / candidates)" in labels
        assert not legend_overlaps_axes(fig)
    finally:
        plt.close(fig)


def _grid_row(model, length, depth, p1, hit5):
    return {"model": model, "pool": f"needle-text-text-{length}-d{depth}", "task": "visual_grounding",
            "dataset": "needle", "difficulty": "grid", "length": length, "depth": float(depth), "n_queries": 4,
            "extra": {"needle_modality": "text", "background": "text"},
            "metrics": {"p@1": {"value": p1}, "hit@5": {"value": hit5}}}


def test_heatmap_shows_p1_by_default_on_the_cells_scale():
    import matplotlib.pyplot as plt

    rows = [_grid_row("bm25", n, d, p1, 1.0) for (n, d, p1) in ((256, 0, 0.25), (256, 50, 0.5), (1024, 0, 0.75),
                                                                (1024, 50, 1.0))]
    ((_, _, fig),) = list(harness_report.depth_heatmap_figures(rows))
    try:
        ax, bar = fig.axes
        image = ax.get_images()[0]
        assert image.get_clim() == (0, 100) and bar.get_ylim() == (0, 100)
        assert np.nanmax(image.get_array()) == pytest.approx(100.0)
        assert sorted(t.get_text() for t in ax.texts) == ["100.0", "25.0", "50.0", "75.0"]
        assert "P@1" in ax.get_title() and "P@1" in bar.get_ylabel()
    finally:
        plt.close(fig)
    ((_, _, fig),) = list(harness_report.depth_heatmap_figures(rows, "hit@5"))  # on request
    try:
        assert "hit@5" in fig.axes[0].get_title() and {t.get_text() for t in fig.axes[0].texts} == {"100.0"}
    finally:
        plt.close(fig)
