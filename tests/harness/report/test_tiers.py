"""The lexical tier's table: Easy and Hard on the lexical pool's own queries, in the pool and
among each query's group."""

import pytest

from harness.report.tiers import tier_data, tier_table


def _row(pool, difficulty, queries, p_at_1, group_p_at_1, candidates, group_size=4):
    return {"model": "bm25", "pool": pool, "task": "logical_summarization", "dataset": "govreport",
            "difficulty": difficulty, "length": 8192, "depth": None, "n_queries": len(queries),
            "n_candidates": candidates, "per_query": {"p@1": p_at_1},
            "breakdown": {"group": {"_id": queries, "p_at_1": group_p_at_1, "size": [group_size] * len(queries)}}}


def test_the_paper_tiers_are_read_on_the_lexical_pools_queries_alone():
    rows = [
        _row("govreport-easy-8k", "easy", ["q:a", "q:b", "q:c"], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0], 12),
        _row("govreport-hard-8k", "hard", ["q:a", "q:b", "q:c"], [1.0, 0.0, 1.0], [1.0, 0.5, 1.0], 12),
        # q:b left the lexical pool: Easy and Hard are read on q:a and q:c
        _row("govreport-lexical-8k", "lexical", ["q:c", "q:a"], [0.0, 1.0], [0.25, 1.0], 8),
    ]
    (entry,) = tier_data(rows)
    assert entry["tiers"]["easy"]["pool"]["p_at_1"] == pytest.approx(0.5)
    assert entry["tiers"]["hard"]["pool"]["p_at_1"] == pytest.approx(1.0)
    assert entry["tiers"]["hard"]["group"]["p_at_1"] == pytest.approx(1.0)
    assert entry["tiers"]["lexical"]["group"]["p_at_1"] == pytest.approx(0.625)
    assert entry["tiers"]["lexical"]["group"]["chance"] == pytest.approx(0.25)
    assert entry["tiers"]["lexical"]["pool"]["chance"] == pytest.approx(1 / 8)
    assert all(entry["tiers"][t]["pool"]["queries"] == 2 for t in ("easy", "hard", "lexical"))
    table = tier_table(rows)
    assert "| bm25 | govreport | 8k |" in table and "62.5 n=2" in table


def test_a_run_without_lexical_pools_has_no_tier_table():
    rows = [_row("govreport-hard-8k", "hard", ["q:a"], [1.0], [1.0], 4)]
    assert tier_data(rows) == [] and tier_table(rows) == ""


def test_a_figure_at_chance_among_the_group_is_marked_so():
    queries = [f"q:{k}" for k in range(40)]
    rows = [_row("govreport-lexical-8k", "lexical", queries, [0.0] * 40, [1.0] * 10 + [0.0] * 30, 160)]
    (entry,) = tier_data(rows)
    assert entry["tiers"]["lexical"]["group"]["ci95"] is not None
    assert "(at chance: 25.0)" in tier_table(rows)


def test_the_needle_grids_lexical_cells_keep_their_backgrounds_apart_and_stay_out_of_table_4():
    """The needle grid asks the same queries in one cell per background: each cell's figures
    count (the tier does not keep one background's per query), and Table 4 reads the paper's
    cells alone."""
    from harness.report.tables import grid_cell

    def cell(background, difficulty, p_at_1):
        row = _row(f"needle-text-{'lexical-' if difficulty == 'lexical' else ''}{background}-8k-d50", difficulty,
                   ["q:n00", "q:n01"], p_at_1, p_at_1, 25, group_size=1)
        row.update(task="visual_grounding", dataset="needle", depth=50.0,
                   extra={"needle_modality": "text", "background": background})
        return row

    rows = [cell("text", "lexical", [1.0, 0.0]), cell("mixed", "lexical", [0.0, 0.0]), cell("text", "grid", [1.0, 1.0])]
    (entry,) = tier_data(rows)
    assert entry["tiers"]["lexical"]["pool"]["queries"] == 4
    assert entry["tiers"]["lexical"]["pool"]["p_at_1"] == pytest.approx(0.25)
    assert entry["tiers"]["lexical"]["pool"]["chance"] == pytest.approx(1 / 25)
    assert [grid_cell(r) for r in rows] == [None, None, ("text", "text")]
