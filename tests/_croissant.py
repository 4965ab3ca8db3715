"""Reading a build through its croissant.json with mlcroissant, as a Croissant user would, to
compare with what `load_dataset` returns (tests of mmlongembed.croissant)."""

from __future__ import annotations

import logging
from pathlib import Path


def croissant_issues(path: Path) -> tuple[list[str], list[str]]:
    """(errors, warnings) mlcroissant finds in a croissant.json."""
    import mlcroissant as mlc

    ctx = mlc.Context()
    try:
        mlc.Metadata.from_file(ctx, str(path))
    except mlc.ValidationError:
        pass
    return sorted(ctx.issues.errors), sorted(ctx.issues.warnings)


def _plain(value):
    """mlcroissant's value as load_dataset gives it: text decoded, an image as its bytes."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if hasattr(value, "tobytes") and hasattr(value, "mode"):  # a PIL image, as its pixels
        return ("image", value.mode, value.size, value.tobytes())
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    return value


def croissant_rows(root: Path, record_set: str, pool: str | None = None) -> list[dict]:
    """The records of ``record_set`` read through mlcroissant (those of ``pool``), column names
    as in the file, ``pool`` dropped."""
    import mlcroissant as mlc

    logging.getLogger("absl").setLevel(logging.ERROR)
    dataset = mlc.Dataset(str(Path(root) / "croissant.json"))
    rows = []
    for record in dataset.records(record_set):
        row = {key.rsplit("/", 1)[-1]: _plain(value) for key, value in record.items()}
        if pool is None or row.pop("pool", None) == pool:
            rows.append(row)
    return rows


def load_dataset_rows(root: Path, config: str, split: str = "test") -> list[dict]:
    """The rows of ``config`` as ``load_dataset`` returns them, images as their pixels."""
    from datasets import load_dataset

    return [{key: [_plain(image) for image in value] if key == "images" else value for key, value in row.items()}
            for row in load_dataset(str(root), config, split=split)]


def assert_croissant_matches(root: Path) -> None:
    """croissant.json passes mlcroissant with no error or warning, and the records it reads for
    the pools table and every config of the first pool (a training build: every config) are the
    rows load_dataset returns."""
    from mmlongembed.croissant import record_set_id
    from mmlongembed.layout import configs_from_card

    errors, warnings = croissant_issues(Path(root) / "croissant.json")
    assert (errors, warnings) == ([], []), (errors, warnings)
    specs = configs_from_card(Path(root) / "README.md")
    pools = [spec.pool for spec in specs.values() if spec.pool]
    chosen = [spec for spec in specs.values() if spec.pool is None or spec.pool == pools[0]]
    for spec in chosen:
        expected = load_dataset_rows(root, spec.name, spec.split)
        got = croissant_rows(root, record_set_id(spec.path), spec.pool)
        if spec.columns:
            got = [{column: row[column] for column in spec.columns} for row in got]
        assert got == expected, f"{spec.name}: croissant's records differ from load_dataset's"
