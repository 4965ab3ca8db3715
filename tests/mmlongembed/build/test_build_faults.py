"""Faults of a cluster job, each reproduced deterministically.

A build that must be caught mid-write runs in a subprocess whose `build_manifest` step (after
the data files are written and validated, before the move into place) creates a marker file and
then waits forever: the test waits for the marker (a bounded wait, never a sleep race), then
sends its signal or starts the competing build.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from builders._govreport_fixtures import write_govreport_jsonl
from builders.govreport import GovReportConfig
from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder
from mmlongembed.cli import main
from mmlongembed.core.errors import UserError
from mmlongembed.output.outdir import HOST_TAG
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.python_env import python_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and locks")

ARGS = ("--lengths", "2048", "--max-queries-per-pool", "3", "--no-progress")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sources")
    write_govreport_jsonl(root / "reports.jsonl", n_reports=12, paragraphs=(5, 30))
    return root


def config(sources: Path, **overrides) -> GovReportConfig:
    return GovReportConfig(sources=str(sources), lengths=(2048,), max_queries_per_pool=3, **overrides)


def temporaries(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".govreport."))


class HeldBuild:
    """`mmle build govreport` in a subprocess, held after writing its temporary output."""

    def __init__(self, sources: Path, out: Path, workdir: Path):
        self.marker = workdir / "held"
        script = workdir / "held_build.py"
        script.write_text(textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            import mmlongembed.build.run

            def hold(*args, **kwargs):
                Path({str(self.marker)!r}).write_text("held")
                while True:
                    time.sleep(3600)

            mmlongembed.build.run.build_manifest = hold
            from mmlongembed.cli import main
            sys.exit(main(["build", "govreport", "--sources", {str(sources)!r}, "--output", {str(out)!r},
                           *{ARGS!r}]))
        """))
        self.process = subprocess.Popen([sys.executable, str(script)], cwd=workdir, env=python_env(),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_until_held(self, limit_s: float = 240) -> None:
        deadline = time.monotonic() + limit_s  # a safety limit, not a timing assumption
        while not self.marker.exists():
            if self.process.poll() is not None:
                pytest.fail(f"the build ended before it was held: {self.process.stderr.read()[-2000:]}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail("the build never reached its hold point")
            time.sleep(0.05)

    def stop(self, sig: int) -> tuple[int, str]:
        self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=120)
        return self.process.returncode, err


@pytest.fixture()
def held(sources, tmp_path):
    builds = []

    def start(out: Path) -> HeldBuild:
        build = HeldBuild(sources, out, tmp_path)
        builds.append(build)
        build.wait_until_held()
        return build

    yield start
    for build in builds:
        if build.process.poll() is None:
            build.process.kill()
            build.process.wait()


def test_sigterm_mid_build_removes_the_temporary_output(held, tmp_path):
    out = tmp_path / "out"
    build = held(out)
    assert [name.split("-")[0] for name in temporaries(out)] == [".govreport.lock", ".govreport.tmp"]
    code, err = build.stop(signal.SIGTERM)
    assert code == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1] == "mmle: terminated (SIGTERM)" and "Traceback" not in err
    assert not out.exists()  # no temporary, no lock, no half build, not even the folder it made


def test_after_sigkill_the_next_build_removes_the_stale_temporary(held, sources, tmp_path, capsys):
    out = tmp_path / "out"
    held(out).stop(signal.SIGKILL)
    stale = [name for name in temporaries(out) if ".tmp-" in name]
    assert len(stale) == 1  # what a killed build leaves
    live = out / f".govreport.tmp-{HOST_TAG}-{os.getppid()}-live"  # a running build's (pytest's parent)
    elsewhere = out / ".govreport.tmp-0badc0de-1-remote"  # another host's: its process cannot be checked
    live.mkdir()
    elsewhere.mkdir()
    final = run_build(get_builder("govreport"), config(sources), out, progress=False)  # the lock died with it
    assert temporaries(out) == sorted([live.name, elsewhere.name])
    err = capsys.readouterr().err
    assert f"removed {out / stale[0]}" in err and f"{elsewhere} was left by a build on another host" in err
    problems, checked = validate_dir(final)
    assert not problems, format_report(problems, checked)


def test_a_second_build_into_the_same_folder_refuses(held, sources, tmp_path):
    out = tmp_path / "out"
    first = held(out)
    before = temporaries(out)
    with pytest.raises(UserError, match=rf"another build is writing {out / 'govreport'} \(pid {first.process.pid} "):
        run_build(get_builder("govreport"), config(sources), out, overwrite=True, progress=False)
    assert temporaries(out) == before  # the first build's output is untouched
    first.stop(signal.SIGTERM)
    run_build(get_builder("govreport"), config(sources), out, progress=False)
    assert (out / "govreport" / "manifest.json").is_file() and temporaries(out) == []


def _one_line(capsys, argv) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return code, err


def test_output_pointing_at_a_file_is_one_line(sources, tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    for output in (target, target / "below"):
        code, err = _one_line(capsys, ["build", "govreport", "--sources", str(sources), "--output", str(output),
                                       *ARGS])
        assert code == 2 and str(target) in err
    assert target.read_text() == "not a folder"


def test_a_failed_build_leaves_no_output_folder_it_made(tmp_path, capsys):
    code, err = _one_line(capsys, ["build", "govreport", "--sources", str(tmp_path / "missing"), "--output",
                                   str(tmp_path / "new"), *ARGS])
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "new").exists()


def test_overwrite_replaces_builds_only(sources, tmp_path, capsys):
    (tmp_path / "out" / "govreport").mkdir(parents=True)
    (tmp_path / "out" / "govreport" / "notes.txt").write_text("mine")
    code, err = _one_line(capsys, ["build", "govreport", "--sources", str(sources), "--output",
                                   str(tmp_path / "out"), "--overwrite", *ARGS])
    assert code == 2 and "not a build" in err
    assert (tmp_path / "out" / "govreport" / "notes.txt").read_text() == "mine"


def _enospc_from_python(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(args[2] if len(args) > 2 else "data"))


def _enospc_from_arrow(*args, **kwargs):
    # pyarrow reports a full disk as an OSError without errno, the reason in its message
    raise OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device")


@pytest.mark.parametrize("target, fault", [("mmlongembed.output.writer.write_parquet", _enospc_from_python),
                                           ("mmlongembed.build.run.write_json", _enospc_from_arrow)],
                         ids=["parquet", "manifest"])
def test_a_full_disk_is_one_line_and_leaves_nothing(sources, tmp_path, capsys, monkeypatch, target, fault):
    monkeypatch.setattr(target, fault)
    out = tmp_path / "out"
    code, err = _one_line(capsys, ["build", "govreport", "--sources", str(sources), "--output", str(out), *ARGS])
    assert code == 2 and "disk is full" in err and str(out / "govreport") in err
    assert not out.exists()  # nothing left: no temporary, no lock, not even the folder it made


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_the_build_gets_the_users_umask(sources, tmp_path, umask):
    previous = os.umask(umask)
    try:
        final = run_build(get_builder("govreport"), config(sources), tmp_path / "out", progress=False)
    finally:
        os.umask(previous)
    assert final.stat().st_mode & 0o777 == 0o777 & ~umask
    for path in (final / "manifest.json", next(final.rglob("*.parquet"))):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    assert (final / "data").stat().st_mode & 0o777 == 0o777 & ~umask


def test_govreport_records_sharing_an_id_are_a_counted_skip(tmp_path):
    src = tmp_path / "src"
    records = write_govreport_jsonl(src / "a.jsonl", n_reports=12, paragraphs=(5, 30))
    with open(src / "a.jsonl", "a", encoding="utf-8") as handle:  # same id, another report and summary
        handle.write(json.dumps({**records[3], "id": records[0]["id"],
                                 "report": records[3]["report"] + " A closing sentence."}) + "\n")
    out = run_build(get_builder("govreport"), GovReportConfig(sources=str(src), lengths=(2048, 4096)),
                    tmp_path / "o", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["report"]["skipped"]["duplicate_id"] == 1
    assert "a.jsonl:13" in manifest["report"]["skipped_examples"]["duplicate_id"][0]
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)


@pytest.mark.parametrize("lengths, expected", [
    (["0"], "--lengths 0: a length is a positive number of tokens"),
    (["-5", "2048"], "--lengths -5: a length is a positive number of tokens"),
    (["100", "2048"], "--lengths 100: govreport builds lengths of at least 512 tokens"),
])
def test_a_length_below_the_builders_shortest_is_one_line_before_the_sources_are_read(
        sources, tmp_path, capsys, monkeypatch, lengths, expected):
    from builders.govreport import GovReportBuilder
    from mmlongembed.cli import main

    def unread(*args, **kwargs):
        raise AssertionError("the sources were read")

    monkeypatch.setattr(GovReportBuilder, "load_sources", unread)
    code = main(["build", "govreport", "--sources", str(sources), "--output", str(tmp_path / "out"),
                 "--lengths", *lengths, "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "out" / "govreport").exists()
