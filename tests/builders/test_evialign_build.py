"""The evialign-evidence builder: builds through the loopback teacher (faults included), the
training-data layout, validation that catches wrong constructions, replay determinism."""

import json
import shutil
from pathlib import Path

import pytest

from builders._evialign_checks import check_input_row
from builders._evialign_fixtures import write_mmeb_fixture
from builders.evialign_evidence import NAME, EviAlignConfig
from mmlongembed.build.run import run_build
from mmlongembed.core.builder import get_builder
from mmlongembed.cli import main
from mmlongembed.core.errors import UserError
from mmlongembed.training.evialign import TeacherFaults, student_tokenizer, teacher_responder
from mmlongembed.llm.fake_server import FakeOpenAIServer
from mmlongembed.ops.evialign import units_for
from mmlongembed.readers.mmeb_train import OOD_SUBSETS
from mmlongembed.training.tables import read_training_tables
from mmlongembed.build.validate import InvalidBuild, format_report, validate_dir
from tests.support.realdata import shared_data_dir

# the samples' stand-in subsets are not MMEB's retrieval subsets: a build names them
SAMPLE_SUBSETS = ("MMLongBench-Doc", "HotpotQA", "scikit-image-photos")
FAULTS = TeacherFaults(malformed_every=5, missing_unit_every=9, failing_every=11, repetitive_every=13,
                       token_in_unit_every=17, overlong_every=7, unclosed_thinking_every=23)


def build(sources: Path, out: Path, cache: Path, server=None, **options) -> Path:
    builder = get_builder("evialign-evidence")
    llm = {"llm": "openai", "llm_base_url": server.url} if server else {"llm": "replay"}
    options = {"llm_max_retries": 0, "llm_backoff": 0.0, **options}
    config = EviAlignConfig(sources=str(sources), llm_model="fake-teacher", llm_cache=str(cache), **llm, **options)
    return run_build(builder, config, out, overwrite=True, progress=False)


def tables(root: Path) -> dict:
    from mmlongembed.output.layout import configs_from_card

    return read_training_tables(root, configs_from_card(root / "README.md"))


def rows_of(table: dict) -> list[dict]:
    return [{k: v[i] for k, v in table.items()} for i in range(len(next(iter(table.values()))))]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """Real pairs from the shared data in the MMEB-train layout, plus rows of an excluded subset."""
    from mmlongembed.training.mmeb_samples import write_mmeb_samples

    root = tmp_path_factory.mktemp("mmeb-sample")
    counts = write_mmeb_samples(shared_data_dir(), root, per_source=10, max_pixels=60_000)
    assert all(counts.values())
    oven = (root / "scikit-image-photos" / "train.jsonl").read_text().splitlines()[:3]
    (root / "OVEN").mkdir()
    (root / "OVEN" / "train.jsonl").write_text("\n".join(oven) + "\n")
    return root


@pytest.fixture(scope="module")
def faulty_build(sample, tmp_path_factory):
    work = tmp_path_factory.mktemp("faulty")
    with FakeOpenAIServer(responder=teacher_responder(FAULTS)) as server:
        out = build(sample, work / "out", work / "cache", server, subsets=SAMPLE_SUBSETS)
        requests = server.requests
    return out, requests


@pytest.mark.realdata
def test_sample_builds_through_the_loopback_teacher_with_faults(faulty_build):
    out, requests = faulty_build
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    manifest = json.loads((out / "manifest.json").read_text())
    stats, skipped = manifest["statistics"], manifest["report"]["skipped"]
    # every fault the teacher was scripted to make is counted under its reason
    for reason in ("evidence_units:request_failed:http_500", "evidence_units:invalid_output:missing_key",
                   "evidence_units:invalid_output:unclosed_reasoning", "evidence:repetition",
                   "evidence:boundary_token_in_unit", "evidence:over_limit"):
        assert skipped.get(reason, 0) > 0, reason
    assert stats["first_reply_breaks_contract"] > 0  # malformed first replies, repaired
    assert skipped["ood_subset_excluded"] == 3
    # an evidence page that two questions share is one input, described once
    assert stats["inputs_read"] < 2 * stats["pairs_read"]
    # the four filter groups account for every input the teacher was asked about
    groups = stats["filtered"]
    assert stats["inputs_read"] == sum(groups.values()) + stats["assembled"]
    assert groups["teacher_failed"] == skipped["evidence_units:request_failed:http_500"]
    assert stats["teacher_replies"] == stats["inputs_read"] - groups["teacher_failed"]
    assert stats["format_valid"] == stats["teacher_replies"] - groups["invalid_format"]
    assert stats["format_validity"] == round(stats["format_valid"] / stats["teacher_replies"], 4)
    # the card reports validity, the mean evidence length and the skips
    card = (out / "README.md").read_text()
    assert f"{stats['format_valid']} / {stats['teacher_replies']}" in card and "99.52" in card
    assert str(stats["mean_evidence_tokens"]) in card and "`evidence:repetition`" in card
    # the manifest pins what made the build
    assert set(manifest["files"]) == {p.relative_to(out).as_posix() for p in out.glob("data/*/*.parquet")}
    step = manifest["llm_steps"][0]
    assert step["prompt"] == "evidence_units" and len(step["prompt_hash"]) == 16 and step["model"] == "fake-teacher"
    assert manifest["tokenizer"]["boundary_token_ids"] == {"<ENT>": 151669, "<ATT>": 151670, "<REL>": 151671,
                                                           "<DET>": 151672, "<SUM>": 151673}
    assert manifest["seed"] == 0 and manifest["sources"]["files"] and manifest["sources"]["images_sha256"]


@pytest.mark.realdata
def test_kept_evidence_is_aligned_back_to_its_pairs(faulty_build, sample):
    out, _ = faulty_build
    data = tables(out)
    inputs = {r["input_id"]: r for r in rows_of(data["inputs"])}
    pairs = rows_of(data["pairs"])
    assert pairs and set(inputs) == {p["query_input_id"] for p in pairs} | {p["candidate_input_id"] for p in pairs}
    assert not {p["subset"] for p in pairs} & set(OOD_SUBSETS)
    for pair in pairs:
        subset, row = pair["pair_id"].split(":")
        source = json.loads((sample / subset / "train.jsonl").read_text().splitlines()[int(row)])
        query, candidate = inputs[pair["query_input_id"]], inputs[pair["candidate_input_id"]]
        assert query["side"] == "query" and candidate["side"] == "candidate"
        assert query["text"] == source["qry"].replace("<|image_1|>", "<|image|>")
        assert candidate["text"] == source["pos_text"].replace("<|image_1|>", "<|image|>")
        for side, key in ((query, "qry_image_path"), (candidate, "pos_image_path")):
            expected = [(sample / source[key]).read_bytes()] if source[key] else []
            assert [im["bytes"] for im in side["images"]] == expected
    assert len(set(data["inputs"]["input_id"])) == len(data["inputs"]["input_id"])


@pytest.mark.realdata
def test_loads_with_load_dataset(faulty_build):
    import datasets

    out, _ = faulty_build
    inputs = datasets.load_dataset(str(out), "inputs", split="train")
    pairs = datasets.load_dataset(str(out), "pairs", split="train")
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(inputs) == manifest["tables"]["inputs"] and len(pairs) == manifest["tables"]["pairs"]
    with_image = next(r for r in inputs if r["images"])
    assert with_image["images"][0].size[0] > 0  # decoded as an image
    row = inputs[0]
    assert row["target_semantic"].endswith("<SUM>") and len(row["readout_positions_mixed_distributed"]) == 5


@pytest.mark.realdata
def test_replay_rebuilds_byte_identical_data(sample, tmp_path):
    faults = TeacherFaults(malformed_every=5, missing_unit_every=7, repetitive_every=13)  # no transport failure
    with FakeOpenAIServer(responder=teacher_responder(faults)) as server:
        first = build(sample, tmp_path / "a", tmp_path / "cache", server, subsets=SAMPLE_SUBSETS)
    second = build(sample, tmp_path / "b", tmp_path / "cache", subsets=SAMPLE_SUBSETS)  # --llm replay: no server
    files = json.loads((first / "manifest.json").read_text())["files"]
    assert files == json.loads((second / "manifest.json").read_text())["files"]
    for path in files:
        assert (first / path).read_bytes() == (second / path).read_bytes()
    replay = json.loads((second / "manifest.json").read_text())["llm_steps"][0]
    assert replay["backend"] == "replay" and replay["calls"] == 0


# The paper's K ablation (EviAlign §4.4): "They respectively use Entity; Entity/Attribute/Relation; the
# default five units; and two additional units, Context (scene context) and Emotion (emotional tone)".
PAPER_UNIT_SETS = {1: ["Entity"], 3: ["Entity", "Attribute", "Relation"],
                   5: ["Entity", "Attribute", "Relation", "Detail", "Summary"],
                   7: ["Entity", "Attribute", "Relation", "Detail", "Context", "Emotion", "Summary"]}
TOKEN_OF = {"Entity": "<ENT>", "Attribute": "<ATT>", "Relation": "<REL>", "Detail": "<DET>", "Context": "<CTX>",
            "Emotion": "<EMO>", "Summary": "<SUM>"}


@pytest.mark.realdata
def test_replay_reproduces_a_build_whose_teacher_failed_in_transport(sample, tmp_path):
    """HTTP 500 after the retries is recorded: a replay gives the same files and teacher_failed counts;
    a live rerun asks the failed requests again, and its answers replace the failures."""
    failing = TeacherFaults(malformed_every=5, failing_every=4, repetitive_every=13)
    options = dict(subsets=SAMPLE_SUBSETS, llm_max_retries=1)
    with FakeOpenAIServer(responder=teacher_responder(failing)) as server:
        # transient: the retry answers (one, so that no request can draw it twice in its two tries,
        # whatever order the concurrent requests arrive in)
        server.fail_next(1, status=503)
        first = build(sample, tmp_path / "a", tmp_path / "cache", server, **options)
    replayed = build(sample, tmp_path / "b", tmp_path / "cache", **options)  # --llm replay: no server at all

    def outcome(out):
        manifest = json.loads((out / "manifest.json").read_text())
        failed = {k: v for k, v in manifest["report"]["skipped"].items() if "request_failed" in k}
        return manifest["files"], manifest["statistics"], failed

    files, statistics, failed = outcome(first)
    assert statistics["filtered"]["teacher_failed"] > 0 and failed == {
        "evidence_units:request_failed:http_500": statistics["filtered"]["teacher_failed"]}
    assert outcome(replayed) == (files, statistics, failed)
    for path in files:
        assert (first / path).read_bytes() == (replayed / path).read_bytes()
    # the server recovers: a live rerun asks only what failed, and a replay now reproduces that build
    with FakeOpenAIServer(responder=teacher_responder(TeacherFaults(malformed_every=5, repetitive_every=13))) as server:
        rerun = build(sample, tmp_path / "c", tmp_path / "cache", server, **options)
        asked = sum(len(body["messages"]) == 2 for body in server.bodies)  # first turns, not repair turns
    assert asked == statistics["filtered"]["teacher_failed"]
    assert outcome(rerun)[1]["filtered"]["teacher_failed"] == 0
    assert outcome(build(sample, tmp_path / "d", tmp_path / "cache", **options)) == outcome(rerun)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_unit_count_ablation_builds_the_papers_unit_sets(k, tmp_path):
    import re

    sources = write_mmeb_fixture(tmp_path / "mmeb", n_rows=2)
    with FakeOpenAIServer(responder=teacher_responder(think=False)) as server:
        out = build(sources, tmp_path / "out", tmp_path / "cache", server, units=k)
        bodies = list(server.bodies)
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    labels = PAPER_UNIT_SETS[k]
    keys, tokens = [label.lower() for label in labels], [TOKEN_OF[label] for label in labels]
    # the teacher is asked for exactly the set's units, in the prompt and in its JSON contract
    assert bodies
    for body in bodies:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        text = user if isinstance(user, str) else "".join(p.get("text", "") for p in user)
        assert re.findall(r"^- ([a-z]+): ", text.split("Units to write", 1)[1], re.MULTILINE) == keys
        assert body["response_format"]["json_schema"]["schema"]["required"] == keys
    # the student tokenizer gets the set's tokens, in unit order, after the vocabulary
    manifest = json.loads((out / "manifest.json").read_text())
    ids = dict(zip(tokens, range(151669, 151669 + k)))
    assert manifest["tokenizer"]["boundary_token_ids"] == ids
    for row in rows_of(tables(out)["inputs"]):
        assert list(row["units"]) == keys
        assert re.findall(r"\[([A-Za-z]+)\] ", row["target_semantic"]) == labels
        assert re.findall("|".join(map(re.escape, TOKEN_OF.values())), row["target_semantic"]) == tokens
        for condition in ("semantic", "mixed"):
            target = row[f"target_ids_{condition}"]
            boundary = row[f"readout_positions_{condition}_boundary"]
            assert [target[p] for p in boundary] == list(ids.values())
            # Trailing reads the token that closes the whole evidence: <SUM> where the set has it
            assert row[f"readout_positions_{condition}_trailing"] == [len(target) - 1]
            assert target[-1] == ids[tokens[-1]]
            spread = row[f"target_ids_{condition}_distributed"]
            assert [spread[p] for p in row[f"readout_positions_{condition}_distributed"]] == list(ids.values())
        if k == 1:
            assert row["mixed_permutation"] == [0] and row["target_mixed"] == row["target_semantic"]
    card = (out / "README.md").read_text()
    assert "K = 1: Entity; K = 3: Entity, Attribute, Relation; K = 5:" in card
    assert f"reads only its last token, here `{tokens[-1]}`" in card
    assert "Evidence-Aligned Readout" in card and "paper 002" not in card


# -- validation catches wrong constructions ----------------------------------------------------------

@pytest.fixture(scope="module")
def good_rows(tmp_path_factory):
    work = tmp_path_factory.mktemp("good")
    sources = write_mmeb_fixture(work / "mmeb", n_rows=2)
    with FakeOpenAIServer(responder=teacher_responder()) as server:
        out = build(sources, work / "out", work / "cache", server)
    manifest = json.loads((out / "manifest.json").read_text())
    return rows_of(tables(out)["inputs"]), manifest["config"], out


def _problems(row, config):
    units = units_for(5)
    tokenizer = student_tokenizer(None, tuple(u.token for u in units))
    return {check for check, _ in check_input_row(row, units, tokenizer, config, NAME)}


def test_validation_accepts_the_built_rows(good_rows):
    rows, config, _ = good_rows
    assert all(not _problems(row, config) for row in rows)


def _ceil_distributed(row):
    """A plausible wrong Distributed target: ceil(kT/5) instead of floor."""
    tokens = [151669, 151670, 151671, 151672, 151673]
    x = [i for i in row["target_ids_semantic"] if i not in tokens]
    t = len(x)
    ids, taken = [], 0
    for j, token in enumerate(tokens, 1):
        cut = -(-j * t // 5)
        ids += x[taken:cut] + [token]
        taken = cut
    return ids


@pytest.mark.parametrize("wrong, expected", [
    ("ceil_distributed", "distributed"),
    ("tokens_moved_in_mixed", "target_format"),
    ("identity_mixed", "mixed_permutation"),
    ("text_after_last_token", "target_format"),
    ("boundary_ids_misplaced", "boundary_positions"),
    ("t_without_labels", "T"),
    ("distributed_from_semantic_in_mixed", "distributed"),
])
def test_validation_rejects_wrong_constructions(good_rows, wrong, expected):
    rows, config, _ = good_rows
    row = dict(next(r for r in rows if r["T"] % 5))  # floor and ceil differ
    if wrong == "ceil_distributed":
        assert _ceil_distributed(row) != row["target_ids_semantic_distributed"]
        row["target_ids_semantic_distributed"] = _ceil_distributed(row)
    elif wrong == "tokens_moved_in_mixed":  # permuting the tokens with the spans
        units = units_for(5)
        spans = [row["units"][u.key] for u in units]
        row["target_mixed"] = "".join(spans[i] + units[i].token for i in row["mixed_permutation"])
    elif wrong == "identity_mixed":
        row["mixed_permutation"] = [0, 1, 2, 3, 4]
        row["target_mixed"] = row["target_semantic"]
    elif wrong == "text_after_last_token":
        row["target_semantic"] += " Done."
    elif wrong == "boundary_ids_misplaced":
        row["readout_positions_semantic_boundary"] = [p - 1 for p in row["readout_positions_semantic_boundary"]]
    elif wrong == "t_without_labels":
        row["T"] -= 15
    elif wrong == "distributed_from_semantic_in_mixed":
        row["target_ids_mixed_distributed"] = row["target_ids_semantic_distributed"]
    assert expected in _problems(row, config)


def test_a_training_build_is_validated_and_kept_by_its_own_pipeline(good_rows, capsys):
    """The builder names its pipeline (TRAINING): `mmle validate` reports the rows and configs it
    counted, the manifest records the kind and the student tokenizer, which the up-to-date rule
    (every kind's; the registry-wide test runs it) compares as it compares the config."""
    _, config, out = good_rows
    manifest = json.loads((out / "manifest.json").read_text())
    assert main(["validate", str(out), "--no-progress"]) == 0
    rows = sum(manifest["tables"].values())
    assert capsys.readouterr().out.startswith(f"validated {rows} rows in 2 configs: all invariants hold")
    assert manifest["builder"]["output_kind"] == "training"
    built_with = EviAlignConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})
    assert manifest["tokenizer"] == get_builder("evialign-evidence").output_tokenizer(built_with)


def test_validate_finds_a_tampered_file(good_rows, tmp_path):
    _, _, out = good_rows
    copy = shutil.copytree(out, tmp_path / "copy")
    import pyarrow.parquet as pq

    path = next(copy.glob("data/pairs/*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # a readable parquet, one row short
    problems, _ = validate_dir(copy)
    assert any(p.check == "file_hashes" for p in problems)
    path.write_bytes(b"not a parquet file")  # an unreadable one: one line naming it
    with pytest.raises(InvalidBuild, match=path.name):
        validate_dir(copy)


# -- MMEB-train as the Hub publishes it ----------------------------------------------------------------

def write_mmeb_release(root: Path, rows: int = 2) -> dict[str, bytes]:
    """A local folder laid out as TIGER-Lab/MMEB-train: per subset the three parquet files
    (``original``, ``diverse_instruction`` with rewritten instructions, the older ``train`` equal to
    ``original``) and the images only in ``images_zip/<Subset>.zip``. Returns image path -> bytes."""
    import io
    import zipfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    def png(seed: int) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (8 + seed, 6), (seed * 20 % 256, 90, 150)).save(buffer, format="PNG")
        return buffer.getvalue()

    images, seed = {}, 0
    layouts = {  # subset -> (query, query image?, positive, positive image?)
        "MSCOCO_t2i": ("Find me an everyday image that matches the given caption: a dog number {i}", False,
                       "<|image_1|>\nRepresent the given image.", True),
        "VisualNews_i2t": ("<|image_1|>\nFind a caption for the news in the given photo.", True,
                           "A news caption about event {i}", False),
        "WebQA": ("Find a Wikipedia paragraph that answers this question: who built tower {i}?", False,
                  "Tower {i}\nThe tower was built by a guild.", False),
        "ImageNet_1K": ("<|image_1|>\nRepresent the given image for classification.", True, "class {i}", False),
    }
    for subset, (query, query_image, positive, positive_image) in layouts.items():
        records = []
        for i in range(rows):
            record = {"qry": query.format(i=i), "pos_text": positive.format(i=i), "neg_text": "", "neg_image_path": ""}
            for key, has in (("qry_image_path", query_image), ("pos_image_path", positive_image)):
                record[key] = ""
                if has:
                    seed += 1
                    record[key] = f"images/{subset}/Train/{i}.png"
                    images[record[key]] = png(seed)
            records.append(record)
        (root / subset).mkdir(parents=True)
        for variant in ("original", "train", "diverse_instruction"):
            rewritten = [{**r, "qry": r["qry"].replace("Find", "Diverse: look for")} for r in records]
            table = pa.Table.from_pylist(rewritten if variant == "diverse_instruction" else records)
            pq.write_table(table, root / subset / f"{variant}-00000-of-00001.parquet")
        (root / "images_zip").mkdir(exist_ok=True)
        with zipfile.ZipFile(root / "images_zip" / f"{subset}.zip", "w") as archive:
            for path, data in images.items():
                if path.split("/")[1] == subset:
                    # members under the row's path, or without its leading images/ (both are looked up)
                    archive.writestr(path if subset != "MSCOCO_t2i" else path.split("/", 1)[1], data)
    return images


def test_mmeb_train_release_reads_the_retrieval_subsets_original_file_and_zipped_images(tmp_path):
    root = tmp_path / "MMEB-train"
    images = write_mmeb_release(root)
    with FakeOpenAIServer(responder=teacher_responder(think=False)) as server:
        out = build(root, tmp_path / "out", tmp_path / "cache", server)
        requests = server.requests
    problems, checked = validate_dir(out)
    assert not problems, format_report(problems, checked)
    data = tables(out)
    inputs = {r["input_id"]: r for r in rows_of(data["inputs"])}
    pairs = rows_of(data["pairs"])
    # each pair once (not once per parquet file), from the retrieval subsets only
    assert sorted(p["pair_id"] for p in pairs) == sorted(f"{s}:{i}" for s in ("MSCOCO_t2i", "VisualNews_i2t", "WebQA")
                                                        for i in range(2))
    assert requests == len(inputs) == 12  # the teacher is asked once per distinct input
    manifest = json.loads((out / "manifest.json").read_text())
    skipped = manifest["report"]["skipped"]
    assert skipped["subset_not_selected"] == 1 and skipped["mmeb_file_not_read"] == 6
    assert "image_missing" not in skipped
    assert [f["file"].split("/")[-1] for f in manifest["sources"]["files"]] == ["original-00000-of-00001.parquet"] * 3
    assert manifest["sources"]["image_archives"] == ["MSCOCO_t2i.zip", "VisualNews_i2t.zip"]
    for row in inputs.values():
        assert "Diverse" not in row["text"]  # original's instructions, not diverse_instruction's
    with_images = [r for r in inputs.values() if r["images"]]
    assert len(with_images) == 4
    assert {bytes(r["images"][0]["bytes"]) for r in with_images} == set(images.values()) - {
        v for k, v in images.items() if k.startswith("images/ImageNet_1K")}
    card = (out / "README.md").read_text()
    assert "VisDial, CIRR, VisualNews_t2i, VisualNews_i2t, MSCOCO_t2i, MSCOCO_i2t, NIGHTS, WebQA" in card
    assert "found and not read:\n   ImageNet_1K" in card and "only `original` is read" in card
    assert "MSCOCO_t2i.zip, VisualNews_i2t.zip" in card


def test_mmeb_train_other_subsets_only_when_asked_for(tmp_path):
    root = tmp_path / "MMEB-train"
    write_mmeb_release(root, rows=1)
    with FakeOpenAIServer(responder=teacher_responder(think=False)) as server:
        named = build(root, tmp_path / "named", tmp_path / "cache", server, subsets=("ImageNet_1K",))
        every = build(root, tmp_path / "every", tmp_path / "cache", server, all_subsets=True)
    assert tables(named)["pairs"]["pair_id"] == ["ImageNet_1K:0"]
    assert sorted(tables(every)["pairs"]["pair_id"]) == ["ImageNet_1K:0", "MSCOCO_t2i:0", "VisualNews_i2t:0",
                                                         "WebQA:0"]
    with pytest.raises(UserError, match="give one"):
        build(root, tmp_path / "both", tmp_path / "cache", subsets=("WebQA",), all_subsets=True)
    # a folder without any MMEB retrieval subset: one line that says how to choose
    samples = write_mmeb_fixture(tmp_path / "local", n_rows=1)
    for subset in ("MSCOCO_t2i", "MSCOCO_i2t", "WebQA"):
        shutil.move(samples / subset, samples / f"my-{subset}")
    with pytest.raises(UserError, match="none of MMEB-train's retrieval subsets .* --subsets, or pass --all-subsets"):
        build(samples, tmp_path / "none", tmp_path / "cache")


# -- bad input --------------------------------------------------------------------------------------

def test_refusals_are_one_line(tmp_path):
    sources = write_mmeb_fixture(tmp_path / "mmeb", n_rows=1)
    builder = get_builder("evialign-evidence")
    with pytest.raises(UserError, match="no fallback"):
        run_build(builder, EviAlignConfig(sources=str(sources)), tmp_path / "out", progress=False)
    with pytest.raises(UserError, match="--sources"):
        run_build(builder, EviAlignConfig(llm="replay"), tmp_path / "out", progress=False)
    with pytest.raises(UserError, match="no cached answer"):
        run_build(builder, EviAlignConfig(sources=str(sources), llm="replay", llm_cache=str(tmp_path / "empty")),
                  tmp_path / "out", progress=False)


def test_bad_rows_are_counted(tmp_path):
    sources = write_mmeb_fixture(tmp_path / "mmeb", n_rows=2)
    with open(sources / "WebQA" / "train.jsonl", "a") as handle:
        handle.write(json.dumps({"qry": "<|image_1|>\nA question", "qry_image_path": "", "pos_text": "p",
                                 "pos_image_path": ""}) + "\n")
        handle.write(json.dumps({"qry": "<|image_1|>\nA question", "qry_image_path": "images/none.png",
                                 "pos_text": "p", "pos_image_path": ""}) + "\n")
        handle.write(json.dumps({"qry": 3, "qry_image_path": "", "pos_text": "p", "pos_image_path": ""}) + "\n")
        handle.write("{broken\n")
    with FakeOpenAIServer(responder=teacher_responder()) as server:
        out = build(sources, tmp_path / "out", tmp_path / "cache", server)
    skipped = json.loads((out / "manifest.json").read_text())["report"]["skipped"]
    assert skipped["image_token_without_image"] == 1 and skipped["image_missing"] == 1
    assert skipped["malformed_record"] == 1 and skipped["malformed_json_line"] == 1
