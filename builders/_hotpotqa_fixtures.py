"""The HotpotQA builder's fixture: generated sources in the original formats (HotpotQA JSON
Lines, WikiText raw) for its example build and its tests. A private module: the registry scan
skips it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from mmlongembed.testing import SYLLABLES, mark_synthetic


def write_hotpotqa_sources(root: Path, padding_dir: Path = Path("haystack_text") / "wikitext-2-raw",
                           n_instances: int = 16, n_articles: int = 12, seed: int = 11,
                           subject_share: float = 0.0) -> None:
    """Generated sources in the original formats (HotpotQA JSONL, WikiText raw) for a tiny build
    on a fresh clone: made-up words, real structure (titles, sentences, supporting facts). With
    ``subject_share``, that share of a paragraph's later sentences name its subject as its first
    does (a Wikipedia paragraph repeats its entity's name: the question's words then occur in
    sentences that are no evidence too, as they do in the real data)."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))

    def sentence(subject: str) -> str:
        return f"{subject} " + " ".join(word() for _ in range(rng.randint(6, 12))) + "."

    (root / "hotpotqa").mkdir(parents=True, exist_ok=True)
    with open(root / "hotpotqa" / "sample.jsonl", "w", encoding="utf-8") as handle:
        for i in range(n_instances):
            titles = [f"{word().title()} {word().title()} {i}-{k}" for k in range(4)]
            context = [[t, [sentence(t.split()[0]) if j == 0 else " " + sentence(
                t.split()[0] if subject_share and rng.random() < subject_share else word().title())
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
    mark_synthetic(root)
