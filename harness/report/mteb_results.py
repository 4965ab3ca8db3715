"""A run in mteb's results layout, so it can go to the MTEB results repository.

``mmle score --mteb-results DIR`` writes, per model of the run, what ``mteb.ResultCache`` writes
after ``mteb.evaluate``: ``DIR/results/<model name as a path>/<revision>/<Task>.json`` (an
``mteb.TaskResult``) beside ``model_meta.json`` and ``run_settings.jsonl``. One task per release
(``MMLongEmbed<Release>``, the name ``harness.mteb.retrieval.release_task`` gives it), split
``test``, one hf_subset per pool, as the release's configs are laid out. The main score is
``tie_aware_precision_at_1``, the paper's P@1 with ties counted by expectation (the harness's
figure, to the bit); nDCG@10, MRR and hit@5 beside it, tie-aware too. A pool the model was not
measured on, or skipped, has no entry: mteb reads a missing subset as not evaluated.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.mteb.retrieval import TIE_AWARE, task_name
from mmlongembed.core.errors import UserError

NO_REVISION = "no_revision_available"  # mteb's own folder name for a model without one
SUBSET_REFUSED = ("--mteb-results: a --max-queries run scores a sample of each pool; the MTEB results repository "
                  "takes whole pools only")


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


def write_mteb_results(result: dict, folder: Path) -> list[Path]:
    """Each model's TaskResult under ``folder`` (mteb's layout); the files written. A subset run
    (``--max-queries``) is refused before: its figures are not the benchmark's."""
    import mteb
    from mteb import ResultCache, TaskResult

    if (result.get("settings") or {}).get("max_queries"):
        raise UserError(SUBSET_REFUSED)
    dataset = result.get("dataset") or {}
    name = task_name(str(dataset.get("path") or dataset.get("ref") or "release"))
    revision = dataset.get("revision") or dataset.get("data_files_sha256") or "local"
    cache, written = ResultCache(cache_path=folder), []
    for model in result.get("models") or []:
        rows = [r for r in result["results"] if r["model"] == model["spec"]]
        if not rows:
            continue
        identity = model.get("identity") or {}
        model_name = mteb_model_name(str(identity.get("model") or model["spec"]))
        model_revision = str(identity.get("revision") or NO_REVISION)
        scores = [{"hf_subset": r["pool"], "languages": ["eng-Latn"], "main_score": r["metrics"]["p@1"]["value"],  # = tie_aware_precision_at_1
                   **{TIE_AWARE[m]: r["metrics"][m]["value"] for m in TIE_AWARE if m in r["metrics"]},
                   "n_queries": r["n_queries"], "n_candidates": r["n_candidates"]} for r in rows]
        task_result = TaskResult(dataset_revision=str(revision), task_name=name, mteb_version=mteb.__version__,
                                 scores={"test": scores},
                                 evaluation_time=sum(float((r.get("timings") or {}).get("total_s") or 0) for r in rows))
        meta = _model_meta(model_name, model_revision, identity)
        cache.save_to_cache(task_result, meta)
        written.append(cache.get_task_result_path(name, meta))
    return written
