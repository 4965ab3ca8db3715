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


def _reference_top(reference, query, k):
    expected = np.asarray(reference.get_scores(query))
    return list(np.lexsort((np.arange(len(expected)), -expected))[:k])


def test_top_k_over_a_large_corpus_with_ties_and_few_matches_is_rank_bm25s_order():
    """Past 1,024 documents the k best are found among the scores at least a bound (the k-th
    highest block maximum): exact copies of documents tie (the lower index first), a query
    matching fewer than k documents is filled with the first documents scoring 0, and k from 1
    to the whole corpus gives rank_bm25's order."""
    from rank_bm25 import BM25Okapi

    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(400)]
    tokenized = [list(rng.choice(vocab, size=rng.integers(5, 40))) for _ in range(1500)]
    for copy in range(300, 1500, 97):  # exact copies, far apart: equal scores across blocks
        tokenized[copy] = list(tokenized[11])
    tokenized[1400] = ["rare", "w1"]
    tokenized[1499] = ["rare"]
    reference, ours = BM25Okapi(tokenized), BM25Index(tokenized)
    queries = [list(tokenized[11][:6]), ["rare"], ["rare", "rare", "missing"], list(rng.choice(vocab, size=12)),
               ["missing"], []]
    for query in queries:
        for k in (1, 5, 17, 64, 600, len(tokenized)):
            assert [i for i, _ in ours.top_k(query, k)] == _reference_top(reference, query, k), (query, k)


def test_top_k_with_negative_scores_puts_the_documents_without_the_word_first():
    """When most words are in more than half the documents the mean IDF is negative and so is
    the floor: a document holding such a word scores below one without it (0)."""
    from rank_bm25 import BM25Okapi

    common = [f"c{i}" for i in range(40)]  # in two thirds of the documents: IDF -0.69
    tokenized = [common + [f"r{d % 10}"] for d in range(1600)] + [[f"r{d % 10}"] for d in range(1600, 2400)]
    tokenized = [tokenized[i] for i in np.random.default_rng(3).permutation(len(tokenized))]
    reference, ours = BM25Okapi(tokenized), BM25Index(tokenized)
    assert reference.average_idf < 0  # the floor is negative
    for query in (["c1"], ["c1", "r5"], ["r7", "c2", "c3"]):
        np.testing.assert_array_equal(ours.scores(query), np.asarray(reference.get_scores(query)))
        for k in (1, 5, 40):
            assert [i for i, _ in ours.top_k(query, k)] == _reference_top(reference, query, k), (query, k)
