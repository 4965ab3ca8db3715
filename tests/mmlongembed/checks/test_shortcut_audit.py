"""The label-free shortcut audit: each kind of leak, planted in an otherwise clean pool, fails the
build; the clean pool passes; the published layout itself defeats the id and row-order leaks."""

from __future__ import annotations

import random
import re

import pytest

from mmlongembed.core.documents import text_document
from mmlongembed.output.layout import read_built_pool
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.checks.shortcuts import audit_pool
from mmlongembed.testing import write_fixture_build
from mmlongembed.core.tokens import default_counter
from mmlongembed.build.validate import validate_dir
from mmlongembed.ops.wordstats import FEATURES as WORD_FEATURES
from tests.support import fixture_builder  # noqa: F401  (registers the builder the fixture builds name)

N_QUERIES = 120
WORDS = "river stone window garden letter market bridge lantern orchard meadow harbour candle kettle".split()
REPEATED = {"window": "garden", "letter": "market", "bridge": "lantern", "orchard": "meadow", "candle": "kettle",
            "river": "stone"}  # half the vocabulary folded onto the other half


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def clean_pool(name: str = "fixture-hard-256", seed: int = 0) -> Pool:
    """Groups of four whose members differ only in content: same shape, lengths drawn alike."""
    rng = random.Random(seed)
    counter = default_counter()
    pool = Pool(name=name, task="logical_summarization", dataset="fixture", difficulty="hard",
                band=LengthBand(target=256, lo=1, hi=256))
    for q in range(N_QUERIES):
        qid = f"q:{q}"
        pool.queries.append(Query(id=qid, text=sentence(rng, 6), instruction="Find it.", source_id=str(q),
                                  n_tokens=0))
        for k, role in enumerate((POSITIVE, HARD_NEGATIVE, HARD_NEGATIVE, EASY_NEGATIVE)):
            text = "\n".join(sentence(rng, rng.randint(8, 12)) for _ in range(rng.randint(3, 5)))
            cid = f"d:{q}" if role == POSITIVE else f"d:{q}:v{k}"
            pool.candidates.append(Candidate(id=cid, document=text_document(cid, text, counter), role=role,
                                             group=qid, source_id=str(q), n_tokens=0))
        pool.qrels.append((qid, f"d:{q}", 1))
    return pool


def finish(pool: Pool) -> Pool:
    """Counts from the final text, as a builder does after its last edit."""
    counter = default_counter()
    for query in pool.queries:
        query.n_tokens = counter.count(query.text)
    for candidate in pool.candidates:
        candidate.n_tokens = sum(counter.count_many([candidate.document.text]))
    return pool


def plant(pool: Pool, role: str, edit) -> Pool:
    counter = default_counter()
    for candidate in pool.candidates:
        if candidate.role == role:
            text = edit(candidate.document.text)
            candidate.document = text_document(candidate.id, text, counter)
    return finish(pool)


def shortcut_problems(tmp_path, pool: Pool) -> list[str]:
    problems, _ = validate_dir(write_fixture_build(tmp_path / "build", [pool]))
    return [p.detail for p in problems if p.check == "shortcut"]


def test_a_clean_pool_passes(tmp_path):
    assert shortcut_problems(tmp_path, finish(clean_pool())) == []


@pytest.mark.parametrize("role,edit,rule", [
    # formatting seams a splicing builder leaves behind; one negative of three marked
    (EASY_NEGATIVE, lambda t: t + "\n", "trailing"),
    (POSITIVE, lambda t: t.replace(". ", ".  ").replace("\n", "  \n"), "double_spaces"),
    (POSITIVE, lambda t: t.replace("\n", "\n\n"), "blank_lines"),
    (POSITIVE, lambda t: t.rstrip(".") + "!", "final character"),
    # length
    (POSITIVE, lambda t: t + " " + t, "n_tokens"),
])
def test_each_planted_leak_fails_the_build(tmp_path, role, edit, rule):
    problems = shortcut_problems(tmp_path, plant(clean_pool(), role, edit))
    assert problems and any(rule in p for p in problems), problems


@pytest.mark.parametrize("edit,rule", [
    # what an edit that brings or drops words leaves in the words themselves (issue 19): the
    # positive repeats its words more (a sentence about its paragraph's entity), or its variants
    # bring words the rest never used; word lengths, capitals, digits, sentence lengths
    (lambda t: re.sub(r"\w+", lambda m: REPEATED.get(m.group(), m.group()), t), "type_token_ratio"),
    (lambda t: " ".join(f"{w}{k}" if k % 5 == 0 else w for k, w in enumerate(t.split(" "))), "hapax_share"),
    (lambda t: t.replace("river", "riverbank").replace("stone", "stonework"), "mean_word_length"),
    (lambda t: t.replace(" stone", " Stone").replace(" river", " River"), "capitalised_share"),
    (lambda t: t.replace(" stone", " 1990").replace(" river", " 1871"), "digit_share"),
    (lambda t: t.replace(".\n", ", and ", 1), "sentence_words_mean"),
])
def test_each_planted_word_statistic_fails_the_build(tmp_path, edit, rule):
    problems = shortcut_problems(tmp_path, plant(clean_pool(), POSITIVE, edit))
    assert problems and any(rule in p for p in problems), problems


def test_the_audit_reports_every_word_statistic_of_a_pool():
    pool = finish(clean_pool())
    corpus, queries, qrels = _columns(pool, random.Random(2).sample(range(len(pool.candidates)), len(pool.candidates)))
    verdict = audit_pool(corpus, qrels)
    assert list(verdict["word_statistics"]) == list(WORD_FEATURES)
    for feature, reading in verdict["word_statistics"].items():
        assert feature in reading["rule"] and reading["p_value"] > 1e-3, reading


def test_a_title_that_marks_the_positive_fails_the_build(tmp_path):
    pool = finish(clean_pool())
    for candidate in pool.candidates:
        candidate.title = "Report" if candidate.role == POSITIVE else ""
    assert any("column:title" in p for p in shortcut_problems(tmp_path, pool))


def _columns(pool: Pool, order) -> tuple[dict, dict, dict]:
    """The pool's tables as a careless writer would make them: readable ids, rows in ``order``."""
    rows = [pool.candidates[i] for i in order]
    corpus = {"_id": [c.id for c in rows], "text": [c.document.text for c in rows], "group": [c.group for c in rows],
              "n_tokens": [c.n_tokens for c in rows]}
    queries = {"_id": [q.id for q in pool.queries]}
    qrels = {"query-id": [q for q, _, _ in pool.qrels], "corpus-id": [c for _, c, _ in pool.qrels],
             "score": [s for _, _, s in pool.qrels]}
    return corpus, queries, qrels


def test_ids_and_row_order_that_point_to_the_positive_are_caught():
    pool = finish(clean_pool())
    # the positive first in its group of four, groups in query order, ids derived from the query id
    corpus, queries, qrels = _columns(pool, range(len(pool.candidates)))
    verdict = audit_pool(corpus, qrels, queries)
    failing = {f["rule"] for f in verdict["failing"]}
    assert not verdict["passed"]
    assert {"min row_order", "row aligned with the query's row", "id shares most 3-grams with the query's id"} <= failing
    # the same rows shuffled, ids replaced by random strings: nothing left to find
    order = random.Random(1).sample(range(len(pool.candidates)), len(pool.candidates))
    corpus, queries, qrels = _columns(pool, order)
    opaque = {cid: f"{random.Random(cid).getrandbits(64):016x}" for cid in [*corpus["_id"], *queries["_id"]]}
    corpus["_id"] = [opaque[c] for c in corpus["_id"]]
    corpus["group"] = [opaque[g] for g in corpus["group"]]
    queries["_id"] = [opaque[q] for q in queries["_id"]]
    qrels = {"query-id": [opaque[q] for q in qrels["query-id"]], "corpus-id": [opaque[c] for c in qrels["corpus-id"]],
             "score": qrels["score"]}
    assert audit_pool(corpus, qrels, queries)["passed"]


def test_the_published_layout_defeats_id_and_order_leaks(tmp_path):
    """The builder's readable ids and its query-ordered candidates go in; what is written passes."""
    root = write_fixture_build(tmp_path / "build", [finish(clean_pool())])
    tables = read_built_pool(root, "fixture-hard-256")
    verdict = audit_pool(tables.corpus, tables.qrels, tables.queries)
    assert verdict["passed"], verdict
    assert not any(cid.startswith("d:") for cid in tables.corpus["_id"])
    positions = [tables.corpus["_id"].index(c) for c in tables.qrels["corpus-id"]]
    assert positions != sorted(positions)


def test_a_grid_pool_of_positives_only_is_checked_by_the_query_aware_rules():
    """Every candidate the positive of one query (the needle grid): query-blind rules are exact
    chance by construction, the id and row rules still run."""
    counter = default_counter()
    ids = [f"needle-{k}" for k in range(25)]
    corpus = {"_id": [f"d:{i}" for i in ids], "text": [f"text {k}" for k in range(25)], "group": [f"q:{i}" for i in ids],
              "n_tokens": [counter.count(f"text {k}") for k in range(25)]}
    queries = {"_id": [f"q:{i}" for i in ids]}
    qrels = {"query-id": queries["_id"], "corpus-id": corpus["_id"], "score": [1] * 25}
    verdict = audit_pool(corpus, qrels, queries)
    assert verdict["groups"] == 0 and not verdict["passed"]
    assert verdict["worst_rule"] in ("id shares most 3-grams with the query's id", "row aligned with the query's row")
    assert verdict["worst_n"] == 25  # the rule read every query (no group), and the summary says so
    from mmlongembed.build.run import _worst_rule

    assert ", n=25, " in _worst_rule({"pool": verdict})


def test_a_design_signal_is_reported_and_does_not_fail_the_pool():
    """GovReport's variants mix in another report's text by the paper's design: the builder names
    the word statistics this moves, and the audit lists their readings apart."""
    pool = plant(clean_pool(), POSITIVE, lambda t: re.sub(r"\w+", lambda m: REPEATED.get(m.group(), m.group()), t))
    corpus, _, qrels = _columns(pool, random.Random(3).sample(range(len(pool.candidates)), len(pool.candidates)))
    strict = audit_pool(corpus, qrels)
    assert any("type_token_ratio" in f["rule"] for f in strict["failing"])
    lenient = audit_pool(corpus, qrels, design_signals=("type_token_ratio",))
    assert not any("type_token_ratio" in f["rule"] for f in lenient["failing"])
    assert any("type_token_ratio" in f["rule"] for f in lenient["design_signals"])
    assert "design_signals" not in strict


def test_the_odd_one_out_is_caught_where_the_longest_and_shortest_are_not():
    """Issue 37 §4: negatives cut to one length target all land on one figure (ActivityNet's easy
    negatives at 1,680 tokens) and leave the positive alone, above it in some groups and below in
    others: "max" and "min" of the length each find it in half the groups, the distance from the
    group's median in all of them."""
    pool = finish(clean_pool())
    corpus, _, qrels = _columns(pool, random.Random(3).sample(range(len(pool.candidates)), len(pool.candidates)))
    positives = set(qrels["corpus-id"])
    group_number = {g: k for k, g in enumerate(dict.fromkeys(corpus["group"]))}
    corpus["n_tokens"] = [(1620 if group_number[g] % 2 else 1740) if cid in positives else 1680
                          for cid, g in zip(corpus["_id"], corpus["group"])]
    verdict = audit_pool(corpus, qrels)
    failing = {r["rule"]: r["p_at_1"] for r in verdict["failing"]}
    assert failing["max distance from its group's median column:n_tokens"] == 1.0, verdict["failing"]
    assert failing["max column:n_tokens"] == failing["min column:n_tokens"] == 0.5
    # lengths drawn alike for every member of a group (the fix: negatives whose lengths straddle the
    # positive's, not cut to one figure) pass
    rng = random.Random(4)
    corpus["n_tokens"] = [rng.randint(1600, 1760) for _ in corpus["_id"]]
    assert not any("distance from its group's median" in r["rule"] for r in audit_pool(corpus, qrels)["failing"])


def test_a_texts_features_are_kept_by_its_digest_and_only_the_most_recent(monkeypatch):
    """A build reads most texts twice (the lexical tier's levelling, then the written pools'
    audit): the features of a text read again are those read before, a text that differs by one
    character gets its own, and no more than ``FEATURES_KEPT`` are kept."""
    from mmlongembed.checks import shortcuts

    monkeypatch.setattr(shortcuts, "FEATURES_KEPT", 3)
    monkeypatch.setattr(shortcuts, "_features_by_digest", type(shortcuts._features_by_digest)())
    texts = [f"Text number {i}.\n" * (i + 1) for i in range(5)]
    first = [shortcuts._text_features(t) for t in texts]
    assert len(shortcuts._features_by_digest) == 3
    assert [shortcuts._text_features(t) for t in texts] == first == [shortcuts._features_of_text(t) for t in texts]
    assert shortcuts._text_features(texts[4] + " ") != first[4]  # trailing whitespace: not the same text
    assert shortcuts._text_features("\ud800 lone surrogate") == shortcuts._features_of_text("\ud800 lone surrogate")
