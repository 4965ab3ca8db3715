"""Training-data builds: a builder whose output is a training set (split ``train``), not pools.

A builder declares ``pipeline = TRAINING`` and implements ``build_training`` (returning
``TrainingData``: named tables of rows with their ``datasets`` features) and
``validate_training`` (its invariants, on the tables as written). The pipeline shares the pool
pipeline's part (``mmlongembed.build.pipeline``): sources -> tables -> written into a temporary
directory -> manifest (sha256 of every data file, config, seed, sources, tokenizer, LLM steps)
-> card from ``cards/`` -> validated by the same code as ``mmle validate`` -> renamed into
place. The tables and their files: ``mmlongembed.training.tables``.

Nothing of the blind pool layout applies: a training set has no hidden labels.
"""

from __future__ import annotations

from pathlib import Path

from mmlongembed.checks.build_checks import Validation, check_files
from mmlongembed.core.builder import Builder, BuildReport, Problem
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import ConfigSpec
from mmlongembed.output.writer import write_json
from mmlongembed.build.pipeline import Pipeline, card_context, finish, skipped_table, temporary_output, write_card
from mmlongembed.checks.summary import format_table
from mmlongembed.training.tables import TRAIN_SPLIT, TRAINING_TASKS, TrainingData, read_training_tables, \
    write_training_tables

ROWS_COUNTED = "validated {rows} in {configs}"  # what a training build's validation counts


def summary_table(data: TrainingData, report: BuildReport) -> str:
    return format_table(["config", "rows"], [(t.name, len(t.rows)) for t in data.tables]) + skipped_table(report)


class TrainingPipeline(Pipeline):
    """A training set: ``Builder.build_training``'s tables, one config (split ``train``) each."""

    output_kind = "training"
    tasks = TRAINING_TASKS

    def build(self, builder: Builder, config, final_dir: Path, overwrite: bool, report: BuildReport,
              quiet: bool = False) -> Path:
        """The training-data build, inside ``run``'s lock."""
        sources = builder.load_sources(config, report)
        sources = builder.run_steps(sources, config, report)  # the declared steps (the teacher) before the pure part
        data = builder.build_training(sources, config, report)
        if not any(t.rows for t in data.tables):
            raise UserError(f"{builder.name}: the sources gave no training rows ({dict(report.skipped)})")
        synthetic = builder.synthetic_parts(config, [], report)
        with temporary_output(final_dir, overwrite) as tmp_dir:
            written = write_training_tables(data, tmp_dir)
            head = self.made_by(builder, config)
            if data.tokenizer and data.tokenizer != head["tokenizer"]:
                raise RuntimeError(f"{builder.name}: its tables hold ids of a tokenizer that output_tokenizer "
                                   "does not name")
            manifest = {
                **head,
                "sources": builder.source_identity(config),
                "synthetic": synthetic,
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
                **card_context(builder, manifest, written.specs, sum(len(t.rows) for t in data.tables), report),
                "statistics": data.statistics, "tables": manifest["tables"],
                **builder.card_context(config, data, report),
            }
            write_card(builder, context, tmp_dir)
            specs = {spec.name: spec for spec in written.specs}
            # read back as a user would: the files as written against the manifest, then the tables
            validation = self.validate(tmp_dir, specs, manifest, builder, check_files(tmp_dir, specs, manifest))
            finish(summary_table(data, report), written, validation, tmp_dir, final_dir, quiet, synthetic)
        return final_dir

    def made_by(self, builder: Builder, config) -> dict:
        """As every kind's, with the tokenizer whose ids the tables hold (a student's, where the
        builder names one: ``Builder.output_tokenizer``)."""
        record = super().made_by(builder, config)
        return {**record, "tokenizer": builder.output_tokenizer(config) or record["tokenizer"]}

    def validate(self, root: Path, specs: dict[str, ConfigSpec], manifest: dict, builder: Builder,
                 file_problems: list[Problem], progress: bool = False) -> Validation:
        """The generic checks (every data file is the one the build wrote, every config is a train
        split with the rows the manifest counts) and the builder's own (``validate_training``);
        ``file_problems``: what ``check_files`` already found (validate_build hashes first)."""
        result = Validation(counted=ROWS_COUNTED)
        result.problems += file_problems
        counted = manifest.get("tables") or {}
        for name, spec in specs.items():
            if spec.split != TRAIN_SPLIT:
                result.problems.append(Problem(name, "split",
                                               f"config {name} is split {spec.split!r}, not {TRAIN_SPLIT!r}"))
        for name in counted:
            if name not in specs:
                result.problems.append(Problem(name, "configs",
                                               f"the manifest counts config {name}, the card lacks it"))
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


TRAINING = TrainingPipeline()
