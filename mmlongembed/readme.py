"""The README's builder tables, written from the registry: each builder's ``summary`` and
``source_formats``, one table per output kind (benchmarks, training data), in the paper's task
order. A new builder states its row in its own module; ``make readme`` (``python -m
mmlongembed.readme``) rewrites the block between the markers, and ``tests/test_readme.py`` fails
while the README's block is not what the registry gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmlongembed.build.run import BENCHMARK
from mmlongembed.core.builder import Builder, registered
from mmlongembed.core.errors import UserError
from mmlongembed.training.pipeline import TRAINING

BEGIN = "<!-- builder tables: written by `make readme` from each builder's summary and source_formats -->"
END = "<!-- end of builder tables -->"
README = Path(__file__).resolve().parent.parent / "README.md"
TABLES = (  # (tasks, table head): which builders each table lists (its pipeline's tasks), in this order
    (BENCHMARK.tasks, "| builder | task | sources (local format) |"),
    (TRAINING.tasks, "| builder | what it makes | sources (local format) |"),
)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def toolkit_builders() -> dict[str, type[Builder]]:
    """The builders this toolkit ships in ``builders/`` (not ones a test or another package
    registers, nor the release of all of them, ``mmlongembed.release.composite``, which has its own README
    section)."""
    return {name: cls for name, cls in registered().items() if cls.__module__.startswith("builders.")}


def builder_tables(builders: dict[str, type[Builder]]) -> str:
    """The block of markdown between the markers (markers included)."""
    parts = [BEGIN]
    for tasks, head in TABLES:
        members = sorted((cls for cls in builders.values() if cls.task in tasks),
                         key=lambda cls: (tasks.index(cls.task), cls.name))
        if not members:
            continue
        lines = [head, "|---|---|---|"]
        lines += [f"| `{cls.name}` | {_cell(cls.summary)} | {_cell(cls.source_formats)} |" for cls in members]
        parts.append("\n".join(lines))
    parts.append(END)
    return "\n\n".join(parts)


def with_tables(readme: str, tables: str) -> str:
    """``readme`` with its block between the markers replaced by ``tables``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise UserError(f"README has no builder-table block (a line {BEGIN!r}, later one {END!r})")
    return readme[:start] + tables + readme[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmlongembed.readme", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the README's tables are current "
                                                             "(exit 1 when not), write nothing")
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite (default: the repo's)")
    args = parser.parse_args(argv)
    try:
        current = args.readme.read_text(encoding="utf-8")
        wanted = with_tables(current, builder_tables(toolkit_builders()))
    except (OSError, UserError) as error:
        print(f"mmlongembed.readme: {error}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{args.readme}: builder tables {'current' if wanted == current else 'out of date (make readme)'}")
        return 0 if wanted == current else 1
    if wanted != current:
        args.readme.write_text(wanted, encoding="utf-8")
    print(f"{args.readme}: builder tables {'rewritten' if wanted != current else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
