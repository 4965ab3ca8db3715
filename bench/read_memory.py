"""Peak memory of reading a config whose images are placed many times: the reader against a dense read.

    .venv/bin/python bench/read_memory.py [--images 40] [--placements 12] [--side 400]

Writes a one-pool build whose candidates each place the same ``--images`` noise photos
(``--placements`` candidates per image; the file stores each photo once), then reads its corpus
config in fresh processes: with ``layout.read_config`` (what `mmle validate` uses: the images'
bytes read through the file's dictionary), and with the reference a reader without it would do
(``pyarrow`` row group to Python: every placement its own bytes). Prints each peak RSS
(``getrusage``) above a bare process that imported the same modules, and their ratio. Read the
ratio, not the megabytes: the reader's extra memory should be about the distinct images, the
reference's about every placement.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MEASURE = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {repo!r})
    import pyarrow.parquet as pq
    from mmlongembed.output.layout import configs_from_card, read_config
    root = {root!r}
    spec = configs_from_card(__import__("pathlib").Path(root) / "README.md")[{config!r}]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if {how!r} == "reader":
        rows = read_config(root, spec)
    elif {how!r} == "dense":
        with pq.ParquetFile(f"{{root}}/{{spec.path}}") as handle:
            rows = [handle.read_row_group(k).to_pydict() for k in range(handle.num_row_groups)]
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
""")


def peak_kib(root: Path, config: str, how: str) -> int:
    code = MEASURE.format(repo=str(REPO), root=str(root), config=config, how=how)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=40, help="distinct photos every candidate places")
    parser.add_argument("--placements", type=int, default=12, help="candidates (each places every photo)")
    parser.add_argument("--side", type=int, default=800, help="photo side in pixels (noise JPEG)")
    args = parser.parse_args()
    from mmlongembed.testing import photo, pool_with_images, write_fixture_build

    images = [photo(k, side=args.side) for k in range(args.images)]
    with tempfile.TemporaryDirectory(prefix="mmle-read-memory-") as tmp:
        root = write_fixture_build(Path(tmp) / "build", [
            pool_with_images(256, images, n_queries=max(1, args.placements // 2))])
        config = "fixture-easy-256-corpus"
        distinct = sum(map(len, images)) / 2**20
        reader, dense = peak_kib(root, config, "reader") / 1024, peak_kib(root, config, "dense") / 1024
    placed = distinct * 2 * max(1, args.placements // 2)
    print(f"{args.images} photos ({distinct:.1f} MiB distinct, {placed:.1f} MiB at every placement)")
    print(f"read_config (images through the dictionary): +{reader:.1f} MiB peak RSS")
    print(f"dense read (every placement its own bytes):   +{dense:.1f} MiB peak RSS")
    print(f"ratio reader / dense: {reader / dense:.2f}" if dense > 0 else "ratio: n/a (no growth measured)")


if __name__ == "__main__":
    main()
