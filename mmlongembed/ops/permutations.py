"""Seeded permutations other than the identity, one function for every builder that needs one.

EviAlign's Mixed condition permutes a target's K evidence spans; Temporal Summarization's half
shuffles permute half of a run's event blocks. Both want a uniform draw over the n! - 1
non-identity permutations; they consume their generator differently (``draw``), and each keeps
its way so that the data it built before is the data it builds now, byte for byte.
"""

from __future__ import annotations

import math

import numpy as np

DRAWS = ("rank", "shuffle")
SHUFFLE_ATTEMPTS = 64


def non_identity_permutation(rng: np.random.Generator, n: int, draw: str = "rank") -> tuple[int, ...]:
    """One of the n! - 1 permutations of range(n) other than the identity, uniformly (n <= 1 has
    none: the identity is returned). ``draw`` says how ``rng`` is consumed:

    - ``"rank"``: one ``rng.integers(1, n!)`` draw of the lexicographic rank (rank 0 is the
      identity); EviAlign's Mixed condition.
    - ``"shuffle"``: ``rng.permutation(n)``, drawn again while it is the identity, at most
      ``SHUFFLE_ATTEMPTS`` times, then a rotation (reached with probability <= 2^-64); the
      Temporal half shuffles.
    """
    if draw not in DRAWS:
        raise ValueError(f"unknown draw {draw!r}; expected one of {', '.join(DRAWS)}")
    if n <= 1:
        return tuple(range(n))
    if draw == "rank":
        return nth_permutation(n, int(rng.integers(1, math.factorial(n))))
    for _ in range(SHUFFLE_ATTEMPTS):
        p = tuple(int(i) for i in rng.permutation(n))
        if p != tuple(range(n)):
            return p
    return tuple(range(1, n)) + (0,)


def nth_permutation(k: int, rank: int) -> tuple[int, ...]:
    """The permutation of range(k) with the given lexicographic rank."""
    pool, out = list(range(k)), []
    for position in range(k, 0, -1):
        index, rank = divmod(rank, math.factorial(position - 1))
        out.append(pool.pop(index))
    return tuple(out)
