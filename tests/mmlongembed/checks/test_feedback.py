"""What a user reads during and after a long build: a grid summary that fits a screen, and plots
that name the metric they show."""

from __future__ import annotations

from collections import Counter

from mmlongembed.build.run import SUMMARY_MAX_ROWS, summary_table
from mmlongembed.checks.shortcuts import audit_pool, binomial_tail
from mmlongembed.core.builder import BuildReport
from mmlongembed.core.pools import LengthBand, Pool
from mmlongembed.build.validate import Validation

NEEDLES, BACKGROUNDS = ("text", "image"), ("text", "mixed", "image")
LENGTHS, DEPTHS = (256, 1024, 4096, 32768), (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)


def _grid():
    pools, stats, audits = [], [], {}
    for needle in NEEDLES:
        for background in BACKGROUNDS:
            for length in LENGTHS:
                for depth in DEPTHS:
                    band = LengthBand.tight(length, 0.05)
                    name = f"needle-{needle}-{background}-{band.name}-d{depth:g}"
                    pools.append(Pool(name=name, task="visual_grounding", dataset="needle", difficulty="grid",
                                      band=band, depth=depth))
                    stats.append({"pool": name, "queries": 25, "candidates": 25, "tokens_min": band.lo,
                                  "tokens_median": band.hi - 1, "tokens_max": band.hi})
                    worst = 0.9 if (needle, background, length, depth) == ("image", "mixed", 1024, 40.0) else 0.12
                    audits[name] = {"applicable": True, "worst_rule": f"rule-{needle}-{background}", "worst_p_at_1": worst,
                                    "chance": 0.04, "groups": 25, "rules": 30,
                                    "worst_p_value": binomial_tail(25, 0.04, round(25 * worst))}
    return pools, stats, Validation(shortcuts=audits)


def test_a_long_grid_is_summarised_one_row_per_family():
    pools, stats, validation = _grid()
    assert len(pools) == 2 * 3 * 4 * 6 > SUMMARY_MAX_ROWS
    table = summary_table(stats, BuildReport(), validation, pools)
    lines = table.splitlines()
    assert len(lines) == 2 + 6 + 1  # header, rule, one row per (needle, background), the footnote
    rows = {line.split()[0]: line for line in lines[2:8]}
    assert set(rows) == {f"needle-{n}-{b}" for n in NEEDLES for b in BACKGROUNDS}
    for family, line in rows.items():
        cells = line.split()
        assert cells[1:7] == ["24", "256..32k", "(4)", "6", str(24 * 25), str(24 * 25)], line
    # the family's closest pool is the one shown, with its n and its p corrected over the row's rules and pools
    assert "rule-image-mixed 0.90 vs 0.04, n=25, 1k-d40, corrected p " in rows["needle-image-mixed"]
    assert "none significant" not in rows["needle-image-mixed"]
    assert "none significant (closest: rule-text-text 0.12 vs 0.04, n=25, 256-d0, corrected p 1)" in rows["needle-text-text"]
    assert lines[-1].startswith("144 pools in 6 families")


def test_a_rule_that_finds_both_positives_of_two_groups_is_no_alarm():
    """The issue's case: `min row_order 1.00 vs 0.25` on two groups of four, from the real audit:
    the column gives n and the corrected p, and says "none significant"; the same rule over 40
    groups is significant and is not hidden."""
    band = LengthBand.tight(1024, 0.05)

    def pool(groups: int):
        corpus = {"_id": [], "text": [], "group": []}
        qrels = {"query-id": [], "corpus-id": [], "score": []}
        for g in range(groups):
            for k in range(4):  # the positive written last of its group, its row order the highest
                corpus["_id"].append(f"d{g}-{k}")
                corpus["text"].append(f"words of candidate {g} {k} " * 3)
                corpus["group"].append(f"q{g}")
            qrels["query-id"].append(f"q{g}")
            qrels["corpus-id"].append(f"d{g}-3")
            qrels["score"].append(1)
        return audit_pool(corpus, qrels)

    for groups, alarm in ((2, False), (40, True)):
        audit = pool(groups)
        stats = [{"pool": "p", "queries": groups, "candidates": 4 * groups, "tokens_min": band.lo,
                  "tokens_median": band.lo, "tokens_max": band.lo}]
        line = summary_table(stats, BuildReport(), Validation(shortcuts={"p": audit}), [
            Pool(name="p", task="logical_summarization", dataset="d", difficulty="easy", band=band)]).splitlines()[2]
        assert f"n={groups}" in line and "corrected p" in line, line
        assert ("none significant" in line) is not alarm, line


def test_a_short_build_keeps_one_row_per_pool():
    pools, stats, validation = _grid()
    keep = [i for i, p in enumerate(pools) if p.band.target == 256 and p.depth in (0.0, 100.0)]
    table = summary_table([stats[i] for i in keep], BuildReport(), validation, [pools[i] for i in keep])
    names = [line.split()[0] for line in table.splitlines()[2:]]
    assert names == [pools[i].name for i in keep]


def test_the_depth_heatmap_says_which_metric_it_shows(tmp_path, monkeypatch):
    """P@1 as the paper's Figure 3 by default, hit@5 on request; title and colour bar say which."""
    import matplotlib.figure

    from harness.report.tables import plot_depth_heatmaps

    seen = []
    original = matplotlib.figure.Figure.savefig

    def record(self, *args, **kwargs):
        seen.append(([ax.get_title() for ax in self.axes], [ax.get_ylabel() for ax in self.axes]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    rows = [{"model": "bm25", "pool": f"needle-text-text-{n}-d{d:g}", "length": n, "depth": d,
             "extra": {"needle_modality": "text", "background": "text"},
             "metrics": {"hit@5": {"value": 0.5}, "p@1": {"value": 0.25}}}
            for n in (256, 512) for d in (0.0, 100.0)]
    assert len(plot_depth_heatmaps(rows, tmp_path)) == 1
    assert len(plot_depth_heatmaps(rows, tmp_path, "hit@5")) == 1
    (p1_titles, p1_labels), (hit_titles, hit_labels) = seen
    assert "P@1" in " ".join(p1_titles) and "hit@5" not in " ".join(p1_titles)
    assert any("P@1" in label and "x100" in label for label in p1_labels)  # the colour bar
    assert "hit@5" in " ".join(hit_titles) and "top 5" in " ".join(hit_titles)
    assert any("hit@5" in label and "top 5" in label for label in hit_labels)
    assert Counter(p1_titles)[""] == 1  # the colour bar's axes has no title of its own


def test_a_grid_build_shows_progress_for_each_long_step(tmp_path, capsys):
    """Building the cells, the BM25 shortcut check, writing and validating each show a bar (the
    steps that take minutes on the full grid); --no-progress hides them all."""
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder

    builder = get_builder("needle")
    config = builder.example_config(tmp_path / "sources")
    run_build(builder, config, tmp_path / "shown", progress=True)
    err = capsys.readouterr().err
    for step in ("building cells", "BM25 shortcut check", "writing pools", "validating"):
        assert f"{step}:" in err, step
    run_build(builder, config, tmp_path / "hidden", progress=False)
    assert "%|" not in capsys.readouterr().err
