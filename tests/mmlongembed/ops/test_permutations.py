"""The one seeded non-identity permutation (mmlongembed.ops.permutations) that EviAlign's Mixed
condition (``draw="rank"``) and the Temporal half shuffles (``draw="shuffle"``) share."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlongembed.ops.permutations import DRAWS, SHUFFLE_ATTEMPTS, non_identity_permutation, nth_permutation
from mmlongembed.core.rng import derive_rng


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 7), seed=st.integers(0, 10 ** 6), draw=st.sampled_from(DRAWS))
def test_the_mixed_permutation_is_never_the_identity(k, seed, draw):
    perm = non_identity_permutation(derive_rng(seed, "p"), k, draw)
    assert sorted(perm) == list(range(k))
    assert k == 1 or perm != tuple(range(k))
    assert perm == non_identity_permutation(derive_rng(seed, "p"), k, draw)  # reproducible


@pytest.mark.parametrize("draw", DRAWS)
def test_the_mixed_permutation_covers_every_non_identity_one_evenly(draw):
    draws = Counter(non_identity_permutation(derive_rng(s, "cover"), 3, draw) for s in range(5000))
    assert set(draws) == {nth_permutation(3, r) for r in range(1, 6)}  # 3! - 1 of them, identity excluded
    assert min(draws.values()) > 850  # ~1000 each


def test_nth_permutation_is_lexicographic():
    assert [nth_permutation(4, r) for r in range(24)] == list(itertools.permutations(range(4)))


@settings(max_examples=100, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 10 ** 6))
def test_each_draw_consumes_the_generator_as_it_always_did(n, seed):
    # what keeps the built data byte-identical: "rank" is one integers(1, n!) draw of the
    # lexicographic rank; "shuffle" is rng.permutation(n), drawn again while it is the identity
    reference = derive_rng(seed, "same")
    assert non_identity_permutation(derive_rng(seed, "same"), n, "rank") == \
        nth_permutation(n, int(reference.integers(1, math.factorial(n))))
    reference = derive_rng(seed, "same")
    expected = tuple(range(n))
    while expected == tuple(range(n)):
        expected = tuple(int(i) for i in reference.permutation(n))
    assert non_identity_permutation(derive_rng(seed, "same"), n, "shuffle") == expected


class _AlwaysIdentity:
    def permutation(self, n):
        return np.arange(n)


def test_the_shuffle_draw_is_bounded():
    assert non_identity_permutation(_AlwaysIdentity(), 4, "shuffle") == (1, 2, 3, 0)
    assert SHUFFLE_ATTEMPTS == 64


def test_an_unknown_draw_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown draw 'sorted'"):
        non_identity_permutation(np.random.default_rng(0), 3, "sorted")
