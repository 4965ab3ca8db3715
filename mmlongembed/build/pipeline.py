"""What every output kind's build shares, and the interface each kind's pipeline fills in.

A builder names the pipeline of its output kind (``Builder.pipeline``): a benchmark of pools
(``mmlongembed.build.run.BENCHMARK``, what a builder that names none gets), a training set
(``mmlongembed.training.pipeline.TRAINING``), the release of several builds
(``mmlongembed.release.composite.RELEASE_PIPELINE``). ``run_build`` and ``validate_build`` ask the
pipeline; nothing tells the kinds apart by name.

The shared part, used by every pipeline (and by the MVEB task folders, which are no builder's):
the inputs found before anything about the output (``check_inputs``), the output site
(``output_site``: the check of the output root, SIGTERM as an interrupt, the build lock, no empty
output root left behind), an existing build kept when up to date or refused
(``keep_if_current``), stale temporaries removed, the temporary folder and its atomic move
(``temporary_output``, ``finish``), the manifest's record of what made a build
(``Pipeline.made_by``), the card and croissant.json (``card_context``, ``write_card``) and the summary's end
(``skipped_table``, ``synthetic_summary``).
"""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from mmlongembed.checks.build_checks import InvalidBuild, Validation, check_files, load_manifest
from mmlongembed.core.builder import Builder, BuildReport
from mmlongembed.output.card import render_card
from mmlongembed.output.croissant import write_croissant
from mmlongembed.output.disclosure import DATASHEET_MARKER, hub_metadata, render_datasheet
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import ROW_GROUP_BYTES, ConfigSpec
from mmlongembed.output.manifest import public_config, toolkit_identity
from mmlongembed.output.outdir import (
    BuildLock, check_output_root, check_replaceable, remove_stale_temporaries, sigterm_as_interrupt, write_error)
from mmlongembed.output.writer import Written, commit_output_dir, prepare_output_dir
from mmlongembed.checks.summary import counted, format_table
from mmlongembed.core.tokens import default_counter


class Pipeline:
    """How one output kind is built into a folder, found up to date, and validated.

    ``run`` is the whole build (``run_build``): here, inside the output site, an existing build
    kept when up to date (``why_not_current``) or refused, then ``build`` into the final folder;
    a kind whose order differs (the release builds its components first) overrides ``run``."""

    # what the manifest records as builder.output_kind; a benchmark's records none (its
    # manifests predate the kinds, and a benchmark build's manifest must not change)
    output_kind: ClassVar[str | None] = None
    tasks: ClassVar[tuple[str, ...]] = ()  # what a builder of this kind may declare as its `task`

    def run(self, builder: Builder, config, output_root: Path, overwrite: bool = False, progress: bool = True,
            quiet: bool = False, skip_unreadable_files: bool = False) -> Path:
        report = BuildReport(progress=progress and not quiet, skip_unreadable_files=skip_unreadable_files)
        check_inputs(builder, config)
        with output_site(output_root, builder.name) as final_dir:
            if keep_if_current(final_dir, overwrite, lambda: self.why_not_current(builder, config, final_dir)):
                return final_dir
            check_replaceable(final_dir)
            remove_stale_temporaries(final_dir)
            built = self.build(builder, config, final_dir, overwrite, report, quiet)
            print(f"built {builder.name} into {built}")
            return built

    def build(self, builder: Builder, config, final_dir: Path, overwrite: bool, report: BuildReport,
              quiet: bool = False) -> Path:
        """The build proper, inside ``run``'s lock: sources in, ``final_dir`` out."""
        raise NotImplementedError

    def why_not_current(self, builder: Builder, config, final_dir: Path) -> str | None:
        """None when ``final_dir`` holds exactly what this build would write again, so that running
        the same command twice is not an error: a build made by this toolkit (the same commit, from
        a clean checkout) from the same config, seed, sources and tokenizer, whose LLM answers a
        rerun would replay from the cache (``llm.rerun_problem``), its files as written. Else why
        it is not."""
        from mmlongembed.llm import rerun_problem

        manifest, unreadable = recorded_manifest(final_dir)
        if manifest is None:
            return unreadable
        expected = self.made_by(builder, config)
        unclean = clean_toolkit_problem(expected["toolkit"])
        if unclean:
            return unclean
        for key, value in expected.items():
            if as_recorded(manifest.get(key)) != as_recorded(value):
                return f"another {key} made it"
        llm_problem = rerun_problem(manifest.get("llm_steps") or (), getattr(config, "llm_cache", None))
        if llm_problem:
            return llm_problem
        if as_recorded(manifest.get("sources")) != as_recorded(builder.source_identity(config)):
            return "other sources made it"
        changed = check_files(final_dir, {}, manifest)
        if changed:
            return f"its files changed after the build: {changed[0].detail}"
        return None

    def validate(self, root: Path, specs: dict[str, ConfigSpec], manifest: dict, builder: Builder,
                 file_problems: list, progress: bool = False) -> Validation:
        """The checks of a build of this kind as written (``validate_build``); ``file_problems``:
        what ``check_files`` found (hashed first, so none of them is a damaged file)."""
        raise NotImplementedError

    def made_by(self, builder: Builder, config) -> dict:
        """The manifest's record of what made a build, bar its sources (which take hashing):
        also what decides whether an existing build is up to date."""
        record = {
            "builder": {"name": builder.name, "version": builder.version, "task": builder.task},
            "toolkit": toolkit_identity(),
            "config": public_config(config),
            "seed": config.seed,
            "tokenizer": default_counter().identity,
        }
        if self.output_kind is not None:
            record["builder"]["output_kind"] = self.output_kind
        return record


def check_inputs(builder: Builder, config) -> None:
    """Every local path the build reads exists (``Builder.input_paths``): inputs are checked
    before the output, so a typo in ``--sources`` over an existing build names the missing path,
    not the build it would have replaced."""
    from mmlongembed.readers.sources import require_dir

    for flag, paths in builder.input_paths(config).items():
        for path in paths:
            require_dir(path, flag)


@contextmanager
def output_site(output_root: Path, name: str):
    """``output_root/<name>``, the final folder of a build, to build into: the output root
    checked, SIGTERM an interrupt, the build lock held; a failed first build leaves no empty
    output root behind."""
    output_root = Path(output_root)
    created = not output_root.exists()
    check_output_root(output_root)
    final_dir = output_root / name
    try:
        with sigterm_as_interrupt(), BuildLock(final_dir):
            yield final_dir
    finally:
        if created and output_root.is_dir() and not any(output_root.iterdir()):
            output_root.rmdir()  # a failed first build leaves no empty --output behind


def keep_if_current(final_dir: Path, overwrite: bool, why_not_current) -> bool:
    """True when ``final_dir`` exists and is up to date (``why_not_current()`` is None): it is
    kept, so that running the same command twice is not an error. False when there is nothing
    there or ``overwrite``; an existing build that is not up to date is refused (one line)."""
    if not final_dir.exists() or overwrite:
        return False
    reason = why_not_current()
    if reason is None:
        print(f"{final_dir} is up to date: this toolkit made it from the same config, seed and sources "
              "(--overwrite rebuilds it)")
        return True
    raise UserError(f"output directory {final_dir} already exists ({reason}); pass --overwrite to replace it")


def recorded_manifest(final_dir: Path) -> tuple[dict | None, str | None]:
    """(the manifest of the build in ``final_dir``, None), or (None, why it has none to read)."""
    try:
        return load_manifest(final_dir), None
    except (InvalidBuild, OSError) as error:
        return None, f"it holds no readable manifest.json: {error}"


def as_recorded(value):
    """``value`` as the manifest records it (JSON, keys sorted): what up-to-date checks compare."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def clean_toolkit_problem(toolkit: dict) -> str | None:
    """Why builds made by ``toolkit`` cannot be compared with what it would write now, if so."""
    if toolkit["git_dirty"] is not False or toolkit["git_commit"] == "unknown":
        return "this toolkit is not a clean git checkout, so its code cannot be compared"
    return None


@contextmanager
def temporary_output(final_dir: Path, overwrite: bool):
    """A temporary sibling of ``final_dir`` to write into, removed on any failure (Ctrl-C and
    SIGTERM included); an OSError (a full disk, a quota, permissions) becomes one line."""
    tmp_dir = prepare_output_dir(final_dir, overwrite)
    try:
        yield tmp_dir
    except BaseException as error:  # Ctrl-C and SIGTERM (outdir.Terminated) included
        shutil.rmtree(tmp_dir, ignore_errors=True)
        one_line = write_error(error, final_dir, tmp_dir) if isinstance(error, OSError) else None
        if one_line is not None:
            raise one_line from None
        raise


def card_context(builder: Builder, manifest: dict, configs: list[ConfigSpec], n_rows: int,
                 report: BuildReport | None = None) -> dict:
    """The card variables every build has (a kind adds its own, then the builder's
    ``card_context``)."""
    context = {"title": builder.title, "builder": builder.name, "builder_version": builder.version,
               "licence": builder.licence, "languages": builder.languages, "configs": configs, "n_rows": n_rows,
               "manifest": manifest, "config": manifest["config"], "storage": manifest["storage"],
               "row_group_bytes": ROW_GROUP_BYTES}
    if report is not None:
        context.update({"skipped": dict(sorted(report.skipped.items())), "llm_steps": report.llm_steps})
    return context


def write_card(builder: Builder, context: dict, directory: Path) -> None:
    """README.md from the builder's card template (its opening line is the builder's own summary,
    its docstring's first paragraph; its end the licences, overlaps and datasheet rendered from
    the manifest), and croissant.json beside it: the build's metadata, not data files."""
    summary = (type(builder).__doc__ or builder.title).strip().split("\n\n")[0]
    context["description"] = " ".join(context.get("description", summary).split())
    manifest = context["manifest"]
    appendix = DATASHEET_MARKER + "\n\n" + render_datasheet(manifest, builder.title)
    card = render_card(builder.card_template, context, appendix,
                       hub_metadata(manifest, builder.languages, context["licence"]))
    (directory / "README.md").write_text(card, encoding="utf-8")
    write_croissant(directory, context["manifest"], builder.title, context["description"], builder.languages,
                    context["configs"])


SKIP_EXAMPLE_CHARS = 72  # the summary names the first skipped item of each reason, cut to this


def skipped_table(report: BuildReport) -> str:
    """The summary's table of skipped records by reason, each with the first item skipped for it
    (which video, which file: the rest are in manifest.json), set off from what comes before it
    ("" when nothing was skipped)."""
    if not report.skipped:
        return ""
    rows = []
    for reason, count in sorted(report.skipped.items()):
        first = (report.examples.get(reason) or [""])[0]
        cut = first if len(first) <= SKIP_EXAMPLE_CHARS else first[:SKIP_EXAMPLE_CHARS - 3] + "..."
        rows.append((reason, count, cut))
    return "\n\n" + format_table(["skipped: reason", "records", "first"], rows, align_left_from=2)


def synthetic_summary(synthetic: list[str]) -> str:
    """The last line of a build's summary: what in it is synthetic or test-only, if anything."""
    if not synthetic:
        return "synthetic: nothing (every query and candidate comes from real sources)"
    return ("SYNTHETIC: " + "; ".join(synthetic) + " (recorded in manifest.json 'synthetic'; `mmle push` refuses "
            "this build without --allow-synthetic)")


def finish(summary: str, written: Written, validation: Validation, tmp_dir: Path, final_dir: Path,
           quiet: bool = False, synthetic: list[str] = ()) -> None:
    """Print what was built, how it validated and what in it is synthetic (``quiet``: only
    problems and what is synthetic); move it into place only when it is valid."""
    if not quiet:
        print(summary, file=sys.stderr)
        print(written.storage.summary(), file=sys.stderr)
    if validation.problems or not quiet:
        print(validation.report(), file=sys.stderr)
    if synthetic or not quiet:
        print(synthetic_summary(list(synthetic)), file=sys.stderr)
    if validation.problems:
        raise UserError(f"validation failed with {counted(len(validation.problems), 'problems')}; nothing was "
                        f"written to {final_dir}")
    commit_output_dir(tmp_dir, final_dir)
