"""The needle builder's fixture sources: a small generated tree in the shared-data layout
(NeedleBench needles and names, plain-text haystacks, Pillow-made photos), marked SYNTHETIC, so
the builder builds on a fresh clone (its example, its tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mmlongembed.core.rng import derive_rng
from mmlongembed.testing import mark_synthetic

NEEDLE_FIXTURE_WORDS = ("river stone window garden letter morning evening market bridge lantern orchard meadow harbour "
         "candle kettle village quiet bright narrow gentle heavy slow careful distant ordinary walked "
         "carried noticed remembered opened closed watched followed painted gathered under beside across "
         "toward behind every small old green grey warm cold long short").split()
NEEDLE_RECORDS = [
    {"needle": f"The first band to play on {place} was the {band}.",
     "retrieval_question": f"Which band was the first to perform on {place}? Please answer in the format 'x'.",
     "arg1": place, "arg2": band, "language": "English"}
    for place in ("the Moon", "Venus") for band in ("Virtual Rocket Band", "Galaxy Melody Band")
] + [
    {"needle": f"Hidden on {island} is the legendary {item}.",
     "retrieval_question": f"What legendary item is hidden on {island}? Please answer.",
     "arg1": island, "arg2": item, "language": "English"}
    for island in ("Ghost Island", "Gem Island") for item in ("Sun Stone", "Lucky Clover")
] + [{"needle": "在月球上的第一个乐队是虚拟火箭乐队。", "retrieval_question": "？", "arg1": "月球", "arg2": "虚拟火箭乐队",
      "language": "Chinese"}]
NAMES = ("Alan Baker,Beth Carter,Carl Dawson,Dana Ellis,Evan Foster,Fay Gordon,Glen Harper,Hope Irwin,Ivan Jensen,"
         "Jane Keller,Kurt Lawson,Lena Morgan,Max Nolan,Nina Osborne,Otto Palmer,Pia Quinn,Ross Reyes,Sara Stone,"
         "Tom Turner,Uma Vance,Vic Walsh,Wes Young,Zoe Zimmer,Amy Boyd,Ben Cole,Cal Dunn")


def needle_prose(rng: np.random.Generator, paragraphs: int) -> str:
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(int(rng.integers(2, 6))):
            words = [NEEDLE_FIXTURE_WORDS[int(i)] for i in rng.integers(len(NEEDLE_FIXTURE_WORDS), size=int(rng.integers(6, 16)))]
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def write_needle_sources(root: Path) -> Path:
    """A small source tree in the shared-data layout: NeedleBench files, plain-text haystack with
    Gutenberg markers, and three Pillow-made photos."""
    from PIL import Image

    rng = derive_rng(0, "fixture")
    (root / "needlebench").mkdir(parents=True)
    with open(root / "needlebench" / "needles.jsonl", "w", encoding="utf-8") as handle:
        for record in NEEDLE_RECORDS:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.write("{not json\n")
    (root / "needlebench" / "names.json").write_text(json.dumps({"English": NAMES}), encoding="utf-8")
    with open(root / "needlebench" / "PaulGrahamEssays.jsonl", "w", encoding="utf-8") as handle:
        for i in range(3):
            handle.write(json.dumps({"title": f"essay{i}", "text": needle_prose(rng, 40)}) + "\n")
    (root / "haystack_text" / "gutenberg").mkdir(parents=True)
    (root / "haystack_text" / "gutenberg" / "1.txt").write_text(
        "Licence header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n" + needle_prose(rng, 80)
        + "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nfooter", encoding="utf-8")
    (root / "images").mkdir()
    for i, (w, h) in enumerate([(300, 200), (240, 240), (200, 320)]):
        pixels = (derive_rng(i, "photo").random((h, w, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(root / "images" / f"photo{i}.png")
    mark_synthetic(root)
    return root
