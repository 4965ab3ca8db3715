"""The output folder of a build, as a shared machine or a cluster job meets it.

- One build at a time per output folder: ``BuildLock`` holds an advisory lock on
  ``<output>/.<name>.lock`` (``fcntl.flock``, which the kernel releases when its process dies,
  SIGKILL included, so a lock is never stale); a second build refuses with one line naming the
  first one's pid and host.
- Temporary folders name their owner (``.<name>.tmp-<host tag>-<pid>-<random>``), so the next
  build into the same folder removes what a killed build left (``remove_stale_temporaries``:
  same host, process gone), and never a live build's.
- What a build writes gets the user's umask (``tempfile.mkdtemp`` would make the folder 0700,
  unreadable to colleagues on a shared build).
- SIGTERM (``timeout``, ``docker stop``, Slurm) is handled like Ctrl-C (``sigterm_as_interrupt``):
  the build's ``except`` path removes its temporary output.
- An ``--output`` that is a file, an unwritable folder or a full disk is a one-line error
  (``check_output_root``, ``write_error``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from mmlongembed.core.errors import UserError

HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
TEMPORARY_KINDS = ("tmp", "old")  # a build being written; a replaced build being deleted


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every Ctrl-C cleanup path runs for it too."""


_SIGTERM_RECEIVED = threading.Event()


def sigterm_received() -> bool:
    """Whether SIGTERM arrived inside ``sigterm_as_interrupt``. The ``Terminated`` it raises can
    be swallowed (raised inside a weakref or import-lock callback, where Python only prints
    "Exception ignored"), and then the first error seen is a consequence of the signal (a forked
    worker that the same signal ended leaves its pipe at EOF): the caller reads it as SIGTERM."""
    return _SIGTERM_RECEIVED.is_set()


@contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM raises ``Terminated`` (a KeyboardInterrupt); a second SIGTERM ends
    the process at once. A handler someone else installed (or SIG_IGN) is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _SIGTERM_RECEIVED.set()
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- owned temporary folders ---------------------------------------------------------------------

def temporary_path(final_dir: Path, kind: str) -> Path:
    return final_dir.with_name(f".{final_dir.name}.{kind}-{HOST_TAG}-{os.getpid()}-{secrets.token_hex(4)}")


def make_temporary_dir(final_dir: Path) -> Path:
    """A fresh sibling of ``final_dir`` that names this process; created with mode 0777 so the
    umask decides who may read it (and the build it becomes)."""
    for _ in range(100):
        path = temporary_path(final_dir, "tmp")
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise UserError(f"cannot create a temporary folder next to {final_dir}")


def temporary_owner(path: Path, final_name: str) -> tuple[str, int] | None:
    """(host tag, pid) of a temporary folder of ``final_name``; None for other names (or a
    temporary named by an older toolkit, whose owner is unknown)."""
    for kind in TEMPORARY_KINDS:
        prefix = f".{final_name}.{kind}-"
        if path.name.startswith(prefix):
            parts = path.name[len(prefix):].split("-")
            if len(parts) >= 2 and len(parts[0]) == 8 and parts[1].isdigit():
                return parts[0], int(parts[1])
    return None


def process_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill would terminate it there: assume it runs, remove nothing
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's live process
        return True
    return True


def remove_stale_temporaries(final_dir: Path, log: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the temporary folders of ``final_dir`` whose build is gone (same host, pid no
    longer running: a SIGKILL, an out-of-memory kill, a power cut). Call it holding the
    folder's ``BuildLock``. Returns what was removed."""
    log = log or (lambda message: print(message, file=sys.stderr))
    final_dir = Path(final_dir)
    if not final_dir.parent.is_dir():
        return []
    removed = []
    for path in sorted(final_dir.parent.iterdir()):
        if not any(path.name.startswith(f".{final_dir.name}.{kind}-") for kind in TEMPORARY_KINDS):
            continue
        owner = temporary_owner(path, final_dir.name)
        if owner is None:
            log(f"mmle: note: {path} looks like a temporary build folder of unknown owner; remove it if no "
                "build is running")
            continue
        host, pid = owner
        if host != HOST_TAG:
            log(f"mmle: note: {path} was left by a build on another host or container (its process cannot be "
                "checked from here); remove it if no build is running")
            continue
        if pid == os.getpid() or process_alive(pid):
            continue
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        log(f"mmle: removed {path} ({size / 1e6:.1f} MB), left by build process {pid}, which is gone")
        removed.append(path)
    return removed


# -- one build per output folder -------------------------------------------------------------------

class BuildLock:
    """An exclusive, non-blocking lock on ``<parent>/.<name>.lock`` for the whole build."""

    def __init__(self, final_dir: Path):
        self.final_dir = Path(final_dir)
        self.path = self.final_dir.with_name(f".{self.final_dir.name}.lock")
        self._fd: int | None = None

    def __enter__(self) -> "BuildLock":
        try:
            import fcntl
        except ImportError:  # no advisory locks on this platform: nothing to hold
            return self
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as error:
                raise UserError(f"cannot create the lock file {self.path} ({error.strerror or error})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise UserError(f"another build is writing {self.final_dir} ({holder}); wait for it to finish or "
                                f"stop it, or build into another --output") from None
            except OSError as error:  # a filesystem without locks (some network mounts)
                os.close(fd)
                print(f"mmle: warning: cannot lock {self.path} ({error.strerror}); make sure no other build "
                      f"writes {self.final_dir}", file=sys.stderr)
                return self
            # A finishing build unlinks the file it locked: hold the file at the path, or retry.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode())
        self._fd = fd
        return self

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            facts = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            return f"pid {facts['pid']} on {facts['host']}, started {facts['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "its process is still starting"

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            try:
                self.path.unlink(missing_ok=True)
            finally:
                os.close(self._fd)  # closing releases the lock
                self._fd = None


# -- paths and write errors ------------------------------------------------------------------------

def check_output_root(output_root: Path) -> None:
    """``--output`` is (or can be made) a folder: one line otherwise."""
    output_root = Path(output_root)
    if output_root.exists() and not output_root.is_dir():
        raise UserError(f"--output {output_root} is a file, not a folder")
    try:
        output_root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--output {output_root}: cannot create the folder ({error.strerror or error})") from None
    if not os.access(output_root, os.W_OK | os.X_OK):
        raise UserError(f"--output {output_root}: no permission to write there")


def check_replaceable(final_dir: Path) -> None:
    """``--overwrite`` replaces a build, never a file or a folder that is not one."""
    if final_dir.exists() and not (final_dir.is_dir() and (final_dir / "manifest.json").is_file()):
        what = "a folder that is not a build (no manifest.json)" if final_dir.is_dir() else "a file"
        raise UserError(f"{final_dir} is {what}; refusing to replace it, move it away or choose another --output")


DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)


def write_error(error: OSError, final_dir: Path, tmp_dir: Path | None = None) -> UserError | None:
    """One line for an OSError met while writing a build: a full disk or quota anywhere, or any
    failure on a path inside the output folder (permissions, a read-only mount...). None for an
    OSError that is not about writing the build (a bug keeps its traceback)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    full = error.errno in DISK_FULL or "No space left on device" in text or "Disk quota exceeded" in text
    where = Path(error.filename) if isinstance(error.filename, (str, os.PathLike)) else None
    inside = where is not None and Path(final_dir).parent.resolve() in (where.resolve(), *where.resolve().parents)
    if full:
        return UserError(f"the disk is full while writing {where or tmp_dir or final_dir} ({error.strerror or text}); "
                         f"nothing was written to {final_dir}: free some space or build into another --output")
    if inside:
        return UserError(f"cannot write {where} ({error.strerror or text}); nothing was written to {final_dir}")
    return None
