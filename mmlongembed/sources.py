"""Reading sources: the Hub at a pinned revision, or local files in the source's own format.

Local readers never crash on a bad record: malformed lines and records are counted by reason
in the build report and the rest goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mmlongembed.builder import BuildReport
from mmlongembed.errors import UserError


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


def hub_rows(source: HubSource, builder_name: str, streaming: bool = True) -> Iterator[dict]:
    """Rows of a Hub dataset at its pinned revision. When the Hub cannot be reached, one line
    says so and names the --sources option."""
    try:
        import datasets

        dataset = datasets.load_dataset(
            source.repo, source.config, split=source.split, revision=source.revision, streaming=streaming
        )
        yield from dataset
    except Exception as error:  # noqa: BLE001  (any failure to reach the Hub is reported the same way)
        reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise UserError(
            f"cannot read {source.repo}@{source.revision[:12]} from the Hugging Face Hub ({reason}); "
            f"pass --sources DIR with local files to build {builder_name} offline"
        ) from None


def require_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise UserError(f"source path {path} does not exist ({what})")
    return path


def read_text_file(path: Path, report: BuildReport) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        report.skip("not_utf8", str(path))
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
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        report.skip("malformed_json_file", f"{path.name}: {type(error).__name__}")
        return None
