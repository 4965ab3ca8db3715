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
    from harness.data import meant_as_path

    (tmp_path / "out").mkdir()
    assert not meant_as_path("org/benchmark")  # no folder `org` here: a Hub repo
    assert meant_as_path("out/benchmark") and meant_as_path("./x") and meant_as_path("/x") and meant_as_path("~/x")


def test_quiet_scoring_prints_only_what_it_wrote(tmp_path):
    """--quiet: no results table, no progress bar of ours or of transformers ("Loading weights")."""
    import subprocess
    import sys

    from tests._fixtures_harness import standard_benchmark
    from tests._subprocess import python_env

    bench = standard_benchmark(tmp_path / "fixture")
    env = python_env({**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    done = subprocess.run([sys.executable, "-m", "mmlongembed.cli", "score", "--dataset", str(bench), "--model",
                           "minilm", "--pools", "govreport-easy-256", "--quiet", "--bootstrap", "50", "--no-plots",
                           "--output", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"wrote {tmp_path / 'results' / 'results.json'}, "
                                        f"{tmp_path / 'results' / 'table.md'}"], done.stdout
    assert "Loading weights" not in done.stderr and "it/s" not in done.stderr, done.stderr
    assert "| minilm |" in (tmp_path / "results" / "table.md").read_text()  # the table is still written


def test_list_aligns_its_columns_whatever_the_name_length(capsys):
    from mmlongembed.builder import registered
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
    from mmlongembed.builder import registered
    from mmlongembed.cli import main

    config = registered()["govreport"]().example_config(tmp_path / "sources")
    code = main(["build", "govreport", "--sources", config.sources, "--lengths", *map(str, config.lengths),
                 "--max-queries-per-pool", str(config.max_queries_per_pool), "--output", str(tmp_path / "out"),
                 "--quiet"])
    captured = capsys.readouterr()
    assert code == 0 and (tmp_path / "out" / "govreport" / "manifest.json").is_file()
    assert captured.out.splitlines() == [f"built govreport into {tmp_path / 'out' / 'govreport'}"]
    assert captured.err == ""
