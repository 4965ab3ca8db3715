"""`mmle leaderboard RESULTS...`: runs of several models (each `mmle score`'s results.json) merged
into one Table 3 and one Table 4, models as rows sorted by Avg, optionally beside the paper's
published rows (`--reference paper`: every row of its Tables 3, 11 and 12 and its models, Tables 2
and 5, shipped as package data, `harness/report/paper_results.json`, and labelled as published numbers).

Cells come from each run's `table3` records as they are (query-weighted P@1, queries, interval,
skip marks), so nothing is averaged twice; a run written before those records existed is tabled
again from its per-pool results. Where two runs hold one model's cell, the full run is taken over a
`--max-queries` one, then the newest; the summary line names each run left out.
"""

from __future__ import annotations

import argparse
import itertools
import json
from importlib import resources
from pathlib import Path

import numpy as np

from harness.report import paired
from harness.report import tables as report
from harness.models.diagnostics import is_diagnostic
from harness.report.training_overlap import OVERLAP_MARK, OVERLAP_NOTE, trained_on
from mmlongembed.core.errors import UserError, report_error

REFERENCES = {"paper": "paper_results.json"}
RANK_NOTE = ("Rank: the ranks a row can take given the paired differences of its Avg (below): 1 + the rows "
             "significantly above it, to the rows not significantly below it; rows whose difference is not "
             "significant share ranks. Published rows have no per-query data: references, outside the ranking.")
DIAGNOSTICS_NOTE = ("What a model that reads nothing (random: chance), only length (length: the longest candidate "
                    "first), not the images (text-only:) or not the frame order (shuffled-frames:) scores on each "
                    "column; a model's lead over these rows is what it reads.")
OURS = "ours"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results.json of `mmle score` runs, the folders that hold them, or a folder of runs "
                             "(results/<dataset>: each run in it)")
    parser.add_argument("--reference", choices=sorted(REFERENCES), default=None,
                        help="add the paper's published rows, labelled as published numbers, not ours: all of "
                             "its Table 3 (11 models), Table 11 (Table 4's Visual Grounding by background, all 10 "
                             "models), Table 12 (by task, difficulty and length) and its models (Tables 2 and 5)")
    parser.add_argument("--pairs", action="store_true",
                        help="print the pairwise table per column too: for every two models scored on the same "
                             "queries, the P@1 difference of each column with its paired bootstrap interval and "
                             "Holm-corrected p (the Avg's pairs are always printed)")
    parser.add_argument("--output", default=None, help="also write the tables to this markdown file")


def run(args: argparse.Namespace) -> int:
    try:
        text = leaderboard(load_runs(args.results), reference(args.reference) if args.reference else None,
                           pairs=args.pairs)
    except UserError as exc:
        return report_error(exc)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


def load_runs(paths: list[str | Path]) -> list[dict]:
    """Each path's run; a folder of runs (`results/<dataset>`, where `mmle score` puts each run in
    a folder of its own) gives every run in it, oldest first."""
    runs = []
    for path in map(Path, paths):
        # a run being written lives in a hidden temporary sibling until it is complete: not a run yet
        inside = (sorted(p.parent for p in path.glob("*/results.json") if not p.parent.name.startswith("."))
                  if path.is_dir() else [])
        if inside and not (path / "results.json").is_file():
            runs += [load_run(p) for p in inside]
        else:
            runs.append(load_run(path))
    once = {str(Path(run["_path"]).resolve()): run for run in runs}  # a run given twice (folder, file) counts once
    return list(once.values())


def load_run(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such results file (give `mmle score`'s results.json or its directory)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable results.json ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UserError(f"{path}: not an `mmle score` results.json (no 'results' list)")
    data["_path"] = str(path)
    return data


def reference(name: str) -> dict:
    return json.loads(resources.files("harness.report").joinpath(REFERENCES[name]).read_text(encoding="utf-8"))


OTHER_LENGTHS = "table3_other_lengths"  # results.json's records of the other lengths' Table 3


def _table3_records(run: dict, paper: bool = True) -> list[dict]:
    if OTHER_LENGTHS not in run and run["results"]:
        # older results (their Table 3 may mix other lengths into the paper's columns): tabled again, once
        for key, paper_set in (("table3", True), (OTHER_LENGTHS, False)):
            run[key] = report.table3_records(report.table3_data(run["results"], run.get("skipped", []),
                                                                paper=paper_set))
    records = run.get("table3" if paper else OTHER_LENGTHS) or []
    return [r for r in records if r["column"] != report.AVG]


def _preference(run: dict) -> tuple:
    """Which of two runs holding one model's cell is taken: a full run over a SUBSET, then the newest."""
    return (run["_path"] not in _subset_paths([run]), run.get("created") or "", run["_path"])


def _merge(runs: list[dict], records_of, key) -> dict:
    """{key: (record, run path)}; a key two runs both have comes from the preferred run (``_preference``)."""
    merged: dict = {}
    for run in sorted(runs, key=_preference):
        for record in records_of(run):
            merged[key(record)] = (record, run["_path"])
    return merged


def left_out(runs: list[dict]) -> list[str]:
    """"<run> (model: <kept run> taken)" for each model whose cells another run of it replaced."""
    def models(run):
        return {r["model"] for r in [*run["results"], *run.get("skipped", [])]} - {"*"}

    kept: dict[str, str] = {}
    for run in sorted(runs, key=_preference):
        kept.update(dict.fromkeys(models(run), run["_path"]))
    notes = []
    for run in runs:
        replaced = sorted(m for m in models(run) if kept[m] != run["_path"])
        notes += [f"{run['_path']} ({model}: {kept[model]} taken)" for model in replaced]
    return notes


def _sort(entries: list[dict]) -> list[dict]:
    """Whole rows by Avg, best first; rows over fewer columns (a partial Avg) after them, by how
    many columns they have, then their Avg; rows without one last, by name."""
    def key(entry):
        average = entry["average"]
        return (report.is_partial(average), average["p_at_1"] is None, -average.get("columns", 0),
                -(average["p_at_1"] or 0), entry["model"])

    return sorted(entries, key=key)


def table3_entries(runs: list[dict], ref: dict | None = None,
                   paper: bool = True) -> tuple[list[dict], list[str], dict[str, str]]:
    """The merged Table 3: entries (ours and, with `ref`, the published rows), the columns in the
    paper's order, and each column's task. Our Avg is over the columns the model was run on: the
    paper's Avg where those are its 14, else a partial `Avg (k/14 columns)` ranked after the whole
    rows; a published row's Avg is the paper's, where quoted. ``paper=False``: the other lengths'
    table (no published rows; a row's Avg is partial where it lacks some of the table's columns)."""
    merged = _merge(runs, lambda run: _table3_records(run, paper), lambda r: (r["model"], r["column"]))
    subsets = _subset_paths(runs)
    task_of = {r["column"]: r.get("task") for r, _ in merged.values()}
    ours = sorted(task_of, key=lambda c: report.column_order(c, task_of[c]))
    models = list(dict.fromkeys(model for model, _ in merged))
    entries = []
    for model in models:
        cells = {c: merged[model, c][0] for c in ours if (model, c) in merged}
        average = report.average_cell(model, list(cells.values()), report.PAPER_COLUMN_COUNT if paper else len(ours))
        holding = {path for (m, _), (_, path) in merged.items() if m == model}
        entries.append({"model": model, "source": OURS, "cells": cells, "average": average,
                        "subset": any(merged[model, c][1] in subsets for c in cells),
                        "excluded": {component: why for run in runs if run["_path"] in holding
                                     for dataset in run.get("datasets") or []
                                     for component, why in (dataset.get("absent") or {}).items()}})
    if ref and paper:
        published = {}
        renamed = ref.get("our_column", {})  # the paper's column -> ours where ours stands in for it
        for r in ref["table3"]:
            column = renamed.get(r["column"], r["column"])
            if column != report.AVG:
                task_of.setdefault(column, r.get("task"))
            published.setdefault(r["model"], {})[column] = {**r, "column": column}
        for model, cells in published.items():
            avg = cells.pop(report.AVG, None)
            entries.append({"model": model, "source": ref["label"], "cells": cells,
                            "average": {"published": avg["p_at_1"]} if avg else {"p_at_1": None}})
    columns = sorted(task_of, key=lambda c: report.column_order(c, task_of[c]))
    return _sort([e for e in entries if e["source"] == OURS]) + [e for e in entries if e["source"] != OURS], columns, task_of


def _published(value) -> str:
    return "n/q" if value is None else f"{value:.2f}"


def training_data_of(runs: list[dict]) -> dict[str, list[str]]:
    """{model spec: its declared training data} as the runs recorded them (older runs: none)."""
    return {m["spec"]: m.get("training_data") or [] for run in runs for m in run.get("models") or []
            if isinstance(m, dict) and "spec" in m}


def _table3_texts(entry: dict, columns: list[str], averages: list[str],
                  trained: dict[str, list[str]] | None = None) -> list[str]:
    if entry["source"] == OURS:
        texts = report.table3_texts(entry, columns, averages)
        declared = (trained or {}).get(entry["model"], [])
        return [f"{text} {OVERLAP_MARK}" if c in entry["cells"] and trained_on(c, declared) else text
                for c, text in zip(columns, texts)] + texts[len(columns):]
    return ([_published(entry["cells"].get(c, {}).get("p_at_1")) for c in columns]
            + [_published(entry["average"].get("published"))] + [""] * (len(averages) - 1))


def _subset_paths(runs: list[dict]) -> set[str]:
    """The runs that scored a sample of each pool's queries (`mmle score --max-queries`)."""
    return {run["_path"] for run in runs if (run.get("settings") or {}).get("max_queries")}


def _source(entry: dict) -> str:
    return f"{entry['source']}, SUBSET" if entry.get("subset") else entry["source"]


def _in_block(entry: dict, diagnostics: bool) -> bool:
    """Diagnostic rows (random, length, text-only:, shuffled-frames:) go in their own block;
    published rows go with the models."""
    return (entry["source"] == OURS and is_diagnostic(entry["model"])) == diagnostics


def differences(runs: list[dict], paper: bool = True,
                per_column: bool = False) -> tuple[list[paired.Difference], list[str], list[str]]:
    """Every pair of our models on the same queries (from the runs' predictions), pairs in Table
    3's order (a above b): on the Avg of the columns every model has a number in (all of the
    table's where each row is whole; the shared ones where rows lack some: a model that takes no
    images still ranks against one that does, on what both read) and, with ``per_column``, on each
    column. Also: the Avg's columns, and the table's."""
    entries, columns, _ = table3_entries(runs, None, paper)
    outcomes = paired.merge_outcomes([paired.run_outcomes(run, paper) for run in sorted(runs, key=_preference)])
    compared = [e for e in entries if outcomes.get(e["model"])]
    models = [e["model"] for e in compared]
    # a column counts where every model has its number (a cell it skipped in part has none)
    shared = [c for c in columns if all(e["cells"].get(c, {}).get("p_at_1") is not None and outcomes[e["model"]].get(c)
                                        for e in compared)]
    # pairs read "higher minus lower" on the Avg compared (rows lacking some columns sort after by Avg)
    models.sort(key=lambda m: -sum(outcomes[m][c] and np.mean(list(outcomes[m][c].values())) for c in shared))
    found = paired.compare(outcomes, models, columns, per_column=per_column, average_over=shared)
    return found, shared, columns


def _ranked(entries: list[dict], found: list[paired.Difference]) -> dict[str, str]:
    """{model: rank range} for our rows compared on the Avg's columns (``differences``), only where
    every two of them were; {} otherwise."""
    compared = {frozenset((d.a, d.b)) for d in found if d.column == report.AVG}
    group = [e["model"] for e in entries if e["source"] == OURS and any(e["model"] in pair for pair in compared)]
    if len(group) < 2 or any(frozenset(pair) not in compared for pair in itertools.combinations(group, 2)):
        return {}
    return {m: paired.rank_text(span) for m, span in paired.rank_ranges(group, found).items()}


def table3(runs: list[dict], ref: dict | None = None, diagnostics: bool = False, paper: bool = True,
           found: tuple | None = None) -> str:
    """The models' Table 3 (with `ref`, beside the published rows), or with `diagnostics` the
    diagnostic rows alone, over the same columns; ``paper=False``: the other lengths' table.
    With ``found`` (``differences``), a Rank column: rank ranges from the paired Avg differences."""
    found, shared, table_columns = found or ([], [], [])
    entries, columns, task_of = table3_entries(runs, ref, paper)
    entries = [e for e in entries if _in_block(e, diagnostics)]
    if not columns or not entries:
        return ""
    trained = training_data_of(runs)
    ranks = _ranked(entries, found)
    text = report.table3_markdown(entries, columns, task_of, label=_source,
                                  texts=lambda entry, cols, averages: _table3_texts(entry, cols, averages, trained),
                                  rank=(lambda entry: ranks.get(entry["model"], "")) if ranks else None)
    notes = [OVERLAP_NOTE] if f" {OVERLAP_MARK} |" in text else []
    if ranks:
        notes.append(RANK_NOTE + " " + _average_over(shared, table_columns))
    return "\n\n".join([text, *notes])


def _table4_texts(entry: dict) -> list[str]:
    if entry["source"] == OURS:
        return report.table4_texts(entry)
    mean = "–" if entry["mean"] is None else _published(entry["mean"])
    return ([entry["needle_modality"]] + [_published(entry["backgrounds"].get(b)) for b in report.BACKGROUNDS]
            + [f"{mean} ± {_published(entry['std'])}"])


def table4(runs: list[dict], ref: dict | None = None, diagnostics: bool = False) -> str:
    merged = _merge(runs, lambda run: run.get("table4") or [], lambda e: (e["model"], e["needle_modality"]))
    # Table 11 is Table 4 for every model (Table 4 prints 8 of its 10 rows, with the same figures)
    subsets = _subset_paths(runs)
    entries = ([{**entry, "source": OURS, "subset": path in subsets} for entry, path in merged.values()]
               + [{**entry, "source": ref["label"]} for entry in (ref or {}).get("table11", [])])
    entries = [e for e in entries if _in_block(e, diagnostics)]
    return report.table4_markdown(entries, label=_source, texts=_table4_texts) if entries else ""


def published_table12(ref: dict) -> str:
    """The paper's Table 12 as printed: per task and model, P@1 at each difficulty and length."""
    lengths = ("8k", "16k", "32k")
    lines = ["| Task | Model | Source | " + " | ".join(f"{d.capitalize()} {n.upper()}" for d in report.DIFFICULTIES
                                                  for n in lengths) + " |",
             "|---|---|---|" + "---:|" * (2 * len(lengths))]
    for row in ref.get("table12", []):
        cells = [_published(row[d].get(n)) for d in report.DIFFICULTIES for n in lengths]
        lines.append(f"| {report.TASK_SHORT.get(row['task'], row['task'])} | {row['model']} | {ref['label']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def published_models(ref: dict) -> str:
    """The paper's models (Tables 2 and 5): what each published row is."""
    lines = ["| Model | Version (Table 5) | Context length | Size | Embedding dim | Group |", "|---|---|---:|---|---:|---|"]
    for m in ref.get("models", []):
        version = f"[{m['version']}]({m['link']})" if m.get("link") else m["version"]
        lines.append(f"| {m['model']} | {version} | {m['context_length']} | {m.get('size') or '–'} | "
                     f"{m['embedding_dim']} | {m['group']} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def confusion(runs: list[dict]) -> str:
    """The runs' variant-confusion records (`mmle score`'s `variant_confusion`) in one table per
    dataset, the models of all runs side by side in each cell; a run's path as its Source."""
    merged = _merge(runs, lambda run: [{**r, "_path": run["_path"]} for r in run.get("variant_confusion") or []],
                    lambda r: (r["model"], r["dataset"], r["difficulty"], r["length"]))
    records = sorted((r for r, _ in merged.values()),
                     key=lambda r: (report.TASK_ORDER.index(r["task"]) if r["task"] in report.TASK_ORDER else 99,
                                    r["dataset"], r["difficulty"], r["length"], r["model"]))
    return report.confusion_markdown(records, label=lambda r: Path(r["_path"]).parent.name) if records else ""


def _average_over(shared: list[str], columns: list[str]) -> str:
    if shared == columns:
        return "The Avg compared is the table's, over its columns."
    return (f"The Avg compared is over the {len(shared)} of the table's {len(columns)} columns every model has a "
            f"number in: {', '.join(shared)}.")


def pairs_section(found: tuple) -> str:
    differences_found, shared, columns = found
    if not differences_found:
        return ""
    return f"{paired.PAIRS_NOTE}. {_average_over(shared, columns)}\n\n{paired.pairs_markdown(differences_found)}"


def leaderboard(runs: list[dict], ref: dict | None = None, pairs: bool = False) -> str:
    """The merged tables; rank ranges and the pairwise table of the Avg (``pairs``: of every column
    too) where the runs hold per-query predictions."""
    subsets = _subset_paths(runs)
    sources = ", ".join(f"{run['_path']} ({run.get('dataset', {}).get('ref', '?')}"
                        + (f"; SUBSET: at most {run['settings']['max_queries']} queries per pool"
                           if run["_path"] in subsets else "") + ")" for run in runs)
    dropped = left_out(runs)
    parts = ["# Leaderboard", "", f"Runs: {sources}.", "",
             *([f"Left out (another run of the model has its cells: a full run over a SUBSET, then the newest): "
                f"{'; '.join(dropped)}.", ""] if dropped else []),
             "Ours: P@1 x100 over all the queries of each cell (n= the queries, a 95% bootstrap interval over them "
             f"from {report.MIN_QUERIES_FOR_INTERVAL} queries on, none where every query tied: `tie: ...`); a model "
             "not run on every pool of a cell has a mark there instead, and `n/m` where it received no content of "
             "the candidates (not measured). Avg: the mean of the paper's "
             f"{report.PAPER_COLUMN_COUNT} columns, only where every one has a number; a row over fewer has "
             f"`Avg (k/{report.PAPER_COLUMN_COUNT} columns)` in a column of its own and ranks after the whole rows. "
             "Pools at lengths the paper does not use are in a table of their own.", ""]
    if ref:
        parts += [f"Rows marked '{ref['label']}': {ref['title']}. {ref['provenance']} Not published (n/q): "
                  f"{ref['missing']} The paper's MM-NIAH is the real MM-NIAH, printed in our MM-NIAH* column, "
                  "whose grid is a substitute for it.", ""]
    found = {paper_set: differences(runs, paper_set, per_column=pairs) for paper_set in (True, False)}
    sections = [("Table 3", table3(runs, ref, found=found[True])),
                ("Pairwise differences (Table 3)", pairs_section(found[True])),
                (f"Table 3 at other lengths ({report.OTHER_TABLE3_NOTE})", table3(runs, paper=False, found=found[False])),
                ("Pairwise differences (Table 3 at other lengths)", pairs_section(found[False])),
                ("Table 4 (Visual Grounding by background; the published rows are the paper's Table 11)",
                 table4(runs, ref))]
    if ref:
        sections += [("Table 12 (published: P@1 by task, difficulty and length)", published_table12(ref)),
                     ("The published models (the paper's Tables 2 and 5)", published_models(ref))]
    sections.append((f"Variant confusion ({report.CONFUSION_NOTE})", confusion(runs)))
    for title, body in sections:
        if body:
            parts += [f"## {title}", "", body, ""]
    diagnostic_tables = [(title, body) for title, body in (
        ("Table 3 columns", table3(runs, diagnostics=True, found=found[True])),
        ("Table 3 columns at other lengths", table3(runs, diagnostics=True, paper=False, found=found[False])),
        ("Table 4 columns", table4(runs, diagnostics=True))) if body]
    if diagnostic_tables:
        parts += ["## Diagnostics (not models)", "", DIAGNOSTICS_NOTE, ""]
        for title, body in diagnostic_tables:
            parts += [f"### {title}", "", body, ""]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmle leaderboard", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
