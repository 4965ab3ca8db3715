"""What the MMLongEmbed release shows beside its data (``mmlongembed.release.composite``): the paper's
Table 1 measured from the pools table and set beside the paper's own figures, Figure 1 (the
candidate lengths per task), the distinct images of the release, the component cards' bodies
inside the release card, and what stands in for a source of the paper.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from mmlongembed.checks.summary import format_table
from mmlongembed.output.layout import IMAGE_BYTES_PATH

PAPER_TABLE1 = Path(__file__).with_name("paper_table1.json")
TASK_NAMES = {"visual_grounding": "Visual Grounding", "multi_source_reasoning": "Multi-Source Reasoning",
              "logical_summarization": "Logical Summarization", "temporal_summarization": "Temporal Summarization"}
MODALITY_NAMES = {"text": "Text", "mixed": "Image+Text", "image": "Image", "video": "Video (frames)"}


def table1_key(row: dict) -> str:
    if row["dataset"] == "needle":
        return f"needle-{json.loads(row.get('extra') or '{}').get('needle_modality', 'text')}"
    return row["dataset"]


def paper_table1() -> dict:
    return json.loads(PAPER_TABLE1.read_text(encoding="utf-8"))


def measured_table1(rows: list[dict]) -> list[dict]:
    """Table 1 from the pools table: per source, its task, corpus modality, queries, corpus
    (candidates), the candidates a query ranks (every candidate of its pool, averaged over
    queries: the paper's Avg. C/Q), the candidates made per query (corpus / queries: its positive
    and negatives, what a component card's pool table counts), and per length the pools' queries
    and candidates."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[table1_key(row)].append(row)
    paper = {r["key"]: r for r in paper_table1()["rows"]}
    out = []
    for key in [*paper, *sorted(set(groups) - set(paper))]:
        members = groups.get(key)
        if not members:
            continue
        queries = sum(r["n_queries"] for r in members)
        per_length: dict[int, list[dict]] = defaultdict(list)
        for r in members:
            per_length[r["length"]].append(r)
        lengths = []
        for length, pools in sorted(per_length.items()):
            shapes = sorted({(p["difficulty"], p["n_queries"], p["n_candidates"]) for p in pools})
            by_difficulty: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for p in pools:
                by_difficulty[p["difficulty"]].append((p["n_queries"], p["n_candidates"]))
            parts = []
            for difficulty, counts in sorted(by_difficulty.items()):
                uniform = len(set(counts)) == 1
                q, c = counts[0]
                head = f"{len(counts)} x " if len(counts) > 1 else ""
                parts.append(f"{difficulty} {head}{q}/{c}" if uniform else
                             f"{difficulty} {len(counts)} pools {min(x for x, _ in counts)}-{max(x for x, _ in counts)}"
                             f"/{min(y for _, y in counts)}-{max(y for _, y in counts)}")
            lengths.append({"length": length, "name": _length_name(length), "pools": len(pools),
                            "shapes": [list(s) for s in shapes], "text": f"{_length_name(length)}: " + ", ".join(parts)})
        out.append({
            "key": key, "dataset": (paper.get(key) or {}).get("dataset", key),
            "task": TASK_NAMES.get(members[0]["task"], members[0]["task"]),
            "modality": "/".join(sorted({MODALITY_NAMES.get(r["modality"], r["modality"]) for r in members})),
            "pools": len(members), "queries": queries, "corpus": sum(r["n_candidates"] for r in members),
            "candidates_ranked_per_query": round(sum(r["n_queries"] * r["n_candidates"] for r in members) / queries, 1)
            if queries else 0.0,
            "candidates_made_per_query": round(sum(r["n_candidates"] for r in members) / queries, 1) if queries else 0.0,
            "per_length": lengths,
        })
    return out


def _length_name(length: int) -> str:
    return f"{length // 1024}k" if length >= 1024 and length % 1024 == 0 else str(length)


SYNTHETIC_BY_DESIGN = {"needle"}  # the paper's "Synthetic Tasks": generated grids whatever the sources


def figure1_lengths(root: Path, rows: list[dict], specs: dict) -> dict[str, dict[str, list[int]]]:
    """{task: {Table 1 key: candidate lengths}}, read from the corpus shards' `n_tokens` column."""
    import pyarrow.parquet as pq

    key_of = {r["pool"]: table1_key(r) for r in rows}
    task_of = {r["pool"]: r["task"] for r in rows}
    lengths: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for shard in sorted({spec.path for name, spec in specs.items() if name.endswith("-corpus")}):
        table = pq.read_table(root / shard, columns=["pool", "n_tokens"]).to_pydict()
        for pool, n in zip(table["pool"], table["n_tokens"]):
            if pool in key_of:
                lengths[task_of[pool]][key_of[pool]].append(n)
    return lengths


def figure1_label(key: str, n: int, synthetic_data: bool) -> str:
    """A source's legend entry: its paper name, how many candidates, and what in it is not real."""
    name = {r["key"]: r["dataset"] for r in paper_table1()["rows"]}.get(key, key)
    marks = [m for m, on in (("synthetic task", key.split("-")[0] in SYNTHETIC_BY_DESIGN),
                             ("SYNTHETIC/demo data", synthetic_data)) if on]
    return f"{name} ({n}{'; ' + ', '.join(marks) if marks else ''})"


def figure1_figure(lengths: dict[str, dict[str, list[int]]], synthetic: set[str] = frozenset()):
    """Paper Figure 1: the candidate length distribution, one panel per task. The sources of a task
    share each bin side by side (never drawn over each other), each bar in its legend's colour;
    a source made from synthetic or demo data (`synthetic`: Table 1 keys) is hatched and says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks = [t for t in TASK_NAMES if t in lengths] + sorted(set(lengths) - set(TASK_NAMES))
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.2 * max(1, len(tasks)), 3.4), squeeze=False)
    everything = [n for per_task in lengths.values() for values in per_task.values() for n in values] or [1]
    bins = np.geomspace(max(1, min(everything)), max(everything) + 1, 40)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, task in zip(axes.flat, tasks):
        keys = sorted(lengths[task])
        _, _, groups = ax.hist([lengths[task][k] for k in keys], bins=bins, histtype="bar", stacked=False,
                               color=[colours[i % len(colours)] for i in range(len(keys))],
                               label=[figure1_label(k, len(lengths[task][k]), k in synthetic) for k in keys])
        for key, group in zip(keys, groups if len(keys) > 1 else [groups]):
            if key in synthetic:
                for bar in group:
                    bar.set_hatch("//")
        ax.set_xscale("log")
        ax.set_title(TASK_NAMES.get(task, task))
        ax.set_xlabel("candidate length (tokens, log scale)")
        ax.legend(fontsize=7, loc="upper left")
    axes.flat[0].set_ylabel("candidates")
    if synthetic:
        fig.suptitle("Hatched: built from SYNTHETIC or demo sources, not the real data", fontsize=9)
    fig.tight_layout()
    return fig


def figure1(root: Path, rows: list[dict], specs: dict, path: Path, synthetic: set[str] = frozenset()) -> None:
    """Figure 1 of the release (``figure1_figure``) written to ``path``; ``synthetic``: the
    components (dataset names) whose manifest lists synthetic or test-only parts."""
    import matplotlib.pyplot as plt

    keys = {table1_key(r) for r in rows if r["dataset"] in synthetic}
    fig = figure1_figure(figure1_lengths(root, rows, specs), keys)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def distinct_images(root: Path, paths: list[str]) -> tuple[int, int]:
    """(distinct images, their bytes) over the corpus and query shards ``paths`` of a release,
    read a row group at a time with the images as their dictionary (each stored image once, not
    once per placement) and kept as digests."""
    import hashlib

    import pyarrow.parquet as pq

    seen: dict[bytes, int] = {}
    for path in paths:
        with pq.ParquetFile(root / path, read_dictionary=[IMAGE_BYTES_PATH]) as handle:
            for k in range(handle.num_row_groups):
                for chunk in handle.read_row_group(k, columns=["images"]).column("images").chunks:
                    values = chunk.flatten().field("bytes")
                    stored = values.dictionary if hasattr(values, "dictionary") else values
                    for image in stored.to_pylist():
                        if image is not None:
                            seen.setdefault(hashlib.sha256(image).digest(), len(image))
    return len(seen), sum(seen.values())


def demote_headings(markdown: str) -> str:
    """A component card's body inside the release card: every heading one level down (code
    blocks untouched)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" + line if not fenced and re.match(r"#{1,5} ", line) else line)
    return "\n".join(out) + "\n"


def substitutes(recorded: dict[str, dict]) -> list[str]:
    """What stands in for a source of the paper, from the components' own records."""
    out = []
    if "needle" in recorded:
        out.append("Visual Grounding is a synthetic grid by design (paper §3.2.1): the text-needle grid stands for "
                   "NeedleBench, the image-needle grid (procedurally drawn needles in interleaved haystacks) "
                   "substitutes for MM-NIAH, which this toolkit does not read")
    sources = (recorded.get("mmdocrag") or {}).get("sources") or {}
    if sources.get("substitute"):
        out.append("MMDocRAG: the substitute, MMDocIR layout annotations over the MMLongBench-Doc PDFs (text layer "
                   "inside boxes, crops of table, chart and figure boxes), not MMDocRAG's own quotes")
    forms = ((recorded.get("mmlongbench") or {}).get("sources") or {}).get("forms") or {}
    if forms:
        out.append("MMLongBench: the paper's Table 1 cites MMLongBench (Wang et al., 2025b); these documents are "
                   f"read as {', '.join(f'{k} ({v})' for k, v in sorted(forms.items()))} (the mmlongbench card says "
                   "where each query comes from)")
    return out


def table1_text(table1: list[dict]) -> str:
    """Table 1 as built, for the console."""
    paper = {r["key"]: r for r in paper_table1()["rows"]}

    def figure(value):
        return "-" if value is None else value

    return format_table(
        ["source", "task", "modality", "pools", "queries", "corpus", "ranked/query", "made/query",
         "paper q/corpus/ranked"],
        [(r["dataset"], r["task"], r["modality"], r["pools"], r["queries"], r["corpus"],
          r["candidates_ranked_per_query"], r["candidates_made_per_query"],
          "/".join(str(figure((paper.get(r["key"]) or {}).get(k)))
                   for k in ("queries", "corpus", "candidates_ranked_per_query")))
         for r in table1])


