"""mmlongembed.ops.multisource.evidence (whole-unit padding, evidence positions), the HotpotQA operations
(ops.padding, ops.refill, builders._hotpotqa_hard) and HotpotQA parsing (readers)."""

from __future__ import annotations

import pytest

from mmlongembed.ops.multisource.padding import answer_pattern, context_pieces, context_units
from mmlongembed.readers.hotpotqa import parse_instance, read_instances
from mmlongembed.readers.wikitext import detokenize_wikitext, wikitext_articles, wikitext_rows_articles
from mmlongembed.core.documents import TEXT, Segment, text_segments
from mmlongembed.core.errors import FitError
from mmlongembed.ops.multisource.evidence import (
    Unit, evidence_spans, find_refill, find_sentence_run, insert_random, insert_spread, pick_fillers, sentence_runs,
    token_offsets_at, units_document)
from mmlongembed.ops.length import fit_block_edges
from mmlongembed.core.rng import derive_rng
from mmlongembed.core.tokens import default_counter


def unit(name: str, tokens: int, kind: str = "article", origin: str = "padding") -> Unit:
    return Unit(name, kind, (Segment(kind=TEXT, tokens=tokens, text=f"{name}\n\n", paragraph_end=True, origin=origin),))


def test_pick_fillers_takes_whole_units_into_the_window():
    big = [unit(f"a{i}", 1000 + 37 * i) for i in range(10)]
    small = [unit(f"p{i}", 40 + 7 * i, "paragraph") for i in range(30)]
    for seed in range(20):
        chosen = pick_fillers(big, small, 4000, 4100, derive_rng(seed, "t"))
        assert 4000 <= sum(u.tokens for u in chosen) <= 4100
        assert len({u.id for u in chosen}) == len(chosen)  # no unit twice in one document
    with pytest.raises(FitError, match="not_enough_padding"):
        pick_fillers(big[:2], [], 4000, 4100, derive_rng(0, "t"))
    assert pick_fillers(big, small, -5, 10, derive_rng(0, "t")) == []


def test_insert_spread_keeps_relative_depth_as_the_document_grows():
    context = [unit(f"c{i}", 100, "context") for i in range(10)]
    marker = Unit("evidence", "context", (Segment(kind=TEXT, tokens=20, text="E.\n\n", paragraph_end=True,
                                                  origin="evidence:0"),))
    for position in (1, 5, 9):
        units = context[:position] + [marker] + context[position:]
        before = sum(u.tokens for u in units[:position]) / sum(u.tokens for u in units)
        extras = [unit(f"x{i}", 60 + (i % 5) * 10) for i in range(40)]
        grown = insert_spread(units, extras, derive_rng(1, position))
        after_index = grown.index(marker)
        after = sum(u.tokens for u in grown[:after_index]) / sum(u.tokens for u in grown)
        assert abs(after - before) < 0.06
        assert [u for u in grown if u.kind == "context"] == units  # old units keep their order


def test_insert_random_keeps_order_and_adds_everything():
    units = [unit(f"c{i}", 10, "context") for i in range(5)]
    extras = [unit(f"x{i}", 10) for i in range(7)]
    grown = insert_random(units, extras, derive_rng(3))
    assert [u for u in grown if u.kind == "context"] == units and len(grown) == 12


def test_sentence_runs_stay_inside_one_paragraph_and_skip_headings():
    counter = default_counter()
    text = ("Heading\nThe first sentence is here. The second one follows it. A third closes it.\n\n"
            "Another paragraph starts. It ends now.\n\n")
    source = Unit("article:x", "article", tuple(text_segments(text, counter)))
    runs = list(sentence_runs(source))
    assert len(runs) == 6 + 3  # three sentences: 6 runs; two sentences: 3 runs; the heading: none
    for a, b, tokens in runs:
        run = source.segments[a:b]
        assert not any(s.paragraph_end for s in run[:-1]) and "Heading" not in "".join(s.text for s in run)
        assert tokens == sum(s.tokens for s in run)


def _paragraph(name: str, counts: list[int]) -> Unit:
    """A one-paragraph unit whose sentences have the given token counts."""
    segments = [Segment(kind=TEXT, tokens=n, text=f" {name}{i}.", paragraph_end=i == len(counts) - 1)
                for i, n in enumerate(counts)]
    return Unit(name, "article", tuple(segments))


def _measure(unit, a, b):
    run = unit.segments[a:b]
    return run, sum(s.tokens for s in run)


def test_find_refill_takes_the_first_exact_run_in_candidate_order():
    near_miss, exact, exact_later = _paragraph("a", [9, 4]), _paragraph("b", [3, 4, 2]), _paragraph("c", [7, 1])
    found = find_refill([near_miss, exact, exact_later], 7, (1, 100), 9, _measure)
    assert (found.unit.id, found.start, found.end, found.tokens, found.rank) == ("b", 0, 2, 7, 1)
    # a run the content check refuses is never taken, even when exact
    refuse_b = lambda unit, a, b: None if unit.id == "b" else _measure(unit, a, b)  # noqa: E731
    assert find_refill([near_miss, exact, exact_later], 7, (1, 100), 7, refuse_b).unit.id == "c"


def test_find_refill_falls_back_to_the_closest_run_in_the_window_only_without_an_exact_one():
    found = find_refill([_paragraph("a", [12, 30]), _paragraph("b", [16, 40])], 14, (9, 19), 15, _measure)
    assert (found.unit.id, found.tokens) == ("b", 16)
    with pytest.raises(FitError):
        find_refill([_paragraph("a", [12, 30])], 500, (490, 510), 500, _measure)


def test_fit_block_edges_moves_the_replaced_segments_whitespace():
    counter = default_counter()
    run = text_segments("Alpha beta. Gamma delta.\n\n", counter)
    fitted = fit_block_edges(run, " ", "\n\n", counter, "replacement:x")
    text = "".join(s.text for s in fitted)
    assert text == " Alpha beta. Gamma delta.\n\n" and fitted[-1].paragraph_end
    assert all(s.tokens == counter.count(s.text) for s in fitted)
    middle = fit_block_edges(run, " ", "", counter, "replacement:x")
    assert "".join(s.text for s in middle) == " Alpha beta. Gamma delta." and not middle[-1].paragraph_end


def test_token_offsets_at_equal_prefix_counts():
    counter = default_counter()
    text = "Paris\nParis is the capital of France. It lies on the Seine.\n\nRouen\nRouen is a city.\n\n"
    cuts = [0, 6, text.index(" It"), text.index("Rouen\n"), len(text)]
    offsets = token_offsets_at(text, cuts, counter)
    assert all(offsets[c] == counter.count(text[:c]) for c in cuts)


RECORD = {
    "_id": "abc", "question": "Which city on the Seine is the capital of France?", "answer": "Paris",
    "type": "bridge", "level": "hard",
    "supporting_facts": [["Seine", 1], ["Paris", 0]],
    "context": [["Paris", ["Paris is the capital of France.", " It has many museums."]],
                ["Seine", ["The Seine is a river.", " It flows through Paris."]]],
}


def test_parse_instance_orders_evidence_by_document_position_and_marks_it():
    instance, reason = parse_instance(RECORD, "x:1")
    assert reason == "" and instance.supporting == (("Paris", 0), ("Seine", 1))
    counter = default_counter()
    pieces = context_pieces(instance)
    units = context_units(instance, counter, dict(zip(pieces, counter.count_many(pieces))))
    document = units_document("d", units)
    assert document.text == ("Paris\nParis is the capital of France. It has many museums.\n\n"
                             "Seine\nThe Seine is a river. It flows through Paris.\n\n")
    spans = evidence_spans(document)
    assert document.text[spans[0].char_start:spans[0].char_end] == "Paris is the capital of France."
    assert document.text[spans[1].char_start:spans[1].char_end].strip() == "It flows through Paris."


def test_hub_layout_is_read_too():
    hub = {"id": "h1", "question": RECORD["question"], "answer": "Paris", "type": "bridge", "level": "hard",
           "supporting_facts": {"title": ["Paris", "Seine"], "sent_id": [0, 1]},
           "context": {"title": ["Paris", "Seine"], "sentences": [RECORD["context"][0][1], RECORD["context"][1][1]]}}
    instance, reason = parse_instance(hub, "hub")
    assert reason == "" and instance.id == "h1" and len(instance.context) == 2


@pytest.mark.parametrize("change, reason", [
    ({"supporting_facts": [["Paris", 0]]}, "evidence_count_outside_2_to_5"),
    ({"supporting_facts": [["Paris", 0], ["Seine", 5]]}, "supporting_fact_missing"),
    ({"supporting_facts": [["Paris", 0], ["Nowhere", 0]]}, "supporting_fact_missing"),
    ({"question": ""}, "malformed_record"),
    ({"context": "not a list"}, "malformed_record"),
])
def test_bad_records_are_counted_skips(change, reason):
    assert parse_instance({**RECORD, **change}, "x:1") == (None, reason)


def test_answer_pattern_is_whole_word_and_exempts_yes_no():
    pattern = answer_pattern("Ed Wood")
    assert pattern.search("a film by ed wood.") and not pattern.search("Ed Woodson")
    assert answer_pattern("yes") is None and answer_pattern("No") is None
    assert answer_pattern("3.5%").search("grew 3.5% a year")


def test_wikitext_articles_are_whole_and_detokenised():
    raw = (" = Robert Boulter = \r\n Robert Boulter is an English film , television and theatre actor . \r\n"
           " = = Career = = \r\n He had a guest @-@ starring role in 2000 . \r\n = Du Fu = \r\n Du Fu was a poet . \r\n")
    articles = wikitext_articles(raw, "wiki")
    assert [a for a, _ in articles] == ["wiki:0:Robert Boulter", "wiki:1:Du Fu"]
    assert articles[0][1] == ("Robert Boulter\nRobert Boulter is an English film, television and theatre actor.\n\n"
                              "Career\nHe had a guest-starring role in 2000.\n\n")
    assert detokenize_wikitext(" ( born 1 May ) , he 's here . ") == "(born 1 May), he's here."


def test_hub_wikitext_rows_are_read_only_as_far_as_the_articles_asked_for():
    rows = [" = Alpha = \n", " Alpha is first @-@ born . \n", " = = Life = = \n", " It lived .\n",
            " = Beta = \n", " Beta follows .\n", " = Gamma = \n", " Gamma is last .\n"]
    read = []

    def stream():
        for row in rows:
            read.append(row)
            yield {"text": row}

    assert wikitext_rows_articles(stream(), "w", 1) == [("w:0:Alpha", "Alpha\nAlpha is first-born.\n\nLife\nIt lived.\n\n")]
    assert len(read) == 5  # up to the next article's title line, no further


def test_reading_counts_bad_and_repeated_records_and_what_each_file_gave():
    from mmlongembed.core.builder import BuildReport

    report = BuildReport()
    later = {**RECORD, "_id": "abd"}
    instances, files = read_instances([(later, "dev.jsonl:1"), (RECORD, "dev.jsonl:2"), (RECORD, "train.json:1"),
                                       ({"_id": "x"}, "train.json:2")], report)
    assert [i.id for i in instances] == ["abc", "abd"]  # sorted by id
    assert dict(report.skipped) == {"duplicate_id": 1, "malformed_record": 1}
    assert files == [{"file": "dev.jsonl", "split": "dev", "records": 2, "usable": 2},
                     {"file": "train.json", "split": "train", "records": 2, "usable": 0}]


def test_missing_sources_is_a_one_line_error(tmp_path):
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder
    from mmlongembed.core.errors import UserError

    builder = get_builder("hotpotqa")
    with pytest.raises(UserError, match="does not exist"):
        run_build(builder, builder.config_class(sources=str(tmp_path / "absent")), tmp_path / "out", progress=False)


def test_find_refill_chooses_among_the_first_exact_runs():
    runs = [_paragraph("a", [7, 1]), _paragraph("b", [3, 4, 2]), _paragraph("c", [7, 9])]
    closeness = {"a": 5.0, "b": 1.0, "c": 0.5}
    seen = []

    def pick(exact):  # the closest, by the run's first sentence (" a0." -> "a")
        seen.append([r.unit.id for r in exact])
        return min(range(len(exact)), key=lambda i: closeness[exact[i].segments[0].text[1]])

    assert find_refill(runs, 7, (1, 100), 7, _measure).unit.id == "a"  # the first exact run by default
    assert find_refill(runs, 7, (1, 100), 7, _measure, choose_among=2, choose=pick).unit.id == "b"
    assert find_refill(runs, 7, (1, 100), 7, _measure, choose_among=9, choose=pick).unit.id == "c"
    assert seen == [["a", "b"], ["a", "b", "c"]]  # the exact runs in candidate order


def test_refill_sources_are_ranked_by_topic_and_exclude_what_may_not_be_used():
    """The most similar usable paragraph comes first; a paragraph already in the document, one
    that holds the answer, one of the question's own, and any question's gold paragraph never
    come at all."""
    from mmlongembed.ops.multisource.padding import PaddingSupply
    from mmlongembed.ops.multisource.refill import RefillSource

    counter = default_counter()

    def paragraph(title, text):
        return Unit(f"paragraph:{title}", "paragraph",
                    (Segment(kind=TEXT, tokens=1, text=title + "\n", paragraph_end=True),
                     *text_segments(text + "\n\n", counter)))

    units = [paragraph("Volcano", "Lava flows from the volcano crater. Eruptions of magma and ash follow."),
             paragraph("Football", "The coach led the football team. The team won the league title."),
             paragraph("Harbour", "Ships dock in the harbour. The port handles cargo ships."),
             paragraph("Cricket", "The cricket team won the cup. Its coach trained the team daily."),
             paragraph("Gold", "The coach won gold. It was his team."),
             paragraph("Answer", "The coach of the team was Zanzibar Smith. He won."),
             paragraph("Own", "The team and its coach. The coach won the team title.")]
    instance, _ = parse_instance({**RECORD, "answer": "Zanzibar Smith",
                                  "context": [["Own", ["The team and its coach."]], ["Paris", ["Paris is big."]]],
                                  "supporting_facts": [["Own", 0], ["Paris", 0]]}, "x")
    source = RefillSource(PaddingSupply([], units), gold_titles={"Gold"})
    ranked = [u.id for u in source.candidates(instance, "The football coach and his team won.", set())]
    assert ranked[:2] == ["paragraph:Football", "paragraph:Cricket"]
    assert not {"paragraph:Gold", "paragraph:Answer", "paragraph:Own"} & set(ranked)
    excluded = source.candidates(instance, "The football coach and his team won.", {"paragraph:Football"})
    assert [u.id for u in excluded][0] == "paragraph:Cricket"


def test_a_refill_never_brings_back_the_removed_fact(tmp_path, monkeypatch):
    """Another question's distractor paragraph is the best topical match for the paragraph that
    loses its evidence, and has a sentence of exactly the removed one's length; but that sentence
    names the place only the removed sentence names (not the answer: only the fact check stops it).
    The refill must come from elsewhere. (The first exact run wins here, as without the balancing
    of character lengths, so that the trap would be taken if the fact check were missing.)"""
    import json

    monkeypatch.setattr("mmlongembed.ops.multisource.refill.REFILL_CHOICES", 1)

    from builders._hotpotqa_fixtures import write_hotpotqa_sources
    from builders._hotpotqa_hard import hard_variants
    from mmlongembed.core.builder import BuildReport, get_builder
    from mmlongembed.ops.length import exact_tokens, trim_edges
    from mmlongembed.ops.measured import Built
    from mmlongembed.ops.multisource.refill import RefillSource
    from mmlongembed.build.pool_plan import PoolContext
    from mmlongembed.core.pools import LengthBand

    write_hotpotqa_sources(tmp_path, n_instances=12)
    evidence = "Quillbrook Tower is a granite lighthouse that stands in Varnemouth harbour."
    trap = "Quillbrook Tower is a stone lighthouse that stands in Varnemouth bay."
    fair = "The old harbour light is a stone lighthouse that guides the small fishing boats home."
    counter = default_counter()
    assert counter.count(" " + trap) == counter.count(" " + evidence) == counter.count(" " + fair)
    tower = ["Quillbrook Tower is a lighthouse on a rocky coast.", " " + evidence,
             " The lighthouse keeper lit the lamp of the tower every night."]
    query = {"_id": "tower", "question": "What is the lighthouse kept by Ada Pell made of?", "answer": "granite", "type": "bridge", "level": "hard",
             "supporting_facts": [["Quillbrook Tower", 1], ["Ada Pell", 0]],
             "context": [["Quillbrook Tower", tower], ["Ada Pell", ["Ada Pell kept the lamp of the tower for forty years.",
                                                                     " She lived alone."]]]}
    other = {"_id": "zother", "question": "Who painted the keeper's lamp?", "answer": "Bo Lund", "type": "bridge",
             "level": "hard", "supporting_facts": [["Bo Lund", 0], ["Lamp art", 0]],
             "context": [["Bo Lund", ["Bo Lund painted lamps.", " He was a painter."]],
                         ["Lamp art", ["Lamp art is old.", " It is painted."]],
                         ["Lighthouse lore", ["The lighthouse keeper of Quillbrook Tower lit the lamp of the tower.",
                                              " " + trap, " A stone lighthouse keeper tower lamp story."]],
                         ["Harbour lights", ["Harbour lights are lamps.", " " + fair,
                                             " Mia Stone kept the lamp of the pier for forty years."]]]}
    with open(tmp_path / "hotpotqa" / "sample.jsonl", "a", encoding="utf-8") as handle:
        for record in (query, other):
            handle.write(json.dumps(record) + "\n")
    builder = get_builder("hotpotqa")
    config = builder.config_class(sources=str(tmp_path))
    report = BuildReport()
    sources = builder.load_sources(config, report)
    units_of = {}
    for instance in sources.instances:
        pieces = context_pieces(instance)
        units_of[instance.id] = context_units(instance, counter, dict(zip(pieces, counter.count_many(pieces))))
    supply = builder._padding_supply(sources, units_of, counter)
    refills = RefillSource(supply, {title for i in sources.instances for title, _ in i.supporting})
    tower = next(i for i in sources.instances if i.id == "tower")
    document = trim_edges(units_document("tower", units_of["tower"]), counter)
    positive = Built(units_of["tower"], document, exact_tokens(document, counter))
    band = LengthBand(target=4096, lo=1, hi=4096)
    assembled = hard_variants(PoolContext(builder.name, config, counter, report), tower, positive, band, "test", refills)
    assert not isinstance(assembled, str), assembled
    refilled_positive, refilled, variants = assembled
    # the positive has one of its other sentences refilled (no evidence), at its exact length
    assert refilled and all(evidence_text in refilled_positive.document.text
                            for evidence_text in (evidence, "Ada Pell kept the lamp of the tower for forty years."))
    assert refilled_positive.n_tokens == positive.n_tokens
    dropping = [(made, removed) for _, made, removed in variants if any(r["index"] == 0 for r in removed)]
    assert len(dropping) == 2  # drop_first and drop_both
    for made, removed in dropping:
        text = made.document.text
        assert evidence not in text and "Varnemouth" not in text
        refill = next(r for r in removed if r["index"] == 0)["replacement"]
        assert refill["tokens"] == counter.count(" " + evidence)
        assert made.n_tokens == refilled_positive.n_tokens or len(removed) == 2  # exact unless the other refill is not
        assert refill["source"] == "paragraph:Harbour lights" and fair in text
def test_find_sentence_run_stays_inside_one_paragraph_and_skips_headings():
    counter = default_counter()
    text = ("Heading\nThe first sentence is here. The second one follows it. A third closes it.\n\n"
            "Another paragraph starts. It ends now.\n\n")
    source = Unit("article:x", "article", tuple(text_segments(text, counter)))
    found, a, b = find_sentence_run([source], 5, 12, 8, derive_rng(0))
    run = source.segments[a:b]
    assert not any(s.paragraph_end for s in run[:-1]) and "Heading" not in "".join(s.text for s in run)
    assert 5 <= sum(s.tokens for s in run) <= 12
    with pytest.raises(FitError):
        find_sentence_run([source], 500, 600, 550, derive_rng(0))


def test_find_sentence_run_takes_only_the_runs_accept_takes():
    """MMDocRAG's lexical tier asks each run whether it keeps the positive's BM25 rank: the
    nearest run it refuses is passed over, and none taken is a FitError."""
    counter = default_counter()
    text = "The first sentence is here. The second one follows it. A third closes it.\n\n"
    source = Unit("article:x", "article", tuple(text_segments(text, counter)))
    nearest = find_sentence_run([source], 1, 40, 8, derive_rng(0))
    taken = find_sentence_run([source], 1, 40, 8, derive_rng(0), accept=lambda unit, a, b: (a, b) != nearest[1:])
    assert taken[1:] != nearest[1:]
    with pytest.raises(FitError):
        find_sentence_run([source], 1, 40, 8, derive_rng(0), accept=lambda unit, a, b: False)




def test_every_easy_query_is_one_of_the_hard_pool_queries_of_its_length(tmp_path):
    """The paper compares the easy and the hard pool of a length on the same questions. Drawn
    from the whole seeded order instead, the easy pool would take instances the hard pool never
    reached (its negatives claim some of the first ones), as it did before 1.4."""
    from mmlongembed.core.builder import BuildReport, get_builder
    from builders._hotpotqa_fixtures import write_hotpotqa_sources

    write_hotpotqa_sources(tmp_path, n_instances=40)
    builder = get_builder("hotpotqa")
    config = builder.config_class(sources=str(tmp_path), lengths=(1024, 2048), max_queries_per_pool=6)
    report = BuildReport(progress=False)
    audited = builder.run_steps(builder.load_sources(config, report), config, report)
    pools = {p.name: p for p in builder.build_pools(audited, config, report)}
    for length in ("1k", "2k"):
        easy = {q.id for q in pools[f"hotpotqa-easy-{length}"].queries}
        hard = {q.id for q in pools[f"hotpotqa-hard-{length}"].queries}
        assert len(easy) >= 4 and len(hard) >= 4 and easy <= hard, (length, easy - hard)
        # easy negatives come from instances that are no query of the pool while there are any
        # (34 here): each hard query claimed as a negative could not be an easy query
        negatives = {f"q:{c.source_id}" for c in pools[f"hotpotqa-easy-{length}"].candidates
                     if c.role == "easy_negative"}
        assert negatives and not negatives & hard


def test_the_pools_are_the_same_on_one_core_as_on_several(tmp_path, monkeypatch):
    """The refill plans are worked out in forked workers where there are cores for them; the
    pools must not depend on it (nor on how the instances were shared out)."""
    from mmlongembed.core import parallel
    from mmlongembed.core.builder import BuildReport, get_builder
    from builders._hotpotqa_fixtures import write_hotpotqa_sources

    if not parallel.can_fork():
        pytest.skip("no fork on this platform")
    write_hotpotqa_sources(tmp_path, n_instances=30)
    builder = get_builder("hotpotqa")
    config = builder.config_class(sources=str(tmp_path), lengths=(1024, 2048), max_queries_per_pool=8)

    forked, fork_map = [], parallel.fork_map

    def counted_fork_map(function, n, workers=None, bar=None):
        forked.append(workers)
        return fork_map(function, n, workers, bar)

    monkeypatch.setattr(parallel, "fork_map", counted_fork_map)

    def build(cores: int):
        monkeypatch.setattr(parallel, "available_cores", lambda: cores)
        report = BuildReport(progress=False)
        audited = builder.run_steps(builder.load_sources(config, report), config, report)
        pools = builder.build_pools(audited, config, report)
        return ([(p.name, [(c.id, c.document.text, c.n_tokens, c.provenance) for c in p.candidates],
                  [q.id for q in p.queries]) for p in pools], dict(report.skipped), report.examples)

    one = build(1)
    assert any(c[0].endswith(":drop_first") for _, candidates, _ in one[0] for c in candidates)
    assert build(2) == one and build(3) == one
    assert forked == [2, 3]  # the plans were worked out in 2, then 3 workers


def test_build_pools_reads_no_file_and_calls_no_llm(tmp_path, monkeypatch):
    """The contract: the sources are read in load_sources, the query audit (an LLM step) runs in
    run_steps, and build_pools only assembles what they gave: it opens no file and calls no LLM,
    and it takes its queries only from the questions the audit kept."""
    from dataclasses import replace

    from mmlongembed.core.builder import BuildReport, get_builder
    from builders._hotpotqa_fixtures import write_hotpotqa_sources
    from tests.support.outside import nothing_outside

    write_hotpotqa_sources(tmp_path, n_instances=30)
    builder = get_builder("hotpotqa")
    config = builder.config_class(sources=str(tmp_path), lengths=(1024, 2048), max_queries_per_pool=4)
    report = BuildReport(progress=False)
    audited = builder.run_steps(builder.load_sources(config, report), config, report)
    assert [step["step"] for step in report.llm_steps] == ["query_audit"]
    default_counter()  # the token counter's vocabulary is the yardstick, loaded once per process
    with nothing_outside(monkeypatch, "builders.hotpotqa.audit_queries"):
        pools = builder.build_pools(audited, config, report)
        first = next(p for p in pools if p.difficulty == "hard").queries[0].source_id
        without_first = replace(audited, kept=audited.kept - {first})
        dropped = builder.build_pools(without_first, config, BuildReport(progress=False))
    assert [p.name for p in pools] == [f"hotpotqa-{d}-{n}" for n in ("1k", "2k") for d in ("easy", "hard")]
    assert all(p.queries for p in pools) and len(report.llm_steps) == 1
    assert {q.source_id for p in pools for q in p.queries} <= audited.kept
    assert first not in {q.source_id for p in dropped for q in p.queries}
