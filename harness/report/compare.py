"""`mmle compare RUN_A RUN_B`: why two runs of a model differ, and whether they do beyond chance.

Model revision, window, truncation rule, image limits, frame policy, batch settings and the
dataset's revision each change scores. This puts the two runs' settings side by side, the ones
that differ first; gives every Table 3 cell's difference on the queries both runs answered with a
paired bootstrap interval and a Holm-corrected p (harness.report.paired); and lists the queries
that flipped, right to wrong and back, per pool, each with its link into the `mmle explore` site.
It exits 0 when no cell differs beyond chance, 1 when some does (2 on a usage error).

`mmle compare RUN --reference paper`: for each cell of the paper's Table 3 that the run's model
has a published row for, whether the published figure lies in the run's interval.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from urllib.parse import quote

from harness.report import paired
from harness.report import tables as report
from harness.report.leaderboard import REFERENCES, load_run, reference
from mmlongembed.core.errors import UserError, report_error

CELLS_NOTE = ("P@1 x100 of each run on the queries both answered; A - B with a 95% paired bootstrap interval (the "
              "same resampled queries for both), the two-sided paired sign-flip permutation p, and p corrected "
              "across the cells (Holm); * where the corrected p is below 0.05. Avg: the mean of the columns' "
              "differences, queries resampled within each column")
DRAWS_NOTE = ("P@1 x100 of each run over all its queries; the runs scored two draws of the benchmark, so no query is "
              "shared: A - B with a 95% bootstrap interval resampling each side on its own, the two-sided "
              "permutation p (answers dealt anew to the two sides), p corrected across the cells (Holm); * "
              "where the corrected p is below 0.05; n: both sides' queries")
RIGHT = 0.5  # a query is "right" where the positive is more likely first than not (ties count by expectation)
IGNORED_SETTINGS = {"created", "timings"}  # differ on every run, say nothing of the scores
SECTIONS = ("dataset", "toolkit", "model", "settings")  # the order settings are listed in


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="two `mmle score` runs (their folders or results.json), or one with --reference")
    parser.add_argument("--reference", choices=sorted(REFERENCES), default=None,
                        help="compare one run with the paper's published Table 3: per cell, whether the paper's "
                             "figure lies in the run's 95%% interval")
    parser.add_argument("--model", default=None, metavar="A[=B]",
                        help="the model to compare: a spec both runs scored, or A=B where the runs name it "
                             "differently (default: the one model both runs share, or each run's only model)")
    parser.add_argument("--flips", type=int, default=10, metavar="N",
                        help="flipped queries listed per pool and direction (default 10; all are counted)")
    parser.add_argument("--explore", default=None, metavar="SITE",
                        help="the `mmle explore` site of the dataset, for each flipped query's link (default "
                             "explore/<the dataset's folder name>/index.html, where the README writes it)")
    parser.add_argument("--draws", action="store_true",
                        help="the two runs scored two draws of the benchmark (`mmle build ... --seed S` and another "
                             "seed: new pools, distractors and lengths), so no query is the same: each cell's two "
                             "samples are compared unpaired (bootstrap of each side, permutation p). A model whose "
                             "score drops beyond the interval on a fresh draw has fitted the published pools "
                             "(docs/CONTAMINATION.md)")
    parser.add_argument("--bootstrap", type=int, default=paired.N_RESAMPLES,
                        help=f"bootstrap and permutation resamples (default {paired.N_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resamples (default 0)")
    parser.add_argument("--output", default=None, help="also write the comparison to this markdown file")


def run(args: argparse.Namespace) -> int:
    try:
        runs = [load_run(path) for path in args.runs]
        if args.reference:
            if len(runs) != 1:
                raise UserError("--reference compares one run with the paper: give one RUN")
            text, differs = against_reference(runs[0], reference(args.reference), args.model)
        else:
            if len(runs) != 2:
                raise UserError(f"give two runs to compare (got {len(runs)}), or one with --reference paper")
            text, differs = compare_runs(runs[0], runs[1], args.model, flips=args.flips, site=args.explore,
                                         n_resamples=args.bootstrap, seed=args.seed, draws=args.draws)
    except UserError as exc:
        return report_error(exc)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 1 if differs else 0


# -- what made each run ---------------------------------------------------------------------------

def dataset_facts(path: str | Path) -> dict:
    """What a run records of a build from its manifest: `data_files_sha256`, one sha256 over its
    data files (path and content digest of each: two builds with the same digest hold the same
    rows), and `absent`, the sources a release left out and why (a leaderboard says "excluded"
    there, not "not run"). None and {} where the folder has no manifest (a Hub reference: its
    revision pins it)."""
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        return {"data_files_sha256": None, "absent": {}}
    data = json.loads(manifest.read_text(encoding="utf-8"))
    files = data.get("files") or {}
    listing = "\n".join(f"{name} {entry.get('sha256') if isinstance(entry, dict) else entry}"
                        for name, entry in sorted(files.items()))
    return {"data_files_sha256": hashlib.sha256(listing.encode("utf-8")).hexdigest(),
            "absent": dict(data.get("absent") or {})}


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}", inner, out)
    else:
        out[prefix] = value


def run_settings(run: dict, model: str) -> dict[str, object]:
    """What made the run's scores of ``model``, flattened: `dataset.revision`, `toolkit.git_commit`,
    `model.max_length`, `settings.batch_size`... (runs written before a fact was recorded: absent)."""
    out: dict[str, object] = {}
    datasets = run.get("datasets") or [run.get("dataset") or {}]
    for k, dataset in enumerate(datasets):
        name = "dataset" if len(datasets) == 1 else f"dataset[{k}]"
        for key in ("data_files_sha256", "revision", "ref"):
            out[f"{name}.{key}"] = dataset.get(key)
    _flatten("toolkit", run.get("toolkit") or {}, out)
    record = next((m for m in run.get("models") or [] if isinstance(m, dict) and m.get("spec") == model), {})
    _flatten("model", {k: v for k, v in (record.get("identity") or {}).items() if k != "model"}, out)
    _flatten("settings", run.get("settings") or {}, out)
    return {k: v for k, v in out.items() if k.split(".")[0] not in IGNORED_SETTINGS}


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return "–" if value is None else text.replace("|", "\\|")


def settings_table(a: dict, b: dict) -> tuple[str, list[str]]:
    """The two runs' settings side by side, those that differ first (≠); and the names that differ."""
    keys = sorted(a.keys() | b.keys(), key=lambda k: (SECTIONS.index(k.split(".")[0].split("[")[0])
                                                      if k.split(".")[0].split("[")[0] in SECTIONS else 9))
    differ = [k for k in keys if a.get(k) != b.get(k)]
    lines = ["| | Setting | A | B |", "|---|---|---|---|"]
    for key in differ + [k for k in keys if k not in differ]:
        lines.append(f"| {'≠' if key in differ else ''} | {key} | {_shown(a.get(key))} | {_shown(b.get(key))} |")
    return "\n".join(lines), differ


# -- which model of each run ----------------------------------------------------------------------

def _models(run: dict) -> list[str]:
    return list(dict.fromkeys([m["spec"] for m in run.get("models") or [] if isinstance(m, dict)]
                              + [r["model"] for r in run["results"]]))


def pick_models(run_a: dict, run_b: dict, wanted: str | None) -> tuple[str, str]:
    """(model in A, model in B): ``wanted`` (SPEC or A=B), else the one model both runs share, else
    each run's only model; one line naming the choices otherwise."""
    a_models, b_models = _models(run_a), _models(run_b)
    if wanted:
        a, _, b = wanted.partition("=")
        a, b = a.strip(), (b or a).strip()
        for model, models, which in ((a, a_models, "A"), (b, b_models, "B")):
            if model not in models:
                raise UserError(f"--model {wanted!r}: run {which} has no model {model!r} (it has "
                                f"{', '.join(models) or 'none'})")
        return a, b
    common = [m for m in a_models if m in b_models]
    if len(common) == 1:
        return common[0], common[0]
    if not common and len(a_models) == 1 and len(b_models) == 1:
        return a_models[0], b_models[0]
    raise UserError(f"say which model to compare with --model (A has {', '.join(a_models) or 'none'}; B has "
                    f"{', '.join(b_models) or 'none'})")


# -- cells and flips ------------------------------------------------------------------------------

def _cell_differences(run_a: dict, run_b: dict, a: str, b: str, n_resamples: int, seed: int,
                      draws: bool = False) -> list[dict]:
    """Every column both runs' models have queries in, over the paper's table and the other
    lengths' one: P@1 of each on the shared queries (``draws``: on all of each side's, two
    draws sharing none), the difference, Holm across cells."""
    samples = paired.every_answer if draws else paired.shared
    cells = []
    for paper_set in (True, False):
        outcomes = {"A": paired.run_outcomes(run_a, paper_set).get(a, {}),
                    "B": paired.run_outcomes(run_b, paper_set).get(b, {})}
        columns = sorted(outcomes["A"].keys() & outcomes["B"].keys(),
                         key=lambda c: report.column_order(c, None))
        for d in paired.compare(outcomes, ["A", "B"], columns, seed, n_resamples, paired=not draws):
            over = columns if d.column == report.AVG else [d.column]
            sides = [samples(outcomes["A"][c], outcomes["B"][c]) for c in over]
            means = [float(sum(x.mean() for x, _ in sides) / len(sides)), float(sum(y.mean() for _, y in sides)
                                                                             / len(sides))]
            cells.append({"table": "paper" if paper_set else "other lengths", "difference": d, "a": means[0],
                          "b": means[1]})
    columns = [c for c in cells if c["difference"].column != report.AVG]
    for cell, p_holm in zip(columns, paired.holm([c["difference"].p for c in columns])):
        d = cell["difference"]
        cell["difference"] = paired.Difference(d.a, d.b, d.column, d.queries, d.delta, d.ci95, d.p, p_holm)
    return cells


def _per_query(run: dict, model: str) -> dict[tuple[str, str], float]:
    return {(pool, qid): value for m, pool, qid, value in paired.per_query(run) if m == model}


def flipped(run_a: dict, run_b: dict, a: str, b: str) -> dict[str, dict[str, list[str]]]:
    """{pool: {"right to wrong": [query _id...], "wrong to right": [...]}} over the queries both
    runs answered, from A to B."""
    before, after = _per_query(run_a, a), _per_query(run_b, b)
    length = {r["pool"]: int(r.get("length") or 0) for r in run_a["results"]}
    out: dict[str, dict[str, list[str]]] = {}
    # pools of one dataset and difficulty together, shortest first; queries in id order
    for (pool, qid) in sorted(before.keys() & after.keys(),
                              key=lambda k: (report.grid_group({"pool": k[0]}), length.get(k[0], 0), k)):
        was, now = before[pool, qid] >= RIGHT, after[pool, qid] >= RIGHT
        if was != now:
            out.setdefault(pool, {"right to wrong": [], "wrong to right": []})[
                "right to wrong" if was else "wrong to right"].append(qid)
    return out


def explore_link(site: str, pool: str, qid: str) -> str:
    return f"{site}#pool={quote(pool, safe='')}&qid={quote(qid, safe='')}"


def _default_site(run: dict) -> str:
    path = (run.get("dataset") or {}).get("path") or (run.get("dataset") or {}).get("ref") or "dataset"
    return f"explore/{Path(str(path).rstrip('/')).name}/index.html"


def _length_of(run: dict, pool: str) -> str:
    row = next((r for r in run["results"] if r["pool"] == pool), {})
    return report._length_name(int(row["length"])) if row.get("length") else "?"


def compare_runs(run_a: dict, run_b: dict, model: str | None = None, flips: int = 10, site: str | None = None,
                 n_resamples: int = paired.N_RESAMPLES, seed: int = 0, draws: bool = False) -> tuple[str, bool]:
    """The comparison as markdown, and whether some cell differs beyond chance. ``draws``: the
    runs scored two draws of the benchmark (no query shared): cells compared unpaired, no flips."""
    a, b = pick_models(run_a, run_b, model)
    table, differ = settings_table(run_settings(run_a, a), run_settings(run_b, b))
    cells = _cell_differences(run_a, run_b, a, b, n_resamples, seed, draws)
    if not cells:
        hint = "" if draws else "; two draws of the benchmark (another --seed) share none: pass --draws"
        raise UserError(f"{run_a['_path']} and {run_b['_path']}: no query both runs answered with {a!r} and {b!r} "
                        f"(per-query predictions.parquet missing, or no pool in common{hint})")
    significant = [c for c in cells if c["difference"].significant]
    parts = [f"# {a} in A against {b} in B", "",
             f"A: {run_a['_path']} ({run_a.get('created', 'when: not recorded')}); "
             f"B: {run_b['_path']} ({run_b.get('created', 'when: not recorded')}).", "",
             ("What differs: " + ", ".join(f"`{k}`" for k in differ) + ".") if differ else
             "The two runs' recorded settings are identical.", "",
             *([] if draws or not any(k.endswith(".data_files_sha256") for k in differ) else [
                 "**The runs scored different data files:** a query _id in both may stand for another task (other "
                 "candidates, another length); if these are two draws of the benchmark (another `--seed`), "
                 "compare them with `--draws`.", ""]),
             "## Settings, those that differ first", "", table, "",
             (f"## Cells: A - B on two draws ({DRAWS_NOTE})" if draws else
              f"## Cells: A - B on the queries both answered ({CELLS_NOTE})"), "",
             f"| Table | Column | n | A | B | A - B [95% {'unpaired' if draws else 'paired'} interval] | p | p (Holm) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        d = cell["difference"]
        mark = " *" if d.significant else ""
        parts.append(f"| {cell['table']} | {d.column} | {d.queries} | {report.fmt(cell['a'])} | "
                     f"{report.fmt(cell['b'])} | {paired.difference_text(d)}{mark} | {paired.p_text(d.p)} | "
                     f"{paired.p_text(d.p_holm)} |")
    flips_of = {} if draws else flipped(run_a, run_b, a, b)
    site = site or _default_site(run_b)
    parts += ["", f"## Queries that flipped (right: P@1 >= {RIGHT}, ties by expectation), by pool", ""]
    if draws:
        parts.append("None to list: two draws share no query.")
    elif not flips_of:
        parts.append("None: every query both runs answered is right in both or wrong in both.")
    else:
        parts += ["| Pool | Length | Right to wrong | Wrong to right |", "|---|---|---:|---:|"]
        parts += [f"| {pool} | {_length_of(run_a, pool)} | {len(f['right to wrong'])} | {len(f['wrong to right'])} |"
                  for pool, f in flips_of.items()]
        parts.append("")
        for pool, f in flips_of.items():
            for direction, ids in f.items():
                if ids:
                    shown = ", ".join(f"[{qid}]({explore_link(site, pool, qid)})" for qid in ids[:flips])
                    more = f" and {len(ids) - flips} more" if len(ids) > flips else ""
                    parts.append(f"- {pool}, {direction}: {shown}{more}")
    parts += ["", (f"**{len(significant)} cell(s) differ beyond chance** (Holm-corrected p < {paired.ALPHA}): "
                   + ", ".join(f"{c['table']} {c['difference'].column}" for c in significant) + "; exit 1.")
              if significant else "**No cell differs beyond chance**; exit 0."]
    return "\n".join(parts), bool(significant)


# -- against the paper ----------------------------------------------------------------------------

def _paper_name(model: str, published: set[str]) -> str | None:
    from harness.profiles.catalogue import PROFILES

    profile = PROFILES.get(model.lower())
    names = [profile.paper_name] if profile and profile.paper_name else []
    names.append(model)
    return next((p for n in names for p in published if p.lower() == n.lower()), None)


def against_reference(run: dict, ref: dict, wanted: str | None = None) -> tuple[str, bool]:
    """Per cell of the run's Table 3 with a published figure: whether it lies in the run's 95%
    interval; and whether some does not (MM-NIAH*, a substitute for the paper's MM-NIAH, is shown
    and not counted)."""
    published = {}
    renamed = ref.get("our_column", {})
    for r in ref["table3"]:
        published.setdefault(r["model"], {})[renamed.get(r["column"], r["column"])] = r["p_at_1"]
    models = [wanted] if wanted else _models(run)
    matched = {m: _paper_name(m, set(published)) for m in models}
    matched = {m: name for m, name in matched.items() if name}
    if not matched:
        raise UserError(f"{run['_path']}: no model of the run has a published row ({', '.join(models)}; the paper "
                        f"has {', '.join(published)})")
    cells = [c for c in run.get("table3") or [] if c["model"] in matched and c["column"] != report.AVG]
    parts = [f"# {run['_path']} against {ref['label']}", "", f"{ref['title']}. {ref['provenance']}", "",
             "| Model | Paper's row | Column | Ours [95% interval] n | Paper | In our interval |",
             "|---|---|---|---:|---:|---|"]
    outside = []
    for cell in cells:
        paper = published[matched[cell["model"]]].get(cell["column"])
        if paper is None or cell.get("p_at_1") is None:
            continue
        value = paper / 100  # published as P@1 x100 (the reference's "scale")
        substitute = cell["column"] in renamed.values()
        if cell.get("ci95"):
            inside = cell["ci95"][0] - 1e-9 <= value <= cell["ci95"][1] + 1e-9
            verdict = "yes" if inside else "no"
        else:
            inside, verdict = True, f"no interval (n={cell['queries']})"
        if substitute:
            verdict += " (not counted: our grid substitutes for the paper's MM-NIAH)"
        elif not inside:
            outside.append(f"{cell['model']} {cell['column']}")
        parts.append(f"| {cell['model']} | {matched[cell['model']]} | {cell['column']} | {report.cell_text(cell)} | "
                     f"{paper:.2f} | {verdict} |")
    parts += ["", (f"**The paper's figure lies outside our interval in {len(outside)} cell(s)**: "
                   f"{', '.join(outside)}; exit 1.") if outside else
              "**Every published figure lies in our interval** (or the cell has none); exit 0."]
    return "\n".join(parts), bool(outside)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmle compare", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
