"""`mmle push-results RUN --repo OWNER/NAME --version X.Y.Z`: publish an `mmle score` run as a Hub
dataset at a tag, as `mmle push` publishes a build.

The tag holds the run folder as it is (results.json, predictions.parquet, table.md, the plots)
and a README.md card: the models, each dataset scored (reference, revision, data files digest),
the toolkit's commit, SUBSET where the run was a `--max-queries` sample, and table.md itself. One
commit on main replaces whatever an earlier version left there, so each tag holds one run whole;
a tag is never moved (an existing version is refused). The repo is opened, committed to and
tagged by `mmle push`'s own steps (``mmlongembed.publish.push.TaggedCommit``): a `--private` run
is never put into a public repo, and a retried commit or tag whose first answer was lost is found,
not made twice. The token comes from HF_TOKEN (or `hf auth login`) and is checked to be in no file
pushed; it never reaches the output. Errors are one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.report.leaderboard import load_run
from mmlongembed.core.errors import UserError
from mmlongembed.publish.push import (REPO_ID_RE, REPO_TYPE, TaggedCommit, _default_endpoint, _one_line, _Pusher,
                                      _scrub, add_release_arguments, holds_token, parse_version, release_id,
                                      tag_name)

CARD = "README.md"


def _dataset_line(dataset: dict) -> str:
    return (f"- Dataset: `{dataset.get('ref')}` at revision `{dataset.get('revision') or 'local build'}`, data files "
            f"sha256 `{dataset.get('data_files_sha256') or 'not recorded'}`")


def run_card(run: dict, table: str) -> str:
    """The results repo's card: what was scored (each release of a run over several), by what, and
    the run's table."""
    dataset = run.get("dataset") or {}
    toolkit = run.get("toolkit") or {}
    models = ", ".join(f"`{m['spec']}`" for m in run.get("models") or []) or "none recorded"
    subset = (run.get("settings") or {}).get("max_queries")
    lines = ["---", "tags:", "- mmlongembed", "- mmle-score-run", "---", "",
             f"# `mmle score` run on {dataset.get('ref', 'a release')}", "",
             *([f"**SUBSET:** at most {subset} queries per pool (`--max-queries {subset}`): a quick look, not "
                "comparable with full runs or the paper's figures.", ""] if subset else []),
             f"- Models: {models}",
             *map(_dataset_line, run.get("datasets") or [dataset]),
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
    # hidden files and folders stay home, as `mmle push` leaves them
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts) and p.name != CARD)
    leaked = [name for name in names if holds_token(folder / name, token)]
    if leaked:
        raise UserError(f"{folder}: {leaked[0]} holds the Hub token; refusing to publish it")
    table = (folder / "table.md").read_text(encoding="utf-8") if (folder / "table.md").is_file() else ""
    card = run_card(run, table).encode("utf-8")
    api = HfApi(endpoint=endpoint, token=token, library_name="mmlongembed")
    # mmle push's steps: a --private run never into a public repo, a commit whose answer was lost
    # found again (not stacked twice), a tag whose answer was lost not reported as a failure
    release = TaggedCommit(_Pusher(api, repo_id, token, log, attempts, wait_s), tag, release_id(tag, folder, names),
                           f"rerun `mmle push-results {run_dir} --repo {repo_id} --version {tag}`", "run")
    try:
        _, head = release.open_repo(private)
        remote = {f.path for f in release.pusher.retry("list files", lambda: list(api.list_repo_tree(
            repo_id, repo_type=REPO_TYPE, revision=head, recursive=True))) if isinstance(f, RepoFile)}

        def operations():
            # what an earlier version left and this run lacks goes, so the tag holds this run alone
            return ([CommitOperationAdd(name, str(folder / name)) for name in names] + [CommitOperationAdd(CARD, card)]
                    + [CommitOperationDelete(p) for p in sorted(remote - {*names, CARD, ".gitattributes"})])

        log(f"pushing {len(names) + 1} files of {folder} to {repo_id}")
        oid = release.commit_on_main(operations, head, f"Results {tag}", f"`mmle score` run {folder.name}")
        release.tag_commit(oid, f"Results {tag}")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line that says what to do
        raise UserError(_scrub(f"push of {folder} to {repo_id} failed ({_one_line(exc)}); nothing was tagged; "
                               f"{release.rerun}", token)) from None
    url = f"{(endpoint or _default_endpoint()).rstrip('/')}/datasets/{repo_id}/tree/{tag}"
    return tag, oid, url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="an `mmle score` run: its folder or its results.json")
    add_release_arguments(parser)


def run(args: argparse.Namespace) -> int:
    tag, commit, url = push_results(args.run, args.repo, args.version, endpoint=args.endpoint, private=args.private,
                                    attempts=args.retries)
    print(f"repo: {args.repo}\ncommit: {commit}\ntag: {tag}\nurl: {url}")
    return 0
