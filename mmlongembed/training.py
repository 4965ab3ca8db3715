"""Training-data builds: a builder whose output is a training set (split ``train``), not pools.

A builder declares ``output_kind = "training"`` and implements ``build_training`` (returning
``TrainingData``: named tables of rows with their ``datasets`` features) and
``validate_training`` (its invariants, on the tables as written). The pipeline is the pool
pipeline's: sources -> tables -> written into a temporary directory -> manifest (sha256 of every
data file, config, seed, sources, tokenizer, LLM steps) -> card from ``cards/`` -> validated by
the same code as ``mmle validate`` -> renamed into place. Each table is one config, one parquet
file named by its content hash, loadable with ``load_dataset(dir, name, split="train")``; a
column named ``images`` (a list of encoded images) stores each distinct image once.

Nothing of the blind pool layout applies: a training set has no hidden labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmlongembed.builder import Builder, BuildReport, Problem
from mmlongembed.errors import UserError
from mmlongembed.layout import ConfigSpec
from mmlongembed.manifest import file_sha256, public_config, toolkit_identity
from mmlongembed.output import (
    StorageStats, Written, _images_array, write_json, write_parquet)
from mmlongembed.report import format_table
from mmlongembed.tokens import default_counter

TRAIN_SPLIT = "train"
IMAGES = "images"
# What a training builder's `task` may be (pool builders use mmlongembed.pools.TASKS).
TRAINING_TASKS = ("evidence_alignment",)


@dataclass
class TrainingTable:
    name: str  # the config name
    rows: list[dict]
    features: Any  # datasets.Features, in column order


@dataclass
class TrainingData:
    tables: list[TrainingTable]
    statistics: dict = field(default_factory=dict)  # into the manifest and the card
    tokenizer: dict | None = None  # the tokenizer that made any token ids (default: the Qwen3 yardstick)


def _arrow_table(table: TrainingTable):
    import pyarrow as pa

    schema = table.features.arrow_schema
    columns = {}
    for name in table.features:
        if name == IMAGES:
            columns[name] = _images_array(table.rows, {}, [])
        else:
            columns[name] = pa.array([row.get(name) for row in table.rows], type=schema.field(name).type)
    return pa.table(columns)


def write_training_tables(data: TrainingData, root: Path) -> Written:
    """One parquet file per table under ``data/<name>/``; returns the card's config specs, the
    storage figures and the sha256 of every data file."""
    root = Path(root)
    specs, files, stats = [], {}, StorageStats()
    distinct: dict[bytes, None] = {}
    for table in data.tables:
        path = write_parquet(_arrow_table(table), table.features, root / "data" / table.name, TRAIN_SPLIT)
        relative = path.relative_to(root).as_posix()
        size = path.stat().st_size
        files[relative] = {"sha256": file_sha256(path), "bytes": size}
        stats.data_bytes_on_disk += size
        for row in table.rows:
            for image in row.get(IMAGES) or ():
                stats.image_refs += 1
                stats.image_bytes_referenced += len(image)
                distinct[image] = None
            stats.text_bytes += sum(len(v.encode("utf-8")) for v in row.values() if isinstance(v, str))
        specs.append(ConfigSpec(table.name, relative, split=TRAIN_SPLIT))
    stats.distinct_images = len(distinct)
    stats.distinct_image_bytes = sum(len(b) for b in distinct)
    return Written(specs, stats, files)


def read_training_tables(root: Path, specs: dict[str, ConfigSpec]) -> dict[str, dict[str, list]]:
    """config -> column -> values, as written (images as {bytes, path} dicts)."""
    import pyarrow.parquet as pq

    tables = {}
    for name, spec in specs.items():
        try:
            tables[name] = pq.read_table(Path(root) / spec.path).to_pydict()
        except (OSError, ValueError) as error:
            raise UserError(f"{spec.path}: cannot read config {name} ({str(error).splitlines()[0]})") from None
    return tables


def validate_training_build(root: Path, specs: dict[str, ConfigSpec], manifest: dict, builder: Builder):
    """The generic checks (every data file is the one the build wrote, every config is a train
    split with the rows the manifest counts) and the builder's own (``validate_training``)."""
    from mmlongembed.validate import Validation, check_files

    result = Validation()
    result.problems += check_files(root, specs, manifest)
    counted = manifest.get("tables") or {}
    for name, spec in specs.items():
        if spec.split != TRAIN_SPLIT:
            result.problems.append(Problem(name, "split",
                                           f"config {name} is split {spec.split!r}, not {TRAIN_SPLIT!r}"))
    for name in counted:
        if name not in specs:
            result.problems.append(Problem(name, "configs", f"the manifest counts config {name}, the card lacks it"))
    try:
        tables = read_training_tables(root, specs)
    except UserError as error:
        result.problems.append(Problem("*", "files", str(error)))
        return result
    for name, columns in tables.items():
        rows = len(next(iter(columns.values()), []))
        if name in counted and counted[name] != rows:
            result.problems.append(Problem(name, "row_count", f"the manifest counts {counted[name]} rows, "
                                                              f"the file holds {rows}"))
        result.checked["configs"] += 1
        result.checked["rows"] += rows
    result.problems += list(builder.validate_training(tables, manifest))
    return result


def summary_table(data: TrainingData, report: BuildReport) -> str:
    table = format_table(["config", "rows"], [(t.name, len(t.rows)) for t in data.tables])
    if report.skipped:
        table += "\n\n" + format_table(["skipped: reason", "records"], sorted(report.skipped.items()))
    return table


def build_training(builder: Builder, config, final_dir: Path, overwrite: bool = False,
                   report: BuildReport | None = None, quiet: bool = False) -> Path:
    """The training-data build, inside ``run_build``'s lock (mmlongembed.build)."""
    from mmlongembed.build import finish, temporary_output, write_card

    report = report if report is not None else BuildReport()
    sources = builder.load_sources(config, report)
    data = builder.build_training(sources, config, report)
    if not any(t.rows for t in data.tables):
        raise UserError(f"{builder.name}: the sources gave no training rows ({dict(report.skipped)})")
    synthetic = builder.synthetic_parts(config, [], report)
    with temporary_output(final_dir, overwrite) as tmp_dir:
        written = write_training_tables(data, tmp_dir)
        manifest = {
            "builder": {"name": builder.name, "version": builder.version, "task": builder.task,
                        "output_kind": builder.output_kind},
            "toolkit": toolkit_identity(),
            "config": public_config(config),
            "seed": config.seed,
            "sources": builder.source_identity(config),
            "synthetic": synthetic,
            "tokenizer": data.tokenizer or default_counter().identity,
            "llm_steps": report.llm_steps,
            "report": report.as_dict(),
            "statistics": data.statistics,
            "tables": {t.name: len(t.rows) for t in data.tables},
            "storage": written.storage.as_dict(),
            "files": written.files,
        }
        write_json(tmp_dir / "manifest.json", manifest)
        write_json(tmp_dir / "build_config.json", manifest["config"])
        context = {
            "title": builder.title, "builder": builder.name, "builder_version": builder.version,
            "licence": builder.licence, "languages": builder.languages, "configs": written.specs,
            "n_rows": sum(len(t.rows) for t in data.tables), "manifest": manifest,
            "skipped": dict(sorted(report.skipped.items())), "llm_steps": report.llm_steps,
            "statistics": data.statistics, "storage": written.storage.as_dict(), "config": manifest["config"],
            "tables": manifest["tables"], **builder.card_context(config, data, report),
        }
        write_card(builder, context, tmp_dir)
        validation = validate_training_build(tmp_dir, {s.name: s for s in written.specs}, manifest, builder)
        finish(summary_table(data, report), written, validation, tmp_dir, final_dir, quiet, synthetic)
    return final_dir
