"""Training data: the tables a training builder returns, written and read as parquet configs.

Each table is one config (split ``train``), one parquet file named by its content hash under
``data/<name>/``, loadable with ``load_dataset(dir, name, split="train")``; a column named
``images`` (a list of encoded images) stores each distinct image once. The build pipeline that
writes them, and reads them back to validate them, is ``mmlongembed.training.pipeline`` (``TRAINING``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import ConfigSpec
from mmlongembed.output.manifest import file_sha256
from mmlongembed.output.writer import (
    StorageStats, Written, arrow_row_groups, consecutive_row_groups, image_column_bytes, write_parquet)

TRAIN_SPLIT = "train"
IMAGES = "images"
# What a training builder's `task` may be (pool builders use mmlongembed.core.pools.TASKS).
TRAINING_TASKS = ("evidence_alignment",)


@dataclass
class TrainingTable:
    name: str  # the config name
    rows: list[dict]
    features: Any  # datasets.Features, in column order


@dataclass
class TrainingData:
    tables: list[TrainingTable]
    statistics: dict = field(default_factory=dict)  # into the manifest and the card
    tokenizer: dict | None = None  # the tokenizer that made any token ids (default: the Qwen3 yardstick)


def write_training_tables(data: TrainingData, root: Path) -> Written:
    """One parquet file per table under ``data/<name>/``; returns the card's config specs, the
    storage figures and the sha256 of every data file."""
    root = Path(root)
    specs, files, stats = [], {}, StorageStats()
    distinct: dict[bytes, None] = {}
    for table in data.tables:
        path = write_parquet(arrow_row_groups(consecutive_row_groups(table.rows), table.features), table.features,
                             root / "data" / table.name, TRAIN_SPLIT)
        relative = path.relative_to(root).as_posix()
        size = path.stat().st_size
        files[relative] = {"sha256": file_sha256(path), "bytes": size}
        stats.data_bytes_on_disk += size
        stats.image_bytes_on_disk += image_column_bytes(path)
        for row in table.rows:
            for image in row.get(IMAGES) or ():
                stats.image_refs += 1
                stats.image_bytes_referenced += len(image)
                distinct[image] = None
            stats.text_bytes += sum(len(v.encode("utf-8")) for v in row.values() if isinstance(v, str))
        specs.append(ConfigSpec(table.name, relative, split=TRAIN_SPLIT))
    stats.distinct_images = len(distinct)
    stats.distinct_image_bytes = sum(len(b) for b in distinct)
    return Written(specs, stats, files)


def read_training_tables(root: Path, specs: dict[str, ConfigSpec]) -> dict[str, dict[str, list]]:
    """config -> column -> values, as written (images as {bytes, path} dicts)."""
    import pyarrow.parquet as pq

    tables = {}
    for name, spec in specs.items():
        try:
            tables[name] = pq.read_table(Path(root) / spec.path).to_pydict()
        except (OSError, ValueError) as error:
            raise UserError(f"{spec.path}: cannot read config {name} ({str(error).splitlines()[0]})") from None
    return tables
