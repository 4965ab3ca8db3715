"""MMLongBench Logical Summarization on page images: fixture builds and the shared sample PDFs."""

import copy
import json
from collections import defaultdict

import pytest
from PIL import Image

from builders._mmlongbench_fixtures import write_paged_sources
from builders.mmlongbench import MMLongBenchBuilder, MMLongBenchConfig, check_page_pool
from mmlongembed.build.run import run_build
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.output.layout import pool_rows, read_built_pool
from mmlongembed.llm.summaries import SYNTHETIC_LABEL
from mmlongembed.media.pdf import PageRenderer
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.realdata import shared_data_dir

pytest.importorskip("pypdfium2")
SMALL = dict(dpi=36.0, max_image_pixels=160 * 230)


def build(sources, out, **options):
    builder = MMLongBenchBuilder()
    config = MMLongBenchConfig(sources=str(sources), **{"lengths": (512, 1024), "max_queries_per_pool": 8,
                                                        **SMALL, **options})
    return builder, run_build(builder, config, out, progress=False)


@pytest.fixture(scope="module")
def fixture_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmlb")
    write_paged_sources(root / "src", n_documents=10, pages=(14, 22))
    builder, out = build(root / "src", root / "out")
    return builder, out


def pools_of(out):
    return {row["pool"]: read_built_pool(out, row["pool"]) for row in pool_rows(out)}


def test_fixture_build_validates_with_the_page_invariants(fixture_build):
    _, out = fixture_build
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    pools = pools_of(out)
    assert set(pools) == {f"mmlongbench-{d}-{n}" for d in ("easy", "hard") for n in ("512", "1k")}
    for name, tables in pools.items():
        corpus = tables.corpus
        for text, images in zip(corpus["text"], corpus["images"]):
            assert text == IMAGE_PLACEHOLDER * len(images) and images  # pages only: no number, name or title
        assert set(corpus["title"]) == {""}
        if name.startswith("mmlongbench-hard"):
            assert len(tables.queries["_id"]) >= 4 and len(corpus["_id"]) == 4 * len(tables.queries["_id"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["render"]["renderer"] == "pypdfium2" and manifest["sources"]["render"]["dpi"] == 36.0
    assert manifest["storage"]["ratio_to_distinct_payload"] <= 1.15
    assert manifest["storage"]["image_ratio_to_distinct"] <= 1.15
    # the lengths' windows share pages, so all pools share one shard per part
    shards = {path.rsplit("/", 1)[1].rsplit("-", 1)[0] for path in manifest["files"] if not path.startswith("data/pools")}
    assert len(shards) == 1 and "_" in shards.pop()


def test_hard_negatives_swap_their_slots_for_unseen_pages_of_the_same_document(fixture_build):
    _, out = fixture_build
    tables = pools_of(out)["mmlongbench-hard-1k"]
    corpus = tables.corpus
    rows = defaultdict(list)
    for i, cid in enumerate(corpus["_id"]):
        rows[corpus["group"][i]].append(i)
    exact = 0
    for group, members in rows.items():
        positive = next(i for i in members if corpus["role"][i] == "positive")
        pos_pages = [im["bytes"] for im in corpus["images"][positive]]
        n = len(pos_pages)
        assert corpus["page_indices"][positive] == list(range(n))
        variants = set()
        for i in members:
            if corpus["role"][i] != "hard_negative":
                continue
            plan = json.loads(corpus["provenance"][i])
            (a, b), (c, d) = plan["replaced_slots"], plan["donor_pages"]
            pages = [im["bytes"] for im in corpus["images"][i]]
            assert corpus["source_id"][i] == corpus["source_id"][positive]
            assert c >= n and corpus["page_indices"][i] == [*range(a), *range(c, d), *range(b, n)]
            assert pages[:a] == pos_pages[:a] and pages[a + d - c:] == pos_pages[b:]
            assert not set(pages[a:a + d - c]) & set(pos_pages)
            exact += corpus["n_tokens"][i] == corpus["n_tokens"][positive]
            variants.add(plan["variant"])
        assert variants == {"head25", "tail25", "middle50"}
    assert exact >= 3 * len(rows) - 3  # all but the mixed-size document match exactly


def test_queries_say_where_they_come_from(fixture_build):
    _, out = fixture_build
    sources = defaultdict(set)
    for name, tables in pools_of(out).items():
        for text, source, doc in zip(tables.queries["text"], tables.queries["query_source"],
                                     tables.queries["source_id"]):
            sources[source].add(doc)
            if source == "synthetic_text_layer":
                assert text.startswith(SYNTHETIC_LABEL)
    assert sources["reference_summary"] == {"report00.pdf"}  # the one with a sidecar summary
    assert sources["synthetic_text_layer"]
    card = (out / "README.md").read_text()
    assert "synthetic queries, for tests only" in card and "pypdfium2" in card and "pages per candidate" in card


def test_easy_and_hard_pools_of_a_length_share_queries_and_never_share_positive_pages(fixture_build):
    _, out = fixture_build
    pools = pools_of(out)
    for length in ("512", "1k"):
        easy, hard = pools[f"mmlongbench-easy-{length}"], pools[f"mmlongbench-hard-{length}"]
        easy_docs = set(easy.queries["source_id"])
        assert easy_docs and easy_docs <= set(hard.queries["source_id"])
        positives = {easy.corpus["group"][i]: {im["bytes"] for im in easy.corpus["images"][i]}
                     for i in range(len(easy.corpus["_id"])) if easy.corpus["role"][i] == "positive"}
        for i in range(len(easy.corpus["_id"])):
            for group, pages in positives.items():
                if easy.corpus["group"][i] != group:
                    assert not pages & {im["bytes"] for im in easy.corpus["images"][i]}
            if easy.corpus["role"][i] == "easy_negative":
                assert easy.corpus["source_id"][i] not in easy_docs


def test_the_checks_catch_broken_variants(fixture_build):
    _, out = fixture_build
    tables = pools_of(out)["mmlongbench-hard-1k"]
    row = {"pool": "mmlongbench-hard-1k"}
    assert not list(check_page_pool(row, tables.corpus, tables.qrels))
    hard = [i for i, r in enumerate(tables.corpus["role"]) if r == "hard_negative"]

    def problems_after(edit):
        corpus = copy.deepcopy(tables.corpus)
        edit(corpus)
        return {p.check for p in check_page_pool(row, corpus, tables.qrels)}

    def swap_kept_page(corpus):  # a kept page that is not the positive's
        for i in hard:
            plan = json.loads(corpus["provenance"][i])
            a, _ = plan["replaced_slots"]
            k = 0 if a > 0 else len(corpus["images"][i]) - 1
            other = corpus["images"][i][a]  # a donor page
            corpus["images"][i][k] = other
            return

    assert "kept_pages" in problems_after(swap_kept_page)

    def donor_inside_window(corpus):
        i = hard[0]
        plan = json.loads(corpus["provenance"][i])
        plan["donor_pages"] = [0, plan["donor_pages"][1] - plan["donor_pages"][0]]
        corpus["provenance"][i] = json.dumps(plan)

    assert "replaced_slots" in problems_after(donor_inside_window)

    def wrong_fraction(corpus):
        for i in hard:
            plan = json.loads(corpus["provenance"][i])
            if plan["variant"] == "middle50":
                plan["fraction"] = [0.0, 0.25]
                corpus["provenance"][i] = json.dumps(plan)

    assert "replaced_fraction" in problems_after(wrong_fraction)

    def leak_a_positive_page(corpus):
        groups = corpus["group"]
        positive = next(i for i, r in enumerate(corpus["role"]) if r == "positive")
        other = next(i for i in hard if groups[i] != groups[positive])
        corpus["images"][other][-1] = corpus["images"][positive][0]

    assert "page_exclusivity" in problems_after(leak_a_positive_page)


def test_rebuild_is_byte_identical_and_renders_each_page_once(fixture_build, tmp_path, monkeypatch):
    import pypdfium2

    _, out = fixture_build
    calls, requested = [], []
    render = pypdfium2.PdfPage.render
    monkeypatch.setattr(pypdfium2.PdfPage, "render", lambda self, **kw: calls.append(1) or render(self, **kw))
    page = PageRenderer.page
    monkeypatch.setattr(PageRenderer, "page",
                        lambda self, pdf, index: requested.append((pdf.path.name, index)) or page(self, pdf, index))
    sources = out.parent.parent / "src"
    _, again = build(sources, tmp_path / "again")
    first = json.loads((out / "manifest.json").read_text())["files"]
    manifest = json.loads((again / "manifest.json").read_text())
    assert first == manifest["files"]  # same bytes, same content-named files
    # every page of the sources once, when they are read, however many candidates hold it
    n_pages = sum(len(pypdfium2.PdfDocument(str(pdf))) for pdf in sorted(sources.rglob("*.pdf")))
    assert len(calls) == len(requested) == len(set(requested)) == n_pages
    assert manifest["report"]["stats"]["rendering"]["pages"] == n_pages
    held = sum(len(images) for tables in pools_of(again).values() for images in tables.corpus["images"])
    assert held > 2 * n_pages  # pages are held by several candidates


def test_build_pools_reads_no_file_and_calls_no_llm(tmp_path, monkeypatch):
    """The contract: files are read (and pages rendered) in load_sources, the summary step runs
    in run_steps, and build_pools only assembles; it gives the same pools as the whole build."""
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.media.pdf import PdfFile
    from mmlongembed.core.tokens import default_counter
    from tests.support.outside import nothing_outside

    write_paged_sources(tmp_path / "src", n_documents=8, pages=(14, 22))
    builder = MMLongBenchBuilder()
    config = MMLongBenchConfig(sources=str(tmp_path / "src"), lengths=(512, 1024), max_queries_per_pool=4, **SMALL)
    report = BuildReport(progress=False)
    planned = builder.run_steps(builder.load_sources(config, report), config, report)
    default_counter()  # the token counter's vocabulary is the yardstick, loaded once per process
    blocked = (*((PageRenderer, m) for m in ("page", "image_file", "image_data")), (PdfFile, "document"))
    with nothing_outside(monkeypatch, "builders.mmlongbench.summarise_documents",
                         "mmlongembed.llm.summaries.run_llm_step", methods=blocked):
        pools = builder.build_pools(planned, config, report)
    assert [p.name for p in pools] == [f"mmlongbench-{d}-{n}" for n in ("512", "1k") for d in ("easy", "hard")]
    hard = [p for p in pools if p.difficulty == "hard"]
    assert all(p.queries for p in hard)
    assert {q.extra["query_source"] for p in pools for q in p.queries} == {"reference_summary",
                                                                           "synthetic_text_layer"}


def test_mmlongbench_jsonl_with_page_images_and_an_extended_version(tmp_path):
    """MMLongBench's summarization layout: `image_list` page paths and a GovReport-style summary;
    the same document at two lengths is read once, in its longest version."""
    root = tmp_path / "mmlongbench"
    rows = []
    for d in range(6):
        pages = []
        for p in range(16):
            path = root / "images" / f"doc{d}" / f"page{p}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (120, 160), ((37 * d) % 256, (11 * p) % 256, 200)).save(path)
            pages.append(f"doc{d}/page{p}.png")
        summary = [{"section_title": "Findings", "paragraphs": [f"Report {d} finds this.", "And that."]}]
        rows.append({"id": f"doc{d}", "image_list": pages[:8], "summary": summary})  # the 8K version
        rows.append({"id": f"doc{d}", "image_list": pages, "summary": summary})  # an extended version
    rows.append({"id": "broken", "image_list": ["nowhere/page0.png"], "summary": "x"})
    (root / "gov_report.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    builder, out = build(tmp_path, tmp_path / "out", lengths=(128,), max_image_pixels=1_000_000)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["report"]["skipped"]["missing_page_image"] == 1
    hard = read_built_pool(out, "mmlongbench-hard-128")
    assert hard.queries["text"][0].startswith("Findings:\nReport ")
    assert set(hard.queries["query_source"]) == {"reference_summary"}
    # 20 tokens per page: windows of 4..6 pages, donors beyond page 8 come from the extended version
    donors = [json.loads(p)["donor_pages"] for p, r in zip(hard.corpus["provenance"], hard.corpus["role"])
              if r == "hard_negative"]
    assert donors and max(d for _, d in donors) > 8


@pytest.mark.realdata
def test_shared_sample_pdfs(tmp_path):
    sources = shared_data_dir("mmlongbench_doc")
    builder = MMLongBenchBuilder()
    config = MMLongBenchConfig(sources=str(sources.parent), lengths=(1024, 2048), dpi=36.0,
                               max_image_pixels=126_000)
    out = run_build(builder, config, tmp_path / "out", progress=False)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["forms"] == {"mmlongbench_doc": 11}
    assert manifest["storage"]["ratio_to_distinct_payload"] <= 1.15
    assert manifest["storage"]["image_ratio_to_distinct"] <= 1.15
    stats = {p["pool"]: p for p in manifest["pools"]}
    assert stats["mmlongbench-hard-1k"]["queries"] >= 8 and stats["mmlongbench-easy-1k"]["queries"] >= 2
    assert all(manifest["label_free_audit"][p]["passed"] for p in stats)


def test_summary_step_through_an_openai_compatible_server(tmp_path):
    """The document-summary prompt through the LLM layer: every page reaches the prompt, a reply
    that breaks the contract (a page reference) is repaired, the builder's queries say llm_summary."""
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.llm import LLMConfig
    from mmlongembed.llm.fake_server import FakeOpenAIServer, first_user_message
    from mmlongembed.llm.summaries import pages_prompt_text, summarise_documents

    pages = [f"Opening of page {k}. " + "filler words " * 400 + f"END{k}" for k in range(6)]
    prompt_text = pages_prompt_text(pages, max_chars=3000)
    assert all(f"Page {k + 1}:\nOpening of page {k}." in prompt_text for k in range(6))  # the last pages too
    assert len(prompt_text) < 3000 + 6 * 20

    def responder(body):
        user = first_user_message(body)
        if len(body["messages"]) == 2 and "doc-b" in user:
            return "As page 2 shows, growth slowed."  # breaks the page_reference rule
        return "Growth slowed, then costs rose, and finally the outlook improved."

    with FakeOpenAIServer(responder=responder) as server:
        config = LLMConfig(llm="openai", llm_model="fake-model", llm_base_url=server.url,
                           llm_cache=str(tmp_path / "cache"), llm_backoff=0.01)
        report = BuildReport(progress=False)
        out, source = summarise_documents([("a", ["doc-a text"]), ("b", ["doc-b text"])], config, report)
        assert source == "llm_summary" and set(out) == {"a", "b"} and server.requests == 3
        assert report.llm_steps[0]["prompt"] == "document_summary" and not report.skipped

        write_paged_sources(tmp_path / "src", n_documents=8, pages=(14, 22), sidecar=0)
        _, built = build(tmp_path / "src", tmp_path / "out", llm="openai", llm_model="fake-model",
                         llm_base_url=server.url, llm_cache=str(tmp_path / "cache"))
    hard = read_built_pool(built, "mmlongbench-hard-512")
    assert set(hard.queries["query_source"]) == {"llm_summary"}
    card = (built / "README.md").read_text()
    assert "document_summary" in card and "synthetic queries, for tests only" not in card
    # the server is gone: the summary step answers from the cache, and the data files are the same
    _, replayed = build(tmp_path / "src", tmp_path / "replayed", llm="replay", llm_model="fake-model",
                        llm_cache=str(tmp_path / "cache"))
    manifest = json.loads((replayed / "manifest.json").read_text())
    assert manifest["files"] == json.loads((built / "manifest.json").read_text())["files"]
    assert {step["cache_hits"] for step in manifest["llm_steps"]} != {0} and not any(
        step["calls"] for step in manifest["llm_steps"])
    # `mmle reproduce` of the model-made build replays the recorded cache too, asking no model
    from mmlongembed.publish.reproduce import reproduce

    assert reproduce(str(built)) is True


def _mmlb_release(root, n_documents=6, n_pages=16):
    """MMLongBench's release as extracted: `mmlb_data/summ/gov_K8.jsonl` naming pages relative to
    the separate image root `mmlb_image/`, plus a JSONL of another task under `mmlb_data/`."""
    rows = []
    for d in range(n_documents):
        pages = []
        for p in range(n_pages):
            relative = f"summ/gov-report/GAO-{d}/GAO-{d}_page{p + 1}.png"
            (root / "mmlb_image" / relative).parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (120, 160), ((37 * d) % 256, (11 * p) % 256, 90)).save(root / "mmlb_image" / relative)
            pages.append(relative)
        rows.append({"image_list": pages, "summary": [{"section_title": "What GAO Found",
                                                        "paragraphs": [f"Report {d} finds this.", "And that."]}]})
    (root / "mmlb_data" / "summ").mkdir(parents=True)
    (root / "mmlb_data" / "summ" / "gov_K8.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (root / "mmlb_data" / "documentQA").mkdir()
    (root / "mmlb_data" / "documentQA" / "mmlongdoc_K8.jsonl").write_text(json.dumps(
        {"doc_name": "x.pdf", "question": "Why?", "answer": "No.", "page_list": ["mmlongdoc/x/x_page1.png"]}) + "\n")
    return rows


@pytest.mark.parametrize("given", ["release root", "mmlb_data"])
def test_mmlongbench_release_reads_pages_from_the_separate_image_root(tmp_path, given):
    rows = _mmlb_release(tmp_path / "MMLongBench")
    sources = tmp_path / "MMLongBench" / ("mmlb_data" if given == "mmlb_data" else "")
    _, out = build(sources, tmp_path / "out", lengths=(128,), max_image_pixels=1_000_000)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["forms"] == {"mmlongbench_jsonl": len(rows)}
    assert "missing_page_image" not in manifest["report"]["skipped"]
    files = {f["file"] for f in manifest["sources"]["files"]}
    assert "mmlb_data/summ/gov_K8.jsonl" in files and "mmlb_image/summ/gov-report/GAO-0/GAO-0_page1.png" in files
    hard = read_built_pool(out, "mmlongbench-hard-128")
    assert hard.queries["text"] and all(q.startswith("What GAO Found:\nReport ") for q in hard.queries["text"])


def _samples_and_pdfs(tmp_path):
    write_paged_sources(tmp_path / "generated", n_documents=6, pages=(14, 22), sidecar=0)
    generated = tmp_path / "generated" / "mmlongbench_doc"
    with open(generated / "samples.jsonl", encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle]
    return samples, sorted((generated / "documents").glob("*.pdf"))


@pytest.mark.parametrize("layout", ["hub", "github"])
def test_mmlongbench_doc_as_published_on_the_hub_and_on_github(tmp_path, layout):
    """The Hub repo (yubo2333/MMLongBench-Doc: `data/train-00000-of-00001.parquet` + `documents/`)
    and the GitHub release (`data/samples.json` + `data/documents/`)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    samples, pdfs = _samples_and_pdfs(tmp_path)
    root = tmp_path / "MMLongBench-Doc"
    (root / "data").mkdir(parents=True)
    documents = root / ("documents" if layout == "hub" else "data/documents")
    documents.mkdir()
    for pdf in pdfs:
        shutil.copy(pdf, documents / pdf.name)
    if layout == "hub":
        pq.write_table(pa.Table.from_pylist(samples), root / "data" / "train-00000-of-00001.parquet")
    else:
        (root / "data" / "samples.json").write_text(json.dumps(samples, indent=4))
    _, out = build(root, tmp_path / "out")
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["forms"] == {"mmlongbench_doc": len(pdfs)}
    assert "pdf_without_summary" not in manifest["report"]["skipped"]
    samples_file = "data/train-00000-of-00001.parquet" if layout == "hub" else "data/samples.json"
    assert samples_file in {f["file"] for f in manifest["sources"]["files"]}


def test_pdfs_the_samples_name_but_the_folder_lacks_are_counted(tmp_path):
    """The GitHub repository holds 93 of the 135 PDFs its `samples.json` names: each missing PDF
    is a counted skip (`pdf_not_found`, once however many questions name it), as in MMDocRAG."""
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.readers.mmlongbench import read_paged_sources

    samples, pdfs = _samples_and_pdfs(tmp_path)
    samples += [{**samples[0], "doc_id": "gone.pdf"}, {**samples[1], "doc_id": "gone.pdf"},
                {**samples[0], "doc_id": "also_gone.pdf"}]
    root = tmp_path / "MMLongBench-Doc"
    (root / "data" / "documents").mkdir(parents=True)
    for pdf in pdfs:
        (root / "data" / "documents" / pdf.name).write_bytes(pdf.read_bytes())
    (root / "data" / "samples.json").write_text(json.dumps(samples, indent=4))
    report = BuildReport(progress=False)
    assert len(read_paged_sources([root], report).documents) == len(pdfs)
    assert report.skipped == {"pdf_not_found": 2}
    assert report.examples["pdf_not_found"] == ["also_gone.pdf", "gone.pdf"]
