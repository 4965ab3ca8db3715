"""MMDocRAG Multi-Source Reasoning over interleaved evidence: the MMDocIR substitute on generated
PDFs and on the shared sample data, and MMDocRAG's own JSONL format."""

import copy
import json
import re
from collections import Counter, defaultdict

import numpy as np
import pytest

from builders._mmdocrag_checks import check_quote_pool
from builders._mmdocrag_fixtures import write_mmdocir_sources, write_mmdocrag_jsonl
from builders.mmdocrag import MMDocRAGBuilder, MMDocRAGConfig
from mmlongembed.build.run import run_build
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import pool_rows, read_built_pool
from mmlongembed.media.pdf import StoredImage
from mmlongembed.ops.multisource.evidence import units_document
from mmlongembed.ops.multisource.quote_supply import GoldGuard, Supply
from mmlongembed.ops.multisource.quotes import Block, Instance, Quote
from mmlongembed.core.pools import hard_negative_tolerance
from mmlongembed.readers.mmdocir import quote_kind, reads_as_prose
from mmlongembed.core.tokens import default_counter, image_tokens
from mmlongembed.build.validate import format_report, validate_dir
from tests.support.built_pools import audit_reading, candidate_rows
from tests.support.realdata import shared_data_dir

pytest.importorskip("pypdfium2")
SMALL = dict(lengths=(1024, 2048), max_queries_per_pool=8, dpi=36.0, max_image_pixels=96 * 96, chunk_tokens=60,
             quotes_per_instance=6)


def build(sources, out, **options):
    builder = MMDocRAGBuilder()
    config = MMDocRAGConfig(sources=str(sources), **{**SMALL, **options})
    return builder, run_build(builder, config, out, progress=False)


@pytest.fixture(scope="module")
def substitute_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmdocrag")
    write_mmdocir_sources(root / "src")
    return build(root / "src", root / "out")


def pools_of(out):
    return {row["pool"]: read_built_pool(out, row["pool"]) for row in pool_rows(out)}


def test_substitute_build_validates_and_says_it_is_a_substitute(substitute_build):
    _, out = substitute_build
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["substitute"] is True and "MMDocIR" in manifest["sources"]["format"]
    assert manifest["report"]["skipped"]["evidence_count_outside_2_to_5"] == 8  # one per document
    card = (out / "README.md").read_text()
    assert "**Source: substitute.**" in card and "gold image quotes" in card
    pools = pools_of(out)
    assert all(len(t.queries["_id"]) >= 2 for t in pools.values())
    for tables in pools.values():
        for text, images in zip(tables.corpus["text"], tables.corpus["images"]):
            assert text.count(IMAGE_PLACEHOLDER) == len(images) > 0


def test_gold_quotes_of_both_kinds_and_their_refills(substitute_build):
    _, out = substitute_build
    kinds, refills = Counter(), Counter()
    for name, tables in pools_of(out).items():
        corpus = tables.corpus
        index = {cid: i for i, cid in enumerate(corpus["_id"])}
        positive_of = dict(zip(tables.qrels["query-id"], tables.qrels["corpus-id"]))
        for i, role in enumerate(corpus["role"]):
            provenance = json.loads(corpus["provenance"][i])
            if role == "positive":
                kinds.update(e["kind"] for e in provenance["evidence"])
            if role != "hard_negative":
                continue
            positive = index[positive_of[corpus["group"][i]]]
            assert abs(corpus["n_tokens"][i] - corpus["n_tokens"][positive]) <= hard_negative_tolerance(
                corpus["n_tokens"][positive])
            for removed in provenance["removed"]:
                refills[removed["kind"]] += 1
                if removed["kind"] == "image":  # exact size, so exactly the same tokens
                    h, w = removed["size"]
                    assert removed["replacement"]["tokens"] == removed["tokens"] == image_tokens(h, w)
                    assert removed["replacement"]["source"].split(":")[0] != corpus["doc_name"][i]
    assert kinds["text"] and kinds["image"] and refills["text"] and refills["image"]


def test_evidence_keeps_its_relative_position_as_the_positive_grows(substitute_build):
    _, out = substitute_build
    pools = pools_of(out)
    depth = defaultdict(dict)
    for name in ("mmdocrag-hard-1k", "mmdocrag-hard-2k"):
        corpus = pools[name].corpus
        for i, role in enumerate(corpus["role"]):
            if role == "positive":
                for e in json.loads(corpus["provenance"][i])["evidence"]:
                    depth[(corpus["source_id"][i], e["index"])][name] = e["relative_position"]
    both = [v for v in depth.values() if len(v) == 2]
    assert len(both) >= 4
    assert max(abs(v["mmdocrag-hard-1k"] - v["mmdocrag-hard-2k"]) for v in both) <= 0.15


def test_the_checks_catch_a_second_document_with_all_the_evidence(substitute_build):
    _, out = substitute_build
    tables = pools_of(out)["mmdocrag-hard-1k"]
    row = {"pool": "mmdocrag-hard-1k"}
    assert not list(check_quote_pool(row, tables.corpus, tables.qrels))
    corpus = tables.corpus
    positive_of = dict(zip(tables.qrels["query-id"], tables.qrels["corpus-id"]))
    index = {cid: i for i, cid in enumerate(corpus["_id"])}

    def problems_after(edit):
        changed = copy.deepcopy(corpus)
        edit(changed)
        return {p.check for p in check_quote_pool(row, changed, tables.qrels)}

    hard = next(i for i, r in enumerate(corpus["role"]) if r == "hard_negative")
    positive = index[positive_of[corpus["group"][hard]]]

    def refill_with_the_removed_quote(c):  # a "refill" that puts the evidence back
        c["text"][hard], c["images"][hard] = c["text"][positive], c["images"][positive]

    assert {"removed_quote", "all_gold_in_one_candidate"} <= problems_after(refill_with_the_removed_quote)

    def other_group_copies_the_positive(c):
        other = next(i for i, g in enumerate(c["group"]) if g != c["group"][positive])
        c["text"][other], c["images"][other] = c["text"][positive], c["images"][positive]

    assert "all_gold_in_one_candidate" in problems_after(other_group_copies_the_positive)

    def pad_with_the_own_document(c):
        provenance = json.loads(c["provenance"][hard])
        provenance["padding"].append({"id": "block:p0:x", "doc": c["doc_name"][hard]})
        c["provenance"][hard] = json.dumps(provenance)

    assert "padding_source" in problems_after(pad_with_the_own_document)

    def shuffle_images(c):
        c["images"][positive] = list(reversed(c["images"][positive]))

    assert "image_slots" in problems_after(shuffle_images)


def test_rebuild_is_byte_identical(substitute_build, tmp_path):
    _, out = substitute_build
    _, again = build(out.parent.parent / "src", tmp_path / "again")
    assert json.loads((out / "manifest.json").read_text())["files"] == \
        json.loads((again / "manifest.json").read_text())["files"]



def test_build_pools_reads_no_file_renders_nothing_and_calls_no_llm(tmp_path, monkeypatch):
    """The contract: every image is decoded and rendered in load_sources, the query audit (an LLM
    step) runs in run_steps, and build_pools only assembles what they gave (a refill image is
    resized in memory). A fresh builder builds the same pools: nothing load_sources left on the
    builder is needed."""
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.media.pdf import PageRenderer, PdfFile
    from tests.support.outside import nothing_outside

    write_mmdocir_sources(tmp_path / "src")
    config = MMDocRAGConfig(sources=str(tmp_path / "src"), **SMALL)
    report = BuildReport(progress=False)
    loader = MMDocRAGBuilder()
    audited = loader.run_steps(loader.load_sources(config, report), config, report)
    assert [step["step"] for step in report.llm_steps] == ["query_audit"]
    rendered = audited.sources.renderer.stats()["pages"]
    default_counter()  # the token counter's vocabulary is the yardstick, loaded once per process
    blocked = (*((PageRenderer, m) for m in ("page", "region", "image_file", "image_data")), (PdfFile, "document"))
    with nothing_outside(monkeypatch, "builders.mmdocrag.audit_queries", methods=blocked):
        pools = MMDocRAGBuilder().build_pools(audited, config, report)
    assert [p.name for p in pools] == [f"mmdocrag-{d}-{n}" for n in ("1k", "2k") for d in ("easy", "hard")]
    assert all(p.queries for p in pools) and len(report.llm_steps) == 1
    assert {q.source_id for p in pools for q in p.queries} <= audited.kept
    removed = [r for p in pools for c in p.candidates if c.role == "hard_negative" for r in c.provenance["removed"]]
    assert {r["kind"] for r in removed} == {"text", "image"}  # image refills were made, resized in memory
    assert report.stats["rendering"]["pages"] == rendered  # and nothing more was rendered


def test_padding_drawn_from_too_small_a_sample_is_drawn_again_larger(tmp_path, monkeypatch):
    """A positive pads from a random sample of the usable pages (a full corpus has tens of
    thousands); where the sample runs out before the supply does, it is drawn again larger, so a
    sample of one page builds every positive that the whole supply builds."""
    import builders.mmdocrag as mmdocrag
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.ops.multisource.quote_supply import Supply

    write_mmdocir_sources(tmp_path / "src")
    config = MMDocRAGConfig(sources=str(tmp_path / "src"), **SMALL)
    report = BuildReport(progress=False)
    audited = MMDocRAGBuilder().run_steps(MMDocRAGBuilder().load_sources(config, report), config, report)

    def positives(sample):
        monkeypatch.setattr(mmdocrag, "PADDING_SAMPLE", sample)
        drawn, padding_for = [], Supply.padding_for
        monkeypatch.setattr(Supply, "padding_for", lambda self, *a: drawn.append(a[2]) or padding_for(self, *a))
        built = MMDocRAGBuilder().build_pools(audited, config, BuildReport(progress=False))
        return [sorted(c.id for c in pool.candidates if c.role == "positive") for pool in built], drawn

    whole, _ = positives(10_000)
    sampled, drawn = positives(1)
    assert sampled == whole and all(len(p) >= 2 for p in whole)
    assert {1, 8} <= set(drawn)  # first one page, then eight times more


def test_box_kinds():
    prose = "The findings in this report are based on data from telephone interviews conducted in 2013."
    assert reads_as_prose(prose) and not reads_as_prose("Total for all 65+ (n=1,526) 59% Gender a Male 65b")
    assert quote_kind(["Pure-text (Plain-text)"], prose) == "text"
    assert quote_kind(["Pure-text (Plain-text)"], "") == "image"  # a logo: nothing in the text layer
    assert quote_kind(["Table"], prose) == "image"
    assert quote_kind(["Pure-text (Plain-text)", "Chart"], prose) == "text"
    assert quote_kind(["Pure-text (Plain-text)", "Chart"], "41% 32% 27% Use SNS Do not go online") == "image"


def test_mmdocrag_format_never_uses_image_descriptions(tmp_path):
    write_mmdocrag_jsonl(tmp_path / "src", leak="LEAKMARKER")
    _, out = build(tmp_path / "src", tmp_path / "out")
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["substitute"] is False
    assert "substitute" not in (out / "README.md").read_text().split("## Task")[1].split("Construction")[0]
    for tables in pools_of(out).values():
        assert len(tables.queries["_id"]) >= 2
        assert not any("LEAKMARKER" in t for t in tables.corpus["text"])
        assert not any("LEAKMARKER" in t for t in tables.corpus["provenance"])


def test_mmdocrag_format_refills_a_text_quote_from_its_document_s_other_quotes_never_from_held_text(tmp_path):
    """A file of MMDocRAG holds only its questions' quotes, each in some question's context: a
    refill taken only from text in no context found none, and every hard pool stayed empty. A
    removed text quote is refilled from the document's other questions' quotes, never from text
    the candidate already holds (a quote of its own context: the negative would hold it twice)."""
    write_mmdocrag_jsonl(tmp_path / "src", n_documents=8, records_per_document=3)
    _, out = build(tmp_path / "src", tmp_path / "out")
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    doc_of, quotes_of = {}, defaultdict(set)  # question -> its document; document -> its quotes' texts
    for line in (tmp_path / "src" / "mmdocrag" / "evaluation_20.jsonl").read_text().splitlines():
        record = json.loads(line)
        doc_of[str(record["q_id"])] = record["doc_name"]
        quotes_of[record["doc_name"]] |= {q["text"] for q in record["text_quotes"]}
    refills = []  # per text refill: whether it came from the question's own document
    for name, tables in pools_of(out).items():
        if "-hard-" not in name:
            continue
        assert len(tables.queries["_id"]) >= 2, name
        for text, role, source, raw in zip(tables.corpus["text"], tables.corpus["role"], tables.corpus["source_id"],
                                           tables.corpus["provenance"]):
            if role != "hard_negative":
                continue
            assert all(text.count(quote) <= 1 for quotes in quotes_of.values() for quote in quotes)  # none twice
            for removed in json.loads(raw)["removed"]:
                if removed["kind"] == "text":
                    refills.append(removed["replacement"]["source"].startswith(f"refill:{doc_of[source]}:"))
    # from the same document where a run of its sentences fits, else from another's
    assert len(refills) >= 4 and any(refills)


def hard_groups_hold_as_many_refills_and_the_positive_is_not_their_centre(out, pool: str) -> None:
    """Every document of a hard group holds as many refilled text quotes (a gold quote a variant
    dropped, or a quote of its own context), no two documents alike in text, and the
    audit's odd-one-out rule (the candidate nearest the rest's median in characters) does not find
    the positives."""
    groups = defaultdict(list)
    for row in candidate_rows(out, pool):
        provenance = json.loads(row["provenance"])
        refills = len(provenance["refilled"]) + sum(r["kind"] == "text" for r in provenance.get("removed", []))
        groups[row["group"]].append((row["role"], row["text"], refills))
    assert len(groups) >= 40
    for group, members in groups.items():
        assert len({refills for _, _, refills in members}) == 1, (group, members)
        assert len({text for _, text, _ in members}) == len(members), group
    rule, p = audit_reading(out, pool)
    assert p >= 0.05, (rule, p)


@pytest.fixture(scope="module")
def jsonl_hard_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmdocrag_jsonl_hard")
    write_mmdocrag_jsonl(root / "src", n_documents=30, records_per_document=2, subject_share=0.5)
    return root


def test_every_document_of_a_hard_group_holds_as_many_refills_and_the_positive_is_not_its_centre(
        jsonl_hard_build, tmp_path):
    _, out = build(jsonl_hard_build / "src", tmp_path / "out", lengths=(1024,), max_queries_per_pool=100,
                   lexical_tier=False)
    hard_groups_hold_as_many_refills_and_the_positive_is_not_their_centre(out, "mmdocrag-hard-1k")


def test_a_hard_positive_left_whole_is_its_group_s_centre(jsonl_hard_build, tmp_path, monkeypatch):
    """The plausible wrong way, the paper's recipe as written: only the variants are refilled. A
    variant that lost an image quote then holds the positive's very text, the text variants land a
    few characters either side, and the positive sits at the group's centre."""
    monkeypatch.setattr("builders.mmdocrag.refill_padding_quotes", lambda units, *_, **__: (list(units), []))
    _, out = build(jsonl_hard_build / "src", tmp_path / "out", lengths=(1024,), max_queries_per_pool=100,
                   lexical_tier=False)
    with pytest.raises(AssertionError):
        hard_groups_hold_as_many_refills_and_the_positive_is_not_their_centre(out, "mmdocrag-hard-1k")


@pytest.mark.realdata
def test_shared_sample_data_substitute(tmp_path):
    shared_data_dir("mmdocir")
    sources = shared_data_dir("mmlongbench_doc").parent
    builder, out = build(sources, tmp_path / "out", lengths=(2048, 4096), max_queries_per_pool=160,
                         max_image_pixels=200 * 200, quotes_per_instance=10, chunk_tokens=120)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"]["substitute"] is True
    stats = {p["pool"]: p for p in manifest["pools"]}
    assert stats["mmdocrag-hard-2k"]["queries"] >= 5 and stats["mmdocrag-easy-2k"]["queries"] >= 2
    assert all(manifest["label_free_audit"][p]["passed"] for p in stats)
    assert manifest["storage"]["ratio_to_distinct_payload"] <= 1.15
    assert manifest["storage"]["image_ratio_to_distinct"] <= 1.15


def _questions(path) -> dict[str, str]:
    with open(path, encoding="utf-8") as handle:
        return {str(r["q_id"]): r["question"] for r in map(json.loads, handle)}


def test_release_layout_reads_one_question_set_once_with_images_from_the_zip(tmp_path):
    """The Hub repo's files as downloaded (four question files, train.jsonl, images.zip), plus a
    second copy of the chosen set: each question once, from the chosen set only."""
    base = write_mmdocrag_jsonl(tmp_path / "src", release=True)
    (base / "copy").mkdir()
    (base / "copy" / "evaluation_20.jsonl").write_bytes((base / "evaluation_20.jsonl").read_bytes())
    assert not (base / "images").exists()
    evaluation, dev = _questions(base / "evaluation_20.jsonl"), _questions(base / "dev_20.jsonl")
    _, out = build(tmp_path / "src", tmp_path / "out")
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    skipped = manifest["report"]["skipped"]
    assert skipped["duplicate_q_id"] == len(evaluation)  # the copy's lines: every q_id already read
    assert "missing_quote_image" not in skipped  # images read from images.zip, __MACOSX entries ignored
    assert manifest["sources"]["question_set"] == "evaluation_20"
    read = {f["file"] for f in manifest["sources"]["files"]}
    assert {"mmdocrag/evaluation_20.jsonl", "mmdocrag/copy/evaluation_20.jsonl", "mmdocrag/images.zip"} <= read
    assert not any(name.startswith(("mmdocrag/dev_", "mmdocrag/evaluation_15", "mmdocrag/train")) for name in read)
    queries = [q for tables in pools_of(out).values() for q in tables.queries["text"]]
    assert queries and set(queries) <= set(evaluation.values()) and not set(queries) & set(dev.values())
    for pool in {row["pool"] for row in pool_rows(out)}:
        texts = pools_of(out)[pool].queries["text"]
        assert len(texts) == len(set(texts))  # no question twice in a pool
    assert "`evaluation_20`" in (out / "README.md").read_text()


def test_question_set_is_chosen_by_flag_and_a_missing_one_is_one_line(tmp_path):
    base = write_mmdocrag_jsonl(tmp_path / "src", release=True)
    dev = _questions(base / "dev_20.jsonl")
    # the dev set is half as large: its documents fill 1K, not 2K (the length check refuses that)
    _, out = build(tmp_path / "src", tmp_path / "out", question_set="dev_20", max_queries_per_pool=2,
                   lengths=(1024,))
    queries = {q for tables in pools_of(out).values() for q in tables.queries["text"]}
    assert queries and queries <= set(dev.values())
    with pytest.raises(UserError, match=r"no evaluation_16\.jsonl under .* \(MMDocRAG question sets there: "
                                         r"dev_15, dev_20, evaluation_15, evaluation_20\): choose one with "
                                         r"--question-set NAME"):
        build(tmp_path / "src", tmp_path / "out2", question_set="evaluation_16")


def test_no_usable_instance_names_its_skips_and_the_missing_images(tmp_path):
    """A JSONL downloaded without its images: the one line says what was skipped and that the
    images are missing (it once said only 'no usable instance')."""
    import shutil

    base = write_mmdocrag_jsonl(tmp_path / "src")
    shutil.rmtree(base / "images")
    with pytest.raises(UserError) as caught:
        build(tmp_path / "src", tmp_path / "out")
    message = str(caught.value)
    assert "\n" not in message
    assert re.search(r"no usable instance \(2 to 5 evidence quotes\) under .*\(skipped: missing_quote_image: 12\)",
                     message), message
    assert "images of its image quotes are missing" in message and "images.zip" in message


def _text(qid, page, text):
    return Quote(qid, "text", page, 0.0, text=text)


def _image(qid, page, seed):
    return Quote(qid, "image", page, 1.0, image=StoredImage(bytes([seed]) * 64, 28, 28))


def _supply_case():
    gold_text, gold_image = _text("t1", 0, "The Kalomi gauge rose in spring."), _image("i1", 1, 1)
    instance = Instance("own#q0", "own.pdf", "Which gauge rose?", "Zzkalomi", (gold_text, gold_image),
                        ("t1", "i1"), "own#q0")
    blocks = [Block("own.pdf", 4, (_text("c4", 4, "Own pages never pad their own questions."),)),
              Block("a.pdf", 0, (_text("c0", 0, "Before that. The Kalomi gauge rose in spring. And more."),)),
              Block("b.pdf", 0, (_text("c0", 0, "It was zzKALOMI all along."),)),
              Block("c.pdf", 2, (_text("c2", 2, "A clean page of another report."), _image("f2", 2, 7))),
              Block("d.pdf", 3, (_image("f3", 3, 1), _image("f4", 3, 9)))]
    refill = {"own.pdf": [("own.pdf:c9", "Unused own text.")], "c.pdf": [("c.pdf:c8", "Unused other text.")]}
    return instance, blocks, refill


def test_padding_holds_no_gold_quote_no_answer_and_no_page_of_the_own_document():
    instance, blocks, refill = _supply_case()
    pattern = lambda answer: re.compile(re.escape(answer), re.IGNORECASE)  # noqa: E731
    whole = Supply.of(blocks, refill, default_counter(), whole=lambda b: True, answer_pattern=pattern)
    padding = whole.padding_for(instance, np.random.default_rng(0), sample=10)
    assert [u.id for u in padding.blocks] == ["block:p2:c.pdf"] and padding.pieces == [] and padding.complete
    pieces = Supply.of(blocks, refill, default_counter(), whole=lambda b: False, answer_pattern=lambda a: None)
    # without an anchor the answer's page may pad; a page of pieces is cut quote by quote
    padding = pieces.padding_for(instance, np.random.default_rng(0), sample=10)
    assert sorted(u.id for u in padding.pieces) == ["piece:p0.c0:b.pdf", "piece:p2.c2:c.pdf",
                                                    "piece:p2.f2:c.pdf", "piece:p3.f4:d.pdf"]
    # a sample smaller than the supply: that many drawn, at random, the unusable ones left out
    drawn = [pieces.padding_for(instance, np.random.default_rng(seed), sample=3) for seed in range(40)]
    assert not any(d.complete for d in drawn)
    assert all({u.id for u in d.pieces} <= {u.id for u in padding.pieces} and len(d.pieces) <= 3 for d in drawn)
    assert len({tuple(u.id for u in d.pieces) for d in drawn}) > 5
    assert [u.id for u in whole.refill_elsewhere(instance)] == ["refill:c.pdf:c8"]
    # image donors: other documents only, never a copy of a gold image, pages the positive lacks first
    def donors(used_docs):  # all 28x28: equally close, so drawn among
        return {whole.image_donor(instance, used_docs, 28, 28, np.random.default_rng(seed)).id for seed in range(30)}

    assert donors(set()) == {"c.pdf:f2", "d.pdf:f4"}
    assert donors({"c.pdf"}) == {"d.pdf:f4"}
    assert donors({"c.pdf", "d.pdf"}) == {"c.pdf:f2", "d.pdf:f4"}


def test_an_image_donor_has_the_closest_aspect_ratio_and_none_is_one_only_the_own_document_has():
    from mmlongembed.ops.multisource.quotes import Donor

    instance = _supply_case()[0]
    donors = [("x.pdf", Donor("x:wide", 10, 20, b"a")), ("y.pdf", Donor("y:wider", 10, 40, b"b")),
              ("z.pdf", Donor("z:tall", 20, 10, b"c")), ("own.pdf", Donor("own:wider", 10, 39, b"d"))]
    supply = Supply([], {}, {}, donors, answer_pattern=lambda a: None)
    rng = np.random.default_rng(0)
    assert supply.image_donor(instance, set(), 10, 38, rng).id == "y:wider"
    assert supply.image_donor(instance, set(), 21, 10, rng).id == "z:tall"
    assert supply.image_donor(instance, {"x.pdf", "y.pdf", "z.pdf"}, 10, 21, rng).id == "x:wide"
    alone = Supply([], {}, {}, donors[3:], answer_pattern=lambda a: None)
    assert alone.image_donor(instance, set(), 10, 38, rng) is None


def test_gold_guard_keeps_each_query_s_gold_quotes_in_its_own_group():
    instance, blocks, refill = _supply_case()
    supply = Supply.of(blocks, refill, default_counter(), whole=lambda b: True, answer_pattern=lambda a: None)
    page = {supply.doc_of_block[u.id]: units_document(u.id, [u]) for u in supply.blocks}  # one page per document
    guard = GoldGuard()
    first_gold = [blocks[3].quotes[0]]  # c.pdf's text is the first query's gold
    assert guard.admit(first_gold, [page["c.pdf"]])
    assert not guard.clean(page["c.pdf"]) and guard.clean(page["a.pdf"])
    # a candidate holding an admitted query's gold is refused, and the refusal records nothing
    assert not guard.admit(instance.gold_quotes(), [page["d.pdf"], page["c.pdf"]])
    assert guard.gold == first_gold and len(guard.contents) == 1
    assert guard.unclaimed(instance.gold_quotes())
    assert guard.admit(instance.gold_quotes(), [page["a.pdf"]])  # a.pdf holds this query's own gold text
    # a.pdf and d.pdf (the gold image's bytes) are now claimed: a query with that gold may not join
    assert not guard.unclaimed([instance.gold_quotes()[0]])
    assert guard.clean(page["b.pdf"]) and not guard.admit([instance.gold_quotes()[0]], [page["b.pdf"]])
    assert guard.unclaimed([_image("x", 0, 9)]) and not guard.clean(page["d.pdf"])
