"""The HotpotQA build against its floor: one tokenisation pass over everything it writes.

A build must at least count every output token once (validation recounts each candidate from
its final text). This builds HotpotQA from ../shared/data (all three lengths, defaults), then
times one pass of the token counter over every written candidate and query text, on both cores,
in the same run, and prints the ratio (target: at most 3x) with where the build's time went.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=Path(os.environ.get("MMLE_SHARED_DATA", REPO.parent / "shared" / "data")),
                        help="the shared sample data (holds hotpotqa/ and haystack_text/)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768], help="pool lengths")
    args = parser.parse_args()

    from builders.hotpotqa import HotpotQAConfig
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder
    from mmlongembed.output.layout import configs_from_card, pool_rows, read_config
    from mmlongembed.core.tokens import default_counter

    counter = default_counter()
    counter.count("warm up")
    with tempfile.TemporaryDirectory() as tmp:
        config = HotpotQAConfig(sources=str(args.sources), lengths=tuple(args.lengths))
        start, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
        out = run_build(get_builder("hotpotqa"), config, Path(tmp), progress=False)
        build_wall, build_cpu = time.perf_counter() - start, time.process_time() - cpu
        workers_cpu = _children_cpu() - workers
        specs = configs_from_card(out / "README.md")
        texts = []
        for row in pool_rows(out, specs):
            for part in ("corpus", "queries"):
                texts += read_config(out, specs[f"{row['pool']}-{part}"])["text"]
    threads = os.cpu_count() or 1
    start = time.perf_counter()
    tokens = sum(counter.count_many(texts, num_threads=threads))
    floor = time.perf_counter() - start
    print(f"output: {len(texts)} texts, {tokens / 1e6:.1f} M tokens")
    print(f"one tokenisation pass ({threads} threads): {floor:.1f} s")
    print(f"build: {build_wall:.1f} s wall, {build_cpu:.1f} s CPU (this process) + {workers_cpu:.1f} s CPU "
          "(its worker processes)")
    print(f"ratio: {build_wall / floor:.1f}x the pass (target <= 3x)")


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (the build's forked workers)."""
    times = os.times()
    return times.children_user + times.children_system


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
