"""`mmle audit` on generated BEIR- and mteb-format datasets: each planted shortcut is flagged by
its rule, the same datasets without it pass, a release built here passes, bad input is one line,
and the corpus is read in batches."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mmlongembed.cli import main

WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "po", "ru", "sa", "te", "vi", "zo")
         for b in ("ban", "cor", "dil", "fen", "gat", "hum", "jor", "kel")]
SHORTCUTS = ("longest", "id_order", "trailing_newline", "answer_only_in_positive")
# the rules that may name each shortcut: what the planted seam changes, read either way
EXPECTED_RULES = {
    "longest": {"max chars", "max words", "max column:n_tokens"},
    "id_order": {"min id_order"},
    "trailing_newline": {"max ends_with_newline", "max trailing_whitespace", "final character == '\\n'",
                         "max newlines_per_1k_chars", "max trailing_spaces_per_1k_lines"},
    "answer_only_in_positive": {"max digit_share"},
}


def _sentences(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(" ".join(words[i:i + 8]).capitalize() + "." for i in range(0, n_words, 8))


def generated_dataset(n_queries: int = 40, per_query: int = 4, shortcut: str | None = None, seed: int = 0):
    """(corpus rows, queries, qrels, per-query candidate lists): each query with one positive and
    ``per_query - 1`` negatives made alike, except for the ``shortcut`` planted in the positive."""
    rng = random.Random(f"audit-{shortcut}-{seed}")
    corpus, queries, qrels, lists = [], [], [], {}
    for q in range(n_queries):
        qid = f"q{rng.getrandbits(32):08x}"
        ids = [f"d{rng.getrandbits(32):08x}" for _ in range(per_query)]
        positive = rng.randrange(per_query)
        if shortcut == "id_order":
            ids.sort()
            positive = 0  # the positive's id sorts first in its list
        topic = rng.sample(WORDS, 3)
        queries.append({"_id": qid, "text": f"Which text is about {' '.join(topic)}?"})
        for k, cid in enumerate(ids):
            text = " ".join(topic) + " " + _sentences(rng, rng.randint(40, 80))
            if k == positive:
                if shortcut == "longest":
                    text = " ".join(topic) + " " + _sentences(rng, 100)
                elif shortcut == "trailing_newline":
                    text += "\n"
                elif shortcut == "answer_only_in_positive":
                    # the answer (a year) replaces a word: no other text holds a digit
                    text = text.replace(".", f" in {rng.randint(1900, 1999)}.", 1)
            corpus.append({"_id": cid, "title": "", "text": text})
        qrels.append((qid, ids[positive], 1))
        lists[qid] = ids
    rng.shuffle(corpus)  # rows in no order a rule could read
    return corpus, queries, qrels, lists


def write_beir(root: Path, dataset) -> Path:
    corpus, queries, qrels, _ = dataset
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{c}\t{s}\n" for q, c, s in qrels), encoding="utf-8")
    return root


def write_mteb(root: Path, dataset, top_ranked: bool = True) -> Path:
    """mteb's Hub layout: one folder of parquet files per config, the split in the file name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus, queries, qrels, lists = dataset
    tables = {
        "corpus": pa.table({"id": [r["_id"] for r in corpus], "title": [r["title"] for r in corpus],
                            "text": [r["text"] for r in corpus]}),
        "queries": pa.table({"id": [r["_id"] for r in queries], "text": [r["text"] for r in queries]}),
        "qrels": pa.table({"query-id": [q for q, _, _ in qrels], "corpus-id": [c for _, c, _ in qrels],
                           "score": [s for _, _, s in qrels]}),
    }
    if top_ranked:
        tables["top_ranked"] = pa.table({"query-id": list(lists), "corpus-ids": list(lists.values())})
    for config, table in tables.items():
        (root / config).mkdir(parents=True)
        pq.write_table(table, root / config / "test-00000-of-00001.parquet", row_group_size=50)
    return root


def audit(path: Path, capsys, *extra: str) -> tuple[int, list[str], dict | None]:
    output = path.parent / f"{path.name}-audit"
    code = main(["audit", str(path), "--output", str(output), *extra])
    out = capsys.readouterr().out.strip().splitlines()
    report = json.loads((output / "audit.json").read_text()) if (output / "audit.json").is_file() else None
    return code, out, report


WRITERS = {"beir": write_beir, "mteb": write_mteb}


@pytest.mark.parametrize("shortcut", SHORTCUTS)
@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_a_planted_shortcut_is_flagged_by_its_rule(tmp_path, capsys, layout, shortcut):
    path = WRITERS[layout](tmp_path / "data", generated_dataset(shortcut=shortcut))
    code, out, report = audit(path, capsys)
    assert code == 1, out[-1]
    flagged = {rule["rule"] for rule in report["flagged"]}
    assert flagged & EXPECTED_RULES[shortcut], flagged
    worst = report["flagged"][0]["rule"]
    assert out[-1].startswith(f"FLAGGED: rule '{worst}'") and "split test" in out[-1], out[-1]
    # nothing unrelated to the seam is flagged with it (a length rule for a trailing newline...)
    others = set().union(*(rules for name, rules in EXPECTED_RULES.items() if name != shortcut))
    assert not flagged & others, flagged & others
    mode = report["splits"][0]["mode"]
    assert mode == ("per-query candidates" if layout == "mteb" else "whole corpus")


@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_the_same_datasets_without_a_shortcut_pass(tmp_path, capsys, layout):
    path = WRITERS[layout](tmp_path / "data", generated_dataset())
    code, out, report = audit(path, capsys)
    assert code == 0, out[-1]
    assert out[-1].startswith("PASSED: no query-blind rule"), out[-1]
    assert report["flagged"] == [] and report["tests"] > 20
    assert (tmp_path / "data-audit" / "audit.md").read_text().count("## Verdict") == 1


def test_an_answer_in_the_query_and_its_positive_is_bm25s_not_a_verdict(tmp_path, capsys):
    """A string shared by a query and its positive alone (the topic words here) is what BM25 is
    for: the baseline finds every positive, and the audit still passes, since no query-blind
    rule can tell which string belongs to which query."""
    path = write_mteb(tmp_path / "data", generated_dataset())
    code, out, report = audit(path, capsys)
    assert code == 0
    baselines = {b["rule"]: b for b in report["splits"][0]["baselines"]}
    assert baselines["bm25"]["p_at_1"] == pytest.approx(1 / 4, abs=0.15)  # the topic is in every candidate
    corpus, queries, qrels, lists = generated_dataset()
    rng = random.Random(0)
    # each answer replaces a word of its length mid-text: no length, edge or final-character trace
    answers = {c: "zq" + "".join(rng.choice("wxy") for _ in range(3)) for _, c, _ in qrels}
    marked = [dict(row, text=row["text"].replace(" ", f" {answers[row['_id']]} ", 1).replace(
        row["text"].split()[1] + " ", "", 1)) if row["_id"] in answers else row for row in corpus]
    assert all(len(m["text"]) == len(r["text"]) for m, r in zip(marked, corpus))
    asked = [dict(row, text=row["text"] + " " + answers[qrels[i][1]]) for i, row in enumerate(queries)]
    path = write_mteb(tmp_path / "answered", (marked, asked, qrels, lists))
    code, out, report = audit(path, capsys)
    baselines = {b["rule"]: b for b in report["splits"][0]["baselines"]}
    assert baselines["bm25"]["p_at_1"] == 1.0 and baselines["bm25"]["p_value"] < 1e-6
    assert {"length (diagnostic)", "random (diagnostic)"} <= set(baselines)
    assert code == 0, out[-1]


def test_mteb_without_top_ranked_ranks_the_whole_corpus(tmp_path, capsys):
    path = write_mteb(tmp_path / "data", generated_dataset(shortcut="longest"), top_ranked=False)
    code, out, report = audit(path, capsys)
    assert code == 1 and report["splits"][0]["mode"] == "whole corpus"
    assert report["splits"][0]["judged_documents"] == 40


def test_the_corpus_is_read_in_batches(tmp_path, capsys):
    path = write_beir(tmp_path / "data", generated_dataset(n_queries=10))
    code, out, report = audit(path, capsys, "--batch-size", "7", "--no-baselines")
    split = report["splits"][0]
    assert split["corpus_rows"] == 40 and split["batches"] == 6  # ceil(40 / 7)
    from harness.audit.sources import open_dataset

    _, (test_split,) = open_dataset(str(path))
    assert [len(b["_id"]) for b in test_split.corpus_batches(16)] == [16, 16, 8]


def test_a_release_built_here_passes(tmp_path, capsys):
    from tests.support.fixtures_harness import standard_benchmark

    path = standard_benchmark(tmp_path / "bench")
    code, out, report = audit(path, capsys, "--no-baselines")
    assert code == 0, out[-1]
    assert report["layout"] == "mmlongembed release"
    assert {s["mode"] for s in report["splits"]} == {"per-query candidates"}
    assert len(report["splits"]) == 7


@pytest.mark.parametrize("make, expected", [
    (lambda root: root / "missing", "no such directory"),
    (lambda root: (root / "empty").mkdir() or root / "empty", "not a retrieval dataset"),
    (lambda root: _broken_qrels(root), "expected a header"),
    (lambda root: _broken_corpus(root), "not a JSON line"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make, expected):
    code = main(["audit", str(make(tmp_path))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("mmle: error: "), err
    assert expected in err[0], err


def test_a_bad_option_is_one_line_and_exit_2(tmp_path, capsys):
    path = write_beir(tmp_path / "data", generated_dataset(n_queries=4))
    for extra in (["--batch-size", "0"], ["--splits", "dev"], ["--alpha", "2"]):
        code = main(["audit", str(path), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, (extra, err)


def _broken_qrels(root: Path) -> Path:
    path = write_beir(root / "data", generated_dataset(n_queries=4))
    (path / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    return path


def _broken_corpus(root: Path) -> Path:
    path = write_beir(root / "data", generated_dataset(n_queries=4))
    with open(path / "corpus.jsonl", "a") as handle:
        handle.write("{not json\n")
    return path
