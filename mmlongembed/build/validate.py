"""`mmle validate <dir>`: recount every length and check every invariant of a written build.

A build is read the way a user would read it: its manifest names the builder, and the pipeline of
that builder's output kind (``Builder.pipeline``; ``mmlongembed.build.pipeline``) runs its checks
(``mmlongembed.checks.build_checks``), after every data file is checked against the sha256 the manifest
recorded. Problems are collected, never raised one by one; a build that cannot be read at all (no
card, no manifest, a data file missing, empty or corrupt) is a one-line error naming the file
(exit 1).
"""

from __future__ import annotations

from pathlib import Path

from mmlongembed.build.run import pipeline_of
# what readers of a build import from here (the checks themselves live in build_checks)
from mmlongembed.checks.build_checks import (  # noqa: F401
    InvalidBuild, Validation, check_configs, check_files, check_readable, format_report, load_manifest)
from mmlongembed.core.builder import Problem, get_builder
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import configs_from_card


def validate_build(root: Path, progress: bool = False) -> Validation:
    root = Path(root)
    if not root.is_dir():
        raise InvalidBuild(f"{root}: no such build directory")
    manifest = load_manifest(root)
    try:
        specs = configs_from_card(root / "README.md")
    except UserError as error:
        raise InvalidBuild(str(error)) from None
    check_readable(root, specs)
    # The hashes first: a file damaged in place (zeros written into it, a bad copy) can parse
    # into wrong rows or fail deep inside pyarrow; the manifest knows what each file held.
    damaged = check_files(root, specs, manifest)
    if any(p.check == "file_hashes" for p in damaged) and manifest.get("files"):
        return Validation(problems=damaged)
    try:
        builder = get_builder(manifest["builder"]["name"])
        return pipeline_of(builder).validate(root, specs, manifest, builder, damaged, progress)
    except InvalidBuild:
        raise
    except UserError as error:
        raise InvalidBuild(str(error)) from None


def validate_dir(root: Path) -> tuple[list[Problem], dict]:
    result = validate_build(root)
    return result.problems, dict(result.checked)
