"""Output readable at any size (issue 24): no data file holds a row group that decodes past what
Arrow can read back; row groups are sized by bytes, each with its own image dictionary; the
validator reads a file a row group at a time; a card renders for a pool it could not read; and a
build whose output could not be read back is refused before anything is rendered."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from mmlongembed.output import rowgroups, writer as output
from mmlongembed.output.layout import configs_from_card, read_config
from mmlongembed.testing import photo, pool_with_images, write_fixture_build

BUDGET = 300_000  # bytes a row group may hold decoded: four candidates of three 160x160 noise photos


@pytest.fixture()
def small_row_groups(monkeypatch):
    monkeypatch.setattr(output, "ROW_GROUP_BYTES", BUDGET)


def _decoded_row_group_bytes(path) -> list[int]:
    """What each row group of a file holds once read (images at every placement)."""
    with pq.ParquetFile(path) as handle:
        return [rowgroups.value_bytes(row) for k in range(handle.num_row_groups)
                for row in [handle.read_row_group(k).to_pydict()]]


def test_a_file_past_the_budget_is_written_in_row_groups_that_each_stay_under_it(tmp_path, small_row_groups):
    import datasets

    images = [photo(k, side=160) for k in range(5)]
    placed = {256: images[:3], 512: [images[0], *images[3:]]}  # one photo shared: one shard
    pools = [pool_with_images(length, placed[length], n_queries=4) for length in placed]
    root = write_fixture_build(tmp_path / "build", pools)
    specs = configs_from_card(root / "README.md")
    corpus = {spec.path for spec in specs.values() if spec.name.endswith("-corpus")}
    assert len(corpus) == 1
    path = root / corpus.pop()
    per_group = _decoded_row_group_bytes(path)
    assert len(per_group) > 2
    assert max(per_group) <= BUDGET
    assert len(per_group) == 4
    # each row group stores the three photos its rows place, once (not once per placement, nor
    # the shard's five in every row group)
    assert path.stat().st_size < 1.2 * 4 * 3 * max(map(len, images))
    for name, spec in specs.items():
        loaded = datasets.load_dataset(str(root), name, split="test")
        rows = read_config(root, spec)
        assert loaded.num_rows == len(next(iter(rows.values())))
        if name.endswith("-corpus"):
            assert loaded["_id"] == rows["_id"]
            assert [[im.size for im in row] for row in loaded["images"]] == [[(160, 160)] * 3] * 8
            assert [[im["bytes"] for im in row] for row in rows["images"]] == [placed[int(name.split("-")[2])]] * 8


def test_the_reader_holds_an_image_placed_by_many_rows_once(tmp_path, small_row_groups):
    images = [photo(k, side=160) for k in range(3)]
    root = write_fixture_build(tmp_path / "build", [pool_with_images(256, images, n_queries=4)])
    rows = read_config(root, configs_from_card(root / "README.md")["fixture-easy-256-corpus"])
    placed = [im["bytes"] for row in rows["images"] for im in row]
    assert len(placed) == 24 and len({id(b) for b in placed}) == 3


def test_a_row_past_what_arrow_can_read_back_is_refused(monkeypatch):
    monkeypatch.setattr(rowgroups, "READ_BACK_LIMIT", 1000)
    with pytest.raises(output.UserError, match="more than a parquet file can be read back"):
        rowgroups.row_group_slices([{"images": [b"x" * 600]}, {"images": [b"y" * 1200]}], budget=10_000)


def test_row_groups_follow_the_budget_and_keep_every_row_in_order():
    rows = [{"text": "a" * n} for n in (10, 30, 50, 5, 5, 100)]
    slices = rowgroups.row_group_slices(rows, budget=60)
    assert [(s.start, s.stop) for s in slices] == [(0, 2), (2, 5), (5, 6)]
    assert rowgroups.row_group_slices([], budget=60) == [slice(0, 0)]


def _govreport_sources(tmp_path):
    from builders._govreport_fixtures import write_govreport_jsonl
    from builders.govreport import GovReportConfig

    write_govreport_jsonl(tmp_path / "src" / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
    return GovReportConfig(sources=str(tmp_path / "src"), lengths=(2048, 4096), max_queries_per_pool=4)


def test_the_validator_lets_each_pool_go_before_it_reads_the_next(tmp_path, monkeypatch):
    """The validator holds one pool's rows (and images) at a time: the pool it checked last is let
    go before the next is read (it was held until the read returned, two pools at once)."""
    import gc
    import weakref

    from mmlongembed.checks import build_checks
    from mmlongembed.core import parallel
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder

    out = run_build(get_builder("govreport"), _govreport_sources(tmp_path), tmp_path / "out", progress=False,
                    quiet=True)
    # on one core every pool is checked on one background thread, one after another
    monkeypatch.setattr(parallel, "available_cores", lambda: 1)
    read_pool, held, alive_at_read = build_checks.read_pool, [], []

    def watched(root, specs, row, *cache):
        gc.collect()
        alive_at_read.append(sum(ref() is not None for ref in held))
        tables = read_pool(root, specs, row, *cache)
        held.append(weakref.ref(tables))
        return tables

    monkeypatch.setattr(build_checks, "read_pool", watched)
    result = build_checks.validate_tables(out, configs_from_card(out / "README.md"), "govreport")
    assert not result.problems and len(held) == result.checked["pools"] >= 2
    assert alive_at_read == [0] * len(held)


def test_a_pool_that_cannot_be_read_back_is_the_one_line_problem_and_the_card_still_renders(tmp_path, monkeypatch):
    from mmlongembed.build import run as build
    from mmlongembed.checks import build_checks
    from mmlongembed.core.builder import get_builder
    from mmlongembed.core.errors import UserError

    builder, config = get_builder("govreport"), _govreport_sources(tmp_path)
    read_pool = build_checks.read_pool
    broken = "govreport-hard-4k"

    def unreadable(root, specs, row, *cache):
        if row["pool"] == broken:
            raise UserError(f"{broken}: not a readable parquet file (ArrowNotImplementedError: Nested data "
                            "conversions not implemented for chunked array outputs)")
        return read_pool(root, specs, row, *cache)

    contexts, write_card = [], build.write_card
    monkeypatch.setattr(build_checks, "read_pool", unreadable)
    monkeypatch.setattr(build, "write_card", lambda b, context, d: contexts.append(context))
    with pytest.raises(UserError, match="validation failed with 1 problem;"):
        build.run_build(builder, config, tmp_path / "out", progress=False)
    assert not contexts  # a failed build renders no card: its problems are the last word
    assert not (tmp_path / "out" / "govreport").exists()

    # the card of a build whose audit lacks a pool (it could not be read) still renders
    monkeypatch.setattr(build_checks, "read_pool", read_pool)
    build.run_build(builder, config, tmp_path / "ok", progress=False)
    (context,) = contexts
    context["label_free_audit"] = {k: v for k, v in context["label_free_audit"].items() if k != broken}
    built = tmp_path / "ok" / "govreport"  # the card's folder holds the data croissant.json describes
    write_card(builder, context, built)
    text = (built / "README.md").read_text(encoding="utf-8")
    assert f"| `{broken}` |" in text and "not audited: the pool could not be read back" in text


def test_an_output_that_could_not_be_read_back_is_refused_in_one_line_before_any_page_is_rendered(
        tmp_path, monkeypatch, capsys):
    pytest.importorskip("pypdfium2")
    from builders._mmlongbench_fixtures import write_paged_sources
    from mmlongembed.build import capacity
    from mmlongembed.cli import main
    from mmlongembed.media.pdf import PageRenderer

    write_paged_sources(tmp_path / "src", n_documents=6, pages=(14, 22))
    rendered = []
    monkeypatch.setattr(PageRenderer, "page", lambda self, pdf, index: rendered.append(index))
    # a read-back limit below the estimate of the longest window (about 1000 tokens of PNG pages,
    # 200 KB): what a real build with pages too large to read back meets at 2 GiB
    monkeypatch.setattr(capacity, "READ_BACK_LIMIT", 150_000)
    args = ["build", "mmlongbench", "--sources", str(tmp_path / "src"), "--output", str(tmp_path / "out"),
            "--llm", "none", "--no-progress", "--dpi", "36", "--max-image-pixels", str(160 * 230),
            "--image-format", "PNG", "--lengths", "512", "1024"]
    assert main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--lengths up to 1024: one candidate would hold about" in error[0]
    assert "more than a parquet file can be read back with" in error[0] and "--max-image-pixels" in error[0]
    assert not rendered and not (tmp_path / "out").exists()


def test_a_peak_beyond_the_memory_available_is_refused_in_one_line_naming_what_to_change(tmp_path, monkeypatch):
    from mmlongembed.build import capacity
    from mmlongembed.core.errors import UserError

    estimate = capacity.OutputEstimate(largest_row_bytes=10 << 20, held_bytes=30 << 30, shrink="shorter --lengths")
    monkeypatch.setattr(capacity, "available_memory", lambda: 24 << 30)
    with pytest.raises(UserError, match=r"^--lengths up to 32768: the build would hold about 32\.2 GB in memory, "
                                        r"more than the 25\.8 GB available here; choose shorter --lengths$"):
        capacity.check_output(estimate, [8192, 32768])
    capacity.check_output(capacity.OutputEstimate(10 << 20, 20 << 30, "x"), [8192])  # fits: nothing said


def test_no_page_is_held_in_memory_until_the_row_group_placing_it_is_written(tmp_path):
    """MMLongBench at its real size held every placed page (453 MB) from the summary step through
    validation: pages now stay in the page store until the writer reads them, a row group at a
    time, and the store goes when the pools placing its pages go."""
    pytest.importorskip("pypdfium2")
    import gc

    from builders._mmlongbench_fixtures import write_paged_sources
    from builders.mmlongbench import MMLongBenchBuilder, MMLongBenchConfig
    from mmlongembed.core.builder import BuildReport
    from mmlongembed.media.page_store import StoredPage

    write_paged_sources(tmp_path / "src", n_documents=8, pages=(14, 22))
    builder = MMLongBenchBuilder()
    config = MMLongBenchConfig(sources=str(tmp_path / "src"), lengths=(512, 1024), max_queries_per_pool=4,
                               dpi=36.0, max_image_pixels=160 * 230)
    report = BuildReport(progress=False)
    sources = builder.load_sources(config, report)
    store = sources.store
    pages = [page for document in sources.pages.values() for page in document]
    assert len({page.sha256 for page in pages}) == len(list(store.root.glob("*.img")))
    pools = builder.build_pools(builder.run_steps(sources, config, report), config, report)
    assert store.reads == 0  # planning and assembling the pools read no page back
    placed = [s.image for pool in pools for c in pool.candidates for s in c.document.segments]
    assert placed and all(isinstance(image, StoredPage) for image in placed)
    distinct = set(placed)
    # the row groups are sized by the bytes a stored page stands for, as by the bytes themselves
    assert rowgroups.value_bytes({"images": placed[:3]}) == sum(len(image.data) for image in placed[:3])
    reads = store.reads
    written = output.write_tables(pools, tmp_path / "out", seed=0, builder=builder.name, progress=False)
    # each distinct page read once per row group placing it (one row group here), never per placement
    assert store.reads - reads == len(distinct) < len(placed)
    assert written.storage.distinct_images == len(distinct)
    specs = {spec.name: spec for spec in written.specs}
    rows = read_config(tmp_path / "out", next(s for n, s in specs.items() if n.endswith("-corpus")))
    assert {im["bytes"] for row in rows["images"] for im in row} <= {page.data for page in distinct}
    root = store.root
    del sources, store, pages, pools, placed, distinct, written
    gc.collect()
    assert not root.exists()  # the store goes with the last pool placing its pages


def test_the_reader_makes_each_image_of_a_row_group_once_not_once_per_placement(tmp_path):
    """The validator reads a pool a row group at a time; a page placed by every candidate of a
    row group was made a Python object once per placement (the whole row group's placements at
    once) before it was interned: it is now read through the file's dictionary."""
    import tracemalloc

    image = photo(7, side=300)  # about 100 KB of noise
    # a pool of another length in the same shard (they share the photo), with photos of its own
    others = [image, *(photo(k, side=300) for k in range(8, 12))]
    root = write_fixture_build(tmp_path / "build", [pool_with_images(256, [image], n_queries=12),
                                                    pool_with_images(512, others, n_queries=2)])
    spec = configs_from_card(root / "README.md")["fixture-easy-256-corpus"]
    with pq.ParquetFile(root / spec.path) as handle:
        assert handle.num_row_groups == 1 and handle.metadata.num_rows == 24 + 4
    tracemalloc.start()
    try:
        rows = read_config(root, spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    placed = [im["bytes"] for row in rows["images"] for im in row]
    assert len(placed) == 24 and all(b == image for b in placed)
    # 24 placements of ~100 KB: once per placement is past 2.4 MB; the other pool's four photos
    # 0.4 MB; this pool's one photo once, with the rows, about 0.2 MB
    assert peak < 3 * len(image), (peak, len(image))


def test_a_replacement_page_equal_to_a_positive_page_skips_the_hard_query(tmp_path):
    """Real PDFs repeat pages (blank or divider pages): a hard variant whose replacement pages
    equal a page the positive shows would keep what it was to lose (MMLongBench-Doc at its real
    size failed its own `replaced_slots` check on three such variants)."""
    pytest.importorskip("pypdfium2")
    from builders._mmlongbench_fixtures import write_paged_sources
    from builders.mmlongbench import MMLongBenchBuilder, MMLongBenchConfig
    from mmlongembed.core.builder import BuildReport

    write_paged_sources(tmp_path / "src", n_documents=8, pages=(14, 22))
    builder = MMLongBenchBuilder()
    config = MMLongBenchConfig(sources=str(tmp_path / "src"), lengths=(512,), max_queries_per_pool=4,
                               dpi=36.0, max_image_pixels=160 * 230)
    report = BuildReport(progress=False)
    planned = builder.run_steps(builder.load_sources(config, report), config, report)
    (plan,) = planned.bands
    doc_id = next(d for d in plan.eligible if d in plan.queries)
    n, page_plans = plan.windows[doc_id]
    pages = planned.sources.pages[doc_id]
    donor = page_plans[0].donor
    repeated = pages[donor[0]]  # a repeated page: a donor page shows the window's last page
    repeated.path, repeated.sha256 = pages[n - 1].path, pages[n - 1].sha256
    pools = builder.build_pools(planned, config, report)
    hard = next(p for p in pools if p.difficulty == "hard")
    assert f"q:{doc_id}" not in {q.id for q in hard.queries} and hard.queries
    assert report.skipped["hard_512_replacement_page_equals_a_positive_page"] == 1
