"""`mmle push-results RUN --repo OWNER/NAME --version X.Y.Z`: publish an `mmle score` run as a Hub
dataset at a tag, as `mmle push` publishes a build.

The tag holds the run folder as it is (results.json, predictions.parquet, table.md, the plots)
and a README.md card: the models, the dataset scored (reference, revision, data files digest),
the toolkit's commit, SUBSET where the run was a `--max-queries` sample, and table.md itself. One
commit on main replaces whatever an earlier version left there, so each tag holds one run whole;
a tag is never moved (an existing version is refused). The token comes from HF_TOKEN (or `hf auth
login`) and is checked to be in no file pushed; it never reaches the output. Errors are one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.report.leaderboard import load_run
from mmlongembed.core.errors import UserError
from mmlongembed.publish.push import (BRANCH, REPO_ID_RE, REPO_TYPE, _default_endpoint, _one_line, _Pusher, _scrub,
                                      holds_token, parse_version, tag_name)

CARD = "README.md"


def run_card(run: dict, table: str) -> str:
    """The results repo's card: what was scored, by what, and the run's table."""
    dataset = run.get("dataset") or {}
    toolkit = run.get("toolkit") or {}
    models = ", ".join(f"`{m['spec']}`" for m in run.get("models") or []) or "none recorded"
    subset = (run.get("settings") or {}).get("max_queries")
    lines = ["---", "tags:", "- mmlongembed", "- mmle-score-run", "---", "",
             f"# `mmle score` run on {dataset.get('ref', 'a release')}", "",
             *([f"**SUBSET:** at most {subset} queries per pool (`--max-queries {subset}`): a quick look, not "
                "comparable with full runs or the paper's figures.", ""] if subset else []),
             f"- Models: {models}",
             f"- Dataset: `{dataset.get('ref')}` at revision `{dataset.get('revision') or 'local build'}`, data files "
             f"sha256 `{dataset.get('data_files_sha256') or 'not recorded'}`",
             f"- Toolkit: commit `{toolkit.get('git_commit') or 'not recorded'}`, version "
             f"`{toolkit.get('version') or 'not recorded'}`",
             f"- Created: {run.get('created') or 'not recorded'}", "",
             "`results.json` holds every figure, `predictions.parquet` each query's top 10 per model (what "
             "`mmle compare` and `mmle leaderboard` read for paired differences).", "", table.strip(), ""]
    return "\n".join(lines)


def push_results(run_dir: Path, repo_id: str, version: str, *, endpoint: str | None = None, token: str | None = None,
                 private: bool | None = None, attempts: int = 3, wait_s: float = 2.0, log=None) -> tuple[str, str, str]:
    """Publish the run in ``run_dir`` as release ``version`` of ``repo_id``: (tag, commit, url)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token
    from huggingface_hub.hf_api import RepoFile

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if not REPO_ID_RE.match(repo_id or ""):
        raise UserError(f"--repo {repo_id!r} is not of the form OWNER/NAME")
    tag = tag_name(parse_version(version))
    run_dir = Path(run_dir)
    run = load_run(run_dir)  # one line where the folder is not a run
    folder = Path(run["_path"]).parent
    token = token or get_token()
    if not token:
        raise UserError("no Hub token: set HF_TOKEN or run `hf auth login`")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                   and p.name != CARD)
    leaked = [p.relative_to(folder).as_posix() for p in files if holds_token(p, token)]
    if leaked:
        raise UserError(f"{folder}: {leaked[0]} holds the Hub token; refusing to publish it")
    table = (folder / "table.md").read_text(encoding="utf-8") if (folder / "table.md").is_file() else ""
    card = run_card(run, table).encode("utf-8")
    api = HfApi(endpoint=endpoint, token=token, library_name="mmlongembed")
    pusher = _Pusher(api, repo_id, token, log, attempts, wait_s)
    try:
        pusher.retry("create repo", lambda: api.create_repo(repo_id, repo_type=REPO_TYPE, private=private,
                                                            exist_ok=True))
        refs = pusher.retry("list refs", lambda: api.list_repo_refs(repo_id, repo_type=REPO_TYPE))
        tags = {ref.name: ref.target_commit for ref in refs.tags}
        if tag in tags:
            raise UserError(f"{repo_id} already has release {tag} (commit {tags[tag][:12]}); releases are immutable: "
                            "publish this run under a new version")
        head = pusher.head()
        remote = {f.path for f in pusher.retry("list files", lambda: list(api.list_repo_tree(
            repo_id, repo_type=REPO_TYPE, revision=head, recursive=True))) if isinstance(f, RepoFile)}
        names = [p.relative_to(folder).as_posix() for p in files]
        operations = ([CommitOperationAdd(name, str(path)) for name, path in zip(names, files)]
                      + [CommitOperationAdd(CARD, card)]
                      + [CommitOperationDelete(p) for p in sorted(remote - {*names, CARD, ".gitattributes"})])
        log(f"pushing {len(names) + 1} files of {folder} to {repo_id}")
        commit = pusher.retry("commit", lambda: api.create_commit(
            repo_id, operations, commit_message=f"Results {tag}", repo_type=REPO_TYPE, revision=BRANCH,
            parent_commit=head))
        oid = getattr(commit, "oid", None) or str(commit)
        pusher.retry("tag", lambda: api.create_tag(repo_id, tag=tag, revision=oid, repo_type=REPO_TYPE))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line that says what to do
        raise UserError(_scrub(f"push of {folder} to {repo_id} failed ({_one_line(exc)}); rerun `mmle push-results "
                               f"{run_dir} --repo {repo_id} --version {tag}`", token)) from None
    url = f"{(endpoint or _default_endpoint()).rstrip('/')}/datasets/{repo_id}/tree/{tag}"
    return tag, oid, url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="an `mmle score` run: its folder or its results.json")
    parser.add_argument("--repo", required=True, help="Hub dataset repo OWNER/NAME (created if missing)")
    parser.add_argument("--version", required=True,
                        help="version MAJOR.MINOR.PATCH; tagged vMAJOR.MINOR.PATCH, never moved once made (an existing "
                             "version is refused)")
    visibility = parser.add_mutually_exclusive_group()
    visibility.add_argument("--private", dest="private", action="store_true", default=None,
                            help="create the repo private")
    visibility.add_argument("--public", dest="private", action="store_false",
                            help="create the repo public (the Hub's default)")
    parser.add_argument("--endpoint", default=None, help="Hub URL (default: $HF_ENDPOINT or https://huggingface.co)")
    parser.add_argument("--retries", type=int, default=3,
                        help="attempts for each Hub call on transient errors (default: 3)")


def run(args: argparse.Namespace) -> int:
    tag, commit, url = push_results(args.run, args.repo, args.version, endpoint=args.endpoint, private=args.private,
                                    attempts=args.retries)
    print(f"repo: {args.repo}\ncommit: {commit}\ntag: {tag}\nurl: {url}")
    return 0
