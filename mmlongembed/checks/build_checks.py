"""The checks of a written build (``mmle validate``, ``mmlongembed.build.validate``, runs them through
the pipeline of the build's output kind): recount every length, check every invariant.

They read the build the way a user would (the card's configs over the parquet files), recount
tokens from the final text and the stored image sizes, queries included, check every data file
against the sha256 the manifest recorded, the pools table against the configs, the layout's
blindness (model configs expose only model columns; the label-free shortcut audit), and run the
builder's own checks (`Builder.validate_pool`) on each pool with its audit joined in. Problems
are collected, never raised one by one; a build that cannot be read at all (no card, no
manifest, a data file missing, empty or corrupt) is a one-line error naming the file (exit 1).
Each pool is read once, and all its checks (the recount of every output token, the builder's
checks, the audit) run on all cores, a pool per worker process (``_PoolChecks``); the report is
the same on one core.
"""

from __future__ import annotations

import io
import json
import multiprocessing
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mmlongembed.core import parallel
from mmlongembed.core.builder import Problem, get_builder
from mmlongembed.core.documents import count_rendered_many
from mmlongembed.core.errors import UserError
from mmlongembed.output.manifest import file_sha256
from mmlongembed.output.layout import MODEL_COLUMNS, PARTS, ROW_GROUP_BYTES, ConfigSpec, PoolTables, \
    RowGroupCache, config_name, read_config, read_pool
from mmlongembed.checks.summary import counted as plural_counted
from mmlongembed.core.pools import HARD_NEGATIVE, POSITIVE, hard_negative_tolerance
from mmlongembed.checks.shortcuts import audit_pool
from mmlongembed.core.tokens import counting_threads, default_counter


class InvalidBuild(UserError):
    """The directory cannot be validated at all: one line, exit code 1."""

    exit_code = 1


# What a validation report says it checked, filled in from the counts (``format_report``): a
# build in the pool layout counts pools, queries and candidates; a training build
# (mmlongembed.training.pipeline) its rows and configs.
POOLS_COUNTED = "validated {pools}, {queries}, {candidates}"  # each count with its noun (report.counted)


@dataclass
class Validation:
    problems: list[Problem] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)
    shortcuts: dict[str, dict] = field(default_factory=dict)  # pool -> label-free audit
    counted: str = POOLS_COUNTED  # what the report says was checked (the validating pipeline's)

    def report(self, limit: int = 50) -> str:
        """``format_report`` of this validation."""
        return format_report(self.problems, dict(self.checked), limit, self.counted)


def _image_size(image: dict) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(image["bytes"])) as im:
        return im.height, im.width


RECOUNT_BATCH = 64  # rows counted together between two steps of the progress bar


def _recount_rows(texts: list[str], images: list, counter, advance: Callable[[int], object],
                  threads: int | None = None) -> list[int | ValueError]:
    """Each row's length recounted from its final text and stored images (``count_rendered``),
    the text counted in batches on ``threads`` threads (default: every core); a ValueError
    (placeholders that do not match the images) in place of a length. ``advance(n)`` after each
    batch of ``n`` rows."""
    out: list[int | ValueError] = []
    threads = threads or counting_threads()
    for start in range(0, len(texts), RECOUNT_BATCH):
        sizes: list = []
        for row_images in images[start:start + RECOUNT_BATCH]:
            try:
                sizes.append([_image_size(im) for im in row_images or []])
            except ValueError as error:
                sizes.append(error)
        counted = count_rendered_many(texts[start:start + RECOUNT_BATCH], sizes, counter, num_threads=threads)
        out += [c if isinstance(c, ValueError) else c[0] + c[1] for c in counted]
        advance(len(sizes))
    return out


def check_pool(tables: PoolTables, advance: Callable[[int], object] | None = None,
               threads: int | None = None) -> list[Problem]:
    """The generic invariants of one pool (audit joined into ``corpus`` and ``queries``);
    ``advance(n)`` is called after each batch of ``n`` recounted rows (a progress bar's
    ``update``); the text is counted on ``threads`` threads (default: every core)."""
    advance = advance or (lambda n: None)
    pool_row, corpus, queries = tables.row, tables.corpus, tables.queries
    name = pool_row["pool"]
    problems: list[Problem] = []
    counter = default_counter()

    def problem(check: str, detail: str) -> None:
        problems.append(Problem(name, check, detail))

    _check_columns_and_ids(tables, problem)
    lengths = _check_candidates(pool_row, corpus, counter, advance, threads, problem)
    _check_queries(queries, counter, advance, threads, problem)
    positives = _check_qrels(tables, problem)
    _check_hard_negative_lengths(corpus, positives, lengths, problem)
    ids, query_ids = corpus["_id"], queries["_id"]
    if len(ids) != pool_row["n_candidates"] or len(query_ids) != pool_row["n_queries"]:
        problem("pool_counts", f"the pools table says {pool_row['n_queries']} queries and {pool_row['n_candidates']} "
                               f"candidates, the configs hold {len(query_ids)} and {len(ids)}")
    return problems


def _check_columns_and_ids(tables: PoolTables, problem: Callable[[str, str], None]) -> None:
    """The model configs show only the layout's columns; candidate ids are distinct; every row
    is in the audit config."""
    name, corpus, queries = tables.row["pool"], tables.corpus, tables.queries
    for part, columns in tables.model_columns.items():
        if tuple(columns) != MODEL_COLUMNS[part]:
            problem("model_columns", f"config {config_name(name, part)} shows {list(columns)}, the layout allows "
                                     f"{list(MODEL_COLUMNS[part])}")
    ids = corpus["_id"]
    if len(set(ids)) != len(ids):
        problem("duplicate_candidate_id", f"{len(ids) - len(set(ids))} repeated ids")
    for kind, table in (("candidate", corpus), ("query", queries)):
        unaudited = [i for i, audited in zip(table["_id"], table["_audited"]) if not audited]
        if unaudited:
            problem("audit", f"{len(unaudited)} {kind}(s) missing from the audit config, e.g. {unaudited[0]}")


def _check_candidates(pool_row: dict, corpus: dict[str, list], counter, advance: Callable[[int], object],
                      threads: int | None, problem: Callable[[str, str], None]) -> dict[str, int]:
    """Each candidate recounted (its stored length, the pool's band), its edges and its content
    against the other candidates'; returns candidate id -> recounted length."""
    texts_seen: dict[tuple, str] = {}
    lengths: dict[str, int] = {}
    recounted = _recount_rows(corpus["text"], corpus["images"], counter, advance, threads)
    for i, cid in enumerate(corpus["_id"]):
        text, images, total = corpus["text"][i], corpus["images"][i], recounted[i]
        if isinstance(total, ValueError):
            problem("image_placeholders", f"{cid}: {total}")
            continue
        lengths[cid] = total
        if total != corpus["n_tokens"][i]:
            problem("recount", f"{cid}: stored {corpus['n_tokens'][i]} tokens, recounted {total}")
        if not pool_row["band_min"] <= total <= pool_row["band_max"]:
            problem("length_band", f"{cid}: {total} tokens outside [{pool_row['band_min']}, {pool_row['band_max']}]")
        if text != text.strip():
            problem("edge_whitespace", f"{cid}: the candidate's text begins or ends with whitespace")
        key = (text, tuple(im["bytes"] for im in images))
        if key in texts_seen:
            problem("duplicate_candidate", f"{cid} has the same content as {texts_seen[key]}")
        texts_seen[key] = cid
    return lengths


def _check_queries(queries: dict[str, list], counter, advance: Callable[[int], object], threads: int | None,
                   problem: Callable[[str, str], None]) -> None:
    """Query ids are distinct and each query's stored length is its recount."""
    query_ids = queries["_id"]
    if len(set(query_ids)) != len(query_ids):
        problem("duplicate_query_id", f"{len(query_ids) - len(set(query_ids))} repeated ids")
    recounted = _recount_rows(queries["text"], queries["images"], counter, advance, threads)
    for i, qid in enumerate(query_ids):
        total = recounted[i]
        if isinstance(total, ValueError):
            problem("image_placeholders", f"query {qid}: {total}")
            continue
        if total != queries["n_tokens"][i]:
            problem("query_recount", f"query {qid}: stored {queries['n_tokens'][i]} tokens, recounted {total}")


def _check_qrels(tables: PoolTables, problem: Callable[[str, str], None]) -> dict[str, list[str]]:
    """Every qrel names a known query and candidate, and each query has one positive, a
    candidate whose role is positive; returns query id -> its positives."""
    ids, query_ids, qrels = tables.corpus["_id"], tables.queries["_id"], tables.qrels
    positives: dict[str, list[str]] = defaultdict(list)
    id_set, query_set = set(ids), set(query_ids)
    for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]):
        if q not in query_set:
            problem("qrels", f"qrel names unknown query {q}")
        if c not in id_set:
            problem("qrels", f"qrel names unknown candidate {c}")
        if s > 0:
            positives[q].append(c)
    roles = dict(zip(ids, tables.corpus["role"]))
    for q in query_ids:
        if len(positives.get(q, [])) != 1:
            problem("one_positive", f"query {q} has {len(positives.get(q, []))} positives")
        elif roles.get(positives[q][0]) != POSITIVE:
            problem("one_positive", f"query {q}'s positive {positives[q][0]} has role {roles.get(positives[q][0])}")
    return positives


def _check_hard_negative_lengths(corpus: dict[str, list], positives: dict[str, list[str]], lengths: dict[str, int],
                                 problem: Callable[[str, str], None]) -> None:
    """A hard negative is as long as its query's positive, within the tolerance."""
    positive_of_group = {q: c[0] for q, c in positives.items() if len(c) == 1}
    for cid, role, group in zip(corpus["_id"], corpus["role"], corpus["group"]):
        if role == HARD_NEGATIVE and group in positive_of_group and cid in lengths:
            positive_len = lengths.get(positive_of_group[group])
            if positive_len is not None and abs(lengths[cid] - positive_len) > hard_negative_tolerance(positive_len):
                problem("hard_negative_length",
                        f"{cid}: {lengths[cid]} tokens vs positive {positive_len} (tolerance "
                        f"{hard_negative_tolerance(positive_len)})")


def load_manifest(root: Path) -> dict:
    path = root / "manifest.json"
    if not path.is_file():
        raise InvalidBuild(f"{path}: missing; {root} is not a build directory")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidBuild(f"{path}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("builder"), dict) \
            or "name" not in manifest["builder"]:
        raise InvalidBuild(f"{path}: no builder name (manifest['builder']['name'])")
    return manifest


def check_files(root: Path, specs: dict[str, ConfigSpec], manifest: dict) -> list[Problem]:
    """Every data file is the one the build wrote (sha256 in the manifest), and every config
    names a recorded file."""
    problems = []
    recorded = manifest.get("files") or {}
    if not recorded:
        problems.append(Problem("*", "file_hashes", "the manifest records no data file hashes"))
    for path, facts in sorted(recorded.items()):
        if not (root / path).is_file():
            problems.append(Problem("*", "file_hashes", f"{path} is recorded in the manifest but missing"))
        elif file_sha256(root / path) != facts.get("sha256"):
            problems.append(Problem("*", "file_hashes", f"{path} differs from what the build wrote (sha256)"))
    for spec in specs.values():
        if recorded and spec.path not in recorded:
            problems.append(Problem(spec.pool or "*", "file_hashes", f"config {spec.name} names {spec.path}, "
                                                                     "which the manifest does not record"))
    return problems + croissant_problems(root, recorded)


def croissant_problems(root: Path, recorded: dict[str, dict]) -> list[Problem]:
    """croissant.json, where a build has one (builds before it had none), lists exactly the data
    files the manifest records, with their sha256: it is metadata of this build, not another's."""
    path = root / "croissant.json"
    if not path.is_file() or not recorded:
        return []
    try:
        listed = {d.get("contentUrl"): d.get("sha256") for d in json.loads(path.read_text(encoding="utf-8"))
                  .get("distribution") or [] if isinstance(d, dict)}
    except (ValueError, AttributeError):
        return [Problem("*", "croissant", "croissant.json is not a JSON object")]
    expected = {name: facts.get("sha256") for name, facts in recorded.items()}
    if listed != expected:
        name = sorted(set(listed.items()) ^ set(expected.items()))[0][0]
        return [Problem("*", "croissant", f"croissant.json does not describe the data files the manifest records "
                                          f"(first: {name})")]
    return []


def check_configs(pool_names: list[str], specs: dict[str, ConfigSpec]) -> list[Problem]:
    """The pools table and the card's configs describe the same pools."""
    problems = []
    for name in pool_names:
        for part in PARTS:
            if config_name(name, part) not in specs:
                problems.append(Problem(name, "configs", f"the card has no config {config_name(name, part)}"))
    known = set(pool_names)
    for spec in specs.values():
        if spec.pool is not None and spec.pool not in known:
            problems.append(Problem(spec.pool, "configs", f"config {spec.name} names a pool the pools table lacks"))
    return problems


def validate_tables(root: Path, specs: dict[str, ConfigSpec], builder_name: str, progress: bool = False) -> Validation:
    """Every pool's invariants, the builder's checks and the shortcut audit. ``progress`` shows
    a bar over the pools' rows (candidates and queries)."""
    from tqdm.auto import tqdm

    if "pools" not in specs:
        raise InvalidBuild(f"{root / 'README.md'}: no `pools` config")
    get_builder(builder_name)  # an unknown builder is one line here, not one per pool
    pools = read_config(root, specs["pools"])
    result = Validation()
    result.problems += check_configs(pools.get("pool", []), specs)
    rows = [{k: v[i] for k, v in pools.items()} for i in range(len(pools.get("pool", [])))]
    total = sum(int(row.get("n_candidates") or 0) + int(row.get("n_queries") or 0) for row in rows)
    bar = tqdm(total=total, desc="validating", unit="row", disable=not progress or not rows)
    with _PoolChecks(root, specs, builder_name, rows) as checks:
        try:
            topped_up = 0  # rows the pools table promised beyond those recounted
            for k, row in enumerate(rows):  # each pool's problems in pool order
                bar.set_postfix_str(row["pool"], refresh=False)
                checked = checks.result(k, lambda: bar.update(checks.rows_done() + topped_up - bar.n))
                result.problems.extend(checked.problems)
                if checked.sizes is None:  # the pool could not be read
                    continue
                _record_pool(result, row["pool"], checked.audit, *checked.sizes)
                # the rows the pools table promised, whatever the configs hold (check_pool names a mismatch)
                topped_up += max(0, int(row.get("n_candidates") or 0) + int(row.get("n_queries") or 0)
                                 - checked.counted)
                bar.update(checks.rows_done() + topped_up - bar.n)
        finally:
            bar.close()
    return result


@dataclass
class PoolChecked:
    """One pool's checks: its problems (the generic ones, then the builder's), and where it could
    be read, its (candidates, queries), its label-free audit and the rows recounted."""

    problems: list[Problem]
    sizes: tuple[int, int] | None = None
    audit: dict | None = None
    counted: int = 0


# In a worker process (forked for one validation, with the budget ``_PoolChecks`` set before the
# fork), the row groups it decoded last, for the next pools that read them.
_WORKER_ROW_GROUPS = RowGroupCache(ROW_GROUP_BYTES)


def row_group_budget(readers: int) -> int:
    """What each of ``readers`` reading processes keeps of the row groups it decoded last: a row
    group's worth, or less where all of them together would take more than a quarter of the
    memory available."""
    available = parallel.available_memory()
    return ROW_GROUP_BYTES if available is None else min(ROW_GROUP_BYTES, available // (4 * readers))


def _pool_checks(root: Path, specs: dict[str, ConfigSpec], builder_name: str, row: dict,
                 threads: int, cache: RowGroupCache | None = None) -> PoolChecked:
    """Every check of one pool, read once here (in a worker process, or a background thread,
    which passes its own ``cache``): ``check_pool`` (the recount, on ``threads`` threads), the
    builder's checks and the audit."""
    counted = [0]

    def advance(n: int) -> None:
        counted[0] += n
        parallel.advance(n)

    try:
        tables = read_pool(root, specs, row, _WORKER_ROW_GROUPS if cache is None else cache)
    except UserError as error:
        return PoolChecked([Problem(row["pool"], "files", str(error))])
    builder = get_builder(builder_name)
    problems = check_pool(tables, advance, threads=threads)
    problems += builder.validate_pool(row, tables.corpus, tables.queries, tables.qrels)
    audit = audit_pool(tables.corpus, tables.qrels, tables.queries, builder.design_signals)
    return PoolChecked(problems, (len(tables.corpus["_id"]), len(tables.queries["_id"])), audit, counted[0])


class _PoolChecks:
    """Every pool's checks (``_pool_checks``), each pool read once: in forked worker processes,
    one per core, each counting on one thread, so that no two counting threads (nor two Python
    checks) contend for one interpreter's lock; the largest pools first, so that no core is left
    with a large pool at the end; each worker keeps the row groups it decoded last, within
    ``row_group_budget``. Where fork is unavailable or one core is all there is, in a background
    thread counting on every core. ``result(k)``: pool ``k``'s ``PoolChecked``, the same either
    way."""

    def __init__(self, root: Path, specs: dict[str, ConfigSpec], builder_name: str, rows: list[dict]):
        self._workers = self._thread = None
        self._counted = [0]
        largest_first = sorted(range(len(rows)), key=lambda k: (-_rows_tokens(rows[k]), k))
        self._handles: dict[int, object] = {}
        if parallel.available_cores() >= 2 and parallel.can_fork():
            _WORKER_ROW_GROUPS.budget = row_group_budget(parallel.available_cores())  # before the fork
            self._workers = parallel.Workers(parallel.available_cores())
            for k in largest_first:
                self._handles[k] = self._workers.submit(_pool_checks, root, specs, builder_name, rows[k], 1)
            return
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="validate")
        cache = RowGroupCache(row_group_budget(1))  # this validation's own, gone with it

        def checks(row: dict) -> PoolChecked:
            checked = _pool_checks(root, specs, builder_name, row, counting_threads(), cache)
            self._counted[0] += checked.counted
            return checked

        for k in largest_first:
            self._handles[k] = self._thread.submit(checks, rows[k])

    def result(self, k: int, show: Callable[[], None]) -> PoolChecked:
        """Pool ``k``'s checks, calling ``show()`` while it waits."""
        handle = self._handles[k]
        while True:
            try:
                return handle.get(0.25) if self._workers is not None else handle.result(0.25)
            except (multiprocessing.TimeoutError, FuturesTimeout):
                show()

    def rows_done(self) -> int:
        return self._workers.done if self._workers is not None else self._counted[0]

    def __enter__(self) -> "_PoolChecks":
        return self

    def __exit__(self, *exc) -> None:
        if self._workers is not None:
            self._workers.__exit__(*exc)
        else:
            self._thread.shutdown(wait=False, cancel_futures=True)


def _rows_tokens(row: dict) -> float:
    """About how many tokens a pool of the pools table holds (what its recount costs)."""
    return float(row.get("n_candidates") or 0) * float(row.get("band_max") or 0)


def _record_pool(result: Validation, name: str, audit: dict, n_candidates: int, n_queries: int) -> None:
    """A validated pool's label-free audit (a failing rule is a problem) and its counts."""
    result.shortcuts[name] = audit
    for failing in audit.get("failing", []):
        result.problems.append(Problem(name, "shortcut", f"the content-blind rule '{failing['rule']}' finds the "
                                                         f"positive with P@1 {failing['p_at_1']:.2f} against "
                                                         f"chance {failing['chance']:.2f} (p = {failing['p_value']:.2g})"))
    result.checked["pools"] += 1
    result.checked["candidates"] += n_candidates
    result.checked["queries"] += n_queries


def check_readable(root: Path, specs: dict[str, ConfigSpec]) -> None:
    """Every data file a config names is there and is a parquet file (its footer reads): the
    build cannot be validated otherwise, which is one line naming the file."""
    import pyarrow.parquet as pq

    for path in sorted({spec.path for spec in specs.values()}):
        full = root / path
        if not full.is_file():
            names = sorted(spec.name for spec in specs.values() if spec.path == path)
            raise InvalidBuild(f"{full}: missing (config {', '.join(names[:3])}{' ...' if len(names) > 3 else ''})")
        try:
            pq.ParquetFile(full).close()
        except Exception as error:  # noqa: BLE001  (pyarrow raises several types for broken files)
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            if "size is 0 bytes" in detail:
                detail = "empty file"
            elif "magic bytes" in detail:
                detail = "not a parquet file, or a truncated one"
            raise InvalidBuild(f"{full}: cannot be read ({detail[:200]})") from None


def _fields(template: str) -> list[str]:
    """The names of a ``str.format`` template's fields: "validated {rows} in {configs}" -> rows, configs."""
    import string

    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def format_report(problems: list[Problem], checked: dict, limit: int = 50, counted: str = POOLS_COUNTED) -> str:
    """The validation report: what was checked (``counted``, filled in from ``checked``: the
    pipeline that validated says what it counts, ``Validation.counted``), then the problems."""
    checked = Counter(checked)
    head = counted.format_map({key: plural_counted(checked[key], key) for key in _fields(counted)}) + ": "
    if not problems:
        return head + "all invariants hold"
    if all(p.check == "file_hashes" for p in problems):  # damaged files: nothing was parsed (validate_build)
        head = "data files damaged since the build, so none was parsed: "
    by_check = Counter(p.check for p in problems)
    by_kind = ", ".join(f"{k}: {v}" for k, v in by_check.most_common())
    lines = [head + f"{plural_counted(len(problems), 'problems')} ({by_kind})"]
    lines += [f"  {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)
