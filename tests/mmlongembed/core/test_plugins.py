"""The plug-in registries: a plug-in's home module is imported by name on first use, never before."""

import sys

import pytest

from mmlongembed.core.plugins import PluginRegistry


def test_a_plugin_is_imported_from_its_home_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "fake_plugin_home.py").write_text(
        "from tests.mmlongembed.core.test_plugins import REGISTRY\n@REGISTRY.register('later')\ndef later():\n    return 'loaded'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_plugin_home", raising=False)
    assert "fake_plugin_home" not in sys.modules
    assert REGISTRY.names() == ["here", "later"]
    assert "fake_plugin_home" not in sys.modules  # listing the names imports nothing
    assert REGISTRY.get("later")() == "loaded"
    assert REGISTRY.get("here")() == "here" and REGISTRY.get("unknown") is None


def test_two_plugins_under_one_name_fail_loudly():
    with pytest.raises(RuntimeError, match="two test plug-ins are registered as 'here'"):
        REGISTRY.register("here")(lambda: "impostor")


def test_the_three_registries_find_their_plugins_in_modules_they_do_not_import():
    from harness.models.adapters import MODEL_KINDS
    from mmlongembed.llm.backends import BACKENDS
    from mmlongembed.media.frames import DECODE_BACKENDS

    assert MODEL_KINDS.get("hfgen").make.__module__ == "harness.models.boundary"
    assert MODEL_KINDS.get("openai").make.__module__ == "harness.models.openai_model"
    assert BACKENDS.get("ray").__module__ == "mmlongembed.llm.ray_backend"
    assert BACKENDS.get("openai").__module__ == "mmlongembed.llm.openai_backend"
    assert DECODE_BACKENDS.get("ray").__module__ == "mmlongembed.media.ray_decode"


def test_the_llm_layer_imports_the_openai_client_only_for_its_backend():
    """A build without --llm openai does not pay for importing the client (pydantic and httpx)."""
    import subprocess
    from pathlib import Path

    probe = ("import sys, mmlongembed.llm, mmlongembed.llm.runner, harness.models.adapters; before = 'openai' in sys.modules; "
             "from mmlongembed.llm.backends import BACKENDS; BACKENDS.get('openai'); "
             "print(before, 'openai' in sys.modules)")
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, timeout=120,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.stdout.split() == ["False", "True"], result.stderr


REGISTRY = PluginRegistry("test plug-in", {"here": __name__, "later": "fake_plugin_home"})
REGISTRY.register("here")(lambda: "here")


@pytest.mark.parametrize("spec, hint", [("bm25:x", "write bm25 as bm25; "), ("minilm:", "write minilm as minilm; "),
                                        ("st:", "write st as st:<path>; "),
                                        # an endpoint kind without its endpoint, found before any dataset is opened
                                        ("openai:model", "write openai as openai:<model>@<base_url>; "),
                                        ("openai:@http://h", "write openai as openai:<model>@<base_url>; "),
                                        ("doubao:m", "write doubao as doubao:<model>@<base_url>; "), ("nope:x", ""),
                                        ("hfgen", "write hfgen as hfgen:<path-or-name>; ")])
def test_a_malformed_model_spec_is_one_line_naming_every_kind(spec, hint):
    from harness.models.adapters import RunSettings, load_model
    from mmlongembed.core.errors import UserError

    with pytest.raises(UserError) as error:
        load_model(spec, RunSettings(progress=False))
    assert str(error.value) == (f"--model {spec!r}: {hint}expected bm25, minilm, st:<path>, hf:<path-or-name>, "
                                "hfgen:<path-or-name>, vllm:<name>, openai:<model>@<base_url>, "
                                "doubao:<model>@<base_url>, multivector:<path>, random, length, text-only:<model> "
                                "or shuffled-frames:<model>, or a model profile's name (`mmle models` lists them)")
