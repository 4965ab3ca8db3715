"""mmlongembed.core.parallel: work in forked processes gives what the same work gives in this one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from mmlongembed.core import parallel
from tests.support.python_env import python_env

needs_fork = pytest.mark.skipif(not parallel.can_fork(), reason="no fork on this platform")


class Bar:
    """A stand-in progress bar: what was shown."""

    def __init__(self):
        self.n, self.closed = 0, False

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        self.closed = True


@needs_fork
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_fork_map_gives_the_results_in_order_and_sees_what_the_parent_held(workers):
    held = {i: f"item {i}" for i in range(7)}  # a closure over state that is never pickled

    def work(i, advance):
        advance(2)
        return held[i].upper(), os.getpid()

    bar = Bar()
    out = parallel.fork_map(work, 7, workers, bar=lambda: bar)
    assert [text for text, _ in out] == [f"ITEM {i}" for i in range(7)]
    pids = {pid for _, pid in out}
    assert pids == {os.getpid()} if workers == 1 else (os.getpid() not in pids and len(pids) <= workers)
    assert bar.n == 14 and bar.closed  # the workers' progress reached this process's bar


@needs_fork
def test_fork_map_raises_what_a_worker_raised():
    def work(i, advance):
        if i == 2:
            raise ValueError("bad item 2")
        return i

    with pytest.raises(ValueError, match="bad item 2") as raised:
        parallel.fork_map(work, 4, 2)
    # the worker's own traceback comes with it, naming where it was raised
    assert isinstance(raised.value.__cause__, parallel.RemoteTraceback)
    assert 'raise ValueError("bad item 2")' in str(raised.value.__cause__)


def _raise_in_worker(message: str):
    raise KeyError(message)


@needs_fork
def test_a_workers_task_raises_its_exception_here_with_the_workers_traceback():
    with parallel.Workers(2) as workers:
        pending = workers.submit(_raise_in_worker, "no such pool")
        with pytest.raises(KeyError, match="no such pool") as raised:
            pending.get()
    assert "_raise_in_worker" in str(raised.value.__cause__)


def test_without_a_second_core_the_work_stays_here(monkeypatch):
    monkeypatch.setattr(parallel, "available_cores", lambda: 1)
    assert parallel.fork_map(lambda i, advance: (i, os.getpid()), 3) == [(i, os.getpid()) for i in range(3)]
    beside = parallel.Beside(lambda advance: os.getpid())
    assert beside.result() == os.getpid()


@needs_fork
def test_beside_works_in_another_process_while_this_one_goes_on(monkeypatch):
    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    started = {"value": 41}

    def job(advance):
        advance(3)
        return started["value"] + 1, os.getpid()

    beside = parallel.Beside(job)
    started["value"] = 0  # what this process does after the start is not seen by the job
    value, pid = beside.result()
    assert value == 42 and pid != os.getpid()

    def fails(advance):
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        parallel.Beside(fails).result()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_dies_with_a_killed_build(tmp_path):
    """SIGKILL leaves a build no time to stop its workers; they must not run on (holding its
    output pipes open, or working for nothing)."""
    marker = tmp_path / "worker.pid"
    script = tmp_path / "build.py"
    script.write_text(textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from mmlongembed.core import parallel

        parallel.available_cores = lambda: 2

        def job(advance):
            Path({str(marker)!r}).write_text(str(os.getpid()))
            while True:
                time.sleep(3600)

        parallel.Beside(job).result()
    """))
    build = subprocess.Popen([sys.executable, str(script)], env=python_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60  # a safety limit, not a timing assumption
    while not marker.exists() or not marker.read_text():
        assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()
        time.sleep(0.05)
    worker = int(marker.read_text())
    build.kill()
    build.communicate(timeout=60)  # returns once no process holds its pipes: the worker is gone too
    while _alive(worker):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1][:1] != "Z"  # a zombie is dead, only not yet reaped
    except FileNotFoundError:
        return False
