"""The lexically matched Hard tier beside the paper's Easy and Hard (``mmlongembed.core.pools.LEXICAL``).

Its pools hold queries of the paper's pools of the same source and length, against variants that
keep the positive's lexical relation to the query. A model is compared with itself on the same
queries: Easy and Hard are restricted to the queries the lexical pool holds. Two figures per
cell:

- P@1 in the pool, as everywhere (chance: 1 / the pool's candidates);
- P@1 among the query's own group: the positive against its own variants only (chance: 1 / the
  group's size, 25% for a positive and three variants). A lexical model finds a query's topic in
  a pool; what the tier asks is whether it can tell the whole document from its variants.

Built from the per-query figures every scored pool carries (``per_query`` and the ``group``
breakdown, ``harness.scoring.metrics.variant_breakdown``); no figure of the paper is compared here,
the tier is not in the paper.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from harness.report.tables import MIN_QUERIES_FOR_INTERVAL, TASK_ORDER, _length_name, chance_mark, fmt
from harness.scoring.metrics import MAIN_METRIC, bootstrap_ci
from mmlongembed.core.pools import EASY, HARD, LEXICAL

TITLE = ("The lexically matched Hard tier (not in the paper): P@1 on the lexical pools' own queries, Easy and "
         "Hard restricted to those queries; `among group`: the positive against its own variants alone "
         "(chance 1 / the group's size)")
TIERS = (EASY, HARD, LEXICAL)
TIER_HEADERS = {EASY: "Easy", HARD: "Hard", LEXICAL: "Hard-lexical"}


def _per_query(row: dict) -> dict[str, tuple[float, float | None, float | None, float]]:
    """query id -> (P@1 in the pool, P@1 among its group or None where the query has no negatives
    of its own, chance in the pool, chance in the group)."""
    group = (row.get("breakdown") or {}).get("group")
    values = (row.get("per_query") or {}).get(MAIN_METRIC)
    if not group or values is None or len(group["_id"]) != len(values):
        return {}
    pool_chance = 1.0 / row["n_candidates"] if row.get("n_candidates") else None
    return {qid: (float(v), float(g) if size > 1 else None, pool_chance, 1.0 / size)
            for qid, v, g, size in zip(group["_id"], values, group["p_at_1"], group["size"])}


def _figure(values: list[float], chances: list[float], n_resamples: int, seed: int) -> dict | None:
    if not values:
        return None
    array = np.asarray(values, dtype=np.float64)
    figure = {"p_at_1": float(array.mean()), "queries": len(values), "chance": float(np.mean(chances)),
              "ci95": None}
    if len(values) >= MIN_QUERIES_FOR_INTERVAL:
        figure["ci95"] = list(bootstrap_ci(array, n_resamples, seed))
    return figure


def _cell(row: dict) -> tuple:
    """Where a pool's queries are compared across tiers: its length and depth, and its background
    (the needle grid asks the same queries in one cell per background; None elsewhere)."""
    return row.get("length"), row.get("depth"), (row.get("extra") or {}).get("background")


def tier_data(rows, n_resamples: int = 1000, seed: int = 0) -> list[dict]:
    """One entry per (model, dataset) with a lexical pool: per tier, the pool and the group
    figure over the lexical pools' queries (all their lengths), and the lengths they span."""
    lexical = [r for r in rows if r.get("difficulty") == LEXICAL]
    by_key = defaultdict(dict)  # (model, dataset, length, depth, tier) -> per-query figures
    for r in rows:
        if r.get("difficulty") in TIERS:
            by_key[(r["model"], r["dataset"], *_cell(r), r["difficulty"])].update(_per_query(r))
    out = []
    for model, dataset in dict.fromkeys((r["model"], r["dataset"]) for r in lexical):
        task = next(r["task"] for r in lexical if (r["model"], r["dataset"]) == (model, dataset))
        mine = [r for r in lexical if (r["model"], r["dataset"]) == (model, dataset)]
        entry = {"model": model, "dataset": dataset, "task": task,
                 "lengths": sorted({int(r["length"]) for r in mine if r.get("length")}), "tiers": {}}
        for tier in TIERS:
            pool, group = ([], []), ([], [])
            for cell in {_cell(r) for r in mine}:
                queries = by_key.get((model, dataset, *cell, LEXICAL), {})
                theirs = by_key.get((model, dataset, *cell, tier), {})
                for qid in queries:
                    if qid not in theirs:
                        continue
                    p, g, pool_chance, group_chance = theirs[qid]
                    pool[0].append(p)
                    pool[1].append(pool_chance)
                    if g is not None:
                        group[0].append(g)
                        group[1].append(group_chance)
            entry["tiers"][tier] = {"pool": _figure(*pool, n_resamples, seed),
                                    "group": _figure(*group, n_resamples, seed)}
        out.append(entry)
    return sorted(out, key=lambda e: (TASK_ORDER.index(e["task"]) if e["task"] in TASK_ORDER else 99,
                                      e["dataset"], e["model"]))


def figure_text(figure: dict | None) -> str:
    if figure is None:
        return "–"
    interval = f" [{fmt(figure['ci95'][0])}, {fmt(figure['ci95'][1])}]" if figure.get("ci95") else ""
    return f"{fmt(figure['p_at_1'])}{interval} n={figure['queries']}" + chance_mark(
        figure["p_at_1"], figure["queries"], figure["chance"])


def tier_table(rows, n_resamples: int = 1000, seed: int = 0, data: list[dict] | None = None) -> str:
    data = tier_data(rows, n_resamples, seed) if data is None else data
    if not data:
        return ""
    headers = [f"{TIER_HEADERS[t]}" for t in TIERS] + [f"{TIER_HEADERS[t]} among group" for t in TIERS]
    lines = ["| Model | Source | Lengths | " + " | ".join(headers) + " |", "|---|---|---|" + "---:|" * len(headers)]
    for e in data:
        cells = ([figure_text(e["tiers"][t]["pool"]) for t in TIERS]
                 + [figure_text(e["tiers"][t]["group"]) for t in TIERS])
        lengths = ", ".join(_length_name(n) for n in e["lengths"])
        lines.append(f"| {e['model']} | {e['dataset']} | {lengths} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
