"""MMDocRAG's lexically matched Hard tier (issue 37 §1): the paper's pools untouched; the tier's
groups keep the evidence chain (the positive holds every gold quote, each variant lacks the one it
dropped) and the hard pool's variants; BM25, as the harness scores it (tie-aware), finds the
positive among its group at chance, where on the paper's Hard it finds it well above."""

import json
from pathlib import Path

import pytest

import builders._mmdocrag_lexical as mmdocrag_lexical
from builders._mmdocrag_fixtures import write_mmdocrag_jsonl
from builders.mmdocrag import MMDocRAGConfig
from mmlongembed.build.run import run_build
from mmlongembed.build.validate import format_report, validate_dir
from mmlongembed.core.builder import get_builder
from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from mmlongembed.output.layout import read_built_pool
from tests.support.built_pools import audit_reading, candidate_rows

pytest.importorskip("PIL")
EASY, HARD, LEXICAL = "mmdocrag-easy-1k", "mmdocrag-hard-1k", "mmdocrag-lexical-1k"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmdocrag_subjects")
    # text quotes that name the question's subject in half their sentences, gold or not, as a
    # real document's quotes name what it is about
    write_mmdocrag_jsonl(root, n_documents=30, records_per_document=2, subject_share=0.5)
    return root


def _build(sources: Path, out: Path, lexical: bool = True) -> Path:
    config = MMDocRAGConfig(sources=str(sources), lengths=(1024,), max_queries_per_pool=100, dpi=36.0,
                            max_image_pixels=96 * 96, lexical_tier=lexical)
    return run_build(get_builder("mmdocrag"), config, out, progress=False)


@pytest.fixture(scope="module")
def with_tier(sources, tmp_path_factory):
    return _build(sources, tmp_path_factory.mktemp("with"))



def group_standings(built: Path, pool: str) -> list[tuple[int, int, dict]]:
    """BM25 as the harness runs it (an index over the pool's own candidates), per query: how many
    of its group's variants score above its positive, how many tie with it, and the positive's
    provenance."""
    rows = candidate_rows(built, pool)
    queries = read_built_pool(built, pool).queries
    index = BM25Index.from_texts(r["text"] for r in rows)
    out = []
    for query_text, group in zip(queries["text"], queries["_id"]):
        scores = index.scores(bm25_tokenize(query_text))
        members = [(scores[k], r) for k, r in enumerate(rows) if r["group"] == group]
        score, positive = next((s, r) for s, r in members if r["role"] == "positive")
        others = [s for s, r in members if r["role"] != "positive"]
        out.append((sum(s > score for s in others), sum(s == score for s in others),
                    json.loads(positive["provenance"])))
    return out


def among_group_p_at_1(built: Path, pool: str) -> tuple[float, int]:
    """The harness's tie-aware P@1 among each query's group (the expected P@1 over the orders of
    the candidates tied with the positive), averaged over the queries."""
    standings = group_standings(built, pool)
    return sum(1 / (tied + 1) for above, tied, _ in standings if above == 0) / len(standings), len(standings)


def test_the_paper_pools_read_back_the_same_rows_with_or_without_the_tier(sources, with_tier, tmp_path):
    without = _build(sources, tmp_path / "without", lexical=False)
    with pytest.raises(Exception):  # noqa: B017  (no lexical pool is written without the tier)
        read_built_pool(without, LEXICAL)
    for pool in (EASY, HARD):
        key = lambda r: r["internal_id"]  # noqa: E731
        assert sorted(candidate_rows(with_tier, pool), key=key) == sorted(candidate_rows(without, pool), key=key), pool


def test_the_tier_keeps_the_hard_queries_variants_and_evidence_chain(with_tier):
    problems, checked = validate_dir(with_tier)  # check_quote_pool: every gold quote where it must be
    assert not problems, format_report(problems, checked)
    lexical, hard = candidate_rows(with_tier, LEXICAL), candidate_rows(with_tier, HARD)
    assert len(lexical) >= 4 * 25
    hard_text = {r["internal_id"]: r["text"] for r in hard}
    for row in lexical:
        provenance = json.loads(row["provenance"])
        if row["role"] == "positive":
            # one quote of its own context that is no evidence, refilled for the rank drawn
            [refill] = provenance["refilled"]
            assert refill["kind"] == "text" and refill["sha256"] not in {e.get("sha256")
                                                                         for e in provenance["evidence"]}
        else:
            assert row["text"] == hard_text[row["internal_id"]]  # the hard pool's variant
            assert provenance["removed"]


def test_bm25_ranks_each_positive_where_its_rank_was_drawn(with_tier):
    """The positive is top (no variant above it) exactly where the build drew none above it, and
    below at least as many as drawn otherwise; where variants lost none of the question's words
    (``variants_near``) and the top was drawn, it is above every other variant."""
    standings = group_standings(with_tier, LEXICAL)
    clusters = 0
    for above, tied, provenance in standings:
        drawn, near = provenance["query_bm25"]["variants_above"], provenance["query_bm25"]["variants_near"]
        if drawn == 0 and near:
            assert above + tied <= near, (above, tied, provenance["query_bm25"])
            clusters += 1
        else:
            assert (above == 0) == (drawn == 0), (above, tied, provenance["query_bm25"])
            assert above >= drawn
    assert clusters  # the fixture's image variants lost none of the question's words


def test_bm25_finds_the_positive_near_chance_on_the_tier_but_not_on_hard(with_tier):
    lexical, n = among_group_p_at_1(with_tier, LEXICAL)
    hard, n_hard = among_group_p_at_1(with_tier, HARD)
    assert n >= 25 and n_hard >= 40
    assert hard >= 0.33, hard  # chance 0.25; the variants that lost a text quote score below the positive
    # levelled in the pool: the positive tops exactly one group in four (to the nearest group)
    assert abs(lexical * n - n / 4) <= 1, (lexical, n)
    # no query-blind rule (word statistics included) finds the lexical pool's positives
    rule, p = audit_reading(with_tier, LEXICAL)
    assert p >= 0.05, (rule, p)


def test_the_positive_is_refilled_whatever_rank_is_drawn_and_the_top_is_drawn_one_time_in_four():
    """A positive left whole would lie at its group's centre in characters (each variant holds a
    refill): it is refilled for every rank, the top included, and the drawn rank's gap holds; with
    a variant level with the whole positive (it lost no word of the question), the draws 0 and 1
    give the hard pool's positive (None) where it lies above the other variants."""
    from mmlongembed.core.documents import Segment, TEXT
    from mmlongembed.core.rng import derive_rng
    from mmlongembed.ops.bm25 import BM25Index, QueryScorer
    from mmlongembed.ops.multisource.evidence import Unit
    from mmlongembed.ops.multisource.lexical_refill import UnitWords
    from mmlongembed.core.tokens import default_counter

    counter = default_counter()

    def quote(uid: str, text: str, origin: str = "source") -> Unit:
        text += "\n\n"
        return Unit(f"context:doc:{uid}", "context", (Segment(kind=TEXT, tokens=counter.count(text), text=text,
                                                                 paragraph_end=True, origin=origin),))

    units = [quote("a", "Zorblat owns the Quintex mill.", "evidence:0"),
             quote("b", "The Quintex mill of Zorblat grew."), quote("c", "Rain fell on the hills all day.")]
    refill = [Unit("refill:r", "refill", tuple(Segment(kind=TEXT, tokens=counter.count(t), text=t,
                                                                   paragraph_end=i == 1, origin="refill:other")
                                               for i, t in enumerate(["Boats sailed far. ", "Birds sang on."])))]
    words = UnitWords()
    index = BM25Index([words.document(units), ["rain", "boats"], ["mill", "birds"]])
    scorer = QueryScorer(index, ["zorblat", "quintex", "mill"], index.average_length)
    full = words.score(scorer, units)
    scores = [0.9 * full, 0.3 * full, 0.2 * full]
    tops = 0
    for draw in range(200):
        made = mmdocrag_lexical.lexical_positive(
            units, [units[0].segments[0].tokens], scores, full, scorer, words, [lambda: refill], 20,
            derive_rng(draw, "rank"), lambda unit_id: derive_rng(draw, unit_id), counter)
        assert not isinstance(made, str), made
        refilled_units, record, gap, near = made
        assert near == 0
        assert record["quote"] in {"b", "c"} and refilled_units != units
        score = words.score(scorer, refilled_units)
        assert gap.holds(score)
        tops += score > max(scores)
    assert 0.15 < tops / 200 < 0.35
    level = [full * 1.001, 0.3 * full, 0.2 * full]
    as_hard = 0
    for draw in range(200):
        made = mmdocrag_lexical.lexical_positive(
            units, [units[0].segments[0].tokens], level, full * 0.999, scorer, words, [lambda: refill], 20,
            derive_rng(draw, "rank"), lambda unit_id: derive_rng(draw, unit_id), counter)
        assert not isinstance(made, str), made
        refilled_units, record, gap, near = made
        assert near == 1
        if refilled_units is None:
            as_hard += 1
            assert record is None and gap.holds(full * 0.999)
        else:
            assert words.score(scorer, refilled_units) < full * 1.001 and gap.holds(
                words.score(scorer, refilled_units))
    assert 0.35 < as_hard / 200 < 0.65  # draws 0 and 1 of 0..3
    # the hard pool's positive below a variant that lost words: the top cannot be reached
    assert mmdocrag_lexical.lexical_positive(
        units, [units[0].segments[0].tokens], [full, 0.99 * full, 0.2 * full], 0.95 * full, scorer, words,
        [lambda: refill], 20, derive_rng(0, "rank"), lambda unit_id: derive_rng(0, unit_id), counter) \
        == "rank_unreachable"


def test_a_positive_refilled_whatever_its_score_is_found_off_its_drawn_rank(sources, tmp_path, monkeypatch):
    """The plausible wrong tier: the positive's quote refilled as the hard tier refills a variant's
    (whatever the refill's words weigh) and no gap kept. BM25's figure among groups may still look
    like chance on this fixture, but the ranks drawn are not where BM25 puts the positives: the
    check above fails."""
    monkeypatch.setattr(mmdocrag_lexical.Gap, "holds", lambda self, score: True)
    built = _build(sources, tmp_path / "wrong")
    with pytest.raises(AssertionError):
        test_bm25_ranks_each_positive_where_its_rank_was_drawn(built)
