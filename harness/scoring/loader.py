"""Input assembly off the model's thread, as a PyTorch ``DataLoader`` does it: a pool of worker
processes (``--loader-workers``) prepares inputs (image decode and resize, pixel normalisation,
frames, tokenising, template, middle truncation) ahead of the model, and hands them back in order.

Each worker holds a copy of the model's preparing half (``Model.preparer()``: the adapter without its
weights), sent once when the pool starts; per-pool settings that change how an input is prepared
travel with each task. Prefetching is bounded (``ahead`` inputs in flight), so memory stays a few
batches whatever the pool's size. With no workers, inputs are prepared inline, in the same order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator

_PREPARER = None  # the worker's copy of the model's preparing half


def _context():
    """Spawn, not fork: the parent may hold CUDA state and threads that a forked child cannot use. With
    torch, its context: tensors (pixel patches, hundreds of MB for a 32K input of pages) come back through
    shared memory, not through the pipe, as a DataLoader's do."""
    try:
        import torch.multiprocessing as torch_multiprocessing
    except ImportError:
        return multiprocessing.get_context("spawn")
    return torch_multiprocessing.get_context("spawn")


def _install(preparer) -> None:
    global _PREPARER
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the workers are the parallelism
    try:
        import torch
        import torch.multiprocessing  # noqa: F401  (registers the shared-memory reductions of tensors)

        torch.set_num_threads(1)  # one core per worker, as DataLoader's workers
    except ImportError:
        pass
    _PREPARER = preparer


def _prepare(state: dict, tasks: list):
    for name, value in state.items():
        setattr(_PREPARER, name, value)
    return [_PREPARER.prepare(*task) for task in tasks]


def _chunks(tasks: Iterable[tuple], size: int) -> Iterator[list[tuple]]:
    chunk: list[tuple] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class InputLoader:
    """Prepares ``(index, item)`` tasks with ``preparer.prepare(index, item)`` in ``workers`` processes
    (0: inline), at most ``ahead`` in flight, results in task order. One pool serves a whole run."""

    def __init__(self, preparer, workers: int, ahead: int | None = None, chunk: int = 2):
        self.preparer, self.workers, self.chunk = preparer, workers, chunk
        # inputs in flight: two submissions per worker, as a DataLoader's prefetch factor of 2, so a worker
        # whose result waits for the model has the next one to assemble (a 32K input of pages is ~0.5 GB of pixels)
        self.ahead = ahead or max(2, 2 * chunk * workers)
        self._pool = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=_context(), initializer=_install,
                                             initargs=(self.preparer,))
            # every worker started and ready now: a spawned worker starts only when a task finds none idle,
            # and one that starts mid-run spends seconds importing torch beside the others
            for ready in [self._pool.submit(os.getpid) for _ in range(self.workers)]:
                ready.result()
        return self._pool

    def start(self) -> None:
        """Start the workers now (a run's first pool would otherwise time their start as its own)."""
        if self.workers:
            self._executor()

    def prepared(self, tasks: Iterable[tuple], state: dict | None = None) -> Iterator:
        """Each task prepared, in order; ``state``: the preparer's per-pool attributes, set in every worker.
        An input that cannot be prepared (an undecodable image, a worker killed for memory) is one
        ``ModelError`` line, which skips the pool; a broken pool of workers is replaced for the next."""
        try:
            yield from self._prepared(tasks, state or {})
        except Exception as exc:  # noqa: BLE001
            from harness.scoring.batching import model_failure

            if isinstance(exc, BrokenProcessPool):
                self.close()
            raise model_failure(exc) from None

    def _prepared(self, tasks: Iterable[tuple], state: dict) -> Iterator:
        if self.workers == 0:
            for name, value in state.items():
                setattr(self.preparer, name, value)
            for task in tasks:
                yield self.preparer.prepare(*task)
            return
        executor = self._executor()
        # a few inputs per submission: a short text's assembly costs less than a round trip to a worker
        chunks = _chunks(tasks, self.chunk)
        pending: deque = deque()

        def top_up() -> None:
            while len(pending) * self.chunk < self.ahead and (chunk := next(chunks, None)) is not None:
                pending.append(executor.submit(_prepare, state, chunk))

        top_up()
        while pending:
            ready = pending.popleft().result()
            top_up()  # before the caller takes these: the workers assemble while the model runs
            yield from ready

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
