"""Publish a built benchmark directory to a Hugging Face Hub dataset repo as an immutable release.

A release is one commit on ``main`` holding the whole build, then a tag ``vMAJOR.MINOR.PATCH`` on
that commit. The tag is created only after the commit has landed, so a failed push never leaves a
tagged half-release, and an existing tag is never moved.

A build is validated first (``mmle validate``); a build with any problem is refused, so nothing
invalid leaves the machine. Nor does anything synthetic unasked: a build whose manifest lists
generated or test-only parts (``synthetic``: generated videos, ``--llm none`` stand-in queries,
test fixtures) is refused unless ``--allow-synthetic``.

Several tasks may share a repo: a build replaces, as a unit, every pool of the (task, dataset)
pairs it contains (their ``data/<dataset>/`` files are deleted in the same commit) and keeps the
other pools; the ``pools`` table and the card's ``configs:`` header are merged accordingly.

Retries: uploads are retried by ``huggingface_hub`` itself; the commit and the tag are retried here
a bounded number of times on transient errors (dropped connections, timeouts, 429/5xx). A commit
whose answer was lost may still have landed, so before retrying we look for it on ``main`` by the
release id written into its description, and commits are made with ``parent_commit`` so a retry
can never stack a second copy on top.

The token comes from ``HF_TOKEN`` or the Hub login (``huggingface_hub.get_token``). It is handed
to ``HfApi`` only; every message we print passes through :func:`_scrub`, and a build containing
the token in any file is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import PARTS, SPLIT, ConfigSpec, split_card
from mmlongembed.checks.summary import counted

REPO_TYPE = "dataset"
BRANCH = "main"
VERSION_RE = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
LEGACY_POOLS_TABLE = "data/pools/test.parquet"  # layout 1 named it so; layout 2 names files by content
RELEASE_ID_PREFIX = "mmle-release-id: "
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)


@dataclass
class PushResult:
    repo_id: str
    tag: str
    commit: str
    commit_url: str
    previous_tag: str | None
    notes: str
    deleted: list[str] = field(default_factory=list)


# -- small helpers -------------------------------------------------------------------------------------

def parse_version(text: str) -> tuple[int, int, int]:
    m = VERSION_RE.match(text.strip())
    if not m:
        raise UserError(f"version {text!r} is not MAJOR.MINOR.PATCH (e.g. v1.2.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def tag_name(version: tuple[int, int, int]) -> str:
    return "v%d.%d.%d" % version


MIN_SCANNED_TOKEN_CHARS = 16  # a Hub token is hf_ + 34 characters; a shorter "token" is a word
TOKEN_CHARACTERS = rb"A-Za-z0-9_\-"  # what a token is made of: a match flanked by one is part of a longer word
SCAN_CHUNK_BYTES = 8 << 20


def holds_token(path: Path, token: str) -> bool:
    """Whether the file at ``path`` holds ``token`` as a token: the whole token, not inside a
    longer run of token characters, and only a token long enough to be a real one (so that
    ``HF_TOKEN=wrong`` does not find "wrong" in a card). Read in chunks (memory bounded)."""
    if len(token) < MIN_SCANNED_TOKEN_CHARS:
        return False
    needle = token.encode()
    pattern = re.compile(rb"(?<![" + TOKEN_CHARACTERS + rb"])" + re.escape(needle)
                         + rb"(?![" + TOKEN_CHARACTERS + rb"])")
    with open(path, "rb") as handle:
        window, at_start = b"", True
        while True:
            chunk = handle.read(SCAN_CHUNK_BYTES)
            window += chunk
            for match in pattern.finditer(window):
                # a match at an edge of the window is whole only at the file's own edge: else the
                # byte beyond it is unknown (the next window sees it again, with that byte)
                if (match.start() > 0 or at_start) and (match.end() < len(window) or not chunk):
                    return True
            if not chunk:
                return False
            keep = len(needle) + 1  # the token and the byte before it
            window, at_start = window[-keep:], at_start and len(window) <= keep


def _scrub(text: str, token: str | None) -> str:
    """Remove the token from a message, whatever path it came through."""
    return text.replace(token, "***") if token else text


def _write_card(header: dict, body: str) -> str:
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n" + body


def _pool_of_config(name: str, pools: set[str]) -> str | None:
    for part in PARTS:
        if name.endswith(f"-{part}") and name[: -len(part) - 1] in pools:
            return name[: -len(part) - 1]
    return None


def _pools_rows(data: bytes | Path) -> list[dict]:
    import pyarrow.parquet as pq

    source = io.BytesIO(data) if isinstance(data, bytes) else str(data)
    return pq.read_table(source).to_pylist()


def _manifest_pool_stats(manifest: dict) -> dict[str, dict]:
    """Per-pool statistics from a manifest, whichever of the shapes builders write."""
    for container in (manifest, manifest.get("statistics") or {}, manifest.get("stats") or {}):
        pools = container.get("pools") if isinstance(container, dict) else None
        if isinstance(pools, list):
            return {p["pool"]: p for p in pools if isinstance(p, dict) and "pool" in p}
        if isinstance(pools, dict):
            return {name: stats for name, stats in pools.items() if isinstance(stats, dict)}
    return {}


# -- the build we publish ------------------------------------------------------------------------------

@dataclass
class Build:
    root: Path
    files: list[str]  # repo paths, posix
    header: dict
    body: str
    manifest: dict
    pools: list[dict]  # rows of the pools table
    pools_path: str  # the pools table's path in the repo

    @property
    def datasets(self) -> set[str]:
        return {row["dataset"] for row in self.pools}

    @property
    def units(self) -> set[tuple[str, str]]:
        return {(row["task"], row["dataset"]) for row in self.pools}

    def release_id(self, tag: str) -> str:
        return release_id(tag, self.root, self.files)


def release_id(tag: str, root: Path, files: list[str]) -> str:
    """What a release commit's description carries, so a retry can find the commit it made: the
    tag and every file's path and content."""
    digest = hashlib.sha256(tag.encode())
    for rel in files:
        digest.update(rel.encode() + b"\0" + hashlib.sha256((root / rel).read_bytes()).digest())
    return digest.hexdigest()[:32]


def load_build(root: Path, token: str | None = None) -> Build:
    """Check that `root` is a complete build in the published layout (docs/LAYOUT.md) that
    `mmle validate` accepts (its checks of the card's configs are the ones that count)."""
    from mmlongembed.build.validate import load_manifest, validate_build

    root = Path(root)
    if not root.is_dir():
        raise UserError(f"build directory {root} does not exist")
    for required in ("README.md", "manifest.json"):
        if not (root / required).is_file():
            raise UserError(f"{root} is not a built benchmark: {required} is missing (run `mmle build` and `mmle validate`)")
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    leaked = next((rel for rel in files if holds_token(root / rel, token)), None) if token else None
    if leaked is not None:
        raise UserError(f"refusing to publish: {leaked} contains the Hub token")
    validation = validate_build(root, progress=sys.stderr.isatty())  # minutes on a large grid: show it
    if validation.problems:
        report = validation.report(limit=3).splitlines()
        found = counted(len(validation.problems), "problems")
        raise UserError(f"refusing to publish {root}: `mmle validate` finds {found} "
                        f"({report[1].strip() if len(report) > 1 else report[0]})")
    # validated: the card has a header whose configs read, and the manifest parses
    header, body = split_card((root / "README.md").read_text(encoding="utf-8"), str(root / "README.md"))
    pools_path = _pools_path(header, default=None)
    if pools_path is None:  # a training-data build: it has no pools to release
        raise UserError("README.md: no `pools` config")
    return Build(root, files, header, body, load_manifest(root), _pools_rows(root / pools_path), pools_path)


def synthetic_parts(manifest: dict) -> list[str]:
    """What a build's manifest says is synthetic or test-only. Builds made before the manifest
    had a ``synthetic`` field are read for the same facts: sources marked synthetic, stand-in
    queries made without an LLM."""
    if isinstance(manifest.get("synthetic"), list):
        return [str(part) for part in manifest["synthetic"]]
    from mmlongembed.llm.summaries import SYNTHETIC_QUERY

    parts = []
    if isinstance(manifest.get("sources"), dict) and manifest["sources"].get("synthetic") is True:
        parts.append("sources marked SYNTHETIC")
    if any(isinstance(step, dict) and step.get("model") == SYNTHETIC_QUERY for step in manifest.get("llm_steps") or ()):
        parts.append("queries made without an LLM (--llm none)")
    return parts


def refuse_synthetic(root: Path, allow_synthetic: bool) -> None:
    """One line refusing a build whose manifest lists synthetic parts, unless allowed."""
    try:
        manifest = json.loads((Path(root) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # load_build names what is wrong with it
    parts = synthetic_parts(manifest) if isinstance(manifest, dict) else []
    if parts and not allow_synthetic:
        raise UserError(f"refusing to publish {root}: it is not all real data ({'; '.join(parts)}); pass "
                        "--allow-synthetic to publish it anyway")


def _pools_path(header: dict | None, default: str | None = LEGACY_POOLS_TABLE) -> str | None:
    """The pools table's path named by a card's `configs:` header (layout 1: a fixed name)."""
    for entry in (header or {}).get("configs") or []:
        if entry.get("config_name") == "pools":
            return ConfigSpec.from_card_entry(entry).path
    return default


# -- release notes -------------------------------------------------------------------------------------

def pool_summaries(rows: list[dict], stats: dict[str, dict]) -> dict[str, dict]:
    """pool -> the facts the release notes compare: counts and lengths."""
    out = {}
    for row in rows:
        s = stats.get(row["pool"], {})
        out[row["pool"]] = {
            "task": row.get("task"), "dataset": row.get("dataset"),
            "queries": row.get("n_queries", s.get("queries")),
            "candidates": row.get("n_candidates", s.get("candidates")),
            "length": row.get("length"), "band": [row.get("band_min"), row.get("band_max")],
            "tokens_min": s.get("tokens_min"), "tokens_median": s.get("tokens_median"),
            "tokens_max": s.get("tokens_max"),
        }
    return out


def release_notes(tag: str, previous_tag: str | None, old: dict[str, dict], new: dict[str, dict],
                  user_notes: str = "") -> str:
    lines = [f"# Release {tag}", ""]
    if user_notes.strip():
        lines += [user_notes.strip(), ""]
    if previous_tag is None:
        lines.append(f"First release: {len(new)} pools ({', '.join(sorted(new)) or 'none'}).")
        return "\n".join(lines) + "\n"
    lines.append(f"## Changes since {previous_tag}")
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    lines.append("- pools added: " + (", ".join(added) if added else "none"))
    lines.append("- pools removed: " + (", ".join(removed) if removed else "none"))
    changed = []
    for pool in sorted(set(new) & set(old)):
        diffs = []
        for key in ("queries", "candidates", "length", "band", "tokens_min", "tokens_median", "tokens_max"):
            a, b = old[pool].get(key), new[pool].get(key)
            if a is not None and b is not None and a != b:
                diffs.append(f"{key} {a} -> {b}")
        if diffs:
            changed.append(f"  - {pool}: " + "; ".join(diffs))
    lines.append("- pools changed: " + ("" if changed else "none"))
    lines += changed
    return "\n".join(lines) + "\n"


# -- the push ------------------------------------------------------------------------------------------

def _is_transient(exc: BaseException) -> bool:
    import importlib

    from huggingface_hub.errors import HfHubHTTPError

    # huggingface_hub 2.x speaks httpx2; earlier releases used httpx or requests.
    transport: tuple[type, ...] = (ConnectionError, TimeoutError)
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError"), ("requests", "Timeout")):
        try:
            transport += (getattr(importlib.import_module(module), name),)
        except (ImportError, AttributeError):
            pass
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, transport):
            return True
        if isinstance(exc, HfHubHTTPError) and exc.response is not None \
                and exc.response.status_code in TRANSIENT_STATUS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


class _Pusher:
    def __init__(self, api, repo_id: str, token: str, log: Callable[[str], None], attempts: int, wait_s: float):
        self.api, self.repo_id, self.token, self.log = api, repo_id, token, log
        self.attempts, self.wait_s = max(1, attempts), wait_s

    def retry(self, what: str, fn, recover=None):
        """Run fn(); on a transient error wait and retry, at most `attempts` times in all.
        `recover()` is asked first whether the failed attempt took effect after all."""
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                if not _is_transient(exc):
                    raise
                if recover is not None:
                    found = recover()
                    if found is not None:
                        self.log(f"{what}: the answer was lost but the operation had landed")
                        return found
                if attempt == self.attempts:
                    raise
                self.log(f"{what}: transient error ({type(exc).__name__}), retry {attempt}/{self.attempts - 1}")
                time.sleep(self.wait_s * 2 ** (attempt - 1))

    def download(self, path: str, revision: str) -> bytes | None:
        from huggingface_hub.errors import EntryNotFoundError

        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = self.api.hf_hub_download(self.repo_id, path, repo_type=REPO_TYPE, revision=revision,
                                                 local_dir=tmp)
            except EntryNotFoundError:
                return None
            return Path(local).read_bytes()

    def landed(self, release_id: str) -> str | None:
        """The commit on main that carries this release id, if the last attempt landed after all."""
        try:
            commits = self.api.list_repo_commits(self.repo_id, repo_type=REPO_TYPE, revision=BRANCH)
        except Exception:  # noqa: BLE001 - the server may still be unreachable; then it did not help
            return None
        for commit in commits[:5]:
            if f"{RELEASE_ID_PREFIX}{release_id}" in (commit.message or ""):
                return commit.commit_id
        return None


def publish(build_dir: Path, repo_id: str, version: str, *, private: bool | None = None,
            message: str | None = None, notes: str = "", endpoint: str | None = None, token: str | None = None,
            large_folder: bool = False, attempts: int = 3, wait_s: float = 2.0,
            log: Callable[[str], None] | None = None, allow_synthetic: bool = False) -> PushResult:
    """Publish `build_dir` to `repo_id` as release `version`. See the module docstring."""
    from huggingface_hub import HfApi, get_token

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if not REPO_ID_RE.match(repo_id or ""):
        raise UserError(f"--repo {repo_id!r} is not of the form OWNER/NAME")
    tag = tag_name(parse_version(version))
    refuse_synthetic(Path(build_dir), allow_synthetic)
    token = token or get_token()
    if not token:
        raise UserError("no Hub token: set HF_TOKEN or run `hf auth login`")
    build = load_build(Path(build_dir), token)
    api = HfApi(endpoint=endpoint, token=token, library_name="mmlongembed")
    release = _Release(_Pusher(api, repo_id, token, log, attempts, wait_s), tag, build.release_id(tag),
                       f"rerun `mmle push {build_dir} --repo {repo_id} --version {tag}`", "build", build)
    try:
        tags, head = release.open_repo(private)
        plan = release.plan_commit(head)
        previous, notes_text = release.notes(tags, plan.kept_rows, notes)
        units = ", ".join(f"{task}/{dataset}" for task, dataset in sorted(build.units))
        # 4. Large builds: resumable multi-commit upload to a staging branch, then one commit on main
        #    that copies the staged files (LFS objects are referenced, not re-uploaded).
        staging_branch = f"mmle-staging-{tag}"
        staging = None  # the staged commit the copies read from
        if large_folder:
            staging = _stage(api, release.pusher, repo_id, staging_branch, tag, build, head, log)
        commit_oid = release.commit(plan, head, staging, message or f"Release {tag}: {units}", notes_text)
        release.tag_commit(commit_oid, notes_text)
        if large_folder:
            try:
                api.delete_branch(repo_id, branch=staging_branch, repo_type=REPO_TYPE)
            except Exception as exc:  # noqa: BLE001 - a left-over staging branch is harmless
                log(_scrub(f"note: could not delete the staging branch {staging_branch} ({_one_line(exc)})", token))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line that says what to do
        raise UserError(_scrub(f"push to {repo_id} failed ({_one_line(exc)}); nothing was tagged; "
                               f"{release.rerun}", token)) from None

    prefix = endpoint.rstrip("/") if endpoint else _default_endpoint()
    return PushResult(repo_id, tag, commit_oid, f"{prefix}/datasets/{repo_id}/commit/{commit_oid}", previous,
                      notes_text, plan.deletions)


@dataclass
class _CommitPlan:
    """What the release commit does to main: the files it adds (merged ones by their bytes), those
    it deletes, and the other tasks' pools that stay."""

    uploads: list[str]
    overrides: dict[str, bytes]
    deletions: list[str]
    kept_rows: list[dict]


@dataclass
class TaggedCommit:
    """One commit on main tagged `tag`, whatever it holds (a build: `_Release`; an `mmle score`
    run: `harness.report.push_results`): the repo opened, the commit made so a retry never stacks
    a second copy, the tag made once. `what` names the thing published in messages; `rerun` ends
    every failure line."""

    pusher: _Pusher
    tag: str
    release_id: str
    rerun: str
    what: str

    def open_repo(self, private: bool | None) -> tuple[dict[str, str], str]:
        """1. The repo (created if missing), and the tag must be new: its tags, and main's head."""
        api, repo_id, pusher = self.pusher.api, self.pusher.repo_id, self.pusher
        pusher.retry("create repo", lambda: api.create_repo(repo_id, repo_type=REPO_TYPE, private=private,
                                                            exist_ok=True))
        info = pusher.retry("repo info", lambda: api.repo_info(repo_id, repo_type=REPO_TYPE))
        if private and not info.private:
            raise UserError(f"{repo_id} exists and is public; refusing to publish a --private release into it")
        if private is False and info.private:
            pusher.log(f"note: {repo_id} exists and stays private (change its visibility in the repo settings)")
        refs = pusher.retry("list refs", lambda: api.list_repo_refs(repo_id, repo_type=REPO_TYPE))
        tags = {ref.name: ref.target_commit for ref in refs.tags}
        if self.tag in tags:
            raise UserError(f"{repo_id} already has release {self.tag} (commit {tags[self.tag][:12]}); releases are "
                            f"immutable: publish this {self.what} under a new version")
        head = next((b.target_commit for b in refs.branches if b.name == BRANCH), None)
        if head is None:
            raise UserError(f"{repo_id} has no {BRANCH} branch")
        return tags, head

    def commit_on_main(self, operations, head: str, summary: str, body: str) -> str:
        """The commit of ``operations()`` (a fresh list for each attempt) on main, made on `head`, so a
        retry never stacks a second copy: its oid. Its description is `body` and the release id, by
        which an attempt whose answer was lost is found."""
        from huggingface_hub.errors import HfHubHTTPError

        api, repo_id, pusher = self.pusher.api, self.pusher.repo_id, self.pusher
        description = f"{body}\n{RELEASE_ID_PREFIX}{self.release_id}\n"

        def commit():
            return api.create_commit(repo_id, operations(), commit_message=summary, commit_description=description,
                                     repo_type=REPO_TYPE, revision=BRANCH, parent_commit=head)

        try:
            commit_info = pusher.retry("commit", commit, recover=lambda: pusher.landed(self.release_id))
            # CommitInfo is itself a str (the URL), so test for the recovered plain oid the other way round.
            return getattr(commit_info, "oid", None) or commit_info
        except HfHubHTTPError as err:
            if _status(err) != 412:
                raise
            commit_oid = pusher.landed(self.release_id)  # main moved: our earlier attempt, or someone else's push
            if commit_oid is None:
                raise UserError(f"{repo_id}: {BRANCH} changed while pushing; nothing was tagged; {self.rerun}") from None
            return commit_oid

    def tag_commit(self, commit_oid: str, notes_text: str) -> None:
        """5. Tag the commit; a rerun after a failure here finds the files unchanged and only tags."""
        api, repo_id, pusher, tag = self.pusher.api, self.pusher.repo_id, self.pusher, self.tag

        def tag_it():
            api.create_tag(repo_id, tag=tag, revision=commit_oid, tag_message=notes_text, repo_type=REPO_TYPE)
            return commit_oid

        def tagged():
            refs_now = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
            return next((t.target_commit for t in refs_now.tags if t.name == tag and t.target_commit == commit_oid),
                        None)

        try:
            pusher.retry("tag", tag_it, recover=tagged)
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 409 and tagged():
                pass  # our own earlier attempt created it
            else:
                raise UserError(_scrub(f"{repo_id}: committed {commit_oid[:12]} but could not create tag {tag} "
                                       f"({_one_line(exc)}); {self.rerun} to tag it", pusher.token)) from None


@dataclass
class _Release(TaggedCommit):
    """One push of a build as release `tag`, step by step (publish runs them in order)."""

    build: Build

    def plan_commit(self, head: str) -> _CommitPlan:
        """2. What is on main now: other tasks' pools stay, this build's tasks are replaced."""
        from huggingface_hub.hf_api import RepoFile

        api, repo_id, pusher, build = self.pusher.api, self.pusher.repo_id, self.pusher, self.build
        remote_files = {f.path for f in pusher.retry("list files", lambda: list(api.list_repo_tree(
            repo_id, repo_type=REPO_TYPE, revision=head, recursive=True))) if isinstance(f, RepoFile)}
        remote_header: dict = {}
        if "README.md" in remote_files:
            remote_header = split_card(pusher.retry("read card", lambda: pusher.download("README.md", head))
                                       .decode("utf-8"), f"{repo_id}: README.md")[0] or {}
        remote_pools_path = _pools_path(remote_header)
        remote_rows = []
        if remote_pools_path in remote_files:
            remote_rows = _pools_rows(pusher.retry("read pools", lambda: pusher.download(remote_pools_path, head)))
        kept_rows = [r for r in remote_rows if (r["task"], r["dataset"]) not in build.units
                     and r["pool"] not in {p["pool"] for p in build.pools}]
        kept_pools = {r["pool"] for r in kept_rows}
        kept_datasets = {r["dataset"] for r in kept_rows}
        replaced = {r["pool"] for r in remote_rows} - kept_pools
        replaced_datasets = ({r["dataset"] for r in remote_rows} | build.datasets) - kept_datasets

        def superseded(path: str) -> bool:
            parts = path.split("/")
            return (path.startswith("data/pools/") or any(path.startswith(f"data/{pool}/") for pool in replaced)
                    or (len(parts) > 2 and parts[0] == "data" and parts[1] in replaced_datasets))

        overrides: dict[str, bytes] = {}  # merged files, when other tasks' pools stay in the repo
        uploads = list(build.files)
        if kept_rows:
            merged = _merged_pools_table(build.root / build.pools_path, kept_rows)
            merged_path = f"data/pools/{SPLIT}-{hashlib.sha256(merged).hexdigest()[:12]}.parquet"
            uploads = [rel for rel in uploads if rel != build.pools_path] + [merged_path]
            overrides[merged_path] = merged
            overrides["README.md"] = _merged_card(build, remote_header, kept_pools, merged_path).encode("utf-8")
        deletions = sorted(p for p in remote_files if p not in uploads and superseded(p))
        return _CommitPlan(uploads, overrides, deletions, kept_rows)

    def notes(self, tags: dict[str, str], kept_rows: list[dict], user_notes: str) -> tuple[str | None, str]:
        """3. Release notes against the previous tag: that tag (None for a first release), the notes."""
        pusher = self.pusher
        previous = _previous_tag(tags, parse_version(self.tag))
        old_summary: dict[str, dict] = {}
        if previous is not None:
            old_manifest = pusher.retry("read previous manifest", lambda: pusher.download("manifest.json", previous))
            old_card = pusher.retry("read previous card", lambda: pusher.download("README.md", previous))
            old_pools_path = _pools_path(split_card(old_card.decode("utf-8"),
                                                    f"{pusher.repo_id}@{previous}: README.md")[0]
                                         if old_card else None)
            old_table = pusher.retry("read previous pools", lambda: pusher.download(old_pools_path, previous))
            old_stats = _manifest_pool_stats(json.loads(old_manifest)) if old_manifest else {}
            old_summary = pool_summaries(_pools_rows(old_table) if old_table else [], old_stats)
        new_stats = {**{r["pool"]: old_summary.get(r["pool"], {}) for r in kept_rows},
                     **_manifest_pool_stats(self.build.manifest)}
        return previous, release_notes(self.tag, previous, old_summary,
                                       pool_summaries(kept_rows + self.build.pools, new_stats), user_notes)

    def commit(self, plan: _CommitPlan, head: str, staging: str | None, summary: str, notes_text: str) -> str:
        """The release commit on main: its oid. `staging`: the staged commit whose files it copies
        (large builds), else the files are uploaded."""
        from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

        def operations():
            ops = []
            for rel in plan.uploads:
                if rel in plan.overrides:
                    ops.append(CommitOperationAdd(rel, plan.overrides[rel]))
                elif staging is not None:
                    ops.append(CommitOperationCopy(rel, rel, src_revision=staging))
                else:
                    ops.append(CommitOperationAdd(rel, str(self.build.root / rel)))
            ops += [CommitOperationDelete(p) for p in plan.deletions]
            return ops

        self.pusher.log(f"pushing {counted(len(plan.uploads), 'files')} to {self.pusher.repo_id} "
                        f"({len(plan.deletions)} to delete)")
        return self.commit_on_main(operations, head, summary, notes_text)


def _default_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _previous_tag(tags: dict[str, str], version: tuple[int, int, int]) -> str | None:
    older = []
    for name in tags:
        m = VERSION_RE.match(name)
        if m and name.startswith("v"):
            v = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            if v < version:
                older.append((v, name))
    return max(older)[1] if older else None


def _merged_pools_table(path: Path, kept_rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    kept = pa.Table.from_pylist(kept_rows, schema=table.schema)
    merged = pa.concat_tables([kept, table]).sort_by("pool")
    sink = io.BytesIO()
    pq.write_table(merged, sink)
    return sink.getvalue()


def _merged_card(build: Build, remote_header: dict, kept_pools: set[str], pools_path: str) -> str:
    """The build's card with `configs:` = the build's configs (the pools config pointing at the
    merged pools table) + the kept pools' configs."""
    header = dict(build.header)
    names = {c.get("config_name") for c in build.header.get("configs", [])}
    kept = [c for c in remote_header.get("configs") or []
            if c.get("config_name") not in names and _pool_of_config(c.get("config_name", ""), kept_pools)]
    own = [ConfigSpec("pools", pools_path).card_entry() if c.get("config_name") == "pools" else c
           for c in build.header["configs"]]
    header["configs"] = own + kept
    return _write_card(header, build.body)


def _stage(api, pusher: _Pusher, repo_id: str, branch: str, tag: str, build: Build, head: str, log) -> str:
    """Upload the build to a staging branch (resumable); return that branch's commit."""
    pusher.retry("create staging branch", lambda: api.create_branch(repo_id, branch=branch, revision=head,
                                                                    repo_type=REPO_TYPE, exist_ok=True))
    log(f"uploading to the staging branch {branch} (rerun to resume)")
    pusher.retry("staging upload", lambda: api.upload_folder(
        repo_id=repo_id, folder_path=str(build.root), repo_type=REPO_TYPE, revision=branch,
        commit_message=f"Stage {tag}", ignore_patterns=[".*", "**/.*"]))
    refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    return next(b.target_commit for b in refs.branches if b.name == branch)


# -- CLI: `mmle push` ----------------------------------------------------------------------------------

def add_release_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a tagged release goes and how: what `mmle push` and `mmle push-results` both take."""
    parser.add_argument("--repo", required=True, help="Hub dataset repo OWNER/NAME (created if missing)")
    parser.add_argument("--version", required=True,
                        help="release version MAJOR.MINOR.PATCH; tagged vMAJOR.MINOR.PATCH, never moved once made (an "
                             "existing version is refused)")
    visibility = parser.add_mutually_exclusive_group()
    visibility.add_argument("--private", dest="private", action="store_true", default=None,
                            help="create the repo private (refused if it already exists and is public)")
    visibility.add_argument("--public", dest="private", action="store_false",
                            help="create the repo public (the Hub's default)")
    parser.add_argument("--endpoint", default=None,
                        help="Hub URL (default: $HF_ENDPOINT or https://huggingface.co)")
    parser.add_argument("--retries", type=int, default=3,
                        help="attempts for each Hub call, the commit and the tag included, on transient errors "
                             "(default: 3)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("build_dir", type=Path, help="a validated build directory (mmle build + mmle validate)")
    add_release_arguments(parser)
    parser.add_argument("--message", default=None, help="commit message (default: 'Release vX.Y.Z: <tasks>')")
    parser.add_argument("--notes-file", type=Path, default=None,
                        help="markdown prepended to the generated release notes (changes since the previous tag)")
    parser.add_argument("--large-folder", action="store_true",
                        help="for large builds: resumable multi-commit upload to a staging branch, "
                             "then one commit on main copying it")
    parser.add_argument("--allow-synthetic", action="store_true",
                        help="publish a build whose manifest lists synthetic or test-only parts (generated videos, "
                             "--llm none stand-in queries, fixtures); refused without it")


def run(args: argparse.Namespace) -> int:
    notes = ""
    if args.notes_file is not None:
        try:
            notes = Path(args.notes_file).read_text(encoding="utf-8")
        except OSError as err:
            raise UserError(f"--notes-file: cannot read {args.notes_file}: {err.strerror}") from None
    result = publish(args.build_dir, args.repo, args.version, private=args.private, message=args.message,
                     notes=notes, endpoint=args.endpoint, large_folder=args.large_folder, attempts=args.retries,
                     allow_synthetic=args.allow_synthetic)
    print(result.notes)
    print(f"repo: {result.repo_id}")
    print(f"commit: {result.commit}")
    print(f"tag: {result.tag}")
    print(f"url: {result.commit_url}")
    return 0
