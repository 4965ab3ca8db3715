"""A small benchmark in the published layout whose candidates carry the edits the explorer marks:
HotpotQA-like hard negatives (an evidence sentence removed and refilled), a needle grid pool (a
needle at a recorded depth, more queries than one page), page swaps (MMLongBench-like), and event
blocks of frames shuffled (temporal)."""

from __future__ import annotations

import random
from pathlib import Path

from harness.fixtures import png
from mmlongembed.core.documents import FRAME, image_segment, text_document
from mmlongembed.core.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.testing import write_fixture_build
from mmlongembed.core.tokens import default_counter

WORDS = ("river valley county railway station opened during century school museum village church bridge "
         "north south harbour council market tower garden island castle parish").split()
EVIDENCE = ["Marlow Keep was designed by the architect Ilse Varga in 1931.",
            "Ilse Varga was born in the lakeside town of Oberwil."]
REFILLS = {"drop_first": "The county fair moved to the eastern meadow after the flood.",
           "drop_last": "A narrow gauge railway once linked the quarry to the harbour."}


def filler(rng: random.Random, sentences: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(sentences)]


def _band(length: int) -> LengthBand:
    return LengthBand(target=length, lo=1, hi=10 ** 6)


def _candidate(cid, text, role, group, source, counter, provenance, extra=None):
    doc = text_document(cid, text, counter)
    return Candidate(id=cid, document=doc, role=role, group=group, source_id=source, n_tokens=doc.tokens,
                     provenance=provenance, extra=extra or {})


def hotpot_pool(counter) -> Pool:
    """Three queries: a positive holding both evidence sentences far apart, its drop_first and
    drop_last variants (the sentence refilled in place), and one easy negative."""
    rng = random.Random("explore-hotpot")
    pool = Pool(name="hotpotqa-hard-1k", task="multi_source_reasoning", dataset="hotpotqa", difficulty="hard",
                band=_band(1024), modality="text", facts={"fixture": True})
    for q in range(3):
        qid = f"hq{q}"
        head, middle, tail = filler(rng, 12), filler(rng, 14), filler(rng, 12)
        sentences = head + [EVIDENCE[0]] + middle + [EVIDENCE[1]] + tail
        positive = " ".join(sentences)
        pool.queries.append(Query(id=qid, text=f"Where was the architect of Marlow Keep born? ({q})",
                                  instruction="Retrieve the document that answers the question.", source_id=f"h{q}",
                                  n_tokens=14))
        pool.candidates.append(_candidate(f"{qid}-pos", positive, POSITIVE, qid, f"h{q}", counter,
                                          {"variant": "original", "n_evidence": 2}))
        for variant, index in (("drop_first", 0), ("drop_last", 1)):
            text = positive.replace(EVIDENCE[index], REFILLS[variant])
            pool.candidates.append(_candidate(
                f"{qid}-{variant}", text, HARD_NEGATIVE, qid, f"h{q}", counter,
                {"variant": variant, "removed": [{"index": index, "replacement": {"source": f"wiki:refill-{variant}"}}]}))
        pool.candidates.append(_candidate(f"{qid}-easy", " ".join(filler(rng, 40)), EASY_NEGATIVE, qid, f"o{q}",
                                          counter, {"variant": "other_instance"}))
        pool.qrels.append((qid, f"{qid}-pos", 1))
    return pool


NEEDLE_QUERIES = 23  # more than one page of the query list (20)
NEEDLE_MISSES = 4  # the first queries share no word with any candidate: BM25 ties them all, a miss


def needle_pool(counter) -> Pool:
    """A grid pool: each query's one candidate holds its needle sentence after `k` filler sentences;
    the realised depth is recorded as the builder does (0..1 of the tokens)."""
    rng = random.Random("explore-needle")
    pool = Pool(name="needle-text-text-1k-d50", task="visual_grounding", dataset="needle", difficulty="grid",
                band=_band(1024), depth=50.0, modality="text",
                facts={"needle_modality": "text", "background": "text", "fixture": True})
    for q in range(NEEDLE_QUERIES):
        qid = f"nq{q}"
        needle = f"The secret code of vault {q} is {rng.randrange(10 ** 5, 10 ** 6)}."
        before, after = " ".join(filler(rng, 20)), " ".join(filler(rng, 20))
        text = f"{before} {needle} {after}"
        start = len(before) + 1
        doc = text_document(f"{qid}-pos", text, counter)
        realised = round(counter.count(before + " ") / doc.tokens, 6)
        question = "zzzz qqqq" if q < NEEDLE_MISSES else f"What is the secret code of vault {q}?"
        pool.queries.append(Query(id=qid, text=question, instruction="Find it.",
                                  source_id=f"n{q}", n_tokens=10))
        pool.candidates.append(Candidate(
            id=f"{qid}-pos", document=doc, role=POSITIVE, group=qid, source_id=f"n{q}", n_tokens=doc.tokens,
            provenance={"needle_char_range": [start, start + len(needle)], "needle_modality": "text",
                        "needle_text": needle, "nominal_depth": 50.0},
            extra={"depth": 50.0, "realised_depth": realised}))
        pool.qrels.append((qid, f"{qid}-pos", 1))
    return pool


def page(k: int) -> bytes:
    return png(((53 * k) % 256, (97 * k) % 256, (151 * k) % 256), size=(120, 160))


def pages_pool(counter) -> Pool:
    """Two queries over paged documents: the positive's four pages, a hard negative with pages 1
    and 2 swapped for two other pages (the rest the same images: stored once)."""
    pool = Pool(name="mmlongbench-hard-1k", task="logical_summarization", dataset="mmlongbench", difficulty="hard",
                band=_band(1024), modality="image", facts={"fixture": True})
    for q in range(2):
        qid = f"mq{q}"
        pages = [page(10 * q + k) for k in range(4)]
        swapped = [pages[0], page(100 + 10 * q), page(101 + 10 * q), pages[3]]
        for cid, role, images, variant in ((f"{qid}-pos", POSITIVE, pages, "original"),
                                           (f"{qid}-swap", HARD_NEGATIVE, swapped, "swap_middle")):
            segments = [image_segment(im, height=160, width=120) for im in images]
            doc = text_document(cid, f"Report {q}.", counter).with_segments(segments)
            pool.candidates.append(Candidate(id=cid, document=doc, role=role, group=qid, source_id=f"m{q}",
                                             n_tokens=doc.tokens, provenance={"variant": variant}))
        pool.queries.append(Query(id=qid, text=f"Summary of report {q}: the budget grew.", instruction="Find the report.",
                                  source_id=f"m{q}", n_tokens=10))
        pool.qrels.append((qid, f"{qid}-pos", 1))
    return pool


def frames_pool(counter) -> Pool:
    """One query over a video's three event blocks of two frames each: the positive in order, a
    variant with the front blocks shuffled (order 1, 0, 2)."""
    pool = Pool(name="activitynet-hard-48", task="temporal_summarization", dataset="activitynet", difficulty="hard",
                band=_band(48), modality="video", facts={"candidate_form": "frames", "fixture": True})
    frames = [png((40 * k, 200 - 20 * k, 90), size=(64, 48)) for k in range(6)]
    blocks = [{"event_index": b, "start": 2.0 * b, "end": 2.0 * b + 2, "n_frames": 2} for b in range(3)]
    for cid, role, order, variant in (("v-pos", POSITIVE, [0, 1, 2], "original"),
                                      ("v-front", HARD_NEGATIVE, [1, 0, 2], "front_shuffle")):
        grid = [2 * b + f for b in order for f in range(2)]
        segments = [image_segment(frames[j], height=48, width=64, kind=FRAME, timestamp=float(j)) for j in grid]
        doc = text_document(cid, "x", counter).with_segments(segments)
        pool.candidates.append(Candidate(
            id=cid, document=doc, role=role, group="vq0", source_id="vid0", n_tokens=doc.tokens,
            provenance={"variant": variant, "order": order, "blocks": blocks, "video_id": "vid0"},
            extra={"video_id": "vid0", "block_of_frame": [b for b in order for _ in range(2)],
                   "frame_pts": [float(j) for j in grid]}))
    pool.queries.append(Query(id="vq0", text="A man opens a door, walks in, then sits down.", instruction="Find the video.",
                              source_id="vid0", n_tokens=12))
    pool.qrels.append(("vq0", "v-pos", 1))
    return pool


def explore_benchmark(root: Path) -> Path:
    counter = default_counter()
    return write_fixture_build(root, [hotpot_pool(counter), needle_pool(counter), pages_pool(counter),
                                      frames_pool(counter)], "explorer fixture")
