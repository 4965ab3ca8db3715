"""`mmle build mmlongembed`: every task of the paper in one dataset repo, one release.

The release is made of *components*, the existing builders (the needle grid, HotpotQA, MMDocRAG,
GovReport, MMLongBench, YoukuDC, ActivityNet), each built by the ordinary pipeline
(``build.run.run_build``: its lock, temporary folder, validation and atomic move) into a components
folder, ``<output>/mmlongembed-components/<builder>/``. A component whose build is up to date
(``build.run.why_not_current``) is not built again, so adding one source's files later builds only
that source; components are built one after another, so memory is bounded by the largest one.

The release is then assembled from the components' files: their data files hardlinked (copied
across filesystems) under the same paths (``data/<dataset>/...``: no two components share a
dataset), one ``pools`` table of all their rows (the same columns), their configs in one card,
their figures, one manifest recording every component. It is written into a temporary folder,
checked, and moved into place (``ReleasePipeline``, over the part every pipeline shares:
``mmlongembed.build.pipeline``). Every data file is the one its component wrote and validated
(sha256 checked again here); ``--revalidate`` recounts the whole release once more, as ``mmle
validate`` does.

``ReleasePipeline.run`` is the whole build, in order: plan (``release.plan.plan``, once), build
each component, assemble, check. The plan, the folders and the run's options travel together in
one ``Release``, which every stage is handed; no stage works anything out from the config again.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.build.run import BENCHMARK, run_build, why_not_current
from mmlongembed.checks.build_checks import check_configs, check_files, check_readable, load_manifest
from mmlongembed.core.builder import Builder, get_builder, register
from mmlongembed.output.disclosure import DATASHEET_MARKER
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import ConfigSpec, configs_from_card, pool_rows, pools_table, split_card
from mmlongembed.output.manifest import file_sha256, public_config, toolkit_identity
from mmlongembed.output.writer import (
    commit_output_dir, image_column_bytes, storage_ratios, write_json, write_pools_rows)
from mmlongembed.output.outdir import check_replaceable, remove_stale_temporaries
from mmlongembed.build.pipeline import (
    Pipeline, as_recorded, card_context, clean_toolkit_problem, output_site, recorded_manifest, synthetic_summary,
    temporary_output, write_card)
from mmlongembed.checks.summary import counted
from mmlongembed.release.plan import (
    COMPONENTS, COMPONENTS_FOLDER, DEFAULT_OPTIONS, MMLongEmbedConfig, Planned, ReleasePlan, plan, pushable_advice)
from mmlongembed.release.tables import (
    demote_headings, distinct_images, figure1, measured_table1, paper_table1, substitutes, table1_text)
from mmlongembed.build.validate import validate_build

RELEASE = "mmlongembed"


# -- one release build, from its plan to its check ---------------------------------------------------

@dataclass(frozen=True)
class Release:
    """One build of the release: the plan made once from its config, where the release and its
    components are written, and how the build runs (also every component's build: ``quiet``,
    ``skip_unreadable_files``). ``ReleasePipeline.run`` hands it to every stage, which reads
    what it needs from it."""

    builder: MMLongEmbedBuilder
    plan: ReleasePlan
    final_dir: Path  # <output>/mmlongembed
    components_dir: Path  # --components, else <output>/mmlongembed-components
    overwrite: bool = False
    progress: bool = True  # already off under quiet
    quiet: bool = False
    skip_unreadable_files: bool = False

    @classmethod
    def planned(cls, builder: MMLongEmbedBuilder, config: MMLongEmbedConfig, final_dir: Path,
                **options) -> Release:
        """The release that ``config`` plans (``plan``), written to ``final_dir``; ``options``:
        the run's (``overwrite``, ``progress``, ``quiet``, ``skip_unreadable_files``)."""
        components_dir = Path(config.components) if config.components else final_dir.parent / COMPONENTS_FOLDER
        return cls(builder, plan(config), final_dir, components_dir, **options)

    @property
    def component_dirs(self) -> dict[str, Path]:
        """Each planned component's build folder (where ``run_build`` puts it), in the paper's order."""
        return {item.builder.name: self.components_dir / item.builder.name for item in self.plan.to_build}

    def why_component_not_current(self, item: Planned) -> str | None:
        """None when the component's folder holds what its build would write again; "absent"
        when there is none to keep (or --overwrite rebuilds it); else why not."""
        folder = self.components_dir / item.builder.name
        if self.overwrite or not folder.exists():
            return "absent"
        return why_not_current(item.builder, item.config, folder)

    def why_assembled_not_current(self) -> str | None:
        """None when ``final_dir`` is the release this toolkit would assemble again from the
        component builds; else why not."""
        manifest, unreadable = recorded_manifest(self.final_dir)
        if manifest is None:
            return unreadable
        toolkit = toolkit_identity()
        unclean = clean_toolkit_problem(toolkit)
        if unclean:
            return unclean
        if not _same(manifest.get("toolkit"), toolkit) or \
                manifest.get("builder", {}).get("version") != self.builder.version:
            return "another toolkit made it"
        if not _same(manifest.get("config"), public_config(self.plan.config)) or \
                not _same(manifest.get("absent"), self.plan.absent):
            return "another config made it"
        recorded = {c.get("name"): c for c in manifest.get("components") or []}
        components = self.component_dirs
        if list(recorded) != list(components) or any(
                recorded[name].get("manifest_sha256") != file_sha256(directory / "manifest.json")
                for name, directory in components.items()):
            return "its components changed"
        changed = check_files(self.final_dir, {}, manifest)
        if changed:
            return f"its files changed after the build: {changed[0].detail}"
        return None

    def why_not_current(self) -> str | None:
        """None when every component build is up to date and ``final_dir`` is the release they
        assemble; else why not."""
        for item in self.plan.to_build:
            reason = self.why_component_not_current(item)
            if reason is not None:
                return f"component {item.builder.name} is not up to date ({reason})"
        return self.why_assembled_not_current()

    def refuse_what_is_not_a_release(self) -> None:
        """A release is rebuilt in place (without --overwrite); anything else there is not ours."""
        if self.final_dir.exists() and not self.overwrite:
            manifest, _ = recorded_manifest(self.final_dir)
            if (manifest or {}).get("builder", {}).get("name") != self.builder.name:
                raise UserError(f"output directory {self.final_dir} already exists and is not an "
                                f"{self.builder.name} release; pass --overwrite to replace it")

    def keep_if_assembled(self) -> bool:
        """True when the release in place is what its component builds assemble: it is kept (its
        summary's end printed again). False when there is none, under --overwrite, or when it is
        to be reassembled (which is said, and why)."""
        if not self.final_dir.exists() or self.overwrite:
            return False
        reason = self.why_assembled_not_current()
        if reason is None:
            print(f"{self.final_dir} is up to date: assembled by this toolkit from the same component builds",
                  file=sys.stderr)
            _print_end(load_manifest(self.final_dir))
            return True
        print(f"reassembling {self.final_dir} ({reason})", file=sys.stderr)
        return False


class ReleasePipeline(Pipeline):
    """A release of several builds: each component built by its own pipeline (kept when up to
    date), then assembled into one repo in the pool layout (``assemble``), checked, moved into
    place."""

    output_kind = "composite"
    tasks = ("all",)

    def run(self, builder: MMLongEmbedBuilder, config: MMLongEmbedConfig, output_root: Path,
            overwrite: bool = False, progress: bool = True, quiet: bool = False,
            skip_unreadable_files: bool = False) -> Path:
        """Plan, build each component, assemble, check, in that order, each stage handed the one
        ``Release`` the plan made; an up-to-date release is kept. ``quiet`` and
        ``skip_unreadable_files`` go to every component's build."""
        release = Release.planned(builder, config, Path(output_root) / builder.name, overwrite=overwrite,
                                  progress=progress and not quiet, quiet=quiet,
                                  skip_unreadable_files=skip_unreadable_files)
        note = release.plan.not_pushable_note()
        if note and not quiet:
            print(note, file=sys.stderr)
        with output_site(output_root, builder.name) as final_dir:
            release.refuse_what_is_not_a_release()
            check_replaceable(final_dir)
            build_components(release)
            if release.keep_if_assembled():
                return final_dir
            remove_stale_temporaries(final_dir)
            with temporary_output(final_dir, overwrite=True) as tmp_dir:
                manifest = assemble(release, tmp_dir)
                check_assembled(release, tmp_dir, manifest)
                _print_end(manifest)
                commit_output_dir(tmp_dir, final_dir)
        print(f"built {builder.name} into {final_dir}")
        return final_dir

    def why_not_current(self, builder: MMLongEmbedBuilder, config: MMLongEmbedConfig,
                        final_dir: Path) -> str | None:
        """None when every component build is up to date and ``final_dir`` is the release they
        assemble (``Release.why_not_current``); else why not."""
        return Release.planned(builder, config, Path(final_dir)).why_not_current()

    def validate(self, root: Path, specs: dict, manifest: dict, builder: Builder, file_problems: list,
                 progress: bool = False):
        """A release is in the pool layout: validated as a benchmark is, each pool by the builder
        of its component (``MMLongEmbedBuilder.validate_pool``)."""
        return BENCHMARK.validate(root, specs, manifest, builder, file_problems, progress)


RELEASE_PIPELINE = ReleasePipeline()


# -- building the components -----------------------------------------------------------------------

def build_components(release: Release) -> None:
    """Each planned component built into ``release.components_dir/<builder>``, or kept when up to
    date; the release's ``quiet`` and ``skip_unreadable_files`` go to every one's ``run_build``."""
    for item in release.plan.to_build:
        name = item.builder.name
        folder = release.components_dir / name
        print(f"== component {name} ({'Hub' if item.sources is None else item.sources})", file=sys.stderr)
        if release.why_component_not_current(item) is None:
            print(f"{folder} is up to date: this toolkit made it from the same config, seed and sources",
                  file=sys.stderr)
            continue
        try:
            # The components folder is the release's own: a stale component is replaced.
            run_build(item.builder, item.config, release.components_dir, overwrite=folder.exists(),
                      progress=release.progress, quiet=release.quiet,
                      skip_unreadable_files=release.skip_unreadable_files)
        except UserError as error:
            message = str(error)
            raise type(error)(message if message.startswith(name) else f"{name}: {message}") from None


# -- assembling the release -------------------------------------------------------------------------

def _place(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s file: a hardlink (no bytes copied), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@dataclass
class Gathered:
    """What the release takes from its component builds (``gather``)."""

    rows: list[dict] = field(default_factory=list)  # their pools tables' rows, in the paper's order
    specs: list = field(default_factory=list)  # their configs, bar each one's `pools`
    files: dict[str, dict] = field(default_factory=dict)  # repo path -> sha256, bytes (as each recorded it)
    manifests: dict[str, dict] = field(default_factory=dict)
    bodies: dict[str, str] = field(default_factory=dict)  # each card's body, headings one level down
    recorded: dict[str, dict] = field(default_factory=dict)  # what the release manifest records of each


def gather(components: dict[str, Path], tmp_dir: Path) -> Gathered:
    """Every component's data files and figures placed in ``tmp_dir`` (hardlinked), and what the
    release takes from each: its pools rows, configs, card body and record."""
    gathered, placed = Gathered(), {}
    for name, directory in components.items():
        manifest = load_manifest(directory)
        own_specs = configs_from_card(directory / "README.md")
        gathered.manifests[name] = manifest
        gathered.rows += pool_rows(directory, own_specs)
        for path, facts in sorted((manifest.get("files") or {}).items()):
            if path == own_specs["pools"].path:
                continue
            if path in placed:
                raise UserError(f"components {placed[path]} and {name} both write {path}")
            _place(directory / path, tmp_dir / path)
            placed[path], gathered.files[path] = name, facts
        gathered.specs += [spec for spec_name, spec in own_specs.items() if spec_name != "pools"]
        for figure in sorted((directory / "figures").glob("*")):
            if figure.is_file():
                _place(figure, tmp_dir / "figures" / name / figure.name)
        card = directory / "README.md"
        _, body = split_card(card.read_text(encoding="utf-8"), str(card))
        body = body.split(DATASHEET_MARKER)[0]  # the release renders one datasheet for all its sources
        gathered.bodies[name] = demote_headings(body.replace("](figures/", f"](figures/{name}/"))
        gathered.recorded[name] = {
            "builder": manifest["builder"], "config": manifest.get("config"), "seed": manifest.get("seed"),
            "sources": manifest.get("sources"), "synthetic": manifest.get("synthetic") or [],
            "toolkit": manifest.get("toolkit"), "tokenizer": manifest.get("tokenizer"),
            "llm_steps": manifest.get("llm_steps") or [], "skipped": (manifest.get("report") or {}).get("skipped", {}),
            "manifest_sha256": file_sha256(directory / "manifest.json"), "storage": manifest.get("storage"),
        }
    return gathered


def release_storage(tmp_dir: Path, specs: list, files: dict[str, dict], manifests: dict[str, dict]) -> dict:
    """The release's storage figures: its distinct images (an image two components hold is stored
    twice, once in each one's shards), against the sum of the components' own."""
    image_shards = sorted({s.path for s in specs if s.name.endswith(("-corpus", "-queries"))})
    n_images, image_bytes = distinct_images(tmp_dir, image_shards)
    per_component = sum(int((m.get("storage") or {}).get("distinct_image_bytes", 0)) for m in manifests.values())
    data_bytes = sum(f["bytes"] for f in files.values())
    text_bytes = sum(int((m.get("storage") or {}).get("text_bytes", 0)) for m in manifests.values())
    image_bytes_on_disk = sum(image_column_bytes(tmp_dir / path) for path in image_shards)
    return {"data_bytes_on_disk": data_bytes, "distinct_images": n_images, "distinct_image_bytes": image_bytes,
            "distinct_image_bytes_per_component_sum": per_component,
            "image_bytes_in_two_components": per_component - image_bytes, "text_bytes": text_bytes,
            "image_bytes_on_disk": image_bytes_on_disk,
            "ratio_to_distinct_payload": round(data_bytes / (image_bytes + text_bytes), 4)
            if image_bytes + text_bytes else 0.0,
            "image_ratio_to_distinct": round(image_bytes_on_disk / image_bytes, 4) if image_bytes else 0.0}


def assemble(release: Release, tmp_dir: Path) -> dict:
    """The release in ``tmp_dir`` from its component builds; returns its manifest."""
    builder, absent = release.builder, release.plan.absent
    got = gather(release.component_dirs, tmp_dir)
    rows, recorded, manifests = got.rows, got.recorded, got.manifests
    names = [r["pool"] for r in rows]
    if len(set(names)) != len(names):
        raise UserError("two components name the same pool")
    pools_path = write_pools_rows(rows, tmp_dir / "data" / "pools")
    pools_rel = pools_path.relative_to(tmp_dir).as_posix()
    files = {**got.files, pools_rel: {"sha256": file_sha256(pools_path), "bytes": pools_path.stat().st_size}}
    specs = [ConfigSpec("pools", pools_rel), *got.specs]
    figure1(tmp_dir, rows, {spec.name: spec for spec in specs}, tmp_dir / "figures" / "figure1_candidate_lengths.png",
            synthetic={name for name, facts in recorded.items() if facts["synthetic"]})
    storage = release_storage(tmp_dir, specs, files, manifests)
    synthetic = [f"{name}: {part}" for name, facts in recorded.items() for part in facts["synthetic"]]
    table1 = measured_table1(rows)
    manifest = {
        **RELEASE_PIPELINE.made_by(builder, release.plan.config),
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
        **card_context(builder, manifest, specs, sum(r["n_queries"] + r["n_candidates"] for r in rows)),
        "table1": table1, "paper": {r["key"]: r for r in paper_table1()["rows"]},
        "synthetic": synthetic, "substitutes": substitutes(recorded), "absent": absent,
        "components": [{"name": name, "title": get_builder(name).title, "version": facts["builder"]["version"],
                        "pools": sum(1 for r in rows if r["dataset"] == name), "body": got.bodies[name],
                        "options": non_default_options(name, facts["config"] or {})}
                       for name, facts in recorded.items()],
    }
    write_card(builder, context, tmp_dir)
    return manifest


def _same(a, b) -> bool:
    """Equal as the manifest records them (the up-to-date rule's reading, pipeline.as_recorded)."""
    return as_recorded(a) == as_recorded(b)


def non_default_options(name: str, config: dict) -> dict:
    """A component's options that differ from its builder's defaults (the release's defaults,
    --set), bar seed and sources."""
    defaults = public_config(get_builder(name).config_class())
    return {k: v for k, v in config.items() if k not in ("seed", "sources") and not _same(v, defaults.get(k))}


# -- checking the assembled release -----------------------------------------------------------------

def check_release(root: Path, manifest: dict) -> list:
    """The assembled release read back as `mmle validate` reads it, bar the recount: the card's
    configs against the pools table, every data file there and as its component wrote it."""
    specs = configs_from_card(root / "README.md")
    check_readable(root, specs)
    return check_configs(pools_table(root, specs)["pool"], specs) + check_files(root, specs, manifest)


def check_assembled(release: Release, tmp_dir: Path, manifest: dict) -> None:
    """The release assembled in ``tmp_dir`` checked (--revalidate: recounted, as `mmle validate`
    does); one line when it has problems."""
    if release.plan.config.revalidate:
        validation = validate_build(tmp_dir, progress=release.progress)
        problems = validation.problems
        print(validation.report(), file=sys.stderr)
    else:
        problems = check_release(tmp_dir, manifest)
        print(f"checked the release: {counted(len(manifest['files']), 'data files')} as their components wrote "
              f"and validated them, every config against the pools table"
              + (f": {counted(len(problems), 'problems')}" if problems else ""), file=sys.stderr)
    if problems:
        raise UserError(f"the assembled release has {counted(len(problems), 'problems')} ({problems[0]}); nothing "
                        f"was written to {release.final_dir}")


@register
class MMLongEmbedBuilder(Builder):
    """The whole MMLongEmbed benchmark in one dataset repo: every task of the paper (Visual
    Grounding, Multi-Source Reasoning, Logical and Temporal Summarization) from the sources that
    are there, one component builder per source, assembled into one release with one pools
    table, the paper's Table 1 beside the measured one, and one manifest."""

    name = RELEASE
    version = "1.1.0"  # 1.1: Figure 1 bars side by side, synthetic sources marked; Table 1 names its two per-query figures
    task = "all"
    title = "MMLongEmbed: long-context multimodal embedding benchmark (all tasks)"
    config_class = MMLongEmbedConfig
    card_template = "mmlongembed.md.j2"
    licence = "other"
    pipeline = RELEASE_PIPELINE

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


def _print_end(manifest: dict) -> None:
    print(table1_text(manifest.get("table1") or []), file=sys.stderr)
    storage = manifest.get("storage") or {}
    print(f"storage: {storage.get('data_bytes_on_disk', 0) / 1e6:.1f} MB of data on disk for "
          f"{storage.get('distinct_image_bytes', 0) / 1e6:.1f} MB of distinct images "
          f"({storage.get('distinct_images', 0)} images) + {storage.get('text_bytes', 0) / 1e6:.1f} MB of text",
          file=sys.stderr)
    for component in manifest.get("components") or ():
        print(f"  {component['name']}: {storage_ratios(component.get('storage'))}", file=sys.stderr)
    for name, why in (manifest.get("absent") or {}).items():
        print(f"absent: {name} ({why})", file=sys.stderr)
    print(synthetic_summary(manifest.get("synthetic") or []), file=sys.stderr)
    synthetic = {c["name"]: c["synthetic"] for c in manifest.get("components") or () if c.get("synthetic")}
    if synthetic:
        print(f"NOT PUSHABLE: {pushable_advice(synthetic)}", file=sys.stderr)
