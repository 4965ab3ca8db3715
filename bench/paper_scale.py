"""Every builder at the paper's size: wall time, CPU, peak memory, output bytes, load and validate time.

Sources are the builders' own fixture generators (`builders/_<name>_fixtures.py`) run at the size
of the real release, except ActivityNet, whose real `val_1.json` (../shared/scale) is used as
published, over generated clips of each annotated duration:

    hotpotqa     7,405 questions (the dev set), WikiText-style padding articles
    govreport    19,000 reports (GovReport: 19,466), 380 subjects whose reports share their terms
    mmlongbench  135 PDFs of 30-64 pages (47 on average, as MMLongBench-Doc)
    mmdocrag     4,000 questions with their quote images (MMDocRAG's JSONL)
    activitynet  4,917 videos of val_1.json, one generated clip per video at its annotated duration
    youkudc      3,000 videos in the release layout (an assumed size: the YoukuDC test split's count is
                 not recorded here) of 2-3 minutes (the fixture's events stretched 8x), captions
                 translated by the loopback fake LLM

Each builder is first built at 1/8 of that size (the reference), then at the size asked for, each
build in its own process (peak RSS = the largest of it and its workers; CPU = its own and its
workers'). The growth line compares the time ratio with the source ratio: with the paper's query
caps the pools stop growing, so time must grow no faster than the sources (exponent <= 1; on a
shared machine read the ratios, not the seconds). Every output is then read back through
`datasets.load_dataset` (every config) and `mmle validate`, each timed in its own process.

Video clips are 64x48 noise at 1 FPS (4 tokens a frame, not the 240 of a 640x360 frame), so the
video builders get the paper's lengths scaled by 4/240: the same frames per run, the same pools,
much smaller image bytes. Goal: every output readable, peak RSS <= 3 GB per builder.

    python bench/paper_scale.py --scale 0.1 --builders govreport hotpotqa    # a short run
    make bench-scale                                                          # everything, full size
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCALE_DATA = Path(os.environ.get("MMLE_SHARED_SCALE", REPO.parent / "shared" / "scale"))
PAPER_SIZE = {"hotpotqa": 7405, "govreport": 19000, "mmlongbench": 135, "mmdocrag": 4000, "activitynet": 4917,
              "youkudc": 3000}
UNIT = {"hotpotqa": "questions", "govreport": "reports", "mmlongbench": "documents", "mmdocrag": "questions",
        "activitynet": "videos", "youkudc": "videos"}
PAPER_LENGTHS = (8192, 16384, 32768)
CLIP_SIZE = (64, 48)  # width, height of the generated clips
PAPER_FRAME_TOKENS = 240  # a 640x360 frame, the video builders' default frame budget
YOUKU_STRETCH = 8.0  # the fixture's 15-22 s clips made 2-3 minutes long, so the 16K and 32K bands can fill

MEASURED = textwrap.dedent("""
    import json, resource, sys, time
    sys.path.insert(0, {repo!r})
    start = time.perf_counter()
    exec({code!r})
    wall = time.perf_counter() - start
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    print("MEASURED=" + json.dumps({{"wall_s": wall, "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage),
                                    "peak_mb": max(u.ru_maxrss for u in usage) / 1024}}))
""")


FAILED_STEPS = Path(tempfile.gettempdir()) / "mmle-paper-scale-failures"  # outlives the run's work folder


def measure(code: str, timeout: float, step: str = "step") -> dict:
    """Run ``code`` in a fresh interpreter: its wall and CPU time and peak RSS, or why it failed (the
    last line of its error output; the whole of it is kept in FAILED_STEPS/<step>.stderr)."""
    try:
        proc = subprocess.run([sys.executable, "-c", MEASURED.format(repo=str(REPO), code=textwrap.dedent(code))],
                              capture_output=True, text=True, cwd=REPO, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        return {"error": f"over the time limit ({timeout:.0f} s)"}
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MEASURED=")), None)
    if proc.returncode or line is None:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        FAILED_STEPS.mkdir(exist_ok=True)
        kept = FAILED_STEPS / f"{step}.stderr"
        kept.write_text(proc.stderr, encoding="utf-8")
        return {"error": f"exit {proc.returncode}: {tail[:300]} (all of it: {kept})"}
    return {**json.loads(line.split("=", 1)[1]), "stdout": proc.stdout}


# -- sources: the fixture generators at scale ------------------------------------------------------

def video_lengths() -> tuple[int, ...]:
    """The paper's lengths in tokens of the generated clips' frames (same frames per run)."""
    from mmlongembed.core.tokens import image_tokens

    per_frame = image_tokens(CLIP_SIZE[1], CLIP_SIZE[0])
    return tuple(math.ceil(n * per_frame / PAPER_FRAME_TOKENS) for n in PAPER_LENGTHS)


def write_sources(name: str, root: Path, n: int, clip_sizes: tuple = (CLIP_SIZE,)) -> str:
    """Write ``n`` units of ``name``'s sources under ``root``; the config (Python source) to build them.
    ``clip_sizes``: the generated ActivityNet clips' (width, height), one drawn per video (real
    videos come at several resolutions, so their frames hold different token counts)."""
    if name == "hotpotqa":
        from builders._hotpotqa_fixtures import write_hotpotqa_sources

        # paragraphs that name their subject in most sentences, as Wikipedia's do: without them no
        # sentence but the evidence carries a question's words, and the lexical tier has no positive
        write_hotpotqa_sources(root, n_instances=n, n_articles=max(50, n // 4), subject_share=0.8)
        return f"sources={str(root)!r}"
    if name == "govreport":
        from builders._govreport_fixtures import write_govreport_jsonl

        # reports of one subject share its terms, as GovReport's do (one per 50 reports): without
        # them no donor could give a lexical-tier variant back its summary's words
        write_govreport_jsonl(root / "govreport" / "reports.jsonl", n_reports=n, subjects=max(1, n // 50))
        return f"sources={str(root)!r}"
    if name == "mmlongbench":
        from builders._mmlongbench_fixtures import write_paged_sources

        write_paged_sources(root, n_documents=n, pages=(30, 64), sidecar=0)
        return f"sources={str(root)!r}"
    if name == "mmdocrag":
        from builders._mmdocrag_fixtures import write_mmdocrag_jsonl

        write_mmdocrag_jsonl(root, n_documents=max(1, n // 4), records_per_document=4)
        return f"sources={str(root)!r}"
    lengths = video_lengths()
    frames = f"frame_store={str(root / 'frame-store')!r}, lengths={lengths!r}"
    if name == "activitynet":
        write_activitynet(root, n, clip_sizes)
        return f"sources={str(root)!r}, {frames}"
    from builders._temporal_fixtures import write_temporal_sources

    translations = write_temporal_sources(root / "youkudc", n_videos=n, language="zh", layout="youku",
                                          stretch=YOUKU_STRETCH, fps=1, audio=False)
    (root / "translations.json").write_text(json.dumps(translations, ensure_ascii=False), encoding="utf-8")
    return (f"sources={str(root / 'youkudc')!r}, {frames}, llm='openai', llm_model='fake-model', "
            f"llm_cache={str(root / 'llm-cache')!r}, llm_backoff=0.01, llm_base_url=SERVER.url")


def write_activitynet(root: Path, n: int, clip_sizes: tuple = (CLIP_SIZE,)) -> None:
    """The real val_1.json's first ``n`` videos (in id order) with a generated clip of each annotated
    duration (1 FPS, no audio), each at one of ``clip_sizes`` (a seeded draw per video)."""
    from mmlongembed.core.rng import derive_rng
    from mmlongembed.testing import mark_synthetic, write_test_video

    path = SCALE_DATA / "activitynet_captions" / "val_1.json"
    if not path.is_file():
        sys.exit(f"the real ActivityNet annotations are not at {path}; set MMLE_SHARED_SCALE")
    annotations = json.loads(path.read_text(encoding="utf-8"))
    chosen = {video: annotations[video] for video in sorted(annotations)[:n]}
    (root / "activitynet_captions").mkdir(parents=True)
    (root / "activitynet_captions" / "val_1.json").write_text(json.dumps(chosen), encoding="utf-8")
    for k, (video, entry) in enumerate(chosen.items()):
        size = clip_sizes[int(derive_rng(k, "clip-size").integers(len(clip_sizes)))]
        write_test_video(root / "videos" / f"{video}.mp4", entry["duration"], seed=k, fps=1, size=tuple(size),
                         audio=False)
    mark_synthetic(root, "SYNTHETIC clips (noise) under the real ActivityNet Captions val_1 annotations: a "
                         "paper-scale benchmark run (bench/paper_scale.py). Never publish a build made from them.")


# -- one builder: sources, build, read back --------------------------------------------------------

BUILD = """
    from mmlongembed.build.run import run_build
    from mmlongembed.core.builder import get_builder
    if {name!r} == "youkudc":
        import json
        from mmlongembed.llm.fake_captions import start_caption_server
        SERVER = start_caption_server(json.loads(open({translations!r}, encoding="utf-8").read()))
    builder = get_builder({name!r})
    out = run_build(builder, builder.config_class({config}), {out!r}, progress=False)
    print("OUT=" + str(out))
"""

LOAD = """
    import datasets
    from mmlongembed.output.layout import configs_from_card
    rows = 0
    for spec in configs_from_card(__import__("pathlib").Path({out!r}) / "README.md").values():
        rows += len(datasets.load_dataset({out!r}, spec.name, split="test", cache_dir={cache!r}))
    print("ROWS", rows)
"""

VALIDATE = """
    from mmlongembed.build.validate import validate_build
    result = validate_build(__import__("pathlib").Path({out!r}))
    if result.problems:
        raise SystemExit(f"{{len(result.problems)}} problems, first: {{result.problems[0]}}")
"""


def run_one(name: str, n: int, work: Path, timeout: float, clip_sizes: tuple = (CLIP_SIZE,)) -> dict:
    """Generate, build, load and validate ``name`` at ``n`` units; the measured figures."""
    root = work / f"{name}-{n}"
    generated = measure(f"""
        import json
        from bench.paper_scale import write_sources
        print("CONFIG=" + json.dumps(write_sources({name!r}, __import__("pathlib").Path({str(root / 'src')!r}), {n},
                                                 {tuple(clip_sizes)!r})))
    """, timeout, f"{name}-{n}-sources")
    if "error" in generated:
        return {"n": n, "error": f"sources: {generated['error']}"}
    config = json.loads(next(x for x in generated["stdout"].splitlines() if x.startswith("CONFIG="))[7:])
    build = measure(BUILD.format(name=name, config=config, out=str(root / "out"),
                                 translations=str(root / "src" / "translations.json")), timeout, f"{name}-{n}-build")
    result = {"n": n, "generate_s": generated["wall_s"], "config": config,
              **{k: v for k, v in build.items() if k != "stdout"}}
    if "error" in build:
        return result
    out = next(x for x in build["stdout"].splitlines() if x.startswith("OUT="))[4:]
    result["bytes"] = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    result["queries"] = sum(p["queries"] for p in manifest["pools"])
    result["storage"] = manifest.get("storage") or {}
    result["audit"] = {pool: audit.get("failing", []) for pool, audit in manifest.get("label_free_audit", {}).items()}
    loaded = measure(LOAD.format(out=out, cache=str(root / "hf-cache")), timeout, f"{name}-{n}-load")
    checked = measure(VALIDATE.format(out=out), timeout, f"{name}-{n}-validate")
    result["load"] = loaded.get("error") or f"{loaded['wall_s']:.1f} s, {loaded['peak_mb']:.0f} MB"
    result["validate"] = checked.get("error") or f"{checked['wall_s']:.1f} s, {checked['peak_mb']:.0f} MB"
    return result


def line(name: str, r: dict) -> str:
    from mmlongembed.output.writer import storage_ratios

    head = f"{name:12s} {r['n']:6d} {UNIT[name]:9s}"
    if "wall_s" not in r:
        return f"{head} FAILED {r['error']}"
    return (f"{head} gen {r['generate_s']:7.1f} s | build {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU "
            f"{r['peak_mb']:6.0f} MB peak | {r['queries']:5d} queries {r['bytes'] / 2**20:8.1f} MiB | "
            f"load_dataset {r['load']} | validate {r['validate']} | storage: {storage_ratios(r['storage'])} | "
            f"{audit_summary(r['audit'])}")


def audit_summary(audit: dict) -> str:
    """The label-free audit's verdict on a build's pools: each rule that finds positives above chance."""
    failing = [f"{pool}: {f['rule']} P@1 {f['p_at_1']:.2f} vs {f['chance']:.2f} (p {f['p_value']:.2g})"
               for pool, rules in sorted(audit.items()) for f in rules]
    return f"audit: {len(audit)} pools, " + ("none fails" if not failing else "FAILING " + "; ".join(failing))


def growth(name: str, reference: dict, full: dict) -> str:
    if "wall_s" not in reference or "wall_s" not in full or full["n"] == reference["n"]:
        return f"{name:12s} growth: not measured"
    size, time = full["n"] / reference["n"], full["wall_s"] / reference["wall_s"]
    exponent = math.log(time) / math.log(size)
    verdict = "ok" if exponent <= 1.15 else "FASTER THAN LINEAR"
    memory = "ok" if full["peak_mb"] <= 3072 else "OVER 3 GB"
    return (f"{name:12s} growth: sources x{size:.1f}, build time x{time:.2f} (exponent {exponent:.2f}, target <= 1, "
            f"{verdict}); projection from the reference {reference['wall_s'] * size:.0f} s, measured "
            f"{full['wall_s']:.0f} s; peak RSS {full['peak_mb']:.0f} MB ({memory})")


def tier_cost(name: str, full: dict, work: Path, timeout: float) -> str:
    """The lexically matched tier's cost (issue 37: at most 1.3x): ``full``'s build against one of
    the same sources without the tier, measured now."""
    from mmlongembed.core.builder import get_builder

    if "lexical_tier" not in {f.name for f in dataclasses.fields(get_builder(name).config_class)}:
        return f"{name:12s} lexical tier: this builder has none"
    if "cpu_s" not in full:
        return f"{name:12s} lexical tier: not measured (the build failed)"
    without = measure(BUILD.format(name=name, config=full["config"] + ", lexical_tier=False",
                                   out=str(work / f"{name}-{full['n']}" / "out-without-tier"), translations=""),
                      timeout, f"{name}-{full['n']}-without-tier")
    if "error" in without:
        return f"{name:12s} lexical tier: the build without it failed: {without['error']}"
    ratio = full["cpu_s"] / without["cpu_s"]
    return (f"{name:12s} lexical tier: build {full['cpu_s']:.1f} s CPU with it, {without['cpu_s']:.1f} s without: "
            f"x{ratio:.2f} (target <= 1.3, {'ok' if ratio <= 1.3 else 'OVER'}); wall {full['wall_s']:.1f} s against "
            f"{without['wall_s']:.1f} s; peak {full['peak_mb']:.0f} MB against {without['peak_mb']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--scale", type=float, default=1.0, help="share of the paper's size to build (default 1.0)")
    parser.add_argument("--builders", nargs="+", choices=tuple(PAPER_SIZE), default=list(PAPER_SIZE),
                        help="which builders to run (default: all six)")
    parser.add_argument("--reference", type=int, default=8,
                        help="the reference build is this many times smaller (default 8; 1 skips it; so does a "
                             "size of 4 units or fewer)")
    parser.add_argument("--timeout", type=float, default=5400, help="time limit per step in seconds (default 5400)")
    parser.add_argument("--work", type=Path, default=None, help="where to write sources and builds (made if missing; "
                        "default: a temporary directory, removed at the end)")
    parser.add_argument("--clip-sizes", nargs="+", default=[f"{CLIP_SIZE[0]}x{CLIP_SIZE[1]}"], metavar="WxH",
                        help="the generated ActivityNet clips' sizes, one drawn per video (default "
                             f"{CLIP_SIZE[0]}x{CLIP_SIZE[1]}); several sizes give frames of several token counts, "
                             "as real videos do (the audit's odd-one-out rule, issue 37)")
    parser.add_argument("--tier-cost", action="store_true",
                        help="also build each builder that has a lexically matched tier without it, at the full "
                             "size, and print what the tier costs (CPU time with it / without it)")
    args = parser.parse_args()
    try:
        clip_sizes = tuple(tuple(int(x) for x in size.lower().split("x")) for size in args.clip_sizes)
    except ValueError:
        parser.error(f"--clip-sizes: expected WxH, e.g. 64x48; got {' '.join(args.clip_sizes)}")
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mmle-scale-", dir=args.work) as tmp:
        for name in args.builders:
            n = max(4, round(PAPER_SIZE[name] * args.scale))
            reference_n = max(4, n // args.reference)  # at n itself it would find the build up to date
            reference = run_one(name, reference_n, Path(tmp), args.timeout, clip_sizes) if reference_n < n else None
            if reference:
                print(line(name, reference) + "  (reference)", flush=True)
            full = run_one(name, n, Path(tmp), args.timeout, clip_sizes)
            print(line(name, full), flush=True)
            if reference:
                print(growth(name, reference, full), flush=True)
            if args.tier_cost:
                print(tier_cost(name, full, Path(tmp), args.timeout), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
