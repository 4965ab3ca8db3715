"""The builders' Hub paths, end to end over real HTTP: each source is published to the loopback Hub
in its original Hub format and file layout, made resolvable at the exact revision the builder pins,
and `mmle build <builder>` runs without --sources in a subprocess whose HF_ENDPOINT points at the
loopback server. No client is mocked: huggingface_hub and datasets do the talking."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builders._govreport_fixtures import write_govreport_jsonl
from builders._mmdocrag_fixtures import write_mmdocrag_jsonl
from builders._mmlongbench_fixtures import write_paged_sources
from builders._needle_fixtures import NAMES, NEEDLE_RECORDS, needle_prose
from builders.govreport import HUB_SOURCE as GOVREPORT
from builders.mmdocrag import HUB_SOURCE as MMDOCRAG
from builders.mmlongbench import DOC_HUB as MMLONGBENCH_DOC
from builders.mmlongbench import DOC_HUB_SAMPLES
from builders.hotpotqa import HUB_PADDING as WIKITEXT
from builders.hotpotqa import HUB_SOURCE as HOTPOTQA
from builders._hotpotqa_fixtures import write_hotpotqa_sources
from mmlongembed.readers.hotpotqa import parse_instance
from mmlongembed.readers.needle import NEEDLEBENCH, OBELICS
from mmlongembed.core.rng import derive_rng
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.publish_support import TOKEN, client_env
from tests.support.python_env import python_env


# -- helpers ----------------------------------------------------------------------------------

def publish(hub, source, files: dict[str, bytes]) -> None:
    """Create ``source.repo`` on the loopback Hub, commit ``files`` in one commit, and make the
    builder's pinned ``source.revision`` resolve to that commit."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(source.repo, repo_type="dataset", exist_ok=True)
    api.create_commit(source.repo, repo_type="dataset", commit_message="upload",
                      operations=[CommitOperationAdd(path, data) for path, data in files.items()])
    hub.alias(source.repo, source.revision)


def parquet_bytes(rows: list[dict], features=None) -> bytes:
    import datasets

    buffer = io.BytesIO()
    datasets.Dataset.from_list(rows, features=features).to_parquet(buffer)
    return buffer.getvalue()


def card(configs: dict[str, dict[str, str]], extra: str = "") -> bytes:
    """A dataset card whose YAML lists configs -> split -> data_files glob, like the real repos."""
    lines = ["---", "license: other", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        for split, path in splits.items():
            lines += [f"  - split: {split}", f"    path: {path}"]
    return ("\n".join(lines) + "\n---\n" + extra).encode()


def mmle_build(args: list[str], env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmlongembed.cli", "build", *args, "--no-progress"],
                          env=python_env(env), capture_output=True, text=True, timeout=timeout)


def built_ok(proc: subprocess.CompletedProcess, out: Path) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    return json.loads((out / "manifest.json").read_text())


def corpus_rows(build: Path) -> list[dict]:
    """Every pool's candidates as rows, the audit joined in."""
    from mmlongembed.output.layout import pool_rows, read_built_pool

    rows = []
    for pool in pool_rows(build):
        corpus = read_built_pool(build, pool["pool"]).corpus
        rows.extend(dict(zip(corpus, values)) for values in zip(*corpus.values()))
    return rows


def pinned_requests(hub, source) -> list[str]:
    return [path for _, path in hub.requests if source.repo in path and source.revision in path]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nowhere_env(tmp_path: Path) -> dict:
    """A client environment whose Hub endpoint is a closed loopback port: no Hub at all."""
    return client_env(type("Nowhere", (), {"endpoint": f"http://127.0.0.1:{closed_port()}"})(), tmp_path, token=None)


# -- GovReport: ccdv/govreport-summarization, config document, split test ----------------------------

def test_govreport_builds_from_the_hub_at_its_pinned_revision(hub, tmp_path):
    records = write_govreport_jsonl(tmp_path / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
    rows = [{"report": r["report"], "summary": r["summary"]} for r in records]  # the repo has no id column
    decoy = [{"report": r["report"] + " decoy", "summary": r["summary"]} for r in records[:4]]
    publish(hub, GOVREPORT, {
        "README.md": card({"document": {s: f"document/{s}-*" for s in ("train", "validation", "test")}}),
        "document/train-00000-of-00002.parquet": parquet_bytes(decoy),
        "document/train-00001-of-00002.parquet": parquet_bytes(decoy),
        "document/validation-00000-of-00001.parquet": parquet_bytes(decoy),
        "document/test-00000-of-00001.parquet": parquet_bytes(rows),
    })
    out = tmp_path / "out"
    proc = mmle_build(["govreport", "--output", str(out), "--lengths", "2048", "4096",
                       "--max-queries-per-pool", "4"], client_env(hub, tmp_path, token=None))

    manifest = built_ok(proc, out / "govreport")
    assert manifest["sources"]["kind"] == "hub"
    assert manifest["sources"]["revision"] == GOVREPORT.revision and manifest["sources"]["split"] == "test"
    texts = [row["text"] for row in corpus_rows(out / "govreport")]
    assert texts and not any("decoy" in t for t in texts)  # the test split only, never train/validation
    assert pinned_requests(hub, GOVREPORT)


# -- HotpotQA: hotpotqa/hotpot_qa distractor validation + Salesforce/wikitext padding ----------------

def _hotpot_features():
    from datasets import Features, Sequence, Value

    return Features({
        "id": Value("string"), "question": Value("string"), "answer": Value("string"), "type": Value("string"),
        "level": Value("string"),
        "supporting_facts": Sequence({"title": Value("string"), "sent_id": Value("int32")}),
        "context": Sequence({"title": Value("string"), "sentences": Sequence(Value("string"))}),
    })


def _hub_row(record: dict) -> dict:
    """An original HotpotQA record in the Hub's column layout (struct of lists)."""
    return {
        "id": record["_id"], "question": record["question"], "answer": record["answer"], "type": record["type"],
        "level": record["level"],
        "supporting_facts": {"title": [t for t, _ in record["supporting_facts"]],
                             "sent_id": [i for _, i in record["supporting_facts"]]},
        "context": {"title": [t for t, _ in record["context"]], "sentences": [s for _, s in record["context"]]},
    }


def _wikitext_rows(raw: str) -> list[dict]:
    """WikiText raw text as the Hub's `text` rows: one per line, newline kept, blank lines empty."""
    return [{"text": line + "\n" if line.strip() else ""} for line in raw.replace("\r\n", "\n").split("\n")]


def publish_wikitext(hub, raw_file: Path) -> None:
    """A WikiText raw file as Salesforce/wikitext publishes it: `text` rows in two train shards of
    its WikiText-103 config (split between articles), decoy rows in the other splits and config."""
    lines = _wikitext_rows(raw_file.read_text(encoding="utf-8"))
    half = len(lines) // 2
    while lines[half]["text"] and not lines[half]["text"].startswith(" = "):  # split shards between articles
        half += 1
    other = [{"text": ""}, {"text": " = Wrong Config Article = \n"}, {"text": " Never padding . \n"}]
    publish(hub, WIKITEXT, {
        "README.md": card({c: {s: f"{c}/{s}-*" for s in ("train", "validation", "test")}
                           for c in ("wikitext-103-raw-v1", "wikitext-2-raw-v1")}),
        f"{WIKITEXT.config}/train-00000-of-00002.parquet": parquet_bytes(lines[:half]),
        f"{WIKITEXT.config}/train-00001-of-00002.parquet": parquet_bytes(lines[half:]),
        f"{WIKITEXT.config}/validation-00000-of-00001.parquet": parquet_bytes(other),
        f"{WIKITEXT.config}/test-00000-of-00001.parquet": parquet_bytes(other),
        **{f"wikitext-2-raw-v1/{s}-00000-of-00001.parquet": parquet_bytes(other)
           for s in ("train", "validation", "test")},
    })


def test_hotpotqa_hub_layout_converts_to_the_same_instances(tmp_path):
    import datasets

    write_hotpotqa_sources(tmp_path, n_instances=6, n_articles=1)
    records = [json.loads(line) for line in (tmp_path / "hotpotqa" / "sample.jsonl").read_text().splitlines()]
    path = tmp_path / "validation.parquet"
    path.write_bytes(parquet_bytes([_hub_row(r) for r in records], _hotpot_features()))
    loaded = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert isinstance(loaded[0]["context"], dict) and isinstance(loaded[0]["supporting_facts"], dict)
    for row, record in zip(loaded, records):
        from_hub, reason = parse_instance(row, "x")
        original, _ = parse_instance(record, "x")
        assert from_hub is not None, reason
        assert from_hub == original


def test_hotpotqa_builds_from_the_hub_at_its_pinned_revisions(hub, tmp_path):
    write_hotpotqa_sources(tmp_path)
    records = [json.loads(line) for line in (tmp_path / "hotpotqa" / "sample.jsonl").read_text().splitlines()]
    features = _hotpot_features()
    decoy = dict(_hub_row(records[0]), id="TRAIN-only")
    publish(hub, HOTPOTQA, {
        "README.md": card({"distractor": {"train": "distractor/train-*", "validation": "distractor/validation-*"}}),
        "distractor/train-00000-of-00001.parquet": parquet_bytes([decoy], features),
        "distractor/validation-00000-of-00001.parquet": parquet_bytes([_hub_row(r) for r in records], features),
    })
    publish_wikitext(hub, tmp_path / "haystack_text" / "wikitext-2-raw" / "wiki.sample.raw")
    out = tmp_path / "out"
    proc = mmle_build(["hotpotqa", "--output", str(out), "--lengths", "1024", "2048", "--max-queries-per-pool", "4"],
                      client_env(hub, tmp_path, token=None))

    manifest = built_ok(proc, out / "hotpotqa")
    sources = manifest["sources"]
    assert (sources["revision"], sources["split"]) == (HOTPOTQA.revision, "validation")
    assert (sources["padding"]["revision"], sources["padding"]["config"]) == (WIKITEXT.revision, WIKITEXT.config)
    rows = corpus_rows(out / "hotpotqa")
    by_id = {r["_id"]: r for r in records}
    assert {r["source_id"] for r in rows} <= set(by_id)  # validation only
    padding = [p["id"] for r in rows for p in json.loads(r["provenance"]).get("padding", [])]
    assert any(p.startswith("article:wikitext-103:") for p in padding)
    assert not any("Wrong Config" in r["text"] for r in rows)
    for r in rows:  # the evidence of the Hub rows survived the conversion
        provenance = json.loads(r["provenance"])
        if r["role"] == "positive":
            assert provenance["n_evidence"] == len(by_id[r["source_id"]]["supporting_facts"])
    assert pinned_requests(hub, HOTPOTQA) and pinned_requests(hub, WIKITEXT)


def _hotpotqa_without_local_padding(tmp_path: Path) -> tuple[Path, Path]:
    """Local HotpotQA files with no WikiText in them or next to them: (sources, the WikiText raw
    file written elsewhere)."""
    elsewhere = tmp_path / "elsewhere" / "wiki"
    write_hotpotqa_sources(tmp_path / "src", padding_dir=elsewhere)
    assert not (tmp_path / "src" / "haystack_text").exists() and not (tmp_path / "haystack_text").exists()
    return tmp_path / "src", elsewhere / "wiki.sample.raw"


def test_hotpotqa_local_sources_without_wikitext_pad_with_the_hubs_as_the_help_says(hub, tmp_path):
    """--sources with no WikiText beside it: the Hub's WikiText-103 at its pinned revision (it once
    padded with nothing, silently, while the card said WikiText)."""
    sources, raw = _hotpotqa_without_local_padding(tmp_path)
    publish_wikitext(hub, raw)
    out = tmp_path / "out"
    proc = mmle_build(["hotpotqa", "--sources", str(sources), "--output", str(out), "--lengths", "1024", "2048",
                       "--max-queries-per-pool", "4"], client_env(hub, tmp_path, token=None))
    manifest = built_ok(proc, out / "hotpotqa")
    assert manifest["sources"]["kind"] == "local"
    padding = manifest["sources"]["padding"]
    assert (padding["revision"], padding["config"]) == (WIKITEXT.revision, WIKITEXT.config)
    ids = [p["id"] for r in corpus_rows(out / "hotpotqa") for p in json.loads(r["provenance"]).get("padding", [])]
    assert any(p.startswith("article:wikitext-103:") for p in ids)
    card_text = (out / "hotpotqa" / "README.md").read_text()
    assert f"`{WIKITEXT.repo}` `{WIKITEXT.config}` @ `{WIKITEXT.revision}`" in card_text
    assert pinned_requests(hub, WIKITEXT) and not pinned_requests(hub, HOTPOTQA)


def test_hotpotqa_without_any_padding_source_is_one_line_naming_padding(tmp_path):
    sources, _ = _hotpotqa_without_local_padding(tmp_path)
    proc = mmle_build(["hotpotqa", "--sources", str(sources), "--output", str(tmp_path / "out"), "--lengths", "1024",
                       "--max-queries-per-pool", "4"], nowhere_env(tmp_path), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert WIKITEXT.repo in lines[0] and "pass --padding with a WikiText raw file" in lines[0]
    assert "--padding none" in lines[0] and "--sources DIR" not in lines[0]  # --sources is given already
    assert not (tmp_path / "out" / "hotpotqa").exists()


def test_hotpotqa_padding_none_pads_with_paragraphs_only_and_the_card_says_so(tmp_path):
    sources, _ = _hotpotqa_without_local_padding(tmp_path)
    out = tmp_path / "out"
    proc = mmle_build(["hotpotqa", "--sources", str(sources), "--output", str(out), "--lengths", "1024", "2048",
                       "--max-queries-per-pool", "4", "--padding", "none"], nowhere_env(tmp_path))
    manifest = built_ok(proc, out / "hotpotqa")
    assert manifest["sources"]["padding"]["name"].startswith("none")
    ids = [p["id"] for r in corpus_rows(out / "hotpotqa") for p in json.loads(r["provenance"]).get("padding", [])]
    assert ids and all(p.startswith("paragraph:") for p in ids)
    card_text = (out / "hotpotqa" / "README.md").read_text()
    assert "this build uses none (`--padding none`)" in card_text and "WikiText articles first" not in card_text
    assert "uses WikiText articles" not in card_text and "WikiText (Merity" not in card_text


# -- Visual grounding: NeedleBench needles + OBELICS haystacks with images by URL -------------------

class ImageServer:
    """Web images on loopback: path -> bytes, 404 for anything else."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.requests = files, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                body = server.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _png(i: int, w: int, h: int) -> bytes:
    from PIL import Image

    pixels = (derive_rng(i, "hub-photo").random((h, w, 3)) * 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _obelics_rows(image_urls: list[list[str]]) -> list[dict]:
    """OBELICS documents: `texts` and `images` are aligned lists, exactly one of each pair set."""
    rng = derive_rng(0, "obelics-fixture")
    rows = []
    for d, urls in enumerate(image_urls):
        texts, images = [], []
        for url in urls:
            texts += [needle_prose(rng, 8), None]
            images += [None, url]
        texts.append(needle_prose(rng, 8))
        images.append(None)
        rows.append({"images": images, "metadata": json.dumps([None] * len(images)),
                     "general_metadata": json.dumps({"url": f"https://example.org/doc{d}"}), "texts": texts})
    return rows


def test_needle_builds_from_needlebench_and_obelics_on_the_hub(hub, tmp_path):
    good = {f"/img{i}.png": _png(i, w, h) for i, (w, h) in enumerate([(300, 200), (240, 240), (200, 320), (256, 192)])}
    files = {**good, "/notanimage.png": b"<html>gone</html>"}
    with ImageServer(files) as web:
        dead = f"http://127.0.0.1:{closed_port()}/img.png"
        urls = [[f"{web.url}/img0.png", f"{web.url}/missing.png"], [f"{web.url}/img1.png", dead],
                [f"{web.url}/notanimage.png", f"{web.url}/img2.png"], [f"{web.url}/img3.png", f"{web.url}/img0.png"]]
        rows = _obelics_rows(urls)
        publish(hub, NEEDLEBENCH, {
            "README.md": card({"retrieval_needles": {"test": "needles.jsonl"}, "atc_needles": {"test": "names.json"},
                               "en_haystack_texts": {"test": "PaulGrahamEssays.jsonl"}}),
            "needles.jsonl": ("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in NEEDLE_RECORDS)
                              + "{not json\n").encode(),
            "names.json": json.dumps({"English": NAMES, "Chinese": "张三,李四"}, ensure_ascii=False).encode(),
            "PaulGrahamEssays.jsonl": b'{"title": "essay", "text": "Not read by the Hub path."}\n',
        })
        publish(hub, OBELICS, {
            "README.md": card({"default": {"train": "data/train-*"}}),
            "data/train-00000-of-00002-5f2c1d0a9b8e7f61.parquet": parquet_bytes(rows[:2]),
            "data/train-00001-of-00002-0a1b2c3d4e5f6789.parquet": parquet_bytes(rows[2:]),
        })
        out = tmp_path / "out"
        proc = mmle_build(["needle", "--output", str(out), "--lengths", "256", "--depths", "0", "100",
                           "--needles-per-pool", "4", "--hub-documents", "4", "--hub-images", "10",
                           "--image-timeout", "5"], client_env(hub, tmp_path, token=None))
        fetched = list(web.requests)

    manifest = built_ok(proc, out / "needle")
    sources = manifest["sources"]
    assert sources["kind"] == "hub"
    assert sources["needles"]["revision"] == NEEDLEBENCH.revision
    assert (sources["haystack"]["revision"], sources["haystack"]["config"]) == (OBELICS.revision, "default")
    skipped = manifest["report"]["skipped"]
    assert skipped["image_fetch_failed"] == 2 and skipped["unreadable_image"] == 1
    assert skipped["malformed_json_line"] == 1
    assert sorted(set(fetched)) == sorted({*good, "/missing.png", "/notanimage.png"})
    assert fetched.count("/img0.png") == 1  # a URL repeated across documents is fetched once
    rows = corpus_rows(out / "needle")
    assert {r["background"] for r in rows} == {"text", "mixed", "image"}
    haystacks = {s for r in rows for s in json.loads(r["provenance"])["haystack"]["sources"]}
    assert any(s.startswith("obelics:") and ":image" in s for s in haystacks)
    assert any(s.startswith("obelics:") and ":image" not in s for s in haystacks)
    assert pinned_requests(hub, NEEDLEBENCH) and pinned_requests(hub, OBELICS)


# -- MMDocRAG: MMDocIR/MMDocRAG, one question set + images.zip ---------------------------------------

def test_mmdocrag_builds_from_the_hub_release_files(hub, tmp_path):
    """The repo's files as published (question sets, train.jsonl, images.zip); the build downloads
    the chosen set and the image archive at the revision it is given, and reads nothing else."""
    pytest.importorskip("pypdfium2")
    base = write_mmdocrag_jsonl(tmp_path / "release", release=True)
    files = {path.name: path.read_bytes() for path in sorted(base.iterdir())}
    revision = "0b" * 20  # MMDOCRAG pins a short sha; the test pins a full one, as a user can
    publish(hub, type("Pinned", (), {"repo": MMDOCRAG.repo, "revision": revision})(),
            {"README.md": b"---\nlicense: cc-by-nc-4.0\n---\n", **files})
    out = tmp_path / "out"
    proc = mmle_build(["mmdocrag", "--output", str(out), "--hub-revision", revision, "--question-set", "evaluation_15",
                       "--lengths", "1024", "2048", "--max-queries-per-pool", "4", "--dpi", "36",
                       "--max-image-pixels", str(96 * 96)], client_env(hub, tmp_path, token=None))
    manifest = built_ok(proc, out / "mmdocrag")
    sources = manifest["sources"]
    assert (sources["kind"], sources["revision"], sources["question_set"]) == ("hub", revision, "evaluation_15")
    assert [f["file"] for f in sources["files"]] == ["evaluation_15.jsonl", "images.zip"]
    assert "missing_quote_image" not in manifest["report"]["skipped"]
    asked = {path.rsplit("/", 1)[-1] for _, path in hub.requests if revision in path}
    assert {"evaluation_15.jsonl", "images.zip"} <= asked and not asked & {"dev_15.jsonl", "dev_20.jsonl",
                                                                            "evaluation_20.jsonl", "train.jsonl"}
    with open(base / "evaluation_15.jsonl", encoding="utf-8") as handle:
        questions = {json.loads(line)["question"] for line in handle}
    from mmlongembed.output.layout import pool_rows, read_built_pool

    queries = {text for pool in pool_rows(out / "mmdocrag")
               for text in read_built_pool(out / "mmdocrag", pool["pool"]).queries["text"]}
    assert queries and queries <= questions


# -- MMLongBench-Doc: yubo2333/MMLongBench-Doc, data/train-*.parquet + documents/*.pdf ------------------

def test_mmlongbench_builds_mmlongbench_doc_from_the_hub(hub, tmp_path):
    """Without --sources: the samples table and the PDFs it names, at the pinned revision; a PDF
    the table names but the repo lacks is a counted skip, a PDF it does not name is not fetched."""
    pytest.importorskip("pypdfium2")
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_paged_sources(tmp_path / "generated", n_documents=6, pages=(14, 22), sidecar=0)
    generated = tmp_path / "generated" / "mmlongbench_doc"
    with open(generated / "samples.jsonl", encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle]
    samples.append({**samples[0], "doc_id": "gone.pdf"})
    table = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(samples), table)
    pdfs = {f"documents/{p.name}": p.read_bytes() for p in sorted((generated / "documents").glob("*.pdf"))}
    publish(hub, MMLONGBENCH_DOC, {"README.md": card({"default": {"train": "data/train-*"}}),
                                   DOC_HUB_SAMPLES: table.getvalue(), **pdfs,
                                   "documents/unlisted.pdf": next(iter(pdfs.values()))})
    out = tmp_path / "out"
    proc = mmle_build(["mmlongbench", "--output", str(out), "--lengths", "512", "1024", "--max-queries-per-pool",
                       "4", "--dpi", "36", "--max-image-pixels", str(160 * 230)], client_env(hub, tmp_path, token=None))
    manifest = built_ok(proc, out / "mmlongbench")
    sources = manifest["sources"]
    assert (sources["kind"], sources["hub_repo"], sources["revision"]) == ("hub", MMLONGBENCH_DOC.repo,
                                                                          MMLONGBENCH_DOC.revision)
    assert sources["forms"] == {"mmlongbench_doc": len(pdfs)}
    assert {f["file"] for f in sources["files"]} == {DOC_HUB_SAMPLES, *pdfs}
    assert manifest["report"]["skipped"]["pdf_not_found"] == 1  # counted once, as for a local folder
    assert not any("unlisted.pdf" in path for _, path in hub.requests)
    assert pinned_requests(hub, MMLONGBENCH_DOC)


# -- the Hub unreachable: one line that names --sources ----------------------------------------------

@pytest.mark.parametrize("builder, repo", [("govreport", GOVREPORT.repo), ("hotpotqa", HOTPOTQA.repo),
                                           ("needle", NEEDLEBENCH.repo), ("mmdocrag", MMDOCRAG.repo),
                                           ("mmlongbench", MMLONGBENCH_DOC.repo)])
def test_unreachable_hub_is_one_line_naming_sources(builder, repo, tmp_path):
    proc = mmle_build([builder, "--output", str(tmp_path / "out")], nowhere_env(tmp_path), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "--sources" in lines[0] and repo in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / builder).exists()
