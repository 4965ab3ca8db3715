"""Work spread over the cores a build may use, with results that do not depend on the split.

``fork_map(function, n)`` is ``[function(i, advance) for i in range(n)]`` computed in forked worker
processes: a worker starts as a copy of the parent, so ``function`` may close over anything the
build holds (indexes, caches, documents) and only the index and the result cross between
processes. Results come back in index order, and ``function`` must be a pure function of the
index and of what the parent held when the workers started, so a build is byte-identical however
many cores it had. Where fork is not available, or one core is all there is, it runs in this
process. ``Beside(function)`` works one job out in a forked process while this one goes on;
``Workers(n)`` runs tasks given as a module-level function and small pickled arguments.
Workers ignore Ctrl-C (the parent stops them) and die with the parent, even a killed one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from typing import Callable, TypeVar

T = TypeVar("T")
_WORK: tuple | None = None  # (function, shared counter) the forked workers run (set before they start)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether work may go to forked processes: on Linux (elsewhere forking a process that has
    started native threads, as Arrow and the tokenizer do, is not safe; the work stays here)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def _die_with(parent: int) -> None:
    """Start of a forked worker: Ctrl-C is the parent's to handle (it stops its workers), a
    termination ends the worker quietly, and the worker dies with the process that forked it,
    even when that one is killed (SIGKILL leaves it no time to stop its workers): Linux's
    parent-death signal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # not Linux: the worker ends with its work
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _counting(done) -> Callable[[int], None]:
    """``advance(n)``: adds to a counter in shared memory (a worker's progress)."""

    def advance(n: int = 1) -> None:
        with done.get_lock():
            done.value += n

    return advance


def _run(index: int):
    function, done = _WORK
    return function(index, _counting(done))


def fork_map(function: Callable[[int, Callable[[int], None]], T], n: int, workers: int | None = None,
             bar: Callable[[], object] | None = None) -> list[T]:
    """``[function(i, advance) for i in range(n)]``, on ``workers`` forked processes (default:
    the available cores; at most ``n``). ``advance(k)`` in a worker counts finished items in
    shared memory, and ``bar()`` (a progress bar) follows the count. An exception in a worker is
    raised here."""
    global _WORK
    workers = min(workers or available_cores(), n)
    progress = bar() if bar is not None else None
    try:
        if workers <= 1 or not can_fork():
            return [function(i, progress.update if progress is not None else _ignore) for i in range(n)]
        context = multiprocessing.get_context("fork")
        done = context.Value("q", 0)
        _WORK = (function, done)
        try:
            # the workers fork here, and are terminated on the way out (an interrupt included)
            with context.Pool(workers, initializer=_die_with, initargs=(os.getpid(),)) as pool:
                _WORK = None
                pending = pool.map_async(_run, range(n), chunksize=1)
                while not pending.ready():
                    pending.wait(0.25)
                    if progress is not None:
                        progress.update(done.value - progress.n)
                return pending.get()
        finally:
            _WORK = None
    finally:
        if progress is not None:
            progress.close()


def _ignore(n: int = 1) -> None:
    pass


_BESIDE: tuple | None = None  # (function, shared counter) of the Beside being started


def _run_beside(connection, parent: int) -> None:
    _die_with(parent)
    function, done = _BESIDE
    try:
        connection.send(("ok", function(_counting(done))))
    except BaseException as error:  # noqa: BLE001  (sent to the parent, which raises it)
        try:
            connection.send(("error", error))
        except Exception:  # noqa: BLE001  (an exception that does not pickle)
            connection.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))
    finally:
        connection.close()


class Beside:
    """``function(advance)`` worked out in a forked process while this one goes on with other
    work; ``result(bar)`` waits for it (and raises what it raised). ``advance(n)`` in the worker
    counts finished items in shared memory, and ``bar()`` (a progress bar, made when this process
    comes to wait) follows that count. Where fork is unavailable or one core is
    all there is, ``result`` runs ``function`` here. Like ``fork_map``: ``function`` must not
    depend on what this process does after it started. The worker dies with this process."""

    def __init__(self, function: Callable[[Callable[[int], None]], T]):
        global _BESIDE
        self._function, self._process = function, None
        if available_cores() < 2 or not can_fork():
            return
        context = multiprocessing.get_context("fork")
        self._done = context.Value("q", 0)
        self._connection, sending = context.Pipe(duplex=False)
        _BESIDE = (function, self._done)
        try:
            self._process = context.Process(target=_run_beside, args=(sending, os.getpid()), daemon=True)
            self._process.start()
        finally:
            _BESIDE = None
            sending.close()

    def result(self, bar: Callable[[], object] | None = None) -> T:
        if self._process is None:
            progress = bar() if bar is not None else None
            try:
                return self._function(progress.update if progress is not None else _ignore)
            finally:
                if progress is not None:
                    progress.close()
        progress = bar() if bar is not None else None
        try:
            while not self._connection.poll(0.25):
                if not self._process.is_alive() and not self._connection.poll():
                    raise RuntimeError(f"a worker process died (exit code {self._process.exitcode})")
                if progress is not None:
                    progress.update(self._done.value - progress.n)
            status, value = self._connection.recv()
            self._process.join()
        except BaseException:
            self._process.terminate()
            raise
        finally:
            if progress is not None:
                progress.update(self._done.value - progress.n)
                progress.close()
            self._connection.close()
        if status == "error":
            raise value
        return value


_PROGRESS = None  # in a worker of ``Workers``: its shared count of finished items


def _start_worker(parent: int, progress) -> None:
    global _PROGRESS
    _die_with(parent)
    _PROGRESS = progress


def advance(n: int = 1) -> None:
    """In a task of ``Workers``: ``n`` more items done (what ``Workers.done`` counts)."""
    if _PROGRESS is not None:
        with _PROGRESS.get_lock():
            _PROGRESS.value += n


class Workers:
    """Forked worker processes for tasks given as a module-level function and small pickled
    arguments (``submit``); a task may call ``advance(n)``, which ``done`` sums over all tasks.
    Used as a context manager: the workers are stopped on the way out. Needs fork (``can_fork``)."""

    def __init__(self, n: int):
        context = multiprocessing.get_context("fork")
        self._done = context.Value("q", 0)
        self._pool = context.Pool(n, initializer=_start_worker, initargs=(os.getpid(), self._done))

    @property
    def done(self) -> int:
        return self._done.value

    def submit(self, function: Callable, *args):
        """The task's pending result: ``get(timeout)`` returns it (or raises what it raised)."""
        return self._pool.apply_async(function, args)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self._pool.terminate()
        self._pool.join()
