"""Reports: results JSON, markdown tables in the layout of the paper's Table 3 and Table 12, PNG plots."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path

from harness.metrics import MAIN_METRIC

TASK_SHORT = {"visual_grounding": "VG", "multi_source_reasoning": "MSR", "logical_summarization": "LS",
              "temporal_summarization": "TS"}
TASK_ORDER = list(TASK_SHORT)
DIFFICULTIES = ("easy", "hard")
HEATMAP_METRIC = "hit@5"  # P@5 with one positive caps at 0.2; its hit form reads on a 0..1 scale
# The heatmaps sit beside tables of P@1: their title and colour bar say they show another metric.
HEATMAP_LABEL = f"{HEATMAP_METRIC} (positive in the top 5)"
HEATMAP_TITLE = f"{HEATMAP_LABEL}, not the tables' P@1; x100 in cells"


def _value(row, metric=MAIN_METRIC) -> float:
    return row["metrics"][metric]["value"]


def _fmt(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _length_name(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _columns(rows):
    """(task, dataset) pairs in the paper's task order, each with the difficulties present."""
    seen = sorted({(r["task"], r["dataset"]) for r in rows if r["difficulty"] in DIFFICULTIES},
                  key=lambda td: (TASK_ORDER.index(td[0]) if td[0] in TASK_ORDER else 99, td[1]))
    return seen


def _task_order(task: str) -> int:
    return TASK_ORDER.index(task) if task in TASK_ORDER else 99


def table3_columns(rows) -> list[tuple[str, callable]]:
    """Paper Table 3's columns: (header, row filter). Visual Grounding first, one column per needle
    modality (every grid pool of that needle modality: all backgrounds, lengths and depths), then
    every real task's dataset, Easy and Hard (each averaged over its lengths)."""
    columns = []
    grid = [r for r in rows if grid_cell(r) is not None]
    for needle in NEEDLE_MODALITIES:
        if any(grid_cell(r)[0] == needle for r in grid):
            columns.append((f"VG: {needle} needle",
                            lambda r, needle=needle: grid_cell(r) is not None and grid_cell(r)[0] == needle))
    for task, dataset in _columns(rows):
        for difficulty in DIFFICULTIES:
            if any(r["task"] == task and r["dataset"] == dataset and r["difficulty"] == difficulty for r in rows):
                columns.append((f"{TASK_SHORT.get(task, task)}: {dataset} {difficulty.capitalize()}",
                                lambda r, key=(task, dataset, difficulty): (r["task"], r["dataset"], r["difficulty"])
                                == key))
    return columns


def table3_data(rows) -> list[dict]:
    """Per model: P@1 of every Table 3 column and their average over **every** column, Visual
    Grounding included, as in the paper (None where the model scored no pool of a column; then the
    average is None too: it is over all columns or not at all)."""
    columns = table3_columns(rows)
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        cells = {header: _mean([_value(r) for r in rows if r["model"] == model and keep(r)])
                 for header, keep in columns}
        values = list(cells.values())
        out.append({"model": model, "columns": cells,
                    "average": _mean(values) if values and all(v is not None for v in values) else None})
    return out


def table3(rows) -> str:
    """Rows: models. Columns: VG by needle modality, then task / dataset / Easy|Hard (P@1 x100,
    averaged over lengths), Avg over every column."""
    data = table3_data(rows)
    if not data or not data[0]["columns"]:
        return ""
    headers = list(data[0]["columns"])
    lines = ["| Model | " + " | ".join(headers) + " | Avg |", "|---|" + "---:|" * (len(headers) + 1)]
    for entry in data:
        lines.append(f"| {entry['model']} | " + " | ".join(_fmt(entry["columns"][h]) for h in headers)
                     + f" | {_fmt(entry['average'])} |")
    return "\n".join(lines)


def table12(rows) -> str:
    """Paper Table 12: rows model per task (the task's datasets averaged), columns Easy at each
    length, then Hard at each length (P@1 x100)."""
    real = [r for r in rows if r["difficulty"] in DIFFICULTIES]
    if not real:
        return ""
    lengths = sorted({r["length"] for r in real})
    headers = [f"{difficulty.capitalize()} {_length_name(n).upper()}" for difficulty in DIFFICULTIES for n in lengths]
    lines = ["| Task | Model | " + " | ".join(headers) + " |", "|---|---|" + "---:|" * len(headers)]
    for task in sorted({r["task"] for r in real}, key=_task_order):
        for model in dict.fromkeys(r["model"] for r in real if r["task"] == task):
            cells = []
            for difficulty in DIFFICULTIES:
                for n in lengths:
                    per_dataset = [_mean([_value(r) for r in real if r["model"] == model and r["task"] == task
                                          and r["dataset"] == d and r["difficulty"] == difficulty and r["length"] == n])
                                   for d in sorted({r["dataset"] for r in real if r["task"] == task})]
                    cells.append(_mean(per_dataset))
            lines.append(f"| {TASK_SHORT.get(task, task)} | {model} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def grid_group(row) -> str:
    """A needle-grid pool's family: its name without the length and depth parts."""
    name = re.sub(r"-d\d+(\.\d+)?$", "", row["pool"])
    return re.sub(r"-\d+k?$", "", name)


def grid_table(rows) -> str:
    grid = [r for r in rows if r.get("depth") is not None]
    if not grid:
        return ""
    lengths = sorted({r["length"] for r in grid})
    lines = ["| Model | Grid | Depth % | " + " | ".join(_length_name(n) for n in lengths) + " |",
             "|---|---|---:|" + "---:|" * len(lengths)]
    for model in dict.fromkeys(r["model"] for r in grid):
        for group in sorted({grid_group(r) for r in grid if r["model"] == model}):
            for depth in sorted({r["depth"] for r in grid if r["model"] == model and grid_group(r) == group}):
                cells = [_mean([_value(r) for r in grid if r["model"] == model and grid_group(r) == group
                                and r["depth"] == depth and r["length"] == n]) for n in lengths]
                lines.append(f"| {model} | {group} | {depth:g} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines)


BACKGROUNDS = ("text", "mixed", "image")  # Table 4's columns, in the paper's order
BACKGROUND_HEADERS = {"text": "Text", "mixed": "Mix", "image": "Image"}
NEEDLE_MODALITIES = ("text", "image")
_GRID_NAME = re.compile(r"^needle-(?P<needle>[a-z]+)-(?P<background>[a-z]+)-")


def grid_cell(row) -> tuple[str, str] | None:
    """(needle modality, background) of a Visual Grounding grid pool, from the pool's `extra` facts
    (the builder writes them), else from its name `needle-<needle>-<background>-<length>-d<depth>`;
    None where the pool is not one of the grid's (needle modality, background) cells."""
    if row.get("depth") is None:
        return None
    extra = row.get("extra") or {}
    needle, background = extra.get("needle_modality"), extra.get("background")
    if not (needle and background):
        match = _GRID_NAME.match(row["pool"])
        if not match:
            return None
        needle, background = match["needle"], match["background"]
    if needle not in NEEDLE_MODALITIES or background not in BACKGROUNDS:
        return None
    return needle, background


def _std(values):
    """Sample standard deviation (ddof=1) of the values present: the spread across backgrounds, as
    the paper prints it (Qwen3-VL-2B: 63.19 / 82.85 / 88.61 -> 13.33)."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def table4_data(rows) -> list[dict]:
    """Paper Table 4: per model and needle modality, P@1 per background averaged over the grid's
    lengths and depths (every pool weighs the same), and the mean and sample std (ddof=1) across the
    three backgrounds. A background none of whose pools the model scored is None, and then so are
    mean and std (they are over all three backgrounds or not at all). `n_pools` says how many pools
    each cell averages, `expected_pools` how many pools of that cell any model scored."""
    cells = [(grid_cell(r), r) for r in rows]
    cells = [(c, r) for c, r in cells if c is not None]
    if not cells:
        return []
    expected = defaultdict(set)
    for cell, r in cells:
        expected[cell].add(r["pool"])
    out = []
    for model in dict.fromkeys(r["model"] for _, r in cells):
        for needle in NEEDLE_MODALITIES:
            if not any(cell[0] == needle for cell, _ in cells):
                continue
            backgrounds = {}
            for background in BACKGROUNDS:
                values = [_value(r) for cell, r in cells if r["model"] == model and cell == (needle, background)]
                backgrounds[background] = {"p@1": _mean(values), "n_pools": len(values),
                                           "expected_pools": len(expected[(needle, background)])}
            per_background = [b["p@1"] for b in backgrounds.values()]
            complete = all(v is not None for v in per_background)
            out.append({"model": model, "needle_modality": needle, "metric": MAIN_METRIC, "backgrounds": backgrounds,
                        "mean": _mean(per_background) if complete else None,
                        "std": _std(per_background) if complete else None})
    return out


def table4(rows) -> str:
    """Rows: model x needle modality. Columns: Text / Mix / Image background (P@1 x100 averaged over the
    grid's lengths and depths), Mean ± std across the three backgrounds."""
    data = table4_data(rows)
    if not data:
        return ""
    lines = ["| Model | Needle | " + " | ".join(BACKGROUND_HEADERS[b] for b in BACKGROUNDS) + " | Mean ± std |",
             "|---|---|" + "---:|" * (len(BACKGROUNDS) + 1)]
    for entry in data:
        cells = []
        for background in BACKGROUNDS:
            cell = entry["backgrounds"][background]
            partial = cell["p@1"] is not None and cell["n_pools"] < cell["expected_pools"]
            cells.append(_fmt(cell["p@1"]) + (f" ({cell['n_pools']}/{cell['expected_pools']} pools)" if partial else ""))
        spread = "–" if entry["mean"] is None else f"{_fmt(entry['mean'])} ± {_fmt(entry['std'])}"
        lines.append(f"| {entry['model']} | {entry['needle_modality'].capitalize()} | " + " | ".join(cells)
                     + f" | {spread} |")
    return "\n".join(lines)


def variant_table(rows) -> str:
    """From each pool's audit config (breakdowns only, never scoring): per negative variant, how
    often the positive scores above a negative of that variant made for its query (ties: half)."""
    lines = ["| Model | Pool | Variant | Role | Pairs | Positive beats it |", "|---|---|---|---|---:|---:|"]
    for r in rows:
        for variant, entry in sorted((r.get("breakdown") or {}).get("by_variant", {}).items()):
            lines.append(f"| {r['model']} | {r['pool']} | {variant} | {entry['role']} | {entry['pairs']} | "
                         f"{_fmt(entry['positive_beats'])} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def pool_table(rows) -> str:
    lines = ["| Model | Pool | Queries | Candidates | P@1 [95% CI] | P@5 | nDCG@10 | MRR | Truncated q/c | Tied positives |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        m = r["metrics"]
        lo, hi = m["p@1"]["ci95"]
        lines.append(
            f"| {r['model']} | {r['pool']} | {r['n_queries']} | {r['n_candidates']} | {_fmt(m['p@1']['value'])} "
            f"[{_fmt(lo)}, {_fmt(hi)}] | {_fmt(m['p@5']['value'])} | {_fmt(m['ndcg@10']['value'])} | "
            f"{_fmt(m['mrr']['value'])} | {r['truncated']['queries']}/{r['truncated']['candidates']} | {r.get('tied_positives', 0)} |")
    return "\n".join(lines)


def readout_table(rows) -> str:
    """Rows of generative models (harness.boundary): what their evidence looked like, per pool."""
    rows = [r for r in rows if r.get("readout")]
    if not rows:
        return ""
    lines = ["| Model | Pool | Format valid | Fallbacks per token | Mean generated tokens |", "|---|---|---:|---|---:|"]
    for r in rows:
        o = r["readout"]
        fallbacks = ", ".join(f"{t} {n}" for t, n in o["fallbacks"].items())
        lines.append(f"| {r['model']} | {r['pool']} | {o['format_valid']}/{o['inputs']} | {fallbacks} | "
                     f"{o['mean_generated_tokens']} |")
    return "\n".join(lines)


def markdown(report: dict) -> str:
    rows = report["results"]
    parts = [f"# Scores on {report['dataset']['ref']}", "",
             "P@1 x 100. Easy/Hard columns average the pool's lengths; a Visual Grounding column averages "
             "every grid pool of its needle modality (backgrounds, lengths, depths). Candidates that score "
             "exactly as much as the positive (e.g. inputs identical after middle truncation) count by "
             "expectation over their possible orders: a model that cannot tell them apart gets chance.", ""]
    for title, body in (("Table 3 layout: by task and dataset (Visual Grounding by needle modality; "
                         "Avg over every column)", table3(rows)),
                        ("Table 12 layout: by task and length", table12(rows)),
                        ("Table 4 layout: Visual Grounding by needle modality and background "
                         "(P@1 averaged over lengths and depths; mean ± sample standard deviation (n-1) "
                         "across the three backgrounds, as the paper prints it)",
                         table4(rows)),
                        ("Per variant: how often the positive beats each kind of negative", variant_table(rows)),
                        ("Needle grid (P@1 by depth and length)", grid_table(rows)),
                        ("Per pool", pool_table(rows) if rows else ""),
                        ("Generative readout (format validity, fallbacks to the last generated token, mean "
                         "generated length)", readout_table(rows))):
        if body:
            parts += [f"## {title}", "", body, ""]
    if report["skipped"]:
        parts += ["## Skipped", "", "| Model | Pool | Reason | Failure |", "|---|---|---|---|"]
        parts += [f"| {s['model']} | {s['pool']} | {s['reason']} | {'yes' if s['counts_as_failure'] else 'no'} |"
                  for s in report["skipped"]]
        parts.append("")
    return "\n".join(parts)


def write_json(report: dict, path: Path) -> None:
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def plot_by_length(rows, path: Path) -> bool:
    """Paper Figure 4: P@1 against context length, one panel per task, Easy solid and Hard dashed."""
    rows = [r for r in rows if r["difficulty"] in DIFFICULTIES]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASK_ORDER if any(r["task"] == t for r in rows)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.6), squeeze=False)
    models = list(dict.fromkeys(r["model"] for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, task in zip(axes[0], tasks):
        for m, model in enumerate(models):
            for dataset in sorted({r["dataset"] for r in rows if r["task"] == task}):
                for difficulty, style in (("easy", "-"), ("hard", "--")):
                    points = sorted((r["length"], _value(r)) for r in rows if r["model"] == model
                                    and r["task"] == task and r["dataset"] == dataset and r["difficulty"] == difficulty)
                    if points:
                        ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                                color=colours[m % len(colours)], label=f"{model} {dataset} {difficulty}")
        ax.set_xscale("log", base=2)
        lengths = sorted({r["length"] for r in rows if r["task"] == task})
        ax.set_xticks(lengths, [_length_name(n) for n in lengths])
        ax.set_ylim(0, 1.02)
        ax.set_title(task.replace("_", " "))
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("P@1")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_depth_heatmaps(rows, directory: Path) -> list[Path]:
    """Paper Figure 3: for pools with needle depths, a depth x length heatmap per model and grid family."""
    grid = [r for r in rows if r.get("depth") is not None]
    if not grid:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for model in dict.fromkeys(r["model"] for r in grid):
        for group in sorted({grid_group(r) for r in grid if r["model"] == model}):
            mine = [r for r in grid if r["model"] == model and grid_group(r) == group]
            lengths = sorted({r["length"] for r in mine})
            depths = sorted({r["depth"] for r in mine})
            values = [[_mean([_value(r, HEATMAP_METRIC) for r in mine if r["depth"] == d and r["length"] == n])
                       for n in lengths] for d in depths]
            matrix = [[float("nan") if v is None else v for v in row] for row in values]
            fig, ax = plt.subplots(figsize=(1.2 * len(lengths) + 2.5, 0.6 * len(depths) + 1.8))
            image = ax.imshow(matrix, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
            ax.set_xticks(range(len(lengths)), [_length_name(n) for n in lengths])
            ax.set_yticks(range(len(depths)), [f"{d:g}%" for d in depths])
            for i, row in enumerate(values):
                for j, v in enumerate(row):
                    ax.text(j, i, _fmt(v), ha="center", va="center", fontsize=8)
            ax.set_xlabel("context length (tokens)")
            ax.set_ylabel("needle depth (% of the document)")
            cell = grid_cell(mine[0])
            what = f"{cell[0]} needle, {BACKGROUND_HEADERS[cell[1]].lower()} background" if cell else group
            ax.set_title(f"{model}: {what}\n{HEATMAP_TITLE}", fontsize=9)
            fig.colorbar(image, ax=ax, label=HEATMAP_LABEL)
            fig.tight_layout()
            path = directory / f"heatmap_{_slug(model)}_{_slug(group)}.png"
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)
    return written


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]
