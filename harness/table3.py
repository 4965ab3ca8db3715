"""`make table3`: score the listed model profiles over a release, one `mmle score` run each, and write
the leaderboard beside the paper's rows. `--tiny` is the CPU dry run: each profile runs on a tiny random
model of its architecture (harness.models.tiny_models), so the whole path runs without weights or a GPU.

    python -m harness.table3 --dataset out/mmlongembed --models gme-qwen2-vl-2b,qwen3-vl-2b [--tiny]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.profiles.catalogue import get_profile
from mmlongembed.core.errors import UserError, report_error


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="make table3", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="the release (a local build directory or repo@revision)")
    parser.add_argument("--models", required=True, help="comma list of profile names (`mmle models`)")
    parser.add_argument("--output", default="results/table3", help="runs go to OUTPUT/<model>/, the leaderboard "
                                                                    "to OUTPUT/leaderboard.md (default results/table3)")
    parser.add_argument("--tiny", action="store_true", help="CPU dry run: tiny random models of each architecture")
    parser.add_argument("--model-path", action="append", default=[], metavar="NAME=DIR",
                        help="a profile's local weights (repeatable), as for `mmle score`")
    parser.add_argument("--score-args", default="", help="further `mmle score` options, one string")
    return parser.parse_args(argv)


def _tiny_paths(profiles, directory: Path) -> list[str]:
    from harness.models.tiny_models import make_tiny, qwen3_tokenizer, tiny_family

    made, paths = {}, []
    for profile in profiles:
        # a profile whose checkpoints add tokens (Embed-RL's <emb>) gets a tiny model whose tokenizer and
        # embedding table hold them, as its checkpoints do
        key = (tiny_family(profile), profile.added_tokens)
        if key not in made:
            target = directory / "-".join([key[0], *(t.strip("<>") for t in key[1])])
            tokenizer = qwen3_tokenizer()
            tokenizer.add_tokens(list(key[1]))
            made[key] = target if (target / "config.json").is_file() else make_tiny(target, key[0], tokenizer=tokenizer)
        paths.append(f"{profile.name}={made[key]}")
    return paths


def run(argv: list[str] | None = None) -> int:
    from harness.report import leaderboard
    from harness.cli import main as score

    args = _arguments(argv)
    output = Path(args.output)
    try:
        profiles = [get_profile(name) for name in args.models.replace(",", " ").split()]
    except UserError as exc:
        return report_error(exc)
    paths = list(args.model_path) + (_tiny_paths(profiles, output / "tiny-models") if args.tiny else [])
    runs, worst = [], 0
    for profile in profiles:
        run_dir = output / profile.name
        options = ["--dataset", args.dataset, "--model", profile.name, "--output", str(run_dir), "--overwrite",
                   "--no-plots",
                   *[f"--model-path={p}" for p in paths if p.split("=", 1)[0] == profile.name], *args.score_args.split()]
        code = score(options)
        worst = max(worst, code)
        if (run_dir / "results.json").is_file():
            runs.append(str(run_dir / "results.json"))
            report = json.loads((run_dir / "results.json").read_text())
            print(f"{profile.name}: {report['timings']['dense_embed_items_per_s']} items/s "
                  f"({'tiny random weights' if args.tiny else 'its weights'})")
    if not runs:
        return worst or 1
    code = leaderboard.main([*runs, "--reference", "paper", "--output", str(output / "leaderboard.md")])
    return max(worst, code)


if __name__ == "__main__":
    raise SystemExit(run())
