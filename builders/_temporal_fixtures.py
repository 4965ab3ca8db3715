"""The Temporal Summarization fixture: generated videos with made-up dense captions, in the
ActivityNet Captions layout or the YoukuDC release layout, for the ``activitynet`` and ``youkudc``
example builds, their tests and the demo sources."""

from __future__ import annotations

import json
import random
from pathlib import Path

from mmlongembed.testing import made_up_word, mark_synthetic, write_test_video

TEMPORAL_FIXTURE_LENGTHS = (48, 96)  # tokens: fixture frames are 64x48 = 4 tokens each
TEMPORAL_FIXTURE_NOTE = ("SYNTHETIC annotations written by mmlongembed.testing for tests: made-up captions over "
                         "generated videos. Never publish a build made from them.")


def _fixture_events(rng: random.Random, n_events: int, duration: float, with_overview: bool, stretch: float = 1.0):
    spans, t = [], 0.0
    for _ in range(n_events):
        length = stretch * rng.choice((1.6, 2.0, 2.4, 3.0))
        start = max(0.0, t + stretch * rng.choice((-0.3, 0.0, 0.0, 0.2)))
        spans.append([round(start, 2), round(min(duration, start + length), 2)])
        t = start + length
    if with_overview:  # ActivityNet often opens with an event spanning the whole video
        spans.insert(0, [0.0, round(duration, 2)])
    return spans


def _made_up_sentence(rng: random.Random, words: list[str]) -> str:
    picked = [rng.choice(words) for _ in range(rng.randint(5, 8))]
    return f"A person {picked[0]} the {picked[1]} " + " ".join(picked[2:]) + "."


def _made_up_chinese(rng: random.Random) -> str:
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(8, 14))) + "。"


def write_temporal_sources(root: Path, n_videos: int = 12, language: str = "en", layout: str = "activitynet",
                           seed: int = 5, annotations_dir: str = "annotations", videos_dir: str = "videos",
                           id_prefix: str = "v_fixture", stretch: float = 1.0, fps: int = 4,
                           audio: bool = True) -> dict[str, str]:
    """Generated videos with dense-caption annotations, marked SYNTHETIC: ActivityNet Captions
    JSON (``layout="activitynet"``: ``<annotations_dir>/val_1.json`` + ``<videos_dir>/``) or the
    YoukuDC release layout (``"youku"``: ``meta_files`` CSV + ``data_files/<Category>/test/``).
    ``language="zh"`` writes made-up Chinese captions; returns {Chinese caption: made-up English
    translation} for a loopback translator. Video ids are ``<id_prefix>NNN``. ``stretch`` multiplies
    every event's length (and so the video's), ``fps`` is the clips' frame rate (the paper-scale
    bench writes minute-long videos at 1 FPS); ``audio=False`` leaves out every audio track
    (encoding minutes of it is most of the writing time)."""
    import csv

    rng = random.Random(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    mark_synthetic(root, TEMPORAL_FIXTURE_NOTE)
    translations: dict[str, str] = {}
    annotations: dict[str, dict] = {}
    for v in range(n_videos):
        video_id = f"{id_prefix}{v:03d}"
        n_events = rng.randint(5, 8)
        duration = round((n_events * 2.6 + 1.0) * stretch, 2)
        spans = _fixture_events(rng, n_events, duration, with_overview=v % 4 == 0, stretch=stretch)
        words = [made_up_word(rng) for _ in range(30)]
        sentences = []
        for _ in spans:
            english = _made_up_sentence(rng, words)
            if language == "zh":
                chinese = _made_up_chinese(rng)
                translations[chinese] = english
                sentences.append(chinese)
            else:
                sentences.append(" " + english if rng.random() < 0.5 else english)
        annotations[video_id] = {"duration": duration, "timestamps": spans, "sentences": sentences}
        category = ("Agriculture", "Children")[v % 2]
        folder = root / (videos_dir if layout == "activitynet" else Path("data_files") / category / "test")
        write_test_video(folder / f"{video_id.removeprefix('v_') if v % 3 == 0 else video_id}.mp4",
                         duration, seed=seed * 1000 + v, fps=fps, audio=audio and v % 5 != 4)
    if layout == "activitynet":
        (root / annotations_dir).mkdir(exist_ok=True)
        (root / annotations_dir / "val_1.json").write_text(json.dumps(annotations, ensure_ascii=False),
                                                           encoding="utf-8")
    else:
        (root / "meta_files").mkdir(exist_ok=True)
        by_category: dict[str, list] = {}
        for v, (video_id, a) in enumerate(annotations.items()):
            category = ("Agriculture", "Children")[v % 2]
            name = f"{video_id.removeprefix('v_') if v % 3 == 0 else video_id}.mp4"
            captions = [{"timestamp": span, "caption": s} for span, s in zip(a["timestamps"], a["sentences"])]
            by_category.setdefault(category, []).append(
                {"video_id": video_id, "video_path": f"{category}/test/{name}", "duration": a["duration"],
                 "captions": json.dumps(captions, ensure_ascii=False)})
        for category, rows in by_category.items():
            with open(root / "meta_files" / f"{category}.csv", "w", encoding="utf-8", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=["video_id", "video_path", "duration", "captions"])
                writer.writeheader()
                writer.writerows(rows)
    return translations
