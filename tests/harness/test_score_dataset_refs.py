"""What `mmle score --dataset` reads (issue 25 §1): a local folder, or a Hub repo at a revision,
read from the Hub at exactly that revision. A bare name is neither: one line naming the local
builds, without asking the Hub and without `datasets`' cache, which would hand out whatever copy
it holds under that name. The clients are patched so that every request, retry sleep and use of
the cache is recorded: the tests prove which paths are never taken (no timing)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from harness.cli import main as score_main
from tests.support.fixtures_harness import standard_benchmark

POOL = "govreport-easy-256"
REPO = "org/bench"


def _record(monkeypatch) -> list[str]:
    """Every request fails (a refused connection); every request, use of `datasets`' cache
    fallback and retry sleep is recorded in the list returned (the sleep is not slept)."""
    import importlib

    import datasets.load

    asked: list[str] = []

    def refused(http):
        def network(self, request, *args, **kwargs):
            asked.append(f"network {request.method} {request.url.path}")
            raise http.ConnectError("connection refused (test)", request=request)
        return network

    original = datasets.load.CachedDatasetModuleFactory.get_module

    def cache(self):
        asked.append(f"datasets cache {self.name}")
        return original(self)

    for name in ("httpx", "httpx2"):  # huggingface_hub 2 speaks httpx2, datasets' fsspec paths httpx
        try:
            http = importlib.import_module(name)
        except ImportError:
            continue
        monkeypatch.setattr(http.Client, "send", refused(http))
    monkeypatch.setattr(datasets.load.CachedDatasetModuleFactory, "get_module", cache)
    monkeypatch.setattr(time, "sleep", lambda seconds: asked.append(f"sleep {seconds}"))
    return asked


def _offline(monkeypatch, offline: bool) -> None:
    """HF_HUB_OFFLINE as the clients see it (they read it when imported)."""
    import datasets.config
    from huggingface_hub import constants

    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", offline)


def _primed_cache(build: Path, monkeypatch, configs: list[str], repo: str | None = None) -> None:
    """The test's own `datasets` cache holding ``configs`` of ``build``, as a user's earlier
    ``load_dataset("./out/govreport", ...)`` left them: under the folder's name, and with
    ``repo``, also under that Hub repo's name (what an earlier download of it leaves)."""
    import datasets

    cache = build.parent.parent / "hf_datasets_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    for config in configs:
        datasets.load_dataset(str(build), config, split="test")
    if repo is not None:
        owner, name = repo.split("/")
        target = cache / f"{owner}___{name}"
        shutil.copytree(cache / build.name, target)
        for path in target.rglob(f"{build.name}-*"):
            path.rename(path.with_name(name + path.name[len(build.name):]))


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "no-network"])
def test_a_bare_dataset_name_is_one_line_naming_the_local_build(offline, tmp_path, monkeypatch, capsys):
    import datasets.load

    build = standard_benchmark(tmp_path / "out" / "govreport")  # the working directory is tmp_path
    _primed_cache(build, monkeypatch, ["pools", f"{POOL}-corpus", f"{POOL}-queries", f"{POOL}-qrels"])
    # the trap is set: `datasets`' own fallback would hand out this copy for the bare name
    assert datasets.load.CachedDatasetModuleFactory("govreport").get_module() is not None
    _offline(monkeypatch, offline)
    asked = _record(monkeypatch)
    capsys.readouterr()  # what priming printed

    code = score_main(["--dataset", "govreport", "--model", "bm25", "--pools", POOL, "--quiet", "--no-plots"])

    err = capsys.readouterr().err.strip().splitlines()
    assert asked == []  # no request, no retry, no cached copy
    assert code == 2
    assert len(err) == 1 and "did you mean out/govreport?" in err[0] and "NAME@" in err[0], err
    assert not Path("results").exists()


def test_a_repo_without_a_revision_is_refused_too(tmp_path, monkeypatch, capsys):
    standard_benchmark(tmp_path / "out" / "govreport")
    _offline(monkeypatch, False)
    asked = _record(monkeypatch)
    assert score_main(["--dataset", REPO, "--model", "bm25", "--quiet", "--no-plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert asked == [] and len(err) == 1 and "read only at a revision" in err[0] and "out/govreport" in err[0], err


def test_a_hub_reference_offline_fails_at_once_and_never_reads_the_cache(tmp_path, monkeypatch, capsys):
    build = standard_benchmark(tmp_path / "out" / "govreport")
    _primed_cache(build, monkeypatch, ["pools", f"{POOL}-corpus", f"{POOL}-queries", f"{POOL}-qrels"], repo=REPO)
    capsys.readouterr()  # what priming printed
    _offline(monkeypatch, True)
    asked = _record(monkeypatch)
    code = score_main(["--dataset", f"{REPO}@v1.0.0", "--model", "bm25", "--pools", POOL, "--quiet", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert asked == [] and code == 2
    assert len(err) == 1 and "offline" in err[0] and f"hf download {REPO}" in err[0], err
    assert not Path("results").exists()


def test_an_unreachable_hub_is_asked_once_and_its_cached_copy_never_scored(tmp_path, monkeypatch, capsys):
    """Online, but the connection is refused: one request (no retries), and the copy `datasets`
    holds under the repo's name, of whatever revision, is not scored."""
    build = standard_benchmark(tmp_path / "out" / "govreport")
    _primed_cache(build, monkeypatch, ["pools", f"{POOL}-corpus", f"{POOL}-queries", f"{POOL}-qrels"], repo=REPO)
    capsys.readouterr()  # what priming printed
    _offline(monkeypatch, False)
    asked = _record(monkeypatch)
    code = score_main(["--dataset", f"{REPO}@v1.0.0", "--model", "bm25", "--pools", POOL, "--quiet", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    # (huggingface_hub may first ask /api/agent-harnesses for its user agent: not a dataset request)
    dataset_requests = [a for a in asked if "/datasets/" in a or "/resolve/" in a]
    assert dataset_requests == [f"network GET /api/datasets/{REPO}/revision/v1.0.0"], asked
    assert not [a for a in asked if a.startswith(("sleep", "datasets cache"))], asked
    assert code == 2 and len(err) == 1 and "cannot read org/bench at v1.0.0" in err[0], err
    assert not Path("results").exists()


def test_when_the_hub_answers_then_fails_datasets_cache_is_still_not_scored(tmp_path, monkeypatch, capsys):
    """The repo's revision is there, then its files cannot be fetched: `datasets` falls back on
    its cache of the repo's name ("Using the latest cached version"); that copy is refused."""
    from huggingface_hub import HfApi

    build = standard_benchmark(tmp_path / "out" / "govreport")
    _primed_cache(build, monkeypatch, ["pools", f"{POOL}-corpus", f"{POOL}-queries", f"{POOL}-qrels"], repo=REPO)
    capsys.readouterr()  # what priming printed
    _offline(monkeypatch, False)
    asked = _record(monkeypatch)
    monkeypatch.setattr(HfApi, "dataset_info", lambda self, *args, **kwargs: object())  # the revision exists
    code = score_main(["--dataset", f"{REPO}@v1.0.0", "--model", "bm25", "--pools", POOL, "--quiet", "--no-plots"])
    err = capsys.readouterr().err.strip().splitlines()
    assert f"datasets cache {REPO}" in asked  # the fallback was offered ...
    assert code == 2 and len(err) == 1 and "never scored" in err[0], err  # ... and refused
    assert not Path("results").exists()
