"""Small generated sources that ship with the package, so every builder can be built on a fresh
clone without ../shared/data (tests, the registry-wide smoke test, users trying things out)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from mmlongembed.rng import derive_rng

def strings_in(value):
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def texts_under(root: Path) -> list[str]:
    """All text in a directory of text, JSON and JSON Lines files (the sample sources)."""
    texts: list[str] = []
    for path in sorted(Path(root).rglob("*")):
        if path.suffix in (".txt", ".raw", ".csv", ".md"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    texts.extend(strings_in(json.loads(line)))
        elif path.suffix == ".json":
            texts.extend(strings_in(json.loads(path.read_text(encoding="utf-8"))))
    return [t for t in texts if t.strip()]


SYLLABLES = "ka lo mi ne su ra to vi de pa zu qe ba ri no fe gu xi wa yo".split()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def make_report(rng: random.Random, topic_words: list[str], n_paragraphs: int) -> str:
    paragraphs = []
    for p in range(n_paragraphs):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            words = [rng.choice(topic_words) if rng.random() < 0.4 else _word(rng) for _ in range(rng.randint(8, 20))]
            sentences.append(words[0].capitalize() + " " + " ".join(words[1:]) + ".")
        if p % 7 == 0:
            paragraphs.append(f"Section {p // 7 + 1}: {rng.choice(topic_words).title()}")
        paragraphs.append(" ".join(sentences))
    return "\n".join(paragraphs)


def write_govreport_jsonl(path: Path, n_reports: int = 40, seed: int = 7, paragraphs=(30, 260)) -> list[dict]:
    """Reports in GovReport's original JSONL format (`id`, `report`, `summary`)."""
    rng = random.Random(seed)
    records = []
    for i in range(n_reports):
        topic = [_word(rng) for _ in range(12)]
        report = make_report(rng, topic, rng.randint(*paragraphs))
        summary = " ".join(
            " ".join(rng.choice(topic) for _ in range(10)).capitalize() + "." for _ in range(5)
        )
        records.append({"id": f"gao_TEST-{i:03d}", "report": report, "summary": summary})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return records


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
    from PIL import Image

    """A small source tree in the shared-data layout: NeedleBench files, plain-text haystack with
    Gutenberg markers, and three Pillow-made photos."""
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
    return root


def write_hotpotqa_sources(root: Path, padding_dir: Path = Path("haystack_text") / "wikitext-2-raw",
                           n_instances: int = 16, n_articles: int = 12, seed: int = 11) -> None:
    """Generated sources in the original formats (HotpotQA JSONL, WikiText raw) for a tiny build
    on a fresh clone: made-up words, real structure (titles, sentences, supporting facts)."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))

    def sentence(subject: str) -> str:
        return f"{subject} " + " ".join(word() for _ in range(rng.randint(6, 12))) + "."

    (root / "hotpotqa").mkdir(parents=True, exist_ok=True)
    with open(root / "hotpotqa" / "sample.jsonl", "w", encoding="utf-8") as handle:
        for i in range(n_instances):
            titles = [f"{word().title()} {word().title()} {i}-{k}" for k in range(4)]
            context = [[t, [sentence(t.split()[0]) if j == 0 else " " + sentence(word().title())
                            for j in range(rng.randint(3, 5))]] for t in titles]
            facts = [[titles[0], 0], [titles[2], 1]] + ([[titles[3], 0]] if i % 3 == 0 else [])
            record = {"_id": f"sample{i:03d}", "question": f"Which {word()} links {titles[0]} and {titles[2]}?",
                      "answer": f"Zz{word()}", "type": "bridge", "level": "hard",
                      "supporting_facts": facts, "context": context}
            handle.write(json.dumps(record) + "\n")
    padding = root / padding_dir
    padding.mkdir(parents=True, exist_ok=True)
    lines = []
    for a in range(n_articles):
        lines.append(f" = {word().title()} {word().title()} = ")
        for p in range(rng.randint(2, 10)):
            if p % 4 == 3:
                lines.append(f" = = {word().title()} = = ")
            lines.append(" " + " ".join(sentence(word().title()) for _ in range(rng.randint(3, 6))) + " ")
    (padding / "wiki.sample.raw").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")


def write_fixture_build(root: Path, pools, title: str = "Test benchmark", seed: int = 0,
                        builder: str = "fixture") -> Path:
    """Hand-made pools written in the published layout with the core writer, with a minimal card
    and a manifest that records the data files (harness and publishing tests)."""
    from mmlongembed.card import yaml_header
    from mmlongembed.output import pool_statistics, write_json, write_tables

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written = write_tables(pools, root, seed=seed, builder=builder, progress=False)
    header = yaml_header(licence="cc-by-4.0", languages=["en"], pretty_name=title, configs=written.specs,
                         n_rows=sum(len(p.queries) + len(p.candidates) for p in pools))
    (root / "README.md").write_text(header + f"# {title}\n", encoding="utf-8")
    write_json(root / "manifest.json", {"builder": {"name": builder}, "toolkit": "mmlongembed-test",
                                        "files": written.files, "pools": [pool_statistics(p) for p in pools]})
    return root


def write_mmeb_fixture(root: Path, n_rows: int = 4, seed: int = 5) -> Path:
    """Generated retrieval pairs in the MMEB-train layout (``<subset>/train.jsonl`` with ``qry``,
    ``qry_image_path``, ``pos_text``, ``pos_image_path``; images under ``images/``): a text-to-image,
    an image-to-text and a text-to-text subset, plus rows of the excluded OVEN subset."""
    from PIL import Image

    rng = random.Random(seed)
    root = Path(root)

    def sentence() -> str:
        return " ".join(_word(rng) for _ in range(rng.randint(5, 10))).capitalize() + "."

    def image(subset: str, i: int) -> str:
        relative = f"images/{subset}/{i}.png"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        pixels = (derive_rng(seed, subset, i).random((24, 32, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(root / relative)
        return relative

    subsets = {
        "MSCOCO_t2i": [{"qry": f"Find me an everyday image that matches the given caption: {sentence()}",
                        "qry_image_path": "", "pos_text": "<|image_1|>\nRepresent the given image.",
                        "pos_image_path": image("MSCOCO_t2i", i)} for i in range(n_rows)],
        "MSCOCO_i2t": [{"qry": "<|image_1|>\nFind an image caption describing the given everyday image.",
                        "qry_image_path": image("MSCOCO_i2t", i), "pos_text": sentence(), "pos_image_path": ""}
                       for i in range(n_rows)],
        "WebQA": [{"qry": f"Find a Wikipedia paragraph that answers this question: {sentence()[:-1]}?",
                   "qry_image_path": "", "pos_text": f"{_word(rng).title()}\n{sentence()} {sentence()}",
                   "pos_image_path": ""} for _ in range(n_rows)],
        "OVEN": [{"qry": "<|image_1|>\nRetrieve a Wikipedia image-description pair for the entity.",
                  "qry_image_path": image("OVEN", i), "pos_text": sentence(), "pos_image_path": ""}
                 for i in range(2)],
    }
    for subset, rows in subsets.items():
        (root / subset).mkdir(parents=True, exist_ok=True)
        with open(root / subset / "train.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    return root
