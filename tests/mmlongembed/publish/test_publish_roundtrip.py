"""Round trip through the real clients over HTTP: build -> push -> tag -> load_dataset at the tag."""

from __future__ import annotations

import pytest

from tests.support.publish_support import (REPO, TOKEN, client_env, load_hashes, make_pool, parquet_hashes, run_push_cli,
                             write_build)



@pytest.fixture()
def build(tmp_path):
    pools = [make_pool("govreport", "easy", "logical_summarization", 3),
             make_pool("govreport", "hard", "logical_summarization", 2, seed=1)]
    return write_build(tmp_path / "govreport", pools)


def test_push_cli_then_load_dataset_at_tag_returns_exactly_what_was_built(hub, build, tmp_path):
    env = client_env(hub, tmp_path)
    proc = run_push_cli([str(build), "--repo", REPO, "--version", "1.0.0", "--private",
                         "--message", "first release"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = hub.repo(REPO)
    assert repo.private
    tagged = repo.tags["v1.0.0"]
    assert f"repo: {REPO}" in proc.stdout and f"commit: {tagged}" in proc.stdout and "tag: v1.0.0" in proc.stdout
    # One commit holds the whole release, on top of the repo's initial commit.
    release = repo.commits[tagged]
    assert release.title == "first release"
    assert repo.commits[release.parent].parent is None
    built_files = sorted(p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file())
    assert sorted(set(release.files) - {".gitattributes"}) == built_files
    assert all(release.files[f].data == (build / f).read_bytes() for f in built_files)

    expected = parquet_hashes(build)
    assert len(expected) == 1 + 4 * 2
    assert load_hashes(REPO, "v1.0.0", sorted(expected), env) == expected


def test_second_push_of_the_same_version_is_refused_and_the_tag_stays(hub, build, tmp_path):
    env = client_env(hub, tmp_path)
    assert run_push_cli([str(build), "--repo", REPO, "--version", "v1.0.0"], env).returncode == 0
    first = hub.repo(REPO).tags["v1.0.0"]
    changed = write_build(tmp_path / "changed", [make_pool("govreport", "easy", "logical_summarization", 4)])

    proc = run_push_cli([str(changed), "--repo", REPO, "--version", "1.0.0"], env)

    assert proc.returncode == 2
    assert "already has release v1.0.0" in proc.stderr and "immutable" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert hub.repo(REPO).tags == {"v1.0.0": first}
    assert hub.repo(REPO).branches["main"] == first  # nothing was committed either


def test_token_is_in_no_released_file_and_no_output(hub, build, tmp_path):
    env = client_env(hub, tmp_path)
    ok = run_push_cli([str(build), "--repo", REPO, "--version", "0.1.0"], env)
    # A failing push too: its error path formats client exceptions.
    hub.drop_connection(r"/commit/", times=10)
    changed = write_build(tmp_path / "changed", [make_pool("govreport", "easy", "logical_summarization", 4)])
    failed = run_push_cli([str(changed), "--repo", REPO, "--version", "0.2.0", "--retries", "1"], env)
    assert ok.returncode == 0 and failed.returncode == 2
    for proc in (ok, failed):
        assert TOKEN not in proc.stdout and TOKEN not in proc.stderr
    repo = hub.repo(REPO)
    for commit in repo.commits.values():
        assert TOKEN not in commit.title + commit.description
        for path, entry in commit.files.items():
            assert TOKEN.encode() not in entry.data, path
    assert all(TOKEN.encode() not in blob for blob in hub.lfs_objects.values())
    # The client's own files (cache, logs) hold no copy either: HF_TOKEN came from the environment.
    for path in (tmp_path / "hf_home").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_build_containing_the_token_is_refused(hub, build, tmp_path):
    (build / "figures").mkdir()
    (build / "figures" / "leak.txt").write_text(f"token={TOKEN}")
    proc = run_push_cli([str(build), "--repo", REPO, "--version", "1.0.0"], client_env(hub, tmp_path))
    assert proc.returncode == 2
    assert "figures/leak.txt contains the Hub token" in proc.stderr
    assert TOKEN not in proc.stderr + proc.stdout
    assert (("dataset", REPO) not in hub.repos)
