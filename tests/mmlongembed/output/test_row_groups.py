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


def decoded_row_groups(monkeypatch) -> list[int]:
    """From now on, the index of each row group a reader decodes (reading its pool column alone,
    to find which pools a row group holds, is not decoding it)."""
    import pyarrow.parquet as pq

    decoded, read_row_group = [], pq.ParquetFile.read_row_group

    def spy(handle, k, columns=None, **options):
        if columns != ["pool"]:
            decoded.append(k)
        return read_row_group(handle, k, columns=columns, **options)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    return decoded


def row_groups_holding(path, pool: str) -> set[int]:
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    return {k for k in range(handle.num_row_groups)
            if pool in handle.read_row_group(k, columns=["pool"]).column("pool").to_pylist()}


def test_a_pools_config_decodes_only_the_row_groups_that_hold_its_rows(tmp_path, small_row_groups, monkeypatch):
    """Validation reads every pool of a shard: decoding the whole shard for each made it quadratic."""
    import pyarrow.parquet as pq

    pools = [grouped_pool(256), grouped_pool(512, shift=1), grouped_pool(1024, shift=2)]
    root = write_fixture_build(tmp_path / "build", pools)
    spec = configs_from_card(root / "README.md")["fixture-hard-256-corpus"]
    holding = row_groups_holding(root / spec.path, "fixture-hard-256")
    assert 0 < len(holding) < pq.ParquetFile(root / spec.path).num_row_groups  # the fixture spreads pools unevenly
    decoded = decoded_row_groups(monkeypatch)
    rows = read_config(root, spec)
    assert set(decoded) == holding
    assert len(rows["_id"]) == len(pools[0].candidates)


def test_a_shard_rewritten_in_place_is_read_afresh(tmp_path, small_row_groups):
    """The pool -> row groups index and the row groups kept are per file; a file replaced under
    the same name must not be read through the old file's index or row groups."""
    import shutil

    from mmlongembed.output.layout import RowGroupCache

    first = write_fixture_build(tmp_path / "first", [grouped_pool(256, n_queries=2),
                                                     grouped_pool(512, n_queries=30, shift=1)])
    other = write_fixture_build(tmp_path / "other", [grouped_pool(256), grouped_pool(512, shift=1)])
    spec = configs_from_card(first / "README.md")["fixture-hard-256-corpus"]
    other_spec = configs_from_card(other / "README.md")["fixture-hard-256-corpus"]
    assert len(read_config(first, spec)["_id"]) == 2 * 4
    # the rewritten file holds the pool in row groups the first file's index does not name
    assert row_groups_holding(other / other_spec.path, "fixture-hard-256") - row_groups_holding(
        first / spec.path, "fixture-hard-256")
    cache = RowGroupCache(budget=1 << 30)
    assert read_config(first, spec, cache) == read_config(first, spec)
    shutil.copyfile(other / other_spec.path, first / spec.path)
    assert read_config(first, spec) == read_config(other, other_spec)
    assert read_config(first, spec, cache) == read_config(other, other_spec)  # nor through the old row groups
    assert len(read_config(first, spec)["_id"]) == 16 * 4


def test_pools_read_through_one_cache_decode_each_row_group_once_and_read_the_same_rows(
        tmp_path, small_row_groups, monkeypatch):
    import pyarrow.parquet as pq

    from mmlongembed.output.layout import RowGroupCache

    pools = [grouped_pool(256), grouped_pool(512, shift=1), grouped_pool(1024, shift=2)]
    root = write_fixture_build(tmp_path / "build", pools)
    specs = configs_from_card(root / "README.md")
    uncached = {p.name: read_config(root, specs[f"{p.name}-corpus"]) for p in pools}
    decoded = decoded_row_groups(monkeypatch)
    cache = RowGroupCache(budget=1 << 30)
    cached = {p.name: read_config(root, specs[f"{p.name}-corpus"], cache) for p in pools}
    assert cached == uncached
    assert sorted(decoded) == sorted(set(decoded))  # each row group decoded once for the three pools
    assert len(decoded) == pq.ParquetFile(root / specs["fixture-hard-256-corpus"].path).num_row_groups


class Sized:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_the_row_group_cache_keeps_the_most_recent_tables_within_its_budget():
    from mmlongembed.output.layout import RowGroupCache

    cache, reads = RowGroupCache(budget=100), []

    def table(key, nbytes):
        return cache.get(key, lambda: reads.append(key) or Sized(nbytes))

    table("a", 40), table("b", 40), table("a", 40)  # a read once, and now the most recent
    table("c", 40)  # over budget: b, the least recently used, goes
    assert cache.held <= 100
    table("a", 40), table("c", 40)
    assert reads == ["a", "b", "c"]
    table("b", 40)
    assert reads == ["a", "b", "c", "b"]
    table("huge", 101), table("huge", 101)  # past the budget alone: read each time, never kept
    assert reads[-2:] == ["huge", "huge"] and cache.held <= 100
