"""Training-data builds: a builder whose output is a training set (split ``train``), not pools.

A builder declares ``output_kind = "training"`` and implements ``build_training`` (returning
``TrainingData``: named tables of rows with their ``datasets`` features) and
``validate_training`` (its invariants, on the tables as written). The pipeline is the pool
pipeline's: sources -> tables -> written into a temporary directory -> manifest (sha256 of every
data file, config, seed, sources, tokenizer, LLM steps) -> card from ``cards/`` -> validated by
the same code as ``mmle validate`` -> renamed into place. The tables and their files:
``mmlongembed.training_data``.

Nothing of the blind pool layout applies: a training set has no hidden labels.
"""

from __future__ import annotations

from pathlib import Path

from mmlongembed.builder import Builder, BuildReport
from mmlongembed.errors import UserError
from mmlongembed.manifest import public_config, toolkit_identity
from mmlongembed.output import write_json
from mmlongembed.report import format_table
from mmlongembed.tokens import default_counter
from mmlongembed.training_data import TrainingData, write_training_tables
from mmlongembed.validate import validate_training_build


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
