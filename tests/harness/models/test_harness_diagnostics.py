"""Diagnostic rows (harness.models.diagnostics): random scores chance, length ranks by length, text-only
removes images before the wrapped model sees them, shuffled-frames reorders frames by a seed, and
the leaderboard shows them apart from the models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.scoring.cache import EmbeddingCache
from harness.cli import main as score_main
from harness.scoring.data import Benchmark, InMemoryPool, Item, PoolInfo
from harness.models.diagnostics import RandomModel, ShuffledFramesModel, TextOnlyModel
from harness.fixtures import make_pool, png, write_benchmark
from harness.report.leaderboard import main as leaderboard_main
from harness.scoring.metrics import positive_ranks
from harness.models.adapters import DenseModel, RunSettings, load_model
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from tests.support.fixtures_harness import standard_benchmark

SETTINGS = RunSettings(batch_size=8, progress=False)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def open_pool(root, name):
    benchmark = Benchmark(str(root))
    return benchmark.open_pool(next(info for info in benchmark.pools if info.name == name))


class Recorder(DenseModel):
    """A text-only model that records what reaches it and embeds by a bag of letters."""

    spec = "recorder"

    def __init__(self):
        super().__init__(SETTINGS)
        self.seen: list[Item] = []

    def identity(self):
        return {"model": self.spec}

    def embed(self, items):
        self.seen += items
        vectors = [[item.text.count(c) + 1.0 for c in "abcdefghij"] for item in items]
        return np.array(vectors, dtype=np.float32), [False] * len(items)


def test_random_encoder_scores_chance_and_is_seeded(tmp_path):
    root = write_benchmark(tmp_path / "b", [make_pool("big-easy-256", n_queries=40, negatives=3, words=40)])
    pool = open_pool(root, "big-easy-256")
    model = load_model("random", SETTINGS)
    scores = model.score_pool(pool, EmbeddingCache(None), SETTINGS).scores
    ranks = positive_ranks(scores, pool.positive_index)[:, 0]
    n = len(pool.corpus_ids)
    # chance: the positive's rank is uniform over 1..n (mean (n+1)/2, sd of the mean n/sqrt(12*40))
    assert abs(ranks.mean() - (n + 1) / 2) < 4 * n / np.sqrt(12 * len(ranks))
    assert (ranks == 1).sum() <= 4  # BM25 on this pool puts every positive first
    again = RandomModel(SETTINGS).score_pool(open_pool(root, "big-easy-256"), EmbeddingCache(None), SETTINGS).scores
    assert np.array_equal(scores, again)
    other_seed = RandomModel(SETTINGS, seed=1).score_pool(pool, EmbeddingCache(None), SETTINGS).scores
    assert not np.allclose(scores, other_seed)


def test_length_scores_are_yardstick_lengths_and_pick_the_longest(tmp_path):
    from mmlongembed.core.tokens import default_counter, image_tokens

    short, long = make_pool("mix-easy-256", words=40, images=True), make_pool("mix-easy-256", words=200, images=True)
    short.candidates[2] = long.candidates[2]  # one candidate (a negative of query 0) far longer than the rest
    root = write_benchmark(tmp_path / "b", [short])
    pool = open_pool(root, "mix-easy-256")
    scores = load_model("length", SETTINGS).score_pool(pool, EmbeddingCache(None), SETTINGS).scores
    counter = default_counter()
    items = [item for batch in pool.iter_candidates(8) for item in batch]  # published ids are opaque
    assert all(len(item.images) == 1 for item in items)  # one 64x48 image each: 2x2 yardstick tokens
    expected = [counter.count(item.text.replace(IMAGE_PLACEHOLDER, "")) + image_tokens(48, 64) for item in items]
    assert scores.shape == (len(pool.query_ids), len(pool.corpus_ids))
    assert np.allclose(scores, np.array(expected)[None, :])
    longest = max(range(len(items)), key=lambda j: len(items[j].text.split()))
    assert len(items[longest].text.split()) > 150  # the long candidate
    assert (scores.argmax(axis=1) == longest).all()


def test_text_only_removes_images_before_the_wrapped_model(tmp_path):
    root = write_benchmark(tmp_path / "b", [make_pool("mix-easy-256", words=40, images=True)])
    pool = open_pool(root, "mix-easy-256")
    recorder = Recorder()
    wrapped = TextOnlyModel(recorder)
    assert "image" in pool.info.modalities and "image" not in recorder.modalities
    assert "image" in wrapped.modalities  # a text model can score image pools through it
    scored = wrapped.score_pool(pool, EmbeddingCache(None), SETTINGS)
    candidates = [item for item in recorder.seen if not item.is_query]
    assert len(candidates) == len(pool.corpus_ids)
    assert all(not item.images and IMAGE_PLACEHOLDER not in item.text for item in recorder.seen)
    originals = [item for batch in pool.iter_candidates(8) for item in batch]
    assert all(item.images for item in originals)  # the pool itself still has them
    # (embedded longest first: compared as sets of texts)
    assert sorted(c.text for c in candidates) == sorted(o.text.replace(IMAGE_PLACEHOLDER, " ") for o in originals)
    assert scored.details["diagnostic"] == "text-only" and wrapped.spec == "text-only:recorder"


class FramePool(InMemoryPool):
    """A frame-sequence pool as the model sees it (what harness.scoring.data reads from a temporal build)."""

    def __init__(self, frames: bool):
        extra = {"candidate_form": "frames"} if frames else {}
        self.info = PoolInfo("clips-hard-256", "temporal_summarization", "clips", "hard", 256,
                             "video" if frames else "image", "text", extra=extra)
        frames_of = [[png((40 * k + i, 10 * i, 90)) for i in range(6)] for k in range(3)]
        self.candidates = [Item(id=f"c{k}", text="".join(f"t{i} {IMAGE_PLACEHOLDER}" for i in range(6)),
                                images=tuple(f)) for k, f in enumerate(frames_of)]
        self.queries = [Item(id="q0", text="what happens", is_query=True)]
        self.query_ids, self.corpus_ids, self.positive_index = ["q0"], [c.id for c in self.candidates], [0]
        self.query_tokens, self.candidate_tokens = [3], [6 * 4] * 3


class ImageRecorder(Recorder):
    modalities = frozenset({"text", "image"})


def test_shuffled_frames_reorders_each_candidate_by_a_seed():
    pool = FramePool(frames=True)
    first, second = ImageRecorder(), ImageRecorder()
    ShuffledFramesModel(first).score_pool(pool, EmbeddingCache(None), SETTINGS)
    ShuffledFramesModel(second).score_pool(FramePool(frames=True), EmbeddingCache(None), SETTINGS)
    seen = [item for item in first.seen if not item.is_query]
    assert [item.images for item in seen] == [item.images for item in second.seen if not item.is_query]
    orders = []
    for original, shuffled in zip(pool.candidates, seen):
        assert sorted(shuffled.images) == sorted(original.images) and shuffled.images != original.images
        assert shuffled.text == original.text  # the text around the frames stays where it is
        orders.append([original.images.index(im) for im in shuffled.images])
    assert len({tuple(o) for o in orders}) > 1  # each candidate its own order, not one shared permutation
    assert [item for item in first.seen if item.is_query] == pool.queries
    # a pool of images that are not a frame sequence reaches the model as it is
    still = ImageRecorder()
    ShuffledFramesModel(still).score_pool(FramePool(frames=False), EmbeddingCache(None), SETTINGS)
    assert [item.images for item in still.seen if not item.is_query] == [c.images for c in pool.candidates]


def test_wrapped_specs_load_and_bad_ones_are_one_line():
    assert load_model("text-only:bm25", SETTINGS).spec == "text-only:bm25"
    assert load_model("shuffled-frames:random", SETTINGS).spec == "shuffled-frames:random"
    with pytest.raises(UserError, match="text-only:<model>"):
        load_model("text-only:", SETTINGS)
    with pytest.raises(UserError):
        load_model("random:3", SETTINGS)


def test_leaderboard_shows_diagnostic_rows_apart(tmp_path, capsys):
    bench = standard_benchmark(tmp_path / "fixture")
    output = tmp_path / "out"
    code = score_main(["--dataset", str(bench), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                       "--quiet", "--bootstrap", "50", "--model", "bm25,random,length,text-only:bm25"])
    assert code == 0
    report = json.loads((output / "results.json").read_text())
    assert {r["model"] for r in report["results"]} == {"bm25", "random", "length", "text-only:bm25"}
    capsys.readouterr()
    assert leaderboard_main([str(output)]) == 0
    text = capsys.readouterr().out
    models, _, diagnostics = text.partition("## Diagnostics (not models)")
    assert diagnostics, "no diagnostics block"
    rows = lambda block: {line.split("| ours |")[0].rsplit("|", 2)[-1].strip() for line in block.splitlines()
                          if "| ours |" in line}  # the model: the cell before its source (after a rank, if any)
    assert "bm25" in rows(models) and not rows(models) & {"random", "length", "text-only:bm25"}
    assert {"random", "length", "text-only:bm25"} <= rows(diagnostics) and "bm25" not in rows(diagnostics)
