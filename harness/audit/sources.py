"""The retrieval datasets `mmle audit` reads, each as splits of one shape (``AuditSplit``).

Three layouts, told apart by their files:

- BEIR: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``, ``qrels/<split>.tsv``
  (a header, then query-id, corpus-id, score);
- mteb's Hub layout: configs ``corpus``, ``queries``, ``qrels`` and optionally ``top_ranked``, as
  parquet files in folders of those names (``corpus/test-00000-of-00001.parquet``: the split
  is the file name's first part), columns as mteb's ``RetrievalDatasetLoader`` reads them
  (``id`` or ``_id``, ``text``, ``title``, ``image``; qrels ``query-id``, ``corpus-id``, ``score``;
  top_ranked ``query-id``, ``corpus-ids``);
- this toolkit's releases (a folder with ``manifest.json``, or a card with a ``pools`` config):
  read through ``harness.scoring.data.Benchmark``, one split per pool.

A Hub repo (``--revision``) is downloaded at exactly that revision (after the one-request check
``mmle score`` makes) and read as a local folder. The corpus is never held: ``corpus_batches``
reads it again from disk, ``batch_size`` rows at a time; queries and qrels are held (they are
small next to a corpus of long documents).
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from mmlongembed.core.errors import UserError
from mmlongembed.checks.shortcuts import NUMERIC_COLUMNS

MTEB_CONFIGS = ("corpus", "queries", "qrels")
# What one corpus batch holds: ids, texts, the number of images per row, the image bytes (for
# their sizes, in yardstick tokens), and any numeric length columns the dataset carries.
CorpusBatch = dict[str, list]


@dataclass
class AuditSplit:
    """One split to audit: its judged documents, its queries' texts, and per-query candidate lists
    where the dataset has them (None: every query ranks the whole corpus)."""

    name: str
    corpus_batches: Callable[[int], Iterator[CorpusBatch]]
    queries: dict[str, str]
    relevant: dict[str, set[str]]  # query id -> corpus ids judged relevant (score > 0)
    candidates: dict[str, list[str]] | None = None
    groups_from: str = "the whole corpus"  # where the candidate lists come from, for the report


def open_dataset(ref: str, revision: str | None = None) -> tuple[str, list[AuditSplit]]:
    """(layout name, splits) of a local folder or a Hub dataset repo at ``revision``."""
    if revision is not None:
        ref = _download(ref, revision)
    elif not os.path.isdir(ref):
        raise UserError(f"{ref!r}: no such directory (a Hub repo needs --revision TAG_OR_COMMIT)")
    root = Path(ref)
    if (root / "manifest.json").is_file() or _card_has_pools(root):
        return "mmlongembed release", _release_splits(str(root))
    if (root / "corpus.jsonl").is_file():
        return "BEIR", _beir_splits(root)
    if all((root / config).is_dir() for config in MTEB_CONFIGS):
        return "mteb", _mteb_splits(root)
    raise UserError(f"{ref!r}: not a retrieval dataset this reads (BEIR: corpus.jsonl, queries.jsonl, qrels/*.tsv; "
                    "mteb: corpus/, queries/, qrels/ parquet folders; or an mmle release with manifest.json)")


def _download(repo: str, revision: str) -> str:
    """The repo at exactly ``revision``, as a local folder (checked first with one request, as
    ``mmle score`` checks a Hub dataset: offline or no such revision is one line)."""
    from harness.scoring.data import check_hub_reference

    check_hub_reference(f"{repo}@{revision}", repo, revision)
    if _card_mentions_pools(repo, revision):
        return f"{repo}@{revision}"  # a release: Benchmark reads it from the Hub at its revision
    from huggingface_hub import snapshot_download

    return snapshot_download(repo, repo_type="dataset", revision=revision)


def _card_mentions_pools(repo: str, revision: str) -> bool:
    from huggingface_hub import hf_hub_download

    try:
        card = hf_hub_download(repo, "README.md", repo_type="dataset", revision=revision)
    except Exception:  # noqa: BLE001  (no card: not a release)
        return False
    return "config_name: pools" in Path(card).read_text(encoding="utf-8", errors="replace")


def _card_has_pools(root: Path) -> bool:
    card = root / "README.md"
    return card.is_file() and "config_name: pools" in card.read_text(encoding="utf-8", errors="replace")


# --- BEIR ---------------------------------------------------------------------------------------

def _json_lines(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise UserError(f"{path}:{number}: not a JSON line ({error.msg})") from None
            if not isinstance(row, dict) or "_id" not in row:
                raise UserError(f"{path}:{number}: a row without `_id`")
            yield row


def _beir_splits(root: Path) -> list[AuditSplit]:
    qrel_files = sorted((root / "qrels").glob("*.tsv"))
    if not (root / "queries.jsonl").is_file() or not qrel_files:
        raise UserError(f"{root}: a BEIR dataset needs queries.jsonl and qrels/<split>.tsv beside corpus.jsonl")
    queries = {str(row["_id"]): str(row.get("text") or "") for row in _json_lines(root / "queries.jsonl")}

    def corpus_batches(batch_size: int) -> Iterator[CorpusBatch]:
        batch: CorpusBatch = _empty_batch()
        for row in _json_lines(root / "corpus.jsonl"):
            _append(batch, str(row["_id"]), str(row.get("text") or ""), str(row.get("title") or ""), [])
            if len(batch["_id"]) >= batch_size:
                yield batch
                batch = _empty_batch()
        if batch["_id"]:
            yield batch

    splits = []
    for path in qrel_files:
        relevant: dict[str, set[str]] = {}
        with open(path, encoding="utf-8", newline="") as handle:
            rows = csv.reader(handle, delimiter="\t")
            header = next(rows, None)
            if header is None or [h.strip() for h in header[:2]] != ["query-id", "corpus-id"]:
                raise UserError(f"{path}: expected a header `query-id<TAB>corpus-id<TAB>score`")
            for number, row in enumerate(rows, 2):
                if len(row) < 3:
                    raise UserError(f"{path}:{number}: expected three tab-separated fields")
                try:
                    score = float(row[2])
                except ValueError:
                    raise UserError(f"{path}:{number}: score {row[2]!r} is not a number") from None
                if score > 0:
                    relevant.setdefault(row[0], set()).add(row[1])
        splits.append(AuditSplit(path.stem, corpus_batches, {q: queries[q] for q in relevant if q in queries},
                                 {q: ids for q, ids in relevant.items() if q in queries}))
    return splits


def _empty_batch() -> CorpusBatch:
    return {"_id": [], "text": [], "title": [], "images": []}


def _append(batch: CorpusBatch, cid: str, text: str, title: str, images: list[bytes]) -> None:
    batch["_id"].append(cid)
    batch["text"].append(text)
    batch["title"].append(title)
    batch["images"].append(images)


# --- mteb ---------------------------------------------------------------------------------------

def _parquet_files(root: Path, config: str) -> dict[str, list[Path]]:
    """split -> the config's parquet files (``qrels/test-00000-of-00001.parquet`` is split test)."""
    out: dict[str, list[Path]] = {}
    for path in sorted((root / config).rglob("*.parquet")):
        out.setdefault(path.name.split("-")[0].split(".")[0], []).append(path)
    return out


def _parquet_batches(paths: list[Path], columns: list[str], batch_size: int) -> Iterator[dict[str, list]]:
    import pyarrow.parquet as pq

    for path in paths:
        try:
            handle = pq.ParquetFile(path)
            present = [c for c in columns if c in handle.schema_arrow.names]
            for record_batch in handle.iter_batches(batch_size=batch_size, columns=present):
                yield record_batch.to_pydict()
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise UserError(f"{path}: cannot read parquet ({str(error).splitlines()[0][:200]})") from None


def _image_bytes(value) -> list[bytes]:
    """One image cell (a {bytes, path} struct, or a list of them) as its encoded bytes."""
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    return [v["bytes"] for v in values if isinstance(v, dict) and v.get("bytes")]


def _blanks(rows: dict[str, list]) -> list[str]:
    """Empty texts for a batch without a text column (an image-only query side)."""
    return [""] * max((len(v) for v in rows.values()), default=0)


def _mteb_splits(root: Path) -> list[AuditSplit]:
    corpus_files = [p for paths in _parquet_files(root, "corpus").values() for p in paths]
    if not corpus_files:
        raise UserError(f"{root}/corpus: no parquet files")

    def corpus_batches(batch_size: int) -> Iterator[CorpusBatch]:
        for rows in _parquet_batches(corpus_files, ["id", "_id", "text", "title", "image"], batch_size):
            ids = rows.get("id", rows.get("_id"))
            if ids is None:
                raise UserError(f"{root}/corpus: no `id` column (mteb's corpus columns: id, text, title, image)")
            batch = _empty_batch()
            n = len(ids)
            for i in range(n):
                _append(batch, str(ids[i]), (rows.get("text") or [""] * n)[i] or "",
                        (rows.get("title") or [""] * n)[i] or "", _image_bytes((rows.get("image") or [None] * n)[i]))
            yield batch

    queries_by_split = _parquet_files(root, "queries")
    top_ranked_by_split = _parquet_files(root, "top_ranked") if (root / "top_ranked").is_dir() else {}
    splits = []
    for split, paths in _parquet_files(root, "qrels").items():
        relevant: dict[str, set[str]] = {}
        for rows in _parquet_batches(paths, ["query-id", "corpus-id", "score"], 65536):
            if not {"query-id", "corpus-id", "score"} <= set(rows):
                raise UserError(f"{root}/qrels: expected columns query-id, corpus-id, score")
            for qid, cid, score in zip(rows["query-id"], rows["corpus-id"], rows["score"]):
                if score is not None and float(score) > 0:
                    relevant.setdefault(str(qid), set()).add(str(cid))
        query_paths = queries_by_split.get(split) or [p for ps in queries_by_split.values() for p in ps]
        queries = {str(qid): text or "" for rows in _parquet_batches(query_paths, ["id", "_id", "text"], 65536)
                   for qid, text in zip(rows.get("id", rows.get("_id", [])), rows.get("text") or _blanks(rows))}
        candidates = None
        if split in top_ranked_by_split:
            candidates = {str(qid): [str(c) for c in ids]
                          for rows in _parquet_batches(top_ranked_by_split[split], ["query-id", "corpus-ids"], 65536)
                          for qid, ids in zip(rows.get("query-id", []), rows.get("corpus-ids", []))}
        judged = {q: ids for q, ids in relevant.items() if q in queries and (candidates is None or q in candidates)}
        splits.append(AuditSplit(split, corpus_batches, {q: queries[q] for q in judged}, judged, candidates,
                                 "mteb's top_ranked" if candidates is not None else "the whole corpus"))
    return splits


# --- this toolkit's releases --------------------------------------------------------------------

def _release_splits(ref: str) -> list[AuditSplit]:
    from harness.scoring.data import Benchmark, PoolError

    benchmark = Benchmark(ref)
    splits = []
    for info in benchmark.pools:
        try:
            pool = benchmark.open_pool(info)
        except PoolError as error:
            raise UserError(f"{ref}: pool {info.name}: {error}") from None
        audit = pool.audit()
        relevant = {pool.query_ids[i]: {pool.corpus_ids[k]} for i, k in enumerate(pool.positive_index)}
        if audit is not None:
            members: dict[str, list[str]] = {}
            for cid, group in zip(audit["_id"], audit["group"]):
                members.setdefault(str(group), []).append(str(cid))
            candidates = {q: members.get(q, list(pool.corpus_ids)) for q in pool.query_ids}
            groups_from = "the pool's audit groups"
        else:
            candidates = {q: list(pool.corpus_ids) for q in pool.query_ids}
            groups_from = "the pool's candidates"
        queries = {qid: text or "" for qid, text in zip(pool.query_ids, pool.queries["text"])}
        splits.append(AuditSplit(info.name, _release_batches(pool.corpus), queries, relevant, candidates,
                                 groups_from))
    return splits


def _release_batches(table) -> Callable[[int], Iterator[CorpusBatch]]:
    columns = [c for c in ("_id", "text", "title", "images", *NUMERIC_COLUMNS) if c in table.column_names]

    def corpus_batches(batch_size: int) -> Iterator[CorpusBatch]:
        for rows in table.select_columns(columns).iter(batch_size=batch_size):
            batch = _empty_batch()
            for i, cid in enumerate(rows["_id"]):
                images = [v["bytes"] for v in (rows.get("images") or [[]] * len(rows["_id"]))[i] or []
                          if isinstance(v, dict) and v.get("bytes")]
                # a release marks each image's place in the text; the images feature counts those
                _append(batch, cid, rows["text"][i] or "", rows.get("title", [""] * len(rows["_id"]))[i] or "",
                        images)
            for column in NUMERIC_COLUMNS:
                if column in rows:
                    batch[column] = list(rows[column])
            yield batch

    return corpus_batches
