"""Ranking models across tasks (Borda count, with the mean beside it) and choosing which tasks to
keep (redundancy pruning), on a models x tasks table of main scores.

Borda is mteb's leaderboard formula (``mteb/benchmarks/_create_table.py``): in each task the
models that have a score are ranked, higher first, ties sharing the average rank; a model earns
``n_models - rank`` points per task it has (none for a missing one), ``n_models`` being every
model of the table; the final rank orders the point totals, higher first, ties sharing the
smallest rank ("min"). A model without any score is left out, as the leaderboard filters such
rows before ranking.

Beside Borda, the two averages of MVEB's Tables 3 and 11-13: "Mean is the arithmetic mean over the
model's evaluated tasks" (so a model that lacks a task, e.g. zero-shot without a joint video-text
space, still gets one, printed with the count of tasks it rests on), and Macro, the average over
task categories (retrieval, QA, classification, clustering, pair classification, zero-shot) of
the model's mean within each category, so each category weighs the same whatever its task count.
A task's category comes from its mteb type (``TaskMetadata.type``): from ``mveb eval``'s
results.json, from a JSON the user gives, or from mteb's task registry by name.

Pruning (MVEB §3, criterion 4): visit the tasks in priority order and keep a task unless its
model ranking correlates with an already kept task at Spearman rho > threshold (0.85). The order
is the tie-break the paper names, "broader coverage, then lower runtime":

1. tasks marked ``protected`` (unique coverage: a modality or direction no other task has) come
   first and are always kept;
2. then tasks scored for more models (coverage);
3. then cheaper tasks (``cost``, e.g. evaluation seconds; unknown costs last);
4. then the task name, so the result is deterministic.

rho is computed over the models that have both scores; with fewer than 3 such models, or when
either task gives all of them the same score (rho undefined), the pair counts as not redundant.
The pruned benchmark's agreement with the full one is reported on the models scored on every
task: Pearson r and Spearman rho between their mean scores (the paper's 0.996 / 0.944), and
Spearman rho between their Borda ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

Scores = Mapping[str, Mapping[str, float | None]]  # model -> task -> main score (None: missing)


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def task_names(scores: Scores) -> list[str]:
    return sorted({t for row in scores.values() for t in row})


# mteb task type -> MVEB's task category (its Macro column averages over these)
CATEGORY_OF_TYPE = {
    "Any2AnyRetrieval": "retrieval", "Retrieval": "retrieval",
    "VideoCentricQA": "QA",
    "VideoClassification": "classification", "Classification": "classification",
    "ImageClassification": "classification", "AudioClassification": "classification",
    "VideoClustering": "clustering", "Clustering": "clustering",
    "VideoPairClassification": "pair classification", "PairClassification": "pair classification",
    "VideoZeroshotClassification": "zero-shot", "ZeroShotClassification": "zero-shot",
}
CATEGORIES = ("retrieval", "QA", "classification", "clustering", "pair classification", "zero-shot")


def category_of(type_or_category: str) -> str | None:
    """An mteb task type (``VideoClustering``) or a category name (``clustering``) -> the category."""
    if type_or_category in CATEGORY_OF_TYPE:
        return CATEGORY_OF_TYPE[type_or_category]
    by_name = {c.lower(): c for c in CATEGORIES}
    return by_name.get(str(type_or_category).strip().lower())


def registry_categories(tasks: Sequence[str]) -> dict[str, str]:
    """The categories mteb's task registry gives the tasks it knows by name (MVEB's own tasks)."""
    try:
        import mteb
    except ImportError:
        return {}
    found = {}
    for task in tasks:
        try:
            category = category_of(mteb.get_task(task).metadata.type)
        except Exception:  # noqa: BLE001  (a task mteb does not know has no registry category)
            continue
        if category:
            found[task] = category
    return found


def task_categories(tasks: Sequence[str], given: Mapping[str, str] | None = None) -> dict[str, str]:
    """task -> category: from ``given`` (task -> mteb type or category name; ValueError for one that
    is neither), then from mteb's registry for the tasks still without one."""
    found = {}
    for task, value in (given or {}).items():
        category = category_of(value)
        if category is None:
            raise ValueError(f"task {task}: {value!r} is neither an mteb task type nor a category "
                             f"({', '.join(CATEGORIES)})")
        found[task] = category
    missing = [t for t in tasks if t not in found]
    return {**found, **registry_categories(missing)} if missing else found


def read_categories(path) -> dict[str, str]:
    """A JSON of task -> type or category, or ``mveb eval``'s results.json (its ``task_types``)."""
    import json

    data = json.loads(open(path, encoding="utf-8").read())
    if isinstance(data, dict) and isinstance(data.get("task_types"), dict):
        data = data["task_types"]
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"{path}: expected a JSON object {{task: category}} or mveb eval's results.json")
    return data


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean([float(v) for v in values])) if values else None


def macro(row: Mapping[str, float | None], categories: Mapping[str, str]) -> tuple[float | None, int]:
    """(the mean over categories of the mean of the row's evaluated tasks in each, categories it has)."""
    by_category: dict[str, list[float]] = {}
    for task, value in row.items():
        if _present(value) and task in categories:
            by_category.setdefault(categories[task], []).append(float(value))
    means = [_mean(values) for values in by_category.values()]
    return _mean(means), len(means)


def borda(scores: Scores, tasks: Sequence[str] | None = None,
          categories: Mapping[str, str] | None = None) -> dict[str, dict]:
    """model -> {"borda_points", "borda_rank", "mean", "tasks_evaluated"} over ``tasks`` (default:
    all); with ``categories`` (task -> category, every task) also "macro" and "categories_evaluated"."""
    from scipy.stats import rankdata

    tasks = list(tasks) if tasks is not None else task_names(scores)
    # as mteb's leaderboard: a model with no score at all is not in the table (nor in n)
    models = sorted(m for m in scores if any(_present(scores[m].get(t)) for t in tasks))
    n = len(models)
    points = {m: 0.0 for m in models}
    for task in tasks:
        have = [m for m in models if _present(scores[m].get(task))]
        if not have:
            continue
        ranks = rankdata([-float(scores[m][task]) for m in have], method="average")
        for m, r in zip(have, ranks):
            points[m] += n - float(r)
    final = rankdata([-points[m] for m in models], method="min")
    out = {}
    for m, rank in zip(models, final):
        evaluated = [float(scores[m][t]) for t in tasks if _present(scores[m].get(t))]
        out[m] = {"borda_points": points[m], "borda_rank": int(rank), "mean": _mean(evaluated),
                  "tasks_evaluated": len(evaluated)}
        if categories is not None:
            out[m]["macro"], out[m]["categories_evaluated"] = macro({t: scores[m].get(t) for t in tasks}, categories)
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    rho = spearmanr(a, b).statistic
    return None if rho is None or math.isnan(rho) else float(rho)


def task_correlation(scores: Scores, first: str, second: str) -> float | None:
    common = [m for m in sorted(scores) if _present(scores[m].get(first)) and _present(scores[m].get(second))]
    return spearman([float(scores[m][first]) for m in common], [float(scores[m][second]) for m in common])


@dataclass
class Pruning:
    kept: list[str]
    dropped: dict[str, tuple[str, float]]  # task -> (the kept task it duplicates, rho)
    order: list[str]  # the priority order visited
    agreement: dict = field(default_factory=dict)


def priority_order(scores: Scores, tasks: Sequence[str], protected: Sequence[str] = (),
                   cost: Mapping[str, float] | None = None) -> list[str]:
    cost = cost or {}
    coverage = {t: sum(1 for m in scores if _present(scores[m].get(t))) for t in tasks}
    return sorted(tasks, key=lambda t: (t not in protected, -coverage[t], cost.get(t, math.inf), t))


def prune(scores: Scores, threshold: float = 0.85, protected: Sequence[str] = (),
          cost: Mapping[str, float] | None = None, tasks: Sequence[str] | None = None) -> Pruning:
    tasks = list(tasks) if tasks is not None else task_names(scores)
    unknown = set(protected) - set(tasks)
    if unknown:
        raise ValueError(f"protected tasks not in the table: {sorted(unknown)}")
    order = priority_order(scores, tasks, protected, cost)
    kept: list[str] = []
    dropped: dict[str, tuple[str, float]] = {}
    for task in order:
        if task not in protected:
            worst = None
            for other in kept:
                rho = task_correlation(scores, task, other)
                if rho is not None and rho > threshold and (worst is None or rho > worst[1]):
                    worst = (other, rho)
            if worst is not None:
                dropped[task] = worst
                continue
        kept.append(task)
    result = Pruning(kept, dropped, order)
    result.agreement = agreement(scores, tasks, kept)
    return result


def agreement(scores: Scores, full: Sequence[str], pruned: Sequence[str]) -> dict:
    """Pearson r and Spearman rho between the full and the pruned benchmark's mean scores, and
    Spearman rho between their Borda ranks, over the models scored on every task."""
    from scipy.stats import pearsonr

    complete = [m for m in sorted(scores) if all(_present(scores[m].get(t)) for t in full)]
    out = {"models": len(complete), "tasks_full": len(full), "tasks_pruned": len(pruned)}
    if len(complete) < 3:
        return {**out, "pearson_mean": None, "spearman_mean": None, "spearman_borda": None}
    sub = {m: scores[m] for m in complete}
    full_mean = [np.mean([float(sub[m][t]) for t in full]) for m in complete]
    pruned_mean = [np.mean([float(sub[m][t]) for t in pruned]) for m in complete]
    full_borda, pruned_borda = borda(sub, full), borda(sub, pruned)
    pearson = None
    if len(set(full_mean)) > 1 and len(set(pruned_mean)) > 1:
        pearson = float(pearsonr(full_mean, pruned_mean).statistic)
    return {**out, "pearson_mean": pearson, "spearman_mean": spearman(full_mean, pruned_mean),
            "spearman_borda": spearman([full_borda[m]["borda_points"] for m in complete],
                                       [pruned_borda[m]["borda_points"] for m in complete])}


# -- tables --------------------------------------------------------------------------------------

def read_scores_csv(path) -> dict[str, dict[str, float | None]]:
    """A models x tasks CSV: first column the model, one column per task, empty = missing."""
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        tasks = header[1:]
        out = {}
        for row in reader:
            if not row:
                continue
            out[row[0]] = {t: (float(v) if v.strip() else None) for t, v in zip(tasks, row[1:])}
    return out


def write_scores_csv(path, scores: Scores) -> None:
    import csv

    tasks = task_names(scores)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["model", *tasks])
        for model in sorted(scores):
            writer.writerow([model, *("" if not _present(scores[model].get(t)) else repr(float(scores[model][t]))
                                      for t in tasks)])


def ranking_table(scores: Scores, tasks: Sequence[str] | None = None,
                  categories: Mapping[str, str] | None = None) -> str:
    """Borda rank and points, the mean over the model's evaluated tasks with their count, and
    Macro over categories with theirs. Without a category for every task, Macro is ``-`` and a
    last line names the tasks that lack one."""
    from mmlongembed.checks.summary import format_table

    tasks = list(tasks) if tasks is not None else task_names(scores)
    categories = dict(categories or {})
    uncategorised = [t for t in tasks if t not in categories]
    in_table = sorted({categories[t] for t in tasks if t in categories}, key=CATEGORIES.index)
    ranked = borda(scores, tasks, None if uncategorised else categories)
    figure = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    rows = []
    for m, r in sorted(ranked.items(), key=lambda kv: (kv[1]["borda_rank"], kv[0])):
        row = [r["borda_rank"], m, f"{r['borda_points']:g}", figure(r["mean"]), f"{r['tasks_evaluated']}/{len(tasks)}"]
        if uncategorised:
            row += ["-", "-"]
        else:
            row += [figure(r["macro"]), f"{r['categories_evaluated']}/{len(in_table)}"]
        rows.append(row)
    table = format_table(["rank (Borda)", "model", "Borda points", "mean", "tasks", "Macro", "categories"], rows)
    notes = ["mean: over the tasks each model was evaluated on (their count in `tasks`); Macro: the mean over "
             "task categories of each category's mean, every category weighted equally"]
    if uncategorised:
        notes.append(f"Macro: no category for {', '.join(uncategorised)} (give mveb eval's results.json or a JSON "
                     "{task: category} with --categories)")
    else:
        notes.append("categories: " + "; ".join(
            f"{c} {sum(1 for t in tasks if categories[t] == c)}" for c in in_table))
    return table + "\n\n" + "\n".join(notes)
