"""Generated GovReport sources for tests and the builder's example build (private: the registry
scan skips it): reports of made-up words in GovReport's original JSONL."""

from __future__ import annotations

import json
import random
from pathlib import Path

from mmlongembed.testing import made_up_word, mark_synthetic


def make_report(rng: random.Random, topic_words: list[str], n_paragraphs: int) -> str:
    paragraphs = []
    for p in range(n_paragraphs):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            words = [rng.choice(topic_words) if rng.random() < 0.4 else made_up_word(rng)
                     for _ in range(rng.randint(8, 20))]
            sentences.append(words[0].capitalize() + " " + " ".join(words[1:]) + ".")
        if p % 7 == 0:
            paragraphs.append(f"Section {p // 7 + 1}: {rng.choice(topic_words).title()}")
        paragraphs.append(" ".join(sentences))
    return "\n".join(paragraphs)


def write_govreport_jsonl(path: Path, n_reports: int = 40, seed: int = 7, paragraphs=(30, 260),
                          subjects: int = 0) -> list[dict]:
    """Reports in GovReport's original JSONL format (`id`, `report`, `summary`). Each report's
    twelve topic words are its own, or with ``subjects`` drawn from one of that many shared
    subject vocabularies of sixteen words, as real reports on one subject share their terms (the
    lexical tier's donors can then give a variant back the summary's words)."""
    rng = random.Random(seed)
    vocabularies = [[made_up_word(rng) for _ in range(16)] for _ in range(subjects)]
    records = []
    for i in range(n_reports):
        topic = (rng.sample(vocabularies[rng.randrange(subjects)], 12) if subjects
                 else [made_up_word(rng) for _ in range(12)])
        report = make_report(rng, topic, rng.randint(*paragraphs))
        summary = " ".join(
            " ".join(rng.choice(topic) for _ in range(10)).capitalize() + "." for _ in range(5)
        )
        records.append({"id": f"gao_TEST-{i:03d}", "report": report, "summary": summary})
    mark_synthetic(path.parent)
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return records
