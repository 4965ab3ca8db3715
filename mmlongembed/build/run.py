"""`mmle build`: ``run_build`` builds by the pipeline of the builder's output kind
(``mmlongembed.build.pipeline``); here the benchmark's, a builder's default: sources -> pools -> write
(temporary dir) -> validate -> card -> move into place."""

from __future__ import annotations

import sys
from pathlib import Path

from mmlongembed.checks.build_checks import Validation, validate_tables
from mmlongembed.core.builder import Builder, BuildReport
from mmlongembed.build.capacity import check_lengths, check_shortest_length
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import ConfigSpec
from mmlongembed.output.writer import Written, pool_statistics, write_json, write_tables
from mmlongembed.core.parallel import Beside
from mmlongembed.build.pipeline import Pipeline, card_context, finish, skipped_table, temporary_output, write_card
from mmlongembed.core.pools import TASKS, Pool
from mmlongembed.checks.summary import counted, format_table, length_histogram, shortcut_check
from mmlongembed.checks.shortcuts import ALPHA, MIN_EXCESS, SUMMARY_ALPHA


def build_manifest(builder: Builder, config, report: BuildReport, stats, written: Written,
                   validation: Validation, synthetic: list[str]) -> dict:
    return {
        **BENCHMARK.made_by(builder, config),
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
    -> a pool's label-free audit; the label is shown when there are several), with the groups or
    queries it read (n; a needle cell's rules rank the whole pool for each query) and its p-value
    corrected for every rule and pool of the row (Bonferroni): one pool's rule at 1.00 on two
    groups is no alarm, and the column says "none significant" then."""
    applicable = {label: a for label, a in audits.items() if a.get("applicable")}
    if not applicable:
        return "n/a (all positives)"
    tests = sum(a.get("rules", 1) for a in applicable.values())
    label, worst = min(applicable.items(), key=lambda item: (item[1]["worst_p_value"],
                                                             item[1]["chance"] - item[1]["worst_p_at_1"]))
    corrected = min(1.0, worst["worst_p_value"] * tests)
    where = f", {label}" if len(audits) > 1 else ""
    reading = (f"{worst['worst_rule']} {worst['worst_p_at_1']:.2f} vs {worst['chance']:.2f}, "
               f"n={worst.get('worst_n', worst['groups'])}{where}, corrected p {corrected:.2g}")
    if not all(a.get("passed", True) for a in applicable.values()):
        return f"fails the audit: {reading}"  # the audit's own test (uncorrected p, and an excess over chance)
    return reading if corrected < SUMMARY_ALPHA else f"none significant (closest: {reading})"


def summary_table(stats: list[dict], report: BuildReport, validation: Validation,
                  pools: list[Pool] | None = None) -> str:
    """One row per pool; for a long grid (more than SUMMARY_MAX_ROWS pools, given ``pools``),
    one row per family of pools (same name up to the length: all lengths and depths of a cell)."""
    audit = validation.shortcuts
    if pools is None or len(stats) <= SUMMARY_MAX_ROWS:
        rows = [(s["pool"], s["queries"], s["candidates"], s["tokens_min"], s["tokens_median"], s["tokens_max"],
                 _worst_rule({s["pool"]: audit.get(s["pool"], {})})) for s in stats]
        table = format_table(["pool", "queries", "candidates", "min", "median", "max",
                              "query-blind rules: closest (P@1 vs chance)"], rows)
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
                              "query-blind rules: closest (P@1 vs chance, its pool)"], rows)
        table += (f"\n{len(stats)} pools in {len(families)} families; every pool's figures are in manifest.json "
                  "('pools', 'label_free_audit')")
    return table + skipped_table(report)


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
    return [f"mmle: warning: {counted(len(report.lost_files), 'source files')} could not be read and were left out "
            f"(--skip-unreadable-files): " + "; ".join(f"{path} ({why})" for path, why in report.lost_files),
            "mmle: warning: pools with no query, not written: " + (", ".join(empty) or "none"),
            f"mmle: warning: pools with fewer queries than the plan of {planned}: " + (", ".join(short) or "none")]


class BenchmarkPipeline(Pipeline):
    """A benchmark of pools (``Builder.build_pools``) in the blind layout: sources -> pools ->
    tables written into a temporary folder (the BM25 shortcut check and the length histogram
    beside them) -> validated -> manifest and card -> moved into place."""

    tasks = TASKS

    def build(self, builder: Builder, config, final_dir: Path, overwrite: bool, report: BuildReport,
              quiet: bool = False) -> Path:
        check_shortest_length(builder, config)
        sources = builder.load_sources(config, report)
        check_lengths(builder, sources, config)
        sources = builder.run_steps(sources, config, report)  # the declared steps (LLM calls) before the pure part
        pools = builder.build_pools(sources, config, report)
        if not any(p.queries for p in pools):
            lost = (f"; left out as unreadable: {', '.join(p for p, _ in report.lost_files)}"
                    if report.lost_files else "")
            raise UserError(f"{builder.name}: the sources gave no pool any query ({dict(report.skipped)}){lost}")
        lost_lines = what_was_lost(report, pools, config)
        pools = [p for p in pools if p.queries] or pools
        with temporary_output(final_dir, overwrite) as tmp_dir:
            _write_benchmark(builder, config, pools, report, tmp_dir, final_dir, quiet)
            for line in lost_lines:  # last, and also when quiet: what the build is missing
                print(line, file=sys.stderr)
        return final_dir

    def validate(self, root: Path, specs: dict[str, ConfigSpec], manifest: dict, builder: Builder,
                 file_problems: list, progress: bool = False) -> Validation:
        """Every pool's invariants, the builder's checks and the shortcut audit (``validate_tables``)."""
        result = validate_tables(root, specs, builder.name, progress)
        result.problems = file_problems + result.problems
        return result


BENCHMARK = BenchmarkPipeline()


def pipeline_of(builder: Builder | type[Builder]) -> Pipeline:
    """The pipeline of a builder's output kind: the one it names, else a benchmark of pools."""
    return builder.pipeline or BENCHMARK


def run_build(builder: Builder, config, output_root: Path, overwrite: bool = False, progress: bool = True,
              quiet: bool = False, skip_unreadable_files: bool = False) -> Path:
    """Build into ``output_root/<name>`` by the pipeline of the builder's output kind; ``quiet``:
    no progress bars and no summary table; ``skip_unreadable_files``: a source file that cannot be
    parsed is left out (and the summary says what that cost) instead of stopping the build."""
    return pipeline_of(builder).run(builder, config, output_root, overwrite=overwrite, progress=progress,
                                    quiet=quiet, skip_unreadable_files=skip_unreadable_files)


def why_not_current(builder: Builder, config, final_dir: Path) -> str | None:
    """None when ``final_dir`` holds exactly what this build would write again; else why not
    (the rule of the builder's output kind: ``Pipeline.why_not_current``)."""
    return pipeline_of(builder).why_not_current(builder, config, final_dir)


def _write_benchmark(builder: Builder, config, pools: list[Pool], report: BuildReport, tmp_dir: Path,
                     final_dir: Path, quiet: bool) -> None:
    """The tables, manifest and card of ``pools`` in ``tmp_dir``, validated, then moved to ``final_dir``."""
    progress = report.progress
    unmeasured = [pool for pool in pools if pool.name not in report.shortcuts]  # a builder may have measured some
    stats = [{**pool_statistics(p), "difficulty": p.difficulty} for p in pools]
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
        **card_context(builder, manifest, written.specs, sum(s["candidates"] + s["queries"] for s in stats), report),
        "pool_stats": stats, "shortcuts": report.shortcuts, "label_free_audit": validation.shortcuts,
        "audit_alpha": ALPHA, "audit_min_excess": MIN_EXCESS, "first_pool": pools[0].name,
        "modalities": sorted({p.modality for p in pools} | {p.query_modality for p in pools}),
        **builder.card_context(config, pools, report),
    }
    if not validation.problems:  # else nothing is kept, and the problems are what the user needs to read
        write_card(builder, context, tmp_dir)
    finish(summary_table(stats, report, validation, pools), written, validation, tmp_dir, final_dir, quiet,
           synthetic)
