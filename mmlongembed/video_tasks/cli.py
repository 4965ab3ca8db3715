"""MTEB video tasks (MVEB conventions): build, export, evaluate, rank, prune.

    mmle mveb build --sources DIR_OR_TABLE [--clip-seconds 2] [--output out]   V and VA tasks from a collection
    mmle mveb export-temporal out/activitynet [--output out]                     Temporal Summarization as an mteb task
    mmle mveb eval out/<collection> [...] --model seeded-media,hf:<path>         mteb's own evaluators
    mmle mveb rank results/scores.csv [--categories FILE]                        Borda, mean and Macro
    mmle mveb prune results/scores.csv [--threshold 0.85] [--protect TASK ...]   drop redundant tasks
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mmlongembed.cli import OneLineErrorParser
    from mmlongembed.core.flags import add_dataclass_arguments
    from mmlongembed.video_tasks.build import MvebConfig

    parser.description = __doc__.split("\n\n")[0]
    commands = parser.add_subparsers(dest="mveb_command", required=True, metavar="STEP",
                                     parser_class=OneLineErrorParser)
    build = commands.add_parser("build", help="build V and VA mteb video tasks from a labelled video collection",
                                description=MvebConfig.__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    build.add_argument("--output", type=Path, default=Path("out"), help="directory that receives <name>/")
    build.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    build.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_dataclass_arguments(build, MvebConfig)
    build.set_defaults(mveb_run=_run_build)

    export = commands.add_parser("export-temporal", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                 help="export a Temporal Summarization build as an mteb text-to-video retrieval task")
    export.add_argument("build_dir", type=Path, help="a build of activitynet or youkudc (holds manifest.json)")
    export.add_argument("--output", type=Path, default=Path("out"), help="directory that receives <name>/")
    export.add_argument("--name", default="", help="output folder name (default: <build>-mteb)")
    export.add_argument("--language", default="eng-Latn", help="eval language of the task (mteb code)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    export.set_defaults(mveb_run=_run_export)

    _add_eval_arguments(commands)

    rank = commands.add_parser("rank", help="Borda count, mean and Macro over a models x tasks score table")
    rank.add_argument("scores", type=Path, help="CSV: model, then one column per task (mveb eval's scores.csv)")
    rank.add_argument("--tasks", nargs="+", default=None, help="rank over these tasks only")
    rank.add_argument("--categories", type=Path, default=None,
                      help="task categories for the Macro column: mveb eval's results.json, or a JSON {task: "
                           "category or mteb task type}; tasks it leaves out are looked up in mteb's registry")
    rank.set_defaults(mveb_run=_run_rank)

    prune = commands.add_parser("prune", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                help="drop tasks whose model ranking duplicates a kept task's (Spearman)")
    prune.add_argument("scores", type=Path, help="CSV: model, then one column per task")
    prune.add_argument("--threshold", type=float, default=0.85, help="drop a task above this Spearman rho")
    prune.add_argument("--protect", nargs="+", default=[], help="tasks always kept (unique coverage)")
    prune.add_argument("--costs", type=Path, default=None,
                       help="JSON {task: seconds}, or mveb eval's results.json: cheaper tasks are kept first")
    prune.add_argument("--output", type=Path, default=None, help="write the decision as JSON")
    prune.set_defaults(mveb_run=_run_prune)


def _add_eval_arguments(commands) -> None:
    """`mmle mveb eval`: mteb's own evaluators over built task folders."""
    evaluate = commands.add_parser("eval", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                   help="evaluate models on built task folders with mteb's own evaluators")
    evaluate.add_argument("task_dirs", type=Path, nargs="+", help="folders written by mveb build / export-temporal")
    evaluate.add_argument("--model", required=True,
                          help="comma list: seeded-media[:DIM] (weightless stand-in) or any harness model spec "
                               "(minilm, st:<path>, hf:<path>, vllm:<name>, openai:<model>@<url>)")
    evaluate.add_argument("--tasks", nargs="+", default=None, help="only these task names")
    evaluate.add_argument("--output", type=Path, default=Path("results/mveb"),
                          help="receives results.json, scores.csv and ranking.md")
    evaluate.add_argument("--batch-size", type=int, default=16, help="inputs per model call")
    evaluate.add_argument("--max-length", type=int, default=None, help="model window in tokens")
    evaluate.add_argument("--pooling", default=None, help="hf: last, mean or cls")
    evaluate.add_argument("--instruction", default=None, help="query template with {instruction} and {text}")
    evaluate.add_argument("--device", default="cpu", help="torch device")
    evaluate.add_argument("--fps", type=float, default=2.0, help="frames per second sampled from a clip (mteb: 2)")
    evaluate.add_argument("--max-frames", type=int, default=64, help="at most this many frames per clip (mteb: 64)")
    evaluate.add_argument("--predictions", action="store_true", help="also keep mteb's predictions per task")
    evaluate.set_defaults(mveb_run=_run_eval)


def run(args) -> int:
    return args.mveb_run(args)


def _run_build(args) -> int:
    from mmlongembed.core.flags import config_from_args
    from mmlongembed.video_tasks.build import MvebConfig, run_mveb_build

    final = run_mveb_build(config_from_args(MvebConfig, args), args.output, overwrite=args.overwrite,
                           progress=not args.no_progress)
    print(f"built mteb video tasks into {final}")
    return 0


def _run_export(args) -> int:
    from mmlongembed.video_tasks.temporal import export_temporal

    final = export_temporal(args.build_dir, args.output, args.name, args.overwrite, args.language)
    print(f"exported {args.build_dir} as an mteb task into {final}")
    return 0


def load_task_dir(directory: Path, names=None) -> list:
    """The tasks of a built folder, through the folder's own mteb_tasks.py (what a user runs)."""
    import importlib.util

    from mmlongembed.core.errors import UserError

    module_path = Path(directory) / "mteb_tasks.py"
    if not module_path.is_file():
        raise UserError(f"{directory}: no mteb_tasks.py (not a folder written by mveb build / export-temporal)")
    spec = importlib.util.spec_from_file_location(f"mteb_tasks_{abs(hash(str(module_path.resolve())))}", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tasks(names=names)


def _run_eval(args) -> int:
    from harness.models.adapters import RunSettings
    from harness.mteb.video import evaluate, make_encoder
    from harness.mteb.ranking import ranking_table, task_categories, write_scores_csv
    from mmlongembed.core.errors import UserError

    tasks = [t for d in args.task_dirs for t in load_task_dir(d, args.tasks)]
    if not tasks:
        raise UserError("mveb eval: no task selected")
    settings = RunSettings(batch_size=args.batch_size, max_length=args.max_length, pooling=args.pooling,
                           instruction=args.instruction, device=args.device, progress=False)
    args.output.mkdir(parents=True, exist_ok=True)
    report = {"tasks": [t.metadata.name for t in tasks],
              "task_types": {t.metadata.name: t.metadata.type for t in tasks}, "models": {}, "skipped": {}}
    scores: dict[str, dict[str, float | None]] = {}
    for spec in [s.strip() for s in args.model.split(",") if s.strip()]:
        encoder = make_encoder(spec, settings, fps=args.fps, max_frames=args.max_frames)
        folder = args.output / "predictions" / encoder.mteb_model_meta.name.replace("/", "__") \
            if args.predictions else None
        outcome = evaluate(encoder, tasks, prediction_folder=folder)
        report["models"][spec] = outcome["results"]
        report["skipped"][spec] = outcome["skipped"]
        scores[spec] = {t.metadata.name: outcome["results"].get(t.metadata.name, {}).get("main_score")
                        for t in tasks}
        for name, why in outcome["skipped"].items():
            print(f"{spec}: skipped {name} ({why})", file=sys.stderr)
    (args.output / "results.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_scores_csv(args.output / "scores.csv", scores)
    table = ranking_table(scores, categories=task_categories(report["tasks"], report["task_types"]))
    (args.output / "ranking.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    return 0


def _run_rank(args) -> int:
    from harness.mteb.ranking import ranking_table, read_categories, read_scores_csv, task_categories, task_names
    from mmlongembed.core.errors import UserError

    scores = read_scores_csv(args.scores)
    tasks = args.tasks or task_names(scores)
    try:
        given = read_categories(args.categories) if args.categories else {}
        categories = task_categories(tasks, given)
    except (OSError, ValueError) as error:
        raise UserError(f"--categories: {str(error).splitlines()[0]}") from None
    print(ranking_table(scores, args.tasks, categories))
    return 0


def _costs(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if "models" in data:  # mveb eval's results.json: the slowest model's seconds per task
        costs: dict[str, float] = {}
        for results in data["models"].values():
            for task, result in results.items():
                if result.get("seconds") is not None:
                    costs[task] = max(costs.get(task, 0.0), float(result["seconds"]))
        return costs
    return {k: float(v) for k, v in data.items()}


def _run_prune(args) -> int:
    from harness.mteb.ranking import prune, read_scores_csv
    from mmlongembed.core.errors import UserError

    scores = read_scores_csv(args.scores)
    try:
        result = prune(scores, args.threshold, args.protect, _costs(args.costs))
    except ValueError as error:
        raise UserError(str(error)) from None
    for task in result.order:
        if task in result.dropped:
            other, rho = result.dropped[task]
            print(f"drop  {task}  (rho {rho:.3f} with {other})")
        else:
            print(f"keep  {task}")
    a = result.agreement
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"kept {len(result.kept)} of {len(result.order)} tasks; agreement with the full set over {a['models']} "
          f"models: Pearson {fmt(a['pearson_mean'])}, Spearman {fmt(a['spearman_mean'])} (mean scores), "
          f"Spearman {fmt(a['spearman_borda'])} (Borda)")
    if args.output:
        args.output.write_text(json.dumps({"threshold": args.threshold, "kept": result.kept, "order": result.order,
                                           "dropped": {k: {"duplicates": o, "rho": r} for k, (o, r)
                                                       in result.dropped.items()},
                                           "agreement": result.agreement}, indent=2) + "\n", encoding="utf-8")
    return 0
