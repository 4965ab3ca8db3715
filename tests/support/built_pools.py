"""A built pool's tables as rows, for the builder tests that check candidates one by one."""

from __future__ import annotations

from pathlib import Path

from mmlongembed.output.layout import read_built_pool


def table_rows(table: dict) -> list[dict]:
    """A table of columns (name -> values) as one dict per row."""
    return [dict(zip(table, values)) for values in zip(*table.values())]


def candidate_rows(built: Path, pool: str) -> list[dict]:
    """The pool's candidates as rows, the audit joined in."""
    return table_rows(read_built_pool(built, pool).corpus)


def audit_reading(built: Path, pool: str) -> tuple[str, float]:
    """The label-free audit's closest query-blind rule on the pool as written, and its p-value
    corrected for the audit's readings of the pool (as the build summary corrects it)."""
    from mmlongembed.checks.shortcuts import audit_pool

    tables = read_built_pool(built, pool)
    verdict = audit_pool(tables.corpus, tables.qrels, tables.queries)
    return verdict["worst_rule"], min(1.0, verdict["worst_p_value"] * verdict["rules"])
