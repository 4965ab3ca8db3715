"""Reports: results JSON, markdown tables in the layout of the paper's Tables 3, 4 and 12, PNG plots.

Every table cell is P@1 over all the queries of its subset (query-weighted: a pool of seven queries
weighs seven times a pool of one), says how many queries it rests on, and carries a bootstrap
interval over those queries from `MIN_QUERIES_FOR_INTERVAL` queries on. A model that was not run on
every pool of a cell's subset gets no number there, but a mark saying what it skipped; averages
over cells (Table 3's Avg, Table 4's mean) exist only where all their cells do.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from harness.report.throughput import TITLE as THROUGHPUT_TITLE, throughput_table
from mmlongembed.core.pools import LEXICAL
from harness.scoring.own_lengths import OWN_LENGTHS_TITLE, own_lengths_table
from harness.scoring.metrics import MAIN_METRIC, bootstrap_ci
from mmlongembed.checks.shortcuts import binomial_tail

TASK_SHORT = {"visual_grounding": "VG", "multi_source_reasoning": "MSR", "logical_summarization": "LS",
              "temporal_summarization": "TS"}
TASK_TITLES = {"visual_grounding": "Visual Grounding", "multi_source_reasoning": "Multi-Source Reasoning",
               "logical_summarization": "Logical Summarization", "temporal_summarization": "Temporal Summarization"}
TASK_ORDER = list(TASK_SHORT)
DIFFICULTIES = ("easy", "hard")
# Table 3's datasets per task, in the paper's column order, under the names the paper prints.
PAPER_DATASETS = {
    "multi_source_reasoning": (("mmdocrag", "MMDocRAG"), ("hotpotqa", "HotpotQA")),
    "logical_summarization": (("govreport", "GovReport"), ("mmlongbench", "MMLB")),
    "temporal_summarization": (("youkudc", "YoukuDC"), ("activitynet", "ActNet")),
}
# Visual Grounding's two columns: the needle grid by needle modality. MM-NIAH is not public; the
# image-needle grid stands in for it, and its header says so.
VG_COLUMNS = (("text", "NeedleBench"), ("image", "MM-NIAH*"))
VG_NOTE = ("NeedleBench: the text-needle grid; MM-NIAH*: the image-needle grid, a substitute for MM-NIAH (not "
           "public); each over all its backgrounds, lengths and depths")
AVG = "Avg"
MIN_QUERIES_FOR_INTERVAL = 10  # below it a bootstrap over queries says little; the cell prints n= alone
HEATMAP_METRICS = {"p@1": "P@1", "hit@5": "hit@5 (positive in the top 5)"}


def _value(row, metric=MAIN_METRIC) -> float:
    return row["metrics"][metric]["value"]


def fmt(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _length_name(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _task_order(task: str) -> int:
    return TASK_ORDER.index(task) if task in TASK_ORDER else 99


def _facts(entry: dict) -> dict:
    """A result row is its pool's facts; a skip carries them under `facts` (older results: none)."""
    return entry.get("facts") or entry


@dataclass(frozen=True)
class Column:
    """One table column: what it prints, the task it sits under, and which pools it holds."""

    name: str
    task: str
    keep: Callable[[dict], bool]


PAPER_LENGTHS = (8192, 16384, 32768)  # the real tasks' pool lengths (Table 12's columns)
PAPER_GRID_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)  # the needle grid's eight lengths
# Table 3's columns: Visual Grounding's two, then each paper dataset's Easy and Hard (14)
PAPER_COLUMN_COUNT = len(VG_COLUMNS) + len(DIFFICULTIES) * sum(len(pairs) for pairs in PAPER_DATASETS.values())
OTHER_TABLE3_NOTE = ("pools at lengths the paper does not use, or of datasets it does not have: each column is "
                     "headed with its lengths, and the Avg is over these columns alone, never comparable with the "
                     "paper's")


def paper_comparable(facts: dict) -> bool:
    """Whether a pool belongs in the paper's Table 3 columns: the needle grid at one of its eight
    lengths, or a paper dataset at 8K, 16K or 32K. A pool at other lengths (a demo or test build,
    `--lengths 4096 12000`) would fill the paper's column with another benchmark's figure."""
    length = int(facts.get("length") or 0)
    if grid_cell(facts) is not None:
        return length in PAPER_GRID_LENGTHS
    known = {(task, d) for task, pairs in PAPER_DATASETS.items() for d, _ in pairs}
    return (facts.get("task"), facts.get("dataset")) in known and length in PAPER_LENGTHS


def _entries(rows, skipped) -> list[dict]:
    """The facts of every pool a run met: scored, or skipped with its facts."""
    return [_facts(e) for e in [*rows, *skipped]]


def _pool_column(task, dataset, difficulty, name) -> Column:
    return Column(name, task, lambda f, key=(task, dataset, difficulty):
                  (f.get("task"), f.get("dataset"), f.get("difficulty")) == key)


def table3_columns(rows, skipped=(), paper: bool = True) -> list[Column]:
    """Paper Table 3's columns, in its order, those any pool of the run falls in: Visual Grounding
    (NeedleBench, MM-NIAH*), then per task its two datasets, Easy and Hard each, holding only the
    pools at the paper's lengths (``paper_comparable``). With ``paper=False``, the other pools'
    columns: the same columns at other lengths, each headed with its lengths ("GovReport Easy
    (4k, 12000)"), and datasets the paper does not have after their task's, under their own names."""
    facts = [f for f in _entries(rows, skipped) if paper_comparable(f) == paper]
    candidates = [Column(name, "visual_grounding",
                         lambda f, needle=needle: grid_cell(f) is not None and grid_cell(f)[0] == needle)
                  for needle, name in VG_COLUMNS]
    known = {(task, d) for task, pairs in PAPER_DATASETS.items() for d, _ in pairs}
    others = sorted({(f.get("task"), f.get("dataset")) for f in facts if f.get("difficulty") in DIFFICULTIES}
                    - known, key=lambda td: (_task_order(td[0]), td[1]))
    for task in sorted(set(PAPER_DATASETS) | {t for t, _ in others}, key=_task_order):
        datasets = list(PAPER_DATASETS.get(task, ())) + [(d, d) for t, d in others if t == task]
        for dataset, title in datasets:
            for difficulty in DIFFICULTIES:
                candidates.append(_pool_column(task, dataset, difficulty, f"{title} {difficulty.capitalize()}"))
    columns = []
    for column in candidates:
        held = [f for f in facts if column.keep(f)]
        if not held:
            continue
        if not paper:
            lengths = ", ".join(_length_name(n) for n in sorted({int(f.get("length") or 0) for f in held}))
            column = Column(f"{column.name} ({lengths})", column.task, column.keep)
        columns.append(Column(column.name, column.task,
                              lambda f, keep=column.keep: keep(f) and paper_comparable(f) == paper))
    return columns


def column_order(name: str, task: str | None) -> tuple:
    """Where a column sits among Table 3's: the paper's columns in its order, then other datasets'
    after their task's, Avg last."""
    if name.startswith(AVG):
        return (99, 99, name)
    base = name.split(" (")[0]  # an other-lengths column sits where its paper column would
    paper = [n for _, n in VG_COLUMNS] + [f"{title} {d.capitalize()}" for pairs in PAPER_DATASETS.values()
                                          for _, title in pairs for d in DIFFICULTIES]
    return (_task_order(task or ""), paper.index(base) if base in paper else len(paper), name)


def _models(rows, skipped) -> list[str]:
    return list(dict.fromkeys([r["model"] for r in rows] + [s["model"] for s in skipped if s["model"] != "*"]))


def column_cell(model: str, column: Column, rows, skipped=(), n_resamples: int = 1000, seed: int = 0) -> dict:
    """P@1 of `model` over every query of the column's pools, with how many queries it rests on.
    The column's pools are every pool of the run that falls in it (scored by some model, or
    skipped); where `model` lacks any, `p_at_1` is None and `skipped` says which and why."""
    mine = [r for r in rows if r["model"] == model and column.keep(r)]
    expected = {f["pool"] for f in _entries(rows, skipped) if column.keep(f)}
    scored = {r["pool"] for r in mine}
    missing = sorted(expected - scored)
    queries = sum(int(r.get("n_queries") or 0) for r in mine)
    cell = {"model": model, "column": column.name, "task": column.task, "p_at_1": None, "queries": queries, "ci95": None,
            "pools": len(scored), "expected_pools": len(expected)}
    if missing:
        mine_skipped = [s for s in skipped if s["model"] in (model, "*") and s["pool"] in expected]
        why = {s["pool"]: s["reason"] for s in mine_skipped}
        cell["skipped"] = {"pools": missing, "reasons": sorted({why.get(p, "not run") for p in missing})}
        unmeasured = sorted(s["pool"] for s in mine_skipped if s.get("not_measured") and s["pool"] in missing)
        if unmeasured:  # the model ran there and saw nothing to measure with: say so, not "skipped"
            cell["not_measured"] = {"pools": unmeasured,
                                    "reason": "; ".join(sorted({why[p] for p in unmeasured}))}
        return cell
    if not queries:
        return cell
    cell["chance"] = chance_of(mine)
    cell["tie"] = tie_note(sum(int(r.get("tied_positives") or 0) for r in mine),
                           sum(int(r.get("all_tied") or 0) for r in mine), queries)
    per_query = [r.get("per_query", {}).get(MAIN_METRIC) for r in mine]
    if all(v is not None for v in per_query):
        values = np.concatenate([np.asarray(v, dtype=np.float64) for v in per_query])
        cell["p_at_1"] = float(values.mean())
        if len(values) >= MIN_QUERIES_FOR_INTERVAL and not cell["tie"]:
            cell["ci95"] = list(bootstrap_ci(values, n_resamples, seed))
    else:  # rows without per-query values (hand-made, or older results): the query-weighted mean
        cell["p_at_1"] = sum(_value(r) * r["n_queries"] for r in mine) / queries
    return cell


def chance_of(rows) -> float | None:
    """P@1 by chance over the rows' queries: 1 / the pool's candidates, weighted by its queries
    (None where a row lacks its candidate count: older results)."""
    weights = [(int(r.get("n_queries") or 0), r.get("n_candidates")) for r in rows]
    queries = sum(n for n, _ in weights)
    if not queries or any(not c for n, c in weights if n):
        return None
    return sum(n / c for n, c in weights if n) / queries


CHANCE_ALPHA = 0.05


def at_chance(p_at_1: float | None, queries: int, chance: float | None) -> bool:
    """The figure cannot be told from guessing: a two-sided exact binomial test of its hits among
    ``queries`` against ``chance`` gives p >= CHANCE_ALPHA (not judged below
    MIN_QUERIES_FOR_INTERVAL queries, where no interval is printed either). Exact, not the
    bootstrap interval: 0 of 40 at chance 1/40 has the interval [0, 0], yet is as likely as not."""
    if p_at_1 is None or chance is None or queries < MIN_QUERIES_FOR_INTERVAL:
        return False
    hits = round(p_at_1 * queries)  # tie-aware P@1 counts a tie by expectation: the nearest whole hits
    above, below = binomial_tail(queries, chance, hits), 1.0 - binomial_tail(queries, chance, hits + 1)
    return min(1.0, 2 * min(above, below)) >= CHANCE_ALPHA


def chance_mark(p_at_1: float | None, queries: int, chance: float | None) -> str:
    """` (at chance: 4.0)` where ``at_chance``, else ""."""
    return f" (at chance: {fmt(chance)})" if at_chance(p_at_1, queries, chance) else ""


CHANCE_NOTE = ("`(at chance: c)`: the figure cannot be told from guessing, c = 1 / the pool's candidates (weighted by "
               f"queries; a two-sided exact binomial test against c gives p >= {CHANCE_ALPHA})")


TIE_EVERY_CANDIDATE = "tie: every candidate scored alike"
TIE_EVERY_POSITIVE = "tie: every query's positive scored alike with another candidate"


def tie_note(tied_positives: int, all_tied: int, queries: int) -> str | None:
    """Where every query of a cell (or pool) ties its positive, the tie rule decides its P@1, not the
    model: say so instead of drawing an interval (it would be zero-width, as if certain). None
    where some query is decided by the model."""
    if not queries or tied_positives < queries:
        return None
    return TIE_EVERY_CANDIDATE if all_tied >= queries else TIE_EVERY_POSITIVE


def cell_text(cell: dict) -> str:
    """`60.0 [45.2, 74.1] n=30`; `0.0 n=1` below MIN_QUERIES_FOR_INTERVAL queries (no interval);
    `2.3 (tie: every candidate scored alike) n=40` where every query tied (no interval);
    `– (skipped 2/6 pools: ...)` for a model that missed some of the column's pools; `n/m (not
    measured in 6/6 pools: ...)` where the model ran but received no content of the candidates."""
    if cell.get("not_measured") and len(cell["not_measured"]["pools"]) == len(cell["skipped"]["pools"]):
        n_missing = len(cell["not_measured"]["pools"])
        return f"n/m (not measured in {n_missing}/{cell['expected_pools']} pools: {cell['not_measured']['reason']})"
    if cell.get("skipped"):
        n_missing = len(cell["skipped"]["pools"])
        return f"– (skipped {n_missing}/{cell['expected_pools']} pools: {'; '.join(cell['skipped']['reasons'])})"
    if cell["p_at_1"] is None:
        return "–"
    if cell.get("tie"):
        return f"{fmt(cell['p_at_1'])} ({cell['tie']}) n={cell['queries']}"
    interval = f" [{fmt(cell['ci95'][0])}, {fmt(cell['ci95'][1])}]" if cell.get("ci95") else ""
    return f"{fmt(cell['p_at_1'])}{interval} n={cell['queries']}{chance_mark(cell['p_at_1'], cell['queries'], cell.get('chance'))}"


def average_cell(model: str, cells: list[dict], of: int | None = PAPER_COLUMN_COUNT) -> dict:
    """Table 3's Avg: the mean of the row's columns (each weighs the same, as in the paper), only
    where every column has a number; else None, and `leaves_out` names the columns it lacks.
    `of`: how many columns a whole row has (the paper's 14; None: the row's own, for the other
    lengths' table). A row over fewer is a partial Avg, `Avg (k/14 columns)`, never ranked with
    whole rows: its mean is over other tasks than theirs."""
    lacking = [c["column"] for c in cells if c["p_at_1"] is None]
    value = None if lacking or not cells else sum(c["p_at_1"] for c in cells) / len(cells)
    out = {"model": model, "column": AVG, "p_at_1": value, "queries": sum(c["queries"] for c in cells),
           "columns": len(cells), "of": len(cells) if of is None else of}
    if lacking:
        out["leaves_out"] = lacking
    return out


def is_partial(average: dict) -> bool:
    """An Avg over fewer columns than a whole row has (older results: never)."""
    return average.get("columns", 0) < average.get("of", 0)


def average_headers(entries: list[dict]) -> list[str]:
    """Table 3's Avg columns for these rows: `Avg` for whole rows, `Avg (k/14 columns)` for rows
    over fewer columns (one header where every row has the same k), both where rows differ."""
    partial = [e["average"] for e in entries if "average" in e and is_partial(e["average"])]
    headers = [AVG] if len(partial) < len(entries) else []
    if partial:
        counts = {(a["columns"], a["of"]) for a in partial}
        k, of = next(iter(counts)) if len(counts) == 1 else ("k", partial[0]["of"])
        headers.append(f"{AVG} ({k}/{of} columns)")
    return headers


def average_text(cell: dict) -> str:
    if cell["p_at_1"] is not None:
        return fmt(cell["p_at_1"]) + (f" ({cell['columns']}/{cell['of']})" if is_partial(cell) else "")
    return f"– (lacks {len(cell['leaves_out'])}/{cell['columns']} columns)" if cell.get("leaves_out") else "–"


def average_texts(cell: dict, headers: list[str]) -> list[str]:
    """The row's Avg under its own header (whole or partial), "" under the other."""
    own = 1 if is_partial(cell) and len(headers) > 1 else 0
    return [average_text(cell) if k == own else "" for k in range(len(headers))]


def table3_data(rows, skipped=(), n_resamples: int = 1000, seed: int = 0, paper: bool = True) -> list[dict]:
    """Per model: its Table 3 cells (`column_cell`), by column name, and their Avg (`average_cell`);
    ``paper=False``: the other lengths' table (``table3_columns``)."""
    columns = table3_columns(rows, skipped, paper)
    if not columns:
        return []
    out = []
    for model in _models(rows, skipped):
        cells = [column_cell(model, c, rows, skipped, n_resamples, seed) for c in columns]
        out.append({"model": model, "cells": {c["column"]: c for c in cells},
                    "average": average_cell(model, cells, PAPER_COLUMN_COUNT if paper else None)})
    return out


def table3_records(data: list[dict]) -> list[dict]:
    """results.json's `table3`: one record per model and column, Avg last, p_at_1 on 0..1."""
    return [cell for entry in data for cell in [*entry["cells"].values(), entry["average"]]]


def groups_line(columns: list[str], task_of: dict[str, str]) -> str:
    groups = defaultdict(list)
    for name in columns:
        groups[task_of[name]].append(name)
    return " · ".join(f"{TASK_TITLES.get(t, t)}: {', '.join(names)}" for t, names in groups.items())


def column_dataset(name: str) -> str | None:
    """The source a Table 3 column reads ("GovReport Easy" -> govreport; the Visual Grounding
    columns -> needle, the grid's builder), as a release names its components."""
    base = name.split(" (")[0]
    if base in [title for _, title in VG_COLUMNS]:
        return "needle"
    return next((d for pairs in PAPER_DATASETS.values() for d, title in pairs
                 if base in (f"{title} {x.capitalize()}" for x in DIFFICULTIES)), None)


def missing_text(entry: dict, column: str) -> str:
    """A column a row has no cell in: the release it scored left the source out (`excluded`, with
    why), or the model was not run there."""
    why = (entry.get("excluded") or {}).get(column_dataset(column) or "")
    return f"– (excluded from the release: {why})" if why else "– (not run)"


def table3_texts(entry: dict, columns: list[str], averages: list[str]) -> list[str]:
    """A Table 3 row's cells in the columns given, then its Avg under the `averages` headers
    (``average_headers``), as printed; a column the model has no cell in says why."""
    return ([cell_text(entry["cells"][c]) if c in entry["cells"] else missing_text(entry, c) for c in columns]
            + average_texts(entry["average"], averages))


def table3_markdown(entries: list[dict], columns: list[str], task_of: dict[str, str],
                    label: Callable[[dict], str] | None = None,
                    texts: Callable[[dict, list[str], list[str]], list[str]] = table3_texts,
                    averages: list[str] | None = None, rank: Callable[[dict], str] | None = None) -> str:
    """Rows as given (`entries` from table3_data or a leaderboard), columns in the order given.
    `label(entry)`: a Source column after the model's; `texts(entry, columns, averages)`: a row's
    cells and Avg as printed (a leaderboard prints published rows its own way); `averages`: the
    Avg headers (default: ``average_headers(entries)``); `rank(entry)`: a Rank column first."""
    averages = average_headers(entries) if averages is None else averages
    lead = (["Rank"] if rank else []) + ["Model"] + (["Source"] if label else [])
    lines = [f"Columns by task: {groups_line(columns, task_of)}.", "",
             "| " + " | ".join(lead + columns + averages) + " |",
             "|" + "---|" * len(lead) + "---:|" * (len(columns) + len(averages))]
    for entry in entries:
        first = ([rank(entry)] if rank else []) + [entry["model"]] + ([label(entry)] if label else [])
        lines.append("| " + " | ".join(first + texts(entry, columns, averages)) + " |")
    return "\n".join(lines)


def table3(rows, skipped=(), n_resamples: int = 1000, seed: int = 0, data: list[dict] | None = None,
           paper: bool = True) -> str:
    """Rows: models. Columns: paper Table 3's (see table3_columns), then Avg; ``paper=False``: the
    other lengths' table. ``data``: what ``table3_data`` gave for the same arguments (the
    bootstraps are not drawn again)."""
    data = table3_data(rows, skipped, n_resamples, seed, paper) if data is None else data
    columns = table3_columns(rows, skipped, paper)
    if not data or not columns:
        return ""
    return table3_markdown(data, [c.name for c in columns], {c.name: c.task for c in columns})


def table12(rows, skipped=(), n_resamples: int = 1000, seed: int = 0) -> str:
    """Paper Table 12: rows task x model, columns Easy at each length, then Hard at each length
    (P@1 over all the task's queries at that difficulty and length, its datasets together). A
    task's cells sit only under its own lengths: tasks built at other lengths than the paper's
    8K/16K/32K (demo or test builds) get a table of their own, headed with their lengths, so no
    column mixes lengths."""
    facts = [f for f in _entries(rows, skipped) if f.get("difficulty") in DIFFICULTIES]
    if not facts:
        return ""
    lengths_of: dict[tuple, list[str]] = defaultdict(list)
    for task in sorted({f["task"] for f in facts}, key=_task_order):
        lengths_of[tuple(sorted({int(f["length"]) for f in facts if f["task"] == task}))].append(task)
    blocks = []
    for lengths, tasks in sorted(lengths_of.items(), key=lambda item: item[0] != PAPER_LENGTHS):
        lines = [] if lengths == PAPER_LENGTHS else [
            f"At {', '.join(_length_name(n) for n in lengths)} tokens (the paper's Table 12: 8K, 16K, 32K): "
            f"{', '.join(TASK_TITLES.get(t, t) for t in tasks)}.", ""]
        blocks.append("\n".join(lines + _table12_block(tasks, lengths, rows, skipped, n_resamples, seed)))
    return "\n\n".join(blocks)


def _table12_block(tasks: list[str], lengths: tuple, rows, skipped, n_resamples: int, seed: int) -> list[str]:
    headers = [f"{difficulty.capitalize()} {_length_name(n).upper()}" for difficulty in DIFFICULTIES for n in lengths]
    lines = ["| Task | Model | " + " | ".join(headers) + " |", "|---|---|" + "---:|" * len(headers)]
    for task in tasks:
        columns = [Column(f"{d} {n}", task, lambda f, key=(task, d, n):
                          (f.get("task"), f.get("difficulty"), f.get("length")) == key)
                   for d in DIFFICULTIES for n in lengths]
        task_rows = [r for r in rows if r["task"] == task]
        task_skips = [s for s in skipped if _facts(s).get("task") == task]
        for model in _models(task_rows, task_skips):
            cells = [column_cell(model, c, rows, skipped, n_resamples, seed) for c in columns]
            lines.append(f"| {TASK_SHORT.get(task, task)} | {model} | " + " | ".join(cell_text(c) for c in cells) + " |")
    return lines


def grid_group(row) -> str:
    """A needle-grid pool's family: its name without the length and depth parts."""
    name = re.sub(r"-d\d+(\.\d+)?$", "", row["pool"])
    return re.sub(r"-\d+k?$", "", name)


def _needle_cut(rows) -> tuple[int, int]:
    """(queries whose positive's needle the model's middle truncation cut away, queries) over rows."""
    return sum(int(r.get("needle_truncated") or 0) for r in rows), sum(int(r.get("n_queries") or 0) for r in rows)


NEEDLE_CUT_NOTE = ("needle cut k/n: in k of the cell's n queries the positive's needle (its position as the audit "
                   "records it) lay in the middle that the model's truncation dropped, so the model never saw it")


def grid_table(rows, skipped=()) -> str:
    """P@1 per model, grid family, depth and length; `(at chance)` where a cell's P@1 cannot be told
    from guessing (``row_at_chance``), `n/m` where the model received no content of the pool."""
    unmeasured = _unmeasured_grid(skipped)
    grid = [r for r in rows if r.get("depth") is not None]
    if not grid and not unmeasured:
        return ""
    everything = grid + unmeasured
    lengths = sorted({r["length"] for r in everything})
    lines = ["| Model | Grid | Depth % | " + " | ".join(_length_name(n) for n in lengths) + " |",
             "|---|---|---:|" + "---:|" * len(lengths)]
    for model in dict.fromkeys(r["model"] for r in everything):
        for group in sorted({grid_group(r) for r in everything if r["model"] == model}):
            for depth in sorted({r["depth"] for r in everything if r["model"] == model and grid_group(r) == group}):
                texts = []
                for n in lengths:
                    def here(found):
                        return [r for r in found if r["model"] == model and grid_group(r) == group
                                and r["depth"] == depth and r["length"] == n]
                    cell = here(grid)
                    if not cell and here(unmeasured):
                        texts.append("n/m")
                        continue
                    cut, queries = _needle_cut(cell)
                    chance = len(cell) == 1 and row_at_chance(cell[0])
                    texts.append(fmt(_mean([_value(r) for r in cell])) + (f" (needle cut {cut}/{queries})" if cut else "")
                                 + (" (at chance)" if chance else ""))
                lines.append(f"| {model} | {group} | {depth:g} | " + " | ".join(texts) + " |")
    cut_pools = [r for r in grid if r.get("needle_truncated")]
    if cut_pools:
        per_model = defaultdict(list)
        for r in cut_pools:
            per_model[r["model"]].append(r)
        lines += ["", f"{NEEDLE_CUT_NOTE}. In all: " + "; ".join(
            f"{model} {_needle_cut(found)[0]} queries in {len(found)} pools" for model, found in per_model.items()) + "."]
    return "\n".join(lines)


BACKGROUNDS = ("text", "mixed", "image")  # Table 4's columns, in the paper's order
BACKGROUND_HEADERS = {"text": "Text", "mixed": "Mix", "image": "Image"}
NEEDLE_MODALITIES = ("text", "image")
_GRID_NAME = re.compile(r"^needle-(?P<needle>[a-z]+)-(?P<background>[a-z]+)-")


def grid_cell(row) -> tuple[str, str] | None:
    """(needle modality, background) of a Visual Grounding grid pool, from the pool's `extra` facts
    (the builder writes them), else from its name `needle-<needle>-<background>-<length>-d<depth>`;
    None where the pool is not one of the grid's (needle modality, background) cells."""
    if row.get("depth") is None or row.get("difficulty") == LEXICAL:  # the lexical tier is not Table 4's
        return None
    extra = row.get("extra") or {}
    needle, background = extra.get("needle_modality"), extra.get("background")
    if not (needle and background):
        match = _GRID_NAME.match(row["pool"])
        if not match:
            return None
        needle, background = match["needle"], match["background"]
    if needle not in NEEDLE_MODALITIES or background not in BACKGROUNDS:
        return None
    return needle, background


def _std(values):
    """Sample standard deviation (ddof=1) of the values present: the spread across backgrounds, as
    the paper prints it (Qwen3-VL-2B: 63.19 / 82.85 / 88.61 -> 13.33)."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def table4_data(rows, skipped=(), n_resamples: int = 1000, seed: int = 0) -> list[dict]:
    """Paper Table 4: per model and needle modality, P@1 per background over all the queries of its
    grid pools (every length and depth), and the mean and sample std (ddof=1) across the three
    backgrounds. A background where the model missed a pool has p@1 None (its `cell` says what it
    skipped), and then so are mean and std (they are over all three backgrounds or not at all).
    `n_pools` says how many pools each cell holds, `expected_pools` how many the run met."""
    facts = [f for f in _entries(rows, skipped) if grid_cell(f) is not None]
    if not facts:
        return []
    out = []
    for model in _models([r for r in rows if grid_cell(r)], [s for s in skipped if grid_cell(_facts(s))]):
        for needle in NEEDLE_MODALITIES:
            if not any(grid_cell(f)[0] == needle for f in facts):
                continue
            backgrounds = {}
            for background in BACKGROUNDS:
                column = Column(f"{needle} {background}", "visual_grounding",
                                lambda f, key=(needle, background): grid_cell(f) == key)
                cell = column_cell(model, column, rows, skipped, n_resamples, seed)
                backgrounds[background] = {"p@1": cell["p_at_1"], "n_pools": cell["pools"],
                                           "expected_pools": cell["expected_pools"], "queries": cell["queries"],
                                           "cell": cell}
            per_background = [b["p@1"] for b in backgrounds.values()]
            complete = all(v is not None for v in per_background)
            out.append({"model": model, "needle_modality": needle, "metric": MAIN_METRIC, "backgrounds": backgrounds,
                        "mean": _mean(per_background) if complete else None,
                        "std": _std(per_background) if complete else None})
    return out


def table4_texts(entry: dict) -> list[str]:
    """A Table 4 row as printed after the model (and source): its needle modality, its cell per
    background, and the mean ± std across them. A background without a `cell` (results written
    before cells existed) prints its P@1 alone."""
    cells = []
    for b in BACKGROUNDS:
        background = entry["backgrounds"][b]
        cells.append(cell_text(background["cell"]) if "cell" in background else fmt(background["p@1"]))
    spread = "–" if entry["mean"] is None else f"{fmt(entry['mean'])} ± {fmt(entry['std'])}"
    return [entry["needle_modality"].capitalize()] + cells + [spread]


def table4_markdown(entries: list[dict], label: Callable[[dict], str] | None = None,
                    texts: Callable[[dict], list[str]] = table4_texts) -> str:
    """Rows as given (`entries` from table4_data or a leaderboard); `label` and `texts` as for
    ``table3_markdown``."""
    lead = ["Model"] + (["Source"] if label else []) + ["Needle"]
    lines = ["| " + " | ".join(lead + [BACKGROUND_HEADERS[b] for b in BACKGROUNDS] + ["Mean ± std"]) + " |",
             "|" + "---|" * len(lead) + "---:|" * (len(BACKGROUNDS) + 1)]
    for entry in entries:
        first = [entry["model"]] + ([label(entry)] if label else [])
        lines.append("| " + " | ".join(first + texts(entry)) + " |")
    return "\n".join(lines)


def table4(rows, skipped=(), n_resamples: int = 1000, seed: int = 0, data: list[dict] | None = None) -> str:
    """Rows: model x needle modality. Columns: Text / Mix / Image background (P@1 over the cell's
    queries), Mean ± std across the three backgrounds. ``data``: what ``table4_data`` gave for
    the same arguments."""
    data = table4_data(rows, skipped, n_resamples, seed) if data is None else data
    return table4_markdown(data) if data else ""


def variant_table(rows) -> str:
    """From each pool's audit config (breakdowns only, never scoring): per negative variant, how
    often the positive scores above a negative of that variant made for its query (ties: half)."""
    lines = ["| Model | Pool | Variant | Role | Pairs | Positive beats it |", "|---|---|---|---|---:|---:|"]
    for r in rows:
        for variant, entry in sorted((r.get("breakdown") or {}).get("by_variant", {}).items()):
            lines.append(f"| {r['model']} | {r['pool']} | {variant} | {entry['role']} | {entry['pairs']} | "
                         f"{fmt(entry['positive_beats'])} |")
    return "\n".join(lines) if len(lines) > 2 else ""


CONFUSION_NOTE = ("per cell (dataset, difficulty, length, model), the share of queries whose top-1 is each kind of "
                  "candidate, x100: `positive` (the cell's P@1), a hard variant of the query's own positive "
                  "(the audit's `variant`), `easy_negative`, or `other_query` (a candidate made for another query "
                  "of the pool); candidates tied at the top score share a query equally. Query-weighted over the "
                  "cell's pools, 95% bootstrap interval over its queries as in Table 3; each row sums to 100")


def confusion_data(rows, n_resamples: int = 1000, seed: int = 0) -> list[dict]:
    """The variant-confusion table from each scored pool's `breakdown["top1"]`: one record per
    task, dataset, difficulty, length and model (easy and hard pools, whose queries have negatives
    of their own; not the needle grid), with per label the share of its queries whose top-1 is that label, query-weighted over
    the cell's pools, and its bootstrap interval (from MIN_QUERIES_FOR_INTERVAL queries)."""
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        breakdown = r.get("breakdown") or {}
        if r.get("difficulty") in DIFFICULTIES and breakdown.get("by_variant") and breakdown.get("top1"):
            cells[(r["task"], r["dataset"], r["difficulty"], int(r["length"]), r["model"])].append(r)
    out = []
    for (task, dataset, difficulty, length, model), pools in sorted(
            cells.items(), key=lambda kv: (_task_order(kv[0][0]), *kv[0][1:4])):
        labels = sorted({label for r in pools for label in r["breakdown"]["top1"]})
        queries = sum(int(r["n_queries"]) for r in pools)
        # where every query's positive tied, the tie rule made the shares: no interval, as in Table 3
        tie = tie_note(sum(int(r.get("tied_positives") or 0) for r in pools),
                       sum(int(r.get("all_tied") or 0) for r in pools), queries)
        shares = {}
        for label in labels:
            values = np.concatenate([np.asarray(r["breakdown"]["top1"].get(label) or [0.0] * r["n_queries"],
                                                dtype=np.float64) for r in pools])
            interval = len(values) >= MIN_QUERIES_FOR_INTERVAL and not tie
            shares[label] = {"share": float(values.mean()),
                             "ci95": list(bootstrap_ci(values, n_resamples, seed)) if interval else None}
        out.append({"model": model, "task": task, "dataset": dataset, "difficulty": difficulty, "length": length,
                    "pools": len(pools), "queries": queries, "tie": tie, "top1": shares})
    return out


def _share_text(entry: dict | None) -> str:
    if entry is None:
        return "–"
    interval = f" [{fmt(entry['ci95'][0])}, {fmt(entry['ci95'][1])}]" if entry.get("ci95") else ""
    return f"{fmt(entry['share'])}{interval}"


def _label_order(label: str) -> tuple:
    """`positive` first, the hard variants, then easy negatives (`easy_negative`, or their variant,
    which the builders name `other_...`: other_report, other_video) and other queries' candidates."""
    rank = {"positive": 0, "other_query": 3}.get(label, 2 if label == "easy_negative" or label.startswith("other_") else 1)
    return (rank, label)


def confusion_markdown(records: list[dict], label: Callable[[dict], str] | None = None) -> str:
    """One table per dataset (its variants as columns), rows difficulty x length x model, in the
    order given; `label(record)`: a Source column (the leaderboard's run)."""
    parts = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        mine = [r for r in records if r["dataset"] == dataset]
        labels = sorted({lab for r in mine for lab in r["top1"]}, key=_label_order)
        lead = ["Difficulty", "Length", "Model"] + (["Source"] if label else []) + ["n"]
        lines = [f"**{dataset}** ({TASK_TITLES.get(mine[0]['task'], mine[0]['task'])}): top-1 is ...", "",
                 "| " + " | ".join(lead + labels) + " |", "|" + "---|" * (len(lead) - 1) + "---:|" * (len(labels) + 1)]
        for r in mine:
            first = [r["difficulty"], _length_name(r["length"]), r["model"]] + ([label(r)] if label else [])
            queries = f"{r['queries']} ({r['tie']})" if r.get("tie") else str(r["queries"])
            lines.append("| " + " | ".join(first + [queries] + [_share_text(r["top1"].get(lab))
                                                                            for lab in labels]) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def pool_p1(r) -> str:
    """A pool's P@1 with its bootstrap interval, `n=` alone below MIN_QUERIES_FOR_INTERVAL queries, or
    what tied where every query did."""
    p1 = r["metrics"]["p@1"]
    tie = tie_note(int(r.get("tied_positives") or 0), int(r.get("all_tied") or 0), r["n_queries"])
    if tie:
        return f"{fmt(p1['value'])} ({tie})"
    if r["n_queries"] < MIN_QUERIES_FOR_INTERVAL:
        return f"{fmt(p1['value'])} n={r['n_queries']}"
    lo, hi = p1["ci95"]
    return f"{fmt(p1['value'])} [{fmt(lo)}, {fmt(hi)}]{chance_mark(p1['value'], r['n_queries'], chance_of([r]))}"


def _hit_k(r) -> str:
    hit = r["metrics"].get("hit@k")
    return "–" if hit is None else f"{fmt(hit['value'])} (k={hit['k']})"


HIT_K_NOTE = ("hit@k: the positive in the top k, k = 5, or the pool size - 1 where the pool has five candidates or "
              "fewer (there P@5 is 1/5 whatever the model does, so the table shows no P@5; results.json keeps it)")


def pool_table(rows) -> str:
    lines = ["| Model | Pool | Queries | Candidates | P@1 [95% CI] | hit@k | nDCG@10 | MRR | Truncated q/c | Tied positives |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        m = r["metrics"]
        lines.append(
            f"| {r['model']} | {r['pool']} | {r['n_queries']} | {r['n_candidates']} | {pool_p1(r)} | {_hit_k(r)} | "
            f"{fmt(m['ndcg@10']['value'])} | {fmt(m['mrr']['value'])} | "
            f"{r['truncated']['queries']}/{r['truncated']['candidates']} | {r.get('tied_positives', 0)} |")
    return "\n".join(lines)


def readout_table(rows) -> str:
    """Rows of generative models (harness.models.boundary): what their evidence looked like, per pool."""
    rows = [r for r in rows if r.get("readout")]
    if not rows:
        return ""
    lines = ["| Model | Pool | Format valid | Fallbacks per token | Mean generated tokens |", "|---|---|---:|---|---:|"]
    for r in rows:
        o = r["readout"]
        fallbacks = ", ".join(f"{t} {n}" for t, n in o["fallbacks"].items())
        lines.append(f"| {r['model']} | {r['pool']} | {o['format_valid']}/{o['inputs']} | {fallbacks} | "
                     f"{o['mean_generated_tokens']} |")
    return "\n".join(lines)


def subset_note(settings: dict) -> list[str]:
    """The lines that mark a `--max-queries` run (none for a full run)."""
    n = settings.get("max_queries")
    if not n:
        return []
    return [f"**SUBSET:** at most {n} queries per pool (`--max-queries {n}`, a seeded sample, the same for every "
            "model), every candidate ranked: a quick look, not comparable with full runs or the paper's figures.", ""]


def markdown(report: dict, table3_cells: list[dict] | None = None, table4_cells: list[dict] | None = None,
             tier_section: tuple[str, str] = ("", "")) -> str:
    """The report's tables; ``table3_cells``, ``table4_cells``: what ``table3_data`` and
    ``table4_data`` gave for this report, when the caller has them (drawn once, not again);
    ``tier_section``: (title, table) of the lexical tier (``harness.report.tiers``, which builds
    on this module and so is drawn by the caller)."""
    rows, skipped = report["results"], report["skipped"]
    settings = report.get("settings") or {}
    stats = {"n_resamples": settings.get("bootstrap", 1000), "seed": settings.get("seed", 0)}
    parts = [f"# Scores on {report['dataset']['ref']}", "", *subset_note(settings),
             "P@1 x 100 over all the queries of each cell's pools (query-weighted), `n=` the queries it rests on, "
             f"in brackets a 95% bootstrap interval over those queries (none below {MIN_QUERIES_FOR_INTERVAL} "
             "queries). A model that was not run on every pool of a cell gets no number there but says what it "
             f"skipped; Avg is over every column or not at all, and over fewer than the paper's {PAPER_COLUMN_COUNT} "
             f"it is headed `Avg (k/{PAPER_COLUMN_COUNT} columns)`: not comparable with the paper's Avg. A model that received no content of a pool's "
             "candidates (BM25 on candidates that are images alone), or none of what the query asks about (BM25 on an "
             "image needle), is not measured there: `n/m` and the reason, "
             f"no number. {CHANCE_NOTE}. Candidates that score exactly as much as the "
             "positive (e.g. inputs identical after middle truncation) count by expectation over their possible "
             "orders: a model that cannot tell them apart gets chance; where every query of a cell tied, the cell "
             "says so (`tie: ...`) instead of an interval.", ""]
    for title, body in ((f"Table 3 layout: by task and dataset ({VG_NOTE}; Avg over every column)",
                         table3(rows, skipped, **stats, data=table3_cells)),
                        (f"Table 3 layout at other lengths ({OTHER_TABLE3_NOTE})",
                         table3(rows, skipped, **stats, paper=False)),
                        ("Table 12 layout: by task and length (the task's datasets together)",
                         table12(rows, skipped, **stats)),
                        ("Table 4 layout: Visual Grounding by needle modality and background "
                         "(P@1 over every length and depth; mean ± sample standard deviation (n-1) "
                         "across the three backgrounds, as the paper prints it)",
                         table4(rows, skipped, **stats, data=table4_cells)),
                        tier_section,
                        ("Per variant: how often the positive beats each kind of negative", variant_table(rows)),
                        (f"Variant confusion: which candidate each model puts first ({CONFUSION_NOTE})",
                         confusion_markdown(report.get("variant_confusion") or confusion_data(rows, **stats))),
                        ("Needle grid (P@1 by depth and length; `(at chance)`: not told from guessing, as in the "
                         "tables above; `n/m`: no content received)", grid_table(rows, skipped)),
                        (f"Per pool ({HIT_K_NOTE})", pool_table(rows) if rows else ""),
                        ("Generative readout (format validity, fallbacks to the last generated token, mean "
                         "generated length)", readout_table(rows)),
                        (OWN_LENGTHS_TITLE, own_lengths_table(rows)),
                        (THROUGHPUT_TITLE, throughput_table(rows))):
        if body:
            parts += [f"## {title}", "", body, ""]
    if skipped:
        parts += ["## Skipped or not measured", "", "| Model | Pool | Reason | Failure |", "|---|---|---|---|"]
        parts += [f"| {s['model']} | {s['pool']} | {s['reason']} | {'yes' if s['counts_as_failure'] else 'no'} |"
                  for s in skipped]
        parts.append("")
    return "\n".join(parts)


def finite_json(value):
    """``value`` with every NaN or infinity as null: JSON has no NaN, and the bare `NaN` Python
    writes is refused by strict readers (JavaScript's JSON.parse, jq)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_json(report: dict, path: Path) -> None:
    path.write_text(json.dumps(finite_json(report), indent=2, ensure_ascii=False, allow_nan=False) + "\n",
                    encoding="utf-8")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


DIFFICULTY_STYLES = {"easy": "-", "hard": "--"}
DATASET_MARKERS = "osD^vP*X"


def by_length_figure(rows):
    """Paper Figure 4: P@1 (x100) against context length, one panel per task; colour: model, marker:
    dataset, line: Easy solid, Hard dashed. Each point says how many queries it rests on (`n=`),
    and a point on fewer than MIN_QUERIES_FOR_INTERVAL queries is hollow; a grey dotted line per
    dataset and difficulty is chance there (1 / the pool's candidates), so a fall to chance reads
    as one. One legend for all panels, outside them (never over a line), with an entry for each
    colour, marker, line style, hollow point and the chance line. None where no pool has a
    difficulty."""
    rows = [r for r in rows if r["difficulty"] in DIFFICULTIES]
    if not rows:
        return None
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    tasks = sorted({r["task"] for r in rows}, key=_task_order)
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks) + 2.2, 3.6), squeeze=False)
    models = list(dict.fromkeys(r["model"] for r in rows))
    datasets = sorted({r["dataset"] for r in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {m: colours[i % len(colours)] for i, m in enumerate(models)}
    marker = {d: DATASET_MARKERS[i % len(DATASET_MARKERS)] for i, d in enumerate(datasets)}
    for ax, task in zip(axes[0], tasks):
        mine = [r for r in rows if r["task"] == task]
        _draw_chance(ax, mine)
        for k, model in enumerate(models):
            for dataset in sorted({r["dataset"] for r in mine}):
                for difficulty, style in DIFFICULTY_STYLES.items():
                    series = sorted((r for r in mine if r["model"] == model and r["dataset"] == dataset
                                     and r["difficulty"] == difficulty), key=lambda r: r["length"])
                    if series:
                        _draw_series(ax, series, style, marker[dataset], colour[model], k)
        ax.set_xscale("log", base=2)
        lengths = sorted({r["length"] for r in mine})
        ax.set_xticks(lengths, [_length_name(n) for n in lengths])
        ax.xaxis.set_minor_locator(NullLocator())  # the log axis's minor ticks would add labels between ours
        ax.set_xlim(lengths[0] / 1.4, lengths[-1] * 1.4)
        ax.set_ylim(0, 102)
        ax.set_title(TASK_TITLES.get(task, task))
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("P@1 (x100)")
        ax.grid(alpha=0.3)
    handles = ([Line2D([], [], color=colour[m], lw=2, label=m) for m in models]
               + [Line2D([], [], color="grey", marker=marker[d], ls="none", label=d) for d in datasets]
               + [Line2D([], [], color="black", ls=style, label=difficulty.capitalize())
                  for difficulty, style in DIFFICULTY_STYLES.items()]
               + [Line2D([], [], color="black", marker="o", markerfacecolor="none", ls="none",
                         label=f"fewer than {MIN_QUERIES_FOR_INTERVAL} queries"),
                  Line2D([], [], **CHANCE_STYLE, label="chance (1 / candidates)")])
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / fig.get_figwidth(), 1))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1 - 1.95 / fig.get_figwidth(), 0.5),
               fontsize=8, frameon=False)
    return fig


CHANCE_STYLE = {"color": "grey", "ls": ":", "lw": 1.2}


def _draw_chance(ax, rows) -> None:
    """Chance per pool (100 / its candidates), one dotted line per dataset and difficulty, each
    point labelled with its figure."""
    for dataset, difficulty in sorted({(r["dataset"], r["difficulty"]) for r in rows}):
        chance = sorted({(r["length"], 100.0 / r["n_candidates"]) for r in rows
                         if r["dataset"] == dataset and r["difficulty"] == difficulty and r.get("n_candidates")})
        if chance:
            ax.plot([c[0] for c in chance], [c[1] for c in chance], **CHANCE_STYLE, marker="_", zorder=1,
                    gid=f"chance {dataset} {difficulty}")
            for length, value in chance:  # each pool's chance, in the tables' figures
                ax.annotate(f"chance {value:.1f}", (length, value), xytext=(3, -8), textcoords="offset points",
                            fontsize=5.5, color=CHANCE_STYLE["color"], gid=f"chance label {dataset} {difficulty} {length}")


def _draw_series(ax, series: list[dict], style: str, marker: str, colour: str, model_index: int) -> None:
    """One model's line over one dataset and difficulty: its points filled, or hollow below
    MIN_QUERIES_FOR_INTERVAL queries, each labelled with its n."""
    xs, ys = [r["length"] for r in series], [100 * _value(r) for r in series]
    few = [r["n_queries"] < MIN_QUERIES_FOR_INTERVAL for r in series]
    ax.plot(xs, ys, style, color=colour, marker=marker, markevery=[i for i, f in enumerate(few) if not f],
            zorder=2, gid=f"series {series[0]['model']} {series[0]['dataset']} {series[0]['difficulty']}")
    for x, y, r, hollow in zip(xs, ys, series, few):
        if hollow:
            ax.plot([x], [y], marker=marker, ls="none", color=colour, markerfacecolor="white", zorder=3,
                    gid=f"few {r['pool']} {r['model']}")
        ax.annotate(f"n={r['n_queries']}", (x, y), xytext=(4, 3 + 7 * model_index), textcoords="offset points",
                    fontsize=6, color=colour)


def plot_by_length(rows, path: Path) -> bool:
    fig = by_length_figure(rows)
    if fig is None:
        return False
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return True


def row_at_chance(row, metric: str = MAIN_METRIC) -> bool:
    """One pool's P@1 ``at_chance``; never where every query tied (the tie rule, not the model,
    decides it there: the cell says so) and only for P@1 (hit@5's chance is another figure)."""
    if metric != MAIN_METRIC or tie_note(int(row.get("tied_positives") or 0), int(row.get("all_tied") or 0),
                                         int(row.get("n_queries") or 0)):
        return False
    return at_chance(_value(row), int(row.get("n_queries") or 0), chance_of([row]))


def _unmeasured_grid(skipped) -> list[dict]:
    """The grid pools a model ran on but received no content of (``NotMeasured``), as rows
    without metrics: the heatmap marks them `n/m` instead of leaving a blank."""
    return [{**s["facts"], "model": s["model"], "not_measured": s["reason"]} for s in skipped
            if s.get("not_measured") and (s.get("facts") or {}).get("depth") is not None]


def depth_heatmap_figures(rows, metric: str = MAIN_METRIC, skipped=()):
    """Paper Figure 3: per model and grid family, a depth x length heatmap of `metric` (P@1 as in
    the paper; hit@5 on request), cells and colour bar both x100. A cell says `at chance` (dotted
    frame) where its P@1 cannot be told from guessing (``row_at_chance``), `n/m` (grey, hatched) where the model
    received no content of the pool (``skipped``'s not-measured pools), and `needle cut k/n` where
    the model's truncation dropped the needle. Yields (model, group, figure)."""
    grid = [r for r in rows if r.get("depth") is not None] + _unmeasured_grid(skipped)
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    label = HEATMAP_METRICS[metric]
    for model in dict.fromkeys(r["model"] for r in grid):
        for group in sorted({grid_group(r) for r in grid if r["model"] == model}):
            mine = [r for r in grid if r["model"] == model and grid_group(r) == group]
            if all("not_measured" in r for r in mine):
                continue  # nothing measured: the tables say `n/m`, a grey figure would add nothing
            lengths = sorted({r["length"] for r in mine})
            depths = sorted({r["depth"] for r in mine})
            at = {(d, n): [r for r in mine if r["depth"] == d and r["length"] == n] for d in depths for n in lengths}
            measured = {key: [r for r in found if "not_measured" not in r] for key, found in at.items()}
            values = [[_mean([_value(r, metric) for r in measured[d, n]]) for n in lengths] for d in depths]
            matrix = [[float("nan") if v is None else 100 * v for v in row] for row in values]
            fig, ax = plt.subplots(figsize=(1.2 * len(lengths) + 2.5, 0.6 * len(depths) + 1.8))
            image = ax.imshow(matrix, vmin=0, vmax=100, cmap="RdYlGn", aspect="auto")
            ax.set_xticks(range(len(lengths)), [_length_name(n) for n in lengths])
            ax.set_yticks(range(len(depths)), [f"{d:g}%" for d in depths])
            marks = set()
            for i, depth in enumerate(depths):
                for j, length in enumerate(lengths):
                    found, where = measured[depth, length], f"{depth:g} {length}"
                    if not found and at[depth, length]:  # the model ran there and saw nothing of the pool
                        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="lightgrey", hatch="..",
                                               edgecolor="grey", lw=0, gid=f"not measured {where}"))
                        ax.text(j, i, "n/m", ha="center", va="center", fontsize=8, zorder=3)
                        marks.add("n/m: no content received")
                        continue
                    cut, queries = _needle_cut(found)
                    chance = len(found) == 1 and row_at_chance(found[0], metric)
                    if cut:  # the model never saw the needle there: the cell measures the truncation
                        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="dimgrey",
                                               lw=1.2, gid=f"needle cut {where}"))
                        marks.add("hatched: needle cut by truncation")
                    if chance:
                        ax.add_patch(Rectangle((j - 0.46, i - 0.46), 0.92, 0.92, fill=False, ls=":", lw=1.5,
                                               edgecolor="black", gid=f"at chance {where}"))
                        marks.add("dotted: at chance (1 / candidates)")
                    note = (f"\nneedle cut {cut}/{queries}" if cut else "") + ("\nat chance" if chance else "")
                    ax.text(j, i, fmt(values[i][j]) + note, ha="center", va="center",
                            fontsize=7 if note else 8, zorder=3,
                            bbox={"facecolor": "white", "alpha": 0.85, "lw": 0} if note else None)
            ax.set_xlabel("context length (tokens)")
            ax.set_ylabel("needle depth (% of the document)")
            cell = grid_cell(mine[0])
            what = f"{cell[0]} needle, {BACKGROUND_HEADERS[cell[1]].lower()} background" if cell else group
            ax.set_title(f"{model}: {what}\n{label}, x100" + "".join(f"; {m}" for m in sorted(marks)), fontsize=9)
            fig.colorbar(image, ax=ax, label=f"{label} (x100)")
            fig.tight_layout()
            yield model, group, fig


def plot_depth_heatmaps(rows, directory: Path, metric: str = MAIN_METRIC, skipped=()) -> list[Path]:
    written = []
    for model, group, fig in depth_heatmap_figures(rows, metric, skipped):
        path = directory / f"heatmap_{file_slug(model)}_{file_slug(group)}.png"
        fig.savefig(path, dpi=120)
        _pyplot().close(fig)
        written.append(path)
    return written


def file_slug(text: str) -> str:
    """``text`` as a file name's part: letters, digits, dots, dashes and underscores, 80 at most."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]
