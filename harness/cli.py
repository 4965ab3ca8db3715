"""`mmle score`: load a built benchmark, embed, score, report.

Wire it as a subcommand: `add_arguments(subparser)` then `run(args)` returns the exit code
(0: all selected pools scored; 1: some pool was skipped for a reason that counts; 2: bad input).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from pathlib import Path

from harness.report.tables import HEATMAP_METRICS
from harness.profiles.training_data import declared_training_data
from mmlongembed.core.errors import UserError, report_error
from mmlongembed.checks.summary import counted

DEFAULT_MODELS = "bm25,minilm"
KNOWN_MODALITIES = ("text", "image", "video")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.scoring.cache import add_cache_arguments

    parser.add_argument("--dataset", required=True, nargs="+",
                        help="the benchmark: a local directory (e.g. out/mmlongembed, out/govreport) or a Hub repo "
                             "at a revision or tag, repo@revision (read through datasets from the Hub at exactly "
                             "that revision, never from a cached copy; a bare name is refused); "
                             "several (space or comma separated) are scored into one report, their pool names "
                             "distinct")
    parser.add_argument("--model", action="append", default=None,
                        help="comma list of models (the option may be given again: the lists add up): a model profile's name (`mmle models`, e.g. gme-qwen2-vl-2b) | "
                             "bm25 | minilm | st:<path> | hf:<path-or-name> | "
                             "hfgen:<path-or-name> | vllm:<name> | "
                             "openai:<model>@<base_url> | doubao:<model>@<base_url> (Doubao-Seed-1.6 API, key from ARK_API_KEY) | "
                             "multivector:<path> (a local encoder's token vectors, MaxSim late interaction); "
                             "diagnostic rows: random (seeded random encoder) | length (score = candidate length) | "
                             "text-only:<model> (images removed) | shuffled-frames:<model> (frame order shuffled). "
                             f"Default {DEFAULT_MODELS!r}, where MiniLM scores only the "
                             "pools it can take (text) and its image-pool skips do not fail the run (also when the pair is given "
                             "explicitly; MiniLM alone or with other models fails on image pools)")
    parser.add_argument("--model-path", action="append", default=[], metavar="NAME=DIR",
                        help="load a model profile's weights from a local directory instead of its Hub repo "
                             "(repeatable), e.g. gme-qwen2-vl-2b=/models/gme-2b")
    parser.add_argument("--pools", nargs="+", default=["*"],
                        help="glob patterns of pool names to score (space or comma separated), default all")
    parser.add_argument("--max-queries", type=int, default=None, metavar="N",
                        help="a quick look: score a seeded sample of N queries per pool (the same N queries for "
                             "every model and run; every candidate still ranked), marked SUBSET in results.json, "
                             "table.md, the console and `mmle leaderboard`; not comparable with full runs or the paper")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="most inputs per model call; memory is bounded by the call, not the pool (default 16)")
    add_execution_arguments(parser)
    add_output_arguments(parser)
    add_cache_arguments(parser)
    parser.add_argument("--max-length", type=int, default=None,
                        help="model window in tokens (default: the model's own); longer inputs lose their middle")
    parser.add_argument("--modalities", default=",".join(KNOWN_MODALITIES),
                        help="comma list of input modalities to score (text,image,video); pools needing others are "
                             "deselected, not failures (default all)")
    parser.add_argument("--pooling", choices=("last", "mean", "cls", "boundary", "trailing", "distributed"),
                        default=None,
                        help="hf models: how token states become one vector (default last); boundary, trailing "
                             "and distributed generate evidence and read it at its boundary tokens (hfgen models, "
                             "default boundary; `last` is then the last generated token)")
    parser.add_argument("--readout-tokens", default=None,
                        help="generative readout: comma list of the boundary tokens, in order "
                             "(default <ENT>,<ATT>,<REL>,<DET>,<SUM>)")
    parser.add_argument("--readout-units", type=int, choices=(1, 3, 5, 7), default=None,
                        help="generative readout: the boundary tokens of the paper's K-unit set instead of "
                             "--readout-tokens (1: <ENT>; 3: <ENT>,<ATT>,<REL>; 7 adds <CTX>,<EMO> before <SUM>); "
                             "trailing reads the set's last token (<SUM>, or <ENT> / <REL> for K=1 / 3)")
    parser.add_argument("--readout-subset", default=None,
                        help="generative readout diagnostic (one-slot): read only these tokens (comma list)")
    parser.add_argument("--readout-drop", default=None,
                        help="generative readout diagnostic (leave-one-out): do not read these tokens (comma list)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="generative readout: most evidence tokens generated per input (default 256)")
    parser.add_argument("--instruction", default=None,
                        help="query template with {instruction} and {text} (default for hf/vllm: "
                             "'Instruct: {instruction}\\nQuery: {text}'; for st/minilm/openai: '{text}')")
    parser.add_argument("--device", default="cpu", help="torch device for st/hf models (default cpu)")
    parser.add_argument("--bootstrap", type=int, default=1000,
                        help="bootstrap resamples for the 95%% confidence intervals (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument("--heatmap-metric", choices=sorted(HEATMAP_METRICS), default="p@1",
                        help="what the needle grid's depth x length heatmaps (Figure 3) show (default p@1, "
                             "as the paper)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars, per-pool lines or results table: only the line naming what was "
                             "written (and errors)")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the run goes: its folder, and mteb's results layout beside it."""
    parser.add_argument("--output", default=None,
                        help="directory for results.json, table.md, predictions.parquet (each query's top-10 per model, "
                             "with the positive's rank and the audit's label of each pick) and the plots. Default: a "
                             "new folder for each run, results/<dataset name>/<run id> (UTC start time and models), "
                             "so no run replaces another; a folder that already holds files is refused unless "
                             "--overwrite")
    parser.add_argument("--mteb-results", default=None, metavar="DIR",
                        help="also write the run in mteb's results layout, as mteb.ResultCache does, DIR being the "
                             "root of the MTEB results repository: DIR/results/<org__model>/<revision or "
                             "no_revision_available>/MMLongEmbed<Release>.json beside model_meta.json. One task per "
                             "release scored (out/hotpotqa: MMLongEmbedHotpotqa), split test, one hf_subset per "
                             "pool, main score tie_aware_precision_at_1 (the run's P@1); pools skipped or not "
                             "measured have no entry; harness models without a Hub id are named mmle/<name>. "
                             "Refused with --max-queries (the repository takes whole pools only)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the earlier run in --output, whole: none of its files (plots of pools not "
                             "scored now included) is left beside the new run's")


def add_execution_arguments(parser: argparse.ArgumentParser) -> None:
    """How the embedding step runs: call sizes, input workers, devices, Ray, the out-of-memory test."""
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="most padded tokens per model call (inputs x the longest, in the model's own tokens); "
                             "inputs are ordered longest first and packed up to it. Default: what the model's memory "
                             "plan leaves free on the device (the weights loaded); models without one (hf:, hfgen:, "
                             "vllm:, API, sentence-transformers, MiniLM) are bounded by --batch-size alone. A call "
                             "that runs out of memory is split in two and retried, down to one input, and recorded "
                             "in results.json")
    parser.add_argument("--loader-workers", type=int, default=0,
                        help="processes assembling inputs (image decode and resize, pixels, frames, tokens, template, "
                             "truncation) ahead of the model, per device, for the model profiles (`mmle models`); "
                             "other models assemble on their own thread. 0 (default): on the model's own thread. "
                             "docs/MODELS.md's run plan says how many keep each family's GPU busy")
    parser.add_argument("--devices", default=None,
                        help="comma list of torch devices, one model replica each in its own process, sharing one "
                             "embedding cache, work split by tokens (e.g. cuda:0,cuda:1,cuda:2,cuda:3); default "
                             "--device alone")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local (default): this machine's processes; ray: the embedding step as a Ray Data job, "
                             "on the cluster at RAY_ADDRESS or a local one (docs/MODELS.md, 'Past one machine')")
    parser.add_argument("--replicas", type=int, default=None,
                        help="--executor ray: model replicas (actors); default the number of --devices (ignored by "
                             "--executor local, where --devices sets the replicas)")
    parser.add_argument("--gpus-per-replica", type=float, default=None,
                        help="--executor ray: GPUs each actor holds (default 1 when the devices are CUDA, else 0)")
    parser.add_argument("--simulate-memory-tokens", type=int, default=None,
                        help="testing the out-of-memory back-off without a GPU: a model call above this many padded "
                             "tokens fails as a device out of memory would")


def _tokens(value: str | None) -> tuple[str, ...] | None:
    return tuple(t.strip() for t in value.split(",") if t.strip()) if value else None


def _readout_tokens(args: argparse.Namespace) -> tuple[str, ...] | None:
    if args.readout_units is None:
        return _tokens(args.readout_tokens)
    if args.readout_tokens:
        raise UserError("--readout-tokens and --readout-units name the readout tokens twice: give one")
    from mmlongembed.ops.evialign import units_for

    return tuple(u.token for u in units_for(args.readout_units))


def _model_paths(values: list[str]) -> dict[str, str]:
    """--model-path NAME=DIR (repeatable) -> {profile name: directory}."""
    from harness.profiles.catalogue import get_profile

    paths = {}
    for value in values:
        name, sep, directory = value.partition("=")
        if not sep or not name.strip() or not directory.strip():
            raise UserError(f"--model-path {value!r}: expected NAME=DIR")
        paths[get_profile(name).name] = directory.strip()
    return paths


def _split(values) -> list[str]:
    return [v for value in values for v in value.replace(",", " ").split() if v]


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except UserError as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        print("interrupted: embeddings done so far are cached; run again to resume", file=sys.stderr)
        return 130


def _run(args) -> int:
    from harness.scoring.data import Benchmark
    from harness.models.adapters import RunSettings, model_kind

    modalities = _checked_modalities(args)
    log = (lambda *a, **k: None) if args.quiet else print

    started = time.perf_counter()
    for spec in _split(args.model or [DEFAULT_MODELS]):
        model_kind(spec)  # a typo is one line with the closest name, before any dataset is opened
    benchmarks = [Benchmark(ref) for ref in dict.fromkeys(_split(args.dataset))]
    if args.mteb_results:
        from harness.report.mteb_results import check_mteb_results

        check_mteb_results(Path(args.mteb_results), args.max_queries, [b.path for b in benchmarks])
    output = _output_folder(args, benchmarks)
    selections = _select(benchmarks, _split(args.pools))
    if args.max_queries is not None:
        selections = [(benchmark, [dataclasses.replace(info, query_sample=args.max_queries) for info in pools])
                      for benchmark, pools in selections]
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UserError("--max-new-tokens must be at least 1")
    settings = RunSettings(batch_size=args.batch_size, batch_tokens=args.batch_tokens,
                           loader_workers=args.loader_workers, simulate_memory_tokens=args.simulate_memory_tokens,
                           max_length=args.max_length, pooling=args.pooling,
                           instruction=args.instruction, device=_devices(args)[0], progress=not args.quiet,
                           readout_tokens=_readout_tokens(args), readout_subset=_tokens(args.readout_subset),
                           readout_drop=_tokens(args.readout_drop), max_new_tokens=args.max_new_tokens,
                           model_paths=_model_paths(args.model_path))
    models, outcome = _score_all(args, selections, settings, modalities, log)

    result, table3_cells, table4_cells = _results(args, benchmarks, models, outcome, modalities, started)
    return _write_report(args, output, result, table3_cells, table4_cells, outcome)


def _output_folder(args, benchmarks) -> Path:
    """Where this run goes (``harness.report.run_folder``), checked before anything is scored."""
    from harness.report.run_folder import check_run_output, new_run_folder

    if args.output:
        check_run_output(Path(args.output), args.overwrite)
        return Path(args.output)
    if args.overwrite:  # said so, rather than ignored: the default folder is always a new one
        raise UserError("--overwrite replaces the run in --output; without --output each run gets a new folder "
                        "and none is replaced")
    name = "+".join(Path(b.path.rstrip("/")).name or "benchmark" for b in benchmarks)
    return new_run_folder(name, dt.datetime.now(dt.timezone.utc), _split(args.model or [DEFAULT_MODELS]))


def _devices(args) -> list[str]:
    return _split([args.devices]) if args.devices else [args.device]


def _checked_modalities(args) -> set[str]:
    """The numeric options' bounds, and the modalities selected (each a known one)."""
    for option, value, least in (("--batch-size", args.batch_size, 1), ("--batch-tokens", args.batch_tokens, 1),
                                 ("--max-queries", args.max_queries, 1),
                                 ("--loader-workers", args.loader_workers, 0), ("--replicas", args.replicas, 1),
                                 ("--simulate-memory-tokens", args.simulate_memory_tokens, 1)):
        if value is not None and value < least:
            raise UserError(f"{option} must be at least {least}")
    if args.devices is not None and not _devices(args):
        raise UserError("--devices: name at least one device (e.g. cuda:0,cuda:1)")
    if args.max_length is not None and args.max_length < 16:
        raise UserError("--max-length must be at least 16")
    modalities = set(_split([args.modalities]))
    unknown = modalities - set(KNOWN_MODALITIES)
    if unknown or not modalities:
        raise UserError(f"--modalities: unknown {sorted(unknown)}; choose from {','.join(KNOWN_MODALITIES)}")
    return modalities


def _score_all(args, selections, settings, modalities: set[str], log):
    """Every selected pool of every benchmark with every model, through one embedding cache: the
    models (closed) and the outcome."""
    from harness.scoring.cache import EmbeddingCache, cache_directory
    from harness.runner import Outcome, score

    specs = _split(args.model or [DEFAULT_MODELS])
    # the default pair, whether left implicit or spelled out, lets MiniLM skip image pools without failing
    lenient = {"minilm"} if set(specs) == set(_split([DEFAULT_MODELS])) else set()
    cache = EmbeddingCache(cache_directory(args))
    models = []
    try:  # a model that cannot load closes the cache and the models loaded before it
        for spec in dict.fromkeys(specs):
            models.append(_load_with_executor(spec, settings, args, cache))
        outcome = Outcome()
        for benchmark, pools in selections:
            part = score(benchmark, pools, models, settings, cache, modalities, lenient, args.bootstrap, args.seed, log)
            outcome.results += part.results
            outcome.skipped += part.skipped
            outcome.predictions += part.predictions
    finally:
        for model in models:
            if getattr(model, "executor", None) is not None:
                model.executor.close()
            model.close()
        cache.close()
    return models, outcome


def _load_with_executor(spec: str, settings, args, cache):
    """The model a `--model` item names, with the executor `--devices` / `--executor` ask for. Several
    devices or Ray: this process only plans and reads the cache, so it loads no weights, unless the model's
    embedding step is its own (then it runs here, on the first device)."""
    from harness.execution import make_executor
    from harness.models.adapters import DenseModel, load_model

    devices = _devices(args)
    if len(devices) == 1 and args.executor == "local":
        return load_model(spec, settings)
    model = load_model(spec, dataclasses.replace(settings, load_weights=False))
    if not (isinstance(model, DenseModel) and model.runs_on_executors):
        model.close()
        if not args.quiet and isinstance(model, DenseModel):
            print(f"{spec}: its embedding step is its own, not the executors': it runs in this process on "
                  f"{settings.device}", file=sys.stderr)
        return load_model(spec, settings)
    gpus = args.gpus_per_replica if args.gpus_per_replica is not None else float(devices[0].startswith("cuda"))
    model.executor = make_executor(settings, spec, devices, args.executor, args.replicas, gpus, cache.directory)
    return model


def _results(args, benchmarks, models, outcome, modalities: set[str], started: float) -> tuple[dict, list, list]:
    """results.json's content, and the Table 3 and Table 4 cells (drawn once: table.md prints these)."""
    from harness.report import tables as reports
    from harness.report.tiers import tier_data

    from harness.report.compare import dataset_facts
    from mmlongembed.output.manifest import toolkit_identity

    datasets = [{"ref": b.ref, "path": b.path, "revision": b.revision, **dataset_facts(b.path)} for b in benchmarks]
    stats = {"n_resamples": args.bootstrap, "seed": args.seed}
    table3_cells = reports.table3_data(outcome.results, outcome.skipped, **stats)
    table4_cells = reports.table4_data(outcome.results, outcome.skipped, **stats)
    embedded = sum(r["embedded"] for r in outcome.results if r["model"] != "bm25")
    embed_seconds = sum(r["timings"]["embed_s"] for r in outcome.results if r["model"] != "bm25")
    result = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "dataset": datasets[0] if len(datasets) == 1 else {"ref": " + ".join(d["ref"] for d in datasets),
                                                            "path": None, "revision": None},
        "datasets": datasets,
        "toolkit": toolkit_identity(),
        "models": [{"spec": m.spec, "identity": m.identity(), "training_data": declared_training_data(m)}
                   for m in models],
        "settings": {"batch_size": args.batch_size, "batch_tokens": args.batch_tokens,
                     "loader_workers": args.loader_workers, "devices": _devices(args), "executor": args.executor,
                     "replicas": args.replicas, "simulate_memory_tokens": args.simulate_memory_tokens,
                     "max_length": args.max_length, "pooling": args.pooling,
                     "readout_tokens": args.readout_tokens, "readout_units": args.readout_units,
                     "readout_subset": args.readout_subset,
                     "readout_drop": args.readout_drop, "max_new_tokens": args.max_new_tokens,
                     "instruction": args.instruction, "modalities": sorted(modalities), "bootstrap": args.bootstrap,
                     "seed": args.seed, "pools": _split(args.pools), "max_queries": args.max_queries},
        "results": outcome.results,
        "skipped": outcome.skipped,
        "table3": reports.table3_records(table3_cells),
        "table3_other_lengths": reports.table3_records(reports.table3_data(outcome.results, outcome.skipped, **stats,
                                                                           paper=False)),
        "table4": table4_cells,
        "variant_confusion": reports.confusion_data(outcome.results, **stats),
        "lexical_tier": tier_data(outcome.results, **stats),
        "timings": {"total_s": round(time.perf_counter() - started, 3),
                    "dense_embed_items_per_s": round(embedded / embed_seconds, 2) if embed_seconds else None},
    }
    return result, table3_cells, table4_cells


def _write_report(args, output: Path, result: dict, table3_cells: list, table4_cells: list, outcome) -> int:
    """results.json, table.md and the plots in `output`; the exit code (1 where a pool failed)."""
    from harness.report import tables as reports, tiers
    from harness.report.predictions import FILENAME, write_predictions
    from harness.report.run_folder import write_run

    table = reports.markdown(result, table3_cells, table4_cells,
                             tier_section=(tiers.TITLE, tiers.tier_table(result["results"], data=result["lexical_tier"])))

    def write(folder: Path) -> list[str]:
        """The run's files in ``folder``; the plots' names."""
        reports.write_json(result, folder / "results.json")
        write_predictions(outcome.predictions, folder / FILENAME)
        (folder / "table.md").write_text(table, encoding="utf-8")
        plots = []
        if not args.no_plots and outcome.results:
            if reports.plot_by_length(outcome.results, folder / "p1_by_length.png"):
                plots.append(folder / "p1_by_length.png")
            plots += reports.plot_depth_heatmaps(outcome.results, folder, args.heatmap_metric, outcome.skipped)
        return [plot.relative_to(folder).as_posix() for plot in plots]

    # a default folder (no --output) that another run took meanwhile: this run takes the next name
    names, output = write_run(output, write, replace=bool(args.output))
    if args.mteb_results:
        from harness.report.mteb_results import write_mteb_results

        for path in write_mteb_results(result, Path(args.mteb_results)):
            print(f"wrote {path}")
    plots = [output / name for name in names]
    if not args.quiet:
        print(table)
    print(f"wrote {output / 'results.json'}, {output / 'table.md'}, {output / FILENAME}"
          + "".join(f", {p}" for p in plots))
    if outcome.failed:
        where = f"in {output / 'table.md'}" if args.quiet else "above"
        print(f"{counted(len(outcome.failed), 'pools')} skipped: see 'Skipped' {where}", file=sys.stderr)
        return 1
    return 0


def _select(benchmarks, patterns: list[str]):
    """Each benchmark with its pools that match; a pattern must match in one of them, and no pool
    name may be in two (a Table 3 cell would count its queries twice)."""
    if len(benchmarks) == 1:
        return [(benchmarks[0], benchmarks[0].select(patterns))]
    selections, seen = [], {}
    for benchmark in benchmarks:
        benchmark.pools  # a benchmark that cannot be read stops the run, whatever the patterns
        try:
            pools = benchmark.select(patterns)
        except UserError:
            continue  # matches nothing here; it may elsewhere
        for info in pools:
            if info.name in seen:
                raise UserError(f"--dataset: pool {info.name!r} is in both {seen[info.name]} and {benchmark.ref}; "
                                "score them apart, or leave one out")
            seen[info.name] = benchmark.ref
        selections.append((benchmark, pools))
    if not selections:
        raise UserError(f"--pools {' '.join(patterns)!r} matches no pool of {', '.join(b.ref for b in benchmarks)}")
    return selections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmle score", description="Score embedding models on a built benchmark.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
