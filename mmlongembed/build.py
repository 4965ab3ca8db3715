"""The build pipeline: sources -> pools -> write (temporary dir) -> validate -> card -> move into place."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mmlongembed.builder import Builder, BuildReport
from mmlongembed.card import render_card
from mmlongembed.errors import UserError
from mmlongembed.manifest import public_config, toolkit_identity
from mmlongembed.output import (
    Written, commit_output_dir, pool_statistics, prepare_output_dir, write_json, write_tables)
from mmlongembed.report import format_table, length_histogram, shortcut_check
from mmlongembed.shortcuts import ALPHA, MIN_EXCESS
from mmlongembed.tokens import default_counter
from mmlongembed.validate import Validation, format_report, validate_tables


def build_manifest(builder: Builder, config, report: BuildReport, stats, written: Written,
                   validation: Validation) -> dict:
    return {
        "builder": {"name": builder.name, "version": builder.version, "task": builder.task},
        "toolkit": toolkit_identity(),
        "config": public_config(config),
        "seed": config.seed,
        "sources": builder.source_identity(config),
        "tokenizer": default_counter().identity,
        "llm_steps": report.llm_steps,
        "report": report.as_dict(),
        "pools": stats,
        "label_free_audit": validation.shortcuts,
        "storage": written.storage.as_dict(),
        "files": written.files,
    }


def summary_table(stats: list[dict], report: BuildReport, validation: Validation) -> str:
    rows = []
    for s in stats:
        audit = validation.shortcuts.get(s["pool"], {})
        worst = (f"{audit['worst_rule']} {audit['worst_p_at_1']:.2f} vs {audit['chance']:.2f}"
                 if audit.get("applicable") else "n/a (all positives)")
        rows.append((s["pool"], s["queries"], s["candidates"], s["tokens_min"], s["tokens_median"], s["tokens_max"],
                     worst))
    table = format_table(["pool", "queries", "candidates", "min", "median", "max", "worst query-blind rule (P@1)"],
                         rows)
    if report.skipped:
        table += "\n\n" + format_table(["skipped: reason", "records"], sorted(report.skipped.items()))
    return table


def write_card(builder: Builder, context: dict, directory: Path) -> None:
    """README.md from the builder's card template; its opening line is the builder's own summary,
    its docstring's first paragraph."""
    summary = (type(builder).__doc__ or builder.title).strip().split("\n\n")[0]
    context["description"] = " ".join(context.get("description", summary).split())
    (directory / "README.md").write_text(render_card(builder.card_template, context), encoding="utf-8")


def finish(summary: str, written: Written, validation: Validation, tmp_dir: Path, final_dir: Path) -> None:
    """Print what was built and how it validated; move it into place only when it is valid."""
    print(summary, file=sys.stderr)
    print(written.storage.summary(), file=sys.stderr)
    print(format_report(validation.problems, dict(validation.checked)), file=sys.stderr)
    if validation.problems:
        raise UserError(f"validation failed with {len(validation.problems)} problems; nothing was written to "
                        f"{final_dir}")
    commit_output_dir(tmp_dir, final_dir)


def run_build(builder: Builder, config, output_root: Path, overwrite: bool = False, progress: bool = True) -> Path:
    if builder.output_kind == "training":
        from mmlongembed.training import run_training_build

        return run_training_build(builder, config, output_root, overwrite, progress)
    final_dir = Path(output_root) / builder.name
    if final_dir.exists() and not overwrite:
        raise UserError(f"output directory {final_dir} already exists; pass --overwrite to replace it")
    report = BuildReport(progress=progress)
    sources = builder.load_sources(config, report)
    pools = builder.build_pools(sources, config, report)
    if not any(p.queries for p in pools):
        raise UserError(f"{builder.name}: the sources gave no pool any query ({dict(report.skipped)})")
    pools = [p for p in pools if p.queries] or pools
    for pool in pools:
        if pool.name not in report.shortcuts:  # a builder may have measured it for its own report
            report.shortcuts[pool.name] = shortcut_check(pool)
    stats = [{**pool_statistics(p), "difficulty": p.difficulty} for p in pools]

    tmp_dir = prepare_output_dir(final_dir, overwrite)
    try:
        written = write_tables(pools, tmp_dir, seed=config.seed, builder=builder.name, progress=progress)
        specs = {spec.name: spec for spec in written.specs}
        validation = validate_tables(tmp_dir, specs, builder.name, progress=progress)
        length_histogram(pools, tmp_dir / "figures" / "length_histogram.png")
        manifest = build_manifest(builder, config, report, stats, written, validation)
        write_json(tmp_dir / "manifest.json", manifest)
        write_json(tmp_dir / "build_config.json", manifest["config"])
        context = {
            "title": builder.title, "builder": builder.name, "builder_version": builder.version,
            "licence": builder.licence, "languages": builder.languages, "configs": written.specs,
            "n_rows": sum(s["candidates"] + s["queries"] for s in stats), "manifest": manifest,
            "pool_stats": stats, "skipped": dict(sorted(report.skipped.items())),
            "shortcuts": report.shortcuts, "label_free_audit": validation.shortcuts, "audit_alpha": ALPHA,
            "audit_min_excess": MIN_EXCESS,
            "storage": written.storage.as_dict(), "first_pool": pools[0].name, "llm_steps": report.llm_steps,
            "config": manifest["config"], **builder.card_context(config, pools, report),
        }
        write_card(builder, context, tmp_dir)
        finish(summary_table(stats, report, validation), written, validation, tmp_dir, final_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return final_dir
