"""The build pipeline: sources -> pools -> write (temporary dir) -> validate -> card -> move into place."""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from mmlongembed.builder import Builder, BuildReport
from mmlongembed.capacity import check_lengths
from mmlongembed.card import render_card
from mmlongembed.errors import UserError
from mmlongembed.manifest import public_config, toolkit_identity
from mmlongembed.outdir import (
    BuildLock, check_output_root, check_replaceable, remove_stale_temporaries, sigterm_as_interrupt, write_error)
from mmlongembed.output import (
    Written, commit_output_dir, pool_statistics, prepare_output_dir, write_json, write_tables)
from mmlongembed.parallel import Beside
from mmlongembed.pools import Pool
from mmlongembed.report import format_table, length_histogram, shortcut_check
from mmlongembed.shortcuts import ALPHA, MIN_EXCESS
from mmlongembed.tokens import default_counter
from mmlongembed.validate import (
    InvalidBuild, Validation, check_files, format_report, load_manifest, validate_tables)


def made_by(builder: Builder, config) -> dict:
    """The manifest's record of what made a pool build, bar its sources (which take hashing):
    also what decides whether an existing build is up to date."""
    return {
        "builder": {"name": builder.name, "version": builder.version, "task": builder.task},
        "toolkit": toolkit_identity(),
        "config": public_config(config),
        "seed": config.seed,
        "tokenizer": default_counter().identity,
    }


def build_manifest(builder: Builder, config, report: BuildReport, stats, written: Written,
                   validation: Validation, synthetic: list[str]) -> dict:
    return {
        **made_by(builder, config),
        "sources": builder.source_identity(config),
        "synthetic": synthetic,
        "llm_steps": report.llm_steps,
        "report": report.as_dict(),
        "pools": stats,
        "label_free_audit": validation.shortcuts,
        "storage": written.storage.as_dict(),
        "files": written.files,
    }


SUMMARY_MAX_ROWS = 24  # beyond this many pools the summary shows one row per family of pools


def _family(pool: Pool) -> str:
    """A pool's name up to its length: needle-text-mixed-1k-d20 -> needle-text-mixed."""
    head, separator, _ = pool.name.rpartition(f"-{pool.band.name}")
    return head if separator else pool.name


def _worst_rule(audits: dict[str, dict]) -> str:
    """The query-blind rule that comes closest to finding the positives, over ``audits`` (a label
    -> a pool's label-free audit; the label is shown when there are several)."""
    applicable = {label: a for label, a in audits.items() if a.get("applicable")}
    if not applicable:
        return "n/a (all positives)"
    label, worst = max(applicable.items(), key=lambda item: item[1]["worst_p_at_1"] - item[1]["chance"])
    where = f" ({label})" if len(audits) > 1 else ""
    return f"{worst['worst_rule']} {worst['worst_p_at_1']:.2f} vs {worst['chance']:.2f}{where}"


def summary_table(stats: list[dict], report: BuildReport, validation: Validation,
                  pools: list[Pool] | None = None) -> str:
    """One row per pool; for a long grid (more than SUMMARY_MAX_ROWS pools, given ``pools``),
    one row per family of pools (same name up to the length: all lengths and depths of a cell)."""
    audit = validation.shortcuts
    if pools is None or len(stats) <= SUMMARY_MAX_ROWS:
        rows = [(s["pool"], s["queries"], s["candidates"], s["tokens_min"], s["tokens_median"], s["tokens_max"],
                 _worst_rule({s["pool"]: audit.get(s["pool"], {})})) for s in stats]
        table = format_table(["pool", "queries", "candidates", "min", "median", "max",
                              "worst query-blind rule (P@1)"], rows)
    else:
        families: dict[str, list[tuple[Pool, dict]]] = {}
        for pool, s in zip(pools, stats):
            families.setdefault(_family(pool), []).append((pool, s))
        rows = []
        for family, members in families.items():
            bands = sorted({p.band.target: p.band.name for p, _ in members}.items())
            depths = {p.depth for p, _ in members if p.depth is not None}
            rows.append((family, len(members), f"{bands[0][1]}..{bands[-1][1]} ({len(bands)})",
                         len(depths) or "-", sum(s["queries"] for _, s in members),
                         sum(s["candidates"] for _, s in members), min(s["tokens_min"] for _, s in members),
                         max(s["tokens_max"] for _, s in members),
                         _worst_rule({p.name[len(family) + 1:]: audit.get(p.name, {}) for p, _ in members})))
        table = format_table(["pools", "count", "lengths", "depths", "queries", "candidates", "min", "max",
                              "worst query-blind rule (P@1) (its pool)"], rows)
        table += (f"\n{len(stats)} pools in {len(families)} families; every pool's figures are in manifest.json "
                  "('pools', 'label_free_audit')")
    if report.skipped:
        table += "\n\n" + format_table(["skipped: reason", "records"], sorted(report.skipped.items()))
    return table


def write_card(builder: Builder, context: dict, directory: Path) -> None:
    """README.md from the builder's card template; its opening line is the builder's own summary,
    its docstring's first paragraph."""
    summary = (type(builder).__doc__ or builder.title).strip().split("\n\n")[0]
    context["description"] = " ".join(context.get("description", summary).split())
    (directory / "README.md").write_text(render_card(builder.card_template, context), encoding="utf-8")


def synthetic_summary(synthetic: list[str]) -> str:
    """The last line of a build's summary: what in it is synthetic or test-only, if anything."""
    if not synthetic:
        return "synthetic: nothing (every query and candidate comes from real sources)"
    return ("SYNTHETIC: " + "; ".join(synthetic) + " (recorded in manifest.json 'synthetic'; `mmle push` refuses "
            "this build without --allow-synthetic)")


def finish(summary: str, written: Written, validation: Validation, tmp_dir: Path, final_dir: Path,
           quiet: bool = False, synthetic: list[str] = ()) -> None:
    """Print what was built, how it validated and what in it is synthetic (``quiet``: only
    problems and what is synthetic); move it into place only when it is valid."""
    if not quiet:
        print(summary, file=sys.stderr)
        print(written.storage.summary(), file=sys.stderr)
    if validation.problems or not quiet:
        print(format_report(validation.problems, dict(validation.checked)), file=sys.stderr)
    if synthetic or not quiet:
        print(synthetic_summary(list(synthetic)), file=sys.stderr)
    if validation.problems:
        raise UserError(f"validation failed with {len(validation.problems)} problems; nothing was written to "
                        f"{final_dir}")
    commit_output_dir(tmp_dir, final_dir)


@contextmanager
def temporary_output(final_dir: Path, overwrite: bool):
    """A temporary sibling of ``final_dir`` to write into, removed on any failure (Ctrl-C and
    SIGTERM included); an OSError (a full disk, a quota, permissions) becomes one line."""
    tmp_dir = prepare_output_dir(final_dir, overwrite)
    try:
        yield tmp_dir
    except BaseException as error:  # Ctrl-C and SIGTERM (outdir.Terminated) included
        shutil.rmtree(tmp_dir, ignore_errors=True)
        one_line = write_error(error, final_dir, tmp_dir) if isinstance(error, OSError) else None
        if one_line is not None:
            raise one_line from None
        raise


def _as_json(value):
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def why_not_current(builder: Builder, config, final_dir: Path) -> str | None:
    """None when ``final_dir`` holds exactly what this build would write again, so that running
    the same command twice is not an error: a pool build made by this toolkit (the same commit,
    from a clean checkout) from the same config, seed, sources and tokenizer, with no LLM call
    (only rule fallbacks or cache replays), its files as written. Else why it is not."""
    try:
        manifest = load_manifest(final_dir)
    except (InvalidBuild, OSError) as error:
        return f"it holds no readable manifest.json: {error}"
    if builder.output_kind != "pools":
        return "a training build is rebuilt only on request"
    expected = made_by(builder, config)
    toolkit = expected["toolkit"]
    if toolkit["git_dirty"] is not False or toolkit["git_commit"] == "unknown":
        return "this toolkit is not a clean git checkout, so its code cannot be compared"
    for key, value in expected.items():
        if _as_json(manifest.get(key)) != _as_json(value):
            return f"another {key} made it"
    if any(step.get("calls") for step in manifest.get("llm_steps") or ()):
        return "an LLM answered for it"
    if _as_json(manifest.get("sources")) != _as_json(builder.source_identity(config)):
        return "other sources made it"
    changed = check_files(final_dir, {}, manifest)
    if changed:
        return f"its files changed after the build: {changed[0].detail}"
    return None


def run_build(builder: Builder, config, output_root: Path, overwrite: bool = False, progress: bool = True,
              quiet: bool = False, skip_unreadable_files: bool = False) -> Path:
    """Build into ``output_root/<name>``; ``quiet``: no progress bars and no summary table;
    ``skip_unreadable_files``: a source file that cannot be parsed is left out (and the summary
    says what that cost) instead of stopping the build."""
    if builder.output_kind == "composite":  # a release of several builds (mmlongembed.composite)
        return builder.build_release(config, output_root, overwrite=overwrite, progress=progress and not quiet,
                                     quiet=quiet, skip_unreadable_files=skip_unreadable_files)
    progress = progress and not quiet
    report = BuildReport(progress=progress, skip_unreadable_files=skip_unreadable_files)
    output_root = Path(output_root)
    final_dir = output_root / builder.name
    created = not output_root.exists()
    check_output_root(output_root)
    try:
        with sigterm_as_interrupt(), BuildLock(final_dir):
            if final_dir.exists() and not overwrite:
                reason = why_not_current(builder, config, final_dir)
                if reason is None:
                    print(f"{final_dir} is up to date: this toolkit made it from the same config, seed and sources "
                          "(--overwrite rebuilds it)")
                    return final_dir
                raise UserError(f"output directory {final_dir} already exists ({reason}); pass --overwrite to "
                                "replace it")
            check_replaceable(final_dir)
            remove_stale_temporaries(final_dir)
            if builder.output_kind == "training":
                from mmlongembed.training import build_training

                built = build_training(builder, config, final_dir, overwrite, report, quiet)
            else:
                built = _build_locked(builder, config, final_dir, overwrite, report, quiet)
            print(f"built {builder.name} into {built}")
            return built
    finally:
        if created and output_root.is_dir() and not any(output_root.iterdir()):
            output_root.rmdir()  # a failed first build leaves no empty --output behind


def _measure_pools(pools: list[Pool], unmeasured: list[Pool], histogram: Path, advance) -> dict[str, dict]:
    """The BM25 shortcut check of each pool in ``unmeasured`` (``advance(1)`` after each), and
    the length histogram of all pools, drawn into ``histogram``."""
    words: dict[str, list[str]] = {}  # pools of a build share much of their text
    shortcuts = {}
    for pool in unmeasured:
        shortcuts[pool.name] = shortcut_check(pool, words)
        advance(1)
    length_histogram(pools, histogram)
    return shortcuts


def what_was_lost(report: BuildReport, pools: list[Pool], config) -> list[str]:
    """The summary's last lines after --skip-unreadable-files left files out: which files, and
    the pools that came out empty (not written) or below the plan of queries per pool (what a
    lost file may have cost; the pools cannot say what it would have given)."""
    if not report.lost_files:
        return []
    planned = getattr(config, "max_queries_per_pool", None)
    empty = [p.name for p in pools if not p.queries]
    short = [f"{p.name} ({len(p.queries)})" for p in pools if p.queries and planned and len(p.queries) < planned]
    return [f"mmle: warning: {len(report.lost_files)} source file(s) could not be read and were left out "
            f"(--skip-unreadable-files): " + "; ".join(f"{path} ({why})" for path, why in report.lost_files),
            "mmle: warning: pools with no query, not written: " + (", ".join(empty) or "none"),
            f"mmle: warning: pools with fewer queries than the plan of {planned}: " + (", ".join(short) or "none")]


def _build_locked(builder: Builder, config, final_dir: Path, overwrite: bool, report: BuildReport,
                  quiet: bool = False) -> Path:
    progress = report.progress
    sources = builder.load_sources(config, report)
    check_lengths(builder, sources, config)
    sources = builder.run_steps(sources, config, report)  # the declared steps (LLM calls) before the pure part
    pools = builder.build_pools(sources, config, report)
    if not any(p.queries for p in pools):
        lost = f"; left out as unreadable: {', '.join(p for p, _ in report.lost_files)}" if report.lost_files else ""
        raise UserError(f"{builder.name}: the sources gave no pool any query ({dict(report.skipped)}){lost}")
    lost_lines = what_was_lost(report, pools, config)
    pools = [p for p in pools if p.queries] or pools
    unmeasured = [pool for pool in pools if pool.name not in report.shortcuts]  # a builder may have measured some
    stats = [{**pool_statistics(p), "difficulty": p.difficulty} for p in pools]

    with temporary_output(final_dir, overwrite) as tmp_dir:
        # The BM25 shortcut check and the length histogram need only the pools: they are worked
        # out in a forked worker while the tables are written.
        histogram = tmp_dir / "figures" / "length_histogram.png"
        beside = Beside(lambda advance: _measure_pools(pools, unmeasured, histogram, advance))
        written = write_tables(pools, tmp_dir, seed=config.seed, builder=builder.name, progress=progress)
        report.shortcuts.update(beside.result(
            lambda: report.bar(unmeasured, "BM25 shortcut check", "pool", min_items=8)))
        specs = {spec.name: spec for spec in written.specs}
        validation = validate_tables(tmp_dir, specs, builder.name, progress=progress)
        synthetic = builder.synthetic_parts(config, pools, report)
        manifest = build_manifest(builder, config, report, stats, written, validation, synthetic)
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
            "modalities": sorted({p.modality for p in pools} | {p.query_modality for p in pools}),
            "config": manifest["config"], **builder.card_context(config, pools, report),
        }
        write_card(builder, context, tmp_dir)
        finish(summary_table(stats, report, validation, pools), written, validation, tmp_dir, final_dir, quiet,
               synthetic)
        for line in lost_lines:  # last, and also when quiet: what the build is missing
            print(line, file=sys.stderr)
    return final_dir
