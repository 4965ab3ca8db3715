"""Reading sources: the Hub at a pinned revision, or local files in the source's own format.

Local readers never crash on a bad record: malformed lines and records are counted by reason
in the build report and the rest goes on. A whole file that cannot be parsed (cut short, not
UTF-8) stops the build in one line naming it (``unreadable_file``), unless the build was told
``--skip-unreadable-files``: then it is counted, named in the manifest, and the summary's last
lines say what the build lost with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError


@dataclass(frozen=True)
class HubSource:
    repo: str
    revision: str  # a commit sha: tags and branches move
    config: str | None = None
    split: str = "train"
    licence: str = ""

    @property
    def identity(self) -> dict:
        return {"hub_repo": self.repo, "revision": self.revision, "config": self.config, "split": self.split}


_REACHED: set[tuple[str, str]] = set()


def _check_reachable(source: HubSource) -> None:
    """One request for the repo at its pinned revision. The clients' downloads retry a refused
    connection with backoff (tens of seconds, a warning per try); this fails at once instead,
    and also says when the repo or the revision does not exist."""
    key = (source.repo, source.revision)
    if key not in _REACHED:
        from huggingface_hub import HfApi

        HfApi().dataset_info(source.repo, revision=source.revision, timeout=30)
        _REACHED.add(key)


def _hub_error(what: str, builder_name: str, error: Exception, remedy: str = "") -> UserError:
    name = type(error).__name__
    if "Offline" in name:
        reason = "offline mode is on (HF_HUB_OFFLINE=1)"
    elif "NotFound" in name or "404" in str(error)[:200]:
        reason = "repo, revision or file not found"
    elif "Connect" in name or "Timeout" in name or "connect" in str(error)[:200].lower():
        reason = "no connection"
    else:
        first = str(error).splitlines()[0] if str(error) else ""
        reason = f"{name}: {first[:120]}" if first else name
    remedy = remedy or f"pass --sources DIR (make: SOURCES=DIR) with local files to build {builder_name} offline"
    return UserError(f"cannot read {what} from the Hugging Face Hub ({reason}); {remedy}")


def hub_rows(source: HubSource, builder_name: str, streaming: bool = True, remedy: str = "") -> Iterator[dict]:
    """Rows of a Hub dataset at its pinned revision. When the Hub cannot be reached, one line
    says so and what to do instead: ``remedy``, by default the --sources option."""
    try:
        import datasets

        _check_reachable(source)
        dataset = datasets.load_dataset(
            source.repo, source.config, split=source.split, revision=source.revision, streaming=streaming
        )
        yield from dataset
    except Exception as error:  # noqa: BLE001  (any failure to reach the Hub is reported the same way)
        raise _hub_error(f"{source.repo}@{source.revision[:12]}", builder_name, error, remedy) from None


def require_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise UserError(f"source path {path} does not exist ({what})")
    return path


def unreadable_file(path: Path, why: str, report: BuildReport) -> None:
    """A source file that cannot be read at all: one line that stops the build, or (with
    ``--skip-unreadable-files``) a counted skip whose consequences the summary states."""
    if not report.skip_unreadable_files:
        raise UserError(f"source file {path} cannot be read ({why}); it may be cut short or damaged: replace it, "
                        "move it away, or pass --skip-unreadable-files to build without it")
    report.skip("unreadable_file", path.name)
    report.lost_files.append((str(path), why))


def read_text_file(path: Path, report: BuildReport) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        unreadable_file(path, f"not UTF-8 at byte {error.start}", report)
        return None


def iter_jsonl(path: Path, report: BuildReport) -> Iterator[dict]:
    """Records of a JSON Lines file; bad lines are counted, not fatal."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                report.skip("not_utf8", f"{path.name}:{number}")
                continue
            except json.JSONDecodeError:
                report.skip("malformed_json_line", f"{path.name}:{number}")
                continue
            if not isinstance(record, dict):
                report.skip("malformed_json_line", f"{path.name}:{number}")
                continue
            yield record


def read_json(path: Path, report: BuildReport):
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        unreadable_file(path, f"not UTF-8 at byte {error.start}", report)
    except json.JSONDecodeError as error:
        unreadable_file(path, f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})", report)
    return None


def hub_file(source: HubSource, filename: str, builder_name: str) -> Path:
    """One file of a Hub dataset repo at its pinned revision, downloaded (and cached) by the Hub
    client. When the Hub cannot be reached, one line says so and names the --sources option."""
    try:
        from huggingface_hub import hf_hub_download

        _check_reachable(source)
        return Path(hf_hub_download(source.repo, filename, repo_type="dataset", revision=source.revision))
    except Exception as error:  # noqa: BLE001  (reported like hub_rows)
        raise _hub_error(f"{filename} of {source.repo}@{source.revision[:12]}", builder_name, error) from None


def fetch_url(url: str, timeout: float, max_bytes: int = 20 * 1024 * 1024) -> bytes:
    """The body of an http(s) URL (a web image named by a Hub dataset). Raises OSError (or
    ValueError for other schemes) on any failure; callers count it as a skip."""
    import urllib.request

    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url[:80]}")
    request = urllib.request.Request(url, headers={"User-Agent": "mmlongembed (research benchmark builder)"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
        data = response.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"more than {max_bytes} bytes")
    return data
