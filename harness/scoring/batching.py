"""Model calls sized by tokens: inputs ordered by their own length and packed up to a token budget,
an out-of-memory call split in two and retried, and what each pool's embedding cost in throughput.

A call of ``n`` right-padded inputs costs ``n x its longest`` tokens of device memory and time, so
the budget bounds the padded tokens of a call (``--batch-tokens``), with ``--batch-size`` as a
bound on its inputs. Inputs come longest first: each call's first input sets its width, the rest
pad little, and the calls that may not fit are tried first.
"""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from harness.scoring.data import ModelError, PoolError
from mmlongembed.core.errors import UserError

# What one token of a call costs the device beyond the weights, in units of the model's hidden size
# (bytes of its dtype): the live activations of one layer with a fused attention kernel (residual,
# attention output, the MLP's gate, up and activation: 6 x hidden + 3 x MLP width) and the last
# hidden state kept for pooling; doubled for the allocator's slack and the vision tower.
ACTIVATION_SLACK = 2.0
# Of the memory left after the weights: on a GPU the rest stays with the allocator (and an out-of-memory
# error backs off); the host's memory is also the input loader's and the system's, and running out of it
# kills the process instead of raising, so a CPU run takes a quarter.
FREE_MEMORY_SHARE = {"cuda": 0.8, "cpu": 0.25}


def length_order(indices: Sequence[int], lengths: Sequence[int]) -> list[int]:
    """``indices`` longest first (ties by index: the order never depends on anything else)."""
    return sorted(indices, key=lambda i: (-lengths[i], i))


def padded_tokens(lengths: Sequence[int]) -> int:
    """What a right-padded call of inputs of these lengths costs: inputs x the longest."""
    return len(lengths) * max(lengths) if lengths else 0


def pack(entries: Iterable, length_of: Callable[[object], int], budget: int | Callable[[], int | None] | None,
         max_inputs: int) -> Iterator[list]:
    """Consecutive entries grouped into calls of at most ``max_inputs`` inputs and ``budget`` padded
    tokens (None: no token bound; a callable: read before each entry, so a lowered budget applies at
    once); an entry longer than the budget is a call of its own."""
    batch: list = []
    longest = 0
    for entry in entries:
        length = length_of(entry)
        width = max(longest, length)
        limit = budget() if callable(budget) else budget
        if batch and (len(batch) >= max_inputs or (limit is not None and (len(batch) + 1) * width > limit)):
            yield batch
            batch, width = [], length
        batch.append(entry)
        longest = width
    if batch:
        yield batch


def split_by_tokens(indices: Sequence[int], lengths: Sequence[int], parts: int) -> list[list[int]]:
    """``indices`` shared among ``parts`` workers by tokens, not by count: longest first, each to the
    part with the fewest tokens so far (ties to the lowest part); each part stays longest first."""
    shares: list[list[int]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for index in length_order(indices, lengths):
        part = min(range(parts), key=lambda p: (loads[p], p))
        shares[part].append(index)
        loads[part] += max(lengths[index], 1)
    return shares


class SimulatedOutOfMemory(RuntimeError):
    """A model call above ``--simulate-memory-tokens`` padded tokens: the out-of-memory path, tested on CPU."""


def is_out_of_memory(exc: BaseException) -> bool:
    """A device out-of-memory error (torch's, the simulated one, or a backend's RuntimeError saying so)."""
    if isinstance(exc, SimulatedOutOfMemory):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def model_failure(exc: Exception) -> Exception:
    """The error to raise for a failed model call: the pool's, the model's or the user's own error as it
    is; anything else (a failure of the model itself) as one ``ModelError`` line, which skips the pool."""
    if isinstance(exc, (PoolError, ModelError, UserError)):
        return exc
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return ModelError(f"{type(exc).__name__}: {first_line}")


@dataclass
class Throughput:
    """What embedding one side (or pool) cost: inputs, own and padded tokens, calls, back-offs, time, memory."""

    inputs: int = 0
    own_tokens: int = 0
    padded_tokens: int = 0
    batches: int = 0
    model_seconds: float = 0.0  # inside model calls
    wall_seconds: float = 0.0  # the whole embedding step, input assembly and waiting included
    backoffs: list[dict] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    peak_memory_source: str | None = None
    devices: list[str] = field(default_factory=list)

    def add_call(self, lengths: Sequence[int], seconds: float) -> None:
        self.inputs += len(lengths)
        self.own_tokens += sum(lengths)
        self.padded_tokens += padded_tokens(lengths)
        self.batches += 1
        self.model_seconds += seconds

    def merge(self, other: "Throughput", concurrent: bool = False) -> None:
        """Add ``other``'s counts; ``concurrent``: it ran beside this one (wall time is the longer)."""
        self.inputs += other.inputs
        self.own_tokens += other.own_tokens
        self.padded_tokens += other.padded_tokens
        self.batches += other.batches
        self.model_seconds += other.model_seconds
        self.wall_seconds = (max(self.wall_seconds, other.wall_seconds) if concurrent
                             else self.wall_seconds + other.wall_seconds)
        self.backoffs += other.backoffs
        if other.peak_memory_bytes is not None:
            self.peak_memory_bytes = max(self.peak_memory_bytes or 0, other.peak_memory_bytes)
            self.peak_memory_source = other.peak_memory_source
        self.devices += [d for d in other.devices if d not in self.devices]

    def as_dict(self) -> dict:
        """results.json's ``throughput`` of a pool."""
        return {"inputs": self.inputs, "own_tokens": self.own_tokens, "padded_tokens": self.padded_tokens,
                "padding_ratio": round(self.padded_tokens / self.own_tokens, 4) if self.own_tokens else None,
                "batches": self.batches, "backoffs": self.backoffs,
                "wall_s": round(self.wall_seconds, 3), "model_s": round(self.model_seconds, 3),
                "tokens_per_s": round(self.own_tokens / self.wall_seconds, 1) if self.wall_seconds > 0 else None,
                "peak_memory_bytes": self.peak_memory_bytes, "peak_memory_source": self.peak_memory_source,
                "devices": self.devices}

    @classmethod
    def from_dict(cls, data: dict) -> "Throughput":
        return cls(inputs=data["inputs"], own_tokens=data["own_tokens"], padded_tokens=data["padded_tokens"],
                   batches=data["batches"], model_seconds=data["model_s"], wall_seconds=data["wall_s"],
                   backoffs=list(data["backoffs"]), peak_memory_bytes=data["peak_memory_bytes"],
                   peak_memory_source=data["peak_memory_source"], devices=list(data["devices"]))


def reset_peak_memory(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: str) -> tuple[int, str]:
    """(bytes, what was read): torch's peak allocation on a CUDA device; on CPU the process's peak RSS."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "process peak RSS"


def free_memory(device: str) -> int:
    """Bytes the device has free now (after the weights): CUDA's own count plus what torch's allocator
    holds unused (an earlier call's activations, cached for the next), or the host's available memory;
    the last resort 8 GiB where the host does not say."""
    if device.startswith("cuda"):
        import torch

        held_unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(torch.cuda.mem_get_info(device)[0]) + int(held_unused)
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def default_batch_tokens(bytes_per_token: float | None, device: str, window: int | None) -> int | None:
    """The token budget of a call from the model's memory plan (``bytes_per_token`` of activations)
    and what the device has free; at least one input of the window. None where the model has no plan
    (API models, BM25): their calls are bounded by ``--batch-size`` alone."""
    if not bytes_per_token:
        return None
    share = FREE_MEMORY_SHARE["cuda" if device.startswith("cuda") else "cpu"]
    budget = int(free_memory(device) * share / (bytes_per_token * ACTIVATION_SLACK))
    return max(budget, window or 1)


@dataclass
class Prepared:
    """One input as the model's call takes it, made off the model's thread: ``payload`` (the adapter's),
    its length in the model's own tokens after truncation, whether it lost its middle."""

    index: int  # its place in the pool's side
    item_id: str
    key: str  # its embedding cache key
    length: int
    truncated: bool
    payload: object


class CallRunner:
    """Runs packed calls through ``forward(list[Prepared]) -> vectors``: an out-of-memory call is split
    in two at half its padded tokens and retried (the lowered budget stays for later calls), down to one
    input; one input that cannot fit skips the pool, naming it and its length."""

    def __init__(self, forward: Callable, budget: int | None, max_inputs: int, throughput: Throughput,
                 simulate_memory_tokens: int | None = None, device: str = "cpu"):
        self.forward, self.budget, self.max_inputs = forward, budget, max_inputs
        self.throughput, self.limit, self.device = throughput, simulate_memory_tokens, device

    def calls(self, prepared: Iterable[Prepared]) -> Iterator[tuple[list[Prepared], object]]:
        """(the call's inputs, its vectors) for every call, in order."""
        for batch in pack(prepared, lambda p: p.length, lambda: self.budget, self.max_inputs):
            yield from self._run(batch)

    def _run(self, batch: list[Prepared]) -> Iterator[tuple[list[Prepared], object]]:
        lengths = [p.length for p in batch]
        start = time.perf_counter()
        out_of_memory = None
        try:
            if self.limit is not None and padded_tokens(lengths) > self.limit:
                raise SimulatedOutOfMemory(f"{padded_tokens(lengths)} padded tokens > {self.limit}")
            vectors = self.forward(batch)
        except Exception as exc:  # noqa: BLE001  (out of memory backs off; any other failure is one line)
            if not is_out_of_memory(exc):
                raise model_failure(exc) from None
            out_of_memory = type(exc).__name__
        if out_of_memory is not None:
            # out of the except block: its traceback held the failed call's frames, and with them its
            # activations on the device, which the smaller calls need
            yield from self._back_off(batch, out_of_memory)
            return
        self.throughput.add_call(lengths, time.perf_counter() - start)
        yield batch, vectors

    def _back_off(self, batch: list[Prepared], error: str) -> Iterator[tuple[list[Prepared], object]]:
        self._release_cached_memory()
        padded = padded_tokens([p.length for p in batch])
        if len(batch) == 1:
            raise ModelError(f"input {batch[0].item_id!r} ({batch[0].length} tokens) does not fit in "
                             f"{self.device}'s memory even alone ({error})")
        self.budget = max(padded // 2, 1)
        self.throughput.backoffs.append({"inputs": len(batch), "padded_tokens": padded, "budget_after": self.budget,
                                         "error": error})
        for part in pack(batch, lambda p: p.length, self.budget, max(len(batch) // 2, 1)):
            yield from self._run(part)

    def _release_cached_memory(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
