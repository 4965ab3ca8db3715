"""The whole benchmark's build against its components built alone, and how a build's cost grows.

1. Release: `mmle build mmlongembed` from the sample data (plus demo video sources, if given)
   against the sum of its component builds run alone with the same options (target <= 1.1x: no
   work done twice), then the same command again with nothing changed (target < 10% of the
   first run; needs a clean git checkout, since the up-to-date rule compares toolkit commits).
2. Growth: HotpotQA and GovReport built from 1x, 2x, 4x and 8x their sample (records replicated
   under new ids, every word of four letters or more rotated through the alphabet by the replica
   number, so the copies are distinct documents of the same shape), with the builders' per-pool
   query caps (the paper's), so the corpus grows and the pools stop growing at their cap: wall
   time and peak memory per size, and the fitted growth exponent of time (log-log slope; target
   <= 1.15); memory should follow the largest pool, not the corpus. `--uncapped` lifts the caps,
   so that the pools grow with the sample too (each query ranks its whole pool: quadratic).

Every measurement runs in its own process (peak memory = the largest of it and its workers), one
after another, in the same run: the ratios are what to read on a shared machine, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MMLE_SHARED_DATA", REPO.parent / "shared" / "data"))

MEASURED = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, {repo!r})
    start = time.perf_counter()
    exec({code!r})
    wall = time.perf_counter() - start
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print("MEASURED=" + json.dumps({{"wall_s": wall, "peak_mb": peak / 1024}}))
""")


def measure(code: str, label: str) -> dict:
    """Run ``code`` in a fresh interpreter; its wall time and peak resident memory."""
    proc = subprocess.run([sys.executable, "-c", MEASURED.format(repo=str(REPO), code=textwrap.dedent(code))],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MEASURED=")), None)
    if proc.returncode or line is None:
        sys.exit(f"{label} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(line.split("=", 1)[1])
    result["stdout"] = proc.stdout
    print(f"  {label:40s} {result['wall_s']:8.1f} s  {result['peak_mb']:8.0f} MB", flush=True)
    return result


# -- 1. the release against its components ---------------------------------------------------------

def release_bench(sources: list[str], exclude: str, settings: list[str], work: Path) -> None:
    from mmlongembed.release.plan import MMLongEmbedConfig, plan
    from mmlongembed.output.manifest import toolkit_identity

    if toolkit_identity()["git_dirty"] is not False:
        print("note: the checkout has uncommitted changes: the second run cannot find anything up to date")

    def config_code(frames: str) -> str:
        sets = [*settings, f"activitynet.frame_store={frames}"]
        return (f"from mmlongembed.release.composite import MMLongEmbedConfig\n"
                f"config = MMLongEmbedConfig(sources={tuple(sources)!r}, exclude={exclude!r}, set={tuple(sets)!r})\n")

    config = MMLongEmbedConfig(sources=tuple(sources), exclude=exclude, set=tuple(settings))
    release_plan = plan(config)
    print(f"release: {', '.join(p.builder.name for p in release_plan.to_build)}"
          + (f" (absent: {', '.join(release_plan.absent)})" if release_plan.absent else ""))
    alone = {}
    for item in release_plan.to_build:  # each component alone, with the options the release gives it
        name = item.builder.name
        alone[name] = measure(config_code(str(work / "frames-alone")) + textwrap.dedent(f"""
            from mmlongembed.build.run import run_build
            from mmlongembed.release.plan import plan
            item = next(p for p in plan(config).to_build if p.builder.name == {name!r})
            run_build(item.builder, item.config, {str(work / 'alone')!r}, progress=False)
        """), f"{name} alone")
    whole_code = config_code(str(work / "frames-release")) + textwrap.dedent(f"""
        from mmlongembed.build.run import run_build
        from mmlongembed.core.builder import get_builder
        run_build(get_builder("mmlongembed"), config, {str(work / 'release')!r}, progress=False)
    """)
    first = measure(whole_code, "release, first run")
    again = measure(whole_code, "release, again (nothing changed)")
    total = sum(r["wall_s"] for r in alone.values())
    largest = max(r["peak_mb"] for r in alone.values())
    print(f"release / sum of components alone: {first['wall_s']:.1f} / {total:.1f} s = "
          f"{first['wall_s'] / total:.2f}x (target <= 1.1x)")
    print(f"second run / first run: {again['wall_s']:.1f} / {first['wall_s']:.1f} s = "
          f"{100 * again['wall_s'] / first['wall_s']:.1f}% (target < 10%)")
    print(f"peak memory: release {first['peak_mb']:.0f} MB, largest component alone {largest:.0f} MB "
          f"({first['peak_mb'] / largest:.2f}x)")


# -- 2. growth --------------------------------------------------------------------------------------

def _rotate(text: str, k: int) -> str:
    """Every word of four letters or more rotated k places through the alphabet."""
    def word(match) -> str:
        return "".join(chr((ord(c) - base + k) % 26 + base) if c.isascii() and c.isalpha() else c
                       for c in match.group(0) for base in [ord("A") if c.isupper() else ord("a")])
    import re

    return re.sub(r"[A-Za-z]{4,}", word, text) if k else text


def write_hotpotqa(sample: Path, out: Path, factor: int) -> None:
    records = [json.loads(line) for path in sorted((sample / "hotpotqa").glob("*.jsonl"))
               for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    (out / "hotpotqa").mkdir(parents=True)
    with open(out / "hotpotqa" / "replicated.jsonl", "w", encoding="utf-8") as handle:
        for k in range(factor):
            for r in records:
                copy = dict(r, _id=f"{r['_id']}-r{k}", question=_rotate(r["question"], k),
                            answer=_rotate(r["answer"], k),
                            supporting_facts=[[_rotate(t, k), i] for t, i in r["supporting_facts"]],
                            context=[[_rotate(t, k), [_rotate(s, k) for s in sentences]]
                                     for t, sentences in r["context"]])
                handle.write(json.dumps(copy, ensure_ascii=False) + "\n")
    (out / "haystack_text").mkdir()
    (out / "haystack_text" / "wikitext-2-raw").symlink_to(sample / "haystack_text" / "wikitext-2-raw")


def write_govreport(sample: Path, out: Path, factor: int) -> None:
    from mmlongembed.readers.govreport import read_local_reports
    from mmlongembed.core.builder import BuildReport

    reports = list(read_local_reports(sample / "govreport", BuildReport(progress=False)))
    (out / "govreport").mkdir(parents=True)
    with open(out / "govreport" / "replicated.jsonl", "w", encoding="utf-8") as handle:
        for k in range(factor):
            for r in reports:
                handle.write(json.dumps({"id": f"{r.id}-r{k}", "report": _rotate(r.report, k),
                                         "summary": _rotate(r.summary, k)}, ensure_ascii=False) + "\n")


def growth_bench(sample: Path, factors: list[int], lengths: list[int], work: Path, uncapped: bool = False) -> None:
    writers = {"hotpotqa": write_hotpotqa, "govreport": write_govreport}
    for name, write in writers.items():
        rows = []
        for factor in factors:
            sources = work / f"{name}-{factor}x"
            write(sample, sources, factor)
            result = measure(f"""
                from mmlongembed.build.run import run_build
                from mmlongembed.core.builder import get_builder
                builder = get_builder({name!r})
                config = builder.config_class(sources={str(sources)!r}, lengths={tuple(lengths)!r})
                if {uncapped!r}:
                    config.max_queries_per_pool = 10**6
                out = run_build(builder, config, {str(work / f'{name}-{factor}x-out')!r}, progress=False)
                import json
                pools = json.loads((out / "manifest.json").read_text())["pools"]
                print("QUERIES", sum(p["queries"] for p in pools), max(p["candidates"] for p in pools))
            """, f"{name} {factor}x")
            queries = next((x.split()[1:] for x in result["stdout"].splitlines() if x.startswith("QUERIES")), ["?", "?"])
            print(f"    {queries[0]} queries, largest pool {queries[1]} candidates")
            rows.append((factor, result))
        xs = [math.log(f) for f, _ in rows]
        ys = [math.log(r["wall_s"]) for _, r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"{name}: time grows as size^{slope:.2f} (target <= 1.15); peak memory "
              + ", ".join(f"{f}x {r['peak_mb']:.0f} MB" for f, r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", nargs="+", default=[str(SHARED)],
                        help="source roots of the release (the sample data, then e.g. demo video sources)")
    parser.add_argument("--exclude", default="youkudc,activitynet",
                        help="components to leave out of the release (default: the video tasks, which have no "
                             "sample sources)")
    parser.add_argument("--set", nargs="*", default=[], help="component options, as `mmle build mmlongembed --set`")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 2, 4, 8], help="sample sizes of the growth bench")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192], help="pool lengths of the growth bench")
    parser.add_argument("--uncapped", action="store_true", help="growth bench: lift the per-pool query caps")
    parser.add_argument("--only", choices=("release", "growth"), default=None, help="run one part only")
    args = parser.parse_args()
    if not (SHARED / "hotpotqa").is_dir():
        sys.exit(f"the sample data is not at {SHARED}; set MMLE_SHARED_DATA")
    with tempfile.TemporaryDirectory(prefix="mmle-bench-") as tmp:
        if args.only in (None, "release"):
            release_bench(args.sources, args.exclude, args.set, Path(tmp) / "release")
        if args.only in (None, "growth"):
            growth_bench(SHARED, args.factors, args.lengths, Path(tmp) / "growth", args.uncapped)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
