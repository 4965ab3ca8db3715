"""The translation path and the `youkudc` builder, through the loopback OpenAI-compatible server:
the translation step on the real Chinese-English parallel NeedleBench items, and a YoukuDC build
in the release layout (meta_files CSV + data_files) over the six real clips with Chinese captions
taken from NeedleBench (written by this test, marked SYNTHETIC)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.llm import LLMConfig, translate
from mmlongembed.llm.fake_server import FakeOpenAIServer, first_user_message
from mmlongembed.llm.fake_captions import caption_responder
from tests.support.realdata import shared_data_dir

pytestmark = pytest.mark.realdata
CJK = re.compile(r"[\u3400-\u9fff]")


def parallel_items() -> list[tuple[str, str, str]]:
    """(id, Chinese, English) for every parallel sentence of the NeedleBench reasoning items."""
    root = shared_data_dir("needlebench")
    zh = {r["id"]: r for r in json.loads((root / "multi_needle_reasoning_zh.first200.json").read_text())}
    en = {r["id"]: r for r in json.loads((root / "multi_needle_reasoning_en.first200.json").read_text())}
    items = []
    for rid in sorted(set(zh) & set(en)):
        pairs = [(zh[rid]["question"], en[rid]["question"])]
        if len(zh[rid]["derivations"]) == len(en[rid]["derivations"]):
            pairs += list(zip(zh[rid]["derivations"], en[rid]["derivations"]))
        items += [(f"{rid}-{k}", a, b) for k, (a, b) in enumerate(pairs) if CJK.search(a)]
    return items


def test_translation_step_through_the_loopback_server(tmp_path):
    items = parallel_items()
    assert len({i.split("-")[0] for i, _, _ in items}) >= 180 and len(items) > 500
    table = {zh: en for _, zh, en in items}
    with FakeOpenAIServer(responder=caption_responder(table)) as server:
        config = LLMConfig(llm="openai", llm_base_url=server.url, llm_model="fake-model",
                           llm_cache=str(tmp_path / "cache"), llm_backoff=0.01)
        report = BuildReport()
        english = translate([(i, zh) for i, zh, _ in items], config, report)
        bodies = list(server.bodies)
    assert english == {i: en.strip() for i, _, en in items}
    assert not any(CJK.search(text) for text in english.values())
    assert all(body["temperature"] == 0.0 for body in bodies)  # greedy, as the paper's translator
    users = [first_user_message(body) for body in bodies]  # requests run concurrently: any order
    assert all(any(zh in user for user in users) for _, zh, _ in items)
    step = report.llm_steps[0]
    assert step["step"] == "translation" and step["calls"] == len(items) and step["prompt_hash"]
    # replayed from the cache: same answers, no server
    replayed = translate([(i, zh) for i, zh, _ in items], LLMConfig(
        llm="replay", llm_model="fake-model", llm_cache=str(tmp_path / "cache")), BuildReport())
    assert replayed == english
    with pytest.raises(UserError, match="translation step needs an LLM"):
        translate([("x", "你好")], LLMConfig(), BuildReport())


def write_youku_release(root: Path) -> dict[str, str]:
    """The release layout over the activitynet test's clips (the real sample clips and generated
    ones); captions are NeedleBench's Chinese sentences."""
    from tests.builders.test_temporal_build import sample_clips

    # whole sentences: the fake rewrite tells the captions apart by their full stops
    sentences = [(zh, en) for _, zh, en in parallel_items() if len(zh) < 60 and en.rstrip().endswith(".")]
    (root / "meta_files").mkdir(parents=True)
    rows, table, k = [], {}, 0
    for video_id, (clip, duration, events) in sample_clips(root / "data_files" / "Demo" / "test").items():
        name = clip.name
        captions = []
        for span, _ in events:
            zh, en = sentences[k * 7 % len(sentences)]
            k += 1
            table[zh] = en
            captions.append({"timestamp": span, "caption": zh})
        rows.append({"video_id": video_id, "video_path": f"test/{name}", "duration": duration,
                     "captions": json.dumps(captions, ensure_ascii=False)})
    with open(root / "meta_files" / "Demo.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (root / "SYNTHETIC").write_text("NeedleBench Chinese sentences as captions of package sample videos (tests).")
    return table


def test_youkudc_builds_through_the_loopback_llm(tmp_path, capsys):
    pytest.importorskip("av", reason="the optional extra [video] is not installed")
    from mmlongembed.cli import main as cli_main
    from mmlongembed.output.layout import read_built_pool
    from mmlongembed.build.validate import validate_dir

    sources = tmp_path / "youku"
    table = write_youku_release(sources)
    common = ["build", "youkudc", "--sources", str(sources), "--lengths", "128", "256", "--frame-max-pixels",
              str(160 * 90), "--frame-store", str(tmp_path / "store"), "--no-progress"]
    # translation has no offline fallback: one line, no build
    assert cli_main(common + ["--output", str(tmp_path / "none")]) == 2
    assert "translation step needs an LLM" in capsys.readouterr().err
    with FakeOpenAIServer(responder=caption_responder(table)) as server:
        code = cli_main(common + ["--output", str(tmp_path / "out"), "--llm", "openai", "--llm-base-url", server.url,
                                  "--llm-model", "fake-model", "--llm-cache", str(tmp_path / "cache")])
    assert code == 0
    out = tmp_path / "out" / "youkudc"
    problems, _ = validate_dir(out)
    assert not problems
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["step"] for s in manifest["llm_steps"]] == ["translation", "caption_rewrite"]
    assert all(s["backend"] == "openai" and not s["rejected"] for s in manifest["llm_steps"])
    assert any('"captions": "captions"' in n for n in manifest["report"]["notes"])  # the release columns read
    for pool in ("youkudc-hard-128", "youkudc-easy-256"):
        tables = read_built_pool(out, pool)
        query = tables.queries["text"][0]
        assert query.startswith("To begin, ") and not CJK.search(query)  # the LLM's rewrite, not the template
        raw, translated = tables.queries["raw_captions"][0], tables.queries["translated_captions"][0]
        assert CJK.search(raw) and not CJK.search(translated)
        shown = [(zh, en) for zh, en in table.items() if zh in raw]
        assert len(shown) >= 4 and all(en.strip() in translated for _, en in shown)  # each caption translated
    card = (out / "README.md").read_text()
    assert "SYNTHETIC" in card and "`translation` v" in card and "translated from Chinese literally" in card
