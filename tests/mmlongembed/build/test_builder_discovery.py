"""Builders are found by name: the ``builders`` package, and any installed package that names its
builders in the ``mmlongembed.builders`` entry-point group (a researcher's own builder, kept in
their own package, needs no edit here)."""

import sys
import textwrap

import pytest

import mmlongembed.core.builder as builder_module
from mmlongembed.core.builder import ENTRY_POINT_GROUP, registered


def test_a_builder_in_another_package_is_found_through_its_entry_point(tmp_path, monkeypatch):
    (tmp_path / "my_builders.py").write_text(textwrap.dedent('''
        from mmlongembed.core.builder import Builder, register

        @register
        class TinyBuilder(Builder):
            """A builder from outside the toolkit."""
            name = "tiny_outside"
            version = "0.1.0"
            task = "logical_summarization"
            title = "Tiny"
    '''))
    dist = tmp_path / "my_builders-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-builders\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntiny = my_builders\n")
    assert "tiny_outside" not in registered()
    # the registry as it is, restored after the test: the outside builder must not leak into others
    monkeypatch.setattr(builder_module, "_REGISTRY", dict(builder_module._REGISTRY))
    monkeypatch.syspath_prepend(str(tmp_path))  # "installs" the package: entry points are read from sys.path
    found = registered()
    assert "tiny_outside" in found and found["tiny_outside"].__module__ == "my_builders"
    assert {"govreport", "hotpotqa", "mmlongembed"} <= set(found)
    sys.modules.pop("my_builders", None)


def test_a_builder_that_still_names_an_output_kind_fails_loudly():
    from mmlongembed.core.builder import Builder, register

    class OldStyle(Builder):
        name = "old_style"
        output_kind = "training"

    with pytest.raises(RuntimeError, match="output_kind, which is gone: name its pipeline"):
        register(OldStyle)
    assert "old_style" not in registered()
