"""Fixture helpers of the harness tests on top of harness.fixtures (make_pool, write_benchmark):
damaged configs, the standard and needle-grid benchmarks, a tiny Qwen2-VL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.fixtures import make_pool, png, write_benchmark
from mmlongembed.core.documents import image_segment
from mmlongembed.core.pools import Pool

def rewrite_table(root: Path, pool: str, part: str, edit) -> None:
    """Damage one pool's config on purpose: `edit(pyarrow.Table) -> pyarrow.Table` gets the rows and
    columns the config shows; the result becomes that config's own file (its shard is left as is)."""
    import json

    import pyarrow.compute as pc
    import yaml

    from mmlongembed.output.layout import POOL_COLUMN, config_name, configs_from_card

    root = Path(root)
    name = config_name(pool, part)
    spec = configs_from_card(root / "README.md")[name]
    table = pq.read_table(root / spec.path, filters=pc.field(POOL_COLUMN) == pool, columns=list(spec.columns))
    table = edit(table)
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    kept = {k: v for k, v in features.items() if k in table.column_names}
    table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": kept}})})
    relative = f"data/damaged/{name}.parquet"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, root / relative)
    card = (root / "README.md").read_text(encoding="utf-8")
    header_text, body = card[4:].split("\n---\n", 1)
    header = yaml.safe_load(header_text)
    header["configs"] = [{"config_name": name, "data_files": [{"split": "test", "path": relative}]}
                         if entry["config_name"] == name else entry for entry in header["configs"]]
    (root / "README.md").write_text("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n" + body,
                                    encoding="utf-8")


def drop_column(column: str):
    return lambda table: table.drop_columns([column])


def blank_images(table: pa.Table) -> pa.Table:
    """Every image loses its bytes and points to a file that is not there."""
    images = table.column("images").to_pylist()
    images = [[{"bytes": None, "path": "/nonexistent/missing.png"} for _ in row] for row in images]
    index = table.column_names.index("images")
    return table.set_column(index, "images", pa.array(images, type=table.schema.field("images").type))


def run_score(tmp_path: Path, dataset, *extra, name: str = "out", bootstrap: int = 200):
    """`mmle score` on ``dataset`` into ``tmp_path/name`` (its own cache, quiet): (exit code, the
    results.json report or None, the output folder)."""
    from harness.cli import main

    output = tmp_path / name
    code = main(["--dataset", str(dataset), "--output", str(output), "--cache-dir", str(tmp_path / "cache"),
                 "--quiet", "--bootstrap", str(bootstrap), *extra])
    report = json.loads((output / "results.json").read_text()) if (output / "results.json").exists() else None
    return code, report, output


def standard_benchmark(root: Path) -> Path:
    """Text pools of one task at two lengths and both difficulties, one mixed image pool, two grid pools."""
    pools = [
        make_pool("govreport-easy-256", length=256, words=120),
        make_pool("govreport-easy-512", length=512, words=260),
        make_pool("govreport-hard-256", difficulty="hard", length=256, words=120),
        make_pool("govreport-hard-512", difficulty="hard", length=512, words=260),
        make_pool("slides-easy-512", dataset="slides", task="visual_grounding", length=512, words=120, images=True),
        make_pool("needle-text-essay-256-d25", dataset="needle", difficulty="grid", length=256, depth=25.0, words=100),
        make_pool("needle-text-essay-256-d75", dataset="needle", difficulty="grid", length=256, depth=75.0, words=100),
    ]
    return write_benchmark(root, pools)


GRID_BACKGROUNDS = ("text", "mixed", "image")
MISS_QUERY = "zzzz qqqq"  # shares no word with any candidate: BM25 ties it at zero, a miss under the tie rule


def grid_pool(needle: str, background: str, length: int, depth: float, misses: int, n_queries: int = 4) -> Pool:
    """One Visual Grounding grid cell, named and described as the needle builder does it
    (`needle-<needle>-<background>-<length>-d<depth>`, facts needle_modality/background -> `extra`).
    The first `misses` queries share no word with any candidate. Text background: text candidates;
    mixed (and an image needle in text): text with an image; image: candidates that are one image each and
    no text at all, so BM25 scores them all zero."""
    name = f"needle-{needle}-{background}-{length}-d{depth:g}"
    pool = make_pool(name, dataset="needle", task="visual_grounding", difficulty="grid", length=length,
                     depth=depth, n_queries=n_queries, words=60,
                     images=background == "mixed" or (needle == "image" and background == "text"))
    pool.facts = {"needle_modality": needle, "background": background, "fixture": True}
    pool.modality = "text" if background == needle == "text" else ("image" if background == needle else "mixed")
    for query in pool.queries[:misses]:
        query.text = MISS_QUERY
    if background == "image":
        for k, candidate in enumerate(pool.candidates):
            picture = image_segment(png((40 * k % 256, 90, 160)), height=48, width=64)
            candidate.document = candidate.document.with_segments((picture,))
            candidate.n_tokens = candidate.document.tokens
    return pool


def grid_benchmark(root: Path, misses: dict) -> Path:
    """A needle grid: `misses[(needle, background)]` lists the missed queries (of 4) of each pool, in the
    order (256, d25), (256, d75), (512, d25), (512, d75)."""
    cells = [(256, 25.0), (256, 75.0), (512, 25.0), (512, 75.0)]
    pools = [grid_pool(needle, background, length, depth, miss)
             for (needle, background), counts in misses.items()
             for (length, depth), miss in zip(cells, counts)]
    return write_benchmark(root, pools)


def qwen3_tokenizer(extra_special_tokens=()):
    """The real Qwen3 tokenizer as the tiny models carry it (harness.models.tiny_models), with
    ``extra_special_tokens`` added as single ids."""
    from harness.models.tiny_models import qwen3_tokenizer as tiny_models_tokenizer

    tokenizer = tiny_models_tokenizer()
    if extra_special_tokens:
        tokenizer.add_special_tokens({"additional_special_tokens": list(extra_special_tokens)})
    return tokenizer


def save_tiny_qwen2_vl(directory: Path, tokenizer, model_class) -> Path:
    """A tiny randomly initialised Qwen2-VL (``model_class``: the bare model or the one with an LM
    head) with ``tokenizer`` and a small-pixel image processor, saved to ``directory``."""
    from harness.models.tiny_models import make_tiny

    return make_tiny(directory, "qwen2_vl", model_class, tokenizer)
