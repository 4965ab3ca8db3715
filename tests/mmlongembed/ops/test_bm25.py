import numpy as np
import pytest

from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from tests.support.realdata import shared_data_dir


def test_tokenisation_is_documented_behaviour():
    assert bm25_tokenize("The U.S. Army's 2nd Division, 中文") == ["u", "s", "army", "s", "2nd", "division", "中", "文"]


def _assert_topk_parity(docs, queries, k=5):
    from rank_bm25 import BM25Okapi

    tokenized = [bm25_tokenize(d) for d in docs]
    ours = BM25Index(tokenized)
    reference = BM25Okapi(tokenized)
    for query in queries:
        q = bm25_tokenize(query)
        expected = np.asarray(reference.get_scores(q))
        got = ours.scores(q)
        np.testing.assert_array_equal(got, expected)  # bit-identical
        top = [i for i, _ in ours.top_k(q, k)]
        ref_top = list(np.lexsort((np.arange(len(docs)), -expected))[:k])
        assert top == ref_top


def test_scores_and_top5_match_rank_bm25_on_generated_text():
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(300)]
    docs = [" ".join(rng.choice(vocab, size=rng.integers(20, 200))) for _ in range(300)]
    queries = [" ".join(rng.choice(vocab, size=6)) for _ in range(20)]
    _assert_topk_parity(docs, queries)


@pytest.mark.realdata
def test_top5_matches_rank_bm25_on_the_govreport_sample():
    import json

    root = shared_data_dir("govreport")
    records = [json.loads(line) for line in (root / "leval_gov_report_summ.jsonl").read_text().splitlines()]
    inputs = json.loads((root / "zeroscrolls_gov_report_validation_input.json").read_text())
    outputs = json.loads((root / "zeroscrolls_gov_report_validation_output.json").read_text())
    docs = [r["input"] for r in records] + list(inputs.values())
    queries = [r["outputs"][0] for r in records] + list(outputs.values())
    _assert_topk_parity(docs, queries)


def test_empty_query_scores_zero():
    index = BM25Index.from_texts(["alpha beta", "gamma"])
    assert index.scores([]).tolist() == [0.0, 0.0]
    assert index.scores(["unknown"]).tolist() == [0.0, 0.0]


def test_an_index_read_from_a_generator_scores_as_rank_bm25_with_floored_idfs():
    """Documents read one at a time (how GovReport indexes 19K reports), with words in more than
    half of them (negative IDF, floored to EPSILON times the mean): still bit-identical."""
    from rank_bm25 import BM25Okapi

    rng = np.random.default_rng(4)
    vocab = [f"w{i}" for i in range(40)]
    tokenized = [["common", "usual", *rng.choice(vocab, size=rng.integers(5, 60))] for _ in range(120)]
    tokenized[7] = []  # an empty document among them
    reference = BM25Okapi(tokenized)
    assert reference.idf["common"] == 0.25 * reference.average_idf  # the floor applied
    ours = BM25Index(doc for doc in tokenized)
    assert ours.size == len(tokenized)
    for query in (["common"], ["w1", "w1", "usual", "missing"], list(rng.choice(vocab, size=9))):
        np.testing.assert_array_equal(ours.scores(query), np.asarray(reference.get_scores(query)))
