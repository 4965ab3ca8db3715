"""The `mmle` command: build benchmarks, check them, score models on them, publish them.

Config dataclasses drive the flags: each field becomes `--field-name` with its metadata `help`.
User errors print one line and exit 2 (1 for a build that cannot be validated); nothing prints a
traceback unless MMLE_DEBUG is set. SIGTERM is handled like Ctrl-C (exit 143 instead of 130).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from mmlongembed.core.errors import ERROR_PREFIX, UserError, report_error
from mmlongembed.core.flags import add_dataclass_arguments, config_from_args


def _add_build(subparsers) -> None:
    from mmlongembed.core.builder import registered

    build = subparsers.add_parser("build", help="build one dataset's pools into OUTPUT/<dataset>/ and validate them")
    per_dataset = build.add_subparsers(dest="dataset", required=True, metavar="DATASET",
                                       parser_class=OneLineErrorParser)
    for name, cls in registered().items():
        sub = per_dataset.add_parser(name, help=cls.title, description=(cls.__doc__ or "").strip(),
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        # the builder's own options first, then how the build runs, then the shared kinds (LLM last)
        add_dataclass_arguments(sub, cls.config_class, own_title=f"{name} options", after_own=_add_run_options)
        sub.set_defaults(func=_run_build, builder_class=cls)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """Where a build goes and how it runs: every builder's `mmle build` has these."""
    group = parser.add_argument_group("output and run options")
    group.add_argument("--output", type=Path, default=Path("out"),
                       help="directory that receives <dataset>/ (a Hugging Face dataset repo layout)")
    group.add_argument("--overwrite", action="store_true",
                       help="replace an existing build directory (without it, a build that this toolkit commit "
                            "made from the same config, seed and sources is kept as up to date, any other refused)")
    group.add_argument("--no-progress", action="store_true", help="hide progress bars")
    group.add_argument("--skip-unreadable-files", action="store_true",
                       help="leave out a source file that cannot be parsed at all (cut short, not UTF-8) instead of "
                            "stopping the build; the summary's last lines name it and the pools that shrank")
    group.add_argument("--quiet", action="store_true",
                       help="no progress bars and no summary table: only the final line, warnings and errors")


def _run_build(args) -> int:
    from mmlongembed.build.run import run_build

    builder = args.builder_class()
    config = config_from_args(builder.config_class, args)
    run_build(builder, config, args.output, overwrite=args.overwrite, progress=not args.no_progress,
              quiet=args.quiet, skip_unreadable_files=args.skip_unreadable_files)
    return 0


def _add_validate(subparsers) -> None:
    sub = subparsers.add_parser("validate", help="recount tokens and check every invariant of a build directory")
    sub.add_argument("directory", type=Path, help="a build directory (holds manifest.json)")
    sub.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    sub.set_defaults(func=_run_validate)


def _run_validate(args) -> int:
    from mmlongembed.build.validate import validate_build

    result = validate_build(args.directory, progress=not args.no_progress)
    print(result.report())
    return 1 if result.problems else 0


def _add_list(subparsers) -> None:
    sub = subparsers.add_parser("list", help="list the registered dataset builders")
    sub.set_defaults(func=_run_list)


def _run_list(args) -> int:
    from mmlongembed.core.builder import registered
    from mmlongembed.checks.summary import format_table

    rows = [(name, f"v{cls.version}", cls.task, cls.title) for name, cls in registered().items()]
    table = format_table(["dataset", "version", "task", "title"], rows, align_right_from=len(rows[0]))
    print("\n".join(line.rstrip() for line in table.splitlines()))
    return 0


# Subcommands that live in their own modules: (name, module, help).
EXTERNAL_SUBCOMMANDS: tuple[tuple[str, str, str], ...] = (
    ("score", "harness.cli", "score embedding models on a built benchmark (reads it through load_dataset only)"),
    ("leaderboard", "harness.report.leaderboard", "merge `mmle score` runs into one Table 3 and Table 4, models as rows "
                                           "ranked by Avg with rank ranges and paired differences (--reference paper: "
                                           "beside the paper's published rows)"),
    ("compare", "harness.report.compare", "why two `mmle score` runs differ: their settings side by side (those that "
                                          "differ first), each cell's paired difference, the queries that flipped "
                                          "(--reference paper: one run against the published figures)"),
    ("models", "harness.profiles.cli", "list the model profiles (the paper's models, run as their authors run "
                                       "them): Table 2's columns, verified or not, and each fact's source"),
    ("explore", "harness.explore.site", "write a static site (opens from disk) to look inside a build: Table 1, Figure 1, "
                                   "the pools, every query's candidates with each edit marked, and with --results "
                                   "each model's pick per query"),
    ("audit", "harness.audit.cli", "the label-free shortcut audit for any retrieval dataset (BEIR, mteb's Hub layout, "
                                   "an mmle release): can a rule that never reads the query find the judged "
                                   "documents? exit 1 when one does"),
    ("push", "mmlongembed.publish.push", "publish a validated build to a Hub dataset repo as a tagged release"),
    ("push-results", "harness.report.push_results", "publish an `mmle score` run folder as it is (results.json, "
                                                    "predictions, table, plots) with a card (models, each dataset's "
                                                    "revision and digest, toolkit commit, SUBSET for a sample run) to "
                                                    "a Hub dataset repo as a tagged release vX.Y.Z; token from "
                                                    "HF_TOKEN"),
    ("reproduce", "mmlongembed.publish.reproduce", "rebuild a build or a Hub release from its manifest (recorded builder "
                                           "versions, options, seed; sources checked by sha256) and say `identical` "
                                           "or the first differing file, pool and row"),
    ("mveb", "mmlongembed.video_tasks.cli", "MTEB video tasks (MVEB): build from a video collection, export, "
                                             "evaluate with mteb, rank and prune"),
    ("demo-sources", "mmlongembed.demo_sources", "write small SYNTHETIC demo sources for the video builders "
                                                 "(generated clips, ActivityNet and YoukuDC formats) into DIR"),
)


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage mistakes (an unknown dataset, a bad flag) print one line and exit 2."""

    def error(self, message: str):
        self.exit(2, f"{ERROR_PREFIX}{message} (see {self.prog} --help)\n")


class VersionAction(argparse.Action):
    """``--version``: the package version and the toolkit commit it runs from, when known (asked
    only when the flag is given: it runs git)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit(0)


def version_line() -> str:
    """"mmle 0.1.0 (toolkit commit 55c2fca1b2c3, with uncommitted changes)"; the commit is the
    one builds record in their manifests (``manifest.toolkit_identity``)."""
    from mmlongembed.output.manifest import toolkit_identity

    toolkit = toolkit_identity()
    if toolkit["git_commit"] == "unknown":
        where = "toolkit commit unknown: not a git checkout"
    else:
        where = f"toolkit commit {toolkit['git_commit'][:12]}" + (", with uncommitted changes" if toolkit["git_dirty"]
                                                                 else "")
    return f"mmle {toolkit['version']} ({where})"


SUBCOMMANDS = ("build", "validate", "list", *(name for name, _, _ in EXTERNAL_SUBCOMMANDS))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="mmle", description=f"{__doc__.splitlines()[0]} Subcommands: "
                                                         f"{', '.join(SUBCOMMANDS)}; each has its own --help.")
    parser.add_argument("--version", action=VersionAction, help="print the package version and toolkit commit, "
                                                                "then exit")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=OneLineErrorParser)
    _add_build(subparsers)
    _add_validate(subparsers)
    _add_list(subparsers)
    import importlib

    for name, module_name, help_text in EXTERNAL_SUBCOMMANDS:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from mmlongembed.output.outdir import Terminated, sigterm_as_interrupt, sigterm_received

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():  # SIGTERM (timeout, docker stop, Slurm) cleans up like Ctrl-C
            return int(args.func(args) or 0)
    except UserError as error:
        if os.environ.get("MMLE_DEBUG"):
            raise
        return report_error(error)
    except KeyboardInterrupt as interrupt:
        terminated = isinstance(interrupt, Terminated)
        print(f"mmle: {'terminated (SIGTERM)' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else 130
    except Exception:
        if not sigterm_received() or os.environ.get("MMLE_DEBUG"):
            raise
        print("mmle: terminated (SIGTERM)", file=sys.stderr)  # an error the signal caused (outdir.sigterm_received)
        return 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main())
