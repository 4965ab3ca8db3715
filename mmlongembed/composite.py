"""`mmle build mmlongembed`: every task of the paper in one dataset repo, one release.

The release is made of *components*, the existing builders (the needle grid, HotpotQA, MMDocRAG,
GovReport, MMLongBench, YoukuDC, ActivityNet), each built by the ordinary pipeline
(``build.run_build``: its lock, temporary folder, validation and atomic move) into a components
folder, ``<output>/mmlongembed-components/<builder>/``. A component whose build is up to date
(``build.why_not_current``) is not built again, so adding one source's files later builds only
that source; components are built one after another, so memory is bounded by the largest one.

The release is then assembled from the components' files: their data files hardlinked (copied
across filesystems) under the same paths (``data/<dataset>/...``: no two components share a
dataset), one ``pools`` table of all their rows (the same columns), their configs in one card,
their figures, one manifest recording every component. It is written into a temporary folder,
checked, and moved into place. Every data file is the one its component wrote and validated
(sha256 checked again here); ``--revalidate`` recounts the whole release once more, as ``mmle
validate`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.builder import Builder, config_from_dict, get_builder, register
from mmlongembed.errors import UserError
from mmlongembed.llm import LLMConfig
from mmlongembed.manifest import file_sha256, public_config, toolkit_identity
from mmlongembed.report import format_table

RELEASE = "mmlongembed"
COMPONENTS_FOLDER = "mmlongembed-components"
PAPER_TABLE1 = Path(__file__).with_name("paper_table1.json")
TASK_NAMES = {"visual_grounding": "Visual Grounding", "multi_source_reasoning": "Multi-Source Reasoning",
              "logical_summarization": "Logical Summarization", "temporal_summarization": "Temporal Summarization"}
MODALITY_NAMES = {"text": "Text", "mixed": "Image+Text", "image": "Image", "video": "Video (frames)"}


@dataclass(frozen=True)
class Layout:
    """Subfolders of a --sources root that, all present, hold a component's files; the builder
    gets the root itself (``whole_root``) or the first of them."""

    folders: tuple[str, ...]
    whole_root: bool = True

    def path(self, root: Path) -> Path:
        return root if self.whole_root else root / self.folders[0]


@dataclass(frozen=True)
class Component:
    """One builder of the release and where its local files live under a ``--sources`` root
    (``layouts``: alternatives, the first found wins)."""

    builder: str
    layouts: tuple[Layout, ...]
    what: str  # what to put where, for the one-line error
    hub: bool  # the builder reads the source from the Hub when there are no local files

    def usable(self, folders: list[Path]) -> bool:
        """Whether the files in ``folders`` can feed the builder at all (ActivityNet annotations
        are of no use without their videos: the sample data has the annotations only)."""
        if self.builder != "activitynet":
            return True
        from mmlongembed.readers.dense_captions import VIDEO_EXTENSIONS, activitynet_annotations

        ids, stems = set(), set()
        for folder in folders:
            for path in folder.rglob("*"):
                if path.suffix.lower() in VIDEO_EXTENSIONS:
                    stems.add(path.stem)
                elif path.suffix == ".json":
                    ids |= set(activitynet_annotations(path) or ())
        return any(i in stems or i.removeprefix("v_") in stems for i in ids)


# The paper's column order (Table 3): Visual Grounding, Multi-Source Reasoning, Logical and
# Temporal Summarization.
COMPONENTS = (
    Component("needle", (Layout(("needlebench", "haystack_text", "images")),),
              "NeedleBench needles.jsonl + names.json in needlebench/, plain-text haystacks (.txt, .raw) in "
              "haystack_text/, photos in images/", hub=True),
    Component("mmdocrag", (Layout(("mmdocrag",)), Layout(("mmdocir", "mmlongbench_doc"))),
              "the MMDocRAG release (a question-set JSONL such as evaluation_20.jsonl + images.zip) in mmdocrag/, or "
              "the substitute: MMDocIR annotations in mmdocir/ with the MMLongBench-Doc PDFs in "
              "mmlongbench_doc/documents/", hub=True),
    Component("hotpotqa", (Layout(("hotpotqa",)),),
              "HotpotQA distractor JSON/JSONL in hotpotqa/ (WikiText-2 raw in haystack_text/wikitext-2-raw/ pads it)",
              hub=True),
    Component("govreport", (Layout(("govreport",), whole_root=False),),
              "GovReport JSONL, L-Eval JSONL or ZeroSCROLLS JSON in govreport/", hub=True),
    Component("mmlongbench", (Layout(("mmlongbench",)), Layout(("mmlongbench_doc",))),
              "MMLongBench's release (mmlb_data/summ/*.jsonl + mmlb_image/) in mmlongbench/, or MMLongBench-Doc "
              "(samples.json(l) or the Hub's samples parquet + documents/*.pdf) in mmlongbench_doc/", hub=True),
    Component("youkudc", (Layout(("youkudc",), whole_root=False),),
              "the YoukuDC release (meta_files/*.csv + data_files/<Category>/...) in youkudc/", hub=False),
    Component("activitynet", (Layout(("activitynet_captions", "videos")), Layout(("activitynet",), whole_root=False)),
              "ActivityNet Captions JSON in activitynet_captions/ with the videos named v_<id>.mp4 in videos/, or "
              "both in activitynet/ (docs/VIDEO.md says how to get the videos; `mmle demo-sources` writes demo ones)",
              hub=False),
)
COMPONENT_NAMES = tuple(c.builder for c in COMPONENTS)

# Options the release builds its components with unless --set says otherwise: the full needle
# grid (8 lengths x 6 depths, 288 pools) takes longer than all other tasks together on two cores.
DEFAULT_OPTIONS: dict[str, dict] = {
    "needle": {"lengths": (1024, 8192, 32768), "depths": (0.0, 50.0, 100.0)},
}


@dataclass
class MMLongEmbedConfig(LLMConfig):
    seed: int = field(default=0, metadata={"help": "seed of every component (each derives its random choices)"})
    sources: tuple[str, ...] = field(default=(), metadata={
        "help": "one or more folders holding one subfolder per source in the shared-data layout (needlebench/, "
                "haystack_text/, images/, hotpotqa/, govreport/, mmdocir/ + mmlongbench_doc/ or mmdocrag/, "
                "mmlongbench_doc/ or mmlongbench/, youkudc/, activitynet/), searched in order; a source found in "
                "none is read from the Hub where it is published there"})
    exclude: str = field(default="", metadata={
        "help": f"comma list of components to leave out ({', '.join(COMPONENT_NAMES)}); the card lists them as "
                "absent, and why"})
    set: tuple[str, ...] = field(default=(), metadata={
        "help": "component options as COMPONENT.OPTION=VALUE (lists comma-separated), e.g. "
                "needle.lengths=256,1024,32768; defaults: "
                + "; ".join(f"{b}.{k}={','.join(map(str, v))}" for b, o in DEFAULT_OPTIONS.items() for k, v in o.items())})
    components: str = field(default="", metadata={
        "help": f"folder of the component builds (default: OUTPUT/{COMPONENTS_FOLDER}); kept between runs, so an "
                "up-to-date component is not built again"})
    revalidate: bool = field(default=False, metadata={
        "help": "recount and check the whole assembled release again (as `mmle validate` does); without it its "
                "data files are checked by sha256 against the components, which were validated when built"})


# -- the plan: which components, from which sources, with which options ---------------------------

@dataclass
class Planned:
    component: Component
    sources: Path | None  # None: the Hub
    config: object


def _find_local(component: Component, roots: list[Path]) -> Path | None:
    """The --sources path this component's builder gets, or None when no root has its folders."""
    for root in roots:
        for layout in component.layouts:
            folders = [root / folder for folder in layout.folders]
            if all(f.is_dir() for f in folders) and component.usable(folders):
                return layout.path(root)
    return None


class _OptionParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UserError(f"--set {self.prog}: {message}")


def parse_component_option(text: str) -> tuple[str, dict]:
    """``needle.lengths=256,1024`` -> ("needle", {"lengths": (256, 1024)}), typed and checked by
    the component's own option parser (the one `mmle build needle` has)."""
    from mmlongembed.flags import add_dataclass_arguments

    match = re.fullmatch(r"([\w-]+)\.([\w-]+)=(.*)", text.strip(), flags=re.S)
    if not match:
        raise UserError(f"--set {text!r}: write COMPONENT.OPTION=VALUE, e.g. needle.lengths=256,1024")
    name, option, value = match.group(1), match.group(2).replace("-", "_"), match.group(3)
    if name not in COMPONENT_NAMES:
        raise UserError(f"--set {text!r}: unknown component {name!r}; known: {', '.join(COMPONENT_NAMES)}")
    config_class = get_builder(name).config_class
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    if option not in fields or option in ("seed", "sources"):
        raise UserError(f"--set {text!r}: {name} has no option {option!r} that a release may set "
                        "(seed and sources are the release's own)")
    parser = _OptionParser(prog=f"{name}.{option}", add_help=False)
    add_dataclass_arguments(parser, config_class)
    flag = "--" + option.replace("_", "-")
    values = [v for v in re.split(r"[,\s]+", value.strip()) if v]
    kind = type(fields[option].default)
    if kind is bool:
        if value.strip().lower() not in ("true", "false", "yes", "no", "1", "0"):
            raise UserError(f"--set {text!r}: say true or false")
        tokens = [flag if value.strip().lower() in ("true", "yes", "1") else "--no-" + option.replace("_", "-")]
    elif isinstance(fields[option].default, (tuple, list)):
        tokens = [flag, *values]
    else:
        tokens = [flag, value.strip()]
    parsed = getattr(parser.parse_args(tokens), option)
    return name, {option: tuple(parsed) if isinstance(parsed, list) else parsed}


def component_options(config: MMLongEmbedConfig) -> dict[str, dict]:
    """Each component's options: the release's defaults, then --set."""
    options = {name: dict(DEFAULT_OPTIONS.get(name, {})) for name in COMPONENT_NAMES}
    for text in config.set:
        name, values = parse_component_option(text)
        options[name].update(values)
    return options


def excluded(config: MMLongEmbedConfig) -> list[str]:
    names = [n.strip() for n in config.exclude.split(",") if n.strip()]
    unknown = [n for n in names if n not in COMPONENT_NAMES]
    if unknown:
        raise UserError(f"--exclude: unknown component(s) {', '.join(unknown)}; known: {', '.join(COMPONENT_NAMES)}")
    return names


def plan(config: MMLongEmbedConfig) -> tuple[list[Planned], dict[str, str]]:
    """(the components to build, in the paper's order; absent component -> why). A component
    with no local files and no Hub source, not left out, stops the build: one line naming each
    such source and what to put where."""
    roots = [Path(r) for r in config.sources]
    for root in roots:
        if not root.is_dir():
            raise UserError(f"--sources {root}: no such folder")
    left_out = excluded(config)
    options = component_options(config)
    llm_values = {f.name: getattr(config, f.name) for f in dataclasses.fields(LLMConfig)}
    where = " or ".join(str(r) for r in roots) or "DIR"
    planned, absent, missing = [], {}, []
    for component in COMPONENTS:
        local = _find_local(component, roots)
        if component.builder in left_out:
            absent[component.builder] = ("left out with --exclude" + (
                "" if local is not None or component.hub else f"; its sources are not here ({component.what})"))
            continue
        if local is None and not component.hub:
            missing.append(f"{component.builder} (put {component.what}, in {where})")
            continue
        builder = get_builder(component.builder)
        values = {**llm_values, **options[component.builder], "seed": config.seed,
                  "sources": str(local) if local is not None else None}
        planned.append(Planned(component, local, config_from_dict(builder.config_class, values)))
    if missing:
        names = ",".join(m.split(" ", 1)[0] for m in missing)
        raise UserError(f"no sources for {'; '.join(missing)}; pass them with --sources (make: SOURCES=...) or "
                        f"leave them out with --exclude {names}")
    if not planned:
        raise UserError("every component is left out: nothing to build")
    return planned, absent


# -- building the components -----------------------------------------------------------------------

def build_components(planned: list[Planned], components_dir: Path, overwrite: bool, progress: bool,
                     **build_options) -> dict[str, Path]:
    """Each component built (or kept, when up to date) into ``components_dir/<builder>``;
    ``build_options`` (``quiet``, ``skip_unreadable_files``) go to ``run_build``."""
    from mmlongembed.build import run_build, why_not_current

    built = {}
    for item in planned:
        builder = get_builder(item.component.builder)
        final = components_dir / builder.name
        print(f"== component {builder.name} ({'Hub' if item.sources is None else item.sources})", file=sys.stderr)
        reason = why_not_current(builder, item.config, final) if final.exists() and not overwrite else "absent"
        if reason is None:
            print(f"{final} is up to date: this toolkit made it from the same config, seed and sources",
                  file=sys.stderr)
            built[builder.name] = final
            continue
        try:
            # The components folder is the release's own: a stale component is replaced.
            built[builder.name] = run_build(builder, item.config, components_dir, overwrite=final.exists(),
                                            progress=progress, **build_options)
        except UserError as error:
            message = str(error)
            raise type(error)(message if message.startswith(builder.name) else f"{builder.name}: {message}") from None
    return built


# -- assembling the release -------------------------------------------------------------------------

def _place(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s file: a hardlink (no bytes copied), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _table1_key(row: dict) -> str:
    if row["dataset"] == "needle":
        return f"needle-{json.loads(row.get('extra') or '{}').get('needle_modality', 'text')}"
    return row["dataset"]


def paper_table1() -> dict:
    return json.loads(PAPER_TABLE1.read_text(encoding="utf-8"))


def measured_table1(rows: list[dict]) -> list[dict]:
    """Table 1 from the pools table: per source, its task, corpus modality, queries, corpus
    (candidates), the candidates a query ranks (every candidate of its pool; averaged over
    queries), and per length the pools' queries and candidates."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[_table1_key(row)].append(row)
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
            "candidates_per_query": round(sum(r["n_queries"] * r["n_candidates"] for r in members) / queries, 1)
            if queries else 0.0,
            "per_length": lengths,
        })
    return out


def _length_name(length: int) -> str:
    return f"{length // 1024}k" if length >= 1024 and length % 1024 == 0 else str(length)


def figure1(root: Path, rows: list[dict], specs: dict, path: Path) -> None:
    """Paper Figure 1: the candidate length distribution, one panel per task, one histogram per
    source (log-scaled lengths), read from the corpus shards' `n_tokens` column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pyarrow.parquet as pq

    key_of = {r["pool"]: _table1_key(r) for r in rows}
    task_of = {r["pool"]: r["task"] for r in rows}
    lengths: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for shard in sorted({spec.path for name, spec in specs.items() if name.endswith("-corpus")}):
        table = pq.read_table(root / shard, columns=["pool", "n_tokens"]).to_pydict()
        for pool, n in zip(table["pool"], table["n_tokens"]):
            if pool in key_of:
                lengths[task_of[pool]][key_of[pool]].append(n)
    tasks = [t for t in TASK_NAMES if t in lengths] + sorted(set(lengths) - set(TASK_NAMES))
    names = {r["key"]: r["dataset"] for r in paper_table1()["rows"]}
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.2 * max(1, len(tasks)), 3.2), squeeze=False)
    everything = [n for per_task in lengths.values() for values in per_task.values() for n in values] or [1]
    bins = np.geomspace(max(1, min(everything)), max(everything) + 1, 40)
    for ax, task in zip(axes.flat, tasks):
        for key, values in sorted(lengths[task].items()):
            ax.hist(values, bins=bins, alpha=0.55, label=f"{names.get(key, key)} ({len(values)})")
        ax.set_xscale("log")
        ax.set_title(TASK_NAMES.get(task, task))
        ax.set_xlabel("candidate length (tokens, log scale)")
        ax.legend(fontsize=7, loc="upper left")
    axes.flat[0].set_ylabel("candidates")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def distinct_images(root: Path, paths: list[str]) -> tuple[int, int]:
    """(distinct images, their bytes) over the corpus and query shards ``paths`` of a release."""
    import pyarrow.parquet as pq

    seen: dict[bytes, None] = {}
    for path in paths:
        column = pq.read_table(root / path, columns=["images"]).column("images")
        for chunk in column.chunks:
            images = chunk.flatten()
            if len(images):
                seen.update(dict.fromkeys(b for b in images.field("bytes").to_pylist() if b is not None))
    return len(seen), sum(len(b) for b in seen)


def demote_headings(markdown: str) -> str:
    """A component card's body inside the release card: every heading one level down (code
    blocks untouched)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" + line if not fenced and re.match(r"#{1,5} ", line) else line)
    return "\n".join(out) + "\n"


def _card_body(card_path: Path) -> str:
    text = card_path.read_text(encoding="utf-8")
    return text[text.index("\n---", 4) + 5:] if text.startswith("---\n") else text


def assemble(builder: "MMLongEmbedBuilder", config: MMLongEmbedConfig, components: dict[str, Path],
             absent: dict[str, str], tmp_dir: Path) -> dict:
    """The release in ``tmp_dir`` from the component builds; returns its manifest."""
    from mmlongembed.card import render_card
    from mmlongembed.layout import ConfigSpec, configs_from_card, read_config
    from mmlongembed.output import write_json, write_pools_rows
    from mmlongembed.build import made_by
    from mmlongembed.validate import load_manifest

    rows, specs, files, placed = [], [], {}, {}
    manifests, bodies, recorded = {}, {}, {}
    for name, directory in components.items():
        manifest = load_manifest(directory)
        own_specs = configs_from_card(directory / "README.md")
        manifests[name] = manifest
        rows += [{k: v[i] for k, v in table.items()} for table in [read_config(directory, own_specs["pools"])]
                 for i in range(len(table.get("pool", [])))]
        for path, facts in sorted((manifest.get("files") or {}).items()):
            if path == own_specs["pools"].path:
                continue
            if path in placed:
                raise UserError(f"components {placed[path]} and {name} both write {path}")
            _place(directory / path, tmp_dir / path)
            placed[path], files[path] = name, facts
        specs += [spec for spec_name, spec in own_specs.items() if spec_name != "pools"]
        for figure in sorted((directory / "figures").glob("*")):
            if figure.is_file():
                _place(figure, tmp_dir / "figures" / name / figure.name)
        bodies[name] = demote_headings(_card_body(directory / "README.md").replace(
            "](figures/", f"](figures/{name}/"))
        recorded[name] = {
            "builder": manifest["builder"], "config": manifest.get("config"), "seed": manifest.get("seed"),
            "sources": manifest.get("sources"), "synthetic": manifest.get("synthetic") or [],
            "toolkit": manifest.get("toolkit"), "tokenizer": manifest.get("tokenizer"),
            "llm_steps": manifest.get("llm_steps") or [], "skipped": (manifest.get("report") or {}).get("skipped", {}),
            "manifest_sha256": file_sha256(directory / "manifest.json"), "storage": manifest.get("storage"),
        }
    names = [r["pool"] for r in rows]
    if len(set(names)) != len(names):
        raise UserError("two components name the same pool")
    pools_path = write_pools_rows(rows, tmp_dir / "data" / "pools")
    pools_rel = pools_path.relative_to(tmp_dir).as_posix()
    files[pools_rel] = {"sha256": file_sha256(pools_path), "bytes": pools_path.stat().st_size}
    specs = [ConfigSpec("pools", pools_rel), *specs]
    by_name = {spec.name: spec for spec in specs}
    figure1(tmp_dir, rows, by_name, tmp_dir / "figures" / "figure1_candidate_lengths.png")

    image_shards = sorted({s.path for s in specs if s.name.endswith(("-corpus", "-queries"))})
    n_images, image_bytes = distinct_images(tmp_dir, image_shards)
    per_component = sum(int((m.get("storage") or {}).get("distinct_image_bytes", 0)) for m in manifests.values())
    data_bytes = sum(f["bytes"] for f in files.values())
    text_bytes = sum(int((m.get("storage") or {}).get("text_bytes", 0)) for m in manifests.values())
    storage = {"data_bytes_on_disk": data_bytes, "distinct_images": n_images, "distinct_image_bytes": image_bytes,
               "distinct_image_bytes_per_component_sum": per_component,
               "image_bytes_in_two_components": per_component - image_bytes, "text_bytes": text_bytes,
               "ratio_to_distinct_payload": round(data_bytes / (image_bytes + text_bytes), 4)
               if image_bytes + text_bytes else 0.0}
    synthetic = [f"{name}: {part}" for name, facts in recorded.items() for part in facts["synthetic"]]
    table1 = measured_table1(rows)
    head = made_by(builder, config)
    manifest = {
        **head, "builder": {**head["builder"], "output_kind": builder.output_kind},
        "sources": {name: facts["sources"] for name, facts in recorded.items()},
        "synthetic": synthetic,
        "components": [{"name": name, **facts} for name, facts in recorded.items()],  # in the paper's order
        "absent": absent,
        "llm_steps": [{**step, "component": name} for name, facts in recorded.items() for step in facts["llm_steps"]],
        "pools": [stat for m in manifests.values() for stat in m.get("pools") or []],
        "label_free_audit": {k: v for m in manifests.values() for k, v in (m.get("label_free_audit") or {}).items()},
        "table1": table1, "storage": storage, "files": files,
    }
    write_json(tmp_dir / "manifest.json", manifest)
    write_json(tmp_dir / "build_config.json", manifest["config"])
    context = {
        "title": builder.title, "licence": builder.licence, "languages": builder.languages, "configs": specs,
        "n_rows": sum(r["n_queries"] + r["n_candidates"] for r in rows), "manifest": manifest, "table1": table1,
        "paper": {r["key"]: r for r in paper_table1()["rows"]},
        "synthetic": synthetic, "substitutes": substitutes(recorded), "absent": absent, "storage": storage,
        "components": [{"name": name, "title": get_builder(name).title, "version": facts["builder"]["version"],
                        "pools": sum(1 for r in rows if r["dataset"] == name), "body": bodies[name],
                        "options": non_default_options(name, facts["config"] or {})}
                       for name, facts in recorded.items()],
        "config": manifest["config"],
    }
    (tmp_dir / "README.md").write_text(render_card(builder.card_template, context), encoding="utf-8")
    return manifest


def _same(a, b) -> bool:
    """Equal as the manifest records them (the up-to-date rule's reading, build._as_json)."""
    from mmlongembed.build import _as_json

    return _as_json(a) == _as_json(b)


def non_default_options(name: str, config: dict) -> dict:
    """A component's options that differ from its builder's defaults (the release's defaults,
    --set), bar seed and sources."""
    defaults = public_config(get_builder(name).config_class())
    return {k: v for k, v in config.items() if k not in ("seed", "sources") and not _same(v, defaults.get(k))}


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
        ["source", "task", "modality", "pools", "queries", "corpus", "cand/query", "paper q/corpus/cand"],
        [(r["dataset"], r["task"], r["modality"], r["pools"], r["queries"], r["corpus"], r["candidates_per_query"],
          "/".join(str(figure((paper.get(r["key"]) or {}).get(k))) for k in ("queries", "corpus", "candidates_per_query")))
         for r in table1])


def check_release(root: Path, manifest: dict) -> list:
    """The assembled release read back as `mmle validate` reads it, bar the recount: the card's
    configs against the pools table, every data file there and as its component wrote it."""
    from mmlongembed.layout import configs_from_card, pools_table
    from mmlongembed.validate import check_configs, check_files, check_readable

    specs = configs_from_card(root / "README.md")
    check_readable(root, specs)
    return check_configs(pools_table(root, specs)["pool"], specs) + check_files(root, specs, manifest)


def why_release_not_current(builder: "MMLongEmbedBuilder", config: MMLongEmbedConfig, components: dict[str, Path],
                            absent: dict[str, str], final_dir: Path) -> str | None:
    """None when ``final_dir`` is the release this toolkit would assemble again from these
    component builds; else why not."""
    from mmlongembed.validate import InvalidBuild, check_files, load_manifest

    try:
        manifest = load_manifest(final_dir)
    except (InvalidBuild, OSError) as error:
        return f"it holds no readable manifest.json: {error}"
    toolkit = toolkit_identity()
    if toolkit["git_dirty"] is not False or toolkit["git_commit"] == "unknown":
        return "this toolkit is not a clean git checkout, so its code cannot be compared"
    if not _same(manifest.get("toolkit"), toolkit) or manifest.get("builder", {}).get("version") != builder.version:
        return "another toolkit made it"
    if not _same(manifest.get("config"), public_config(config)) or not _same(manifest.get("absent"), absent):
        return "another config made it"
    recorded = {c.get("name"): c for c in manifest.get("components") or []}
    if list(recorded) != list(components) or any(
            recorded[name].get("manifest_sha256") != file_sha256(directory / "manifest.json")
            for name, directory in components.items()):
        return "its components changed"
    changed = check_files(final_dir, {}, manifest)
    if changed:
        return f"its files changed after the build: {changed[0].detail}"
    return None


@register
class MMLongEmbedBuilder(Builder):
    """The whole MMLongEmbed benchmark in one dataset repo: every task of the paper (Visual
    Grounding, Multi-Source Reasoning, Logical and Temporal Summarization) from the sources that
    are there, one component builder per source, assembled into one release with one pools
    table, the paper's Table 1 beside the measured one, and one manifest."""

    name = RELEASE
    version = "1.0.0"
    task = "all"
    title = "MMLongEmbed: long-context multimodal embedding benchmark (all tasks)"
    config_class = MMLongEmbedConfig
    card_template = "mmlongembed.md.j2"
    licence = "other"
    output_kind = "composite"

    def __init__(self):
        self._component_builders: dict[str, Builder] = {}

    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict):
        """Each pool is checked by the builder of its component (its `dataset`)."""
        name = pool_row["dataset"]
        if name not in self._component_builders:
            self._component_builders[name] = get_builder(name)
        return self._component_builders[name].validate_pool(pool_row, corpus, queries, qrels)

    def source_identity(self, config) -> dict:
        return {"components": "see manifest['components'][<name>]['sources']"}

    def build_release(self, config: MMLongEmbedConfig, output_root: Path, overwrite: bool = False,
                      progress: bool = True, **build_options) -> Path:
        """``build_options`` (``quiet``, ``skip_unreadable_files``) go to every component's build."""
        from mmlongembed.build import synthetic_summary, temporary_output
        from mmlongembed.outdir import BuildLock, check_output_root, check_replaceable, remove_stale_temporaries
        from mmlongembed.output import commit_output_dir
        from mmlongembed.validate import InvalidBuild, format_report, load_manifest, validate_build

        output_root = Path(output_root)
        final_dir = output_root / self.name
        planned, absent = plan(config)
        check_output_root(output_root)
        components_dir = Path(config.components) if config.components else output_root / COMPONENTS_FOLDER
        with BuildLock(final_dir):
            if final_dir.exists() and not overwrite:
                try:
                    made_by = load_manifest(final_dir)["builder"]["name"]
                except (InvalidBuild, OSError):
                    made_by = None
                if made_by != self.name:  # a release is rebuilt in place; anything else is not ours
                    raise UserError(f"output directory {final_dir} already exists and is not an {self.name} release; "
                                    "pass --overwrite to replace it")
            check_replaceable(final_dir)
            components = build_components(planned, components_dir, overwrite, progress, **build_options)
            if final_dir.exists() and not overwrite:
                reason = why_release_not_current(self, config, components, absent, final_dir)
                if reason is None:
                    print(f"{final_dir} is up to date: assembled by this toolkit from the same component builds",
                          file=sys.stderr)
                    _print_end(load_manifest(final_dir), synthetic_summary)
                    return final_dir
                print(f"reassembling {final_dir} ({reason})", file=sys.stderr)
            remove_stale_temporaries(final_dir)
            with temporary_output(final_dir, overwrite=True) as tmp_dir:
                manifest = assemble(self, config, components, absent, tmp_dir)
                if config.revalidate:
                    validation = validate_build(tmp_dir, progress=progress)
                    problems = validation.problems
                    print(format_report(problems, dict(validation.checked)), file=sys.stderr)
                else:
                    problems = check_release(tmp_dir, manifest)
                    print(f"checked the release: {len(manifest['files'])} data files as their components wrote "
                          f"and validated them, every config against the pools table"
                          + (f": {len(problems)} problems" if problems else ""), file=sys.stderr)
                if problems:
                    raise UserError(f"the assembled release has {len(problems)} problems ({problems[0]}); nothing "
                                    f"was written to {final_dir}")
                _print_end(manifest, synthetic_summary)
                commit_output_dir(tmp_dir, final_dir)
        print(f"built {self.name} into {final_dir}")
        return final_dir

    def example_config(self, directory) -> MMLongEmbedConfig:
        """A tiny release from generated sources: every component's own example sources, written
        into one root in the shared-data layout, and its example options as --set; YoukuDC is
        left out (its translation step has no offline fallback)."""
        return example_release_config(Path(directory), exclude=("youkudc",))


def example_release_config(root: Path, exclude: tuple[str, ...] = ("youkudc",)) -> MMLongEmbedConfig:
    """Each component's ``example_config`` sources in one root (a component whose example writes
    its files straight into its folder gets its own subfolder, as the shared layout has it), and
    the example's options, where they differ from the builder's defaults, as --set."""
    settings = []
    for component in COMPONENTS:
        if component.builder in exclude:
            continue
        builder = get_builder(component.builder)
        example = builder.example_config(root if component.layouts[-1].whole_root
                                         else root / component.layouts[-1].folders[0])
        defaults = builder.config_class()
        for f in dataclasses.fields(example):
            value = getattr(example, f.name)
            if f.name in ("seed", "sources") or value == getattr(defaults, f.name):
                continue
            text = ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value).lower() \
                if isinstance(value, bool) else str(value)
            settings.append(f"{component.builder}.{f.name}={text}")
    for name, options in DEFAULT_OPTIONS.items():  # the examples' grids replace the release's defaults
        if name not in exclude:
            settings += [f"{name}.{k}={','.join(map(str, getattr(get_builder(name).config_class(), k)))}"
                         for k in options if not any(s.startswith(f"{name}.{k}=") for s in settings)]
    return MMLongEmbedConfig(sources=(str(root),), exclude=",".join(exclude), set=tuple(settings))

def _print_end(manifest: dict, synthetic_summary) -> None:
    print(table1_text(manifest.get("table1") or []), file=sys.stderr)
    storage = manifest.get("storage") or {}
    print(f"storage: {storage.get('data_bytes_on_disk', 0) / 1e6:.1f} MB of data on disk for "
          f"{storage.get('distinct_image_bytes', 0) / 1e6:.1f} MB of distinct images "
          f"({storage.get('distinct_images', 0)} images) + {storage.get('text_bytes', 0) / 1e6:.1f} MB of text",
          file=sys.stderr)
    for name, why in (manifest.get("absent") or {}).items():
        print(f"absent: {name} ({why})", file=sys.stderr)
    print(synthetic_summary(manifest.get("synthetic") or []), file=sys.stderr)
