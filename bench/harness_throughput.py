"""Embedding throughput of the harness models on this machine (items/s), on a generated benchmark.

    .venv/bin/python bench/harness_throughput.py [--candidates-words 2000] [--queries 16]

Writes a fixture benchmark to a temporary directory, scores it with bm25 and MiniLM without the
cache, and prints the items/s each model reached (embedding time only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cli import main as score  # noqa: E402
from harness.fixtures import make_pool, write_benchmark  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=16, help="queries in the pool (4 candidates each)")
    parser.add_argument("--candidates-words", type=int, default=2000, help="words per candidate")
    parser.add_argument("--batch-size", type=int, default=16, help="harness batch size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = write_benchmark(Path(tmp) / "bench", [
            make_pool("bench-easy-8k", length=8192, n_queries=args.queries, words=args.candidates_words)])
        code = score(["--dataset", str(bench), "--model", "bm25,minilm", "--no-cache", "--quiet", "--no-plots",
                      "--batch-size", str(args.batch_size), "--output", str(Path(tmp) / "out")])
        report = json.loads((Path(tmp) / "out" / "results.json").read_text())
    for row in report["results"]:
        print(f"{row['model']:<8} {row['embedded']} items in {row['timings']['embed_s']:.2f}s: "
              f"{row['items_per_s']} items/s")
    sys.exit(code)


if __name__ == "__main__":
    main()
