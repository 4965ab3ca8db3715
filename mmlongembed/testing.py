"""Small generated sources that ship with the package, so every builder can be built on a fresh
clone without ../shared/data (tests, the registry-wide smoke test, users trying things out)."""

from __future__ import annotations

import json
import random
from pathlib import Path

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
