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
