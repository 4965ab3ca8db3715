"""Write a built benchmark in the published layout (docs/LAYOUT.md), atomically.

Everything is written into a temporary sibling directory and renamed into place only when
complete, so a crash never leaves a half-written benchmark behind.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Sequence

from mmlongembed.errors import UserError
from mmlongembed.pools import Pool

LAYOUT_VERSION = "1"
SPLIT = "test"


def _list_of(feature):
    import datasets

    return datasets.List(feature) if hasattr(datasets, "List") else datasets.Sequence(feature)


def _value_feature(values: Sequence):
    import datasets

    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, bool):
        return datasets.Value("bool")
    if isinstance(sample, int):
        return datasets.Value("int64")
    if isinstance(sample, float):
        return datasets.Value("float64")
    if isinstance(sample, (list, tuple)):
        inner = _value_feature([x for v in values if v for x in v])
        return _list_of(inner)
    return datasets.Value("string")


def _with_extra_columns(data: dict, features: dict, rows: Sequence[dict], owner: str):
    """The table with the task-specific columns added; every row must have the same ones."""
    import datasets

    keys = sorted({k for row in rows for k in row})
    for key in keys:
        if key in data:
            raise ValueError(f"{owner}: extra column {key!r} shadows a layout column")
        values = []
        for row in rows:
            if key not in row:
                raise ValueError(f"{owner}: some rows lack the extra column {key!r}")
            values.append(row[key])
        data[key], features[key] = values, _value_feature(values)
    return datasets.Dataset.from_dict(data, features=datasets.Features(features))


def corpus_table(pool: Pool):
    import datasets

    data: dict[str, list] = {k: [] for k in (
        "_id", "title", "text", "images", "n_tokens", "n_text_tokens", "n_image_tokens",
        "role", "group", "source_id", "provenance")}
    for c in pool.candidates:
        text, images = c.document.render()
        image_tokens = c.document.image_tokens
        data["_id"].append(c.id)
        data["title"].append(c.title)
        data["text"].append(text)
        data["images"].append([{"bytes": b, "path": None} for b in images])
        data["n_tokens"].append(c.n_tokens)
        data["n_text_tokens"].append(c.n_tokens - image_tokens)
        data["n_image_tokens"].append(image_tokens)
        data["role"].append(c.role)
        data["group"].append(c.group)
        data["source_id"].append(c.source_id)
        data["provenance"].append(json.dumps(c.provenance, sort_keys=True, ensure_ascii=False))
    features = {
        "_id": datasets.Value("string"), "title": datasets.Value("string"), "text": datasets.Value("string"),
        "images": _list_of(datasets.Image()),
        "n_tokens": datasets.Value("int64"), "n_text_tokens": datasets.Value("int64"),
        "n_image_tokens": datasets.Value("int64"), "role": datasets.Value("string"),
        "group": datasets.Value("string"), "source_id": datasets.Value("string"),
        "provenance": datasets.Value("string"),
    }
    return _with_extra_columns(data, features, [c.extra for c in pool.candidates], f"{pool.name} corpus")


def queries_table(pool: Pool):
    import datasets

    data: dict[str, list] = {k: [] for k in ("_id", "text", "images", "instruction", "n_tokens", "source_id")}
    for q in pool.queries:
        data["_id"].append(q.id)
        data["text"].append(q.text)
        data["images"].append([{"bytes": b, "path": None} for b in q.images])
        data["instruction"].append(q.instruction)
        data["n_tokens"].append(q.n_tokens)
        data["source_id"].append(q.source_id)
    features = {
        "_id": datasets.Value("string"), "text": datasets.Value("string"), "images": _list_of(datasets.Image()),
        "instruction": datasets.Value("string"), "n_tokens": datasets.Value("int64"),
        "source_id": datasets.Value("string"),
    }
    return _with_extra_columns(data, features, [q.extra for q in pool.queries], f"{pool.name} queries")


def qrels_table(pool: Pool):
    import datasets

    features = datasets.Features({
        "query-id": datasets.Value("string"), "corpus-id": datasets.Value("string"), "score": datasets.Value("int64")})
    return datasets.Dataset.from_dict(
        {"query-id": [q for q, _, _ in pool.qrels], "corpus-id": [c for _, c, _ in pool.qrels],
         "score": [s for _, _, s in pool.qrels]},
        features=features,
    )


def pools_table(pools: Sequence[Pool]):
    import datasets

    rows = [p.row() for p in pools]
    features = datasets.Features({
        "pool": datasets.Value("string"), "task": datasets.Value("string"), "dataset": datasets.Value("string"),
        "difficulty": datasets.Value("string"), "length": datasets.Value("int64"),
        "band_min": datasets.Value("int64"), "band_max": datasets.Value("int64"),
        "depth": datasets.Value("float64"), "modality": datasets.Value("string"),
        "query_modality": datasets.Value("string"), "n_queries": datasets.Value("int64"),
        "n_candidates": datasets.Value("int64"), "extra": datasets.Value("string"),
    })
    return datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)


def data_files(pools: Sequence[Pool]) -> dict[str, str]:
    """config name -> data file path inside the repo (the card's `configs:` header)."""
    files = {"pools": f"data/pools/{SPLIT}.parquet"}
    for pool in pools:
        for part in ("corpus", "queries", "qrels"):
            files[f"{pool.name}-{part}"] = f"data/{pool.name}/{part}/{SPLIT}.parquet"
    return files


def pool_statistics(pool: Pool) -> dict:
    lengths = sorted(c.n_tokens for c in pool.candidates)
    n_queries = len(pool.queries)
    return {
        "pool": pool.name,
        "queries": n_queries,
        "candidates": len(pool.candidates),
        "candidates_per_query": round(len(pool.candidates) / n_queries, 3) if n_queries else 0,
        "tokens_min": lengths[0] if lengths else 0,
        "tokens_median": int(statistics.median(lengths)) if lengths else 0,
        "tokens_max": lengths[-1] if lengths else 0,
        "band": [pool.band.lo, pool.band.hi],
        "images": sum(len(c.document.render()[1]) for c in pool.candidates),
    }


def prepare_output_dir(final_dir: Path, overwrite: bool) -> Path:
    final_dir = Path(final_dir)
    if final_dir.exists() and not overwrite:
        raise UserError(f"output directory {final_dir} already exists; pass --overwrite to replace it")
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final_dir.name}.tmp-", dir=final_dir.parent))


def commit_output_dir(tmp_dir: Path, final_dir: Path) -> None:
    """Swap the finished temporary directory into place (rename is atomic on one filesystem)."""
    final_dir = Path(final_dir)
    trash = None
    if final_dir.exists():
        trash = final_dir.with_name(f".{final_dir.name}.old-{os.getpid()}")
        final_dir.rename(trash)
    Path(tmp_dir).rename(final_dir)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def write_tables(pools: Sequence[Pool], root: Path, progress: bool = True) -> None:
    from tqdm.auto import tqdm

    import datasets

    datasets.disable_progress_bars()  # one bar per pool below is enough
    files = data_files(pools)
    for path in files.values():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    pools_table(pools).to_parquet(str(root / files["pools"]))
    for pool in tqdm(pools, desc="writing pools", unit="pool", disable=not progress):
        corpus_table(pool).to_parquet(str(root / files[f"{pool.name}-corpus"]))
        queries_table(pool).to_parquet(str(root / files[f"{pool.name}-queries"]))
        qrels_table(pool).to_parquet(str(root / files[f"{pool.name}-qrels"]))


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def data_files_from_card(card_path: Path) -> dict[str, str]:
    """config name -> data file, read back from the card's YAML header (what load_dataset sees)."""
    import yaml

    text = Path(card_path).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise UserError(f"{card_path} has no YAML header")
    header = yaml.safe_load(text[4:text.index("\n---", 4)])
    files = {}
    for config in header.get("configs", []):
        data = config["data_files"]
        files[config["config_name"]] = data[0]["path"] if isinstance(data, list) else data
    return files
