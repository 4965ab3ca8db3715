"""Page-level operations for paged documents (document images): windows and intra-document
page replacement (paper A.3). Pure: page token costs in, page index plans out, explicit rng.

A document is its list of page costs in tokens (``ceil(H/32)*ceil(W/32)`` of each stored page).

- ``head_window``: the longest head ``[0, n)`` whose cost lies in the band and for which every
  requested replacement can be built from the pages after it (the unseen pages);
- ``slots_at_fraction``: the window's pages that cover a token fraction, snapped to page
  boundaries, at least one page and never the whole window;
- ``find_page_run``: a contiguous run of unseen pages whose cost equals the removed cost when
  page sizes allow, else lies within a tolerance, preferring runs no earlier variant used;
- ``plan_replacements``: the three hard variants (head 25%, tail 25%, middle 50% of the tokens)
  of one window; ``apply_plan`` gives the page indices a variant shows, in order;
- ``PageGuard``: no page of one query's positive in another query's group of a pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

import numpy as np

from mmlongembed.core.documents import Document
from mmlongembed.core.errors import FitError
from mmlongembed.core.pools import LengthBand, hard_negative_tolerance

HARD_VARIANTS = (("head25", (0.0, 0.25)), ("tail25", (0.75, 1.0)), ("middle50", (0.25, 0.75)))


@dataclass(frozen=True)
class PagePlan:
    """One hard variant of a window ``[0, n)``: window slots ``[a, b)`` replaced by the unseen
    pages ``[c, d)`` of the same document."""

    variant: str
    fraction: tuple[float, float]
    slots: tuple[int, int]
    donor: tuple[int, int]
    removed_tokens: int
    block_tokens: int

    def as_dict(self) -> dict:
        return {"variant": self.variant, "fraction": list(self.fraction), "replaced_slots": list(self.slots),
                "donor_pages": list(self.donor), "removed_tokens": self.removed_tokens,
                "block_tokens": self.block_tokens}


def _sums(costs: Sequence[int]) -> list[int]:
    return [0, *accumulate(costs)]


def slots_at_fraction(costs: Sequence[int], start_fraction: float, end_fraction: float) -> tuple[int, int]:
    """Slots ``[a, b)`` of the window whose pages cover the token fraction
    [start_fraction, end_fraction), each end snapped to the nearest page boundary (ties to the
    earlier), at least one page, never all of them. Raises FitError for a one-page window."""
    n = len(costs)
    if n < 2:
        raise FitError("window_too_short", f"{n} page(s): no part can be replaced")
    sums = _sums(costs)
    total = sums[-1]

    def nearest(fraction: float) -> int:
        goal = fraction * total
        return min(range(n + 1), key=lambda i: (abs(sums[i] - goal), i))

    a, b = nearest(start_fraction), nearest(end_fraction)
    if b <= a:  # the span is shorter than a page: the page that holds most of it
        centre = (start_fraction + end_fraction) / 2 * total
        a = min(max(0, next(i for i in range(n) if sums[i + 1] >= centre)), n - 1)
        b = a + 1
    if a == 0 and b == n:  # keep at least one page of the positive
        if start_fraction > 0:
            a = 1
        else:
            b = n - 1
    return a, b


def find_page_run(costs: Sequence[int], first_unseen: int, need: int, tolerance: int, rng: np.random.Generator,
                  avoid: Sequence[tuple[int, int]] = (), room: tuple[int, int] | None = None) -> tuple[int, int]:
    """A run ``[c, d)`` of unseen pages (``c >= first_unseen``) whose cost is ``need`` exactly
    if some run allows it, else the closest within ``tolerance``. Among equally good runs, those
    that overlap no run in ``avoid`` come first, then a seeded draw. ``room`` = (lo, hi) bounds the
    run's cost further (the variant must stay in its band). Raises FitError."""
    sums = _sums(costs)
    lo, hi = need - tolerance, need + tolerance
    if room is not None:
        lo, hi = max(lo, room[0]), min(hi, room[1])
    runs = []
    for c in range(first_unseen, len(costs)):
        for d in range(c + 1, len(costs) + 1):
            total = sums[d] - sums[c]
            if total > hi:
                break
            if total >= lo:
                overlaps = any(c < y and x < d for x, y in avoid)
                runs.append((abs(total - need), overlaps, c, d))
    if not runs:
        raise FitError("no_unseen_run", f"no run of unseen pages after {first_unseen} costs {need}±{tolerance}")
    best = min(r[:2] for r in runs)
    tied = [r for r in runs if r[:2] == best]
    _, _, c, d = tied[int(rng.integers(len(tied)))]
    return c, d


def plan_replacements(costs: Sequence[int], n: int, band: LengthBand, rng: np.random.Generator,
                      variants=HARD_VARIANTS, attempts: int = 16) -> list[PagePlan]:
    """The hard variants of window ``[0, n)`` of a document with page costs ``costs``: each
    replaces the slots covering its token fraction with a run of unseen pages (``>= n``) of
    equal cost, else within max(8, 1%) of the window's cost, keeping the variant in the band.
    Runs are drawn largest first; up to ``attempts`` draws look for three disjoint runs, else the
    first draw (runs then overlap as little as the draw allowed). Raises FitError."""
    window = list(costs[:n])
    total = sum(window)
    tolerance = hard_negative_tolerance(total)
    slots = [(variant, fraction, slots_at_fraction(window, *fraction)) for variant, fraction in variants]
    first: list[PagePlan] | None = None
    for _ in range(attempts):
        plans: dict[str, PagePlan] = {}
        used: list[tuple[int, int]] = []
        for variant, fraction, (a, b) in sorted(slots, key=lambda v: -sum(window[v[2][0]:v[2][1]])):
            removed = sum(window[a:b])
            kept = total - removed
            c, d = find_page_run(costs, n, removed, tolerance, rng, avoid=used,
                                 room=(band.lo - kept, band.hi - kept))
            plans[variant] = PagePlan(variant, fraction, (a, b), (c, d), removed, sum(costs[c:d]))
            used.append((c, d))
        ordered = [plans[v] for v, _, _ in slots]
        shown = [tuple(apply_plan(n, p)) for p in ordered]
        if len(set(shown)) < len(shown):
            raise FitError("variants_coincide", "two variants show the same pages")
        first = first or ordered
        if not any(x[0] < y[1] and y[0] < x[1] for i, x in enumerate(used) for y in used[i + 1:]):
            return ordered
    return first


def head_window(costs: Sequence[int], band: LengthBand, rng_for, variants=HARD_VARIANTS,
                ) -> tuple[int, list[PagePlan]]:
    """The longest head ``[0, n)`` of the document whose cost lies in the band and leaves
    enough unseen pages for every variant; with its plans. ``rng_for(n)`` gives the generator
    for the plans of window ``n`` (so a shorter fallback window draws afresh). Raises FitError
    (``too_short``, ``no_window_in_band`` or ``no_unseen_pages``)."""
    sums = _sums(costs)
    if sums[-1] < band.lo:
        raise FitError("too_short", f"{sums[-1]} tokens in all pages, band starts at {band.lo}")
    fits = [n for n in range(len(costs), 0, -1) if band.lo <= sums[n] <= band.hi and n < len(costs)]
    if not fits:
        raise FitError("no_window_in_band", f"no head of pages costs [{band.lo}, {band.hi}] and leaves a page unseen")
    last: FitError | None = None
    for n in fits:
        try:
            return n, plan_replacements(costs, n, band, rng_for(n), variants)
        except FitError as error:
            last = error
    raise FitError("no_unseen_pages", str(last))


def apply_plan(n: int, plan: PagePlan) -> list[int]:
    """The page indices a variant shows, in order: the window with its slots replaced."""
    a, b = plan.slots
    c, d = plan.donor
    return [*range(a), *range(c, d), *range(b, n)]


class PageGuard:
    """A pool holds no page of one query's positive in another query's group (every query ranks
    the whole pool): checked on the stored bytes, so two PDFs with an identical page are caught."""

    def __init__(self):
        self.held: dict[bytes, str] = {}
        self.positive: dict[bytes, str] = {}

    def admit(self, group: str, positive: Document, others: list[Document]) -> bool:
        mine = {s.image for s in positive.segments}
        every = mine | {s.image for d in others for s in d.segments}
        if any(self.held.get(p, group) != group for p in mine) or any(
                self.positive.get(p, group) != group for p in every):
            return False
        self.held.update(dict.fromkeys(every, group))
        self.positive.update(dict.fromkeys(mine, group))
        return True
