"""Fixtures shared by several test modules."""

import pytest

from mmlongembed.publish.hub_server import LoopbackHub
from tests.support.publish_support import TOKEN, USER


@pytest.fixture()
def hub(monkeypatch):
    """A loopback Hub-compatible server that knows one user's token."""
    # The loopback Hub speaks classic LFS, not Xet; the flag is read at import time, so patch it.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    with LoopbackHub({TOKEN: USER}) as server:
        yield server


def _hypothesis_outside_the_working_tree() -> None:
    """Hypothesis keeps an example database and caches in `.hypothesis/` of the working
    directory, and replays what it found there on the next run: keep them in a temporary
    directory instead, and draw the same examples on every run. No per-example deadline or
    slowness check: a loaded machine must not fail a property that holds."""
    import atexit
    import shutil
    import tempfile

    from hypothesis import HealthCheck, configuration, settings

    home = tempfile.mkdtemp(prefix="mmle-tests-hypothesis-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    configuration.set_hypothesis_home_dir(home)
    settings.register_profile("mmle-tests", database=None, derandomize=True, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("mmle-tests")


_hypothesis_outside_the_working_tree()


@pytest.fixture(autouse=True)
def _run_in_a_temporary_directory(tmp_path, monkeypatch):
    """Every test runs in its own temporary directory: nothing it writes by a relative path (the
    default `out/`, `results/`) lands in, or reads from, the user's working tree."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True, scope="session")
def _private_datasets_cache(tmp_path_factory):
    """The tests' `datasets` cache is their own: a cache shared with earlier runs on the same
    machine could hand a test rows it did not write."""
    import os

    cache = tmp_path_factory.mktemp("hf_datasets_cache")
    previous = os.environ.get("HF_DATASETS_CACHE")
    os.environ["HF_DATASETS_CACHE"] = str(cache)
    import datasets.config

    previous_constant = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = cache
    yield
    datasets.config.HF_DATASETS_CACHE = previous_constant
    if previous is None:
        os.environ.pop("HF_DATASETS_CACHE", None)
    else:
        os.environ["HF_DATASETS_CACHE"] = previous


@pytest.fixture()
def clean_toolkit(monkeypatch):
    """A fixed, clean toolkit identity: the up-to-date rule compares builds of clean commits only,
    and a test must not depend on whether the working tree it runs from is committed."""
    import mmlongembed.release.composite as composite
    import mmlongembed.build.pipeline as pipeline_module
    from mmlongembed.output.manifest import toolkit_identity

    identity = {**toolkit_identity(), "git_dirty": False}
    if identity["git_commit"] == "unknown":  # not a git checkout: any fixed commit will do
        identity["git_commit"] = "1" * 40
    # a real commit where there is one: croissant.json's datePublished is that commit's date
    monkeypatch.setattr(pipeline_module, "toolkit_identity", lambda: dict(identity))
    monkeypatch.setattr(composite, "toolkit_identity", lambda: dict(identity))
    return identity
