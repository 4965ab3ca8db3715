"""`mmle reproduce TARGET [--sources DIR...]`: rebuild a build or a release from its manifest and
say whether every data file comes out the same.

TARGET is a local build folder or ``OWNER/NAME@REVISION`` on the Hub (only its manifest is
downloaded first). In order:

1. the versions: a build made by another builder version (a release: any of its components'),
   another layout version or another toolkit commit is named before anything is rebuilt;
2. the sources: the given ones (``--sources``, else the recorded folders) are hashed and checked
   against the sha256 the manifest records, naming every file that differs;
3. the rebuild: the recorded builder, options and seed, into a fresh folder (a release's
   components too, never the user's cached ones); LLM steps answered by a model are replayed
   from an answer cache (``--llm-cache``, default the recorded one), never asked again;
4. the comparison: every data file's sha256 against the recorded one (files are named by
   content, so by their path without the hash); ``identical``, or the first file that differs
   with its first differing pool, row and column. Exit 0 only when identical.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mmlongembed.core.errors import UserError

LIVE_LLM_BACKENDS = ("openai", "vllm", "ray")  # asked a model; a rebuild replays their answers instead


@dataclass
class Target:
    """What is reproduced: its manifest, and how to read one of its recorded data files."""

    name: str
    manifest: dict
    root: Path | None = None  # a local build
    repo: str | None = None  # or a Hub repo at a revision
    revision: str | None = None

    def data_file(self, path: str, scratch: Path) -> Path:
        if self.root is not None:
            return self.root / path
        return _download(self.repo, path, self.revision, scratch)


def _download(repo: str, path: str, revision: str, scratch: Path) -> Path:
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, path, repo_type="dataset", revision=revision, local_dir=scratch))
    except Exception as error:  # noqa: BLE001 - one line naming what could not be read
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(f"{repo}@{revision}: cannot download {path} ({type(error).__name__}: {first[:200]})") from None


def open_target(ref: str, scratch: Path) -> Target:
    """A local build folder, or ``OWNER/NAME@REVISION`` on the Hub (its manifest downloaded)."""
    from mmlongembed.checks.build_checks import load_manifest

    local = Path(ref).expanduser()
    if local.is_dir():
        return Target(str(local), load_manifest(local), root=local)
    repo, _, revision = ref.rpartition("@")
    if not repo or not revision or "/" not in repo:
        raise UserError(f"{ref}: neither a build folder here nor OWNER/NAME@REVISION on the Hub")
    manifest_path = _download(repo, "manifest.json", revision, scratch)
    return Target(ref, load_manifest(manifest_path.parent), repo=repo, revision=revision)


# -- 1. versions ---------------------------------------------------------------------------------------

def version_differences(manifest: dict) -> list[str]:
    """What of the recorded versions this toolkit does not have: the layout, the builder's, each
    component's; then the toolkit commit (which alone need not change any data)."""
    from mmlongembed.core.builder import registered
    from mmlongembed.output.layout import LAYOUT_VERSION
    from mmlongembed.output.manifest import toolkit_identity

    known = registered()
    recorded = manifest.get("toolkit") or {}
    out = []
    if str(recorded.get("layout_version")) != LAYOUT_VERSION:
        out.append(f"layout version {recorded.get('layout_version')} (this toolkit writes {LAYOUT_VERSION})")
    builders = [("builder", manifest["builder"])] + [(f"component {c['name']}", c["builder"])
                                                     for c in manifest.get("components") or []]
    for label, builder in builders:
        current = known.get(builder["name"])
        if current is None:
            out.append(f"{label}: builder {builder['name']} is not in this toolkit")
        elif current.version != builder.get("version"):
            out.append(f"{label}: built by {builder['name']} version {builder.get('version')}, this toolkit has "
                       f"version {current.version}")
    here = toolkit_identity()
    if recorded.get("git_commit") != here["git_commit"] or recorded.get("version") != here["version"]:
        out.append(f"toolkit: made by mmlongembed {recorded.get('version')} commit "
                   f"{str(recorded.get('git_commit'))[:12]}, this is {here['version']} commit {here['git_commit'][:12]}")
    return out


# -- 2. the config and its sources -----------------------------------------------------------------------

def rebuild_config(manifest: dict, sources: list[str] | None, llm_cache: str | None, workdir: Path):
    """The recorded config of the build, with the given sources, a fresh components folder (a
    release), and a model's answers replayed from the cache."""
    from mmlongembed.core.builder import config_from_dict, get_builder

    builder = get_builder(manifest["builder"]["name"])
    values = dict(manifest.get("config") or {})
    if sources:
        if isinstance(values.get("sources"), (list, tuple)):
            values["sources"] = list(sources)
        elif len(sources) > 1:
            raise UserError(f"--sources: a {builder.name} build reads one folder, not {len(sources)}")
        else:
            values["sources"] = sources[0]
    if "components" in values:
        values["components"] = str(workdir / "components")
    if values.get("llm") in LIVE_LLM_BACKENDS:
        values["llm"] = "replay"
        if llm_cache:
            values["llm_cache"] = llm_cache
    elif llm_cache and "llm_cache" in values:
        values["llm_cache"] = llm_cache
    return builder, config_from_dict(builder.config_class, values)


def _recorded_files(identity) -> dict[str, str]:
    """Every ``{file, sha256}`` inside a source identity, by file name (nested parts prefixed)."""
    out: dict[str, str] = {}

    def walk(value, prefix: str) -> None:
        if isinstance(value, dict):
            if "sha256" in value and ("file" in value or "path" in value):
                out[prefix + str(value.get("file") or value.get("path"))] = value["sha256"]
                return
            for key, item in value.items():
                walk(item, prefix if key in ("files", "sources") else f"{prefix}{key}/" if isinstance(item, dict) else prefix)
        elif isinstance(value, list):
            for item in value:
                walk(item, prefix)

    walk(identity, "")
    return out


def source_differences(label: str, recorded, current) -> list[str]:
    """The source files whose sha256 differs from the recorded one, or that are missing or new;
    else any other difference of the source identity (a Hub revision)."""
    from mmlongembed.build.pipeline import as_recorded

    before, after = _recorded_files(recorded), _recorded_files(current)
    out = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            out.append(f"{label}: {name} is recorded but not among the given sources")
        elif name not in before:
            out.append(f"{label}: {name} is not recorded (a file the build did not read)")
        elif before[name] != after[name]:
            out.append(f"{label}: {name} differs (sha256 recorded {before[name][:12]}, given {after[name][:12]})")
    if not out and as_recorded(recorded) != as_recorded(current):
        out.append(f"{label}: the source identity differs from the recorded one (another Hub revision or options)")
    return out


def check_sources(builder, config, manifest: dict) -> list[str]:
    """Every difference between the given sources and the recorded ones (a release: per component)."""
    if not manifest.get("components"):
        return source_differences(builder.name, manifest.get("sources"), builder.source_identity(config))
    from mmlongembed.release.plan import plan

    recorded = {c["name"]: c.get("sources") for c in manifest["components"]}
    out = []
    for item in plan(config).to_build:
        name = item.builder.name
        if name not in recorded:
            out.append(f"{name}: a component the release does not have")
            continue
        out += source_differences(name, recorded.pop(name), item.builder.source_identity(item.config))
    out += [f"{name}: a component of the release with no sources given" for name in recorded]
    return out


# -- 4. the comparison ---------------------------------------------------------------------------------

def _by_content_name(files: dict[str, dict]) -> dict[str, str]:
    """A manifest's data files by their path without the content hash -> that path."""
    from mmlongembed.output.croissant import record_set_id

    return {record_set_id(path): path for path in files}


def first_difference(recorded: dict[str, dict], rebuilt: dict[str, dict]) -> tuple[str, str | None, str | None] | None:
    """(the file's name, its recorded path, its rebuilt path) of the first data file that
    differs, in path order; None when every file is identical."""
    before, after = _by_content_name(recorded), _by_content_name(rebuilt)
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None or new is None or recorded[old]["sha256"] != rebuilt[new]["sha256"]:
            return key, old, new
    return None


def first_row_difference(old: Path, new: Path) -> str:
    """Where two parquet files first differ: the pool, the row within it, the column."""
    import pyarrow.parquet as pq

    a, b = pq.read_table(old).to_pylist(), pq.read_table(new).to_pylist()
    seen: dict[str, int] = {}
    for index in range(max(len(a), len(b))):
        row_a = a[index] if index < len(a) else None
        row_b = b[index] if index < len(b) else None
        pool = str((row_a or row_b).get("pool", "-"))
        seen[pool] = seen.get(pool, -1) + 1
        if row_a != row_b:
            if row_a is None or row_b is None:
                return f"pool {pool}, row {seen[pool]}: the {'recorded' if row_b is None else 'rebuilt'} file has more rows"
            column = next(c for c in list(row_a) + list(row_b) if row_a.get(c) != row_b.get(c))
            return f"pool {pool}, row {seen[pool]} (file row {index}), column {column}"
    return "the rows are equal; the files differ in their encoding"


def compare(target: Target, rebuilt_root: Path, scratch: Path) -> tuple[bool, str]:
    """(identical, what to print) for the rebuilt build against the recorded files."""
    from mmlongembed.checks.build_checks import load_manifest

    recorded = target.manifest.get("files") or {}
    rebuilt = load_manifest(rebuilt_root).get("files") or {}
    difference = first_difference(recorded, rebuilt)
    if difference is None:
        return True, f"identical: {len(recorded)} data files, each with the sha256 {target.name} records"
    name, old, new = difference
    if old is None:
        return False, f"differs: the rebuild writes {new}, which {target.name} does not have"
    if new is None:
        return False, f"differs: {old} of {target.name} is not rebuilt"
    where = first_row_difference(target.data_file(old, scratch), rebuilt_root / new)
    return False, f"differs: {old} (rebuilt as {new}): {where}"


# -- the command ---------------------------------------------------------------------------------------

def reproduce(ref: str, sources: list[str] | None = None, llm_cache: str | None = None, workdir: Path | None = None,
              progress: bool = False) -> bool:
    """Rebuild ``ref`` and print whether it is identical (the module's steps); True when it is."""
    from mmlongembed.build.run import run_build

    with tempfile.TemporaryDirectory(prefix="mmle-reproduce-") as tmp:
        scratch = Path(workdir or tmp)
        target = open_target(ref, scratch / "recorded")
        for line in version_differences(target.manifest):
            print(f"version differs: {line}", file=sys.stderr)
        builder, config = rebuild_config(target.manifest, sources, llm_cache, scratch)
        differing = check_sources(builder, config, target.manifest)
        for line in differing:
            print(f"source differs: {line}", file=sys.stderr)
        if not differing:
            print("sources: every file has the sha256 the manifest records", file=sys.stderr)
        started = time.monotonic()
        built = run_build(builder, config, scratch / "rebuilt", overwrite=True, progress=progress, quiet=not progress)
        seconds = time.monotonic() - started
        identical, verdict = compare(target, built, scratch / "recorded")
    print(verdict)
    print(f"rebuilt {builder.name} in {seconds:.1f} s", file=sys.stderr)
    return identical


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a local build folder, or OWNER/NAME@REVISION of a release on the Hub "
                                       "(token from HF_TOKEN or the Hub login; HF_ENDPOINT for another Hub)")
    parser.add_argument("--sources", nargs="+", default=None,
                        help="the source folder(s) to rebuild from (a release: the roots, as `mmle build "
                             "mmlongembed --sources` takes them); default: the folders the manifest records")
    parser.add_argument("--llm-cache", default=None,
                        help="the LLM answer cache to replay a model's answers from (default: the recorded "
                             "--llm-cache); no model is asked")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where to rebuild (default: a temporary folder, removed afterwards)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def run(args: argparse.Namespace) -> int:
    identical = reproduce(args.target, args.sources, args.llm_cache, args.workdir, progress=not args.no_progress)
    return 0 if identical else 1
