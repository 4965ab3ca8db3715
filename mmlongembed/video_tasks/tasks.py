"""The task families of a video collection, as rows in the layout mteb's video tasks load, plus
their generated ``TaskMetadata`` arguments (written to ``tasks.json``).

| family | mteb abstask / ``type`` | columns (config) | main score |
|---|---|---|---|
| classification | ``AbsTaskClassification`` / ``VideoClassification`` | video[, audio], label (train + test) | accuracy (8 per class, 10 runs) |
| clustering | ``AbsTaskClustering`` / ``VideoClustering`` | video[, audio], label | v_measure |
| pairs | ``AbsTaskPairClassification`` / ``VideoPairClassification`` | video1, video2[, audio1, audio2], label 0/1 | max_ap |
| zeroshot | ``AbsTaskZeroShotClassification`` / ``VideoZeroshotClassification`` | video[, audio], label | accuracy |
| retrieval | ``AbsTaskRetrieval`` / ``Any2AnyRetrieval`` | ``<dir>-corpus``, ``-queries``, ``-qrels`` | ndcg_at_10 |
| qa | ``AbsTaskRetrieval`` / ``VideoCentricQA`` | ``qa-<v>-corpus``, ``-queries``, ``-qrels``, ``-top_ranked`` | accuracy |

Each family comes as a video-only (V) and an audio-visual (VA) variant from the same clips; a
VA variant leaves out the clips whose audio extraction failed (counted, per source).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from mmlongembed.output.layout import OpaqueIds
from mmlongembed.ops.mveb import TEST, TRAIN, Clip, first_caption, mveb_pairs, qa_candidates
from mmlongembed.core.rng import derive_rng, seeded_order

FAMILIES = ("classification", "clustering", "pairs", "zeroshot", "retrieval", "qa")
VARIANTS = ("v", "va")
RETRIEVAL_DIRECTIONS = {  # direction -> (variant, query modalities, corpus modalities)
    "t2v": ("v", ("text",), ("video",)),
    "v2t": ("v", ("video",), ("text",)),
    "t2va": ("va", ("text",), ("video", "audio")),
    "va2t": ("va", ("video", "audio"), ("text",)),
    "a2v": ("va", ("audio",), ("video",)),
    "v2a": ("va", ("video",), ("audio",)),
    "at2v": ("va", ("audio", "text"), ("video",)),
    "vt2a": ("va", ("video", "text"), ("audio",)),
}


@dataclass
class ClipMedia:
    """A clip ready to publish: its MP4 (Motion JPEG) and, when extraction worked, its WAV."""

    clip: Clip
    video: bytes
    n_frames: int
    audio: bytes | None
    audio_failure: str | None = None  # why there is no audio (MVEB: such clips leave the VA variants)
    audio_seconds: float = 0.0


@dataclass
class TaskOutput:
    name: str
    abstask: str  # key of the mteb base class (mteb_tasks._bases)
    metadata: dict  # TaskMetadata arguments but ``dataset``
    config: str | None  # load_dataset config (non-retrieval tasks); retrieval: its hf_subset prefixes
    attributes: dict = field(default_factory=dict)
    candidate_labels: list[str] | None = None
    configs: dict[str, dict[str, list[dict]]] = field(default_factory=dict)  # config -> split -> rows
    features: dict[str, object] = field(default_factory=dict)  # config -> datasets.Features
    stats: dict = field(default_factory=dict)
    family: str = ""
    variant: str = ""

    def spec(self) -> dict:
        entry = {"name": self.name, "abstask": self.abstask, "config": self.config, "metadata": self.metadata,
                 "attributes": self.attributes, "family": self.family, "variant": self.variant}
        if self.candidate_labels is not None:
            entry["candidate_labels"] = self.candidate_labels
        return entry


def camel(name: str) -> str:
    """A task-name prefix from a collection name: ``sample videos`` -> ``SampleVideos``."""
    words = re.split(r"[^0-9A-Za-z]+", name)
    return "".join(w[:1].upper() + w[1:] for w in words if w) or "Video"


@dataclass
class TaskContext:
    """What every family builder needs: the clips, names, seeds and metadata defaults."""

    collection: str  # collection name (ids and seeds)
    prefix: str  # task-name prefix
    clips: dict[str, ClipMedia]  # clip id -> media (every kept clip)
    eval_ids: list[str]  # clips used by clustering, pairs, zero-shot, retrieval and QA
    seed: int
    language: str
    licence: str
    pairs_per_side: int
    zeroshot_template: str
    description: str
    cluster_sample: int = 16_384
    notes: list[str] = field(default_factory=list)

    def ids(self, task: str) -> OpaqueIds:
        return OpaqueIds(self.seed, f"mveb:{self.collection}", task)

    def metadata(self, name: str, type_: str, category: str, modalities: Sequence[str], main_score: str,
                 description: str, eval_langs=None) -> dict:
        return {"name": name, "description": f"{self.description} {description}".strip(), "reference": None,
                "type": type_, "category": category, "modalities": list(modalities), "eval_splits": [TEST],
                "eval_langs": eval_langs or [self.language], "main_score": main_score, "date": None,
                "domains": None, "task_subtypes": None, "license": self.licence,
                "annotations_creators": None, "dialect": [], "sample_creation": "found",
                "bibtex_citation": ""}


def _features(columns: dict):
    import datasets

    return datasets.Features(columns)


def _media_values(ctx: TaskContext, ids: OpaqueIds, clip_id: str, modalities: Sequence[str], suffix: str = "") -> dict:
    media = ctx.clips[clip_id]
    row = {}
    if "video" in modalities:
        row[f"video{suffix}"] = {"bytes": media.video, "path": f"{ids(clip_id)}.mp4"}
    if "audio" in modalities:
        row[f"audio{suffix}"] = {"bytes": media.audio, "path": f"{ids(clip_id)}.wav"}
    return row


def _media_features(modalities: Sequence[str], suffix: str = "") -> dict:
    import datasets

    out = {}
    if "video" in modalities:
        out[f"video{suffix}"] = datasets.Video()
    if "audio" in modalities:
        out[f"audio{suffix}"] = datasets.Audio()
    return out


def variant_clips(ctx: TaskContext, clip_ids: Sequence[str], variant: str) -> tuple[list[str], Counter]:
    """The clips of a variant: V keeps all; VA leaves out clips without audio (counted by reason)."""
    if variant == "v":
        return list(clip_ids), Counter()
    kept, failed = [], Counter()
    for clip_id in clip_ids:
        media = ctx.clips[clip_id]
        if media.audio is None:
            failed[media.audio_failure or "audio_extraction_failed"] += 1
        else:
            kept.append(clip_id)
    return kept, failed


def _modalities(variant: str) -> tuple[str, ...]:
    return ("video", "audio") if variant == "va" else ("video",)


def _input_columns(variant: str):
    return ["video", "audio"] if variant == "va" else "video"


def _suffix(variant: str) -> str:
    return variant.upper()


def _dropped_sources(ctx: TaskContext, clip_ids: Sequence[str]) -> dict[str, int]:
    out: Counter = Counter()
    for clip_id in clip_ids:
        if ctx.clips[clip_id].audio is None:
            out[ctx.clips[clip_id].clip.source] += 1
    return dict(sorted(out.items()))


def _shuffled(ctx: TaskContext, rows: list[dict], *key: str) -> list[dict]:
    return seeded_order(rows, derive_rng(ctx.seed, "mveb", ctx.collection, *key, "order"))  # MVEB shuffles its rows


def _labelled(ctx: TaskContext, clip_ids: Sequence[str]) -> list[str]:
    return [c for c in clip_ids if ctx.clips[c].clip.label]


def _per_class(ctx: TaskContext, clip_ids: Sequence[str]) -> dict[str, int]:
    return dict(sorted(Counter(ctx.clips[c].clip.label for c in clip_ids).items()))


def _label_column(clip_ids: Sequence[str], ctx: TaskContext):
    import datasets

    names = sorted({ctx.clips[c].clip.label for c in clip_ids})
    return names, datasets.ClassLabel(names=names)


def classification(ctx: TaskContext, variant: str) -> TaskOutput | None:
    everything = _labelled(ctx, sorted(ctx.clips))
    clip_ids, failed = variant_clips(ctx, everything, variant)
    splits = {s: [c for c in clip_ids if ctx.clips[c].clip.split == s] for s in (TRAIN, TEST)}
    if not splits[TRAIN] or not splits[TEST] or len({ctx.clips[c].clip.label for c in clip_ids}) < 2:
        ctx.notes.append(f"classification-{variant}: not built (needs two classes and clips in both splits)")
        return None
    names, label = _label_column(clip_ids, ctx)
    ids = ctx.ids(f"classification-{variant}")
    mods = _modalities(variant)
    config = f"classification-{variant}"
    rows = {s: _shuffled(ctx, [{"clip_id": ids(c), **_media_values(ctx, ids, c, mods),
                                "label": names.index(ctx.clips[c].clip.label)} for c in members], config, s)
            for s, members in splits.items()}
    name = f"{ctx.prefix}Classification{_suffix(variant)}"
    meta = ctx.metadata(name, "VideoClassification", "va2c" if variant == "va" else "v2c", mods, "accuracy",
                        "Linear-probe classification of clips (MVEB: logistic regression on 8 clips per class, "
                        "10 runs).")
    stats = {"rows": {s: len(m) for s, m in splits.items()}, "classes": len(names),
             "per_class": {s: _per_class(ctx, m) for s, m in splits.items()},
             "audio_dropped": dict(failed), "audio_dropped_sources": _dropped_sources(ctx, everything)}
    return TaskOutput(name, "classification", meta, config,
                      {"input_column_name": _input_columns(variant), "label_column_name": "label"},
                      configs={config: rows},
                      features={config: _features({"clip_id": _string(), **_media_features(mods), "label": label})},
                      stats=stats, family="classification", variant=variant)


def _string():
    import datasets

    return datasets.Value("string")


def _single_split_labelled(ctx: TaskContext, variant: str, family: str):
    everything = _labelled(ctx, ctx.eval_ids)
    clip_ids, failed = variant_clips(ctx, everything, variant)
    if len({ctx.clips[c].clip.label for c in clip_ids}) < 2:
        ctx.notes.append(f"{family}-{variant}: not built (needs clips of two classes)")
        return None
    return everything, clip_ids, failed


def _labelled_single_split(ctx: TaskContext, variant: str, family: str):
    """Rows, statistics and features of a one-split labelled task (clustering, zero-shot)."""
    picked = _single_split_labelled(ctx, variant, family)
    if picked is None:
        return None
    everything, clip_ids, failed = picked
    names, label = _label_column(clip_ids, ctx)
    config = f"{family}-{variant}"
    ids, mods = ctx.ids(config), _modalities(variant)
    rows = _shuffled(ctx, [{"clip_id": ids(c), **_media_values(ctx, ids, c, mods),
                            "label": names.index(ctx.clips[c].clip.label)} for c in clip_ids], config)
    stats = {"rows": {TEST: len(clip_ids)}, "classes": len(names), "per_class": {TEST: _per_class(ctx, clip_ids)},
             "audio_dropped": dict(failed), "audio_dropped_sources": _dropped_sources(ctx, everything)}
    features = {config: _features({"clip_id": _string(), **_media_features(mods), "label": label})}
    return config, names, mods, {config: {TEST: rows}}, features, stats


def clustering(ctx: TaskContext, variant: str) -> TaskOutput | None:
    built = _labelled_single_split(ctx, variant, "clustering")
    if built is None:
        return None
    config, names, mods, configs, features, stats = built
    name = f"{ctx.prefix}Clustering{_suffix(variant)}"
    meta = ctx.metadata(name, "VideoClustering", "va2c" if variant == "va" else "v2c", mods, "v_measure",
                        "Clustering of clips by class (MiniBatchKMeans with k = number of classes; V-measure).")
    # MVEB's video clustering tasks embed every clip (no 4 % subsample)
    return TaskOutput(name, "clustering", meta, config,
                      {"input_column_name": _input_columns(variant), "label_column_name": "label",
                       "max_fraction_of_documents_to_embed": None,
                       "max_documents_per_cluster": ctx.cluster_sample},
                      configs=configs, features=features, stats=stats, family="clustering", variant=variant)


def pairs(ctx: TaskContext, variant: str) -> TaskOutput | None:
    import datasets

    picked = _single_split_labelled(ctx, variant, "pairs")
    if picked is None:
        return None
    everything, clip_ids, failed = picked
    labels = [ctx.clips[c].clip.label for c in clip_ids]
    baked = mveb_pairs(labels, seed=ctx.seed, max_per_side=ctx.pairs_per_side)
    if not baked:
        ctx.notes.append(f"pairs-{variant}: not built (no same-class pair)")
        return None
    config = f"pairs-{variant}"
    ids, mods = ctx.ids(config), _modalities(variant)
    rows = [{"clip1": ids(clip_ids[a]), "clip2": ids(clip_ids[b]), **_media_values(ctx, ids, clip_ids[a], mods, "1"),
             **_media_values(ctx, ids, clip_ids[b], mods, "2"), "label": int(same)} for a, b, same in baked]
    name = f"{ctx.prefix}PairClassification{_suffix(variant)}"
    meta = ctx.metadata(name, "VideoPairClassification", "va2va" if variant == "va" else "v2v", mods, "max_ap",
                        f"Same-class or not, for pairs of clips baked balanced (at most {ctx.pairs_per_side} "
                        f"same-class and {ctx.pairs_per_side} different-class pairs, seed {ctx.seed}).")
    if variant == "va":
        attributes = {"input1_column_name": {"video1": "video", "audio1": "audio"},
                      "input2_column_name": {"video2": "video", "audio2": "audio"}}
    else:
        attributes = {"input1_column_name": "video1", "input2_column_name": "video2"}
    attributes["label_column_name"] = "label"
    n_same = sum(1 for _, _, s in baked if s)
    stats = {"rows": {TEST: len(baked)}, "same_class_pairs": n_same, "different_class_pairs": len(baked) - n_same,
             "clips": len(clip_ids), "audio_dropped": dict(failed),
             "audio_dropped_sources": _dropped_sources(ctx, everything)}
    features = {"clip1": _string(), "clip2": _string(), **_media_features(mods, "1"), **_media_features(mods, "2"),
                "label": datasets.Value("int64")}
    return TaskOutput(name, "pair_classification", meta, config, attributes, configs={config: {TEST: rows}},
                      features={config: _features(features)}, stats=stats, family="pairs", variant=variant)


def zeroshot(ctx: TaskContext, variant: str) -> TaskOutput | None:
    built = _labelled_single_split(ctx, variant, "zeroshot")
    if built is None:
        return None
    config, names, mods, configs, features, stats = built
    name = f"{ctx.prefix}ZeroShot{_suffix(variant)}"
    prompts = [ctx.zeroshot_template.format(label=n) for n in names]
    meta = ctx.metadata(name, "VideoZeroshotClassification", "va2t" if variant == "va" else "v2t",
                        (*mods, "text"), "accuracy",
                        f"Zero-shot classification against the prompts {ctx.zeroshot_template!r}.")
    return TaskOutput(name, "zeroshot", meta, config,
                      {"input_column_name": _input_columns(variant), "label_column_name": "label"},
                      candidate_labels=prompts, configs=configs, features=features, stats=stats, family="zeroshot",
                      variant=variant)


def _side_row(ctx: TaskContext, ids: OpaqueIds, clip_id: str, modalities: Sequence[str], text: str | None) -> dict:
    row = {"id": ids(clip_id), **_media_values(ctx, ids, clip_id, modalities)}
    if "text" in modalities:
        row["text"] = text
    return row


def _side_features(modalities: Sequence[str]) -> dict:
    out = {"id": _string(), **_media_features(modalities)}
    if "text" in modalities:
        out["text"] = _string()
    return out


def _qrels_features():
    import datasets

    return _features({"query-id": _string(), "corpus-id": _string(), "score": datasets.Value("int64")})


def retrieval(ctx: TaskContext, direction: str) -> TaskOutput | None:
    variant, query_mods, corpus_mods = RETRIEVAL_DIRECTIONS[direction]
    needs_text = "text" in query_mods + corpus_mods
    needs_audio = "audio" in query_mods + corpus_mods
    candidates = [c for c in ctx.eval_ids if not needs_text or first_caption(ctx.clips[c].clip)]
    clip_ids, failed = variant_clips(ctx, candidates, "va" if needs_audio else "v")
    if len(clip_ids) < 2:
        ctx.notes.append(f"retrieval {direction}: not built (needs two clips"
                         f"{' with captions' if needs_text else ''}{' and audio' if needs_audio else ''})")
        return None
    subset = direction
    query_ids, doc_ids = ctx.ids(f"{subset}-queries"), ctx.ids(f"{subset}-corpus")
    queries = _shuffled(ctx, [_side_row(ctx, query_ids, c, query_mods, first_caption(ctx.clips[c].clip))
                              for c in clip_ids], subset, "queries")
    corpus = _shuffled(ctx, [_side_row(ctx, doc_ids, c, corpus_mods, first_caption(ctx.clips[c].clip))
                             for c in clip_ids], subset, "corpus")
    qrels = [{"query-id": query_ids(c), "corpus-id": doc_ids(c), "score": 1} for c in clip_ids]
    qrels = _shuffled(ctx, qrels, subset, "qrels")
    code = direction.upper()
    name = f"{ctx.prefix}{code}Retrieval"
    meta = ctx.metadata(name, "Any2AnyRetrieval", direction, _ordered_modalities(query_mods + corpus_mods),
                        "ndcg_at_10", f"{code} retrieval, one {'caption' if needs_text else 'item'} per clip, "
                                      "one relevant item per query (cosine, nDCG@10).",
                        eval_langs={subset: [ctx.language]})
    stats = {"queries": len(clip_ids), "corpus": len(clip_ids), "audio_dropped": dict(failed),
             "audio_dropped_sources": _dropped_sources(ctx, candidates) if needs_audio else {},
             "without_caption": len(ctx.eval_ids) - len(candidates) if needs_text else 0}
    configs = {f"{subset}-queries": {TEST: queries}, f"{subset}-corpus": {TEST: corpus}, f"{subset}-qrels": {TEST: qrels}}
    features = {f"{subset}-queries": _features(_side_features(query_mods)),
                f"{subset}-corpus": _features(_side_features(corpus_mods)), f"{subset}-qrels": _qrels_features()}
    return TaskOutput(name, "retrieval", meta, None, {}, configs=configs, features=features, stats=stats,
                      family="retrieval", variant=direction)


def _ordered_modalities(modalities: Sequence[str]) -> list[str]:
    return [m for m in ("text", "video", "audio") if m in modalities]


def qa(ctx: TaskContext, variant: str) -> TaskOutput | None:
    import datasets

    usable = [c for c in ctx.eval_ids if qa_candidates(ctx.clips[c].clip) is not None]
    clip_ids, failed = variant_clips(ctx, usable, variant)
    if not clip_ids:
        ctx.notes.append(f"qa-{variant}: not built (no clip with a question, its candidates and one answer among them)")
        return None
    subset = f"qa-{variant}"
    mods = _modalities(variant)
    query_ids, doc_ids = ctx.ids(f"{subset}-queries"), ctx.ids(f"{subset}-corpus")
    queries, corpus, qrels, top_ranked = [], [], [], []
    for c in clip_ids:
        clip = ctx.clips[c].clip
        answers, correct = qa_candidates(clip)
        queries.append({**_side_row(ctx, query_ids, c, mods, None), "text": clip.question.strip()})
        own = []
        for k, answer in enumerate(answers):
            doc = doc_ids(f"{c}#c{k}")
            corpus.append({"id": doc, "text": answer})
            own.append(doc)
            if k == correct:
                qrels.append({"query-id": query_ids(c), "corpus-id": doc, "score": 1})
        top_ranked.append({"query-id": query_ids(c), "corpus-ids": sorted(own)})
    name = f"{ctx.prefix}VideoCentricQA{_suffix(variant)}"
    meta = ctx.metadata(name, "VideoCentricQA", "vat2t" if variant == "va" else "vt2t", (*mods, "text"), "accuracy",
                        "Video-centric QA: each (clip, question) ranks its own candidate answers; accuracy.",
                        eval_langs={subset: [ctx.language]})
    stats = {"queries": len(clip_ids), "candidates": len(corpus), "audio_dropped": dict(failed),
             "audio_dropped_sources": _dropped_sources(ctx, usable)}
    configs = {f"{subset}-queries": {TEST: _shuffled(ctx, queries, subset, "queries")},
               f"{subset}-corpus": {TEST: _shuffled(ctx, corpus, subset, "corpus")},
               f"{subset}-qrels": {TEST: qrels}, f"{subset}-top_ranked": {TEST: top_ranked}}
    features = {f"{subset}-queries": _features({**_side_features(mods), "text": _string()}),
                f"{subset}-corpus": _features({"id": _string(), "text": _string()}),
                f"{subset}-qrels": _qrels_features(),
                f"{subset}-top_ranked": _features({"query-id": _string(),
                                                   "corpus-ids": datasets.Sequence(_string())})}
    return TaskOutput(name, "retrieval", meta, None, {}, configs=configs, features=features, stats=stats,
                      family="qa", variant=variant)


def build_tasks(ctx: TaskContext, families: Sequence[str], variants: Sequence[str]) -> list[TaskOutput]:
    builders: dict[str, Callable[[TaskContext, str], TaskOutput | None]] = {
        "classification": classification, "clustering": clustering, "pairs": pairs, "zeroshot": zeroshot, "qa": qa}
    out = []
    for family in FAMILIES:
        if family not in families:
            continue
        if family == "retrieval":
            for direction, (variant, _, _) in RETRIEVAL_DIRECTIONS.items():
                if variant in variants:
                    out.append(retrieval(ctx, direction))
            continue
        for variant in VARIANTS:
            if variant in variants:
                out.append(builders[family](ctx, variant))
    return [t for t in out if t is not None]
