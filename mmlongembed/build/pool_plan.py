"""What every builder's pool loop needs, in one small object, and the loop itself.

A builder's recipe says which items may become queries and how one item becomes its query, its
positive and its negatives; this module holds the part every builder would otherwise write by
hand: walk the items in their seeded order, stop at the cap, add what was made to the pool, and
count what could not be made under its skip reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.pools import Candidate, Pool, Query
from mmlongembed.core.rng import derive_rng
from mmlongembed.core.tokens import TokenCounter


@dataclass(frozen=True)
class PoolContext:
    """The config, token counter, report and generator factory one build's pool code shares, so
    that a helper takes one argument instead of four."""

    builder: str  # the builder's registry name: the first key of every generator it derives
    config: Any
    counter: TokenCounter
    report: BuildReport

    def rng(self, *identity: object) -> np.random.Generator:
        """The generator of one random choice: derived from the seed, the builder and the
        identity of what is being chosen (``derive_rng(seed, builder, *identity)``)."""
        return derive_rng(self.config.seed, self.builder, *identity)

    @property
    def cap(self) -> int:
        """How many queries a pool takes at most (``--max-queries-per-pool``)."""
        return self.config.max_queries_per_pool


class Skip(Exception):
    """An item that cannot become a query of this pool, with the reason the summary counts it
    under (``BuildReport.skip``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Made = tuple[Query, Candidate, Sequence[Candidate]]


def fill_pool(pool: Pool, order: Iterable, make: Callable[[Any], Made | None], context: PoolContext,
              describe: Callable[[Any], str] = str) -> int:
    """Make queries from ``order`` until ``pool`` holds the context's cap of them: ``make(item)``
    returns (query, positive, negatives), or None to pass over an item without counting it, or
    raises ``Skip`` (counted under its reason, ``describe(item)`` as the example). Returns how
    many queries were added."""
    added = 0
    for item in order:
        if added >= context.cap:
            break
        try:
            made = make(item)
        except Skip as skipped:
            context.report.skip(skipped.reason, describe(item))
            continue
        if made is None:
            continue
        query, positive, negatives = made
        pool.add_query(query, positive, negatives)
        added += 1
    return added
