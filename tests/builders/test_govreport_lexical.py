"""GovReport's lexically matched Hard tier (issue 37): the paper's pools untouched, each variant's
BM25 score against the summary on the side of its positive's drawn for it, so BM25 cannot tell
the whole report from its patched copies."""

import json
from collections import Counter
from pathlib import Path

import pytest

from builders._govreport_fixtures import write_govreport_jsonl
from builders.govreport import GovReportConfig
from mmlongembed.build.run import run_build
from mmlongembed.build.validate import format_report, validate_dir
from mmlongembed.checks.shortcuts import SUMMARY_ALPHA
from mmlongembed.core.builder import get_builder
from mmlongembed.ops.bm25 import BM25Index, QueryScorer, bm25_tokenize
from mmlongembed.ops.query_weight import SCORE_TOLERANCE
from mmlongembed.output.layout import read_built_pool
from tests.support.built_pools import audit_reading, candidate_rows

LENGTHS = (2048, 4096)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("govreport_subjects")
    # reports of a subject share its terms, so a donor can give a variant the summary's words back
    records = write_govreport_jsonl(root / "reports.jsonl", n_reports=110, paragraphs=(5, 30), subjects=5)
    return root, records


def _build(sources, out: Path, lexical: bool) -> Path:
    config = GovReportConfig(sources=str(sources[0]), lengths=LENGTHS, seed=3, lexical_tier=lexical)
    return run_build(get_builder("govreport"), config, out, progress=False)


@pytest.fixture(scope="module")
def with_tier(sources, tmp_path_factory):
    return _build(sources, tmp_path_factory.mktemp("with"), True)



def _lexical_pools(built: Path) -> list[str]:
    return [f"govreport-lexical-{n // 1024}k" for n in LENGTHS
            if (built / "data" / "govreport").exists() and _has_pool(built, f"govreport-lexical-{n // 1024}k")]


def _has_pool(built: Path, pool: str) -> bool:
    try:
        read_built_pool(built, pool)
    except Exception:  # noqa: BLE001  (an empty tier at one length writes no pool)
        return False
    return True


def test_the_paper_pools_read_back_the_same_rows_with_or_without_the_tier(sources, with_tier, tmp_path):
    without = _build(sources, tmp_path / "without", False)
    assert not _lexical_pools(without)
    for difficulty in ("easy", "hard"):
        for n in LENGTHS:
            pool = f"govreport-{difficulty}-{n // 1024}k"
            key = lambda r: r["internal_id"]  # noqa: E731
            assert sorted(candidate_rows(with_tier, pool), key=key) == sorted(candidate_rows(without, pool), key=key), pool


def test_the_tier_validates_and_holds_queries_of_the_hard_pool(with_tier):
    problems, checked = validate_dir(with_tier)
    assert not problems, format_report(problems, checked)
    pools = _lexical_pools(with_tier)
    assert pools
    for pool in pools:
        lexical = read_built_pool(with_tier, pool)
        hard = read_built_pool(with_tier, pool.replace("lexical", "hard"))
        assert set(lexical.queries["text"]) <= set(hard.queries["text"])
        variants = Counter(json.loads(p)["variant"] for p, role in zip(lexical.corpus["provenance"],
                                                                        lexical.corpus["role"]) if role != "positive")
        assert set(variants) == {"head25", "tail25", "middle50"}
        # levelled over the pool (``level_the_pool``): no query-blind rule reads the positives
        rule, p = audit_reading(with_tier, pool)
        assert p >= SUMMARY_ALPHA, (pool, rule, p)


def test_each_variant_lies_on_its_drawn_side_of_the_positive_rescored(sources, with_tier):
    """Rescored here, not read from the provenance, with the IDF the builder stands in for the
    pool's (over the hard pool's documents, whose queries the lexical pool's are drawn from): a
    variant made by the paper's recipe (the best donor, whatever it weighs) lands below its
    positive nearly always."""
    summary_of = {r["id"]: r["summary"] for r in sources[1]}
    groups, checked = 0, 0
    for pool in _lexical_pools(with_tier):
        above = Counter()
        hard = candidate_rows(with_tier, pool.replace("lexical", "hard"))
        index = BM25Index.from_texts(r["text"] for r in hard if r["role"] in ("positive", "hard_negative"))
        rows = candidate_rows(with_tier, pool)
        positives = {r["source_id"]: r for r in rows if r["role"] == "positive"}
        for source_id, positive in positives.items():
            scorer = QueryScorer(index, bm25_tokenize(summary_of[source_id]), average_length=index.average_length)
            positive_score = scorer.score_text(positive["text"])
            variants = [r for r in rows if r["role"] == "hard_negative" and r["source_id"] == source_id]
            n_above = 0
            for variant in variants:
                side = json.loads(variant["provenance"])["query_bm25"]["side"]
                score = scorer.score_text(variant["text"])
                assert (score - positive_score) * side > 0, (pool, variant["internal_id"])
                assert abs(score - positive_score) <= SCORE_TOLERANCE * positive_score
                n_above += score > positive_score
                checked += 1
            above[n_above] += 1
            groups += 1
        assert len(above) >= 3, above  # the variants above it number 0..3, not always the same
    assert checked == 3 * groups >= 3 * 8


def test_bm25_over_each_lexical_pool_ranks_the_positive_first_in_its_group_near_chance(with_tier):
    """BM25 as the harness runs it (IDF over the pool's own candidates, not the build's corpus):
    the sides drawn at build time must survive that change of IDF."""
    def positive_first_share(pool: str) -> tuple[float, int]:
        rows = candidate_rows(with_tier, pool)
        queries = read_built_pool(with_tier, pool).queries
        index = BM25Index.from_texts(r["text"] for r in rows)
        firsts, n = 0, 0
        for query_text, group in zip(queries["text"], queries["_id"]):
            scores = index.scores(bm25_tokenize(query_text))
            members = [(scores[k], r["role"]) for k, r in enumerate(rows) if r["group"] == group]
            top = max(s for s, _ in members)
            firsts += next(s for s, role in members if role == "positive") >= top
            n += 1
        return firsts / n, n

    for pool in _lexical_pools(with_tier):
        lexical, n = positive_first_share(pool)
        # exactly one group in four: the builder levels the top under BM25 over the pool itself
        # (``level_the_pool``; a positive tied with a variant counts as the top here)
        assert n >= 4 and abs(lexical * n - n / 4) <= 1, (pool, lexical, n)
