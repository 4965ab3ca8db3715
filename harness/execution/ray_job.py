"""Past one machine (``--executor ray``): the embedding step as a Ray Data job. Each row is a run of a
side's inputs still to embed (longest first, a few calls' worth of tokens); one actor class holds a
model replica per device (``num_gpus`` per actor, ``--replicas`` actors) and runs the plain run's loop
on each row (token-budget calls, out-of-memory back-off); the driver writes what comes back into the
run's embedding cache, whose SQLite file is not shared across machines.

It joins the cluster at ``RAY_ADDRESS`` when that is set, and otherwise starts a local one. Every node
needs this toolkit installed and the dataset readable (a Hub ``repo@revision``, or a path on shared
storage). An actor that dies is restarted by Ray and its row retried (Ray Data's default); a driver that
dies leaves the cache with every row written so far, and a rerun embeds only what is missing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import numpy as np

from harness.scoring.batching import Throughput
from harness.scoring.data import Benchmark, ModelError, PoolData
from harness.scoring.embedding import SideWork, embed_inputs, input_loader

ROW_CALLS = 4  # a row holds about this many calls' worth of tokens: enough to keep an actor busy, few to retry
FAULT_FILE = "MMLE_RAY_FAULT_FILE"  # testing: the first actor call that creates this file ends its process


class EmbedActor:
    """A model replica: rows of (pool, side, inputs) in, (key, unit vector, truncated) out."""

    def __init__(self, spec: str, settings, fault_file: str | None = None):
        import ray

        from harness.models.adapters import load_model

        device = "cuda" if ray.get_gpu_ids() else "cpu"
        self.settings = dataclasses.replace(settings, device=device, progress=False, load_weights=True)
        self.model = load_model(spec, self.settings)
        self.loader = input_loader(self.model, settings.loader_workers)
        self.pools: dict[tuple[str, str], PoolData] = {}
        # (pool, side) -> the budget an out-of-memory back-off lowered it to: it holds for the side's later rows
        self.lowered: dict[tuple[str, str], int] = {}
        self.fault_file, self.calls = fault_file, 0

    def _pool(self, ref: str, info) -> PoolData:
        key = (ref, info.name)
        if key not in self.pools:
            self.pools[key] = PoolData(Benchmark(ref), info)
        return self.pools[key]

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.fault_file and self.calls > 1:
            try:
                os.close(os.open(self.fault_file, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os._exit(1)  # a killed actor, mid-run, once

    def __call__(self, batch: dict) -> dict:
        self._maybe_fail()
        keys, vectors, flags, spent, starts = [], [], [], [], []
        names = []
        for task in batch["task"]:
            ref, info, side, indices, task_keys, lengths = pickle.loads(task)
            names.append((info.name, side))
            pool = self._pool(ref, info)
            self.model.begin_pool(pool)
            work = SideWork(side, dict(zip(indices, task_keys)), dict(zip(indices, lengths)), list(indices))

            def store(calls, unit_vectors, truncated):
                keys.extend(p.key for p in calls)
                vectors.extend(unit_vectors)
                flags.extend(truncated)

            starts.append(len(keys))
            lowered = self.lowered.get((info.name, side))
            settings = self.settings if lowered is None else dataclasses.replace(self.settings, batch_tokens=lowered)
            part = embed_inputs(self.model, pool, work, list(indices), settings, self.loader, store,
                                self.settings.device)
            if part.backoffs:
                self.lowered[(info.name, side)] = part.backoffs[-1]["budget_after"]
            spent.append(part)
        notes = [""] * len(keys)
        for (pool_name, side), part, at in zip(names, spent, starts):
            notes[at] = json.dumps({"pool": pool_name, "side": side, **part.as_dict()})
        return {"key": np.array(keys), "vector": np.stack(vectors).astype(np.float32), "truncated": np.array(flags),
                "throughput": np.array(notes)}


class RayExecutor:
    """Sends a side's missing inputs to Ray actors and writes what they return into the cache."""

    def __init__(self, spec: str, settings, replicas: int, gpus_per_replica: float):
        self.spec, self.settings = spec, settings
        self.replicas, self.gpus = replicas, gpus_per_replica
        self._started_here = False

    def _ray(self):
        try:
            import ray
        except ImportError:
            raise ModelError("--executor ray: ray is not installed: pip install 'mmlongembed[ray]'") from None
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS")
            options = {} if address else {"num_cpus": max(os.cpu_count() or 1, self.replicas + 1)}
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, **options)
            self._started_here = not address
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # one line per job otherwise
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        return ray

    def _rows(self, pool, work: SideWork) -> list[dict]:
        """The side's missing inputs as rows of about ``ROW_CALLS`` calls' tokens each, longest first."""
        # the actors' budgets come from their own devices' memory: here only --batch-tokens is known
        row_tokens = ROW_CALLS * (self.settings.batch_tokens
                                  or self.settings.batch_size * max(work.lengths[i] for i in work.missing))
        rows, current, tokens = [], [], 0
        for index in work.missing:
            if current and tokens + work.lengths[index] > row_tokens:
                rows.append(current)
                current, tokens = [], 0
            current.append(index)
            tokens += work.lengths[index]
        rows.append(current)
        return [{"task": pickle.dumps((pool.benchmark.ref, pool.info, work.side, row, [work.keys[i] for i in row],
                                       [work.lengths[i] for i in row]))} for row in rows]

    def embed(self, model, pool, work: SideWork, cache, key_of_model: str, progress) -> Throughput:
        spent = self.embed_many(model, [(pool, work)], cache, key_of_model, progress)
        return spent.get((pool.info.name, work.side), Throughput())

    def embed_many(self, model, jobs: list, cache, key_of_model: str, progress=None) -> dict:
        """Every (pool, side work) of ``jobs`` in one Ray Data job; per (pool, side), what it cost (its rows'
        actor time summed: a replica's rate)."""
        if any(not isinstance(pool, PoolData) for pool, _ in jobs):
            raise ModelError(f"{model.spec}: edited inputs are embedded in one process, not on Ray")
        spent: dict[tuple[str, str], Throughput] = {}
        try:  # joining the cluster too: a wrong RAY_ADDRESS is one line, as a failed row is
            ray = self._ray()
            rows = [row for pool, work in jobs for row in self._rows(pool, work)]
            results = ray.data.from_items(rows).map_batches(
                EmbedActor, batch_size=1, batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=self.replicas), num_gpus=self.gpus or None,
                fn_constructor_kwargs={"spec": self.spec, "settings": self.settings,
                                       "fault_file": os.environ.get(FAULT_FILE)})
            for batch in results.iter_batches(batch_size=None, batch_format="numpy"):
                cache.put_many(key_of_model, list(zip(batch["key"].tolist(), batch["vector"],
                                                      [bool(f) for f in batch["truncated"]])))
                for note in batch["throughput"]:
                    if note:
                        record = json.loads(note)
                        spent.setdefault((record.pop("pool"), record.pop("side")), Throughput()).merge(
                            Throughput.from_dict(record))
                if progress is not None:
                    progress(len(batch["key"]))
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001  (Ray's own errors: one line; rows written so far stay cached)
            # a failed task's error wraps the actor's own (its first line is the task's name): name the cause
            cause = getattr(exc, "cause", None) or exc
            lines = [line for line in str(cause).splitlines() if line.strip()]
            raise ModelError(f"ray: {type(cause).__name__}: {lines[-1] if lines else ''}") from None
        return spent

    def close(self) -> None:
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False
