"""Paired comparisons: is model A's P@1 above model B's on the same queries, beyond chance?

Two models scored on the same queries are compared query by query (each run's
``predictions.parquet`` holds every query's tie-aware P@1), so the question is the difference per
query, not two independent intervals that overlap: a gap of one point can be certain when the
models agree on every other query, and five points can be noise when they disagree on many.

- The difference of a Table 3 cell is the mean over its queries of ``a - b``; its interval is a
  paired percentile bootstrap (the same resampled queries for both models), and its p-value a
  paired sign-flip permutation test (under "no difference", swapping the two models' answers on a
  query changes nothing).
- The difference of the Avg is the mean over the columns of the columns' differences (each column
  weighs the same, as Table 3's Avg); queries are resampled, or their signs flipped, within each
  column.
- p-values are corrected across the pairs compared (Holm), per column and for the Avg.
- Two draws of the benchmark (another build seed) share no query: there each column's two samples
  are compared unpaired (``unpaired_difference``: each side bootstrapped on its own, a
  permutation that deals the answers anew to the two sides), the fresh-draw contamination check
  of ``mmle compare --draws``.
- A rank range: the ranks a model can take once the differences that are not significant are
  allowed either way (best: 1 + the models significantly above it; worst: the models not
  significantly below it). Models whose difference is not significant share ranks.

Every draw comes from a generator derived from the seed, the two models and the column, so a
figure does not depend on the order in which pairs are compared.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.report import tables as report
from mmlongembed.core.rng import derive_rng

ALPHA = 0.05
N_RESAMPLES = 2000
CHUNK = 256  # resamples drawn at once: memory is CHUNK x queries, whatever the pool sizes

# per model: per column: {(pool, query _id): tie-aware P@1}
Outcomes = dict[str, dict[str, dict[tuple[str, str], float]]]


@dataclass(frozen=True)
class Difference:
    """One paired comparison: ``a - b`` in P@1 (0..1) over ``queries`` shared queries."""

    a: str
    b: str
    column: str
    queries: int
    delta: float
    ci95: tuple[float, float]
    p: float
    p_holm: float = float("nan")

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA

    def record(self) -> dict:
        return {"a": self.a, "b": self.b, "column": self.column, "queries": self.queries, "delta": self.delta,
                "ci95": list(self.ci95), "p": self.p, "p_holm": self.p_holm, "significant": self.significant}


def per_query(run: dict) -> list[tuple[str, str, str, float]]:
    """(model, pool, query _id, tie-aware P@1) of every query the run scored, from its
    predictions.parquet; [] for a run without one (written before they existed, or by hand)."""
    import pyarrow.parquet as pq

    from harness.report.predictions import FILENAME

    path = Path(run["_path"]).parent / FILENAME
    if not path.is_file():
        return []
    table = pq.read_table(path, columns=["model", "pool", "_id", "p_at_1"]).to_pydict()
    return [(m, pool, qid, float(value)) for m, pool, qid, value in
            zip(table["model"], table["pool"], table["_id"], table["p_at_1"]) if value is not None]


def run_outcomes(run: dict, paper: bool = True) -> Outcomes:
    """Each model's per-query P@1 by Table 3 column (``per_query``; the pools' facts from the
    run's results rows place each pool in its column)."""
    columns = report.table3_columns(run["results"], run.get("skipped", []), paper)
    facts = {r["pool"]: r for r in [*run["results"], *(s.get("facts") or {} for s in run.get("skipped", []))]
             if r.get("pool")}
    column_of = {pool: next((c.name for c in columns if c.keep(f)), None) for pool, f in facts.items()}
    out: Outcomes = {}
    for model, pool, qid, value in per_query(run):
        column = column_of.get(pool)
        if column is not None:
            out.setdefault(model, {}).setdefault(column, {})[pool, qid] = value
    return out


def merge_outcomes(parts: list[Outcomes]) -> Outcomes:
    """Several runs' outcomes in one (the leaderboard's runs, merged as their cells are: where two
    runs hold one model's column, the later part wins)."""
    out: Outcomes = {}
    for part in parts:
        for model, columns in part.items():
            out.setdefault(model, {}).update(columns)
    return out


def shared(a: dict, b: dict) -> tuple[np.ndarray, np.ndarray]:
    """The two models' values on the queries both answered, in one order."""
    keys = sorted(a.keys() & b.keys())
    return (np.array([a[k] for k in keys], dtype=np.float64), np.array([b[k] for k in keys], dtype=np.float64))


def _resampled_means(differences: list[np.ndarray], rng: np.random.Generator, n_resamples: int,
                     flip: bool) -> np.ndarray:
    """[n_resamples]: the mean over columns of each column's mean difference, its queries
    resampled with replacement (bootstrap) or their signs flipped at random (permutation)."""
    total = np.zeros(n_resamples)
    for d in differences:
        draws = []
        for start in range(0, n_resamples, CHUNK):
            n = min(CHUNK, n_resamples - start)
            if flip:
                signs = rng.integers(0, 2, size=(n, len(d))) * 2 - 1
                draws.append((signs * d).mean(axis=1))
            else:
                draws.append(d[rng.integers(0, len(d), size=(n, len(d)))].mean(axis=1))
        total += np.concatenate(draws)
    return total / len(differences)


def paired_difference(pairs: list[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator,
                      n_resamples: int = N_RESAMPLES) -> tuple[float, tuple[float, float], float]:
    """(difference, 95% paired bootstrap interval, two-sided sign-flip p) of the mean over columns
    of ``mean(a - b)``; ``pairs``: one (a, b) per column, the same queries in both."""
    differences = [a - b for a, b in pairs]
    observed = float(np.mean([d.mean() for d in differences]))
    boot = _resampled_means(differences, rng, n_resamples, flip=False)
    if not any(np.any(d != 0) for d in differences):  # the models agree on every query: nothing to test
        return observed, (observed, observed), 1.0
    null = _resampled_means(differences, rng, n_resamples, flip=True)
    # a difference within float noise of the observed one counts as "as extreme" (ties of sums)
    extreme = int(np.sum(np.abs(null) >= abs(observed) - 1e-12))
    p = (1 + extreme) / (1 + n_resamples)
    return observed, (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))), min(1.0, p)


def unpaired_difference(samples: list[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator,
                        n_resamples: int = N_RESAMPLES) -> tuple[float, tuple[float, float], float]:
    """(difference, 95% bootstrap interval, two-sided permutation p) of the mean over columns of
    ``mean(a) - mean(b)`` where A and B answered different queries (two draws of a benchmark):
    each side's queries resampled on their own (bootstrap), or the column's answers dealt anew
    to the two sides at their sizes (permutation, under "both come from one distribution")."""
    observed = float(np.mean([a.mean() - b.mean() for a, b in samples]))
    boot, null = np.zeros(n_resamples), np.zeros(n_resamples)
    for a, b in samples:
        pooled = np.concatenate([a, b])
        for start in range(0, n_resamples, CHUNK):
            n = min(CHUNK, n_resamples - start)
            boot[start:start + n] += (a[rng.integers(0, len(a), size=(n, len(a)))].mean(axis=1)
                                      - b[rng.integers(0, len(b), size=(n, len(b)))].mean(axis=1))
            dealt = rng.permuted(np.broadcast_to(pooled, (n, len(pooled))), axis=1)
            null[start:start + n] += dealt[:, :len(a)].mean(axis=1) - dealt[:, len(a):].mean(axis=1)
    boot, null = boot / len(samples), null / len(samples)
    extreme = int(np.sum(np.abs(null) >= abs(observed) - 1e-12))
    return (observed, (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))),
            min(1.0, (1 + extreme) / (1 + n_resamples)))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment: the family's error held at alpha, less conservative than
    Bonferroni; adjusted values are monotone in the raw ones."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def every_answer(a: dict, b: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each side's values on all the queries it answered (two draws: no query is shared)."""
    return (np.array([a[k] for k in sorted(a)], dtype=np.float64), np.array([b[k] for k in sorted(b)], dtype=np.float64))


def compare(outcomes: Outcomes, models: list[str], columns: list[str], seed: int = 0,
            n_resamples: int = N_RESAMPLES, per_column: bool = True,
            average_over: list[str] | None = None, paired: bool = True) -> list[Difference]:
    """Every pair of ``models`` (in the order given, a before b) on each of ``columns`` both have
    queries in (with ``per_column``) and on the Avg over ``average_over`` (default ``columns``;
    only where both have every one), Holm-corrected across the pairs of each column and of the Avg.
    ``paired`` False: the two sides answered different queries (two draws of the benchmark), each
    column's answers compared as two samples (``unpaired_difference``); ``queries`` is then both
    sides' count."""
    average_over = columns if average_over is None else average_over
    samples, difference = (shared, paired_difference) if paired else (every_answer, unpaired_difference)
    found: list[Difference] = []
    for a, b in itertools.combinations(models, 2):
        both = [c for c in dict.fromkeys([*columns, *average_over])
                if outcomes.get(a, {}).get(c) and outcomes.get(b, {}).get(c)]
        pairs = {c: samples(outcomes[a][c], outcomes[b][c]) for c in both}
        pairs = {c: ab for c, ab in pairs.items() if len(ab[0]) and len(ab[1])}

        def counted(over):
            return sum(len(x) + (0 if paired else len(y)) for x, y in over)
        if per_column:
            for c in columns:
                if c in pairs:
                    delta, ci, p = difference([pairs[c]], derive_rng(seed, "paired", a, b, c), n_resamples)
                    found.append(Difference(a, b, c, counted([pairs[c]]), delta, ci, p))
        if average_over and all(c in pairs for c in average_over):
            over = [pairs[c] for c in average_over]
            delta, ci, p = difference(over, derive_rng(seed, "paired", a, b, report.AVG), n_resamples)
            found.append(Difference(a, b, report.AVG, counted(over), delta, ci, p))
    corrected = []
    for column in dict.fromkeys(d.column for d in found):
        family = [d for d in found if d.column == column]
        for d, p_holm in zip(family, holm([d.p for d in family])):
            corrected.append(Difference(d.a, d.b, d.column, d.queries, d.delta, d.ci95, d.p, p_holm))
    order = {c: k for k, c in enumerate([*columns, report.AVG])}  # the table's column order, pairs within
    return sorted(corrected, key=lambda d: order.get(d.column, len(order)))


def rank_ranges(models: list[str], differences: list[Difference], column: str = report.AVG) -> dict[str, tuple[int, int]]:
    """{model: (best rank, worst rank)} by the Avg's significant differences: a model ranks below
    every model significantly above it and above every model significantly below it."""
    above = {m: 0 for m in models}
    below = {m: 0 for m in models}
    for d in differences:
        if d.column != column or not d.significant or d.a not in above or d.b not in above:
            continue
        winner, loser = (d.a, d.b) if d.delta > 0 else (d.b, d.a)
        above[loser] += 1
        below[winner] += 1
    return {m: (1 + above[m], len(models) - below[m]) for m in models}


def rank_text(span: tuple[int, int]) -> str:
    return str(span[0]) if span[0] == span[1] else f"{span[0]}–{span[1]}"


def difference_text(d: Difference) -> str:
    """`+5.0 [+1.2, +8.9]`: the difference in P@1 x100 and its paired interval."""
    return f"{100 * d.delta:+.1f} [{100 * d.ci95[0]:+.1f}, {100 * d.ci95[1]:+.1f}]"


def p_text(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


PAIRS_NOTE = ("a - b in P@1 x100 on the queries both models answered, a 95% paired bootstrap interval (the same "
              "resampled queries for both), the two-sided paired sign-flip permutation p, and p corrected across "
              "the pairs of the column (Holm); * where the corrected p is below 0.05. Avg: the mean of the columns' "
              "differences, queries resampled within each column")


def pairs_markdown(differences: list[Difference]) -> str:
    lines = ["| a | b | Column | n | a - b [95% paired interval] | p | p (Holm) |", "|---|---|---|---:|---:|---:|---:|"]
    for d in differences:
        mark = " *" if d.significant else ""
        lines.append(f"| {d.a} | {d.b} | {d.column} | {d.queries} | {difference_text(d)}{mark} | {p_text(d.p)} | "
                     f"{p_text(d.p_holm)} |")
    return "\n".join(lines)
