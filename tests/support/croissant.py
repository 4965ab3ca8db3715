"""A build's published metadata read as its users' tools read it: croissant.json through
mlcroissant (compared with what `load_dataset` returns), the card through huggingface_hub."""

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
    if isinstance(value, dict):  # a field's subFields, keyed by their ids
        return {key.rsplit("/", 1)[-1]: _plain(item) for key, item in value.items()}
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
    from mmlongembed.output.croissant import record_set_id
    from mmlongembed.output.layout import configs_from_card

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


# The Hub's vocabularies for these fields (huggingface.co/docs/hub/datasets-cards; the YAML keys
# the Hub validates and the values its dataset search understands).
HUB_LICENCES = {"cc-by-4.0", "cc-by-sa-4.0", "cc-by-sa-3.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "cc0-1.0", "mit",
                "apache-2.0", "other"}
HUB_CREATORS = {"crowdsourced", "expert-generated", "found", "machine-generated", "no-annotation", "other"}
HUB_MULTILINGUALITY = {"monolingual", "multilingual", "translation", "other"}
HUB_SIZES = {"n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M"}
HUB_TASKS = {"text-retrieval": {"document-retrieval"}, "visual-document-retrieval": set()}


def check_card_with_huggingface_hub(card_path: Path) -> dict:
    """The card read by huggingface_hub as the Hub reads it: its YAML survives DatasetCardData
    unchanged, and every field the Hub knows holds a value of the Hub's vocabulary."""
    from huggingface_hub import DatasetCard, DatasetCardData

    text = card_path.read_text(encoding="utf-8")
    from mmlongembed.output.layout import read_card_header

    header = read_card_header(card_path)
    card = DatasetCard(text)
    assert card.data.to_dict() == header
    assert DatasetCardData(**header).to_dict() == header
    for key in ("pretty_name", "license", "language", "source_datasets", "annotations_creators", "language_creators",
                "multilinguality", "task_categories", "task_ids", "size_categories", "configs"):
        assert header.get(key), f"the card's YAML lacks {key}"
    assert header["license"] in HUB_LICENCES
    assert set(header["annotations_creators"]) <= HUB_CREATORS and set(header["language_creators"]) <= HUB_CREATORS
    assert set(header["multilinguality"]) <= HUB_MULTILINGUALITY
    assert set(header["size_categories"]) <= HUB_SIZES
    assert set(header["task_categories"]) <= set(HUB_TASKS)
    assert set(header["task_ids"]) <= set().union(*(HUB_TASKS[c] for c in header["task_categories"]))
    assert all(s == "original" or s.startswith("extended|") for s in header["source_datasets"])
    return header
