"""The `needle` builder (Visual Grounding grid): fixture builds that run on a fresh clone, checks
that the validator catches broken documents, and real-data builds from ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from builders._needle_checks import confusability
from builders._needle_fixtures import write_needle_sources
from builders.needle import NeedleBuilder, NeedleConfig
from mmlongembed.build.run import run_build
from mmlongembed.core.builder import BuildReport
from mmlongembed.cli import main as cli_main
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.pools import LengthBand
from mmlongembed.readers.needle import read_local_sources
from mmlongembed.checks.summary import expected_p_at_1
from mmlongembed.output.layout import pools_table, read_built_pool
from mmlongembed.ops.needle import cell_name, sigmoid_depths
from tests.support.realdata import shared_data_dir

@pytest.fixture(scope="module")
def sources_dir(tmp_path_factory) -> Path:
    return write_needle_sources(tmp_path_factory.mktemp("needle_sources"))


def tiny_config(sources_dir: Path, **overrides) -> NeedleConfig:
    # the paper's grid alone; the lexical tier has its own tests (test_needle_lexical.py)
    values = dict(sources=str(sources_dir), lengths=(256, 512), depths=(0.0, 50.0, 100.0), needles_per_pool=4,
                  lexical_tier=False)
    values.update(overrides)
    return NeedleConfig(**values)


def build(config: NeedleConfig):
    builder = NeedleBuilder()
    report = BuildReport()
    pools = builder.build_pools(builder.load_sources(config, report), config, report)
    return builder, pools, report


@pytest.fixture(scope="module")
def written(sources_dir, tmp_path_factory) -> Path:
    """The full modality x background grid at two lengths and three depths, written and validated."""
    out = tmp_path_factory.mktemp("needle_out")
    return run_build(NeedleBuilder(), tiny_config(sources_dir), out, progress=False)


def _pool_tables(root: Path, pool: str) -> tuple[dict, dict, dict, dict]:
    tables = read_built_pool(root, pool)
    return tables.row, tables.corpus, tables.queries, tables.qrels


def test_every_cell_is_a_pool_with_one_needle_per_document(written):
    pools = pools_table(written)
    expected = {cell_name(m, b, LengthBand.tight(length), d) for m in ("text", "image")
                for b in ("text", "mixed", "image") for length in (256, 512) for d in (0.0, 50.0, 100.0)}
    assert set(pools["pool"]) == expected
    assert set(pools["difficulty"]) == {"grid"} and set(pools["task"]) == {"visual_grounding"}
    for name, depth, n_q, n_c, extra in zip(pools["pool"], pools["depth"], pools["n_queries"],
                                            pools["n_candidates"], pools["extra"]):
        facts = json.loads(extra)
        assert n_q == n_c == 4
        assert name.startswith(f"needle-{facts['needle_modality']}-{facts['background']}-")
        assert name.endswith(f"-d{depth:g}")
        assert facts["haystack"] == "distinct" and facts["family"]["id"] == facts["needle_family"]
    manifest = json.loads((written / "manifest.json").read_text())
    assert any("BM25 P@1 of text-needle queries" in note for note in manifest["report"]["notes"])


def test_corpus_columns_let_the_harness_draw_the_heatmap(written):
    for pool in ("needle-text-mixed-512-d50", "needle-image-image-256-d0", "needle-image-text-512-d100"):
        row, corpus, queries, qrels = _pool_tables(written, pool)
        facts = json.loads(row["extra"])
        assert set(corpus["depth"]) == {row["depth"]}
        assert set(corpus["background"]) == {facts["background"]}
        assert set(corpus["needle_modality"]) == {facts["needle_modality"]}
        assert len(set(corpus["needle_id"])) == len(corpus["_id"])
        assert all(0.0 <= d <= 1.0 for d in corpus["realised_depth"])
        assert set(queries["needle_id"]) == set(corpus["needle_id"])
        for spec in queries["needle_spec"]:
            assert json.loads(spec)  # the spec of each query is stored with it
        assert all(row["band_min"] <= n <= row["band_max"] for n in corpus["n_tokens"])


def test_realised_depth_follows_the_nominal_depth(written):
    for depth in (0.0, 50.0, 100.0):
        _, corpus, _, _ = _pool_tables(written, f"needle-text-text-512-d{depth:g}")
        for realised, index, text in zip(corpus["realised_depth"], corpus["realised_token_index"], corpus["text"]):
            # a sentence is at most a few dozen tokens: the nearest boundary is never far away
            assert abs(realised - depth / 100) < 0.1
            if depth == 0.0:
                assert index == 0
    _, corpus, _, _ = _pool_tables(written, "needle-image-mixed-512-d100")
    for text, provenance in zip(corpus["text"], corpus["provenance"]):
        p = json.loads(provenance)
        assert p["needle_char_range"][1] == len(text)  # depth 100: the picture closes the document
        assert p["needle_image_index"] == text.count(IMAGE_PLACEHOLDER) - 1


def test_no_needle_or_answer_of_a_pool_is_in_any_haystack(written):
    _, corpus, _, _ = _pool_tables(written, "needle-text-text-512-d50")
    provenances = [json.loads(p) for p in corpus["provenance"]]
    for text, mine in zip(corpus["text"], provenances):
        a, b = mine["needle_char_range"]
        haystack = (text[:a] + text[b:]).lower()
        for other in provenances:
            assert other["needle_text"].lower() not in haystack
            assert other["answer"].lower() not in haystack


def test_image_needles_are_the_pictures_their_queries_describe(written):
    import hashlib

    _, corpus, queries, qrels = _pool_tables(written, "needle-image-text-256-d50")
    spec_of = {q: json.loads(s) for q, s in zip(queries["_id"], queries["needle_spec"])}
    text_of = dict(zip(queries["_id"], queries["text"]))
    row_of = {c: i for i, c in enumerate(corpus["_id"])}
    for q, c in zip(qrels["query-id"], qrels["corpus-id"]):
        assert text_of[q] == spec_of[q]["description"]
        p = json.loads(corpus["provenance"][row_of[c]])
        image = corpus["images"][row_of[c]][p["needle_image_index"]]["bytes"]
        assert hashlib.sha256(image).hexdigest() == p["needle_sha256"]
        with Image.open(__import__("io").BytesIO(image)) as im:
            assert im.size == (160, 160)  # at 256 tokens the needle shrinks to 25 tokens (L/8 cap)


def test_validator_catches_broken_documents(written):
    builder = NeedleBuilder()
    row, corpus, queries, qrels = _pool_tables(written, "needle-text-text-512-d50")
    assert list(builder.validate_pool(row, corpus, queries, qrels)) == []

    def problems(mutate):
        broken = {k: list(v) for k, v in corpus.items()}
        mutate(broken)
        return {p.check for p in builder.validate_pool(row, broken, queries, qrels)}

    other_needle = json.loads(corpus["provenance"][1])["needle_text"]

    def leak(c):  # another needle of the pool shows up in this haystack
        c["text"][0] = c["text"][0] + " " + other_needle
    assert "needle_in_haystack" in problems(leak)

    def twice(c):
        needle = json.loads(c["provenance"][0])["needle_text"]
        c["text"][0] = c["text"][0] + " " + needle
    assert "one_needle" in problems(twice)

    def moved(c):
        c["realised_token_index"][0] += 3
    assert "needle_token_index" in problems(moved)

    def shifted(c):
        c["text"][0] = "Extra words up front. " + c["text"][0]
    assert "needle_position" in problems(shifted)

    row_i, corpus_i, queries_i, qrels_i = _pool_tables(written, "needle-image-mixed-256-d50")
    assert list(builder.validate_pool(row_i, corpus_i, queries_i, qrels_i)) == []
    swapped = {k: list(v) for k, v in corpus_i.items()}
    p0, p1 = json.loads(swapped["provenance"][0]), json.loads(swapped["provenance"][1])
    images0 = list(swapped["images"][0])
    images0[p0["needle_image_index"]] = swapped["images"][1][p1["needle_image_index"]]
    swapped["images"][0] = images0
    assert "needle_position" in {p.check for p in builder.validate_pool(row_i, swapped, queries_i, qrels_i)}


def test_builds_are_reproducible_and_follow_the_seed(sources_dir):
    config = tiny_config(sources_dir, lengths=(256,), depths=(40.0,), backgrounds=("text", "image"))
    _, first, _ = build(config)
    _, again, _ = build(config)
    _, other, _ = build(tiny_config(sources_dir, lengths=(256,), depths=(40.0,), backgrounds=("text", "image"), seed=1))

    def texts(pools):
        return [(c.id, c.document.render()) for p in pools for c in p.candidates]
    assert texts(first) == texts(again)
    assert texts(first) != texts(other)


def test_shared_haystack_makes_documents_differ_in_the_needle_only(sources_dir):
    _, pools, _ = build(tiny_config(sources_dir, lengths=(512,), depths=(50.0,), backgrounds=("text", "image"),
                                    needle_modalities=("text",), shared_haystack=True))
    for pool in pools:
        assert pool.facts["haystack"] == "shared"
        haystacks = set()
        for c in pool.candidates:
            segments = tuple(s for s in c.document.segments if s.origin != "needle")
            haystacks.add(tuple((s.text, s.image) for s in segments))
        assert len(haystacks) == 1
    _, distinct, _ = build(tiny_config(sources_dir, lengths=(512,), depths=(50.0,), backgrounds=("text",),
                                       needle_modalities=("text",)))
    starts = {c.provenance["haystack"]["stream_start_segment"] for c in distinct[0].candidates}
    assert len(starts) == len(distinct[0].candidates)


def test_image_queries_carry_the_needle_picture(sources_dir):
    _, pools, _ = build(tiny_config(sources_dir, lengths=(256,), depths=(0.0,), backgrounds=("text",),
                                    needle_modalities=("image",), image_query="image"))
    pool = pools[0]
    assert pool.query_modality == "image"
    for q in pool.queries:
        assert q.text == IMAGE_PLACEHOLDER and len(q.images) == 1 and q.n_tokens == 64


def test_confusability_is_measured_per_pool(sources_dir):
    builder, pools, report = build(tiny_config(sources_dir, lengths=(256,), depths=(50.0,), backgrounds=("text",)))
    figures = confusability(pools, report.shortcuts)
    assert set(figures["by_modality"]) == {"text", "image"}
    # a description query shares no words with documents whose needle is a picture: BM25 is at chance
    assert figures["by_modality"]["image"][256] == pytest.approx(1 / 4, abs=0.26)
    assert 0.0 <= figures["by_modality"]["text"][256] <= 1.0
    assert expected_p_at_1([1.0, 1.0, 0.5, 1.0], 1) == pytest.approx(1 / 3)
    assert expected_p_at_1([1.0, 2.0], 0) == 0.0


def test_cli_builds_a_subset_of_the_grid(sources_dir, tmp_path, capsys):
    rc = cli_main(["build", "needle", "--sources", str(sources_dir), "--output", str(tmp_path), "--no-progress",
                   "--lengths", "256", "--depth-grid", "sigmoid", "--depth-points", "4", "--backgrounds", "mixed",
                   "--needle-modalities", "image", "--needles-per-pool", "3"])
    assert rc == 0
    pools = pools_table(tmp_path / "needle")
    assert sorted(pools["pool"]) == ["needle-image-mixed-256-d0", "needle-image-mixed-256-d100",
                                     "needle-image-mixed-256-d19.8", "needle-image-mixed-256-d80.2"]
    assert sorted(pools["depth"]) == [0.0, 19.8, 80.2, 100.0]


@pytest.mark.parametrize("flags,message", [
    (["--backgrounds", "video"], "--backgrounds: unknown value"),
    (["--lengths", "10"], "at least 64 tokens"),
    (["--depths", "120"], "--depths"),
    (["--needles-per-pool", "1"], "at least 2"),
])
def test_bad_options_are_one_line_errors(sources_dir, tmp_path, capsys, flags, message):
    rc = cli_main(["build", "needle", "--sources", str(sources_dir), "--output", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def test_missing_sources_are_one_line_errors(tmp_path, capsys):
    assert cli_main(["build", "needle", "--sources", str(tmp_path / "nowhere"), "--output", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli_main(["build", "needle", "--output", str(tmp_path)]) == 2
    assert "--sources" in capsys.readouterr().err


def test_sigmoid_depths_span_the_range_and_crowd_the_ends():
    depths = sigmoid_depths(7)
    assert depths[0] == 0.0 and depths[-1] == 100.0 and depths[3] == 50.0
    steps = np.diff(depths)
    assert steps[0] < steps[2] and steps[-1] < steps[-3]


def test_local_readers_clean_sources_and_count_bad_lines(sources_dir):
    report = BuildReport()
    sources = read_local_sources(sources_dir, tiny_config(sources_dir), report)
    assert report.skipped["malformed_json_line"] == 1
    gutenberg = dict(sources.documents)["gutenberg:1"]
    assert "Licence header" not in gutenberg and "footer" not in gutenberg and "\n\n" not in gutenberg
    assert len(sources.photos) == 3 and len(sources.names) == 26


# -- real data ----------------------------------------------------------------------------------

@pytest.mark.realdata
def test_real_data_tiny_grid_builds_and_validates(tmp_path):
    root = shared_data_dir()
    config = NeedleConfig(sources=str(root), lengths=(256, 2048), depths=(60.0,), needles_per_pool=5,
                          lexical_tier=False)
    final = run_build(NeedleBuilder(), config, tmp_path, progress=False)
    pools = pools_table(final)
    assert len(pools["pool"]) == 2 * 3 * 2
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["report"]["skipped"].get("needle_other_language") == 188


@pytest.mark.realdata
@pytest.mark.slow
def test_real_data_goes_past_32k(tmp_path):
    root = shared_data_dir()
    config = NeedleConfig(sources=str(root), lengths=(65536, 131072), depths=(50.0,), backgrounds=("text", "image"),
                          needle_modalities=("text",), needles_per_pool=2, lexical_tier=False)
    _, pools, _ = build(config)
    assert [p.band.target for p in pools] == [65536, 131072, 65536, 131072]
    for pool in pools:
        assert len(pool.candidates) == 2
        for c in pool.candidates:
            assert pool.band.contains(c.n_tokens)
            assert abs(c.extra["realised_depth"] - 0.5) < 0.01
        text, _ = pool.candidates[0].document.render()
        assert text.count(pool.candidates[0].provenance["needle_text"]) == 1


@pytest.mark.realdata
def test_real_data_short_needles_fill_their_cell(tmp_path):
    """Regression: the haystack budget is set per needle, so a needle shorter than the longest of
    its family still lands in the band (this cell once lost 3 of its 25 documents)."""
    root = shared_data_dir()
    config = NeedleConfig(sources=str(root), lengths=(256,), depths=(20.0,), backgrounds=("image",),
                          needle_modalities=("text",))
    _, pools, report = build(config)
    assert len(pools[0].candidates) == 25 and not report.skipped.get("no_haystack_window_in_band")
    lengths = {len(c.provenance["needle_text"]) for c in pools[0].candidates}
    assert len(lengths) > 1  # the family's needles do differ in length


def test_one_needle_set_serves_every_cell_of_a_modality(written):
    """The paper's grid: the same query-needle pairs in every background x length x depth cell, so
    the heatmap and Table 4 measure depth, length and background only (a family drawn per cell
    would mix needle difficulty into them)."""
    pools = pools_table(written)
    sets: dict[str, set] = {}
    for name, extra in zip(pools["pool"], pools["extra"]):
        facts = json.loads(extra)
        _, _, queries, _ = _pool_tables(written, name)
        needles = frozenset(zip(queries["text"], queries["needle_spec"]))
        sets.setdefault(facts["needle_modality"], set()).add(needles)
        assert len(needles) == 4
    assert set(sets) == {"text", "image"} and all(len(found) == 1 for found in sets.values()), \
        {m: len(found) for m, found in sets.items()}
    card = (written / "README.md").read_text()
    assert "One needle set per needle modality" in card and "### Deviations from the paper" in card


def test_per_family_grids_are_separate_and_each_fixed(sources_dir):
    config = tiny_config(sources_dir, lengths=(256,), depths=(0.0, 100.0), backgrounds=("text",),
                         needle_sets="per_family", subject_kinds=("name", "place"), image_families=("glyph", "count"))
    _, pools, _ = build(config)
    names = {p.name for p in pools}
    assert names == {f"needle-{m}-{f}-text-256-d{d}" for m, f in (("text", "name"), ("text", "place"),
                                                                   ("image", "glyph"), ("image", "count"))
                     for d in (0, 100)}
    by_grid: dict[str, set] = {}
    for pool in pools:
        grid = pool.name.rsplit("-text-256-", 1)[0]
        by_grid.setdefault(grid, set()).add(tuple(sorted(q.text for q in pool.queries)))
        assert pool.facts["needle_modality"] in grid
    assert len(by_grid) == 4 and all(len(found) == 1 for found in by_grid.values())
    assert len({next(iter(found)) for found in by_grid.values()}) == 4  # the families do differ
