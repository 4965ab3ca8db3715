"""What a careless user runs into (issue 19 §3): each mistake ends in one line, at once."""

from __future__ import annotations

import pytest

from harness.cli import main as score_main


@pytest.mark.parametrize("typo", ["out/govreprot", "./govreprot", "~/no-such-mmle-build"])
def test_a_mistyped_local_dataset_is_one_line_without_asking_the_hub(typo, tmp_path, monkeypatch, capsys):
    (tmp_path / "out" / "govreport").mkdir(parents=True)  # the folder the user meant
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: today's code would retry the Hub
    monkeypatch.setenv("HOME", str(tmp_path))
    import datasets

    def no_hub(*args, **kwargs):
        raise AssertionError("the Hub was asked for a local path")

    monkeypatch.setattr(datasets, "load_dataset", no_hub)
    code = score_main(["--dataset", typo, "--model", "bm25", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "no such directory" in err[0] and ("govreprot" in err[0] or "no-such" in err[0]), err


def test_a_hub_repo_name_is_still_read_from_the_hub(tmp_path, monkeypatch):
    from harness.scoring.data import meant_as_path

    (tmp_path / "out").mkdir()
    assert not meant_as_path("org/benchmark")  # no folder `org` here: a Hub repo
    assert meant_as_path("out/benchmark") and meant_as_path("./x") and meant_as_path("/x") and meant_as_path("~/x")


def test_quiet_scoring_prints_only_what_it_wrote(tmp_path):
    """--quiet: no results table, no progress bar of ours or of transformers ("Loading weights")."""
    import subprocess
    import sys

    from tests.support.fixtures_harness import standard_benchmark
    from tests.support.python_env import python_env

    bench = standard_benchmark(tmp_path / "fixture")
    env = python_env({**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    done = subprocess.run([sys.executable, "-m", "mmlongembed.cli", "score", "--dataset", str(bench), "--model",
                           "minilm", "--pools", "govreport-easy-256", "--quiet", "--bootstrap", "50", "--no-plots",
                           "--output", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"wrote {tmp_path / 'results' / 'results.json'}, "
                                        f"{tmp_path / 'results' / 'table.md'}, "
                                        f"{tmp_path / 'results' / 'predictions.parquet'}"], done.stdout
    assert "Loading weights" not in done.stderr and "it/s" not in done.stderr, done.stderr
    assert "| minilm |" in (tmp_path / "results" / "table.md").read_text()  # the table is still written


def test_list_aligns_its_columns_whatever_the_name_length(capsys):
    from mmlongembed.core.builder import registered
    from mmlongembed.cli import main

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.split()[:1] and line.split()[0] in registered()]
    assert {row.split()[0] for row in rows} >= {"evialign-evidence", "needle"}
    for row in rows:
        name, version, task = row.split()[:3]
        assert row.index(version) == lines[0].index("version"), row
        assert row.index(task, len(name) + len(version)) == lines[0].index("task"), row


def test_quiet_build_prints_only_its_last_line(tmp_path, capsys):
    from mmlongembed.core.builder import registered
    from mmlongembed.cli import main

    config = registered()["govreport"]().example_config(tmp_path / "sources")
    code = main(["build", "govreport", "--sources", config.sources, "--lengths", *map(str, config.lengths),
                 "--max-queries-per-pool", str(config.max_queries_per_pool), "--output", str(tmp_path / "out"),
                 "--quiet"])
    captured = capsys.readouterr()
    assert code == 0 and (tmp_path / "out" / "govreport" / "manifest.json").is_file()
    assert captured.out.splitlines() == [f"built govreport into {tmp_path / 'out' / 'govreport'}"]
    # generated sources: the one line quiet keeps on stderr says so (what push would refuse)
    assert captured.err.splitlines() and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("SYNTHETIC: ")


@pytest.fixture(scope="module")
def accented_build(tmp_path_factory):
    """A small GovReport build whose text has multi-byte characters, so that zeros written into
    a page can cut one in half (what makes pyarrow's strings fail to decode)."""
    import json

    from builders.govreport import GovReportConfig
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder
    from builders._govreport_fixtures import write_govreport_jsonl

    sources = tmp_path_factory.mktemp("sources")
    records = write_govreport_jsonl(sources / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
    with open(sources / "reports.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            record["report"] = record["report"].replace("e", "é").replace("o", "ø")
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    config = GovReportConfig(sources=str(sources), lengths=(2048, 4096), max_queries_per_pool=4)
    return run_build(get_builder("govreport"), config, tmp_path_factory.mktemp("out"), progress=False)


def test_a_data_file_damaged_in_place_is_named_by_validate_and_score_never_parsed(accented_build, capsys,
                                                                                   monkeypatch):
    """64 zero bytes written into a corpus file, at three kinds of place: where the rows no longer
    decode (the report's UnicodeDecodeError traceback), where pyarrow reports the damage, and
    where the file still parses, into wrong rows (only the hash can tell)."""
    import json
    from pathlib import Path

    import pyarrow.parquet as pq

    from mmlongembed.cli import main
    from mmlongembed.output.layout import configs_from_card

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    relative = configs_from_card(accented_build / "README.md")["govreport-easy-2k-corpus"].path
    path = accented_build / relative
    original = path.read_bytes()
    manifest = accented_build / "manifest.json"
    kept_manifest = manifest.read_text()

    def damaged_at(k: int) -> bytes:
        at = len(original) * k // 400
        return original[:at] + bytes(64) + original[at + 64:]

    places: dict[str, int] = {}
    try:
        for k in range(1, 380):  # the footer (the last 5%) aside: a broken footer is check_readable's case
            path.write_bytes(damaged_at(k))
            try:
                pq.read_table(path).to_pydict()
                kind = "parses"
            except UnicodeDecodeError:
                kind = "undecodable"
            except Exception:  # noqa: BLE001  (damage pyarrow itself reports)
                kind = "reported"
            places.setdefault(kind, k)
        assert "undecodable" in places, places  # the report's case is among them
        for kind, k in sorted(places.items()):
            path.write_bytes(damaged_at(k))
            assert main(["validate", str(accented_build), "--no-progress"]) == 1
            out, err = capsys.readouterr()
            assert "Traceback" not in out + err and f"{relative} differs from what the build wrote" in out, (kind, out,
                                                                                                           err)
            assert main(["score", "--dataset", str(accented_build), "--model", "bm25", "--quiet", "--no-plots",
                         "--output", "results"]) == 2
            out, err = capsys.readouterr()
            lines = err.strip().splitlines()
            assert len(lines) == 1 and relative in lines[0] and "damaged" in lines[0], (kind, out, err)
        # where no hash is recorded (a download, a hand-made folder) the rows that do not decode
        # skip their pool with one line, and the other pools are scored
        path.write_bytes(damaged_at(places["undecodable"]))
        manifest.write_text(json.dumps({**json.loads(kept_manifest), "files": {}}))
        assert main(["score", "--dataset", str(accented_build), "--model", "bm25", "--pools", "govreport-easy-2k",
                     "govreport-easy-4k", "--quiet", "--no-plots", "--output", "results"]) == 1
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err and err.strip().splitlines() == [
            "1 pool skipped: see 'Skipped' in results/table.md"], err
        assert "cannot read config 'govreport-easy-2k-corpus'" in Path("results/table.md").read_text()
    finally:
        path.write_bytes(original)
        manifest.write_text(kept_manifest)
    assert main(["validate", str(accented_build), "--no-progress"]) == 0  # restored: valid again
    capsys.readouterr()


_INTERRUPTED_SCRIPT = """
import os, sys, time
from pathlib import Path
from mmlongembed.core import parallel
from mmlongembed.output.outdir import Terminated, sigterm_as_interrupt

parallel.available_cores = lambda: 2
markers = Path(sys.argv[1])

def mark(label):
    (markers / f"{label}-{os.getpid()}").write_text("")

def hold(label):
    mark(label)
    while True:
        time.sleep(3600)

def mapped(i, advance):
    advance(1)
    return mark("quick") if i == 0 else hold("held")

try:
    with sigterm_as_interrupt():
        # one worker holds a task, the other has finished its own and waits for more: the idle
        # worker of multiprocessing.Pool holds the task queue's lock while it waits
        if sys.argv[2] == "fork_map":
            parallel.fork_map(mapped, 2, 2)
        elif sys.argv[2] == "beside":
            mark("quick")
            parallel.Beside(lambda advance: hold("held")).result()
        else:  # Workers (the validation's checks of each pool)
            with parallel.Workers(2) as workers:
                workers.submit(mark, "quick").get()
                workers.submit(hold, "held").get()
except Terminated:
    sys.exit(143)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="fork and process groups: Linux")
@pytest.mark.parametrize("phase", ["fork_map", "beside", "workers"])
@pytest.mark.parametrize("signal_name, to_group, code", [("SIGTERM", False, 143), ("SIGTERM", True, 143),
                                                         ("SIGINT", True, 130)])
def test_an_interrupt_ends_a_build_with_workers_mid_task(phase, signal_name, to_group, code, tmp_path):
    """SIGTERM to the build (``kill``, ``timeout``), to its whole process group (Slurm, ``docker
    stop``) or Ctrl-C, while forked workers are inside their tasks (known from the marker each
    writes, not from a sleep): the build ends, and no worker is left running or a zombie."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.support.python_env import python_env

    script = tmp_path / "build.py"
    script.write_text(_INTERRUPTED_SCRIPT)
    markers = tmp_path / "markers"
    markers.mkdir()
    build = subprocess.Popen([sys.executable, str(script), str(markers), phase], env=python_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60  # a safety limit against a hang, not a timing assumption
    while len(list(markers.iterdir())) < 2:
        assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()
        time.sleep(0.02)
    workers = [int(p.name.rsplit("-", 1)[1]) for p in markers.iterdir()]
    number = getattr(signal, signal_name)
    try:
        os.killpg(build.pid, number) if to_group else build.send_signal(number)
        _, err = build.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(build.pid, signal.SIGKILL)
        build.communicate()
        pytest.fail(f"the build hung after {signal_name}")
    assert build.returncode == code, err
    assert b"Traceback" not in err, err
    assert not [pid for pid in workers if _running(pid)], "a worker outlived the build"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


def test_a_source_file_cut_in_half_stops_the_build_unless_told_to_skip_it(tmp_path, capsys):
    """The ZeroSCROLLS JSON of GovReport cut in half: one line naming it (exit 2); with
    --skip-unreadable-files the build goes on and its last lines say what it lost."""
    import shutil

    from mmlongembed.cli import main
    from tests.support.realdata import shared_data_dir

    sources = tmp_path / "sources" / "govreport"
    shutil.copytree(shared_data_dir("govreport"), sources)
    cut = sources / "zeroscrolls_gov_report_validation_input.json"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    build = ["build", "govreport", "--sources", str(sources.parent), "--output", str(tmp_path / "out"), "--no-progress"]

    assert main(build) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cut) in err[0] and "--skip-unreadable-files" in err[0], err
    assert not (tmp_path / "out" / "govreport").exists()

    assert main([*build, "--skip-unreadable-files"]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-3:]
    assert str(cut) in last[0] and "not valid JSON" in last[0], last
    assert last[1].startswith("mmle: warning: pools with no query, not written: govreport-"), last
    assert "fewer queries than the plan of 120: govreport-easy-8k (" in last[2], last
    import json

    lost = json.loads((tmp_path / "out" / "govreport" / "manifest.json").read_text())["report"]["lost_files"]
    assert len(lost) == 1 and lost[0].startswith("zeroscrolls_gov_report_validation_input.json (not valid JSON")


def _tiny_build(name: str, tmp_path):
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import registered

    builder = registered()[name]()
    return run_build(builder, builder.example_config(tmp_path / "sources"), tmp_path / "out", progress=False)


def _card_header(build):
    import yaml

    return yaml.safe_load((build / "README.md").read_text().split("---\n")[1])


def test_the_needle_card_states_the_size_on_disk_and_where_its_columns_live(tmp_path):
    import re

    import pyarrow.parquet as pq

    from mmlongembed.output.layout import configs_from_card

    build = _tiny_build("needle", tmp_path)
    card = (build / "README.md").read_text()
    assert "uncompressed" not in card
    on_disk = sum(p.stat().st_size for p in (build / "data").rglob("*.parquet"))
    stated = re.search(r"The data files of this build hold\s+([\d.]+) MB on disk", card)
    assert stated and float(stated.group(1)) == round(on_disk / 1e6, 1), (stated, on_disk)
    # the columns the card's placement table lists are in the audit config, not in the corpus
    section = card.split("### Placement and length")[1].split("###")[0]
    listed = {c for row in re.findall(r"^\| (`.+?) \|", section, re.M) for c in re.findall(r"`([a-z_]+)`", row)}
    assert listed >= {"depth", "realised_depth", "realised_token_index", "needle_id"}, listed
    specs = configs_from_card(build / "README.md")
    pool = next(s.pool for s in specs.values() if s.pool)
    audit = set(pq.read_schema(build / specs[f"{pool}-audit"].path).names)
    corpus = set(pq.read_schema(build / specs[f"{pool}-corpus"].path).names)
    assert listed <= audit and not listed & corpus, (listed - audit, listed & corpus)
    assert "`<pool>-audit` config" in section
    header = _card_header(build)
    assert "visual-document-retrieval" in header["task_categories"] and "multimodal" in header["tags"]


def test_a_text_only_card_is_not_tagged_visual(tmp_path):
    header = _card_header(_tiny_build("govreport", tmp_path))
    assert header["task_categories"] == ["text-retrieval"] and "multimodal" not in header["tags"], header


LENGTH_BUILDERS = ["activitynet", "govreport", "hotpotqa", "mmdocrag", "mmlongbench", "needle", "youkudc"]


def test_every_builder_with_lengths_is_checked():
    import dataclasses

    from mmlongembed.core.builder import registered

    with_lengths = sorted(name for name, cls in registered().items()
                          if "lengths" in {f.name for f in dataclasses.fields(cls.config_class)})
    assert with_lengths == LENGTH_BUILDERS


@pytest.mark.parametrize("name", LENGTH_BUILDERS)
def test_lengths_the_sources_cannot_fill_are_refused_before_any_pool_is_built(name, tmp_path, monkeypatch):
    import dataclasses
    import re

    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import registered
    from mmlongembed.core.errors import UserError

    builder = registered()[name]()
    config = builder.example_config(tmp_path / "sources")
    monkeypatch.setattr(type(builder), "build_pools", lambda *a: pytest.fail("pools were built"))
    with pytest.raises(UserError) as refused:
        run_build(builder, dataclasses.replace(config, lengths=(min(config.lengths), 3_000_000)), tmp_path / "out",
                  progress=False)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--lengths 3000000: longer than these sources can fill"), message
    largest = int(re.search(r"the largest length they support is at most (\d+) tokens", message).group(1))
    assert max(config.lengths) <= largest < 3_000_000
    assert not (tmp_path / "out").exists()


def test_a_grid_that_memory_cannot_hold_is_refused_before_any_pool_is_built(tmp_path, monkeypatch):
    """Image haystacks draw photos again and again: the sources do not bound them, memory does."""
    import dataclasses

    from mmlongembed.build import capacity
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import registered
    from mmlongembed.core.errors import UserError

    builder = registered()["needle"]()
    config = dataclasses.replace(builder.example_config(tmp_path / "sources"), backgrounds=("image",),
                                 lengths=(3_000_000,))
    monkeypatch.setattr(capacity, "available_memory", lambda: 10**9)
    monkeypatch.setattr(type(builder), "build_pools", lambda *a: pytest.fail("pools were built"))
    with pytest.raises(UserError, match=r"would hold about [\d.]+ GB of documents in memory, more than the 1.0 GB"):
        run_build(builder, config, tmp_path / "out", progress=False)
    assert builder.memory_needed(dataclasses.replace(config, lengths=(256,))) < 10**9  # what fits is not refused


_INTERRUPTED_BUILD = """
import os, sys, time
from pathlib import Path
import builders.govreport
from mmlongembed import cli
from mmlongembed.build import run as build
from mmlongembed.checks import build_checks
from mmlongembed.core import parallel
from mmlongembed.core.builder import registered

parallel.available_cores = lambda: 2
markers = Path(sys.argv[1])

def measuring(*args):  # the BM25 check, worked out beside the writing of the tables, never ends
    (markers / f"beside-{os.getpid()}").write_text("")
    while True:
        time.sleep(3600)

def checking(root, specs, builder_name, row, threads):  # the validation's checks: one pool's never end
    if row["pool"] != "govreport-easy-2k":
        result = pool_checks(root, specs, builder_name, row, threads)
        (markers / f"checked-{row['pool']}-{os.getpid()}").write_text("")
        return result
    measuring()

pool_checks = build_checks._pool_checks
if sys.argv[4] == "beside":
    build._measure_pools = measuring
else:
    build_checks._pool_checks = checking
config = registered()["govreport"]().example_config(Path(sys.argv[2]))
sys.exit(cli.main(["build", "govreport", "--sources", config.sources, "--lengths", *map(str, config.lengths),
                   "--max-queries-per-pool", str(config.max_queries_per_pool), "--output", sys.argv[3],
                   "--no-progress"]))
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="fork and process groups: Linux")
@pytest.mark.parametrize("phase", ["beside", "validation"])
def test_sigterm_to_a_building_process_group_leaves_no_lock_temporary_folder_or_worker(phase, tmp_path):
    """SIGTERM to the build's process group while a forked worker is inside its task (and, in
    validation, the other has finished its tasks and waits for more)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.support.python_env import python_env

    script = tmp_path / "build.py"
    script.write_text(_INTERRUPTED_BUILD)
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    build = subprocess.Popen([sys.executable, str(script), str(markers), str(tmp_path / "sources"), str(out), phase],
                             env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120  # a safety limit against a hang, not a timing assumption
    while len(list(markers.iterdir())) < (1 if phase == "beside" else 4):  # validation: 3 pools checked, 1 held
        assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()
        time.sleep(0.02)
    workers = {int(p.name.rsplit("-", 1)[1]) for p in markers.iterdir()}
    assert any(p.name.startswith(".govreport.tmp-") for p in out.iterdir())  # mid-build: its folder exists
    os.killpg(build.pid, signal.SIGTERM)
    try:
        _, err = build.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(build.pid, signal.SIGKILL)
        build.communicate()
        pytest.fail("the build hung after SIGTERM")
    assert build.returncode == 143 and err.decode().strip().splitlines()[-1] == "mmle: terminated (SIGTERM)", err
    assert not out.exists() or not list(out.iterdir()), list(out.iterdir())  # no lock, no temporary folder
    assert not [pid for pid in workers if _running(pid)]


@pytest.fixture
def default_sigterm():
    """SIGTERM's default disposition for the test, as a fresh `mmle` process has it: cli.main leaves
    a handler someone else installed alone, and an earlier test of this process may have left one
    (ray.init installs its own, and the signal then ended the whole test run)."""
    import signal

    found = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, found)


def test_an_error_that_sigterm_caused_ends_as_sigterm(monkeypatch, capsys, default_sigterm):
    """The signal's own exception can be swallowed (raised inside an import-lock callback: Python
    prints "Exception ignored"); what reaches the top is the consequence, a worker pipe at EOF.
    That is SIGTERM's exit (143), not a traceback; the same error without the signal is not."""
    import argparse
    import os
    import signal

    from mmlongembed import cli
    from mmlongembed.output import outdir

    def worker_pipe_at_eof(args):
        os.kill(os.getpid(), signal.SIGTERM) if args.signal else None
        raise EOFError

    for signalled in (False, True):
        parser = argparse.ArgumentParser()
        parser.set_defaults(func=worker_pipe_at_eof, signal=signalled)
        monkeypatch.setattr(cli, "build_parser", lambda parser=parser: parser)
        if not signalled:
            with pytest.raises(EOFError):
                cli.main([])
            continue
        swallowed = []

        def install(handler):
            """The real handler runs (it records the signal) and its exception is lost, as in
            the callback that ate it."""
            def wrapped(signum, frame):
                try:
                    handler(signum, frame)
                except outdir.Terminated:
                    swallowed.append(signum)
            return wrapped

        original_signal = signal.signal
        monkeypatch.setattr(signal, "signal", lambda s, h: original_signal(s, install(h) if callable(h) else h))
        try:
            assert cli.main([]) == 143
        finally:
            monkeypatch.setattr(signal, "signal", original_signal)
            original_signal(signal.SIGTERM, signal.SIG_DFL)
            outdir._SIGTERM_RECEIVED.clear()
        assert swallowed == [signal.SIGTERM]
        assert capsys.readouterr().err.strip().splitlines()[-1] == "mmle: terminated (SIGTERM)"


@pytest.mark.parametrize("typo, meant", [("minlm", "minilm"), ("gme-qwen2vl-2b", "gme-qwen2-vl-2b"),
                                         ("bm-25", "bm25")])
def test_a_model_typo_says_what_was_meant_before_any_dataset_is_opened(typo, meant, tmp_path, monkeypatch, capsys):
    from harness.scoring import data

    def never(*args, **kwargs):
        raise AssertionError("a dataset was opened")

    monkeypatch.setattr(data.Benchmark, "__init__", never)
    assert score_main(["--dataset", str(tmp_path), "--model", f"bm25,{typo}", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--model {typo!r}: did you mean {meant!r}?" in err[0], err


def test_a_pool_typo_says_which_pools_were_meant(tmp_path, capsys):
    from tests.support.fixtures_harness import standard_benchmark

    bench = standard_benchmark(tmp_path / "fixture")
    assert score_main(["--dataset", str(bench), "--model", "bm25", "--pools", "govreport-easy-265", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean govreport-easy-256" in err[0] and "(it has 7:" in err[0], err


def test_a_folder_that_is_not_a_build_names_the_builds_inside_it(tmp_path, monkeypatch, capsys):
    from tests.support.fixtures_harness import standard_benchmark

    standard_benchmark(tmp_path / "out" / "fixture")
    (tmp_path / "out" / "fixture" / "manifest.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert score_main(["--dataset", "out", "--model", "bm25", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'out': not an mmle build" in err[0] and "builds inside it: out/fixture" in err[0], err
    assert "BuilderConfig" not in err[0]
