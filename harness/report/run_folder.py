"""Where an `mmle score` run is written: a folder of its own, never over another run unasked.

By default each run gets a new folder, ``results/<dataset>/<run id>`` (the run id: its UTC start
time and its models), so a second run with another model keeps the first. An ``--output`` folder
that already holds files is refused unless ``--overwrite``; an overwrite replaces the earlier run
whole (its heatmaps included), and only a folder that is a run (it has a results.json). Every run
is written into a temporary sibling and renamed into place when complete, as builds are
(``mmlongembed.output.outdir``), so an interrupted run leaves no half-written folder behind.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mmlongembed.core.errors import UserError
from mmlongembed.output.outdir import make_temporary_dir, remove_stale_temporaries
from mmlongembed.output.writer import commit_output_dir

RESULTS_ROOT = Path("results")
RESULTS_FILE = "results.json"
T = TypeVar("T")


def run_id(started: dt.datetime, models: list[str]) -> str:
    """``20261203-101500-bm25+minilm``: when the run started (UTC) and what it scored, as a folder name."""
    from harness.report.tables import file_slug

    names = "+".join(file_slug(m.rsplit("/", 1)[-1]) for m in models)[:80] or "run"
    return f"{started.astimezone(dt.timezone.utc):%Y%m%d-%H%M%S}-{names}"


def _numbered(base: Path):
    """``base``, then ``base-2``, ``base-3``...: the names a run started in the same second takes."""
    yield base
    k = 2
    while True:
        yield base.with_name(f"{base.name}-{k}")
        k += 1


def new_run_folder(dataset_name: str, started: dt.datetime, models: list[str], root: Path = RESULTS_ROOT) -> Path:
    """A folder under ``root/dataset_name`` that no run holds yet (``-2``, ``-3``... after a
    run started in the same second). Only a proposal: ``write_run(..., replace=False)`` takes the
    next free name if another run claimed this one while this one was scoring."""
    return next(c for c in _numbered(Path(root) / dataset_name / run_id(started, models)) if not c.exists())


def check_run_output(folder: Path, overwrite: bool) -> None:
    """An ``--output`` a run may be written to: new or empty; with ``overwrite``, an earlier run.
    One line otherwise, before anything is scored."""
    folder = Path(folder)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise UserError(f"--output {folder} is a file, not a folder")
    if not any(folder.iterdir()):
        return
    if not (folder / RESULTS_FILE).is_file():
        raise UserError(f"--output {folder} holds files but no {RESULTS_FILE}: not an `mmle score` run; refusing to "
                        "write there, choose another --output")
    if not overwrite:
        raise UserError(f"--output {folder} already holds a run; pass --overwrite to replace it, or leave --output "
                        f"out for a new folder under {RESULTS_ROOT}/")


def _claim(scratch: Path, folder: Path) -> Path:
    """Rename ``scratch`` to the first of ``folder``'s numbered names that holds nothing. The rename
    is the claim: onto a folder with files it fails, and the next name is tried, so two runs that
    started in the same second never write into one folder."""
    for candidate in _numbered(folder):
        if candidate.exists() and any(candidate.iterdir()):
            continue
        try:
            scratch.rename(candidate)
            return candidate
        except OSError:
            if not candidate.exists():
                raise
    raise AssertionError("unreachable")


def write_run(folder: Path, write: Callable[[Path], T], replace: bool = True) -> tuple[T, Path]:
    """``write(temporary folder)``, then the folder renamed into place whole; nothing is left
    behind if ``write`` fails. ``replace``: an earlier run in ``folder`` is replaced, none of its
    files left (``--output``, checked by ``check_run_output``); else ``folder`` is a default name
    and, taken meanwhile, the next free one is used. Returns what ``write`` gave, and the folder."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(folder)
    scratch = make_temporary_dir(folder)
    try:
        result = write(scratch)
        if replace:
            commit_output_dir(scratch, folder)
        else:
            folder = _claim(scratch, folder)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return result, folder
