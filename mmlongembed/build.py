"""The build pipeline: sources -> pools -> write (temporary dir) -> validate -> move into place."""

from __future__ import annotations

import sys
from pathlib import Path

from mmlongembed.builder import Builder, BuildReport
from mmlongembed.card import render_card
from mmlongembed.errors import UserError
from mmlongembed.manifest import public_config, toolkit_identity
from mmlongembed.output import (
    commit_output_dir, data_files, pool_statistics, prepare_output_dir, write_json, write_tables)
from mmlongembed.report import format_table, length_histogram, shortcut_check
from mmlongembed.tokens import default_counter
from mmlongembed.validate import format_report, validate_dir


def build_manifest(builder: Builder, config, report: BuildReport, pools, stats) -> dict:
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
    }


def summary_table(stats: list[dict], report: BuildReport) -> str:
    rows = [
        (s["pool"], s["queries"], s["candidates"], s["tokens_min"], s["tokens_median"], s["tokens_max"])
        for s in stats
    ]
    table = format_table(["pool", "queries", "candidates", "min", "median", "max"], rows)
    if report.skipped:
        table += "\n\n" + format_table(["skipped: reason", "records"], sorted(report.skipped.items()))
    return table


def run_build(builder: Builder, config, output_root: Path, overwrite: bool = False, progress: bool = True) -> Path:
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
    manifest = build_manifest(builder, config, report, pools, stats)

    tmp_dir = prepare_output_dir(final_dir, overwrite)
    try:
        write_tables(pools, tmp_dir, progress=progress)
        length_histogram(pools, tmp_dir / "figures" / "length_histogram.png")
        write_json(tmp_dir / "manifest.json", manifest)
        write_json(tmp_dir / "build_config.json", manifest["config"])
        files = data_files(pools)
        context = {
            "title": builder.title, "builder": builder.name, "builder_version": builder.version,
            "licence": builder.licence, "languages": builder.languages, "data_files": files,
            "n_rows": sum(s["candidates"] + s["queries"] for s in stats), "manifest": manifest,
            "pool_stats": stats, "skipped": dict(sorted(report.skipped.items())),
            "shortcuts": report.shortcuts, "first_pool": pools[0].name, "llm_steps": report.llm_steps,
            "config": manifest["config"], **builder.card_context(config, pools, report),
        }
        # the card's opening line: the builder's own summary, its docstring's first paragraph
        summary = (type(builder).__doc__ or builder.title).strip().split("\n\n")[0]
        context["description"] = " ".join(context.get("description", summary).split())
        (tmp_dir / "README.md").write_text(render_card(builder.card_template, context), encoding="utf-8")
        problems, checked = validate_dir(tmp_dir)
        print(summary_table(stats, report), file=sys.stderr)
        print(format_report(problems, checked), file=sys.stderr)
        if problems:
            raise UserError(f"validation failed with {len(problems)} problems; nothing was written to {final_dir}")
        commit_output_dir(tmp_dir, final_dir)
    except BaseException:
        import shutil

        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return final_dir
