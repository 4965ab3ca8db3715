"""One test over every registered builder: metadata, CLI help, and a tiny build that validates."""

import dataclasses
import re

import pytest

from tests.support.croissant import assert_croissant_matches

from mmlongembed.build.run import pipeline_of, run_build
from mmlongembed.core.builder import Builder, register, registered
from mmlongembed.output.card import CARDS_DIR
from mmlongembed.cli import build_parser
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.rebuild import files_state

BUILDERS = sorted(name for name, cls in registered().items() if cls.__module__.startswith("builders."))


def test_at_least_the_reference_builder_is_registered():
    assert "govreport" in BUILDERS


@pytest.mark.parametrize("name", BUILDERS)
def test_metadata(name):
    cls = registered()[name]
    assert re.fullmatch(r"\d+\.\d+\.\d+", cls.version)
    assert cls.task in pipeline_of(cls).tasks
    assert (CARDS_DIR / cls.card_template).is_file()
    assert cls.title and cls.__doc__
    for field in dataclasses.fields(cls.config_class):
        assert field.metadata.get("help"), f"{name}: option {field.name} has no help text"


@pytest.mark.parametrize("name", BUILDERS)
def test_cli_help_lists_every_option(name, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["build", name, "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    for field in dataclasses.fields(registered()[name].config_class):
        assert "--" + field.name.replace("_", "-") in help_text


@pytest.mark.parametrize("name", BUILDERS)
def test_tiny_build_validates_renders_its_card_and_is_up_to_date_when_run_again(name, tmp_path, clean_toolkit,
                                                                                 capsys):
    builder = registered()[name]()
    config = builder.example_config(tmp_path / "sources")
    out = run_build(builder, config, tmp_path / "out", progress=False)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "configs:" in card and builder.title in card
    assert_croissant_matches(out)  # croissant.json: no mlcroissant error or warning, load_dataset's rows
    # The same command again, as a new process runs it (a fresh builder that remembers nothing of
    # the first build): nothing changed, so nothing is built or written.
    before = files_state(out)
    capsys.readouterr()
    assert run_build(registered()[name](), config, tmp_path / "out", progress=False) == out
    assert f"{out} is up to date" in capsys.readouterr().out
    assert files_state(out) == before


def test_duplicate_builder_names_fail_loudly():
    class Impostor(Builder):
        name = "govreport"

    with pytest.raises(RuntimeError, match="two builders"):
        register(Impostor)
