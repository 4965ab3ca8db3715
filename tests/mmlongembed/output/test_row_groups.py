"""Each image stored about once (issue 38): the rows that share images share a row group, row
groups stay within their decoded budget, and the layout stays blind (a row's position inside its
query's group says nothing) while every config reads back exactly the rows of its pool."""

from __future__ import annotations

import numpy as np
import pytest

from mmlongembed.checks.shortcuts import audit_pool
from mmlongembed.core.documents import image_segment, text_document
from mmlongembed.core.pools import HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.core.tokens import default_counter
from mmlongembed.output import writer
from mmlongembed.output.layout import OpaqueIds, configs_from_card, read_built_pool, read_config
from mmlongembed.output.rowgroups import plan_row_groups, row_group_slices, value_bytes
from mmlongembed.testing import photo, write_fixture_build


def sliding_windows(n_documents: int, pages: int, window: int, page_bytes: int = 1000):
    """Rows like a paged builder's: windows of ``window`` consecutive pages over each document
    (every window its own unit), in a shuffled order."""
    rows = []
    for d in range(n_documents):
        document = [bytes([d, p % 256, p // 256]) * (page_bytes // 3) for p in range(pages)]
        rows += [{"_id": f"{d}-{start}", "images": document[start:start + window]}
                 for start in range(pages - window + 1)]
    order = np.random.default_rng(7).permutation(len(rows))
    return [rows[int(k)] for k in order]


def stored_image_bytes(rows, plan) -> int:
    """What the images cost with one dictionary per row group."""
    return sum(sum(len(image) for image in {image for k in group for image in rows[k]["images"]}) for group in plan)


def distinct_image_bytes(rows) -> int:
    return sum(len(image) for image in {image for row in rows for image in row["images"]})


def check_plan(rows, units, plan, budget):
    flat = [k for group in plan for k in group]
    assert sorted(flat) == list(range(len(rows)))  # every row once
    assert all(sum(value_bytes(rows[k]) for k in group) <= budget for group in plan)
    group_of = {k: g for g, group in enumerate(plan) for k in group}
    for unit in set(units):
        assert len({group_of[k] for k, u in enumerate(units) if u == unit}) == 1  # a unit is never split


def test_documents_that_fit_the_budget_store_each_page_once():
    rows = sliding_windows(n_documents=8, pages=12, window=4)  # 9 windows of 4 pages: 36 KB a document
    units = [row["_id"] for row in rows]
    budget = 100_000
    plan = plan_row_groups(rows, units, np.random.default_rng(0), budget)
    check_plan(rows, units, plan, budget)
    assert len(plan) == 4  # two documents a row group
    assert stored_image_bytes(rows, plan) == distinct_image_bytes(rows)
    # the rows in their given order cut at the same budget (the layout before) store pages again and again
    cut = [list(range(s.start, s.stop)) for s in row_group_slices(rows, budget)]
    assert stored_image_bytes(rows, cut) > 2 * distinct_image_bytes(rows)


def test_a_document_past_the_budget_is_cut_where_its_windows_overlap_least():
    rows = sliding_windows(n_documents=1, pages=90, window=8)  # 83 windows, 664 KB placed, 90 KB distinct
    units = [row["_id"] for row in rows]
    budget = 80_000  # ten windows a row group
    plan = plan_row_groups(rows, units, np.random.default_rng(0), budget)
    check_plan(rows, units, plan, budget)
    assert stored_image_bytes(rows, plan) <= 1.8 * distinct_image_bytes(rows)
    cut = [list(range(s.start, s.stop)) for s in row_group_slices(rows, budget)]
    assert stored_image_bytes(rows, cut) > 4 * distinct_image_bytes(rows)


def test_the_rows_of_a_unit_share_a_row_group_in_a_seeded_order():
    rows = sliding_windows(n_documents=4, pages=20, window=5)
    units = [row["_id"].split("-")[0] + ("a" if int(row["_id"].split("-")[1]) % 2 else "b") for row in rows]
    budget = 150_000  # a document (two units) a row group
    plan = plan_row_groups(rows, units, np.random.default_rng(1), budget)
    check_plan(rows, units, plan, budget)
    assert plan == plan_row_groups(rows, units, np.random.default_rng(1), budget)
    other = plan_row_groups(rows, units, np.random.default_rng(2), budget)
    assert other != plan and sorted(map(sorted, other)) == sorted(map(sorted, plan))
    # inside a row group the rows of a unit are not kept together: the order is the generator's
    assert all(len({units[k] for k in group}) == 2 for group in plan)
    assert any(sum(units[a] != units[b] for a, b in zip(group, group[1:])) > 1 for group in plan)


def test_a_unit_past_the_budget_is_written_in_runs_of_its_rows_and_rows_without_images_pass_through():
    rows = [{"_id": str(k), "images": [bytes([k]) * 400]} for k in range(10)] + [{"_id": "t", "images": []}]
    plan = plan_row_groups(rows, ["one"] * 10 + ["t"], np.random.default_rng(0), budget=1000)
    assert sorted(k for group in plan for k in group) == list(range(11))
    assert all(sum(value_bytes(rows[k]) for k in group) <= 1000 for group in plan)
    assert plan_row_groups([], [], np.random.default_rng(0), budget=1000) == [[]]


# -- written builds ------------------------------------------------------------------------------------

PAGES = [photo(k, side=40) for k in range(48)]


def grouped_pool(target: int, n_queries: int = 16, shift: int = 0) -> Pool:
    """A hard pool: per query a positive and three negatives, each a window of four pages of the
    query's document (the negatives swap one page for another of the same document), listed
    positive first; the documents' pages are shared with the pools of other lengths."""
    counter = default_counter()
    pool = Pool(name=f"fixture-hard-{target}", task="logical_summarization", dataset="fixture", difficulty="hard",
                band=LengthBand(target=target, lo=1, hi=10 ** 6), modality="image")
    for q in range(n_queries):
        document = PAGES[(q % 6) * 8:(q % 6) * 8 + 8]
        start = (q + shift) % 4
        pool.queries.append(Query(id=f"q{q}", text=f"Which pages tell of stone {q}?", instruction="Find them.",
                                  source_id=f"doc{q % 6}", n_tokens=9))
        for k in range(4):
            pages = list(document[start:start + 4])
            if k:
                pages[k - 1] = document[(start + 3 + k) % 8]
            words = text_document(f"d{q}-{k}", "", counter)
            candidate = words.with_segments(tuple(image_segment(page, 40, 40) for page in pages))
            pool.candidates.append(Candidate(id=f"d{q}-{k}", document=candidate, role=POSITIVE if k == 0 else
                                             HARD_NEGATIVE, group=f"q{q}", source_id=f"doc{q % 6}",
                                             n_tokens=candidate.tokens))
        pool.qrels.append((f"q{q}", f"d{q}-0", 1))
    return pool


@pytest.fixture()
def small_row_groups(monkeypatch):
    # a document's candidates in both pools (six groups of four) fit a row group; each pool spreads over several
    budget = 28 * 4 * len(PAGES[0])
    monkeypatch.setattr(writer, "ROW_GROUP_BYTES", budget)
    return budget


def audit_every_pool(root):
    return {name: audit_pool(tables.corpus, tables.qrels, tables.queries)
            for name in ("fixture-hard-256", "fixture-hard-512") for tables in [read_built_pool(root, name)]}


def test_the_layout_keeps_each_page_once_and_stays_blind(tmp_path, small_row_groups):
    pools = [grouped_pool(256), grouped_pool(512, shift=1)]
    root = write_fixture_build(tmp_path / "build", pools)
    corpus = {spec.path for spec in configs_from_card(root / "README.md").values() if spec.name.endswith("-corpus")}
    assert len(corpus) == 1
    import pyarrow.parquet as pq

    path = root / corpus.pop()
    assert pq.ParquetFile(path).metadata.num_row_groups >= 4
    assert writer.image_column_bytes(path) <= 1.02 * sum(map(len, PAGES))  # every page once
    audits = audit_every_pool(root)
    assert all(audit["applicable"] and audit["groups"] == 16 and audit["passed"] for audit in audits.values()), audits


def test_pools_written_one_after_the_other_store_a_page_in_every_row_group_that_places_it(
        tmp_path, small_row_groups, monkeypatch):
    """The layout before: each pool's rows in its own order, cut at the budget."""
    monkeypatch.setattr(writer, "plan_row_groups", lambda rows, units, rng, budget: [
        list(range(len(rows)))[part] for part in row_group_slices(rows, budget)])
    root = write_fixture_build(tmp_path / "build", [grouped_pool(256), grouped_pool(512, shift=1)])
    path = next(root / spec.path for spec in configs_from_card(root / "README.md").values()
                if spec.name.endswith("-corpus"))
    assert writer.image_column_bytes(path) > 2 * sum(map(len, PAGES))


def test_the_audit_fails_a_layout_that_writes_the_positive_first_in_its_group(tmp_path, small_row_groups, monkeypatch):
    pools = [grouped_pool(256), grouped_pool(512, shift=1)]
    positives = {OpaqueIds(0, "fixture", pool.name)(c.id) for pool in pools for c in pool.candidates
                 if c.role == POSITIVE}
    planned = writer.plan_row_groups

    def positive_first(rows, units, rng, budget):  # the same row groups, each group's rows together, positive first
        plan = []
        for group in planned(rows, units, rng, budget):
            by_unit: dict = {}
            for k in group:
                by_unit.setdefault(units[k], []).append(k)
            plan.append([k for members in by_unit.values()
                         for k in sorted(members, key=lambda k: rows[k]["_id"] not in positives)])
        return plan

    monkeypatch.setattr(writer, "plan_row_groups", positive_first)
    audits = audit_every_pool(write_fixture_build(tmp_path / "build", pools))
    for audit in audits.values():
        assert not audit["passed"]
        assert "min row_order" in {failure["rule"] for failure in audit["failing"]}


def test_every_config_reads_back_exactly_the_rows_of_its_pool(tmp_path, small_row_groups):
    import datasets

    pools = [grouped_pool(256), grouped_pool(512, shift=1)]
    root = write_fixture_build(tmp_path / "build", pools)
    specs = configs_from_card(root / "README.md")
    for pool in pools:
        expected = writer.rows_by_part(pool, 0, "fixture")
        for part in ("corpus", "queries", "qrels"):
            name = f"{pool.name}-{part}"
            rows = read_config(root, specs[name])
            got = [{c: rows[c][k] for c in rows} for k in range(len(next(iter(rows.values()))))]
            if part != "qrels":
                for row in got:
                    row["images"] = [image["bytes"] for image in row["images"]]
            key = (lambda r: r["_id"]) if part != "qrels" else (lambda r: (r["query-id"], r["corpus-id"]))
            assert sorted(got, key=key) == sorted(expected[part], key=key)
            loaded = datasets.load_dataset(str(root), name, split="test")
            assert loaded.num_rows == len(got)
            if part == "corpus":
                assert loaded["_id"] == rows["_id"]  # load_dataset reads the rows as read_config does
