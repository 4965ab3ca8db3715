"""GovReport (Huang et al., NAACL 2021): reports with their expert-written summaries, from the
original JSONL, L-Eval's JSONL, ZeroSCROLLS' paired input/output files or the Hub's parquet
conversion, read into ``Report`` records.

Every report is kept once: an empty report, a missing summary, a repeated text or a reused id
is a counted skip; records come out sorted by id, so their order never depends on the files'.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.readers.sources import HubSource, hub_rows, iter_jsonl, read_json, require_dir
from mmlongembed.core.text import normalise_whitespace

# The parquet conversion of GovReport (report, summary; no id column): the original
# launch/gov_report needs a loading script, which current `datasets` no longer runs.
HUB_SOURCE = HubSource(
    repo="ccdv/govreport-summarization", revision="4e21184e01ae8017e2c036e180fe5e541fef60a0", config="document",
    split="test", licence="CC BY 4.0",
)
ZEROSCROLLS_PREFIX = "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n"
ZEROSCROLLS_SUFFIX = "\n\nSummary:\n"


@dataclass(frozen=True)
class Report:
    """One report and its summary. The report's text is held compressed: the donor search reads
    the whole corpus, so a full-size GovReport (19K reports) is held for the whole build, in a
    third of the memory its text takes; ``report`` gives the text back."""

    id: str
    packed_report: bytes  # zlib
    summary: str
    origin: str
    characters: int  # of the report

    @classmethod
    def of(cls, rid: str, report: str, summary: str, origin: str) -> "Report":
        return cls(rid, zlib.compress(report.encode()), summary, origin, len(report))

    @property
    def report(self) -> str:
        return zlib.decompress(self.packed_report).decode()


def _clean(text) -> str:
    """GAO reports double-space their sentences, CRS and L-Eval texts do not: one convention for
    all, one paragraph per line, so a donor block never differs from its host in its spacing."""
    return normalise_whitespace(text) if isinstance(text, str) else ""


def _content_id(prefix: str, body) -> str:
    """An id for sources without one: stable across row order, from the report's text."""
    return f"{prefix}-" + hashlib.sha256(_clean(body).encode()).hexdigest()[:12]


def local_root(sources: str | Path) -> Path:
    """The folder the local files are read from: ``govreport/`` inside ``sources`` if there is one."""
    root = Path(sources)
    return root / "govreport" if (root / "govreport").is_dir() else root


def local_files(root: Path) -> list[Path]:
    """The files ``read_local_reports`` reads under ``root`` (what pins local sources)."""
    return [*root.rglob("*.jsonl"), *root.rglob("*_input.json"), *root.rglob("*_output.json")]


def read_local_reports(root: Path, report: BuildReport) -> Iterator[Report]:
    """GovReport's original JSONL (`id`, `report`|`document`, `summary`), L-Eval's JSONL
    (`input`, `outputs`) and ZeroSCROLLS' paired `*_input.json` / `*_output.json` files."""
    for path in sorted(root.rglob("*.jsonl")):
        for number, record in enumerate(iter_jsonl(path, report), 1):
            if "input" in record and "outputs" in record:  # L-Eval
                outputs = record.get("outputs") or []
                summary = outputs[0] if isinstance(outputs, list) and outputs else ""
                body = record.get("input")
                rid = _content_id("leval", body)
            else:
                body = record.get("report", record.get("document"))
                summary = record.get("summary")
                if isinstance(body, list):  # some GovReport dumps keep paragraphs as a list
                    body = "\n".join(str(p) for p in body)
                if isinstance(summary, list):
                    summary = "\n".join(str(p) for p in summary)
                rid = str(record.get("id") or f"{path.stem}-{number}")
            yield Report.of(rid, _clean(body), _clean(summary), f"{path.name}:{number}")
    for input_path in sorted(root.rglob("*_input.json")):
        output_path = input_path.with_name(input_path.name.replace("_input.json", "_output.json"))
        inputs, outputs = read_json(input_path, report), read_json(output_path, report) if output_path.exists() else {}
        if not isinstance(inputs, dict):
            continue
        for rid, body in inputs.items():
            if isinstance(body, str):
                body = body.removeprefix(ZEROSCROLLS_PREFIX).removesuffix(ZEROSCROLLS_SUFFIX)
            yield Report.of(str(rid), _clean(body), _clean((outputs or {}).get(rid)), input_path.name)


def read_hub_reports(builder_name: str) -> Iterator[Report]:
    """The Hub's parquet GovReport at its pinned revision (no id column: ids from the text)."""
    for number, r in enumerate(hub_rows(HUB_SOURCE, builder_name), 1):
        yield Report.of(str(r.get("id") or _content_id("govreport", r.get("report"))),
                        _clean(r.get("report", r.get("document"))), _clean(r.get("summary")), f"hub:{number}")


def usable_reports(records: Iterable[Report], report: BuildReport) -> list[Report]:
    """Each report once, with its summary, sorted by id; the others are counted skips."""
    kept, seen, seen_ids = [], {}, {}
    for r in records:
        if not r.characters:
            report.skip("empty_report", r.origin)
        elif not r.summary:
            report.skip("missing_summary", r.origin)
        else:
            digest = hashlib.sha256(r.packed_report).hexdigest()  # one text, one compressed form
            if digest in seen:
                report.skip("duplicate_report", f"{r.origin} repeats {seen[digest]}")
                continue
            if r.id in seen_ids:  # same id, another text: the first one read is kept
                report.skip("duplicate_id", f"{r.origin} reuses id {r.id} of {seen_ids[r.id]}")
                continue
            seen[digest] = r.origin
            seen_ids[r.id] = r.origin
            kept.append(r)
    return sorted(kept, key=lambda r: r.id)


def read_reports(sources: str | None, builder_name: str, report: BuildReport) -> list[Report]:
    """The usable reports of local ``sources`` (a folder), or of the Hub when there are none."""
    if sources:
        root = require_dir(sources, "GovReport JSONL, L-Eval JSONL or ZeroSCROLLS JSON files")
        records = read_local_reports(local_root(root), report)
    else:
        records = read_hub_reports(builder_name)
    kept = usable_reports(records, report)
    if not kept and sources:
        raise UserError(f"no usable GovReport record under {sources}")
    return kept
