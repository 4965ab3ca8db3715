"""Page operations (mmlongembed.ops.pages): windows, slots at token fractions, unseen-page runs."""

import pytest

from mmlongembed.core.errors import FitError
from mmlongembed.ops.pages import (
    HARD_VARIANTS, PagePlan, apply_plan, find_page_run, head_window, plan_replacements, slots_at_fraction)
from mmlongembed.core.pools import LengthBand
from mmlongembed.core.rng import derive_rng


def rng(*keys):
    return derive_rng(0, "test", *keys)


@pytest.mark.parametrize("n", [4, 5, 6, 8, 9, 12, 17])
def test_slots_cover_their_fraction_within_one_page(n):
    costs = [100] * n
    for _, (start, end) in HARD_VARIANTS:
        a, b = slots_at_fraction(costs, start, end)
        assert 0 <= a < b <= n and (a, b) != (0, n)
        assert abs((b - a) - (end - start) * n) <= 1
        assert abs(a - start * n) <= 1
    assert slots_at_fraction(costs, 0.0, 0.25)[0] == 0  # head starts at the first page
    assert slots_at_fraction(costs, 0.75, 1.0)[1] == n  # tail ends at the last


def test_slots_follow_tokens_not_page_counts():
    # one huge first page (800 of 1500 tokens): the last 25% of the tokens are the last four
    # pages, not the last two of eight; the first 25% lies inside the first page
    costs = [800, 100, 100, 100, 100, 100, 100, 100]
    assert slots_at_fraction(costs, 0.0, 0.25) == (0, 1)
    assert slots_at_fraction(costs, 0.75, 1.0) == (4, 8)


def test_two_page_window_still_keeps_a_page():
    assert slots_at_fraction([10, 10], 0.0, 0.25) == (0, 1)
    assert slots_at_fraction([10, 10], 0.75, 1.0) == (1, 2)
    with pytest.raises(FitError):
        slots_at_fraction([10], 0.0, 0.25)


def test_page_run_is_unseen_and_exact_when_sizes_allow():
    costs = [100] * 6 + [100, 100, 100, 100]
    c, d = find_page_run(costs, 6, 200, 8, rng("run"))
    assert c >= 6 and sum(costs[c:d]) == 200
    # never a run inside the window, even when only the window could match exactly
    with pytest.raises(FitError):
        find_page_run([100, 100, 50, 50], 2, 200, 8, rng("run"))


def test_page_run_prefers_exact_then_within_tolerance():
    costs = [0] * 3 + [97, 105, 100]
    assert find_page_run(costs, 3, 100, 8, rng("a")) == (5, 6)  # exact beats closer-first
    assert find_page_run(costs[:5], 3, 100, 8, rng("a")) == (3, 4)  # |97-100| < |105-100|
    with pytest.raises(FitError):
        find_page_run(costs[:5], 3, 100, 2, rng("a"))


def test_page_run_avoids_runs_already_used():
    costs = [100] * 4 + [100] * 4
    seen = {find_page_run(costs, 4, 100, 8, rng("x", k), avoid=[(4, 5), (5, 6), (6, 7)]) for k in range(10)}
    assert seen == {(7, 8)}


def test_head_window_is_the_longest_in_band_that_leaves_unseen_pages():
    costs = [100] * 20
    band = LengthBand.halving(1024)  # (512, 1024]
    n, plans = head_window(costs, band, lambda n: rng("w", n))
    assert n == 10  # 11 pages would be 1100 tokens
    assert [p.variant for p in plans] == [v for v, _ in HARD_VARIANTS]
    for plan in plans:
        assert plan.donor[0] >= n and plan.block_tokens == plan.removed_tokens
    runs = [p.donor for p in plans]
    assert len(set(runs)) == 3 and not any(a[0] < b[1] and b[0] < a[1] for a in runs for b in runs if a != b)


def test_head_window_shrinks_until_unseen_pages_suffice():
    # 12 pages: a 10-page window leaves 2 unseen pages, too few for the 5-page middle run
    costs = [100] * 12
    band = LengthBand.halving(1024)
    n, plans = head_window(costs, band, lambda n: rng("w", n))
    assert n < 10 and all(p.donor[1] <= 12 for p in plans)
    middle = next(p for p in plans if p.variant == "middle50")
    assert middle.donor[1] - middle.donor[0] == middle.slots[1] - middle.slots[0]
    with pytest.raises(FitError) as error:
        head_window([100] * 8, band, lambda n: rng("w", n))  # 6 or 7 pages leave 2 or 1 unseen
    assert error.value.reason == "no_unseen_pages"
    with pytest.raises(FitError) as error:
        head_window([100] * 6, band, lambda n: rng("w", n))  # only all six pages fit: none unseen
    assert error.value.reason == "no_window_in_band"
    with pytest.raises(FitError) as error:
        head_window([100] * 3, band, lambda n: rng("w", n))
    assert error.value.reason == "too_short"


def test_mixed_page_sizes_use_the_tolerance_and_stay_in_band():
    costs = [100, 100, 100, 100, 100, 100, 103, 96, 98, 104, 101, 99, 97]
    band = LengthBand(target=700, lo=500, hi=700)
    n, plans = head_window(costs, band, lambda n: rng("m", n))
    total = sum(costs[:n])
    for plan in plans:
        variant = total - plan.removed_tokens + plan.block_tokens
        assert abs(variant - total) <= max(8, total // 100) and band.contains(variant)


def test_apply_plan_replaces_exactly_the_slots():
    plan = PagePlan("middle50", (0.25, 0.75), (2, 5), (9, 12), 300, 300)
    assert apply_plan(8, plan) == [0, 1, 9, 10, 11, 5, 6, 7]
    assert plan_replacements([100] * 16, 8, LengthBand(800, 400, 800), rng("p"))[0].slots == (0, 2)
