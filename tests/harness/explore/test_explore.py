"""`mmle explore`: the static site, built from a fixture benchmark with edits of every kind, opened
from disk in a headless Chromium and read as a person would (tests/support/browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.explore.marks import sentence_spans, text_edits
from mmlongembed.cli import main as mmle
from tests.support.browser import Browser, require_chromium
from tests.support.fixtures_explore import EVIDENCE, NEEDLE_MISSES, NEEDLE_QUERIES, REFILLS, explore_benchmark


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The fixture benchmark, a BM25 run on it, and the site of both."""
    tmp = tmp_path_factory.mktemp("explore")
    bench = explore_benchmark(tmp / "bench")
    results = tmp / "results"
    assert mmle(["score", "--dataset", str(bench), "--model", "bm25", "--output", str(results), "--no-cache",
                 "--quiet", "--no-plots", "--bootstrap", "50"]) == 0
    output = tmp / "site"
    assert mmle(["explore", str(bench), "--results", str(results), "--output", str(output), "--quiet"]) == 0
    return {"bench": bench, "results": results, "site": output, "tmp": tmp}


def release(site_dir: Path) -> dict:
    text = (site_dir / "data" / "release.js").read_text(encoding="utf-8")
    return json.loads(text.split(" = ", 1)[1].rstrip().rstrip(";"))


def test_text_edits_find_the_removed_sentence_and_its_refill():
    positive = "One two. Marlow Keep was built in 1931. Three four. Five six."
    variant = "One two. The fair moved east. Three four. Five six."
    removed, inserted = text_edits(positive, variant)
    assert [positive[r["start"]:r["end"]] for r in removed] == ["Marlow Keep was built in 1931."]
    assert [variant[r["start"]:r["end"]] for r in inserted] == ["The fair moved east."]
    assert text_edits(positive, "Entirely different. Nothing shared here. At all. Really.") is None
    text = "A b.\nC d! E"
    assert [text[a:b] for a, b in sentence_spans(text)] == ["A b.", "C d!", "E"]


def test_site_files_images_once_and_sizes_stated(site):
    data = release(site["site"])
    assert {p["pool"] for p in data["pools"]} == {"hotpotqa-hard-1k", "needle-text-text-1k-d50", "mmlongbench-hard-1k",
                                                  "activitynet-hard-48"}
    # pages: 2 x (4 + 2 swapped in), frames: 6; a page kept by the variant is the positive's file
    assert data["size"]["images"] == 18 == len(list((site["site"] / "img").iterdir()))
    assert all((site["site"] / p["file"]).is_file() for p in data["pools"])
    assert data["size"]["site_bytes"] > 0 and data["size"]["release_bytes"] > 0
    assert data["models"] == ["bm25"] and data["confusion"]
    hotpot = next(p for p in data["pools"] if p["pool"] == "hotpotqa-hard-1k")
    predictions = [r for r in pq.read_table(site["results"] / "predictions.parquet").to_pylist()
                   if r["pool"] == "hotpotqa-hard-1k"]
    assert hotpot["models"]["bm25"]["wrong"] == sum(r["p_at_1"] < 1 for r in predictions)


def test_explore_refuses_what_is_not_a_build_in_one_line(site, capsys, tmp_path):
    assert mmle(["explore", str(tmp_path), "--output", str(tmp_path / "s")]) == 2
    assert mmle(["explore", str(site["bench"]), "--results", str(tmp_path), "--output", str(tmp_path / "s")]) == 2
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    assert mmle(["explore", str(site["bench"]), "--output", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "not a built benchmark" in err[0] and "predictions.parquet" in err[1]
    assert "not an earlier `mmle explore` site" in err[2] and (tmp_path / "mine" / "keep.txt").is_file()


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_site_is_the_same_whatever_the_number_of_workers(site, tmp_path):
    """Pools spread over two worker processes (each writing thumbnails into the same folder) give the
    site one process writes, byte for byte."""
    one, two = tmp_path / "one", tmp_path / "two"
    for output, jobs in ((one, "1"), (two, "2")):
        assert mmle(["explore", str(site["bench"]), "--results", str(site["results"]), "--output", str(output),
                     "--quiet", "--jobs", jobs]) == 0
    assert _files(one) == _files(two) and any(name.startswith("img/") for name in _files(one))


def test_a_failed_site_build_leaves_the_earlier_site_whole(site, tmp_path, monkeypatch):
    import harness.explore.site as explore

    output = tmp_path / "site"
    assert mmle(["explore", str(site["bench"]), "--output", str(output), "--quiet", "--jobs", "1"]) == 0
    before = _files(output)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(explore, "pool_payload", broken)
    with pytest.raises(OSError):
        explore.build_site(site["bench"], [], output, progress=False)
    assert _files(output) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no partial folder left beside it


@pytest.fixture(scope="module")
def page(site):
    browser = Browser(require_chromium())
    try:
        yield browser.open((site["site"] / "index.html").resolve().as_uri())
    finally:
        browser.close()


def test_home_shows_table1_figure_pools_filters_and_confusion(page):
    assert page.wait("document.querySelectorAll('#pools-table tbody tr').length") == 4
    assert page.eval("document.getElementById('pools-count').textContent") == "4 of 4 pools"
    assert page.eval("document.querySelectorAll('#table1 tbody tr').length") == 4
    assert page.eval("document.querySelector('#confusion table[data-dataset=hotpotqa]') !== null")
    page.eval("const s = document.getElementById('filter-difficulty'); s.value = 'hard'; s.dispatchEvent(new Event('change'))")
    assert page.wait("document.getElementById('pools-count').textContent === '3 of 4 pools'")
    assert "bm25" in page.eval("document.querySelector('#pools-table thead').textContent")
    assert page.errors() == []


def test_no_page_shows_undefined_or_nan(page, site):
    """Every page of the site, rendered: no field read under a wrong name (`undefined`) and no
    figure computed from one (`NaN`)."""
    import re

    pools = json.loads((site["site"] / "data" / "release.js").read_text().split(" = ", 1)[1].rstrip().rstrip(";"))
    names = [row["pool"] for row in pools["pools"]]
    assert len(names) == 4
    for target in ["", *(f"pool={name}" for name in names)]:
        page.go(target)
        ready = "document.getElementById('table1') !== null" if not target else \
            "document.getElementById('query-count') !== null && document.querySelectorAll('#query-view .cand').length"
        page.wait(ready)
        shown = page.eval("document.body.innerText")
        assert not re.search(r"\bundefined\b|\bNaN\b", shown), (target, re.findall(r".{0,40}(?:undefined|NaN).{0,20}",
                                                                                       shown))
    page.go("")
    row = page.eval("[...document.querySelectorAll('#table1 tbody tr')][0].textContent")
    assert "(25)" in row  # the paper's candidates ranked per query beside ours (NeedleBench: 25)
    # one size unit: MB of 10^6 bytes, in the footer as in `mmle explore`'s line and the build summary
    size = release(site["site"])["size"]
    footer = page.eval("document.getElementById('footer').textContent")
    assert f"site {size['site_bytes'] / 1e6:.1f} MB" in footer and f"{size['release_bytes'] / 1e6:.1f} MB" in footer
    assert page.eval("fmtBytes(2500000)") == "2.5 MB"
    assert page.errors() == []


def test_hotpotqa_query_marks_the_removed_sentence_and_its_refill(page):
    page.go("pool=hotpotqa-hard-1k")
    assert page.wait("document.getElementById('query-count') && document.getElementById('query-count').textContent") \
        == "3 of 3 queries"
    assert page.eval("document.querySelectorAll('#query-list li').length") == 3
    assert page.eval("document.querySelectorAll('#query-view .cand').length") >= 4
    removed = page.eval("[...document.querySelectorAll('.cand[data-role=positive] mark.m-removed')]"
                        ".map(m => [m.dataset.variant, m.textContent, getComputedStyle(m).backgroundColor])")
    assert sorted((v, t) for v, t, _ in removed) == [("drop_first", EVIDENCE[0]), ("drop_last", EVIDENCE[1])]
    assert all(colour not in ("rgba(0, 0, 0, 0)", "transparent") for _, _, colour in removed)  # highlighted
    variant = ".cand[data-role=hard_negative][data-variant=drop_first]"  # the query's own, not another's pick
    assert page.eval(f"document.querySelector('{variant} mark.m-inserted').textContent") == REFILLS["drop_first"]
    assert page.eval(f"document.querySelector('{variant} .gap') !== null")  # a window around the edit, not all
    page.eval(f"document.querySelector('{variant} .gap').click()")
    assert page.wait(f"document.querySelector('{variant} .gap') === null")
    shown = page.eval(f"document.querySelector('{variant} .body').textContent")
    assert EVIDENCE[0] not in shown and EVIDENCE[1] in shown and REFILLS["drop_first"] in shown
    assert page.eval("document.querySelectorAll('#picks tr[data-model=bm25]').length") == 1
    assert page.errors() == []


def test_needle_marker_at_its_recorded_depth_and_pages_of_queries(page, site):
    page.go("pool=needle-text-text-1k-d50")
    assert page.wait("document.getElementById('query-count') && document.getElementById('query-count').textContent") \
        == f"{NEEDLE_QUERIES} of {NEEDLE_QUERIES} queries"
    assert page.eval("document.querySelectorAll('#query-list li').length") == 20  # the first page
    audit = _audit(site["bench"], "needle-text-text-1k-d50")
    first = page.eval("document.querySelector('.cand[data-role=positive]').dataset.id")
    marker = page.eval("document.querySelector('.needle-marker').style.left")
    assert float(marker.rstrip("%")) == pytest.approx(100 * audit[first]["realised_depth"], abs=0.01)
    needle = json.loads(audit[first]["provenance"])["needle_text"]
    assert page.eval("document.querySelector('mark.m-needle').textContent") == needle
    page.eval("[...document.querySelectorAll('.pager button')].find(b => b.textContent.startsWith('next')).click()")
    assert page.wait("document.querySelectorAll('#query-list li').length === 3")
    assert page.errors() == []


def _audit(bench: Path, pool: str) -> dict:
    from mmlongembed.output.layout import read_built_pool

    corpus = read_built_pool(bench, pool).corpus
    return {cid: {k: corpus[k][i] for k in corpus} for i, cid in enumerate(corpus["_id"])}


def test_page_swap_thumbnails_load_and_swapped_pages_are_marked(page):
    page.go("pool=mmlongbench-hard-1k")
    page.wait("document.querySelectorAll('#query-view .thumb img').length")
    page.eval("document.querySelectorAll('#query-view .thumb img').forEach(i => i.scrollIntoView())")
    assert page.wait("[...document.querySelectorAll('#query-view .thumb img')]"
                     ".every(i => i.complete && i.naturalWidth > 0)")
    own = "#query-view .cand:not([data-role=other_query])"  # BM25's pick from another query may follow
    assert page.eval(f"document.querySelectorAll('{own} .thumb img').length") == 8
    assert page.eval("document.querySelectorAll('.cand[data-variant=swap_middle] .thumb.im-inserted').length") == 2
    assert page.eval("document.querySelectorAll('.cand[data-role=positive] .thumb.im-removed').length") == 2
    assert page.errors() == []


def test_temporal_frames_strip_with_blocks_and_the_moved_ones(page):
    page.go("pool=activitynet-hard-48")
    page.wait("document.querySelectorAll('.cand .block').length")
    assert page.eval("document.querySelectorAll('.cand[data-role=positive] .block').length") == 3
    assert page.eval("document.querySelectorAll('.cand[data-role=positive] .block.moved').length") == 0
    moved = page.eval("[...document.querySelectorAll('.cand[data-variant=front_shuffle] .block.moved')]"
                      ".map(b => +b.dataset.block)")
    assert moved == [1, 0]
    assert page.errors() == []


def test_wrong_filter_lists_the_queries_a_model_got_wrong(page, site):
    pool = "needle-text-text-1k-d50"
    rows = [r for r in pq.read_table(site["results"] / "predictions.parquet").to_pylist() if r["pool"] == pool]
    wrong = {r["_id"] for r in rows if r["p_at_1"] < 1}
    assert len(wrong) == NEEDLE_MISSES  # the queries that share no word with any candidate
    page.go(f"pool={pool}&wrong=bm25")
    assert page.wait("document.getElementById('query-count') && document.getElementById('query-count').textContent") \
        == f"{NEEDLE_MISSES} of {NEEDLE_QUERIES} queries"
    assert page.eval("document.querySelectorAll('#query-list li').length") == NEEDLE_MISSES
    assert page.eval("document.querySelectorAll('#query-list li .ok').length") == 0
    assert page.eval("document.querySelectorAll('#query-list li .bad').length") == NEEDLE_MISSES
    assert page.eval("[...document.querySelectorAll('#query-list li')].every(li => li.textContent.startsWith('zzzz'))")
    assert page.errors() == []


def test_word_stats_of_variants_from_their_edits_equal_counting_the_whole_text(site, tmp_path):
    from harness.explore.site import ImageStore, pool_payload
    from mmlongembed.output.layout import configs_from_card, pool_rows
    from mmlongembed.ops.wordstats import text_features

    specs = configs_from_card(site["bench"] / "README.md")
    row = next(r for r in pool_rows(site["bench"], specs) if r["pool"] == "hotpotqa-hard-1k")
    payload = pool_payload(site["bench"], specs, row, ImageStore(tmp_path / "img", 64))
    variants = [c for c in payload["candidates"] if c["role"] == "hard_negative"]
    assert len(variants) == 6 and all(c["marks"] for c in variants)  # each derived from its positive's counts
    for candidate in payload["candidates"]:
        text = "".join(payload["pieces"][k] for k in candidate["text"])
        assert candidate["word_stats"] == {k: round(v, 3) for k, v in text_features(text).items()}


def test_a_model_may_come_from_several_runs_but_each_pool_once(site, tmp_path, capsys):
    runs = []
    for name, pool in (("a", "hotpotqa-*"), ("b", "needle-*")):
        runs.append(tmp_path / name)
        assert mmle(["score", "--dataset", str(site["bench"]), "--model", "bm25", "--pools", pool, "--output",
                     str(runs[-1]), "--no-cache", "--quiet", "--no-plots", "--bootstrap", "20"]) == 0
    output = tmp_path / "site"
    assert mmle(["explore", str(site["bench"]), "--results", *map(str, runs), "--output", str(output), "--quiet"]) == 0
    data = release(output)
    scored = {p["pool"] for p in data["pools"] if p["models"]}
    assert data["models"] == ["bm25"] and scored == {"hotpotqa-hard-1k", "needle-text-text-1k-d50"}
    capsys.readouterr()
    assert mmle(["explore", str(site["bench"]), "--results", str(runs[0]), str(site["results"]), "--output",
                 str(output), "--quiet"]) == 2
    assert "bm25 on hotpotqa-hard-1k is in another run too" in capsys.readouterr().err


def test_every_page_of_a_synthetic_component_says_so(site, tmp_path):
    """A release whose video component is synthetic (demo clips): its pools' pages and the home
    page carry SYNTHETIC, the other components' pages do not."""
    import shutil

    bench = tmp_path / "bench"
    shutil.copytree(site["bench"], bench)
    manifest = json.loads((bench / "manifest.json").read_text())
    note = "activitynet: videos: generated demo clips (mmle demo-sources), not ActivityNet's"
    manifest.update(synthetic=[note], components=[{"name": n, "builder": {"name": n}} for n in
                                                  ("hotpotqa", "needle", "mmlongbench", "activitynet")])
    (bench / "manifest.json").write_text(json.dumps(manifest))
    output = tmp_path / "site"
    assert mmle(["explore", str(bench), "--output", str(output), "--quiet"]) == 0
    browser = Browser(require_chromium())
    try:
        page = browser.open((output / "index.html").resolve().as_uri())
        assert page.wait("document.getElementById('table1') !== null")
        assert page.eval("document.querySelector('.synthetic').textContent") == f"SYNTHETIC: {note}"
        for pool, marked in (("activitynet-hard-48", True), ("hotpotqa-hard-1k", False)):
            page.go(f"pool={pool}")
            page.wait("document.getElementById('query-count') !== null")
            assert page.eval("document.querySelector('.synthetic') !== null") == marked, pool
        assert page.errors() == []
    finally:
        browser.close()



def test_a_query_opens_by_its_id_as_mmle_compare_links_it(page, site):
    """`mmle compare` links each flipped query as `#pool=<pool>&qid=<_id>`: the page selects that
    query, whatever its place in the list."""
    from mmlongembed.output.layout import read_built_pool

    ids = read_built_pool(site["bench"], "hotpotqa-hard-1k").queries["_id"]
    page.go(f"pool=hotpotqa-hard-1k&qid={ids[2]}")
    assert page.wait("document.querySelector('#query-list li.selected') && "
                     "document.querySelector('#query-list li.selected').dataset.query") == "2"
    assert page.errors() == []
