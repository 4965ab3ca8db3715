"""The Visual Grounding grid's lexically matched tier (issue 37 §1): text-needle cells whose
queries share no content word with their needle, so BM25 is at chance there while it scores ~1
on the paper's text cells; the paper's cells untouched; the paraphrase step through a fake LLM
server, with its contract checked and its answers replayed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from builders._needle_fixtures import write_needle_sources
from builders.needle import NeedleBuilder, NeedleConfig
from mmlongembed.build.run import run_build
from mmlongembed.build.validate import format_report, validate_dir
from mmlongembed.checks.summary import expected_p_at_1
from mmlongembed.core.builder import BuildReport
from mmlongembed.llm.fake_server import FakeOpenAIServer, completion_body  # noqa: F401  (the server's wire format)
from mmlongembed.needles import paraphrase
from mmlongembed.needles.text import parse_templates
from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from mmlongembed.output.layout import pools_table, read_built_pool
from tests.support.built_pools import table_rows
from mmlongembed.readers.needle import read_local_sources

N = 6  # needles per cell


@pytest.fixture(scope="module")
def sources_dir(tmp_path_factory) -> Path:
    return write_needle_sources(tmp_path_factory.mktemp("needle_lexical_sources"))


def _config(sources_dir: Path, **overrides) -> NeedleConfig:
    values = dict(sources=str(sources_dir), lengths=(256, 512), depths=(0.0, 100.0), needles_per_pool=N,
                  backgrounds=("text", "mixed"), seed=5)
    values.update(overrides)
    return NeedleConfig(**values)


@pytest.fixture(scope="module")
def with_tier(sources_dir, tmp_path_factory) -> Path:
    return run_build(NeedleBuilder(), _config(sources_dir), tmp_path_factory.mktemp("with"), progress=False)


def _pools(built: Path) -> list[str]:
    return sorted(pools_table(built)["pool"])


def _tables(built: Path, pool: str):
    return read_built_pool(built, pool)



def test_the_paper_cells_read_back_the_same_rows_with_or_without_the_tier(sources_dir, with_tier, tmp_path):
    without = run_build(NeedleBuilder(), _config(sources_dir, lexical_tier=False), tmp_path / "without",
                        progress=False)
    paper = _pools(without)
    assert paper and not any("lexical" in p for p in paper)
    lexical = [p for p in _pools(with_tier) if p not in paper]
    assert lexical and all(p.startswith("needle-text-lexical-") for p in lexical)
    assert set(paper) <= set(_pools(with_tier))
    def key(row):  # the written order of rows is the build's, not the pool's (as GovReport's test)
        return json.dumps(row, sort_keys=True, default=repr)

    for pool in paper:
        a, b = _tables(with_tier, pool), _tables(without, pool)
        for part in ("corpus", "queries", "qrels"):
            assert sorted(table_rows(getattr(a, part)), key=key) == sorted(table_rows(getattr(b, part)), key=key), (pool, part)


def test_the_tier_validates_and_is_its_own_difficulty(with_tier):
    problems, checked = validate_dir(with_tier)
    assert not problems, format_report(problems, checked)
    table = pools_table(with_tier)
    difficulty = dict(zip(table["pool"], table["difficulty"]))
    lexical = [p for p in difficulty if "lexical" in p]
    assert len(lexical) == 2 * 2  # lengths x depths, the backgrounds in turn (--lexical-grid rotated)
    assert {difficulty[p] for p in lexical} == {"lexical"}
    assert "lexical" not in {difficulty[p] for p in difficulty if p not in lexical}
    manifest = json.loads((with_tier / "manifest.json").read_text()) if (with_tier / "manifest.json").exists() else {}
    steps = json.dumps(manifest)
    assert not manifest or "query_paraphrase" in steps


def test_the_rotated_tier_holds_each_length_and_depth_once_with_the_backgrounds_in_turn():
    builder = NeedleBuilder()
    config = NeedleConfig()  # the paper's grid: 3 backgrounds x 8 lengths x 6 depths
    full, rotated = builder.lexical_grid(NeedleConfig(lexical_grid="full")), builder.lexical_grid(config)
    assert full == builder.grid(config) and len(full) == 144
    assert len(rotated) == 48 and set(rotated) < set(full)
    assert rotated == [cell for cell in full if cell in rotated]  # the paper grid's order
    assert sorted((length, d) for _, length, d in rotated) == sorted(
        {(length, d) for _, length, d in full})  # each (length, depth) once
    for background in config.backgrounds:
        mine = [(length, d) for b, length, d in rotated if b == background]
        assert sorted(Counter(length for length, _ in mine).values()) == [2] * 8  # every length, at two depths
        assert set(d for _, d in mine) == set(config.depths)  # and every depth, at some length
    for length in config.lengths:  # the two depths of each background at a length are far apart
        gaps = [abs(d1 - d2) for b in config.backgrounds
                for (b1, l1, d1), (b2, l2, d2) in [[c for c in rotated if c[0] == b and c[1] == length]]]
        assert min(gaps) >= 60, (length, gaps)
    one = NeedleConfig(backgrounds=("mixed",))
    assert builder.lexical_grid(one) == builder.grid(one)  # one background: every cell


def test_the_memory_estimate_counts_the_tiers_cells():
    builder = NeedleBuilder()
    without = builder.memory_needed(NeedleConfig(lexical_tier=False))
    rotated, full = builder.memory_needed(NeedleConfig()), builder.memory_needed(NeedleConfig(lexical_grid="full"))
    assert without < rotated < full
    # per background and length: the paper's 2 needle sets x 6 depths, and the tier's 2 depths or all 6
    assert (rotated - without) * 12 == pytest.approx(without * 2, rel=1e-6)
    assert (full - without) * 12 == pytest.approx(without * 6, rel=1e-6)


def test_a_rotated_cell_is_the_full_grids_cell_of_its_name_row_for_row(sources_dir):
    builder = NeedleBuilder()

    def cells(grid: str) -> dict:
        config = _config(sources_dir, needle_modalities=("text",), lexical_grid=grid)
        report = BuildReport()
        pools = builder.build_pools(builder.load_sources(config, report), config, report)
        return {p.name: ([(c.id, c.n_tokens, c.document.render()[0]) for c in p.candidates],
                         [(q.id, q.text) for q in p.queries]) for p in pools if "lexical" in p.name}

    rotated, full = cells("rotated"), cells("full")
    assert len(rotated) == 4 and len(full) == 8
    assert rotated == {name: full[name] for name in rotated}


def test_no_lexical_query_shares_a_content_word_with_any_needle_of_its_cell(with_tier):
    """Each query names its needle's number in words and nothing else of it; the number words
    parse back to that needle's number, so the query still asks for the fact its needle holds."""
    checked = 0
    for pool in (p for p in _pools(with_tier) if "lexical" in p):
        built = _tables(with_tier, pool)
        needles = {json.loads(p)["needle_id"]: json.loads(p)["needle_text"] for p in built.corpus["provenance"]}
        words_of_cell = set().union(*(set(bm25_tokenize(t)) for t in needles.values()))
        for text, needle_id, spec in zip(built.queries["text"], built.queries["needle_id"],
                                         built.queries["needle_spec"]):
            assert not set(bm25_tokenize(text)) & words_of_cell, (pool, text)
            subject = json.loads(spec)["subject"]
            assert paraphrase.parse_number_words(text) == [paraphrase.subject_number(subject)], text
            assert subject.split("-")[0] in needles[needle_id]
            spoken = paraphrase.number_words(paraphrase.subject_number(subject))
            assert not any(spoken in t.lower() for t in built.corpus["text"]), (pool, spoken)  # no haystack says it
            checked += 1
    assert checked == 4 * N


def _bm25_p_at_1(built: Path, pool: str) -> float:
    """BM25 as the harness scores a pool (IDF over the pool's own documents), the positive's
    expected P@1 with ties at the top shared (chance: 1/N)."""
    tables = _tables(built, pool)
    rows = table_rows(tables.corpus)
    positive_of = dict(zip(tables.qrels["query-id"], tables.qrels["corpus-id"]))
    index = BM25Index(bm25_tokenize(r["text"]) for r in rows)
    ids = [r["_id"] for r in rows]
    values = [expected_p_at_1(list(index.scores(bm25_tokenize(text))), ids.index(positive_of[qid]))
              for qid, text in zip(tables.queries["_id"], tables.queries["text"])]
    return sum(values) / len(values)


def test_bm25_finds_the_paper_text_needles_and_is_at_chance_on_the_tier(with_tier):
    paper = [p for p in _pools(with_tier) if p.startswith("needle-text-") and "lexical" not in p]
    lexical = [p for p in _pools(with_tier) if "lexical" in p]
    paper_p = sum(_bm25_p_at_1(with_tier, p) for p in paper) / len(paper)
    lexical_p = sum(_bm25_p_at_1(with_tier, p) for p in lexical) / len(lexical)
    assert paper_p >= 0.8, paper_p  # not 1 here: a fixture surname ("Stone") is a word of its haystack prose
    assert abs(lexical_p - 1 / N) <= 0.1, lexical_p


def test_a_paraphrase_that_keeps_the_question_or_drops_the_number_is_refused():
    """The checks fail the plausible wrong implementations: the original question with the
    subject swapped for its number in words keeps the template's words; a query without the
    needle's number no longer asks for its fact."""
    records = json.loads(json.dumps([
        {"needle": "Hidden on Gem Island is the legendary Sun Stone.",
         "retrieval_question": "What legendary item is hidden on Gem Island?", "arg1": "Gem Island", "arg2": "Sun Stone"},
        {"needle": "Hidden on Ghost Island is the legendary Lucky Clover.",
         "retrieval_question": "What legendary item is hidden on Ghost Island?", "arg1": "Ghost Island",
         "arg2": "Lucky Clover"}]))
    (template,), _ = parse_templates(records)
    kept_question = template.question.replace("{S}", "{N}")
    assert paraphrase.paraphrase_problem(kept_question, template) is not None
    assert paraphrase.paraphrase_problem("What lies concealed at {N}?", template) is None
    assert paraphrase.paraphrase_problem("What lies concealed at {N} and 12?", template) is not None
    assert paraphrase.paraphrase_problem("What lies concealed at {N}?" + " {N}", template) is not None
    assert paraphrase.fallback_question(template) == paraphrase.FALLBACK_QUESTIONS[0]
    subject = "Baker-417 Island"
    needle = template.needle.replace("{S}", subject).replace("{A}", "Sun Stone")
    assert paraphrase.query_problem(paraphrase.fill(kept_question, subject), needle, subject) \
        == "lexical_query_shares_word"
    assert paraphrase.query_problem(paraphrase.fill("What lies concealed at {N}?", "Baker-418 Island"), needle,
                                    subject) == "lexical_query_loses_subject"
    assert paraphrase.query_problem(paraphrase.fill("What lies concealed at {N}?", subject), needle, subject) is None


@pytest.mark.parametrize("n", [0, 5, 13, 20, 40, 99, 100, 101, 417, 606, 850, 999])
def test_number_words_parse_back(n):
    assert paraphrase.parse_number_words(f"about number {paraphrase.number_words(n)}?") == [n]


GOOD = {"The first band": "Which group opened the shows at {N}?", "Hidden on": "What treasure lies concealed at {N}?"}


def _responder(body: dict) -> str:
    """The first reply keeps a word of the needle (so the contract asks for a repair), the
    repaired one is good."""
    user = body["messages"][1]["content"]
    good = next(q for head, q in GOOD.items() if f"Needle: {head}" in user)
    if len(body["messages"]) <= 2:
        return json.dumps({"question": good.replace("{N}", "{N} (the first, hidden one)")})
    return json.dumps({"question": good})


def test_the_paraphrase_step_through_an_llm_is_checked_repaired_and_replayed(sources_dir, tmp_path):
    cache = str(tmp_path / "cache")
    with FakeOpenAIServer(responder=_responder) as server:
        live = _config(sources_dir, needle_modalities=("text",), backgrounds=("text",), lengths=(256,),
                       llm="openai", llm_model="fake-model", llm_base_url=server.url, llm_cache=cache,
                       llm_timeout=5.0, llm_max_retries=1, llm_backoff=0.01)
        builder, report = NeedleBuilder(), BuildReport()
        paraphrased = builder.run_steps(builder.load_sources(live, report), live, report)
        asked = server.requests
    assert set(paraphrased.questions.values()) == set(GOOD.values())
    assert asked == 2 * len(GOOD)  # each template: a reply that broke the contract, then its repair
    (record,) = [s for s in report.llm_steps if s["step"] == "query_paraphrase"]
    assert record["calls"] == 4 and record["answered"] == 2
    pools = builder.build_pools(paraphrased, live, report)
    lexical = [p for p in pools if "lexical" in p.name]
    assert lexical
    for pool in lexical:
        for query in pool.queries:
            assert any(query.text.startswith(q.split("{N}")[0]) for q in GOOD.values())
    # the server is gone: replay answers from the cache, repairs included, and builds the same queries
    replay = _config(sources_dir, needle_modalities=("text",), backgrounds=("text",), lengths=(256,),
                     llm="replay", llm_model="fake-model", llm_cache=cache)
    replayed_report = BuildReport()
    again = builder.run_steps(read_local_sources(Path(sources_dir), replay, replayed_report), replay, replayed_report)
    assert again.questions == paraphrased.questions
    replayed = builder.build_pools(again, replay, replayed_report)
    assert [[q.text for q in p.queries] for p in replayed] == [[q.text for q in p.queries] for p in pools]


def test_fallback_under_llm_none_names_its_wording_in_the_step_record(sources_dir):
    config = _config(sources_dir, needle_modalities=("text",), backgrounds=("text",), lengths=(256,))
    builder, report = NeedleBuilder(), BuildReport()
    paraphrased = builder.run_steps(builder.load_sources(config, report), config, report)
    (record,) = report.llm_steps
    assert record["backend"] == "none" and record["step"] == "query_paraphrase"
    assert set(paraphrased.questions.values()) <= set(paraphrase.FALLBACK_QUESTIONS)
    assert record["questions"] == paraphrased.questions
