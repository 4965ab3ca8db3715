"""`mmle audit DATASET`: the label-free shortcut audit for a retrieval dataset this toolkit did not
build (docs/AUDIT.md). Exit 0: no query-blind rule finds the judged documents above chance; 1: one
does (the last line names it, its split and its figure); 2: bad input (one line).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from harness.audit import battery
from harness.audit.sources import open_dataset
from mmlongembed.checks.summary import counted, format_table
from mmlongembed.core.errors import UserError, report_error

DEFAULT_ALPHA = 0.01
DEFAULT_BATCH_SIZE = 1024
DEFAULT_PERMUTATIONS = 10_000
SHOWN_RULES = 8  # the closest rules per split on the terminal; audit.json and the report hold all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET",
                        help="a local folder (BEIR: corpus.jsonl, queries.jsonl, qrels/<split>.tsv; mteb's Hub "
                             "layout: corpus/, queries/, qrels/ and optionally top_ranked/ parquet folders; or an "
                             "mmle release) or, with --revision, a Hub dataset repo id")
    parser.add_argument("--revision", default=None, metavar="REV",
                        help="read DATASET from the Hub at exactly this tag or commit (a repo id is never read at "
                             "whatever revision happens to be newest or cached)")
    parser.add_argument("--output", type=Path, default=None, metavar="DIR",
                        help="also write audit.json (every figure) and audit.md (the report) into DIR")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"a rule is flagged when its Holm-corrected p-value is below this (over every "
                             f"query-blind rule of every split) and its effect is at least 10 points of P@1 or "
                             f"an AUC 0.10 from one half (default {DEFAULT_ALPHA})")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, metavar="ROWS",
                        help=f"corpus rows read at a time: memory holds one batch of texts, and a few floats "
                             f"per row (default {DEFAULT_BATCH_SIZE})")
    parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS, metavar="N",
                        help=f"label permutations for the whole-corpus AUC p-values; the smallest p-value is "
                             f"1/(N+1), so N must exceed the number of rules over --alpha for any rule to be "
                             f"flagged (default {DEFAULT_PERMUTATIONS})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the permutations (default 0)")
    parser.add_argument("--splits", nargs="+", default=None, metavar="SPLIT",
                        help="audit only these splits (qrels files, mteb splits, or a release's pool names; "
                             "default: all)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip BM25 and the random and length diagnostics (they never decide the verdict; "
                             "BM25's index is the one part whose memory grows with the corpus's words)")


def run(args: argparse.Namespace) -> int:
    try:
        _check_options(args)
        layout, splits = open_dataset(args.dataset, args.revision)
        if args.splits:
            unknown = sorted(set(args.splits) - {s.name for s in splits})
            if unknown:
                raise UserError(f"--splits {' '.join(unknown)}: no such split in {args.dataset} "
                                f"(it has {', '.join(s.name for s in splits)})")
            splits = [s for s in splits if s.name in args.splits]
        if not splits:
            raise UserError(f"{args.dataset}: no split with judged documents")
        audit = audit_splits(splits, args)
    except UserError as error:
        return report_error(error)
    audit = {"dataset": args.dataset, "revision": args.revision, "layout": layout, **audit}
    print(terminal_report(audit))
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "audit.json").write_text(json.dumps(audit, indent=2) + "\n", encoding="utf-8")
        (args.output / "audit.md").write_text(markdown_report(audit), encoding="utf-8")
    print(verdict_line(audit))
    return 1 if audit["flagged"] else 0


def _check_options(args) -> None:
    if args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size}: must be at least 1")
    if args.permutations < 1:
        raise UserError(f"--permutations {args.permutations}: must be at least 1")
    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha {args.alpha}: must lie between 0 and 1")
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        raise UserError(f"--output {args.output}: exists and is not a directory")


def audit_splits(splits, args) -> dict:
    """Every split's rules and baselines, Holm-corrected over every query-blind rule of the audit."""
    read: dict = {}  # splits sharing a corpus (BEIR's, mteb's) read it once
    out = []
    for split in splits:
        corpus = read.get(id(split.corpus_batches))
        if corpus is None:
            corpus = read[id(split.corpus_batches)] = battery.read_corpus(split, args.batch_size,
                                                                           not args.no_baselines)
        entry = {"split": split.name, "corpus_rows": len(corpus.ids), "batches": corpus.batches,
                 "queries": len(split.relevant)}
        if split.candidates is not None:
            lists = battery.candidate_lists(split, corpus)
            entry.update(mode="per-query candidates", candidates_from=split.groups_from,
                         scored_queries=len(lists.queries),
                         rules=battery.list_rules(corpus, lists) if lists.queries else [])
        else:
            lists = None
            judged = np.zeros(len(corpus.ids), dtype=bool)
            judged[[corpus.index_of[c] for ids in split.relevant.values() for c in ids if c in corpus.index_of]] = True
            entry.update(mode="whole corpus", candidates_from="the whole corpus", judged_documents=int(judged.sum()),
                         rules=battery.corpus_rules(corpus, judged, args.permutations, args.seed))
        entry["baselines"] = [] if args.no_baselines else battery.baselines(split, corpus, lists)
        out.append(entry)
    tests = [rule for entry in out for rule in entry["rules"]]
    for rule, corrected in zip(tests, battery.holm([r["p_value"] for r in tests])):
        rule["corrected_p"] = corrected
    for entry in out:
        entry["rules"].sort(key=lambda r: (r["corrected_p"], r["p_value"], -r["excess"], r["rule"]))
        for rule in entry["rules"]:
            rule["flagged"] = battery.flags(rule, args.alpha)
    flagged = [(entry["split"], rule) for entry in out for rule in entry["rules"] if rule["flagged"]]
    flagged.sort(key=lambda pair: (pair[1]["corrected_p"], -pair[1]["excess"]))
    return {"correction": "Holm, over every query-blind rule of every split", "tests": len(tests),
            "alpha": args.alpha, "min_excess": battery.MIN_EXCESS, "permutations": args.permutations,
            "seed": args.seed, "batch_size": args.batch_size, "splits": out,
            "flagged": [{"split": split, **rule} for split, rule in flagged]}


def _figure(rule: dict) -> str:
    if "auc" in rule:
        return f"AUC {rule['auc']:.3f} vs 0.5"
    return f"P@1 {rule['p_at_1']:.3f} vs chance {rule['chance_p_at_1']:.3f}"


def _rows(entry: dict, rules: list[dict]) -> tuple[list[str], list[list]]:
    if entry["mode"] == "whole corpus":
        headers = ["rule", "n", "judged", "AUC", "p", "Holm p", ""]
        rows = [[r["rule"], r["n"], r["judged"], f"{r['auc']:.3f}", f"{r['p_value']:.3g}", f"{r['corrected_p']:.3g}",
                 "FLAGGED" if r["flagged"] else ""] for r in rules]
    else:
        headers = ["rule", "n", "P@1", "chance", "nDCG@10", "chance", "p", "Holm p", ""]
        rows = [[r["rule"], r["n"], f"{r['p_at_1']:.3f}", f"{r['chance_p_at_1']:.3f}", f"{r['ndcg_at_10']:.3f}",
                 f"{r['chance_ndcg_at_10']:.3f}", f"{r['p_value']:.3g}", f"{r.get('corrected_p', float('nan')):.3g}",
                 "FLAGGED" if r.get("flagged") else ""] for r in rules]
    return headers, rows


def _baseline_rows(entry: dict) -> tuple[list[str], list[list]]:
    headers = ["baseline (not a verdict)", "n", "P@1", "chance", "nDCG@10", "chance", "p"]
    return headers, [[b["rule"], b["n"], f"{b['p_at_1']:.3f}", f"{b['chance_p_at_1']:.3f}", f"{b['ndcg_at_10']:.3f}",
                      f"{b['chance_ndcg_at_10']:.3f}", f"{b['p_value']:.3g}"] for b in entry["baselines"]]


def _split_heading(entry: dict) -> str:
    judged = f", {entry['judged_documents']} judged documents" if "judged_documents" in entry else ""
    return (f"split {entry['split']}: {entry['queries']} queries, {entry['corpus_rows']} corpus rows "
            f"(read in {counted(entry['batches'], 'batches')}){judged}; candidates: {entry['candidates_from']}")


def terminal_report(audit: dict) -> str:
    lines = [f"mmle audit {audit['dataset']} ({audit['layout']} layout): {audit['tests']} query-blind rule tests, "
             f"{audit['correction']}"]
    for entry in audit["splits"]:
        lines += ["", _split_heading(entry)]
        shown = entry["rules"][:SHOWN_RULES]
        if shown:
            lines.append(format_table(*_rows(entry, shown), align_right_from=1))
            if len(entry["rules"]) > SHOWN_RULES:
                lines.append(f"({len(entry['rules']) - SHOWN_RULES} more rules in audit.json and audit.md)")
        else:
            lines.append("no query can be scored: no judged document among its candidates")
        if entry["baselines"]:
            lines += ["", format_table(*_baseline_rows(entry), align_right_from=1)]
    return "\n".join(lines)


def _markdown_table(headers: list[str], rows: list[list]) -> str:
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
                      *("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows)])


def markdown_report(audit: dict) -> str:
    revision = f" at revision `{audit['revision']}`" if audit["revision"] else ""
    parts = [f"# Shortcut audit of `{audit['dataset']}`{revision}", "",
             f"Layout: {audit['layout']}. {audit['tests']} query-blind rule tests; p-values corrected by "
             f"{audit['correction']}. A rule is flagged when its corrected p-value is below {audit['alpha']} and its "
             f"effect is at least {audit['min_excess']:.2f} (P@1 above chance, or AUC away from 0.5). Whole-corpus "
             f"p-values come from {audit['permutations']} label permutations (seed {audit['seed']}). BM25 and the "
             "diagnostic encoders are baselines: they read the query, and a lexical match is not a leak.", ""]
    for entry in audit["splits"]:
        parts += [f"## {entry['split']}", "", _split_heading(entry) + ".", ""]
        if entry["rules"]:
            parts += [_markdown_table(*_rows(entry, entry["rules"])), ""]
        if entry["baselines"]:
            parts += [_markdown_table(*_baseline_rows(entry)), ""]
    parts += ["## Verdict", "", verdict_line(audit), ""]
    return "\n".join(parts)


def verdict_line(audit: dict) -> str:
    if audit["flagged"]:
        worst = audit["flagged"][0]
        more = f" ({len(audit['flagged']) - 1} more flagged)" if len(audit["flagged"]) > 1 else ""
        return (f"FLAGGED: rule '{worst['rule']}' finds the judged documents of split {worst['split']}: "
                f"{_figure(worst)} (n={worst['n']}, Holm p={worst['corrected_p']:.3g}){more}")
    return (f"PASSED: no query-blind rule finds the judged documents above chance ({audit['tests']} tests, "
            f"Holm, alpha {audit['alpha']})")
