"""What `mmle models` says a profile does is what `mmle score --model NAME` does: the Doubao API's profile
runs its adapter, ColQwen2.5 runs, jina-embeddings-v4 is refused with its reason, and no profile keeps a
reason that went stale (a part of issue 26 said to come later that has come)."""

from __future__ import annotations

import pytest

from harness.models.adapters import RunSettings, load_model
from harness.profiles.catalogue import PROFILES
from mmlongembed.core.errors import UserError


def test_the_doubao_profile_runs_its_adapter_at_mtebs_endpoint(monkeypatch):
    from harness.models.doubao_model import ARK_BASE_URL, DoubaoModel

    monkeypatch.setenv("ARK_API_KEY", "sk-test-key")
    model = load_model("doubao-seed-1.6", RunSettings(progress=False))
    assert isinstance(model, DoubaoModel)
    assert model.spec == f"doubao:doubao-embedding-vision-251215@{ARK_BASE_URL}"
    monkeypatch.delenv("ARK_API_KEY")
    monkeypatch.delenv("VOLCES_AUTH_TOKEN", raising=False)
    with pytest.raises(UserError, match="no API key"):
        load_model("doubao-seed-1.6", RunSettings(progress=False))


def test_a_profile_that_does_not_run_is_refused_with_its_reason():
    refused = [p for p in PROFILES.values() if not p.runnable]
    assert [p.name for p in refused] == ["jina-embeddings-v4"]
    for profile in refused:
        with pytest.raises(UserError, match="modeling_jina_embeddings_v4.py"):
            load_model(profile.name, RunSettings(progress=False))


def test_no_reason_or_note_promises_what_already_exists():
    for profile in PROFILES.values():
        for text in (profile.unverified_reason, *profile.notes):
            assert "comes later" not in text and "not yet in the scoring path" not in text, profile.name


def test_mmle_models_says_whether_score_runs_a_profile(capsys):
    from mmlongembed.cli import main

    assert main(["models", "colqwen2.5", "jina-embeddings-v4", "doubao-seed-1.6"]) == 0
    out = capsys.readouterr().out
    assert "| colqwen2.5 | - | 128000 | 3B | 128 | Other | qwen2_5_vl | yes: mteb's ColQwen2_5Wrapper" in out
    assert "- `mmle score --model colqwen2.5`: runs" in out
    assert "- `mmle score --model jina-embeddings-v4`: refused (facts only" in out
    assert "- `mmle score --model doubao-seed-1.6`: runs" in out
