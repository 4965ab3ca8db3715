"""The mteb tasks of this dataset, built from the task metadata in ``tasks.json`` beside this file.

Written into every build by mmlongembed (``mmle mveb build`` / ``mmle mveb export-temporal``);
it needs only ``mteb`` and ``datasets``::

    import importlib.util, mteb
    spec = importlib.util.spec_from_file_location("mteb_tasks", "<build dir>/mteb_tasks.py")
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    results = mteb.evaluate(model, module.tasks(), cache=None)

Each task is one of mteb's own abstract tasks (classification, clustering, pair classification,
zero-shot classification, retrieval) with its generated ``TaskMetadata``; mteb loads the data
with ``datasets.load_dataset`` and scores it with its own evaluators. ``tasks(path=...,
revision=...)`` points the same tasks at a published copy (a Hub repo and its tag).

Media: the ``video`` and ``audio`` columns are ``datasets.Video`` (an MP4 per clip) and
``datasets.Audio`` (16 kHz mono WAV). ``datasets`` decodes both with torchcodec. Where torchcodec
is not installed (or ``MMLE_MEDIA=encoded``), the columns are handed to the model still encoded,
as ``{"bytes", "path"}`` dicts, which the mmlongembed encoders read; ``MMLE_MEDIA=decoded``
insists on decoding. Nothing else differs: rows, labels, splits and metrics are mteb's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEDIA_ENV = "MMLE_MEDIA"


def spec(directory: str | Path = HERE) -> dict:
    return json.loads((Path(directory) / "tasks.json").read_text(encoding="utf-8"))


def decode_media() -> bool:
    """Whether video/audio columns are decoded (torchcodec) or handed over encoded."""
    mode = os.environ.get(MEDIA_ENV, "auto").lower()
    if mode in ("encoded", "decoded"):
        return mode == "decoded"
    try:
        import torchcodec  # noqa: F401
    except Exception:  # noqa: BLE001  (missing, or its FFmpeg libraries are)
        return False
    return True


def _encoded(dataset):
    """The dataset with its Video/Audio columns left encoded ({"bytes", "path"})."""
    import datasets

    for name, feature in dataset.features.items():
        if isinstance(feature, datasets.Video) and feature.decode:
            dataset = dataset.cast_column(name, datasets.Video(decode=False))
        elif isinstance(feature, datasets.Audio) and feature.decode:
            dataset = dataset.cast_column(name, datasets.Audio(decode=False))
    return dataset


def _walk(node):
    """Every corpus/queries/split Dataset under ``node`` left encoded (retrieval nests them in
    subset -> split -> {corpus, queries, relevant_docs, top_ranked})."""
    import datasets

    if isinstance(node, datasets.Dataset):
        return _encoded(node)
    if isinstance(node, dict):
        for key in (("corpus", "queries") if "relevant_docs" in node else list(node)):
            if node.get(key) is not None:
                node[key] = _walk(node[key])
    return node


def _media_transform(task) -> None:
    if task.dataset is not None and not decode_media():
        task.dataset = _walk(task.dataset)


def _retrieval_load_data(self, num_proc=None, *, timer=None, **kwargs) -> None:
    """mteb's ``AbsTaskRetrieval.load_data``, but with media left encoded as each config is
    loaded: mteb's retrieval loader reads one row of the corpus and the queries at load time
    (a log line), which would decode a video before ``dataset_transform`` could say otherwise."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    if decode_media():
        return AbsTaskRetrieval.load_data(self, num_proc=num_proc, timer=timer, **kwargs)
    if self.data_loaded:
        return None

    class EncodedMediaLoader(RetrievalDatasetLoader):
        def _load_dataset_split(self, config, num_proc):
            return _encoded(super()._load_dataset_split(config, num_proc))

    self.dataset = {}
    subsets = self.hf_subsets if self.metadata.is_multilingual else ["default"]
    for subset in subsets:
        for split in self.eval_splits:
            self.dataset.setdefault(subset, {})[split] = EncodedMediaLoader(
                hf_repo=self.metadata.dataset["path"], revision=self.metadata.dataset["revision"], split=split,
                config=subset).load(num_proc=num_proc)
    self.dataset_transform(num_proc=num_proc)
    self.data_loaded = True
    return None


def _bases() -> dict:
    from mteb.abstasks.classification import AbsTaskClassification
    from mteb.abstasks.clustering import AbsTaskClustering
    from mteb.abstasks.pair_classification import AbsTaskPairClassification
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.zeroshot_classification import AbsTaskZeroShotClassification

    return {"classification": AbsTaskClassification, "clustering": AbsTaskClustering,
            "pair_classification": AbsTaskPairClassification, "zeroshot": AbsTaskZeroShotClassification,
            "retrieval": AbsTaskRetrieval}


def task_classes(path: str | None = None, revision: str | None = None, directory: str | Path = HERE) -> list[type]:
    """One mteb task class per entry of tasks.json; data from ``path`` at ``revision`` (default:
    this directory at its content revision)."""
    from mteb.abstasks.task_metadata import TaskMetadata

    data = spec(directory)
    path = path or str(Path(directory))
    revision = revision or data["revision"]
    bases = _bases()
    classes = []
    for entry in data["tasks"]:
        base = bases[entry["abstask"]]
        dataset = {"path": path, "revision": revision}
        if entry.get("config"):
            dataset["name"] = entry["config"]
        namespace = {"metadata": TaskMetadata(dataset=dataset, **entry["metadata"]), "__module__": __name__}
        for key, value in entry.get("attributes", {}).items():
            namespace[key] = tuple(value) if isinstance(value, list) else value
        labels = entry.get("candidate_labels")
        if labels is not None:
            namespace["get_candidate_labels"] = lambda self, _labels=tuple(labels): list(_labels)

        def dataset_transform(self, num_proc=None, _base=base, **kwargs):
            _base.dataset_transform(self, num_proc=num_proc, **kwargs)
            _media_transform(self)

        namespace["dataset_transform"] = dataset_transform
        if entry["abstask"] == "retrieval":
            namespace["load_data"] = _retrieval_load_data
        classes.append(type(entry["name"], (base,), namespace))
    return classes


def tasks(path: str | None = None, revision: str | None = None, names=None, directory: str | Path = HERE) -> list:
    """Instances of the tasks (all, or those in ``names``)."""
    chosen = [cls for cls in task_classes(path, revision, directory) if names is None or cls.__name__ in names]
    return [cls() for cls in chosen]
