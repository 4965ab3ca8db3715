"""Middle truncation, as in the paper: an input longer than the model's window keeps its head and
its tail and loses the middle.

Inputs are sequences of units with a token cost: a text token costs 1, an image costs all its
visual tokens and is kept or dropped whole (half an image is not an image).
"""

from __future__ import annotations

from typing import Sequence


def keep_head_tail(costs: Sequence[int], budget: int) -> tuple[int, int]:
    """How many units to keep from the head and from the tail so that the kept cost fits `budget`.

    The head gets the first half of the budget, the tail the rest plus whatever the head could
    not use (an image too large for the head's half). Returns (n_head, n_tail); n_head + n_tail
    == len(costs) when nothing has to go."""
    total = sum(costs)
    if total <= budget:
        return len(costs), 0
    budget = max(0, budget)
    head_budget = budget // 2
    n_head, used = 0, 0
    while n_head < len(costs) and used + costs[n_head] <= head_budget:
        used += costs[n_head]
        n_head += 1
    tail_budget = budget - used
    n_tail, used_tail = 0, 0
    while n_tail < len(costs) - n_head and used_tail + costs[-1 - n_tail] <= tail_budget:
        used_tail += costs[-1 - n_tail]
        n_tail += 1
    return n_head, n_tail


def truncate_middle(units: list, costs: Sequence[int], budget: int) -> tuple[list, bool]:
    """The kept units (head then tail) and whether anything was dropped."""
    n_head, n_tail = keep_head_tail(costs, budget)
    if n_head + n_tail >= len(units):
        return list(units), False
    return list(units[:n_head]) + (list(units[len(units) - n_tail:]) if n_tail else []), True


def kept_character_ranges(spans: Sequence[tuple[int, int]], costs: Sequence[int], budget: int,
                          length: int) -> list[tuple[int, int]]:
    """The character ranges of an input of ``length`` characters that middle truncation keeps,
    given each unit's character span (``spans``, in order): the head's units from the start, the
    tail's to the end; the whole input where nothing has to go."""
    n_head, n_tail = keep_head_tail(costs, budget)
    if n_head + n_tail >= len(spans):
        return [(0, length)]
    kept = [(0, spans[n_head - 1][1])] if n_head else []
    return kept + ([(spans[len(spans) - n_tail][0], length)] if n_tail else [])


def range_kept(char_range: Sequence[int], kept: Sequence[tuple[int, int]]) -> bool:
    """Whether the characters ``[start, end)`` lie whole inside one kept range (a needle cut in
    part is not the needle)."""
    start, end = char_range
    return any(lo <= start and end <= hi for lo, hi in kept)
