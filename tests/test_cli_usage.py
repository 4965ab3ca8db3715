"""The command line as a first-day user meets it (issue 25 §5 and §8): inputs checked before
outputs, one error form in every subcommand, counts in number, a `--help` that names every
subcommand, `--version`, and a builder's own options before the shared ones."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from mmlongembed.cli import main


def _error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_a_sources_typo_over_an_existing_build_names_the_missing_path(tmp_path, capsys):
    existing = tmp_path / "out" / "govreport"
    existing.mkdir(parents=True)
    (existing / "README.md").write_text("an earlier build\n")
    typo = tmp_path / "data" / "govreprot"
    code = main(["build", "govreport", "--sources", str(typo), "--output", str(tmp_path / "out"), "--quiet"])
    err = _error_lines(capsys)
    assert code == 2 and len(err) == 1, err
    assert f"source path {typo} does not exist" in err[0] and "already exists" not in err[0], err
    assert sorted(p.name for p in existing.iterdir()) == ["README.md"]  # the output was not touched


def test_a_padding_typo_is_an_input_too():
    from builders.hotpotqa import HotpotQAConfig
    from mmlongembed.core.builder import get_builder
    from mmlongembed.build.pipeline import check_inputs

    builder = get_builder("hotpotqa")
    config = HotpotQAConfig(sources=".", padding="no-such-wikitext")
    assert builder.input_paths(config) == {"--sources": ["."], "--padding": ["no-such-wikitext"]}
    with pytest.raises(Exception, match="source path no-such-wikitext does not exist \\(--padding\\)"):
        check_inputs(builder, config)


@pytest.mark.parametrize("argv", [
    ["build", "govreport", "--sources", "no-such-sources"],  # a user error of build
    ["score", "--dataset", "./no-such-build", "--quiet"],  # of score
    ["leaderboard", "no-such-results.json"],  # of leaderboard
    ["validate", "no-such-build"],  # of validate (exit 1: not a valid build)
])
def test_every_subcommand_says_error_the_same_way(argv, capsys):
    assert main(argv) in (1, 2)
    err = _error_lines(capsys)
    assert len(err) == 1 and err[0].startswith("mmle: error: "), err


@pytest.mark.parametrize("argv", [["build", "no-such-dataset"], ["score", "--no-such-flag", "x"], ["nope"]])
def test_usage_mistakes_say_error_the_same_way(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = _error_lines(capsys)
    assert exited.value.code == 2 and len(err) == 1 and err[0].startswith("mmle: error: "), err


def test_counts_are_in_number():
    from mmlongembed.checks.build_checks import format_report
    from mmlongembed.core.builder import Problem
    from mmlongembed.checks.summary import counted
    from mmlongembed.training.pipeline import ROWS_COUNTED

    one = format_report([Problem("p", "check", "detail")], {"pools": 1, "queries": 1, "candidates": 2})
    assert one.splitlines()[0] == "validated 1 pool, 1 query, 2 candidates: 1 problem (check: 1)"
    two = format_report([Problem("p", "a", "x"), Problem("p", "b", "y")], {"pools": 2, "queries": 0, "candidates": 1})
    assert two.splitlines()[0] == "validated 2 pools, 0 queries, 1 candidate: 2 problems (a: 1, b: 1)"
    assert format_report([], {"rows": 1, "configs": 3}, counted=ROWS_COUNTED) == \
        "validated 1 row in 3 configs: all invariants hold"
    assert [counted(n, "data files") for n in (0, 1, 2)] == ["0 data files", "1 data file", "2 data files"]


def test_help_names_every_subcommand(capsys):
    from mmlongembed.cli import build_parser

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    summary = out.split("\n\n")[1]  # the description, after the usage line
    commands = build_parser()._subparsers._group_actions[0].choices
    assert len(commands) >= 8
    for name in commands:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", summary), (name, summary)
    assert "--version" in out


def test_version_names_the_package_and_the_commit(capsys):
    from mmlongembed import __version__
    from mmlongembed.output.manifest import toolkit_identity

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    out = capsys.readouterr().out.strip()
    assert exited.value.code == 0
    assert out.startswith(f"mmle {__version__} (")
    commit = toolkit_identity()["git_commit"]
    assert (commit[:12] in out) if commit != "unknown" else ("unknown" in out), out


def _help_of(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        main(argv + ["--help"])
    return capsys.readouterr().out


def _where(flag: str, text: str) -> int:
    """Where ``flag`` (the whole flag: --llm is not --llm-model) first appears in ``text``."""
    return re.search(rf"{re.escape(flag)}(?![\w-])", text).start()


def test_a_builders_own_options_come_first_in_its_help(capsys):
    """Every builder's help: its own options (usage line and help body) before the run options,
    the options every builder has and the LLM options; each kind under its own heading."""
    from mmlongembed.core.builder import registered
    from mmlongembed.core.flags import grouped_fields

    for name, cls in registered().items():
        text = _help_of(["build", name], capsys)
        usage, body = text.split("\n\n", 1)
        own = [f"--{f.name.replace('_', '-')}" for title, fields in grouped_fields(cls.config_class)
               if title is None for f in fields]
        if not own:  # a builder with CommonConfig alone (a test's fixture builder)
            continue
        later = [flag for flag in ("--output", "--quiet", "--seed", *(["--llm"] if "  --llm " in body else []))
                 if flag not in own]
        for part in (usage, body):
            last_own = max(_where(flag, part) for flag in own)
            first_later = min(_where(flag, part) for flag in later)
            assert last_own < first_later, (name, part[:400])
        assert f"\n{name} options:\n" in body and "\noutput and run options:\n" in body, name
    hotpotqa = _help_of(["build", "hotpotqa"], capsys)
    assert hotpotqa.index("\nhotpotqa options:\n") < hotpotqa.index("\nLLM options")
    assert hotpotqa.index("--lengths") < hotpotqa.index("--llm-model")


def test_the_groups_hold_every_option_once():
    """Grouping loses no field and adds none (the release parses components' options with it)."""
    from mmlongembed.core.builder import registered
    from mmlongembed.core.flags import grouped_fields

    for cls in registered().values():
        grouped = [f.name for _, fields in grouped_fields(cls.config_class) for f in fields]
        assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(cls.config_class))
        titles = [title for title, _ in grouped_fields(cls.config_class)]
        assert None not in titles[1:] and len(set(titles)) == len(titles), titles
    assert Path("README.md").exists() is False  # nothing was written in the working directory
