"""Small benchmarks in the published layout, written with the core writer, for the harness's tests
and benchmarks (bench/harness_throughput.py).

Each query asks about a topic; its positive repeats the topic's words inside filler, easy
negatives are about other topics, hard negatives share a few topic words. Image pools put
Pillow-drawn images between paragraphs.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from mmlongembed.core.documents import image_segment, text_document
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.testing import write_fixture_build
from mmlongembed.core.tokens import default_counter

FILLER = ("the committee reviewed several reports about budgets schedules and staffing during the year "
          "while agencies described their plans and the auditors noted progress on many fronts").split()


def _topic_words(rng: random.Random, n: int) -> list[str]:
    letters = "bcdfghjklmnprstvz"
    return ["".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(3)) for _ in range(n)]


def _paragraphs(rng: random.Random, topic: list[str], n_words: int, share: float) -> str:
    words = [rng.choice(topic) if rng.random() < share else rng.choice(FILLER) for _ in range(n_words)]
    return " ".join(". ".join(" ".join(words[i:i + 12]) for i in range(j, min(j + 48, n_words), 12)) + "."
                    for j in range(0, n_words, 48))


def png(colour: tuple[int, int, int], size=(64, 48), fmt="PNG") -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).rectangle([8, 8, size[0] // 2, size[1] // 2], fill=(255 - colour[0], 40, 200))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def make_pool(name: str, *, dataset="govreport", task="logical_summarization", difficulty="easy", length=512,
              n_queries=4, negatives=3, words=200, images=False, depth=None, seed=0) -> Pool:
    rng = random.Random(f"{name}-{seed}")
    counter = default_counter()
    topics = [_topic_words(rng, 6) for _ in range(n_queries * (negatives + 1))]
    pool = Pool(name=name, task=task, dataset=dataset, difficulty=difficulty,
                band=LengthBand(target=length, lo=1, hi=10 ** 6), depth=depth,
                modality="mixed" if images else "text", facts={"fixture": True})
    for q in range(n_queries):
        qid = f"{name}-q{q}"
        pool.queries.append(Query(id=qid, text=f"Which report is about {' '.join(topics[q][:4])}?",
                                  instruction="Retrieve the report the question is about.",
                                  source_id=f"s{q}", n_tokens=16))
        for k in range(negatives + 1):
            role = POSITIVE if k == 0 else (HARD_NEGATIVE if k == 1 else EASY_NEGATIVE)
            topic = topics[q] if k == 0 else (topics[q][:1] + topics[n_queries + q * negatives + k - 1][1:]
                                               if role == HARD_NEGATIVE else topics[n_queries + q * negatives + k - 1])
            doc = text_document(f"{qid}-c{k}", _paragraphs(rng, topic, words, 0.25), counter)
            if images:
                colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
                middle = len(doc.segments) // 2
                picture = image_segment(png(colour), height=48, width=64)
                doc = doc.with_segments(doc.segments[:middle] + (picture,) + doc.segments[middle:])
            pool.candidates.append(Candidate(id=f"{qid}-c{k}", document=doc, role=role, group=qid,
                                             source_id=f"s{q}", n_tokens=doc.tokens))
        pool.qrels.append((qid, f"{qid}-c0", 1))
    return pool


def write_benchmark(root: Path, pools: list[Pool]) -> Path:
    return write_fixture_build(root, pools, "fixture benchmark")
