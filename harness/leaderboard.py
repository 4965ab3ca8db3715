"""`mmle leaderboard RESULTS...`: runs of several models (each `mmle score`'s results.json) merged
into one Table 3 and one Table 4, models as rows sorted by Avg, optionally beside the paper's
published rows (`--reference paper`, shipped as package data and labelled as published numbers).

Cells come from each run's `table3` records as they are (query-weighted P@1, queries, interval,
skip marks), so nothing is averaged twice; a run written before those records existed is tabled
again from its per-pool results. One model's cell may come from one run only.
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

from harness import report
from harness.diagnostics import is_diagnostic
from harness.training_overlap import OVERLAP_MARK, OVERLAP_NOTE, trained_on
from mmlongembed.errors import UserError, report_error

REFERENCES = {"paper": "paper_results.json"}
DIAGNOSTICS_NOTE = ("What a model that reads nothing (random: chance), only length (length: the longest candidate "
                    "first), not the images (text-only:) or not the frame order (shuffled-frames:) scores on each "
                    "column; a model's lead over these rows is what it reads.")
OURS = "ours"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results.json of `mmle score` runs, or the directories that hold them")
    parser.add_argument("--reference", choices=sorted(REFERENCES), default=None,
                        help="add the paper's published Table 3 and Table 4 rows (those the project's notes quote), "
                             "labelled as published numbers, not ours")
    parser.add_argument("--output", default=None, help="also write the tables to this markdown file")


def run(args: argparse.Namespace) -> int:
    try:
        text = leaderboard([load_run(p) for p in args.results], reference(args.reference) if args.reference else None)
    except UserError as exc:
        return report_error(exc)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


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
    return json.loads(resources.files("harness").joinpath(REFERENCES[name]).read_text(encoding="utf-8"))


def _table3_records(run: dict) -> list[dict]:
    records = run.get("table3")
    if records is None:  # older results: table them from the per-pool rows
        records = report.table3_records(report.table3_data(run["results"], run.get("skipped", [])))
    return [r for r in records if r["column"] != report.AVG]


def _merge(runs: list[dict], records_of, key, what: str) -> dict:
    """{key: (record, run path)}, refusing a key that two runs both have."""
    merged = {}
    for run in runs:
        for record in records_of(run):
            k = key(record)
            if k in merged:
                raise UserError(f"{what} {' '.join(map(str, k))}: in both {merged[k][1]} and {run['_path']}; "
                                "give each model's cell once")
            merged[k] = (record, run["_path"])
    return merged


def _sort(entries: list[dict]) -> list[dict]:
    """By Avg, best first; rows without one after, by name."""
    return sorted(entries, key=lambda e: (e["average"]["p_at_1"] is None, -(e["average"]["p_at_1"] or 0), e["model"]))


def table3_entries(runs: list[dict], ref: dict | None = None) -> tuple[list[dict], list[str], dict[str, str]]:
    """The merged Table 3: entries (ours and, with `ref`, the published rows), the columns in the
    paper's order, and each column's task. Our Avg is over the columns our runs have (published
    columns none of them has do not count); a published row's Avg is the paper's, where quoted."""
    merged = _merge(runs, _table3_records, lambda r: (r["model"], r["column"]), "model and column")
    task_of = {r["column"]: r.get("task") for r, _ in merged.values()}
    ours = sorted(task_of, key=lambda c: report.column_order(c, task_of[c]))
    models = list(dict.fromkeys(model for model, _ in merged))
    entries = []
    for model in models:
        cells = {c: merged[model, c][0] for c in ours if (model, c) in merged}
        row = [cells.get(c) or {"model": model, "column": c, "p_at_1": None, "queries": 0} for c in ours]
        entries.append({"model": model, "source": OURS, "cells": cells, "average": report.average_cell(model, row)})
    if ref:
        published = {}
        for r in ref["table3"]:
            task_of.setdefault(r["column"], r.get("task"))
            published.setdefault(r["model"], {})[r["column"]] = r
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


def _table3_texts(entry: dict, columns: list[str], trained: dict[str, list[str]] | None = None) -> list[str]:
    if entry["source"] == OURS:
        texts = report.table3_texts(entry, columns)
        declared = (trained or {}).get(entry["model"], [])
        return [f"{text} {OVERLAP_MARK}" if c in entry["cells"] and trained_on(c, declared) else text
                for c, text in zip(columns, texts)] + texts[len(columns):]
    return ([_published(entry["cells"].get(c, {}).get("p_at_1")) for c in columns]
            + [_published(entry["average"].get("published"))])


def _source(entry: dict) -> str:
    return entry["source"]


def _in_block(entry: dict, diagnostics: bool) -> bool:
    """Diagnostic rows (random, length, text-only:, shuffled-frames:) go in their own block;
    published rows go with the models."""
    return (entry["source"] == OURS and is_diagnostic(entry["model"])) == diagnostics


def table3(runs: list[dict], ref: dict | None = None, diagnostics: bool = False) -> str:
    """The models' Table 3 (with `ref`, beside the published rows), or with `diagnostics` the
    diagnostic rows alone, over the same columns."""
    entries, columns, task_of = table3_entries(runs, ref)
    entries = [e for e in entries if _in_block(e, diagnostics)]
    if not columns or not entries:
        return ""
    trained = training_data_of(runs)
    text = report.table3_markdown(entries, columns, task_of, label=_source,
                                  texts=lambda entry, cols: _table3_texts(entry, cols, trained))
    return text + ("\n\n" + OVERLAP_NOTE if f" {OVERLAP_MARK} |" in text else "")


def _table4_texts(entry: dict) -> list[str]:
    if entry["source"] == OURS:
        return report.table4_texts(entry)
    mean = "–" if entry["mean"] is None else _published(entry["mean"])
    return ([entry["needle_modality"]] + [_published(entry["backgrounds"].get(b)) for b in report.BACKGROUNDS]
            + [f"{mean} ± {_published(entry['std'])}"])


def table4(runs: list[dict], ref: dict | None = None, diagnostics: bool = False) -> str:
    merged = _merge(runs, lambda run: run.get("table4") or [], lambda e: (e["model"], e["needle_modality"]),
                    "model and needle modality")
    entries = ([{**entry, "source": OURS} for entry, _ in merged.values()]
               + [{**entry, "source": ref["label"]} for entry in (ref or {}).get("table4", [])])
    entries = [e for e in entries if _in_block(e, diagnostics)]
    return report.table4_markdown(entries, label=_source, texts=_table4_texts) if entries else ""


def leaderboard(runs: list[dict], ref: dict | None = None) -> str:
    sources = ", ".join(f"{run['_path']} ({run.get('dataset', {}).get('ref', '?')})" for run in runs)
    parts = ["# Leaderboard", "", f"Runs: {sources}.", "",
             "Ours: P@1 x100 over all the queries of each cell (n= the queries, a 95% bootstrap interval over them "
             f"from {report.MIN_QUERIES_FOR_INTERVAL} queries on); a model not run on every pool of a cell has a mark "
             "there instead. Avg: the mean of the columns our runs have, only where every one of them has a number; "
             "rows sorted by it.", ""]
    if ref:
        parts += [f"Rows marked '{ref['label']}': {ref['title']}. {ref['provenance']} Not quoted (n/q): {ref['missing']} "
                  "Their MM-NIAH is the real MM-NIAH; our MM-NIAH* column is a substitute.", ""]
    for title, body in (("Table 3", table3(runs, ref)), ("Table 4 (Visual Grounding by background)", table4(runs, ref))):
        if body:
            parts += [f"## {title}", "", body, ""]
    diagnostic_tables = [(title, body) for title, body in (("Table 3 columns", table3(runs, diagnostics=True)),
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
