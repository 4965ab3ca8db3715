"""What a careless user runs into (issue 19 §3): each mistake ends in one line, at once."""

from __future__ import annotations

import pytest

from harness.cli import main as score_main


@pytest.mark.parametrize("typo", ["out/govreprot", "./govreprot", "~/no-such-mmle-build"])
def test_a_mistyped_local_dataset_is_one_line_without_asking_the_hub(typo, tmp_path, monkeypatch, capsys):
    (tmp_path / "out" / "govreport").mkdir(parents=True)  # the folder the user meant
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: today's code would retry the Hub
    monkeypatch.setenv("HOME", str(tmp_path))
    import datasets

    def no_hub(*args, **kwargs):
        raise AssertionError("the Hub was asked for a local path")

    monkeypatch.setattr(datasets, "load_dataset", no_hub)
    code = score_main(["--dataset", typo, "--model", "bm25", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "no such directory" in err[0] and ("govreprot" in err[0] or "no-such" in err[0]), err


def test_a_hub_repo_name_is_still_read_from_the_hub(tmp_path, monkeypatch):
    from harness.data import meant_as_path

    (tmp_path / "out").mkdir()
    assert not meant_as_path("org/benchmark")  # no folder `org` here: a Hub repo
    assert meant_as_path("out/benchmark") and meant_as_path("./x") and meant_as_path("/x") and meant_as_path("~/x")
