"""Work spread over the cores a build may use, with results that do not depend on the split.

``fork_map(function, n)`` is ``[function(i, advance) for i in range(n)]`` computed in forked worker
processes: a worker starts as a copy of the parent, so ``function`` may close over anything the
build holds (indexes, caches, documents) and only the index and the result cross between
processes. Results come back in index order, and ``function`` must be a pure function of the
index and of what the parent held when the workers started, so a build is byte-identical however
many cores it had. Where fork is not available, or one core is all there is, it runs in this
process. ``Beside(function)`` works one job out in a forked process while this one goes on;
``Workers(n)`` runs tasks given as a module-level function and small pickled arguments.
Workers ignore Ctrl-C (the parent stops them: SIGKILL, then reaped, in any phase; no lock or queue is
shared with them, so none that dies can hang the parent) and die with the parent, even a killed one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import traceback
from typing import Callable, TypeVar

T = TypeVar("T")
_WORK: tuple | None = None  # (function, shared counter) the forked workers run (set before they start)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def available_memory() -> int | None:
    """Bytes of memory this process may still take: Linux's MemAvailable (None where unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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


def return_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).
    A forked worker starts with the parent's resident pages: what a build freed before (a row
    group written, a pool checked) would otherwise count in every worker it forks."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


def _counting(done) -> Callable[[int], None]:
    """``advance(n)``: adds to a counter in shared memory (a worker's progress)."""

    def advance(n: int = 1) -> None:
        with done.get_lock():
            done.value += n

    return advance


def _count(done) -> int:
    """The shared counter read without its lock: only workers take that lock, and one that was
    killed while holding it (a SIGTERM sent to the whole process group) must not hang this
    process. An aligned 64-bit read is whole, and a progress count needs no more."""
    return done.get_obj().value


def _stop(process) -> None:
    """End a worker now and reap it: its work is pure (nothing of it needs cleaning up), and
    SIGKILL cannot be caught, ignored or stuck behind a lock."""
    if process.pid is None:  # interrupted before it started
        return
    if process.exitcode is None:
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.join()


def _serve(connection, parent: int) -> None:
    """A worker of a ``_Crew``: runs the tasks its own pipe brings until it brings None. A task
    is an index (``fork_map``: the function it was forked with) or (function, args)."""
    global _PROGRESS
    _die_with(parent)
    function, done = _WORK
    advance = _counting(done)
    _PROGRESS = done  # what ``advance`` (the module's, for Workers' tasks) adds to
    while True:
        task = connection.recv()
        if task is None:
            return
        key, call = task
        try:
            value = function(call, advance) if isinstance(call, int) else call[0](*call[1])
            connection.send((key, True, value))
        except BaseException as error:  # noqa: BLE001  (sent to the parent, which raises it)
            where = traceback.format_exc()
            try:
                connection.send((key, False, _WithTraceback(error, where)))
            except Exception:  # noqa: BLE001  (an exception that does not pickle)
                connection.send((key, False, _WithTraceback(RuntimeError(f"{type(error).__name__}: {error}"), where)))


class RemoteTraceback(Exception):
    """Where a worker's exception was raised: the worker's traceback, as the cause of the
    exception the parent raises again (a traceback does not pickle; as concurrent.futures does)."""

    def __str__(self) -> str:
        return self.args[0]


def _with_cause(error: BaseException, where: str) -> BaseException:
    error.__cause__ = RemoteTraceback(where)
    return error


class _WithTraceback:
    """An exception on its way to the parent, rebuilt there with its worker's traceback."""

    def __init__(self, error: BaseException, where: str):
        self.error, self.where = error, where

    def __reduce__(self):
        return _with_cause, (self.error, self.where)


class WorkerDied(RuntimeError):
    """A worker process ended without its result (killed by the kernel, a signal...)."""


class _Crew:
    """Forked workers, each with its own pipe to this process: no lock, queue or thread of
    multiprocessing.Pool is shared with them, so a worker that dies anywhere (a SIGTERM to the
    process group, the kernel's out-of-memory killer) can never leave this process waiting on a
    lock it held; ``close`` ends them all at once (SIGKILL) and reaps them, in any phase."""

    def __init__(self, n: int, function: Callable | None = None):
        global _WORK
        context = multiprocessing.get_context("fork")
        self.done = context.Value("q", 0)
        self._members: list[tuple[object, object]] = []  # (process, this end of its pipe)
        self._idle: list[int] = []
        self._busy: dict[int, object] = {}  # member -> key of its task
        self._queue: list[tuple[object, object]] = []
        _WORK = (function, self.done)
        return_free_memory()
        try:
            for member in range(n):
                here, there = context.Pipe()
                process = context.Process(target=_serve, args=(there, os.getpid()), daemon=True)
                self._members.append((process, here))  # before start: an interrupt stops it too
                process.start()
                there.close()
                self._idle.append(member)
        except BaseException:
            self.close()
            raise
        finally:
            _WORK = None

    def submit(self, key, call) -> None:
        self._queue.append((key, call))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._idle and self._queue:
            member = self._idle.pop(0)
            key, call = self._queue.pop(0)
            self._busy[member] = key
            self._members[member][1].send((key, call))

    @property
    def pending(self) -> int:
        return len(self._busy) + len(self._queue)

    def collect(self, timeout: float) -> list[tuple[object, bool, object]]:
        """(key, ok, value) of the tasks that finished within ``timeout`` seconds; raises
        ``WorkerDied`` for a worker that ended with a task unfinished."""
        from multiprocessing.connection import wait

        busy = {self._members[m][1]: m for m in self._busy}
        sentinels = {self._members[m][0].sentinel: m for m in self._busy}
        finished = []
        for ready in wait([*busy, *sentinels], timeout):
            member = busy.get(ready)
            if member is None:
                member = sentinels[ready]
                connection = self._members[member][1]
                if member not in self._busy or connection.poll():
                    continue  # its result came with it: read below, or already read
                process = self._members[member][0]
                process.join()
                raise WorkerDied(f"a worker process died (exit code {process.exitcode})")
            try:
                key, ok, value = ready.recv()
            except EOFError:  # died mid-result: its sentinel says how
                process = self._members[member][0]
                process.join()
                raise WorkerDied(f"a worker process died (exit code {process.exitcode})") from None
            del self._busy[member]
            self._idle.append(member)
            finished.append((key, ok, value))
        self._dispatch()
        return finished

    def close(self) -> None:
        """Every worker: told to finish when idle, stopped at once when busy (or when this is
        an interrupt's way out); then reaped, so that none is left a zombie."""
        for member, (process, connection) in enumerate(self._members):
            if member in self._busy or self._queue or not process.is_alive():
                continue
            try:
                connection.send(None)
            except OSError:
                pass
        for member, (process, connection) in enumerate(self._members):
            if member in self._busy or self._queue:
                _stop(process)
            elif process.pid is not None:
                process.join(5)  # an idle worker reads its None and returns at once
                _stop(process)
            connection.close()
        self._members, self._idle, self._busy, self._queue = [], [], {}, []


def fork_map(function: Callable[[int, Callable[[int], None]], T], n: int, workers: int | None = None,
             bar: Callable[[], object] | None = None) -> list[T]:
    """``[function(i, advance) for i in range(n)]``, on ``workers`` forked processes (default:
    the available cores; at most ``n``). ``advance(k)`` in a worker counts finished items in
    shared memory, and ``bar()`` (a progress bar) follows the count. An exception in a worker is
    raised here; an interrupt (Ctrl-C, SIGTERM) stops every worker at once."""
    workers = min(workers or available_cores(), n)
    progress = bar() if bar is not None else None
    try:
        if workers <= 1 or not can_fork():
            return [function(i, progress.update if progress is not None else _ignore) for i in range(n)]
        results: list = [None] * n
        crew = _Crew(workers, function)
        try:
            for i in range(n):
                crew.submit(i, i)
            while crew.pending:
                for index, ok, value in crew.collect(0.25):
                    if not ok:
                        raise value
                    results[index] = value
                if progress is not None:
                    progress.update(_count(crew.done) - progress.n)
        finally:
            crew.close()
        return results
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
        return_free_memory()
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
                    progress.update(_count(self._done) - progress.n)
            status, value = self._connection.recv()
            self._process.join()
        except BaseException:
            _stop(self._process)
            raise
        finally:
            if progress is not None:
                progress.update(_count(self._done) - progress.n)
                progress.close()
            self._connection.close()
        if status == "error":
            raise value
        return value


_PROGRESS = None  # in a worker of ``Workers``: its shared count of finished items


def advance(n: int = 1) -> None:
    """In a task of ``Workers``: ``n`` more items done (what ``Workers.done`` counts)."""
    if _PROGRESS is not None:
        with _PROGRESS.get_lock():
            _PROGRESS.value += n


class _Pending:
    """A submitted task's result: ``get(timeout)`` returns it (or raises what it raised), or
    raises multiprocessing.TimeoutError while it is not there yet."""

    def __init__(self, workers: "Workers", key: int):
        self._workers, self._key = workers, key

    def get(self, timeout: float | None = None):
        return self._workers._result(self._key, timeout)


class Workers:
    """Forked worker processes for tasks given as a module-level function and small pickled
    arguments (``submit``); a task may call ``advance(n)``, which ``done`` sums over all tasks.
    Tasks go to the workers as they become free while this process waits for a result (``get``)
    or reads ``done``. Used as a context manager: the workers are stopped on the way out, at
    once (see ``_Crew``). Needs fork (``can_fork``)."""

    def __init__(self, n: int):
        self._crew = _Crew(n)
        self._results: dict[int, tuple[bool, object]] = {}
        self._next = 0

    @property
    def done(self) -> int:
        self._collect(0)
        return _count(self._crew.done)

    def submit(self, function: Callable, *args) -> _Pending:
        key, self._next = self._next, self._next + 1
        self._crew.submit(key, (function, args))
        return _Pending(self, key)

    def _collect(self, timeout: float) -> None:
        for key, ok, value in self._crew.collect(timeout):
            self._results[key] = (ok, value)

    def _result(self, key: int, timeout: float | None):
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while key not in self._results:
            left = 0.25 if deadline is None else max(0.0, deadline - time.monotonic())
            self._collect(min(left, 0.25))
            if key not in self._results and deadline is not None and time.monotonic() >= deadline:
                raise multiprocessing.TimeoutError()
        ok, value = self._results.pop(key)
        if not ok:
            raise value
        return value

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self._crew.close()
