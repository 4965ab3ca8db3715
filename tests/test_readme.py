"""README.md's builder tables (## Tasks and sources) against the registry: every registered builder
appears, by its registry name, in a row whose description opens with its task, or (the release of
all of them) in a heading of that section; no row names anything else. A new builder fails this
test until its row is written."""

from __future__ import annotations

import re

from harness.report import TASK_TITLES
from mmlongembed.builder import registered
from tests._realdata import REPO_ROOT

SECTION = "## Tasks and sources"
NAME = re.compile(r"`([^`]+)`")


def task_title(task: str) -> str:
    return TASK_TITLES.get(task, task.replace("_", " ").title())


def builder_mentions(readme: str) -> tuple[dict[str, list[str]], set[str]]:
    """The section's builder tables as {name: [its rows' description cells]}, and the words its
    headings give in backticks (`mmle build mmlongembed`)."""
    start = readme.index(SECTION) + len(SECTION)
    end = readme.find("\n## ", start)
    section = readme[start:end if end >= 0 else None]
    rows: dict[str, list[str]] = {}
    headings: set[str] = set()
    in_builder_table = False
    for line in section.splitlines():
        if line.startswith("#"):
            headings.update(word for span in NAME.findall(line) for word in span.split())
        if not line.startswith("|"):
            in_builder_table = False
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells[0] == "builder":
            in_builder_table = True
        elif in_builder_table and not set(cells[0]) <= set("-:"):
            match = NAME.fullmatch(cells[0])
            rows.setdefault(match.group(1) if match else cells[0], []).append(cells[1] if len(cells) > 1 else "")
    return rows, headings


def table_problems(readme: str, builders: dict[str, str]) -> list[str]:
    """What is wrong with the README's tables for `builders` ({registry name: task})."""
    rows, headings = builder_mentions(readme)
    problems = [f"the README's builder table has a row for {name!r}, which is not a registered builder"
                for name in sorted(set(rows) - set(builders))]
    for name, task in sorted(builders.items()):
        if name not in rows and name not in headings:
            problems.append(f"builder {name!r} ({task}) has no row in the README's table (## Tasks and sources)")
        elif len(rows.get(name, [])) > 1:
            problems.append(f"builder {name!r} has {len(rows[name])} rows in the README's table")
        elif name in rows and not rows[name][0].startswith(task_title(task)):
            problems.append(f"builder {name!r}: its README row does not open with its task, {task_title(task)!r}")
    return problems


def test_the_readme_builder_tables_match_the_registry():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    # the toolkit's own builders (a test session also registers the tests' fixture builder)
    builders = {name: cls.task for name, cls in registered().items()
                if cls.__module__.split(".")[0] in ("builders", "mmlongembed")}
    assert table_problems(readme, builders) == []


def test_the_check_catches_a_missing_an_unknown_and_a_mistasked_row():
    readme = ("# T\n\n## Tasks and sources\n\n| builder | task | sources |\n|---|---|---|\n"
              "| `govreport` | Logical Summarization: summary -> report | GovReport |\n"
              "| `gone` | Visual Grounding: a builder since removed | - |\n"
              "| `hotpotqa` | Temporal Summarization: the wrong task | HotpotQA |\n\n"
              "### The release: `mmle build mmlongembed`\n\n| command | what |\n|---|---|\n| `x` | y |\n\n"
              "## Next\n\n| builder | task |\n|---|---|\n| `needle` | Visual Grounding: outside the section |\n")
    builders = {"govreport": "logical_summarization", "hotpotqa": "multi_source_reasoning",
                "needle": "visual_grounding", "mmlongembed": "all"}
    assert table_problems(readme, builders) == [
        "the README's builder table has a row for 'gone', which is not a registered builder",
        "builder 'hotpotqa': its README row does not open with its task, 'Multi-Source Reasoning'",
        "builder 'needle' (visual_grounding) has no row in the README's table (## Tasks and sources)",
    ]
