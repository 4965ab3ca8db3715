"""The embedding step of one side of a pool, whoever runs it: every input's cache key, the inputs not
yet cached ordered longest first, embedded by an executor (this process, a process per device, or
Ray actors) into the cache, then every vector read back from it.

Call sizes and feeding come from the run's settings (``RunSettings``: ``batch_size``, ``batch_tokens``,
``loader_workers``, ``simulate_memory_tokens``). The executors share one loop (``embed_inputs``): read the inputs in length order, prepare them
(``InputLoader``), pack them by tokens and run the calls with out-of-memory back-off
(``CallRunner``), and store each call's unit vectors with whether the input lost its middle. The
vectors of an input never depend on which call held it, so the figures do not depend on the budget,
the workers or the devices (up to the kernels' last bits, which the tie tolerance absorbs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from harness.scoring.batching import (CallRunner, Throughput, default_batch_tokens, length_order, peak_memory,
                                      reset_peak_memory)
from harness.scoring.cache import EmbeddingCache, input_key, model_key
from harness.scoring.data import ModelError
from harness.scoring.loader import InputLoader

SIDES = ("queries", "candidates")
READ_BATCH = 32  # rows read from the pool's table at a time


@dataclass
class SideWork:
    """What is left to embed of one side of a pool: its inputs' keys and yardstick lengths (all of them, in
    pool order), and the indices not in the cache, longest first."""

    side: str
    keys: list[str]
    lengths: list[int]
    missing: list[int]


def formatted(model, side: str, item):
    """The input as the model is handed it (its side's template applied)."""
    return model.format_query(item) if side == "queries" else model.format_candidate(item)


def side_work(model, pool, side: str, cache: EmbeddingCache, key_of_model: str) -> SideWork:
    keys = [input_key(formatted(model, side, item)) for batch in pool.iter_side(side, 256) for item in batch]
    cached = cache.cached_keys(key_of_model, keys)
    lengths = pool.side_tokens(side)
    return SideWork(side, keys, lengths, length_order([i for i, k in enumerate(keys) if k not in cached], lengths))


def call_budget(model, settings, device: str) -> int | None:
    """``--batch-tokens``, or the budget the model's memory plan leaves on ``device``."""
    if settings.batch_tokens is not None:
        return settings.batch_tokens
    return default_batch_tokens(model.activation_bytes_per_token(), device, getattr(model, "window", None))


def embed_inputs(model, pool, work: SideWork, indices: list[int], settings, loader: InputLoader,
                 store: Callable[[list, np.ndarray, list[bool]], None], device: str, progress=None) -> Throughput:
    """Embed ``indices`` (longest first) of ``work``'s side; each call's inputs, unit vectors and truncation
    flags go to ``store``. Returns the throughput, peak memory read on ``device``."""
    throughput = Throughput(devices=[device])
    loader.start()
    reset_peak_memory(device)
    start = time.perf_counter()
    tasks = ((index, work.keys[index], formatted(model, work.side, item), work.lengths[index])
             for index, item in zip(indices, (item for batch in pool.iter_side(work.side, READ_BATCH, indices)
                                              for item in batch)))
    runner = CallRunner(model.forward_prepared, call_budget(model, settings, device), settings.batch_size,
                        throughput, settings.simulate_memory_tokens, device)
    for batch, (vectors, flags) in runner.calls(loader.prepared(tasks, model.preparer_state())):
        vectors = np.asarray(vectors, dtype=np.float32)
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        store(batch, vectors, [bool(f) for f in flags])
        if progress is not None:
            progress(len(batch))
    throughput.wall_seconds = time.perf_counter() - start
    throughput.peak_memory_bytes, throughput.peak_memory_source = peak_memory(device)
    return throughput


def input_loader(model, workers: int) -> InputLoader:
    """The model's input loader: ``workers`` processes where its assembly is worth them, else inline."""
    workers = workers if model.prepares_in_workers else 0
    return InputLoader(model.preparer() if workers else model, workers)


class LocalExecutor:
    """Embeds in this process, on the model's own device, with the run's input loader."""

    def __init__(self, settings):
        self.settings = settings
        self._loaders: dict[int, InputLoader] = {}

    def loader_for(self, model) -> InputLoader:
        """One loader per model for the whole run (its workers start once)."""
        if id(model) not in self._loaders:
            self._loaders[id(model)] = input_loader(model, self.settings.loader_workers)
        return self._loaders[id(model)]

    def embed(self, model, pool, work: SideWork, cache: EmbeddingCache, key_of_model: str, progress) -> Throughput:
        def store(batch, vectors, flags):
            cache.put_many(key_of_model, [(p.key, v, f) for p, v, f in zip(batch, vectors, flags)])

        return embed_inputs(model, pool, work, work.missing, self.settings, self.loader_for(model), store,
                            model.settings.device, progress)

    def close(self) -> None:
        for loader in self._loaders.values():
            loader.close()
        self._loaders.clear()


def embed_side(model, pool, side: str, cache: EmbeddingCache, executor, label: str,
               show_progress: bool) -> tuple[np.ndarray, list[bool], Throughput, int]:
    """Unit vectors [n, d] of one side of ``pool`` in pool order, whether each was truncated, what the
    embedding cost, and how many inputs came from the cache."""
    from tqdm.auto import tqdm

    key_of_model = model_key(model.identity())
    work = side_work(model, pool, side, cache, key_of_model)
    throughput = Throughput()
    if work.missing:
        with tqdm(total=len(work.missing), desc=label, unit="input", disable=not show_progress, leave=False,
                  dynamic_ncols=True) as bar:
            throughput = executor.embed(model, pool, work, cache, key_of_model, bar.update)
    found = cache.get_many(key_of_model, work.keys)
    lost = [k for k in work.keys if k not in found]
    if lost:
        raise ModelError(f"{len(lost)} of {len(work.keys)} {side} were not embedded")
    return (np.stack([found[k][0] for k in work.keys]), [found[k][1] for k in work.keys], throughput,
            len(work.keys) - len(work.missing))
