"""The published layout (docs/LAYOUT.md): config names, columns, where each config's rows live,
and the one reader that every consumer inside the toolkit uses (validate, publish, tests).

Models see only the corpus, queries and qrels configs, whose columns hold nothing but what a
model may read. What a candidate *is* (its role, the query it was made for, how it was made)
lives in the `<pool>-audit` config, keyed by the same opaque `_id`.

Rows of several pools share one parquet file (a *shard*: the pools of one length), so that an
image held by many candidates of those pools (a page kept by three hard negatives and by the
positive's copy in the easy pool) is stored once: the image column is dictionary-encoded within
the shard. A pool's config reads its rows from the shard through the `filters` and `columns`
options of the card's `configs:` header, which `datasets.load_dataset` applies. File names carry
a hash of their content, so `datasets` (which caches a local directory by its name, config and
data file paths) never hands back rows of an earlier build.
"""

from __future__ import annotations

import hashlib
import hmac
import functools
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.core.errors import UserError

LAYOUT_VERSION = "2"
SPLIT = "test"
PARTS = ("corpus", "queries", "qrels", "audit")
POOL_COLUMN = "pool"  # the shard's pool key; dropped from every config by its `columns`
CORPUS_COLUMNS = ("_id", "title", "text", "images", "n_tokens", "n_text_tokens", "n_image_tokens")
QUERY_COLUMNS = ("_id", "text", "images", "instruction", "n_tokens")
QREL_COLUMNS = ("query-id", "corpus-id", "score")
AUDIT_COLUMNS = ("_id", "kind", "internal_id", "role", "group", "source_id", "variant", "provenance")
MODEL_COLUMNS = {"corpus": CORPUS_COLUMNS, "queries": QUERY_COLUMNS, "qrels": QREL_COLUMNS}
# The `pools` config columns that every reader of a build relies on (the harness checks them).
POOLS_CONFIG_COLUMNS = ("pool", "task", "dataset", "difficulty", "length", "modality", "query_modality")
QUERY_KIND, CANDIDATE_KIND = "query", "candidate"
# What one row group of a data file may hold decoded (each image counted at every placement, as
# readers expand the dictionary): Arrow reads a row group's column chunk into one array, and a
# nested column (the images) past 2 GiB cannot be read at all ("Nested data conversions not
# implemented for chunked array outputs"), by `load_dataset` or anyone; readers also hold a row
# group at a time, so this bounds their memory. Each row group has its own dictionary: an image is
# stored once per row group that places it, and the rows that share images share a row group
# (``rowgroups.plan_row_groups``).
ROW_GROUP_BYTES = 256 << 20
# Arrow's limit for one array of binary values, less a margin: a single row beyond it cannot be
# read back at all (``capacity`` refuses such a build before rendering).
READ_BACK_LIMIT = (2 << 30) - (64 << 20)


def config_name(pool: str, part: str) -> str:
    return f"{pool}-{part}"


@dataclass(frozen=True)
class ConfigSpec:
    """One config of the card's `configs:` header: its file, and (for pool configs) the pool
    whose rows it keeps and the columns it shows."""

    name: str
    path: str  # posix path inside the repo
    pool: str | None = None
    columns: tuple[str, ...] | None = None
    split: str = SPLIT  # training-data builds (mmlongembed.training.pipeline) write `train`

    def card_entry(self) -> dict:
        entry: dict = {"config_name": self.name, "data_files": [{"split": self.split, "path": self.path}]}
        if self.pool is not None:
            entry["filters"] = [[POOL_COLUMN, "==", self.pool]]
        if self.columns is not None:
            entry["columns"] = list(self.columns)
        return entry

    @classmethod
    def from_card_entry(cls, entry: dict) -> "ConfigSpec":
        data = entry["data_files"]
        path = data[0]["path"] if isinstance(data, list) else data
        split = data[0].get("split", SPLIT) if isinstance(data, list) else SPLIT
        pool = None
        for clause in entry.get("filters") or []:
            if len(clause) == 3 and clause[0] == POOL_COLUMN and clause[1] == "==":
                pool = clause[2]
        columns = tuple(entry["columns"]) if entry.get("columns") else None
        return cls(entry["config_name"], path, pool, columns, split)


# The card's YAML header between `---` lines; lines may end in \r\n (a card saved on Windows).
CARD_HEADER = re.compile(r"^---\r?\n(.*?)\r?\n---\r?\n?(.*)$", re.S)


def split_card(text: str, where: str) -> tuple[dict | None, str]:
    """A dataset card's text -> (its YAML header, the body after it); (None, text) where it has
    no header. ``where`` names the card in the one-line errors."""
    import yaml

    match = CARD_HEADER.match(text)
    if not match:
        return None, text
    try:
        header = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        raise UserError(f"{where}: the YAML header does not parse ({str(error).splitlines()[0]})") from None
    if not isinstance(header, dict):
        raise UserError(f"{where}: the YAML header is not a mapping")
    return header, match.group(2)


def read_card_header(card_path: Path) -> dict:
    try:
        text = Path(card_path).read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(f"{card_path}: cannot read the dataset card ({error.strerror or error})") from None
    header, _ = split_card(text, str(card_path))
    if header is None:
        raise UserError(f"{card_path} has no YAML header")
    return header


def configs_from_card(card_path: Path) -> dict[str, ConfigSpec]:
    """config name -> where its rows are, read back from the card (what load_dataset sees)."""
    header = read_card_header(card_path)
    try:
        specs = [ConfigSpec.from_card_entry(entry) for entry in header.get("configs") or []]
    except (KeyError, TypeError, IndexError):
        raise UserError(f"{card_path}: a `configs:` entry lacks config_name or data_files") from None
    if not specs:
        raise UserError(f"{card_path}: the YAML header has no `configs:` list")
    return {spec.name: spec for spec in specs}


def read_config(root: Path, spec: ConfigSpec, cache: "RowGroupCache | None" = None) -> dict[str, list]:
    """The rows of one config as columns (what `load_dataset(root, spec.name)` returns, images
    undecoded). A missing, empty or corrupt file is a one-line UserError naming it. ``cache``
    keeps the row groups a pool's config decodes for the next pool that reads them."""
    path = Path(root) / spec.path
    if not path.is_file():
        raise UserError(f"{spec.path}: missing (config {spec.name})")
    try:
        return _read_rows(path, spec, cache)
    except Exception as error:  # noqa: BLE001  (pyarrow raises several types for broken files)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"{spec.path}: not a readable parquet file ({type(error).__name__}: {first[:200]})") from None


IMAGE_BYTES_PATH = "images.list.element.bytes"  # the parquet column of the images' bytes


def _read_rows(path: Path, spec: ConfigSpec, cache: "RowGroupCache | None") -> dict[str, list]:
    """``read_config``'s rows, read a row group at a time (memory bounded by a row group, and the
    ``cache``'s budget; no column chunk is decoded whole past what Arrow can hold), for a pool's
    config only the row groups that hold its rows (``_shard_index``); an image placed by several
    rows is one bytes object in what is returned, as it is one value in the file's dictionary. The
    images' bytes are read as a dictionary (``images_by_row``), so a row group's images are held
    once each, never once per placement, on their way to Python."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    interned: dict[bytes, bytes] = {}
    with pq.ParquetFile(path) as probe:
        paths = {probe.schema.column(k).path for k in range(len(probe.schema))}
        file = _file_key(path) if spec.pool is not None else None
        row_groups = range(probe.num_row_groups) if file is None else _shard_index(file).get(spec.pool, ())
    as_dictionary = [IMAGE_BYTES_PATH] if IMAGE_BYTES_PATH in paths else None
    with pq.ParquetFile(path, read_dictionary=as_dictionary) as handle:
        names = list(spec.columns) if spec.columns else [n for n in handle.schema_arrow.names]
        read = names + ([POOL_COLUMN] if spec.pool is not None and POOL_COLUMN not in names else [])
        out: dict[str, list] = {name: [] for name in names}
        for k in row_groups:
            def read_group(k=k):
                return handle.read_row_group(k, columns=read)

            table = read_group() if cache is None or file is None else cache.get((file, k, tuple(read)), read_group)
            if spec.pool is not None:
                table = table.filter(pc.field(POOL_COLUMN) == spec.pool)
            # to_pydict is where damaged bytes in a page surface (UnicodeDecodeError...)
            for name in names:
                column = table.column(name)
                out[name] += images_by_row(column, interned) if name == "images" else column.to_pylist()
            del table  # let the row group go before the next is read
    return out


def _file_key(path: Path) -> tuple:
    """A data file as it is now: a file rewritten under the same name is another key (names carry
    a hash of the content, so a rebuild that writes other rows writes another name anyway)."""
    stat = path.stat()
    return str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


@functools.lru_cache(maxsize=1024)  # a few bytes per pool; a release reads four files per dataset
def _shard_index(file: tuple) -> dict[str, tuple[int, ...]]:
    """pool -> the row groups of the shard ``file`` (its ``_file_key``) that hold its rows, read
    once per file from its pool column alone. A pool's config then decodes only the row groups
    that hold its rows: decoding the whole shard for each pool made reading every pool of a build
    (as validation does) quadratic in the pools of a shard."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found: dict[str, list[int]] = {}
    with pq.ParquetFile(file[0]) as handle:
        for k in range(handle.num_row_groups):
            pools = handle.read_row_group(k, columns=[POOL_COLUMN]).column(POOL_COLUMN)
            for pool in pc.unique(pools).to_pylist():
                found.setdefault(pool, []).append(k)
    return {pool: tuple(groups) for pool, groups in found.items()}


class RowGroupCache:
    """Decoded row groups (Arrow tables, images still one dictionary value each), the most
    recently read kept up to ``budget`` bytes (a reader holds at most that and the row group it
    reads): a row group holds the rows of many pools (those that share its images: the needle
    grid's mixed and image haystacks tie 150-265 pools' rows into one), and each pool that reads
    it would decode it again. One reader's; not for several threads at once."""

    def __init__(self, budget: int):
        self.budget, self.held = budget, 0
        self._tables: OrderedDict[tuple, object] = OrderedDict()

    def get(self, key: tuple, read):
        """The table under ``key``, or ``read()``'s, kept if it fits the budget at all."""
        if key in self._tables:
            self._tables.move_to_end(key)
            return self._tables[key]
        table = read()
        if table.nbytes <= self.budget:
            self._tables[key] = table
            self.held += table.nbytes
            while self.held > self.budget and self._tables:
                _, dropped = self._tables.popitem(last=False)
                self.held -= dropped.nbytes
        return table


def images_by_row(column, interned: dict[bytes, bytes]) -> list:
    """An images column (list<struct<bytes, path>>) as Python rows, each distinct image one bytes
    object (``interned``: content -> the object, shared across row groups). Where the bytes are
    dictionary-encoded, each dictionary value the rows place is made a Python object once, not
    once per row placing it (and a value no row of theirs places, another pool's, not at all)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows: list = []
    for chunk in column.chunks:
        element = chunk.type.value_type if pa.types.is_list(chunk.type) else None
        if element is None or not pa.types.is_struct(element) or element.get_field_index("bytes") < 0 \
                or not pa.types.is_dictionary(element.field("bytes").type):
            rows += [[{**image, "bytes": interned.setdefault(image["bytes"], image["bytes"])}
                      if image and image.get("bytes") else image for image in row] if row else row
                     for row in chunk.to_pylist()]
            continue
        flat = chunk.flatten()  # the struct of every placed image, in row order
        fields = dict(zip((f.name for f in element), flat.flatten()))  # each field, flat's offset applied
        data = fields.pop("bytes")
        indices = data.indices.to_pylist()
        # only the values these rows place: a shard's row group also holds other pools' images
        values = {i: data.dictionary[i].as_py() for i in set(indices) - {None}}
        values = {i: interned.setdefault(v, v) if v else v for i, v in values.items()}
        others = {name: values_.to_pylist() for name, values_ in fields.items()}
        present = flat.is_valid().to_pylist()
        images = [({"bytes": None if i is None else values[i], **{n: v[j] for n, v in others.items()}}
                   if present[j] else None) for j, i in enumerate(indices)]
        start = 0
        for length in pc.list_value_length(chunk).to_pylist():
            if length is None:
                rows.append(None)
                continue
            rows.append(images[start:start + length])
            start += length
    return rows


@dataclass
class PoolTables:
    """One pool as written, with the audit joined in: ``corpus`` and ``queries`` hold the model
    columns plus every audit column of their rows (role, group, provenance, task extras...)."""

    row: dict
    corpus: dict[str, list]
    queries: dict[str, list]
    qrels: dict[str, list]
    model_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)


def join_audit(rows: dict[str, list], audit: dict[str, list], kind: str) -> dict[str, list]:
    """``rows`` with the audit columns of its ids added (None where the audit lacks an id)."""
    index = {i: k for k, (i, row_kind) in enumerate(zip(audit.get("_id", []), audit.get("kind", [])))
             if row_kind == kind}
    joined = dict(rows)
    positions = [index.get(i) for i in rows["_id"]]
    for column, values in audit.items():
        if column in ("_id", "kind"):
            continue
        joined[column] = [values[p] if p is not None else None for p in positions]
    joined["_audited"] = [p is not None for p in positions]
    return joined


def read_pool(root: Path, specs: dict[str, ConfigSpec], pool_row: dict,
              cache: RowGroupCache | None = None) -> PoolTables:
    name = pool_row["pool"]
    tables = {}
    for part in PARTS:
        spec = specs.get(config_name(name, part))
        if spec is None:
            raise UserError(f"pool {name}: the card has no config {config_name(name, part)}")
        tables[part] = read_config(root, spec, cache)
    return PoolTables(
        row=pool_row,
        corpus=join_audit(tables["corpus"], tables["audit"], CANDIDATE_KIND),
        queries=join_audit(tables["queries"], tables["audit"], QUERY_KIND),
        qrels=tables["qrels"],
        model_columns={part: tuple(tables[part]) for part in ("corpus", "queries", "qrels")},
    )


class OpaqueIds:
    """Published ids: a keyed hash of the builder's readable id, one key per pool. They reveal
    neither the role, the query, the source nor the variant, and the same document has different
    ids in different pools (else a positive, present in both the easy and the hard pool of a
    length, would be the one candidate whose id appears twice)."""

    def __init__(self, seed: int, builder: str, pool: str):
        self._key = hashlib.sha256(f"mmle-ids\x1f{seed}\x1f{builder}\x1f{pool}".encode()).digest()

    def __call__(self, internal_id: str) -> str:
        return hmac.new(self._key, internal_id.encode("utf-8"), hashlib.sha256).hexdigest()[:20]


def pools_table(root: Path, specs: dict[str, ConfigSpec] | None = None) -> dict[str, list]:
    """The `pools` config as columns."""
    specs = specs or configs_from_card(Path(root) / "README.md")
    if "pools" not in specs:
        raise UserError(f"{Path(root) / 'README.md'}: no `pools` config")
    return read_config(root, specs["pools"])


def pool_rows(root: Path, specs: dict[str, ConfigSpec] | None = None) -> list[dict]:
    """The rows of the `pools` config."""
    table = pools_table(root, specs)
    return [{k: v[i] for k, v in table.items()} for i in range(len(table.get("pool", [])))]


def read_built_pool(root: Path, pool: str) -> PoolTables:
    """One pool of a build directory, audit joined (for analyses and tests)."""
    specs = configs_from_card(Path(root) / "README.md")
    row = next((r for r in pool_rows(root, specs) if r["pool"] == pool), None)
    if row is None:
        raise UserError(f"{root}: no pool {pool!r}")
    return read_pool(root, specs, row)
