"""Geometry checks on drawn matplotlib figures: what a reader would see overlap."""

from __future__ import annotations


def _boxes(fig, texts):
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text()]


def overlapping_tick_labels(fig) -> list[tuple[str, str]]:
    """Pairs of tick labels of one axis whose drawn boxes overlap."""
    fig.canvas.draw()
    pairs = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            boxes = _boxes(fig, axis.get_ticklabels(which="both"))
            pairs += [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
                      if box_a.overlaps(box_b)]
    return pairs


def legend_overlaps_axes(fig) -> bool:
    """Whether any legend's box lies over any plotting area (where it could hide a line)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return any(legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
               for legend in legends for ax in fig.axes if ax.get_visible())
