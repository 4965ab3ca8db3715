"""Every random choice comes from a generator derived from (seed, item identity).

Results therefore do not depend on processing order or on how work is split across processes.
"""

from __future__ import annotations

import hashlib
from typing import Sequence, TypeVar

import numpy as np

T = TypeVar("T")


def derive_rng(seed: int, *keys: object) -> np.random.Generator:
    material = "\x1f".join([str(seed), *map(str, keys)]).encode("utf-8")
    digest = hashlib.sha256(material).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def seeded_order(items: Sequence[T], rng: np.random.Generator) -> list[T]:
    """``items`` in the order of one permutation drawn from ``rng``."""
    return [items[int(i)] for i in rng.permutation(len(items))]
