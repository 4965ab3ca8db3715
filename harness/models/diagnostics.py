"""Diagnostic rows: what a model that reads nothing, or only length, or not the images, or not the
frame order, scores on each column. They are `--model` specs like any other, and `mmle leaderboard`
shows them apart from the models (harness.report.leaderboard).

- `random`                   a seeded random encoder: each input's vector is drawn from a generator
                             derived from the seed and the input's content hash; it scores chance
- `length`                   the score of a candidate is its length in yardstick tokens (text tokens
                             of the declared tokenizer plus 32-pixel image tokens), the same for
                             every query: the longest candidate ranks first
- `text-only:<spec>`         any model with its images removed (placeholders and image bytes), on
                             queries and candidates: what the text alone is worth to it
- `shuffled-frames:<spec>`   any model with the frames of each frame-sequence (temporal) candidate
                             in a random order, seeded by the candidate's content; other pools as they are
"""

from __future__ import annotations

import io
import time

import numpy as np

from harness.scoring.cache import EmbeddingCache, input_key
from harness.scoring.data import Item
from harness.models.adapters import DenseModel, Model, PoolScores, RunSettings, load_model, register_model_kind
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.rng import derive_rng

DIAGNOSTIC_SEED = 0
RANDOM_DIMENSION = 64
DIAGNOSTIC_KINDS = ("random", "length", "text-only", "shuffled-frames")


def is_diagnostic(spec: str) -> bool:
    """Whether a result row's model is a diagnostic row (by its spec's kind)."""
    return spec.partition(":")[0] in DIAGNOSTIC_KINDS


class RandomModel(DenseModel):
    """A seeded random encoder. Vectors depend only on the seed and what reaches the model (the
    input's content hash), never on ids, order or batching, so reruns agree and nothing is cached."""

    runs_on_executors = False

    spec = "random"
    modalities = frozenset({"text", "image"})

    def __init__(self, settings: RunSettings, seed: int = DIAGNOSTIC_SEED, dimension: int = RANDOM_DIMENSION):
        super().__init__(settings)
        self.seed, self.dimension = seed, dimension

    def identity(self) -> dict:
        return {"model": self.spec, "seed": self.seed, "dimension": self.dimension}

    def embed(self, items):
        vectors = [derive_rng(self.seed, "random-encoder", input_key(item)).standard_normal(self.dimension)
                   for item in items]
        return np.array(vectors, dtype=np.float32), [False] * len(items)

    def score_pool(self, pool, cache, settings):
        private = EmbeddingCache(None)  # cheaper drawn than stored
        try:
            return super().score_pool(pool, private, settings)
        finally:
            private.close()


def yardstick_length(item: Item, counter=None) -> int:
    """An input's length on the benchmark's yardstick: its text's tokens (placeholders removed)
    plus each image's 32-pixel tokens (read from the image header, not decoded)."""
    from PIL import Image

    from mmlongembed.core.tokens import default_counter, image_tokens

    counter = counter or default_counter()
    total = counter.count(item.text.replace(IMAGE_PLACEHOLDER, ""))
    for data in item.images:
        width, height = Image.open(io.BytesIO(data)).size
        total += image_tokens(height, width)
    return total


class LengthModel(Model):
    """Scores each candidate by its yardstick length, for every query alike."""

    spec = "length"
    modalities = frozenset({"text", "image"})

    def identity(self) -> dict:
        return {"model": self.spec, "score": "candidate length in yardstick tokens"}

    def score_pool(self, pool, cache, settings):
        from mmlongembed.core.tokens import default_counter

        start = time.perf_counter()
        counter = default_counter()
        lengths = np.array([yardstick_length(item, counter) for batch in pool.iter_candidates(settings.batch_size)
                            for item in batch], dtype=np.float32)
        scores = np.tile(lengths, (len(pool.query_ids), 1))
        return PoolScores(scores, embedded=len(lengths), embed_seconds=time.perf_counter() - start,
                          details={"diagnostic": "length"})


class _EditedPool:
    """A pool whose queries and candidates reach the model edited by ``edit(item, pool_info)``;
    ids, positives and everything else are the pool's own."""

    def __init__(self, pool, edit):
        self._pool, self._edit = pool, edit

    def __getattr__(self, name):
        return getattr(self._pool, name)

    def iter_side(self, side: str, batch_size: int, indices: list[int] | None = None):
        return ([self._edit(item, self._pool.info) for item in batch]
                for batch in self._pool.iter_side(side, batch_size, indices))

    def iter_queries(self, batch_size: int):
        return self.iter_side("queries", batch_size)

    def iter_candidates(self, batch_size: int):
        return self.iter_side("candidates", batch_size)


class EditedInputsModel(Model):
    """A wrapped model (any `--model` spec) that sees every pool through ``edit``."""

    kind = ""

    def __init__(self, inner: Model):
        self.inner = inner
        self.spec = f"{self.kind}:{inner.spec}"
        self.modalities = inner.modalities
        self.ignores_images = inner.ignores_images

    def identity(self) -> dict:
        return {"diagnostic": self.kind, "model": self.inner.identity()}

    @property
    def training_data(self) -> list[str]:
        """The wrapped model's (harness.profiles.training_data): its training is the same."""
        from harness.profiles.training_data import declared_training_data

        return declared_training_data(self.inner)

    def edit(self, item: Item, info) -> Item:
        raise NotImplementedError

    def score_pool(self, pool, cache, settings):
        scored = self.inner.score_pool(_EditedPool(pool, self.edit), cache, settings)
        scored.details = {**scored.details, "diagnostic": self.kind}
        return scored

    def close(self) -> None:
        self.inner.close()


class TextOnlyModel(EditedInputsModel):
    """The wrapped model with every image removed: it takes image pools whatever it takes itself."""

    kind = "text-only"

    def __init__(self, inner: Model):
        super().__init__(inner)
        self.modalities = inner.modalities | {"image"}

    def edit(self, item, info):
        if not item.images:
            return item
        return Item(id=item.id, text=item.text.replace(IMAGE_PLACEHOLDER, " "), images=(),
                    instruction=item.instruction, is_query=item.is_query)


def shuffled_order(n: int, key: str, seed: int = DIAGNOSTIC_SEED) -> list[int]:
    """A seeded permutation of n frames that is never the original order (n >= 2): a drawn
    identity is turned into a rotation by one."""
    order = [int(i) for i in derive_rng(seed, "shuffled-frames", key).permutation(n)]
    if n >= 2 and order == list(range(n)):
        order = order[1:] + order[:1]
    return order


class ShuffledFramesModel(EditedInputsModel):
    """The wrapped model with the frames of each frame-sequence candidate in a seeded random order
    (the text around the frames stays where it is); queries and other pools as they are."""

    kind = "shuffled-frames"

    def edit(self, item, info):
        if item.is_query or not info.frame_sequences or len(item.images) < 2:
            return item
        order = shuffled_order(len(item.images), input_key(item))
        return Item(id=item.id, text=item.text, images=tuple(item.images[i] for i in order),
                    instruction=item.instruction, is_query=item.is_query)


@register_model_kind("random", "random", takes_argument=False, uses_libraries=False)
def _random(argument: str, settings: RunSettings) -> Model:
    return RandomModel(settings)


@register_model_kind("length", "length", takes_argument=False, uses_libraries=False)
def _length(argument: str, settings: RunSettings) -> Model:
    return LengthModel()


@register_model_kind("text-only", "text-only:<model>")
def _text_only(argument: str, settings: RunSettings) -> Model:
    return TextOnlyModel(load_model(argument, settings))


@register_model_kind("shuffled-frames", "shuffled-frames:<model>")
def _shuffled_frames(argument: str, settings: RunSettings) -> Model:
    return ShuffledFramesModel(load_model(argument, settings))
