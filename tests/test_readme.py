"""README.md's builder tables come from the registry: each builder's ``summary`` (opening with its
task) and ``source_formats``, written by ``make readme``. A new builder states its row in its own
module; this test fails while the README's block is not what the registry gives."""

from __future__ import annotations

from harness.report.tables import TASK_TITLES
from mmlongembed.core.builder import Builder
from mmlongembed.readme import BEGIN, END, builder_tables, main, toolkit_builders, with_tables
from tests.support.realdata import REPO_ROOT


def test_the_readme_builder_tables_are_the_registry_s():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert with_tables(readme, builder_tables(toolkit_builders())) == readme, \
        "README.md's builder tables are out of date: run `make readme`"


def test_every_builder_states_its_row_opening_with_its_task():
    builders = toolkit_builders()
    assert {"govreport", "hotpotqa", "needle", "evialign-evidence"} <= set(builders)
    assert "mmlongembed" not in builders  # the release has its own section
    for name, cls in builders.items():
        title = TASK_TITLES.get(cls.task, cls.task.replace("_", " ").title())
        assert cls.summary.startswith(title), f"{name}: its summary does not open with its task, {title!r}"
        assert cls.source_formats.strip(), f"{name}: no source_formats"


class _NinthBuilder(Builder):
    name = "ninth"
    task = "temporal_summarization"
    summary = "Temporal Summarization: a made-up builder | with a pipe"
    source_formats = "nothing"


def test_a_new_builder_gets_its_row_in_task_order_and_a_stale_readme_is_caught(tmp_path, capsys):
    builders = {**toolkit_builders(), "ninth": _NinthBuilder}
    tables = builder_tables(builders)
    rows = [line.split(" | ")[0] for line in tables.splitlines() if line.startswith("| `")]
    assert rows.index("| `ninth`") > rows.index("| `govreport`")  # Temporal after Logical Summarization
    assert "| `ninth` | Temporal Summarization: a made-up builder \\| with a pipe | nothing |" in tables

    readme = tmp_path / "README.md"
    readme.write_text(f"# T\n\nbefore\n\n{BEGIN}\n| old | table |\n{END}\n\nafter\n", encoding="utf-8")
    assert main(["--check", "--readme", str(readme)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# T\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "| old |" not in text
    assert main(["--check", "--readme", str(readme)]) == 0

    readme.write_text("# no markers\n", encoding="utf-8")
    assert main(["--readme", str(readme)]) == 2
    assert "no builder-table block" in capsys.readouterr().err


def _written_by_the_docs() -> set[str]:
    """The top folders the README's and docs' commands write into the working tree: `--output X`,
    `mmle demo-sources X`, `HF_HOME=$PWD/X`, and the defaults `out/` and `results/`."""
    import re

    written = {"out", "results"}
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for command in re.findall(r"^\s*(?:\$ )?((?:mmle|make|export|python) .*)$", path.read_text(encoding="utf-8"), re.M):
            for target in re.findall(r"(?:--output|demo-sources)\s+([\w.$/+-]+)|HF_HOME=\$PWD/([\w.-]+)", command):
                folder = (target[0] or target[1]).split("/")[0]
                if folder and folder.upper() not in {"DIR", "OUT", "SITE", "FILE"} and not folder.startswith("$"):
                    written.add(folder)
    return written


def test_what_the_documented_commands_write_is_ignored_by_git():
    ignored = {line.strip().strip("/") for line in (REPO_ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    written = _written_by_the_docs()
    assert {"explore", "DEMO_VIDEOS", ".hf-local"} <= written  # the parse finds the README's commands
    assert written <= ignored, f"not in .gitignore: {sorted(written - ignored)}"


def test_the_readme_and_publishing_guide_show_a_release_loaded_at_its_tag():
    """The documented call is the one `test_publish_roundtrip` runs against the loopback Hub."""
    import re

    call = r'load_dataset\("OWNER/NAME", "[\w-]+", split="test", revision="v\d+\.\d+\.\d+"\)'
    for path in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "PUBLISHING.md"):
        assert re.search(call, path.read_text(encoding="utf-8")), path
