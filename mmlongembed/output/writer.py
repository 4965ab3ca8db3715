"""Write a built benchmark in the published layout (docs/LAYOUT.md), blind and atomically.

Every builder writes through here, so every release inherits the same guarantees:

- the corpus, queries and qrels configs hold only what a model may see; ids are opaque keyed
  hashes and corpus rows are in a seeded random order (inside each row group, where rows that
  share images are gathered: ``mmlongembed.output.rowgroups``), so neither an id, a column nor a
  row position points to the positive;
- what each row is (role, group, source, variant, provenance, task extras) goes to the pool's
  `-audit` config, keyed by the same opaque ids;
- an image or a text held by several rows of a row group is stored once (dictionary encoding),
  and the rows that share images share a row group;
- files are named by their content hash (see ``mmlongembed.output.layout``).

Everything is written into a temporary sibling directory and renamed into place only when
complete, so a crash never leaves a half-written benchmark behind (``mmlongembed.output.outdir``: the
lock, owned temporaries, the umask, SIGTERM).
"""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from mmlongembed.core.documents import VISUAL_KINDS, image_data
from mmlongembed.core.errors import UserError
from mmlongembed.output.manifest import file_sha256
from mmlongembed.output.layout import (
    AUDIT_COLUMNS, CANDIDATE_KIND, IMAGE_BYTES_PATH, MODEL_COLUMNS, PARTS, POOL_COLUMN, QUERY_KIND, ROW_GROUP_BYTES, SPLIT, ConfigSpec,
    OpaqueIds, config_name)
from mmlongembed.output.rowgroups import plan_row_groups, row_group_slices
from mmlongembed.output.outdir import check_replaceable, make_temporary_dir, temporary_path
from mmlongembed.core.pools import Pool
from mmlongembed.core.rng import derive_rng

# A shard's distinct images are one parquet dictionary page, which must stay under 2 GiB;
# pools beyond this many image bytes go to further shards of the same length.
SHARD_IMAGE_BYTES = 768 << 20
DICTIONARY_PAGE_LIMIT = 1 << 30
PARQUET_OPTIONS = dict(compression="zstd", store_schema=False, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
                       use_dictionary=[POOL_COLUMN, "text", IMAGE_BYTES_PATH, "kind", "role", "group",
                                       "source_id", "variant"])


@dataclass
class StorageStats:
    """What the images and texts of a build would cost stored per row, against what they cost."""

    image_refs: int = 0
    image_bytes_referenced: int = 0
    distinct_images: int = 0
    distinct_image_bytes: int = 0
    text_bytes: int = 0
    data_bytes_on_disk: int = 0
    image_bytes_on_disk: int = 0  # the images' column alone (its dictionaries), compressed as written

    @property
    def ratio(self) -> float:
        """Bytes on disk over the bytes of the distinct images plus the texts (1.0: nothing repeated)."""
        payload = self.distinct_image_bytes + self.text_bytes
        return self.data_bytes_on_disk / payload if payload else 0.0

    @property
    def image_ratio(self) -> float:
        """The images' bytes on disk, as compressed, over their distinct bytes, which text that
        compresses well cannot hide. About 1.0 where each image is stored once and its encoding
        (PNG, JPEG) leaves zstd little to take; below 1.0 where the images themselves compress
        (raw or sparse pixels); above, where row groups repeat an image."""
        return self.image_bytes_on_disk / self.distinct_image_bytes if self.distinct_image_bytes else 0.0

    def as_dict(self) -> dict:
        return {"image_refs": self.image_refs, "image_bytes_referenced": self.image_bytes_referenced,
                "distinct_images": self.distinct_images, "distinct_image_bytes": self.distinct_image_bytes,
                "text_bytes": self.text_bytes, "data_bytes_on_disk": self.data_bytes_on_disk,
                "image_bytes_on_disk": self.image_bytes_on_disk,
                "ratio_to_distinct_payload": round(self.ratio, 4),
                "image_ratio_to_distinct": round(self.image_ratio, 4)}

    def summary(self) -> str:
        mb = 1e6
        images = f"; images {self.image_ratio:.2f}x their distinct bytes" if self.distinct_image_bytes else ""
        return (f"storage: {self.data_bytes_on_disk / mb:.1f} MB of data on disk for "
                f"{self.distinct_image_bytes / mb:.1f} MB of distinct images ({self.distinct_images} images, "
                f"{self.image_refs} placements, {self.image_bytes_referenced / mb:.1f} MB if stored per placement) "
                f"+ {self.text_bytes / mb:.1f} MB of text: {self.ratio:.2f}x{images}")


def storage_ratios(storage: dict | None) -> str:
    """A build's storage ratios from its manifest's ``storage`` (release summaries, the bench)."""
    storage = storage or {}
    line = f"bytes on disk {storage.get('ratio_to_distinct_payload', 0.0):.2f}x distinct images + text"
    if storage.get("distinct_image_bytes") and "image_ratio_to_distinct" in storage:
        line += f", images {storage['image_ratio_to_distinct']:.2f}x their distinct bytes"
    return line


@dataclass
class Written:
    specs: list[ConfigSpec]
    storage: StorageStats
    files: dict[str, dict] = field(default_factory=dict)  # repo path -> sha256, bytes


# -- rows ------------------------------------------------------------------------------------------

def rows_by_part(pool: Pool, seed: int, builder: str) -> dict[str, list[dict]]:
    """The pool's rows per part, with opaque ids, candidates and queries in seeded random order
    (what is written; ``layout.pool_rows`` reads back the rows of the `pools` config)."""
    ids = OpaqueIds(seed, builder, pool.name)
    corpus_order = derive_rng(seed, builder, pool.name, "corpus-order").permutation(len(pool.candidates))
    query_order = derive_rng(seed, builder, pool.name, "query-order").permutation(len(pool.queries))
    candidates = [pool.candidates[int(i)] for i in corpus_order]
    queries = [pool.queries[int(i)] for i in query_order]
    corpus, audit = [], []
    for c in candidates:
        corpus.append({"_id": ids(c.id), **c.corpus_row()})
        audit.append({"_id": ids(c.id), "kind": CANDIDATE_KIND, "internal_id": c.id, "role": c.role,
                      "group": ids(c.group), "source_id": c.source_id,
                      "variant": str(c.provenance.get("variant", "")),
                      "provenance": json.dumps(c.provenance, sort_keys=True, ensure_ascii=False), **c.extra})
    query_rows = []
    for q in queries:
        query_rows.append({"_id": ids(q.id), "text": q.text, "images": list(q.images), "instruction": q.instruction,
                           "n_tokens": q.n_tokens})
        audit.append({"_id": ids(q.id), "kind": QUERY_KIND, "internal_id": q.id, "role": QUERY_KIND,
                      "group": ids(q.id), "source_id": q.source_id, "variant": "", "provenance": "{}", **q.extra})
    position = {q.id: k for k, q in enumerate(queries)}
    qrels = [{"query-id": ids(q), "corpus-id": ids(c), "score": s}
             for q, c, s in sorted(pool.qrels, key=lambda r: (position.get(r[0], -1), r[1]))]
    shadowed = {k for row in (*pool.candidates, *pool.queries) for k in row.extra} & {*AUDIT_COLUMNS, POOL_COLUMN}
    if shadowed:
        raise ValueError(f"{pool.name}: extra column(s) {sorted(shadowed)} shadow layout columns")
    return {"corpus": corpus, "queries": query_rows, "qrels": qrels, "audit": audit}


# -- arrow tables ----------------------------------------------------------------------------------

def list_of(feature):
    import datasets

    return datasets.List(feature) if hasattr(datasets, "List") else datasets.Sequence(feature)


def _value_feature(values: Sequence):
    import datasets

    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, bytes):
        return datasets.Value("binary")
    if isinstance(sample, bool):
        return datasets.Value("bool")
    if isinstance(sample, int):
        return datasets.Value("int64")
    if isinstance(sample, float):
        return datasets.Value("float64")
    if isinstance(sample, (list, tuple)):
        inner = _value_feature([x for v in values if v for x in v])
        return list_of(inner)
    return datasets.Value("string")


def images_array(rows: list[dict], dictionary: dict[bytes, int], store: list[bytes]):
    """list<struct<bytes, path>> whose bytes are dictionary-encoded: each distinct image is held
    (and written) once, however many rows place it."""
    import pyarrow as pa

    offsets, indices = [0], []
    for row in rows:
        for image in row["images"]:
            index = dictionary.get(image)
            if index is None:
                index = dictionary[image] = len(store)
                store.append(image)
            indices.append(index)
        offsets.append(len(indices))
    # a stored image is read here, for its row group only (``documents.image_data``), one at a
    # time into the Arrow array (a generator: no list of the row group's bytes beside it)
    values = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(
        (image_data(image) for image in store), pa.binary(), size=len(store)))
    struct = pa.StructArray.from_arrays([values, pa.nulls(len(indices), pa.string())], names=["bytes", "path"])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct)


def _features(part: str, rows: list[dict]):
    import datasets

    string, int64 = datasets.Value("string"), datasets.Value("int64")
    fixed = {
        "corpus": {"_id": string, "title": string, "text": string, "images": list_of(datasets.Image()),
                   "n_tokens": int64, "n_text_tokens": int64, "n_image_tokens": int64},
        "queries": {"_id": string, "text": string, "images": list_of(datasets.Image()), "instruction": string,
                    "n_tokens": int64},
        "qrels": {"query-id": string, "corpus-id": string, "score": int64},
        "audit": {c: string for c in AUDIT_COLUMNS},
    }[part]
    features = {POOL_COLUMN: string, **fixed}
    if part == "audit":
        for key in sorted({k for row in rows for k in row} - set(fixed)):
            features[key] = _value_feature([row.get(key) for row in rows])
    return datasets.Features(features)


def arrow_row_groups(row_groups: Sequence[Sequence[dict]], features) -> Iterator:
    """Each row group's rows as an arrow table of ``features``, made when the writer asks for it
    (memory bounded by a row group) and with its own image dictionary (only the images its rows
    place: a parquet writer writes a dictionary whole into every row group it is given for)."""
    import pyarrow as pa

    schema = features.arrow_schema
    for group in row_groups:
        yield pa.table({
            name: images_array(group, {}, []) if name == "images" else
            pa.array([row.get(name) for row in group], type=schema.field(name).type) for name in features})


def consecutive_row_groups(rows: Sequence[dict]) -> list[Sequence[dict]]:
    """``rows`` in their order, cut where a row group would pass ``ROW_GROUP_BYTES`` decoded."""
    return [rows[part] for part in row_group_slices(rows, ROW_GROUP_BYTES)]


def shard_table(part: str, rows_in_pool_order: list[tuple[str, list[dict]]], groups: dict[tuple[str, str, str], str],
                rng):
    """Arrow tables (one per row group, made as they are written) of the given part for several
    pools, and their features. Rows that place images go where the rows sharing their images are
    (``rowgroups.plan_row_groups``: a unit is the rows of one audit group, ``groups``: (pool, kind,
    id) -> group; ``rng`` orders them); other parts keep each pool's rows together, in its order."""
    rows = [{**row, POOL_COLUMN: pool} for pool, part_rows in rows_in_pool_order for row in part_rows]
    features = _features(part, rows)
    if any(row.get("images") for row in rows):
        kind = CANDIDATE_KIND if part == "corpus" else QUERY_KIND
        units = [(row[POOL_COLUMN], groups[row[POOL_COLUMN], kind, row["_id"]]) for row in rows]
        row_groups = [[rows[k] for k in group] for group in plan_row_groups(rows, units, rng, ROW_GROUP_BYTES)]
    else:
        row_groups = consecutive_row_groups(rows)
    return arrow_row_groups(row_groups, features), features


def image_column_bytes(path: Path) -> int:
    """The bytes the images' column takes in a written parquet file (every row group's chunk,
    its dictionary included; 0 without images), from the file's metadata."""
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(path).metadata
    total = 0
    for k in range(metadata.num_row_groups):
        group = metadata.row_group(k)
        total += sum(group.column(c).total_compressed_size for c in range(group.num_columns)
                     if group.column(c).path_in_schema == IMAGE_BYTES_PATH)
    return total


def write_parquet(tables, features, directory: Path, stem: str) -> Path:
    """Write ``tables`` (an arrow table, or an iterable of them: one row group each) as
    ``<stem>-<content hash>.parquet`` with the datasets features in its metadata (so
    load_dataset decodes images); returns the path."""
    import pyarrow.parquet as pq

    tables = iter([tables] if hasattr(tables, "num_rows") else tables)
    table = next(tables)
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / f".{stem}.writing"
    metadata = {"huggingface": json.dumps({"info": {"features": features.to_dict()}})}
    with pq.ParquetWriter(str(scratch), table.schema, **PARQUET_OPTIONS) as writer:
        while table is not None:
            writer.write_table(table, row_group_size=max(1, table.num_rows))
            del table  # let it go before the next row group is made
            table = next(tables, None)
        writer.add_key_value_metadata(metadata)
    digest = file_sha256(scratch)
    final = directory / f"{stem}-{digest[:12]}.parquet"
    scratch.rename(final)
    return final


# -- shards and the whole build ----------------------------------------------------------------------

def _image_sizes(pool: Pool) -> dict[int, int]:
    """hash -> size of every image the pool's candidates and queries hold."""
    sizes = {hash(s.image): len(s.image) for c in pool.candidates for s in c.document.segments
             if s.kind in VISUAL_KINDS and s.image is not None}
    sizes.update({hash(image): len(image) for q in pool.queries for image in q.images})
    return sizes


def plan_shards(pools: Sequence[Pool]) -> list[tuple[str, str, list[Pool]]]:
    """(dataset, shard name, pools): which pools share data files. The pools of one dataset and
    length share a shard; lengths whose pools hold the same
    images (a page in the 8K and the 16K window, a video with runs in two bands) are merged into
    one shard, so those images are stored once; a shard splits where its distinct images would
    outgrow one dictionary page."""
    groups: dict[tuple[str, str], list[Pool]] = {}
    for pool in pools:
        groups.setdefault((pool.dataset, pool.band.name), []).append(pool)
    images = {key: {k: v for p in members for k, v in _image_sizes(p).items()} for key, members in groups.items()}
    keys = sorted(groups, key=lambda k: (k[0], min(p.band.target for p in groups[k]), k[1]))
    merged: list[list[tuple[str, str]]] = []
    for key in keys:
        home = next((m for m in merged if m[0][0] == key[0] and any(images[key].keys() & images[k].keys() for k in m)
                     and sum({h: n for k in [*m, key] for h, n in images[k].items()}.values()) <= SHARD_IMAGE_BYTES),
                    None)
        if home is None:
            merged.append([key])
        else:
            home.append(key)
    shards = []
    for group in merged:
        dataset, shard_name = group[0][0], "_".join(k[1] for k in group)
        chunks: list[list[Pool]] = [[]]
        seen: set[int] = set()
        size = 0
        for pool in (p for key in group for p in groups[key]):
            fresh = {h: n for h, n in _image_sizes(pool).items() if h not in seen}
            if chunks[-1] and size + sum(fresh.values()) > SHARD_IMAGE_BYTES:
                chunks.append([])
                seen, size = set(), 0
                fresh = _image_sizes(pool)
            chunks[-1].append(pool)
            seen |= set(fresh)
            size += sum(fresh.values())
        for k, chunk in enumerate(chunks):
            shards.append((dataset, shard_name if len(chunks) == 1 else f"{shard_name}-{k}", chunk))
    return shards


def write_tables(pools: Sequence[Pool], root: Path, *, seed: int, builder: str, progress: bool = True) -> Written:
    """Write the pools table and every pool's four configs; returns the card's config specs,
    storage figures and the sha256 of every data file."""
    from tqdm.auto import tqdm

    root = Path(root)
    specs: list[ConfigSpec] = []
    files: dict[str, dict] = {}
    stats = StorageStats()
    distinct: dict[bytes, None] = {}
    shards = plan_shards(pools)

    def record(path: Path) -> str:
        relative = path.relative_to(root).as_posix()
        files[relative] = {"sha256": file_sha256(path), "bytes": path.stat().st_size}
        stats.data_bytes_on_disk += path.stat().st_size
        stats.image_bytes_on_disk += image_column_bytes(path)
        return relative

    specs.append(ConfigSpec("pools", record(write_pools_table(pools, root / "data" / "pools"))))
    pool_specs: dict[str, list[ConfigSpec]] = {}
    bar = tqdm(total=sum(len(p.candidates) + len(p.queries) for p in pools), desc="writing pools", unit="row",
               disable=not progress)
    try:
        for dataset, shard, chunk in shards:
            rows = {pool.name: rows_by_part(pool, seed, builder) for pool in chunk}
            groups = {(pool.name, row["kind"], row["_id"]): row["group"]
                      for pool in chunk for row in rows[pool.name]["audit"]}
            for part in PARTS:
                ordered = [(pool.name, rows[pool.name][part]) for pool in chunk]
                if part in ("corpus", "queries"):
                    for row in (row for _, part_rows in ordered for row in part_rows):
                        stats.text_bytes += len(row["text"].encode("utf-8"))
                        stats.image_refs += len(row["images"])
                        stats.image_bytes_referenced += sum(len(b) for b in row["images"])
                        distinct.update(dict.fromkeys(row["images"]))
                tables, features = shard_table(part, ordered, groups,
                                               derive_rng(seed, builder, dataset, shard, part, "row-groups"))
                path = record(write_parquet(tables, features, root / "data" / dataset / part, shard))
                columns = MODEL_COLUMNS.get(part) or tuple(c for c in features if c != POOL_COLUMN)
                for pool in chunk:
                    pool_specs.setdefault(pool.name, []).append(
                        ConfigSpec(config_name(pool.name, part), path, pool.name, tuple(columns)))
            bar.update(sum(len(p.candidates) + len(p.queries) for p in chunk))
    finally:
        bar.close()
    stats.distinct_images = len(distinct)
    stats.distinct_image_bytes = sum(len(b) for b in distinct)
    # the row groups' Arrow buffers go back to the system now, not when the allocator gets to it:
    # the validator's workers fork from this process next, and would start as large
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    specs += [spec for pool in pools for spec in pool_specs[pool.name]]
    return Written(specs, stats, files)


def write_pools_table(pools: Sequence[Pool], directory: Path) -> Path:
    return write_pools_rows([p.row() for p in pools], directory)


def write_pools_rows(rows: Sequence[dict], directory: Path) -> Path:
    """The `pools` config from its rows (``Pool.row()``; a release merges its components' rows)."""
    import datasets
    import pyarrow as pa

    features = datasets.Features({
        "pool": datasets.Value("string"), "task": datasets.Value("string"), "dataset": datasets.Value("string"),
        "difficulty": datasets.Value("string"), "length": datasets.Value("int64"),
        "band_min": datasets.Value("int64"), "band_max": datasets.Value("int64"),
        "depth": datasets.Value("float64"), "modality": datasets.Value("string"),
        "query_modality": datasets.Value("string"), "n_queries": datasets.Value("int64"),
        "n_candidates": datasets.Value("int64"), "extra": datasets.Value("string"),
    })
    schema = features.arrow_schema
    table = pa.table({k: pa.array([r[k] for r in rows], type=schema.field(k).type) for k in features})
    return write_parquet(table, features, directory, SPLIT)


def pool_statistics(pool: Pool) -> dict:
    lengths = sorted(c.n_tokens for c in pool.candidates)
    n_queries = len(pool.queries)
    return {
        "pool": pool.name,
        "queries": n_queries,
        "candidates": len(pool.candidates),
        "candidates_made_per_query": round(len(pool.candidates) / n_queries, 3) if n_queries else 0,
        "tokens_min": lengths[0] if lengths else 0,
        "tokens_median": int(statistics.median(lengths)) if lengths else 0,
        "tokens_max": lengths[-1] if lengths else 0,
        "band": [pool.band.lo, pool.band.hi],
        "images": sum(1 for c in pool.candidates for s in c.document.segments if s.is_visual),
    }


# -- the output directory ----------------------------------------------------------------------------

def prepare_output_dir(final_dir: Path, overwrite: bool) -> Path:
    """A fresh temporary sibling of ``final_dir`` (named after this process, the user's umask);
    call it holding ``outdir.BuildLock(final_dir)``."""
    final_dir = Path(final_dir)
    if final_dir.exists() and not overwrite:
        raise UserError(f"output directory {final_dir} already exists; pass --overwrite to replace it")
    check_replaceable(final_dir)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    return make_temporary_dir(final_dir)


def commit_output_dir(tmp_dir: Path, final_dir: Path) -> None:
    """Swap the finished temporary directory into place (rename is atomic on one filesystem)."""
    final_dir = Path(final_dir)
    trash = None
    if final_dir.exists():
        trash = temporary_path(final_dir, "old")
        final_dir.rename(trash)
    Path(tmp_dir).rename(final_dir)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
