"""The plan of the MMLongEmbed release (``mmlongembed.release.composite``): its components (one builder
per source of the paper), where each one's files live under a ``--sources`` root, the release's
options (``MMLongEmbedConfig``), each component's options (the release's defaults, then
``--set``), and which components are built from which sources: ``plan`` makes the ``ReleasePlan``
once from the config, and the build reads it from then on.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.core.builder import Builder, config_from_dict, get_builder
from mmlongembed.core.errors import UserError
from mmlongembed.llm import LLMConfig

COMPONENTS_FOLDER = "mmlongembed-components"


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
    """One component the release builds: its builder, the --sources path it reads (None: the
    Hub) and its config (the release's seed and LLM options, the release's defaults, then --set)."""

    component: Component
    builder: Builder
    sources: Path | None
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
    from mmlongembed.core.flags import add_dataclass_arguments

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


@dataclass(frozen=True)
class ReleasePlan:
    """What the release will hold, decided from its config before anything is built (``plan``)."""

    config: MMLongEmbedConfig
    to_build: tuple[Planned, ...]  # in the paper's order
    absent: dict[str, str]  # component left out -> why (the manifest and the card say it)

    def foreseen_synthetic(self) -> dict[str, list[str]]:
        """Component -> what in its build will be synthetic (or, for stand-in queries, may be:
        only documents without a reference summary get one), in the manifest's words, known from
        its options and sources before anything is built."""
        found = {}
        for item in self.to_build:
            name, parts = item.builder.name, []
            marker = item.builder.sources_marker(item.config)
            if marker:
                parts.append(f"sources: {marker.split('. ')[0].rstrip('.')}")
            if name in LLM_WRITTEN and getattr(item.config, "llm", "none") == "none":
                parts.append("queries: built with --llm none, so documents without a reference summary get "
                             "text-layer stand-in queries")
            if parts:
                found[name] = parts
        return found

    def not_pushable_note(self) -> str | None:
        """The line a release build prints first when what it will hold keeps `mmle push` from it."""
        synthetic = self.foreseen_synthetic()
        if not synthetic:
            return None
        why = "; ".join(f"{name}: {part}" for name, parts in synthetic.items() for part in parts)
        return (f"note: this release will be marked synthetic, and `mmle push` refuses it ({why}); "
                + pushable_advice(synthetic))


def plan(config: MMLongEmbedConfig) -> ReleasePlan:
    """The components to build from ``config``, in the paper's order, and those absent, with why.
    A component with no local files and no Hub source, not left out, stops the build: one line
    naming each such source and what to put where."""
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
        planned.append(Planned(component, builder, local, config_from_dict(builder.config_class, values)))
    if missing:
        names = ",".join(m.split(" ", 1)[0] for m in missing)
        raise UserError(f"no sources for {'; '.join(missing)}; pass them with --sources (make: SOURCES=...) or "
                        f"leave them out with --exclude {names}")
    if not planned:
        raise UserError("every component is left out: nothing to build")
    return ReleasePlan(config, tuple(planned), absent)


# -- whether the release can be pushed --------------------------------------------------------------

# Components whose synthetic part may be fallback content that an LLM replaces (MMLongBench-Doc has
# no summaries: under --llm none its queries are text-layer stand-ins, recorded as "queries: ...").
LLM_WRITTEN = {"mmlongbench": "an LLM writes the document summaries"}
LLM_OPTIONS = "{name}.llm=openai {name}.llm-base-url=URL {name}.llm-model=MODEL"


def pushable_advice(synthetic: dict[str, list[str]]) -> str:
    """How to build a release that `mmle push` takes, given what in each named component is
    synthetic (its manifest's ``synthetic`` parts): an LLM for a component whose only synthetic
    part is its stand-in queries, else leaving the components out."""
    llm = [name for name, parts in synthetic.items()
           if name in LLM_WRITTEN and all(part.startswith("queries:") for part in parts)]
    others = [name for name in synthetic if name not in llm]
    ways = []
    if llm:
        ways.append("--set " + " ".join(LLM_OPTIONS.format(name=n) for n in llm) + " ("
                    + "; ".join(LLM_WRITTEN[n] for n in llm) + ")"
                    + (f" --exclude {','.join(others)}" if others else ""))
    ways.append(f"--exclude {','.join(synthetic)}")
    return "for a pushable release, build it with " + ", or ".join(ways)
