"""Failure handling of a push, driven in-process against the loopback Hub."""

from __future__ import annotations

import pytest

from mmlongembed.core.errors import UserError
from mmlongembed.publish.push import publish
from tests.support.publish_support import REPO, TOKEN, make_pool, write_build

@pytest.fixture()
def build(tmp_path):
    return write_build(tmp_path / "b1", [make_pool("govreport", "easy", "logical_summarization", 3)])


def push(hub, build, version, **kw):
    kw.setdefault("wait_s", 0.01)
    return publish(build, REPO, version, endpoint=hub.endpoint, token=TOKEN, log=lambda m: None, **kw)


def test_connection_dropped_at_commit_leaves_no_tag_and_a_rerun_succeeds(hub, build):
    hub.drop_connection(r"/api/datasets/.*/commit/main", times=3)
    with pytest.raises(UserError) as err:
        push(hub, build, "1.0.0", attempts=3)
    message = str(err.value)
    assert "nothing was tagged" in message and "rerun `mmle push" in message and "--version v1.0.0" in message
    repo = hub.repo(REPO)
    assert repo.tags == {}
    assert len(repo.commits) == 1  # only the repo's initial commit: no half-release on main

    result = push(hub, build, "1.0.0")
    assert repo.tags == {"v1.0.0": result.commit} and repo.branches["main"] == result.commit


def test_one_transient_drop_is_retried(hub, build):
    hub.drop_connection(r"/commit/main", times=1)
    result = push(hub, build, "1.0.0", attempts=2)
    assert hub.repo(REPO).tags["v1.0.0"] == result.commit
    assert sum(1 for m, p in hub.requests if p.endswith("/commit/main")) == 2


def test_commit_that_landed_but_whose_answer_was_lost_is_not_committed_twice(hub, build):
    hub.drop_connection(r"/commit/main", times=1, after=True)
    result = push(hub, build, "1.0.0", attempts=3)
    repo = hub.repo(REPO)
    assert len(repo.commits) == 2  # initial + one release commit, no duplicate
    assert repo.tags["v1.0.0"] == result.commit == repo.branches["main"]


def test_tag_failure_commits_but_does_not_tag_and_rerun_only_tags(hub, build):
    hub.drop_connection(r"/tag/", times=2)
    with pytest.raises(UserError, match="could not create tag v1.0.0.*to tag it"):
        push(hub, build, "1.0.0", attempts=2)
    repo = hub.repo(REPO)
    assert repo.tags == {}
    head = repo.branches["main"]
    result = push(hub, build, "1.0.0")
    assert result.commit == head and repo.tags == {"v1.0.0": head} and len(repo.commits) == 2


def test_dropped_lfs_upload_is_retried_by_the_client(hub, build):
    hub.drop_connection(r"/lfs-upload/", times=1)
    result = push(hub, build, "1.0.0", attempts=1)
    assert hub.repo(REPO).tags["v1.0.0"] == result.commit


def test_private_release_is_not_pushed_into_a_public_repo(hub, build):
    push(hub, build, "1.0.0")
    with pytest.raises(UserError, match="is public"):
        push(hub, build, "1.1.0", private=True)


@pytest.mark.parametrize("args, match", [
    (dict(repo_id="no-namespace", version="1.0.0"), "OWNER/NAME"),
    (dict(repo_id=REPO, version="1.0"), "MAJOR.MINOR.PATCH"),
    (dict(repo_id=REPO, version="v01.2.3"), "MAJOR.MINOR.PATCH"),
])
def test_bad_arguments_are_one_line_errors(hub, build, args, match):
    with pytest.raises(UserError, match=match):
        publish(build, endpoint=hub.endpoint, token=TOKEN, **args)


def test_incomplete_build_and_missing_token_are_refused(hub, build, tmp_path, monkeypatch):
    qrels = next((build / "data/govreport/qrels").glob("*.parquet"))
    qrels.unlink()
    with pytest.raises(UserError, match=f"qrels/{qrels.name}"):
        push(hub, build, "1.0.0")
    with pytest.raises(UserError, match="not a built benchmark: README.md is missing"):
        push(hub, tmp_path, "1.0.0")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nohome"))
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    with pytest.raises(UserError, match="no Hub token"):
        publish(build, REPO, "1.0.0", endpoint=hub.endpoint)


def test_a_build_that_validate_rejects_is_never_pushed(hub, build):
    """A corpus text edited after the build (same length, so no recount catches it): the file no
    longer matches the sha256 the manifest recorded, validation fails, nothing is pushed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = next((build / "data/govreport/corpus").glob("*.parquet"))
    table = pq.read_table(corpus)
    texts = table.column("text").to_pylist()
    texts[0] = texts[0].replace("report", "memo!")
    pq.write_table(table.set_column(table.column_names.index("text"), "text", pa.array(texts)), corpus)
    with pytest.raises(UserError, match="refusing to publish .*file_hashes"):
        push(hub, build, "1.0.0")
    assert ("dataset", REPO) not in hub.repos


def test_wrong_token_is_reported_without_echoing_it(hub, build):
    bad = "hf_wrongTOKEN000000000000000000"
    with pytest.raises(UserError) as err:
        publish(build, REPO, "1.0.0", endpoint=hub.endpoint, token=bad, log=lambda m: None, wait_s=0.01)
    assert bad not in str(err.value) and "\n" not in str(err.value)


def test_every_push_option_has_help():
    import argparse

    from mmlongembed.publish.push import add_arguments

    parser = argparse.ArgumentParser(prog="mmle push")
    add_arguments(parser)
    assert all(action.help for action in parser._actions)
    text = parser.format_help()
    for option in ("--repo", "--version", "--private", "--public", "--message", "--notes-file", "--endpoint",
                   "--large-folder", "--retries"):
        assert option in text
