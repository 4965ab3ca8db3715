"""Pure operations for MTEB video tasks (MVEB conventions): cutting, filtering, splitting and
capping clips, baking balanced pairs, choosing captions and QA candidates.

Records in, records out; every random choice comes from an explicit generator. Two rules follow
MVEB's own scripts to the letter and therefore use Python's ``random.Random(seed)`` instead of
``derive_rng``: the pair baking of mteb's ``scripts/upload_video_pair_classification.py`` (so the
same labels and seed give MVEB's very pairs) and nothing else. Everything else is ours and draws
from ``mmlongembed.core.rng.derive_rng``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from mmlongembed.core.rng import derive_rng

TRAIN, TEST = "train", "test"
MVEB_SEED = 42  # the paper's seed for caps, shuffles and pairs
MVEB_PAIRS_PER_SIDE = 1024  # at most 1,024 same-class and 1,024 different-class pairs


@dataclass(frozen=True)
class Clip:
    """One clip of a labelled collection: a time range of a source video.

    ``end`` is None until the source's duration is known (a whole-file entry)."""

    clip_id: str
    source: str  # the source video, relative to the collection root
    label: str
    start: float = 0.0
    end: float | None = None
    split: str | None = None  # None: assigned by ``assign_splits``
    captions: tuple[str, ...] = ()
    question: str | None = None
    candidates: tuple[str, ...] = ()
    answer: str | None = None
    origin: str = ""  # where the entry came from (file:line), for skip reports

    @property
    def duration(self) -> float:
        return (self.end or 0.0) - self.start


@dataclass
class Dropped:
    """Clips an operation left out, by reason (counted in the manifest and the card)."""

    reasons: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, reason: str, clip_id: str) -> None:
        self.reasons[reason].append(clip_id)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in sorted(self.reasons.items())}


def cut_windows(duration: float, length: float, min_length: float) -> list[tuple[float, float]]:
    """Consecutive windows [k*length, (k+1)*length) inside [0, duration); a last partial window
    is kept only when it lasts at least ``min_length`` seconds."""
    if length <= 0 or duration <= 0:
        return []
    windows, k = [], 0
    while k * length < duration - 1e-9:
        start, end = k * length, min((k + 1) * length, duration)
        if end - start >= min(length, min_length) - 1e-9:  # whole windows, and long enough last ones
            windows.append((round(start, 6), round(end, 6)))
        k += 1
    return windows


def filter_durations(clips: Iterable[Clip], min_seconds: float | None, max_seconds: float | None,
                     dropped: Dropped) -> list[Clip]:
    """MVEB's duration filters (e.g. WorldSense < 1 min, OmniVideoBench < 5 min)."""
    kept = []
    for clip in clips:
        if min_seconds is not None and clip.duration < min_seconds:
            dropped.add("shorter_than_min_duration", clip.clip_id)
        elif max_seconds is not None and clip.duration > max_seconds:
            dropped.add("longer_than_max_duration", clip.clip_id)
        else:
            kept.append(clip)
    return kept


def assign_splits(clips: Sequence[Clip], test_fraction: float, seed: int, collection: str) -> list[Clip]:
    """A fixed train/test split for clips that have none: per label, the clips in id order are
    permuted by a generator derived from (seed, collection, label) and the first
    round(n * test_fraction) go to test (at least one when n >= 2 and the fraction is positive).
    Clips with a split of their own keep it."""
    by_label: dict[str, list[Clip]] = defaultdict(list)
    for clip in clips:
        if clip.split is None:
            by_label[clip.label].append(clip)
    assigned: dict[str, str] = {}
    for label, members in sorted(by_label.items()):
        members = sorted(members, key=lambda c: c.clip_id)
        order = derive_rng(seed, "mveb", collection, "split", label).permutation(len(members))
        n_test = int(round(len(members) * test_fraction))
        if test_fraction > 0 and len(members) >= 2:
            n_test = min(max(n_test, 1), len(members) - 1)
        for rank, index in enumerate(order):
            assigned[members[int(index)].clip_id] = TEST if rank < n_test else TRAIN
    return [clip if clip.split is not None else replace(clip, split=assigned[clip.clip_id]) for clip in clips]


def cap_per_class(clips: Sequence[Clip], cap: int | None, seed: int, collection: str, dropped: Dropped) -> list[Clip]:
    """At most ``cap`` clips per (label, split), chosen without replacement by a generator derived
    from (seed, collection, label, split); the kept clips stay in their input order."""
    if not cap:
        return list(clips)
    groups: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    for i, clip in enumerate(clips):
        groups[(clip.label, clip.split)].append(i)
    keep: set[int] = set()
    for (label, split), members in sorted(groups.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if len(members) <= cap:
            keep.update(members)
            continue
        ordered = sorted(members, key=lambda i: clips[i].clip_id)
        rng = derive_rng(seed, "mveb", collection, "cap", label, str(split))
        chosen = rng.choice(len(ordered), size=cap, replace=False)
        keep.update(ordered[int(j)] for j in chosen)
    out = []
    for i, clip in enumerate(clips):
        if i in keep:
            out.append(clip)
        else:
            dropped.add("over_class_cap", clip.clip_id)
    return out


def drop_small_classes(clips: Sequence[Clip], min_per_class: int, dropped: Dropped) -> list[Clip]:
    """Labels with fewer than ``min_per_class`` clips are left out whole."""
    counts: dict[str, int] = defaultdict(int)
    for clip in clips:
        counts[clip.label] += 1
    out = []
    for clip in clips:
        if counts[clip.label] < min_per_class:
            dropped.add("class_below_min_clips", clip.clip_id)
        else:
            out.append(clip)
    return out


def mveb_pairs(labels: Sequence, seed: int = MVEB_SEED, max_per_side: int = MVEB_PAIRS_PER_SIDE
               ) -> list[tuple[int, int, int]]:
    """Balanced same-class (1) / different-class (0) pairs, MVEB's baking rule, step for step:
    ``random.Random(seed)`` shuffles the row indices; each row in that order gets one partner of
    its own class (another row) while fewer than ``max_per_side`` positives exist, and one row of
    a randomly chosen other class while fewer than ``max_per_side`` negatives exist; both sides
    are cut to the shorter one and the pairs shuffled by the same generator.
    Returns (row a, row b, label) triples."""
    rng = random.Random(seed)
    groups: dict = defaultdict(list)
    for i, label in enumerate(labels):
        groups[label].append(i)
    classes = list(groups)
    positives: list[tuple[int, int]] = []
    negatives: list[tuple[int, int]] = []
    order = list(range(len(labels)))
    rng.shuffle(order)
    for i in order:
        label = labels[i]
        same = [j for j in groups[label] if j != i]
        if same and len(positives) < max_per_side:
            positives.append((i, rng.choice(same)))
        others = [c for c in classes if c != label]
        if others and len(negatives) < max_per_side:
            other = rng.choice(others)
            negatives.append((i, rng.choice(groups[other])))
        if len(positives) >= max_per_side and len(negatives) >= max_per_side:
            break
    n = min(len(positives), len(negatives))
    pairs = [(a, b, 1) for a, b in positives[:n]] + [(a, b, 0) for a, b in negatives[:n]]
    rng.shuffle(pairs)
    return pairs


def first_caption(clip: Clip) -> str | None:
    """MVEB keeps one caption per clip: the first (MSVD first caption, VATEX first English)."""
    for caption in clip.captions:
        if caption and caption.strip():
            return caption.strip()
    return None


def qa_candidates(clip: Clip) -> tuple[tuple[str, ...], int] | None:
    """The query's own candidate answers and the index of the correct one, or None when the
    entry is not a usable question (no question, fewer than two distinct candidates, or the
    answer not exactly once among them)."""
    if not clip.question or not clip.question.strip() or clip.answer is None:
        return None
    candidates = tuple(c.strip() for c in clip.candidates if c and c.strip())
    if len(set(candidates)) != len(candidates) or len(candidates) < 2:
        return None
    matches = [k for k, c in enumerate(candidates) if c == clip.answer.strip()]
    if len(matches) != 1:
        return None
    return candidates, matches[0]
