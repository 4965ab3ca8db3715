"""Model profiles: `mmle models`, each model's own count (issue 26 point 3), `--model NAME --model-path`,
and `make table3`'s CPU dry run on tiny models of each architecture."""

from __future__ import annotations

import json

import pytest

from harness.fixtures import make_pool, png, write_benchmark

OPEN_PAPER_MODELS = {"qwen3-vl-2b", "qwen3-vl-8b", "gme-qwen2-vl-2b", "gme-qwen2-vl-7b", "rzen-v2-7b",
                     "ops-mm-v1-2b", "ops-mm-v1-7b", "embed-rl-2b", "embed-rl-4b", "vlm2vec-qwen2vl-2b"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_every_profile_names_its_facts_sources_and_is_verified_or_says_why():
    from harness.profiles.catalogue import PROFILES

    assert OPEN_PAPER_MODELS | {"jina-embeddings-v4", "colqwen2.5", "doubao-seed-1.6"} == set(PROFILES)
    for profile in PROFILES.values():
        assert profile.sources and all(s.repo and s.path and s.commit for s in profile.sources.values())
        assert (profile.verified is None) != (not profile.unverified_reason), profile.name
        if profile.name in OPEN_PAPER_MODELS:
            assert profile.paper_name and profile.window == 32768
            assert {"prompt", "pooling", "images"} <= set(profile.sources) or profile.verified is None


def test_mmle_models_lists_table2_columns_status_and_sources(capsys):
    from mmlongembed.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "| model | paper's name | context length | size | embedding dim | group | family | verified |" in out
    assert "| gme-qwen2-vl-2b | GME-Qwen2-VL-2B | 32768 | 2B | 1536 |" in out
    assert "| vlm2vec-qwen2vl-2b | VLM2Vec-Qwen2VL-2B | 32768 | 2B | 1536 |" in out
    assert "yes: the official MMEBModel" in out and "no: not runnable: its modelling code" in out
    assert "- source of prompt: embeddings-benchmark/mteb:mteb/models/model_implementations/gme_v_models.py@" in out
    assert "- query: instruction in the system prompt; pooling last;" in out
    assert "- document: no instruction; pooling last;" in out and "instruction in the none" not in out
    assert main(["models", "gme-qwen2-vl-2b", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[0]
    assert record["images"]["patch_size"] == 14 and record["status"].startswith("verified")
    assert main(["models", "no-such-model"]) == 2


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    from harness.models.tiny_models import make_tiny

    root = tmp_path_factory.mktemp("tiny-profiles")
    return {family: make_tiny(root / family, family) for family in ("qwen2_vl", "qwen3_vl")}


def _model(name, directory, **settings):
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel
    from harness.profiles.catalogue import get_profile

    return ProfileModel(get_profile(name), RunSettings(progress=False, **settings), str(directory))


def test_a_28_pixel_model_pays_more_tokens_for_an_image_than_the_32_pixel_yardstick(tiny_models):
    """512x512: 256 cells of 32 px on the yardstick (and for Qwen3-VL), 18x18 = 324 cells of 28 px for
    GME (504x504 after its own resizing): a 32K image pool is ~42K tokens for it."""
    from mmlongembed.core.tokens import image_tokens

    picture = png((10, 120, 200), size=(512, 512))
    assert image_tokens(512, 512) == 256
    assert _model("gme-qwen2-vl-2b", tiny_models["qwen2_vl"]).image_cost(picture) == 324
    assert _model("qwen3-vl-2b", tiny_models["qwen3_vl"]).image_cost(picture) == 256


def test_own_count_and_truncation_follow_the_models_own_tokens(tiny_models):
    """An image-only candidate that fits the yardstick's window is over a 28-px model's window: it loses
    its middle images, and is counted over the window."""
    from harness.scoring.data import Item

    pictures = tuple(png((20 * k, 60, 90), size=(512, 512)) for k in range(4))
    item = Item("c", "<|image|>" * 4, pictures)
    gme = _model("gme-qwen2-vl-2b", tiny_models["qwen2_vl"], max_length=1200)
    qwen3 = _model("qwen3-vl-2b", tiny_models["qwen3_vl"], max_length=1200)
    # 4 x 256 = 1024 yardstick tokens; GME: 4 x (324 + 2) + its template; Qwen3-VL: 4 x (256 + 2) + template
    assert gme.encode_item(item).own_tokens > 1200 >= qwen3.encode_item(item).own_tokens
    assert gme.encode_item(item).truncated and len(gme.encode_item(item).images) == 3
    assert not qwen3.encode_item(item).truncated


def test_score_a_profile_end_to_end_with_its_own_lengths(tmp_path, tiny_models):
    from harness.cli import main

    bench = write_benchmark(tmp_path / "bench", [
        make_pool("slides-easy-512", dataset="slides", task="visual_grounding", words=80, images=True, n_queries=3),
        make_pool("govreport-easy-256", words=60, n_queries=3)])
    output = tmp_path / "out"
    code = main(["--dataset", str(bench), "--model", "gme-qwen2-vl-2b", "--model-path",
                 f"gme-qwen2-vl-2b={tiny_models['qwen2_vl']}", "--max-length", "120", "--output", str(output),
                 "--cache-dir", str(tmp_path / "cache"), "--quiet", "--bootstrap", "20", "--no-plots"])
    assert code == 0
    report = json.loads((output / "results.json").read_text())
    assert report["models"][0]["identity"]["profile"] == "gme-qwen2-vl-2b"
    for row in report["results"]:
        own = row["own_lengths"]
        assert own["window"] == 120 and own["image_cell_px"] == 28
        assert own["candidates"]["over_window"] == row["truncated"]["candidates"]
        assert own["queries"]["over_window"] == row["truncated"]["queries"]
        assert own["candidates"]["own_mean"] > own["candidates"]["yardstick_mean"]  # the chat template at least
    assert any(row["truncated"]["candidates"] for row in report["results"])
    assert "Each model's own count" in (output / "table.md").read_text()


def test_model_path_is_checked(tmp_path, capsys):
    from harness.cli import main

    bench = write_benchmark(tmp_path / "bench", [make_pool("govreport-easy-256", words=30, n_queries=2)])
    assert main(["--dataset", str(bench), "--model", "gme-qwen2-vl-2b", "--model-path", "gme-qwen2-vl-2b",
                 "--quiet"]) == 2
    assert "expected NAME=DIR" in capsys.readouterr().err
    assert main(["--dataset", str(bench), "--model", "gme-qwen2-vl-2b", "--model-path",
                 f"gme-qwen2-vl-2b={tmp_path / 'nowhere'}", "--quiet"]) == 2
    assert "no such directory" in capsys.readouterr().err


@pytest.mark.slow
def test_table3_dry_run_on_tiny_models_of_two_families(tmp_path, capsys):
    from harness.table3 import run

    bench = write_benchmark(tmp_path / "bench", [
        make_pool("slides-easy-512", dataset="slides", task="visual_grounding", words=40, images=True, n_queries=2),
        make_pool("govreport-easy-256", words=40, n_queries=2)])
    code = run(["--dataset", str(bench), "--models", "gme-qwen2-vl-2b,qwen3-vl-2b,embed-rl-4b,vlm2vec-qwen2vl-2b", "--tiny",
                "--output", str(tmp_path / "t3"), "--score-args", "--quiet --bootstrap 20"])
    assert code == 0
    board = (tmp_path / "t3" / "leaderboard.md").read_text()
    assert "| gme-qwen2-vl-2b |" in board and "| qwen3-vl-2b |" in board
    assert "| Qwen3-VL-2B | paper (published) |" in board  # beside the paper's rows
    notes = {}
    for name in ("gme-qwen2-vl-2b", "qwen3-vl-2b", "embed-rl-4b", "vlm2vec-qwen2vl-2b"):
        rows = json.loads((tmp_path / "t3" / name / "results.json").read_text())["results"]
        assert rows and all("own_lengths" in r for r in rows)
        notes[name] = rows[0]["notes"]
    # a verified profile's results say nothing (an unverified one's say so: tests/harness/profiles/test_profiles_vlm2vec.py)
    for name in ("qwen3-vl-2b", "embed-rl-4b", "vlm2vec-qwen2vl-2b"):
        assert not any(note.startswith("profile unverified:") for note in notes[name]), name


def test_mmle_models_marks_each_dimension_that_differs_from_table_2():
    from harness.profiles.catalogue import PROFILES
    from harness.profiles.cli import table
    from harness.report.leaderboard import reference

    table2 = {m["model"]: m["embedding_dim"] for m in reference("paper")["models"]}
    differing = set()
    for profile in PROFILES.values():
        published = table2.get(profile.paper_name)
        expected = published if published is not None and published != profile.dim else None
        assert profile.paper_dim == expected, profile.name
        if expected:
            differing.add(profile.name)
    assert differing == {"ops-mm-v1-2b", "embed-rl-2b"}
    shown = table(list(PROFILES.values()))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in shown.splitlines() if line.startswith("| ")}
    assert "| 1536 (Table 2: 2048 \u2260) |" in rows["ops-mm-v1-2b"]
    assert "| 2048 (Table 2: 1536 \u2260) |" in rows["embed-rl-2b"]
    assert "\u2260" not in rows["gme-qwen2-vl-2b"]
