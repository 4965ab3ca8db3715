"""Scoring throughput on CPU with a tiny model of the real architecture (`make bench-score`).

    .venv/bin/python bench/score_throughput.py [--dataset DIR] [--family qwen2_vl] [--items 24]

Default dataset: the sample release, built from ../shared/data into a temporary folder
(`mmle build mmlongembed --sources ../shared/data --exclude youkudc,activitynet`). Prints, each
against its reference measured in the same run:

1. padded / own tokens of every pool's inputs in the model's own tokens: today's calls (16 inputs in
   pool order) against token budgets (longest first, packed up to the budget). Goal <= 1.05.
2. input assembly (tokens, template, truncation, image resize and pixels) in inputs/s with 1 and 2
   loader workers, on an image-heavy pool (MMLongBench pages) and a text pool. Goal: 2 workers >= 1.7x
   one on a 2-core machine. Also the seconds per input, for the run plan in docs/MODELS.md (the loader
   workers that keep a GPU busy), and how fast this machine faults fresh memory in, which bounds pages.
3. end-to-end `mmle score` on the longest of those pools (or --end-to-end-pools): own tokens per wall
   second of a plain run, with 2 loader workers, and on Ray with 2 local actors. Goal: Ray within 1.3x of the plain run's wall time.
Asserts nothing: the figures depend on the machine, the ratios are what to read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROFILE_OF = {"qwen2_vl": "gme-qwen2-vl-2b", "qwen3_vl": "qwen3-vl-2b", "qwen2_5_vl": "jina-embeddings-v4"}
FIXED_CALL = 16  # inputs per call before token budgets: `--batch-size 16` in pool order
BUDGETS = (16384, 65536)


def sample_release(directory: Path) -> Path:
    command = [str(Path(sys.executable).with_name("mmle")), "build", "mmlongembed", "--sources",
               str(ROOT.parent / "shared" / "data"), "--exclude", "youkudc,activitynet", "--output", str(directory)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return directory / "mmlongembed"


def tiny_model(family: str, directory: Path):
    from harness.models.adapters import RunSettings
    from harness.models.profile_model import ProfileModel
    from harness.models.tiny_models import make_tiny
    from harness.profiles.catalogue import get_profile

    profile = dataclasses.replace(get_profile(PROFILE_OF[family]), family=family, runnable=True)
    path = make_tiny(directory / family, family)
    return ProfileModel(profile, RunSettings(progress=False), str(path)), profile.name, path


def side_items(model, pool, side: str, limit: int | None = None):
    from harness.scoring.embedding import formatted

    model.begin_pool(pool)
    items = [formatted(model, side, item) for batch in pool.iter_side(side, 32) for item in batch]
    return items[:limit] if limit else items


def padding(model, benchmark) -> None:
    """Padded / own tokens over every pool and side: fixed calls in pool order against token budgets."""
    from harness.scoring.batching import length_order, pack, padded_tokens

    own, fixed, budgeted = 0, 0, dict.fromkeys(BUDGETS, 0)
    for info in benchmark.pools:
        pool = benchmark.open_pool(info)
        for side in ("queries", "candidates"):
            lengths = [len(model.encode_item(item, with_images=False).ids) for item in side_items(model, pool, side)]
            own += sum(lengths)
            fixed += sum(padded_tokens(lengths[i:i + FIXED_CALL]) for i in range(0, len(lengths), FIXED_CALL))
            ordered = length_order(range(len(lengths)), lengths)
            for budget in BUDGETS:
                budgeted[budget] += sum(padded_tokens([lengths[i] for i in call])
                                        for call in pack(ordered, lambda i: lengths[i], budget, FIXED_CALL))
    print(f"1. padding over {len(benchmark.pools)} pools, {own:,} own tokens (goal <= 1.05)")
    print(f"   fixed {FIXED_CALL} per call, pool order: padded / own {fixed / own:.3f}  (reference)")
    for budget, padded in budgeted.items():
        print(f"   --batch-tokens {budget:>6}, longest first: padded / own {padded / own:.3f}  "
              f"({fixed / padded:.2f}x fewer padded tokens)")


def assembly(model, pool, items: int) -> dict[int, float]:
    """Inputs/s of the loader with 1 and 2 workers on a pool's candidates (workers started and warm first)."""
    from harness.scoring.cache import input_key
    from harness.scoring.loader import InputLoader

    candidates = side_items(model, pool, "candidates", items)
    tasks = [(i, input_key(item), item, 0) for i, item in enumerate(candidates)]
    rates = {}
    for workers in (0, 1, 2):
        loader = InputLoader(model.preparer() if workers else model, workers)
        try:
            list(loader.prepared(tasks[:2], model.preparer_state()))  # warm: workers started, caches filled
            start = time.perf_counter()
            tokens = sum(p.length for p in loader.prepared(tasks, model.preparer_state()))  # none kept: ~0.5 GB each
            rates[workers] = len(tasks) / (time.perf_counter() - start)
        finally:
            loader.close()
    rates["tokens"] = tokens / len(tasks)
    return rates


def first_touch() -> tuple[float, float]:
    """GB/s of writing 512 MiB into memory fresh from the system (each page faulted in) and into the same
    memory again: a page input's image processor writes a few times its pixel bytes into fresh arrays,
    so where first touch is slow (a sandboxed or virtualised host) it bounds the pages' assembly."""
    import numpy as np

    source = np.ones(2 ** 27, dtype=np.float32)
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        target = np.empty_like(source)  # above malloc's mmap threshold: fresh pages every time
        np.copyto(target, source)
        fresh = time.perf_counter() - start
        start = time.perf_counter()
        np.copyto(target, source)
        rates.append((source.nbytes / fresh / 1e9, source.nbytes / (time.perf_counter() - start) / 1e9))
        del target
    return sorted(r[0] for r in rates)[1], sorted(r[1] for r in rates)[1]  # the medians


def run_plan(family: str, seconds_per_token: dict) -> None:
    """docs/MODELS.md's run plan for the family's models: one worker's assembly seconds per 8K and 32K input
    (text; pages, from the pool nearest that length) against the projected forward seconds
    (bench/profile_throughput.py), and the loader workers that keep a GPU busy on pages."""
    import math

    from bench.profile_throughput import REAL, forward_seconds
    from harness.profiles.catalogue import get_profile

    def at(source: str, tokens: int) -> float:
        nearest = min((key for key in seconds_per_token if key[0] == source), key=lambda key: abs(key[1] - tokens))
        return seconds_per_token[nearest] * tokens

    text, pages = [at("govreport", n) for n in (8192, 32768)], [at("mmlongbench", n) for n in (8192, 32768)]
    print(f"   run plan ({family}): one worker's seconds per input, text 8K {text[0]:.3f}, 32K {text[1]:.3f}; "
          f"pages 8K {pages[0]:.2f}, 32K {pages[1]:.2f}")
    for name in (n for n in REAL if get_profile(n).family == family):
        forward = forward_seconds(name)
        workers = [math.ceil(p / f) for p, f in zip(pages, forward)]
        print(f"   | {name} | {forward[0]:.2f} | {forward[1]:.2f} | {text[0]:.3f} / {text[1]:.3f} | "
              f"{pages[0]:.2f} / {pages[1]:.2f} | {workers[0]} / {workers[1]} |")


def end_to_end(dataset: Path, pools: list[str], name: str, path: Path, workdir: Path) -> dict[str, tuple]:
    from harness.cli import main as score

    runs = {"plain": [], "2 loader workers": ["--loader-workers", "2"],
            "ray, 2 actors": ["--executor", "ray", "--replicas", "2"]}
    out = {}
    for label, extra in runs.items():
        output = workdir / label.replace(" ", "_").replace(",", "")
        start = time.perf_counter()
        score(["--dataset", str(dataset), "--pools", *pools, "--model", name, "--model-path", f"{name}={path}",
               "--no-cache", "--quiet", "--no-plots", "--bootstrap", "10", "--output", str(output), *extra])
        wall = time.perf_counter() - start
        rows = json.loads((output / "results.json").read_text())["results"]
        out[label] = (sum(r["throughput"]["own_tokens"] for r in rows), wall)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=None, help="a built release (default: build the sample one)")
    parser.add_argument("--family", default="qwen2_vl", choices=sorted(PROFILE_OF), help="tiny model's architecture")
    parser.add_argument("--items", type=int, default=24, help="candidates per pool in the assembly measurement")
    parser.add_argument("--end-to-end-pools", nargs="+", default=None, metavar="PATTERN",
                        help="pools of the end-to-end runs (default the longest MMLongBench and GovReport pools "
                             "measured); more pools amortise Ray's start over more work")
    parser.add_argument("--parts", nargs="+", default=["padding", "assembly", "end-to-end"],
                        choices=("padding", "assembly", "end-to-end"), help="what to measure (default all)")
    args = parser.parse_args()
    from harness.scoring.data import Benchmark

    with tempfile.TemporaryDirectory(prefix="mmle-bench-score-") as tmp:
        workdir = Path(tmp)
        dataset = args.dataset or sample_release(workdir / "release")
        benchmark = Benchmark(str(dataset))
        model, name, path = tiny_model(args.family, workdir / "tiny")
        if "padding" in args.parts:
            padding(model, benchmark)
        # an image-heavy and a text pool at the shortest and the longest length of each: the one with the most
        # candidates there (a Hard pool holds four times an Easy one's), so the workers' start and drain weigh little
        measured = []
        for source in ("mmlongbench", "govreport"):
            pools = [p for p in benchmark.pools if p.dataset == source]
            for length in sorted({min(p.length for p in pools), max(p.length for p in pools)}):
                measured.append(max((p for p in pools if p.length == length), key=lambda p: p.n_candidates))
        if "assembly" in args.parts:
            print(f"2. assembly, inputs/s (goal: 2 workers >= 1.7x one; {os.cpu_count()} cores here)")
            seconds_per_token = {}
            for info in measured:
                rates = assembly(model, benchmark.open_pool(info), args.items)
                seconds_per_token[(info.dataset, info.length)] = 1 / rates[1] / rates["tokens"]
                print(f"   {info.name:<24} {rates['tokens']:>6,.0f} tokens: on the model's thread {rates[0]:6.2f}/s "
                      f"({1 / rates[0]:.3f} s per input), 1 worker {rates[1]:6.2f}/s, 2 workers {rates[2]:6.2f}/s: "
                      f"{rates[2] / rates[1]:.2f}x one")
            run_plan(args.family, seconds_per_token)
            fresh, touched = first_touch()
            print(f"   memory here: {fresh:.2f} GB/s into fresh pages, {touched:.2f} GB/s into touched ones "
                  f"({touched / fresh:.0f}x): a page input's assembly writes ~3x its pixel bytes into fresh arrays")
        if "end-to-end" in args.parts:
            runs = end_to_end(dataset, args.end_to_end_pools or [measured[1].name, measured[-1].name], name, path,
                              workdir)
            plain_tokens, plain_wall = runs["plain"]
            print("3. end to end, own tokens per wall second (goal: Ray within 1.3x of the plain run's wall time)")
            for label, (tokens, wall) in runs.items():
                print(f"   {label:<18} {tokens:>9,} tokens in {wall:6.1f} s: {tokens / wall:8.0f} tokens/s, "
                      f"wall {wall / plain_wall:.2f}x plain")
        model.close()


if __name__ == "__main__":
    main()
