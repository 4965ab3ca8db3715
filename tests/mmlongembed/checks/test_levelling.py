"""Levelling a lexical tier's pool for the label-free audit's query-blind rules
(``checks.levelling.level_the_pool``, ``checks.shortcuts.level_groups``): a statistic a builder
could not keep level in every group leaves the pool with the fewest groups it can; the audit of
the pool as written then finds nothing, and a pool with nothing to find loses no query."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np

from mmlongembed.checks.shortcuts import SUMMARY_ALPHA
from mmlongembed.core.documents import text_document
from mmlongembed.core.pools import POSITIVE
from mmlongembed.core.tokens import default_counter
from mmlongembed.checks.levelling import level_the_pool
from mmlongembed.testing import write_fixture_build
from tests.mmlongembed.checks.test_shortcut_audit import clean_pool, finish
from tests.support.built_pools import audit_reading
from tests.support import fixture_builder  # noqa: F401  (registers the builder the fixture build names)

LONGER_WORDS = {"river": "riverbank", "stone": "stonework", "bridge": "bridgehead"}


def with_longer_words(share: float, seed: int = 0):
    """A clean pool whose positive has longer words than its group in ``share`` of the groups
    (drawn): a builder's donor blocks that bring a subject's long terms, seen from the other side.
    Returns the pool and the planted queries' ids."""
    pool, rng, counter = clean_pool(), random.Random(seed), default_counter()
    planted = {query.id for query in pool.queries if rng.random() < share}
    for candidate in pool.candidates:
        if candidate.role == POSITIVE and candidate.group in planted:
            text = " ".join(LONGER_WORDS.get(word, word) for word in candidate.document.text.split(" "))
            candidate.document = text_document(candidate.id, text, counter)
    return finish(pool), planted


def test_a_seam_in_most_groups_is_levelled_by_the_groups_that_carry_it(tmp_path):
    pool, planted = with_longer_words(0.55)
    rule, p = audit_reading(write_fixture_build(tmp_path / "before", [pool]), pool.name)
    assert "mean_word_length" in rule and p < 1e-6  # the seam is there to level
    levelled, left, left_for_top = level_the_pool(pool, np.random.default_rng(0), top=False)
    assert left_for_top == [] and len(levelled.queries) + len(left) == len(pool.queries)
    rule, p = audit_reading(write_fixture_build(tmp_path / "after", [levelled]), levelled.name)
    assert p >= SUMMARY_ALPHA, (rule, p)
    # the groups that left are mostly those that carried it (a group whose positive has the
    # longest words by chance reads alike), and fewer than carried it
    planted_left = sum(query.id in planted for query in left) / len(left)
    planted_kept = sum(query.id in planted for query in levelled.queries) / len(levelled.queries)
    assert planted_left > 2 * planted_kept
    assert len(left) < len(planted)
    # what a careless levelling does (as many queries leave, drawn) leaves the seam in place
    rng = random.Random(1)
    drawn = set(rng.sample([q.id for q in pool.queries], len(left)))
    careless = replace(pool, queries=[], candidates=[], qrels=[])
    for query in pool.queries:
        if query.id not in drawn:
            group = [c for c in pool.candidates if c.group == query.id]
            careless.add_query(query, group[0], group[1:])
    _, p = audit_reading(write_fixture_build(tmp_path / "careless", [careless]), careless.name)
    assert p < SUMMARY_ALPHA


def test_a_pool_with_nothing_to_find_loses_no_query(tmp_path):
    pool = finish(clean_pool())
    levelled, left, _ = level_the_pool(pool, np.random.default_rng(0), top=False)
    assert left == [] and [q.id for q in levelled.queries] == [q.id for q in pool.queries]
    assert {c.id for c in levelled.candidates} == {c.id for c in pool.candidates}
