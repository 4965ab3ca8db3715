"""A run in mteb's results layout, so it can go to the MTEB results repository.

``mmle score --mteb-results DIR`` writes, per model of the run, what ``mteb.ResultCache`` writes
after ``mteb.evaluate``: ``DIR/results/<model name as a path>/<revision>/<Task>.json`` (an
``mteb.TaskResult``) beside ``model_meta.json`` and ``run_settings.jsonl``; ``DIR`` is laid out as
the root of the results repository (github.com/embeddings-benchmark/results). One task per
release scored (``MMLongEmbed<Release>``, the name ``harness.mteb.retrieval.release_task`` gives
it; a run over several releases writes one task each, never one release's pools under another's
name), split ``test``, one hf_subset per pool, as the release's configs are laid out. The main
score is ``tie_aware_precision_at_1``, the paper's P@1 with ties counted by expectation (the
harness's figure, to the bit); nDCG@10, MRR and hit@5 beside it, tie-aware too. A pool the model
was not measured on, or skipped, has no entry: mteb reads a missing subset as not evaluated.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.mteb.retrieval import TIE_AWARE, task_name
from mmlongembed.core.errors import UserError

NO_REVISION = "no_revision_available"  # mteb's own folder name for a model without one
SUBSET_REFUSED = ("--mteb-results: a --max-queries run scores a sample of each pool; the MTEB results repository "
                  "takes whole pools only")


def check_mteb_results(folder: Path, max_queries: int | None, dataset_paths: list[str]) -> None:
    """What would stop ``write_mteb_results`` after the run, said in one line before anything is
    scored: a subset run, mteb not installed, ``folder`` a file, two releases with one task name."""
    if max_queries:
        raise UserError(SUBSET_REFUSED)
    try:
        import mteb  # noqa: F401 - only whether it imports
    except ImportError:
        raise UserError("--mteb-results writes through mteb's own classes: pip install 'mmlongembed[mteb]'") from None
    if Path(folder).exists() and not Path(folder).is_dir():
        raise UserError(f"--mteb-results {folder} is a file, not a folder")
    named: dict[str, str] = {}
    for path in dataset_paths:
        name = task_name(path)
        if name in named:
            raise UserError(f"--mteb-results: {named[name]} and {path} would both be mteb task {name}; score them "
                            "in separate runs")
        named[name] = path


def _model_meta(name: str, revision: str, identity: dict):
    """mteb's ModelMeta for a harness model: what the run knows (name, revision, its window),
    the rest unknown (None), as mteb's own entries for models it has no card of."""
    from mteb.models.model_meta import ModelMeta

    return ModelMeta(loader=None, name=name, revision=revision, release_date=None, languages=None,
                     n_parameters=None, memory_usage_mb=None, max_tokens=identity.get("max_length"),
                     embed_dim=identity.get("dim") or identity.get("embed_dim"), license=None, open_weights=None,
                     public_training_code=None, public_training_data=None, framework=[],
                     similarity_fn_name=None, use_instructions=None, training_datasets=None)


def mteb_model_name(name: str) -> str:
    """mteb names a model `organization/model_name`: a Hub id stays as it is; a harness model
    (bm25, random, a local path) becomes `mmle/<name as a file name>`."""
    from harness.report.tables import file_slug

    return name if re.fullmatch(r"[\w.-]+/[\w.-]+", name) else f"mmle/{file_slug(name)}"


def _subset_scores(row: dict) -> dict:
    """One pool's entry in a TaskResult's split: mteb's required keys and the tie-aware metrics."""
    return {"hf_subset": row["pool"], "languages": ["eng-Latn"],  # every builder declares English
            "main_score": row["metrics"]["p@1"]["value"],  # = tie_aware_precision_at_1
            **{TIE_AWARE[m]: row["metrics"][m]["value"] for m in TIE_AWARE if m in row["metrics"]},
            "n_queries": row["n_queries"], "n_candidates": row["n_candidates"]}


def write_mteb_results(result: dict, folder: Path) -> list[Path]:
    """Each model's TaskResult per release under ``folder`` (mteb's layout); the files written. A
    subset run (``--max-queries``) is refused before: its figures are not the benchmark's."""
    import mteb
    from mteb import ResultCache, TaskResult

    if (result.get("settings") or {}).get("max_queries"):
        raise UserError(SUBSET_REFUSED)
    # results.json names each release once in `datasets`; a row names its release by `benchmark` (its ref)
    datasets = result.get("datasets") or [result.get("dataset") or {}]
    cache, written = ResultCache(cache_path=folder), []
    for model in result.get("models") or []:
        identity = model.get("identity") or {}
        meta = _model_meta(mteb_model_name(str(identity.get("model") or model["spec"])),
                           str(identity.get("revision") or NO_REVISION), identity)
        for dataset in datasets:
            rows = [r for r in result["results"] if r["model"] == model["spec"] and r["benchmark"] == dataset["ref"]]
            if not rows:
                continue
            name = task_name(str(dataset.get("path") or dataset.get("ref") or "release"))
            revision = dataset.get("revision") or dataset.get("data_files_sha256") or "local"
            task_result = TaskResult(dataset_revision=str(revision), task_name=name, mteb_version=mteb.__version__,
                                     scores={"test": [_subset_scores(r) for r in rows]},
                                     evaluation_time=sum(float((r.get("timings") or {}).get("total_s") or 0)
                                                         for r in rows))
            cache.save_to_cache(task_result, meta)
            written.append(cache.get_task_result_path(name, meta))
    return written
