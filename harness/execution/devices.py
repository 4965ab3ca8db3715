"""Several devices on one machine (``--devices cuda:0,cuda:1``): a process per device, each loading its
own replica of the model once for the whole run, and all of them writing one embedding cache (SQLite in
WAL mode). A side's inputs still to embed are shared among the devices by tokens, not by count; each
device runs the plain run's loop on its share (token-budget calls, loader workers, out-of-memory
back-off) and commits every call, so an interrupted run resumes with only what is missing.
"""

from __future__ import annotations

import atexit
import dataclasses
import multiprocessing
import queue
from pathlib import Path

from harness.scoring.batching import Throughput, split_by_tokens
from harness.scoring.data import Benchmark, ModelError, PoolData
from harness.scoring.embedding import LocalExecutor, SideWork

POLL_SECONDS = 5.0  # how often a waiting driver checks that its device processes are alive


def _serve(spec: str, settings, device: str, cache_directory: str, tasks, results) -> None:
    """A device's process: its model replica, then one task (a share of one side of a pool) at a time."""
    from harness.models.adapters import load_model
    from harness.scoring.cache import EmbeddingCache

    try:
        settings = dataclasses.replace(settings, device=device, progress=False, load_weights=True)
        model = load_model(spec, settings)
        cache = EmbeddingCache(cache_directory)
        executor = LocalExecutor(settings)
    except Exception as exc:  # noqa: BLE001  (the driver reports it in one line)
        results.put(("unloadable", f"{device}: cannot load {spec}: {type(exc).__name__}: {str(exc)[:300]}"))
        return
    benchmarks: dict[str, Benchmark] = {}
    while (task := tasks.get()) is not None:
        try:
            ref, info, work, key_of_model = task
            benchmark = benchmarks.setdefault(ref, Benchmark(ref))
            pool = PoolData(benchmark, info)
            model.begin_pool(pool)
            spent = executor.embed(model, pool, work, cache, key_of_model, None)
            results.put(("ok", spent.as_dict()))
        except Exception as exc:  # noqa: BLE001  (a failure skips the pool, reported by the driver)
            results.put(("error", f"{device}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
    executor.close()
    cache.close()
    model.close()


class DeviceExecutor:
    """One process per device, started on the first pool and kept for the run."""

    def __init__(self, spec: str, settings, devices: list[str], cache_directory):
        self.spec, self.settings, self.devices = spec, settings, devices
        self.cache_directory = str(cache_directory)
        self._workers: list[tuple] = []
        self._closing_at_exit = False
        self._unloadable: str | None = None  # a replica that cannot load: every later pool skips at once

    def _start(self, device: str) -> tuple:
        context = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        tasks, results = context.Queue(), context.Queue()
        # not a daemon: a daemon may not start processes, and the device's loader workers are its children;
        # close() (also at exit) ends it
        process = context.Process(target=_serve, name=f"mmle-{device}", daemon=False,
                                  args=(self.spec, self.settings, device, self.cache_directory, tasks, results))
        process.start()
        if not self._closing_at_exit:
            atexit.register(self.close)
            self._closing_at_exit = True
        return device, process, tasks, results

    def _ready_workers(self) -> list[tuple]:
        """A process per device; one that ended (killed, out of host memory) is started again."""
        if not self._workers:
            self._workers = [self._start(device) for device in self.devices]
        self._workers = [worker if worker[1].is_alive() else self._start(worker[0]) for worker in self._workers]
        return self._workers

    def embed(self, model, pool, work: SideWork, cache, key_of_model: str, progress) -> Throughput:
        if not isinstance(pool, PoolData):  # a diagnostic's edited inputs exist only in this process
            raise ModelError(f"{model.spec}: edited inputs are embedded in one process, not on several devices")
        if Path(self.cache_directory) != Path(cache.directory):
            raise ModelError(f"the devices write {self.cache_directory}, the run reads {cache.directory}")
        if self._unloadable:
            raise ModelError(self._unloadable)
        workers = self._ready_workers()
        shares = split_by_tokens(work.missing, work.lengths, len(workers))
        busy = []
        for (device, process, tasks, results), share in zip(workers, shares):
            if share:
                tasks.put((pool.benchmark.ref, pool.info, dataclasses.replace(work, missing=share), key_of_model))
                busy.append((device, process, results, len(share)))
        spent = Throughput()
        errors = []
        for device, process, results, count in busy:
            status, value = self._wait(device, process, results)
            if status == "ok":
                spent.merge(Throughput.from_dict(value), concurrent=True)
                if progress is not None:
                    progress(count)
            else:
                errors.append(value)
                if status == "unloadable":
                    self._unloadable = value
        if errors:
            raise ModelError("; ".join(errors))
        return spent

    @staticmethod
    def _wait(device: str, process, results) -> tuple[str, object]:
        while True:
            try:
                return results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if not process.is_alive():
                    return "error", (f"{device}: its process ended (exit code {process.exitcode}); "
                                     "what it embedded is cached: run again to resume")

    def close(self) -> None:
        for _, process, tasks, _ in self._workers:
            if process.is_alive():
                tasks.put(None)
        for _, process, _, _ in self._workers:
            process.join(timeout=60)
            if process.is_alive():
                process.terminate()
        self._workers = []
