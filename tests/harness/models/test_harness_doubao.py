"""The Doubao-Seed-1.6 API adapter (`doubao:<model>@<base_url>`, harness.models.doubao_model) against the
loopback fake speaking the Ark multimodal shapes: text, images as base64 data URLs, interleaved
inputs, mteb's instructions, the openai: adapter's retries, and a key read from the environment
that never shows in a spec, identity, message, report or the cache."""

from __future__ import annotations

import base64
import json

import pytest

from harness.scoring.data import Item
from harness.models.doubao_model import DoubaoModel, instruction_for
from harness.models.fake_server import FakeEmbeddingServer
from harness.fixtures import png
from harness.models.adapters import RunSettings, load_model
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from tests.support.fixtures_harness import run_score, standard_benchmark

SECRET = "ark-test-0123456789-secret"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("VOLCES_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("ARK_API_KEY", SECRET)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return standard_benchmark(tmp_path_factory.mktemp("bench") / "fixture")


def score(tmp_path, dataset, *extra, name="out"):
    return run_score(tmp_path, dataset, *extra, name=name, bootstrap=50)


def test_text_and_interleaved_pools_score_through_the_ark_shapes(tmp_path, bench, capsys):
    with FakeEmbeddingServer(api_key=SECRET) as server:
        spec = f"doubao:doubao-embedding-vision-251215@{server.base_url}"
        code, report, output = score(tmp_path, bench, "--model", spec, "--pools", "govreport-easy-256", "slides-*")
        received = list(server.received)
        assert code == 0
        rows = {r["pool"]: r for r in report["results"]}
        assert set(rows) == {"govreport-easy-256", "slides-easy-512"}
        assert all(r["metrics"]["p@1"]["value"] == 1.0 for r in rows.values())  # shared words -> the positive
        assert server.requests == 2 * (4 + 16)  # one request per input
        # a second run is served from the cache: no request
        code, _, _ = score(tmp_path, bench, "--model", spec, "--pools", "govreport-easy-256", "slides-*", name="again")
        assert code == 0 and server.requests == 40
    assert {r["path"] for r in received} == {"/v1/embeddings/multimodal"}
    assert all(r["headers"]["x-ark-vlm1"] == "true" for r in received)
    payloads = [r["payload"] for r in received]
    assert {p["model"] for p in payloads} == {"doubao-embedding-vision-251215"}
    queries = [p for p in payloads if p["instruction"].startswith("Target_modality:Text.")]
    assert len(queries) == 8
    assert queries[0]["instruction"] == ("Target_modality:Text.\n Instruction:Retrieve the report the question is "
                                         "about.\n Query:")
    assert queries[0]["input"][0]["type"] == "text" and queries[0]["input"][0]["text"].startswith("Which report")
    documents = [p for p in payloads if p not in queries]
    texts = [p for p in documents if all(part["type"] == "text" for part in p["input"])]
    mixed = [p for p in documents if p not in texts]
    assert len(texts) == 16 and len(mixed) == 16
    assert {p["instruction"] for p in texts} == {"Instruction: Compress the text into one word.\n Query:"}
    assert {p["instruction"] for p in mixed} == {"Instruction: Compress the text and image into one word.\n Query:"}
    # the image as a base64 PNG data URL among the text (the order is tested on an interleaved item below)
    kinds = [part["type"] for part in mixed[0]["input"]]
    assert kinds.count("image_url") == 1 and "text" in kinds
    url = next(part for part in mixed[0]["input"] if part["type"] == "image_url")["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1])[:4] == b"\x89PNG"
    written = "".join(p.read_text(errors="replace") for p in output.rglob("*") if p.is_file())
    cache = (tmp_path / "cache" / "embeddings.sqlite").read_bytes()
    assert SECRET not in written + "".join(capsys.readouterr()) and SECRET.encode() not in cache


def test_image_only_and_interleaved_inputs():
    picture, other = png((10, 200, 30)), png((200, 10, 30), fmt="JPEG")
    item = Item(id="c", text=IMAGE_PLACEHOLDER, images=(picture,))
    assert instruction_for(item) == "Instruction: Compress the image into one word.\n Query:"
    interleaved = Item(id="i", text=f"first {IMAGE_PLACEHOLDER} second {IMAGE_PLACEHOLDER}", images=(picture, other))
    with FakeEmbeddingServer(api_key=SECRET) as server:
        model = load_model(f"doubao:m@{server.base_url}", RunSettings(progress=False))
        vectors, truncated = model.embed([item, Item(id="t", text="plain words"), interleaved])
        model.close()
        image_only, _, both = [r["payload"] for r in server.received]
    assert vectors.shape == (3, 256) and truncated == [False, False, False]
    assert [part["type"] for part in image_only["input"]] == ["image_url"]
    assert base64.b64decode(image_only["input"][0]["image_url"]["url"].split(",", 1)[1]) == picture
    assert [part.get("text") or part["image_url"]["url"][:15] for part in both["input"]] == [
        "first ", "data:image/png;", " second ", "data:image/jpeg"]


def test_retries_as_the_openai_adapter_then_skips_in_one_line(tmp_path, bench, capsys):
    pool = ("--pools", "govreport-easy-256", "--no-cache")
    with FakeEmbeddingServer(api_key=SECRET) as server:
        spec = f"doubao:m@{server.base_url}"
        server.fail_next(2, status=429, retry_after="0.01")
        code, report, _ = score(tmp_path, bench, "--model", spec, *pool)
        assert code == 0 and server.requests == 2 + 20  # two refusals retried, then one request per input
        server.fail_next(3, status=502, retry_after="0.01")
        code, report, output = score(tmp_path, bench, "--model", spec, *pool, name="exhausted")
        assert server.requests == 22 + 3  # one try and two retries, then the pool is skipped
        reason = report["skipped"][0]["reason"]
        assert code == 1 and reason.startswith("server answered 502: ") and "\n" not in reason
    with FakeEmbeddingServer(api_key="another-key") as server:  # a wrong key: 401, not retried
        code, report, _ = score(tmp_path, bench, "--model", f"doubao:m@{server.base_url}", *pool, name="denied")
        assert code == 1 and server.requests == 0
        assert report["skipped"][0]["reason"].startswith("server answered 401")
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET not in written + "".join(capsys.readouterr())


def test_the_key_comes_from_the_environment_and_stays_out_of_sight(monkeypatch):
    model = DoubaoModel("m", "http://127.0.0.1:9/api/v3", RunSettings(progress=False))
    assert SECRET not in repr(model) + json.dumps(model.identity()) + model.spec
    monkeypatch.delenv("ARK_API_KEY")
    monkeypatch.setenv("VOLCES_AUTH_TOKEN", "mteb-name")  # mteb's variable works too
    assert DoubaoModel("m", "http://127.0.0.1:9", RunSettings(progress=False))._key == "mteb-name"
    monkeypatch.delenv("VOLCES_AUTH_TOKEN")
    with pytest.raises(UserError, match="ARK_API_KEY"):
        load_model("doubao:m@http://127.0.0.1:9", RunSettings(progress=False))
    with pytest.raises(UserError, match="doubao:<model>@<base_url>"):
        load_model("doubao:m", RunSettings(progress=False))
