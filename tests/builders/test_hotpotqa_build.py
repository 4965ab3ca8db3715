"""The HotpotQA build from ../shared/data: --llm none, --llm openai against the loopback test
server, and --llm replay (byte-identical data). Small on purpose: two lengths, 6 queries a pool."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mmlongembed.core.builder import get_builder
from mmlongembed.cli import main
from mmlongembed.llm.fake_server import FakeOpenAIServer, audit_responder
from mmlongembed.output.layout import pool_rows, read_built_pool
from mmlongembed.build.validate import validate_dir
from tests.support.realdata import shared_data_dir

pytestmark = pytest.mark.realdata

SMALL = ["--lengths", "4096", "8192", "--max-queries-per-pool", "6", "--no-progress"]


def pool_tables(root: Path, pool: str) -> tuple[dict, dict, dict, dict]:
    """The pool's row and tables, the audit joined into corpus and queries."""
    tables = read_built_pool(root, pool)
    return tables.row, tables.corpus, tables.queries, tables.qrels


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    data = shared_data_dir("hotpotqa")
    out = tmp_path_factory.mktemp("hotpotqa")
    cache = str(out / "cache")
    common = ["build", "hotpotqa", "--sources", str(data.parent), "--llm-cache", cache, *SMALL]
    assert main([*common, "--output", str(out / "none")]) == 0
    with FakeOpenAIServer(responder=audit_responder(malformed_every=5, broken_every=17)) as server:
        assert main([*common, "--output", str(out / "openai"), "--llm", "openai", "--llm-base-url", server.url,
                     "--llm-model", "fake-model", "--llm-backoff", "0.01"]) == 0
        asked = server.requests
    # the server is gone: replay answers from the cache alone
    assert main([*common, "--output", str(out / "replay"), "--llm", "replay", "--llm-model", "fake-model"]) == 0
    return {name: out / name / "hotpotqa" for name in ("none", "openai", "replay")} | {"asked": asked}


def test_every_build_validates_with_four_candidates_per_query(builds):
    for name in ("none", "openai", "replay"):
        problems, checked = validate_dir(builds[name])
        assert problems == [] and checked["pools"] >= 4
        # the paper's pools (the lexical tier's, beside them: tests/builders/test_hotpotqa_lexical.py)
        pools = [r for r in pool_rows(builds[name]) if "-lexical-" not in r["pool"]]
        assert checked["pools"] == 4 + sum("-lexical-" in r["pool"] for r in pool_rows(builds[name]))
        assert sorted(r["pool"] for r in pools) == ["hotpotqa-easy-4k", "hotpotqa-easy-8k", "hotpotqa-hard-4k",
                                                    "hotpotqa-hard-8k"]
        assert all(r["n_candidates"] == 4 * r["n_queries"] and r["n_queries"] == 6 for r in pools)


def test_replay_rebuild_is_byte_identical(builds):
    data = sorted(p.relative_to(builds["openai"]) for p in (builds["openai"] / "data").rglob("*.parquet"))
    assert data and data == sorted(p.relative_to(builds["replay"]) for p in (builds["replay"] / "data").rglob("*.parquet"))
    for path in data:
        assert (builds["openai"] / path).read_bytes() == (builds["replay"] / path).read_bytes(), path


def test_manifest_and_card_name_the_backend_of_the_audit(builds):
    steps = {name: json.loads((builds[name] / "manifest.json").read_text())["llm_steps"] for name in ("none", "openai", "replay")}
    assert steps["none"][0]["backend"] == "none" and "rules" in steps["none"][0]["model"]
    assert steps["none"][0]["prompt_version_name"] == "paper"
    live, replayed = steps["openai"][0], steps["replay"][0]
    assert live["backend"] == "openai" and live["model"] == "fake-model" and live["calls"] == builds["asked"]
    assert replayed["backend"] == "replay" and replayed["replayed_from"] == ["openai"] and replayed["calls"] == 0
    assert (live["kept"], live["rejected"]) == (replayed["kept"], replayed["rejected"])
    assert any(k.startswith("invalid_output:") for k in live["rejected"])  # the broken replies were counted
    card = (builds["openai"] / "README.md").read_text()
    assert f"| query_audit | openai | fake-model | `{live['prompt_hash']}` |" in card
    assert "version `paper`" in card
    offline = steps["none"][0]
    card = (builds["none"] / "README.md").read_text()
    assert f"{offline['kept']} kept" in card and f"{offline['marked_invalid']} dropped" in card
    for why, questions in offline["dropped_examples"].items():
        assert f"| `{why}` | {questions[0]}" in card.replace("\\|", "|")


def test_evidence_keeps_its_relative_depth_from_4k_to_8k(builds):
    def depths(pool):
        _, corpus, _, _ = pool_tables(builds["none"], pool)
        return {cid: [e["relative_position"] for e in json.loads(p)["evidence"]]
                for cid, role, p in zip(corpus["internal_id"], corpus["role"], corpus["provenance"]) if role == "positive"}

    short, long = depths("hotpotqa-hard-4k"), depths("hotpotqa-hard-8k")
    shared = set(short) & set(long)
    assert shared
    drift = [abs(a - b) for cid in shared for a, b in zip(short[cid], long[cid])]
    assert max(drift) < 0.15 and sum(drift) / len(drift) < 0.06


def test_hard_negatives_lose_exactly_the_recorded_evidence(builds):
    _, corpus, _, _ = pool_tables(builds["none"], "hotpotqa-hard-8k")
    provenance = {cid: json.loads(p) for cid, p in zip(corpus["internal_id"], corpus["provenance"])}
    for cid, role in zip(corpus["internal_id"], corpus["role"]):
        if role != "hard_negative":
            continue
        p = provenance[cid]
        positive = provenance[cid.rsplit(":", 1)[0]]
        removed = {r["index"] for r in p["removed"]}
        assert removed and {e["index"] for e in p["evidence"]} == {e["index"] for e in positive["evidence"]} - removed
        assert p["variant"] in ("drop_first", "drop_last", "drop_middle", "drop_both")
        if p["variant"] == "drop_first":
            assert removed == {0}
        if p["variant"] == "drop_last":
            assert removed == {positive["n_evidence"] - 1}


def test_validation_catches_broken_invariants(builds):
    builder = get_builder("hotpotqa")
    row, corpus, queries, qrels = pool_tables(builds["none"], "hotpotqa-hard-8k")
    assert list(builder.validate_pool(row, corpus, queries, qrels)) == []
    roles, texts = corpus["role"], corpus["text"]
    provenance = [json.loads(p) for p in corpus["provenance"]]
    hard = roles.index("hard_negative")
    positive = corpus["internal_id"].index(corpus["internal_id"][hard].rsplit(":", 1)[0])
    first = provenance[positive]["evidence"][0]
    evidence = texts[positive][first["char_range"][0]:first["char_range"][1]].strip()

    def problems(**columns):
        return [p.check for p in builder.validate_pool(row, {**corpus, **columns}, queries, qrels)]

    # a hard negative that still holds the evidence it claims to have lost
    hard_of_first = next(i for i, p in enumerate(provenance) if roles[i] == "hard_negative"
                         and p["removed"][0]["index"] == 0 and corpus["group"][i] == corpus["group"][positive])
    broken = list(texts)
    broken[hard_of_first] = broken[hard_of_first] + evidence
    assert "removed_segment" in problems(text=broken)
    # another query's candidate that holds all of this query's evidence (found through the
    # pool's distinct lines: the evidence sits inside a paragraph line there)
    other = next(i for i, g in enumerate(corpus["group"]) if g != corpus["group"][positive])
    copied = list(texts)
    copied[other] = texts[other] + "\n\n" + texts[positive][first["char_range"][0] - 40:]
    assert "second_document_with_all_evidence" in problems(text=copied)
    # evidence recorded at the wrong place
    moved = [dict(p) for p in provenance]
    moved[positive] = {**moved[positive], "evidence": [{**first, "char_range": [first["char_range"][0] + 3,
                                                                                  first["char_range"][1] + 3]}]
                       + moved[positive]["evidence"][1:]}
    assert "evidence_positions" in problems(provenance=[json.dumps(p) for p in moved])
    # a padding unit that holds the answer
    answer = provenance[positive]["answer"]
    if answer.lower() not in ("yes", "no"):
        pad = provenance[positive]["padding"][0]["char_range"]
        text = texts[positive]
        spliced = list(texts)
        inserted = f" {answer} "  # as a whole word
        spliced[positive] = text[:pad[0]] + inserted + text[pad[0] + len(inserted):]
        assert "answer_in_padding" in problems(text=spliced)


def test_defaults_follow_the_paper():
    config = get_builder("hotpotqa").config_class()
    assert config.llm == "none" and config.max_queries_per_pool == 160 and config.lengths == (8192, 16384, 32768)
    assert config.negatives_per_query == 3



# -- refills (paper A.2: coherent text of strictly equivalent token length) -------------------

def _refills(root: Path, pool: str):
    """(hard negative row, its positive row, refill text, receiving paragraph without the refill)."""
    _, corpus, _, _ = pool_tables(root, pool)
    rows = [dict(zip(corpus, values)) for values in zip(*corpus.values())]
    by_id = {r["internal_id"]: r for r in rows}
    for row in rows:
        if row["role"] != "hard_negative":
            continue
        positive = by_id[row["internal_id"].rsplit(":", 1)[0]]
        text = row["text"]
        for item in json.loads(row["provenance"])["padding"]:
            if item["kind"] != "replacement":
                continue
            a, b = item["char_range"]
            start, end = text.rfind("\n\n", 0, a) + 2, text.find("\n\n", b)
            yield row, positive, text[a:b], text[start:a] + " " + text[b:end if end >= 0 else len(text)]


def test_every_refill_is_exactly_as_long_as_the_sentence_it_replaces(builds):
    root = builds["none"]
    manifest = json.loads((root / "manifest.json").read_text())
    stats = manifest["report"]["stats"]["refills"]
    for pool in ("hotpotqa-hard-4k", "hotpotqa-hard-8k"):
        _, corpus, _, _ = pool_tables(root, pool)
        positives = {g: n for g, n, r in zip(corpus["group"], corpus["n_tokens"], corpus["role"]) if r == "positive"}
        for n, group, role, raw in zip(corpus["n_tokens"], corpus["group"], corpus["role"], corpus["provenance"]):
            if role == "hard_negative":
                assert n == positives[group]  # the receiving paragraph recounts to the same length
                for removed in json.loads(raw)["removed"]:
                    assert removed["replacement"]["tokens"] == removed["tokens"]
        assert stats["per_pool"][pool]["exact"] == stats["per_pool"][pool]["refills"] > 0
    card = (root / "README.md").read_text()
    assert f"{stats['all']['exact']} exact" in card and "| `hotpotqa-hard-8k` |" in card
    assert "### Deviations from the paper" in card


def test_a_refill_gives_back_neither_the_answer_nor_the_removed_fact_and_repeats_nothing(builds):
    from mmlongembed.ops.multisource.padding import answer_pattern
    from mmlongembed.ops.multisource.refill import fact_anchors
    from mmlongembed.core.text import split_sentences

    checked = 0
    for row, positive, refill, _ in _refills(builds["none"], "hotpotqa-hard-8k"):
        provenance = json.loads(positive["provenance"])
        pattern = answer_pattern(provenance["answer"])
        assert pattern is None or not pattern.search(refill)
        evidence = {e["index"]: positive["text"][slice(*e["char_range"])].strip() for e in provenance["evidence"]}
        context = positive["text"]
        for removed in json.loads(row["provenance"])["removed"]:
            sentence = evidence[removed["index"]]
            anchors = fact_anchors(sentence, context.replace(sentence, " "))
            assert not any(re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", refill.lower()) for a in anchors), \
                (sentence, refill)
        for sentence in split_sentences(refill.strip()):
            if len(sentence.strip()) > 20:
                assert row["text"].count(sentence.strip()) == 1, sentence  # no sentence twice in the document
        checked += 1
    assert checked >= 18


def test_easy_negatives_grow_as_positives_do():
    """At a longer length a positive has grown step by step in pieces of at most a quarter of the
    new tokens; an easy negative padded in one pass would hold fewer, larger units, and its
    paragraph-break density alone would tell it from the positive. Both are grown alike."""
    import statistics

    from mmlongembed.core.builder import BuildReport

    builder = get_builder("hotpotqa")
    config = builder.config_class(sources=str(shared_data_dir("hotpotqa").parent), lengths=(2048, 4096, 8192),
                                  max_queries_per_pool=20)
    report = BuildReport(progress=False)
    audited = builder.run_steps(builder.load_sources(config, report), config, report)
    pools = builder.build_pools(audited, config, report)
    easy = next(p for p in pools if p.name == "hotpotqa-easy-8k")
    units = {role: statistics.mean(len(c.document.meta["units"]) for c in easy.candidates if c.role == role)
             for role in ("positive", "easy_negative")}
    assert 0.9 <= units["easy_negative"] / units["positive"] <= 1.3, units


def test_the_card_names_each_source_file_with_its_split_and_records(builds):
    """Issue 19 §3: the card said "local files under `data`" for a build that mixed 100 train and
    103 dev records."""
    data = shared_data_dir("hotpotqa")
    card = (builds["none"] / "README.md").read_text()
    stats = json.loads((builds["none"] / "manifest.json").read_text())["report"]["stats"]["source_files"]
    assert {f["split"] for f in stats} == {"train", "dev"}
    for entry in stats:
        lines = sum(1 for line in (data / entry["file"]).read_text(encoding="utf-8").splitlines() if line.strip())
        assert entry["records"] == lines
        row = next(line for line in card.splitlines() if line.startswith(f"| `{entry['file']}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:5] == [entry["split"], str(entry["records"]), str(entry["usable"]), str(entry["in_pools"])]
        assert set(cells[5].split(", ")) == {f"{pool}: {n}" for pool, n in entry["queries"].items()}
        assert sum(entry["queries"].values()) > 0
    assert "split `all`" in card


def test_split_picks_the_files_of_one_split():
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.core.errors import UserError

    data = shared_data_dir("hotpotqa")
    builder = get_builder("hotpotqa")
    report = BuildReport(progress=False)
    sources = builder.load_sources(builder.config_class(sources=str(data.parent), split="dev"), report)
    assert {i.origin.rsplit(":", 1)[0] for i in sources.instances} == {"hotpot_dev_distractor_first103.jsonl"}
    assert [(f["split"], f["records"]) for f in report.stats["source_files"]] == [("dev", 103)]
    identity = builder.source_identity(builder.config_class(sources=str(data.parent), split="train"))
    assert [f["file"] for f in identity["files"]] == ["hotpotqa_train_distractor_100.jsonl"]
    with pytest.raises(UserError, match="--split train needs local files"):
        builder.load_sources(builder.config_class(split="train"), BuildReport(progress=False))
