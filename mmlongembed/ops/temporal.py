"""Temporal Summarization: caption events -> runs of event blocks -> positive and shuffled orders.

Pure functions (records in, records out, explicit ``numpy.random.Generator``; no I/O). The paper
(MMLongEmbed §3.2.4, A.4) combines "contiguous action segments" under "a strict anti-overlap
filter with a 0.5-second margin" and perturbs "event-level semantic units". Our reading:

- **Events** of a video: its (start, end, sentence) captions, end clipped to the video's
  duration, sorted by (start, end); empty or inverted spans are dropped (and counted).
- **Chains**: maximal runs of *consecutive* events (neighbours in that order) in which every
  next event follows the previous one under the margin rule (``MARGIN_RULES``):

  ``tolerate`` (default) the next event starts no earlier than 0.5 s before the previous one
  ends (overlap of at most the margin), and ends after it;
  ``gap``  the next event starts at least 0.5 s after the previous one ends (a clear gap);
  ``contiguous``  the next event starts within 0.5 s of the previous one's end, either side.

- **Blocks**: block k of a run covers ``[max(s_k, e_{k-1}), e_k)``, so a tolerated overlap
  belongs to the earlier block and no frame is in two blocks; time between events (a gap) is
  not shown. A block holds the 1-FPS grid frames whose grid time falls in its span; a run
  whose blocks are not all non-empty is not admissible.
- **Runs**: every contiguous sub-run of a chain with at least ``min_blocks`` blocks; a query's
  video contributes one run per length band (the run with the most blocks among those whose
  token count falls in the band, a seeded choice among ties). An easy negative is never
  shuffled, so its run needs fewer blocks; it has the frames of the positive it stands beside,
  cut from the head of a run of its video at least that long. A query's run has the most blocks,
  so it sits near the top of its band: runs merely *nearest* in frames came out shorter far more
  often than longer, and "pick the longest candidate" found the positive (YoukuDC at 750 videos:
  P@1 0.58 against chance 0.25). Equal frames leave length nothing to tell.
- **Hard orders** of the m blocks (frames inside a block keep their order, so events stay
  whole): ``reversal`` = blocks m..1 (or every frame reversed, ``reversal="frames"``);
  ``front_shuffle`` = a non-identity permutation of the first floor(m/2) blocks, the rest in
  place; ``back_shuffle`` = a non-identity permutation of the last ceil(m/2) blocks, the first
  half in place. Both halves need two blocks, hence ``min_blocks >= 4``. With m >= 4 the three
  orders differ from each other and from the identity by construction; the builder still
  checks the frames themselves (identical frames could hide a permutation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mmlongembed.ops.permutations import non_identity_permutation
from mmlongembed.core.pools import LengthBand

MARGIN_RULES = {
    "tolerate": "next start >= previous end - margin (overlap of at most the margin) and next end > previous end",
    "gap": "next start >= previous end + margin (a gap of at least the margin)",
    "contiguous": "|next start - previous end| <= margin and next end > previous end",
}
HARD_VARIANTS = ("reversal", "front_shuffle", "back_shuffle")
REVERSAL_MODES = ("blocks", "frames")
MIN_BLOCKS_FOR_SHUFFLES = 4


@dataclass(frozen=True)
class Event:
    index: int  # position in the source annotation
    start: float
    end: float
    sentence: str


@dataclass(frozen=True)
class Block:
    event_index: int
    start: float  # effective start (after the previous block's end)
    end: float
    sentence: str
    grid: tuple[int, ...]  # 1-FPS grid indices of its frames, in time order

    @property
    def n_frames(self) -> int:
        return len(self.grid)


@dataclass(frozen=True)
class Run:
    video_id: str
    blocks: tuple[Block, ...]
    cut_frames: int = 0  # frames left off the end of the run it was cut from (``cut_run``)

    @property
    def n_frames(self) -> int:
        return sum(b.n_frames for b in self.blocks)

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(j for b in self.blocks for j in b.grid)

    @property
    def sentences(self) -> list[str]:
        return [b.sentence for b in self.blocks]

    @property
    def seconds(self) -> float:
        return sum(b.end - b.start for b in self.blocks)

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(b.event_index for b in self.blocks)


# -- events, chains, blocks, runs --------------------------------------------------------------------

def video_events(timestamps: Sequence, sentences: Sequence, duration: float) -> tuple[list[Event], list[str]]:
    """The video's events sorted by (start, end), and a reason per dropped one."""
    events, dropped = [], []
    if len(timestamps) != len(sentences):
        return [], ["timestamps_sentences_mismatch"]
    for i, (span, sentence) in enumerate(zip(timestamps, sentences)):
        try:
            start, end = float(span[0]), float(span[1])
        except (TypeError, ValueError, IndexError):
            dropped.append("malformed_timestamp")
            continue
        if not isinstance(sentence, str) or not sentence.strip():
            dropped.append("empty_sentence")
            continue
        if not (math.isfinite(start) and math.isfinite(end)):
            dropped.append("malformed_timestamp")
            continue
        start, end = max(0.0, start), min(end, duration) if duration > 0 else end
        if end <= start:
            dropped.append("empty_or_inverted_span")
            continue
        events.append(Event(i, start, end, " ".join(sentence.split())))
    events.sort(key=lambda e: (e.start, e.end, e.index))
    return events, dropped


def follows(previous: Event, nxt: Event, rule: str, margin: float) -> bool:
    if rule == "tolerate":
        return nxt.start >= previous.end - margin and nxt.end > previous.end
    if rule == "gap":
        return nxt.start >= previous.end + margin
    if rule == "contiguous":
        return abs(nxt.start - previous.end) <= margin and nxt.end > previous.end
    raise ValueError(f"unknown margin rule {rule!r}; expected one of {sorted(MARGIN_RULES)}")


def chains(events: Sequence[Event], rule: str, margin: float) -> list[list[Event]]:
    """Maximal runs of consecutive events in which each follows the previous (length >= 1)."""
    out: list[list[Event]] = []
    for event in events:
        if out and follows(out[-1][-1], event, rule, margin):
            out[-1].append(event)
        else:
            out.append([event])
    return out


def grid_in(start: float, end: float, fps: float, n_grid: int) -> tuple[int, ...]:
    """Grid indices j < n_grid with start <= j/fps < end."""
    first = max(0, math.ceil(start * fps - 1e-9))
    while first > 0 and (first - 1) / fps >= start:
        first -= 1
    while first / fps < start:
        first += 1
    out = []
    j = first
    while j < n_grid and j / fps < end:
        out.append(j)
        j += 1
    return tuple(out)


def blocks_of(events: Sequence[Event], fps: float, n_grid: int) -> tuple[Block, ...]:
    blocks = []
    previous_end = None
    for e in events:
        start = e.start if previous_end is None else max(e.start, previous_end)
        blocks.append(Block(e.index, start, e.end, e.sentence, grid_in(start, e.end, fps, n_grid)))
        previous_end = e.end
    return tuple(blocks)


def candidate_runs(video_id: str, events: Sequence[Event], rule: str, margin: float, fps: float, n_grid: int,
                   min_blocks: int) -> list[Run]:
    """Every contiguous sub-run of every chain with at least ``min_blocks`` blocks, all non-empty."""
    runs = []
    for chain in chains(events, rule, margin):
        for a in range(len(chain)):
            for b in range(a + min_blocks, len(chain) + 1):
                blocks = blocks_of(chain[a:b], fps, n_grid)
                if all(block.grid for block in blocks):
                    runs.append(Run(video_id, blocks))
    return runs


def choose_run(runs: Sequence[Run], fits, rng: np.random.Generator) -> Run | None:
    """Among runs for which ``fits(run)`` holds, one with the most blocks (seeded among ties)."""
    fitting = [r for r in runs if fits(r)]
    if not fitting:
        return None
    most = max(len(r.blocks) for r in fitting)
    best = sorted((r for r in fitting if len(r.blocks) == most), key=lambda r: r.key)
    return best[int(rng.integers(len(best)))]


def cut_run(run: Run, n_frames: int, fps: float) -> Run:
    """The run's first ``n_frames`` frames: the blocks they reach, the last one ending after its
    last kept frame (its recorded span shortened to what it shows)."""
    blocks, left = [], n_frames
    for block in run.blocks:
        if left <= 0:
            break
        if block.n_frames <= left:
            blocks.append(block)
        else:
            grid = block.grid[:left]
            blocks.append(Block(block.event_index, block.start, min(block.end, (grid[-1] + 1) / fps),
                                block.sentence, grid))
        left -= block.n_frames
    return Run(run.video_id, tuple(blocks), run.cut_frames + run.n_frames - min(n_frames, run.n_frames))


def length_matched_run(runs: Sequence[Run], n_frames: int, min_blocks: int, fps: float,
                       rng: np.random.Generator) -> Run | None:
    """A run of exactly ``n_frames`` frames, cut from the head of the shortest run at least that
    long whose cut keeps ``min_blocks`` blocks (seeded among ties); None when the video has none."""
    cuts = [(r.n_frames - n_frames, r.key, cut) for r in runs if r.n_frames >= n_frames
            for cut in [cut_run(r, n_frames, fps)] if len(cut.blocks) >= min_blocks]
    if not cuts:
        return None
    least = min(surplus for surplus, _, _ in cuts)
    best = sorted(((key, cut) for surplus, key, cut in cuts if surplus == least), key=lambda pair: pair[0])
    return best[int(rng.integers(len(best)))][1]


def matching_frame_count(positive_tokens: int, frame_tokens: int, band: LengthBand) -> int | None:
    """How many frames of ``frame_tokens`` tokens come nearest ``positive_tokens``, within half a
    frame and in the band (the fewer on a tie), or None: the positive's own count wherever two
    videos' frames are one size."""
    fewer = positive_tokens // frame_tokens
    counts = [n for n in (fewer, fewer + 1) if n >= 1 and band.contains(n * frame_tokens)
              and 2 * abs(n * frame_tokens - positive_tokens) <= frame_tokens]
    return min(counts, key=lambda n: (abs(n * frame_tokens - positive_tokens), n)) if counts else None


# -- hard orders -------------------------------------------------------------------------------------

def front_size(m: int) -> int:
    """Blocks in the front half: floor(m/2); the back half holds the other ceil(m/2)."""
    return m // 2


def hard_order(variant: str, m: int, rng: np.random.Generator) -> list[int]:
    """The block order of a hard variant (indices into the positive's blocks)."""
    h = front_size(m)
    if m < MIN_BLOCKS_FOR_SHUFFLES:
        raise ValueError(f"the hard variants need at least {MIN_BLOCKS_FOR_SHUFFLES} blocks, got {m}")
    if variant == "reversal":
        return list(range(m - 1, -1, -1))
    if variant == "front_shuffle":
        return list(non_identity_permutation(rng, h, draw="shuffle")) + list(range(h, m))
    if variant == "back_shuffle":
        return list(range(h)) + [h + i for i in non_identity_permutation(rng, m - h, draw="shuffle")]
    raise ValueError(f"unknown hard variant {variant!r}")


def distinct_hard_orders(block_hashes: Sequence[Sequence[str]], rngs: dict[str, np.random.Generator],
                         reversal_frames: bool = False) -> dict[str, list[int]] | None:
    """The hard variants' block orders (``rngs``: each variant's generator), or None when the
    frames they show would not differ: two variants, or one and the positive, the same frame
    hashes in the same order (identical frames can hide a permutation). ``reversal_frames``: the
    reversal reverses every frame, not the blocks."""
    m = len(block_hashes)
    positive = tuple(arrange(block_hashes, range(m)))
    orders, seen = {}, {positive}
    for variant in HARD_VARIANTS:
        order = hard_order(variant, m, rngs[variant])
        sequence = tuple(arrange(block_hashes, order, reversal_frames=variant == "reversal" and reversal_frames))
        if sequence in seen:
            return None
        seen.add(sequence)
        orders[variant] = order
    return orders


def order_problem(variant: str, order: Sequence[int], m: int) -> str | None:
    """Why a block order is not the named variant's structure (None when it is)."""
    order, h = list(order), front_size(m)
    if sorted(order) != list(range(m)):
        return f"order {order} is not a permutation of the {m} blocks"
    if variant == "reversal":
        return None if order == list(range(m - 1, -1, -1)) else f"order {order} is not the reversal"
    if variant == "front_shuffle":
        if order[h:] != list(range(h, m)):
            return f"order {order} moves a back-half block"
        return None if order[:h] != list(range(h)) else "the front half is not permuted"
    if variant == "back_shuffle":
        if order[:h] != list(range(h)):
            return f"order {order} moves a front-half block"
        return None if order[h:] != list(range(h, m)) else "the back half is not permuted"
    return f"unknown variant {variant!r}"


def arrange(block_items: Sequence[Sequence], order: Sequence[int], reversal_frames: bool = False) -> list:
    """The items (frames, or anything per frame) of the blocks in ``order``; with
    ``reversal_frames`` every item in reverse time order (frame-level complete reversal)."""
    if reversal_frames:
        return [item for block in block_items for item in block][::-1]
    return [item for k in order for item in block_items[k]]


def caption_words(text: str) -> set[str]:
    from mmlongembed.ops.bm25 import bm25_tokenize

    return set(bm25_tokenize(text))


def caption_similarity(a: str, b: str) -> float:
    """Jaccard index of the content words (BM25 tokenisation: stop words out, CJK per character)."""
    x, y = caption_words(a), caption_words(b)
    return len(x & y) / len(x | y) if x and y else 0.0
