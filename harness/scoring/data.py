"""Read a built benchmark only through `datasets` and check each pool against the layout.

What is read: a local folder, or a Hub repo at a revision (``repo@revision``), read from the Hub at
exactly that revision. A bare name is neither, and is refused in one line naming the local builds
it may mean; a Hub reference is checked with one request (no retries: offline or unreachable is one
line at once), and a copy that `datasets` falls back on from its cache is never scored.

A pool that breaks the contract raises `PoolError` with a one-line reason; the runner reports
it and skips the pool. Images are read undecoded (bytes), so they can be hashed for the
embedding cache and decoded only by the models that need them.
"""

from __future__ import annotations

import difflib
import fnmatch
import io
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import MODEL_COLUMNS, POOLS_CONFIG_COLUMNS, SPLIT

IMAGE_MODALITIES = ("image", "mixed")  # pool modalities whose candidates carry images


class PoolError(Exception):
    """A pool cannot be scored (layout, missing image, ...): reported and skipped, never a traceback."""


class ModelError(Exception):
    """The model failed on a pool's inputs: the pool is reported and skipped."""


@dataclass(frozen=True)
class Item:
    """One input to embed: a query or a candidate, with its images (encoded bytes) in placeholder order."""

    id: str
    text: str
    images: tuple[bytes, ...] = ()
    instruction: str = ""
    is_query: bool = False

    def pil_images(self):
        from PIL import Image

        return [Image.open(io.BytesIO(b)).convert("RGB") for b in self.images]


@dataclass
class PoolInfo:
    """One row of config `pools`."""

    name: str
    task: str
    dataset: str
    difficulty: str
    length: int
    modality: str
    query_modality: str
    depth: float | None = None
    extra: dict = field(default_factory=dict)
    n_queries: int = 0
    n_candidates: int = 0
    query_sample: int | None = None  # `mmle score --max-queries`: score a seeded sample of this many queries

    def sampled_queries(self, n_queries: int) -> list[int] | None:
        """The indices (in file order) of the queries a `--max-queries` run scores, or None for all:
        a sample drawn from the pool's name and size alone, so every model, run and process
        (device replicas, Ray actors) scores the same queries."""
        if self.query_sample is None or self.query_sample >= n_queries:
            return None
        from mmlongembed.core.rng import derive_rng

        chosen = derive_rng(0, "max-queries", self.name, self.query_sample).choice(n_queries, self.query_sample,
                                                                                   replace=False)
        return sorted(int(k) for k in chosen)

    @property
    def frame_sequences(self) -> bool:
        """A video pool whose candidates are ordered frame images (the temporal builders say so
        in the pool facts): any model that takes images embeds them, frame by frame, in order."""
        return self.modality == "video" and self.extra.get("candidate_form") == "frames"

    @property
    def modalities(self) -> set[str]:
        """What a model must take to embed this pool (queries and candidates)."""
        needed = {"text"}
        if self.modality in IMAGE_MODALITIES or self.query_modality == "image" or self.frame_sequences:
            needed.add("image")
        if self.modality == "video" and not self.frame_sequences:
            needed.add("video")
        return needed

    @property
    def selection(self) -> set[str]:
        """The modalities `--modalities` selects this pool by: a video pool is "video" even when
        its candidates are frame images (so `--modalities text,image` leaves it out)."""
        return self.modalities | ({"video"} if self.modality == "video" else set())

    def as_dict(self) -> dict:
        return {
            "pool": self.name, "task": self.task, "dataset": self.dataset, "difficulty": self.difficulty,
            "length": self.length, "depth": self.depth, "modality": self.modality,
            "query_modality": self.query_modality, "extra": self.extra,
        }


def parse_dataset_ref(ref: str) -> tuple[str, str | None]:
    """'out/govreport' -> (path, None); 'org/name@v1.0' -> ('org/name', 'v1.0'). A local path wins."""
    if os.path.exists(ref) or "@" not in ref:
        return ref, None
    path, _, revision = ref.rpartition("@")
    if not path or not revision:
        raise UserError(f"--dataset {ref!r}: expected a local path or repo@revision")
    return path, revision


def meant_as_path(ref: str) -> bool:
    """Whether ``ref`` names a local folder rather than a Hub repo: it starts with '.', '/' or
    '~', or its first component exists here (``out/govreprot`` when ``out/`` is a folder), so
    that a mistyped folder is reported at once instead of being looked up on the Hub."""
    if ref.startswith((".", "/", "~")) or os.path.isabs(ref):
        return True
    return os.path.exists(ref.replace(os.sep, "/").split("/", 1)[0])


LOCAL_BUILDS_SHOWN = 6  # the most local builds a "no such dataset" line names


def local_builds(near: str, root: str = ".") -> list[str]:
    """The builds (folders holding manifest.json) in ``root`` and one level below it
    (``out/govreport``), those whose name is ``near``'s last component first: what a user who
    typed ``near`` may have meant."""
    from pathlib import Path

    found = sorted({p.parent.as_posix() for pattern in ("*/manifest.json", "*/*/manifest.json")
                    for p in Path(root).glob(pattern)
                    if not any(part.startswith(".") for part in p.relative_to(root).parts)})
    name = near.rstrip("/").rsplit("/", 1)[-1]
    return sorted(found, key=lambda path: path.rsplit("/", 1)[-1] != name)


def _builds_hint(builds: list[str]) -> str:
    more = f" and {len(builds) - LOCAL_BUILDS_SHOWN} more" if len(builds) > LOCAL_BUILDS_SHOWN else ""
    return ", ".join(builds[:LOCAL_BUILDS_SHOWN]) + more


def check_is_build(ref: str, path: str) -> None:
    """A local folder is read only if its card declares a `pools` config (what every build and
    release has): otherwise one line naming the builds inside it, not `datasets`' "BuilderConfig
    'pools' not found"."""
    from pathlib import Path

    card = Path(path) / "README.md"
    if card.is_file() and "config_name: pools" in card.read_text(encoding="utf-8", errors="replace"):
        return
    builds = local_builds(ref, root=path)
    hint = f"builds inside it: {_builds_hint(builds)}" if builds else "mmle build DATASET writes out/DATASET"
    raise UserError(f"--dataset {ref!r}: not an mmle build (no README.md card with a `pools` config); {hint}")


def _no_such_dataset(ref: str, why: str) -> UserError:
    """One line: why ``ref`` is not read, and the local builds it may have meant."""
    builds = local_builds(ref)
    if not builds:
        hint = "no build here (mmle build DATASET writes out/DATASET)"
    else:
        hint = "local builds here: " + _builds_hint(builds)
        if builds[0].rsplit("/", 1)[-1] == ref.rstrip("/").rsplit("/", 1)[-1]:
            hint = f"did you mean {builds[0]}? ({hint})"
    return UserError(f"--dataset {ref!r}: {why}; {hint}")


def _hub_offline() -> bool:
    from huggingface_hub import constants

    # the constant is read when huggingface_hub is imported; the variable may be set since
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES",
                                                                                              "TRUE")


def check_hub_reference(ref: str, repo: str, revision: str) -> None:
    """One request for ``repo`` at ``revision``, without retries: offline, unreachable, or no
    such repo or revision is one line at once (the download clients would retry a refused
    connection for minutes, then fall back on a cached copy of any revision)."""
    if _hub_offline():
        raise UserError(f"--dataset {ref!r}: the Hub is offline (HF_HUB_OFFLINE), and a Hub repo is read only "
                        f"from the Hub at exactly its revision, never from a cache; download it "
                        f"(hf download {repo} --repo-type dataset --revision {revision} --local-dir DIR) "
                        "and score DIR")
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(repo, revision=revision, timeout=30)
    except Exception as exc:  # noqa: BLE001  (any failure to reach the repo at its revision: one line)
        raise UserError(f"--dataset {ref!r}: cannot read {repo} at {revision} from the Hub "
                        f"({type(exc).__name__}: {_one_line(exc)})") from None


def check_local_files(ref: str, path: str) -> None:
    """A local build whose manifest records its data files' sha256: a file damaged or missing
    since the build is one line, found before any file is parsed (a damaged parquet file can
    otherwise parse into wrong rows, or fail deep inside pyarrow). A folder without a manifest
    (a hand-made benchmark, a Hub download) is read as it is."""
    from pathlib import Path

    from mmlongembed.build.validate import InvalidBuild, check_files, load_manifest

    if not (Path(path) / "manifest.json").is_file():
        return
    try:
        manifest = load_manifest(Path(path))
    except InvalidBuild as error:
        raise UserError(f"--dataset {ref!r}: {error}") from None
    if not manifest.get("files"):
        return
    changed = [p.detail for p in check_files(Path(path), {}, manifest)]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise UserError(f"--dataset {ref!r}: {changed[0]}{more}; the build is damaged: rebuild it or copy it again "
                        f"(mmle validate {path} lists every file)")


class Benchmark:
    """A built benchmark as `datasets` sees it: a local directory or a Hub repo at a revision."""

    def __init__(self, ref: str):
        self.ref = ref
        path, self.revision = parse_dataset_ref(ref)
        self.path = os.path.expanduser(path) if self.revision is None else path  # a quoted '~/out/x'
        if self.revision is not None:
            check_hub_reference(ref, self.path, self.revision)
        elif not os.path.exists(self.path):
            if meant_as_path(self.path):
                raise _no_such_dataset(ref, f"no such directory {os.path.abspath(os.path.expanduser(self.path))}")
            # a bare name is neither a folder nor a pinned Hub reference: `datasets` would look it
            # up on the Hub (retrying for minutes offline), then score whatever copy its cache holds
            raise _no_such_dataset(ref, "no such directory, and a Hub repo is read only at a revision "
                                        "(OWNER/NAME@TAG or @COMMIT)")
        else:
            check_is_build(ref, self.path)
            check_local_files(ref, self.path)

    def load(self, config: str):
        import datasets

        datasets.disable_progress_bars()  # our own bars report progress; theirs would interleave
        # A build's data files are named by their content (mmlongembed.output.layout), so `datasets`,
        # which caches a local directory by its name, config and data file paths, never returns
        # the rows of another build of the same name.
        builder = self._builder(config)
        if _from_datasets_cache(builder):
            # the Hub did not answer and `datasets` fell back on its cache of this repo name,
            # whatever revision (or local folder of that name) filled it
            raise UserError(f"--dataset {self.ref!r}: the Hub did not answer for {self.path} at {self.revision}; "
                            "a cached copy of unknown revision is never scored")
        builder.download_and_prepare()
        return builder.as_dataset(split=SPLIT)

    @cached_property
    def _dataset_module(self):
        """`datasets`' view of the folder or repo at its revision: the card's configs with their
        data files. ``load_dataset_builder`` makes it anew on every call, and a release card lists
        thousands of configs (seconds of YAML each time): it is made once here."""
        from datasets.load import dataset_module_factory

        return dataset_module_factory(self.path, revision=self.revision)

    def _builder(self, config: str):
        """What ``datasets.load_dataset_builder(path, config, revision=...)`` returns (its steps, from
        the module made once)."""
        from datasets.load import get_dataset_builder_class

        module = self._dataset_module
        kwargs = dict(module.builder_kwargs)
        data_dir, data_files = kwargs.pop("data_dir", None), kwargs.pop("data_files", None)
        kwargs.pop("config_name", None)
        dataset_name = kwargs.pop("dataset_name", None)
        info = module.dataset_infos.get(config) if module.dataset_infos and not data_dir and not data_files else None
        builder = get_dataset_builder_class(module, dataset_name=dataset_name)(
            dataset_name=dataset_name, config_name=config, data_dir=data_dir, data_files=data_files,
            hash=module.hash, info=info, **kwargs)
        builder._use_legacy_cache_dir_if_possible(module)
        return builder

    @cached_property
    def pools(self) -> list[PoolInfo]:
        try:
            table = self.load("pools")
        except UserError:
            raise
        except FileNotFoundError as exc:
            raise UserError(f"--dataset {self.ref!r}: not found ({_one_line(exc)})") from None
        except Exception as exc:  # noqa: BLE001  (any loader failure is a user-facing one-liner)
            raise UserError(f"--dataset {self.ref!r}: cannot load config 'pools' ({_one_line(exc)})") from None
        missing = [c for c in POOLS_CONFIG_COLUMNS if c not in table.column_names]
        if missing:
            raise UserError(f"--dataset {self.ref!r}: config 'pools' lacks columns {missing}")
        infos = []
        for row in table:
            try:
                extra = json.loads(row.get("extra") or "{}")
            except json.JSONDecodeError:
                extra = {}
            depth = row.get("depth")
            infos.append(PoolInfo(
                name=row["pool"], task=row["task"], dataset=row["dataset"], difficulty=row["difficulty"],
                length=int(row["length"]), modality=row["modality"], query_modality=row["query_modality"],
                depth=None if depth is None else float(depth), extra=extra if isinstance(extra, dict) else {},
                n_queries=int(row.get("n_queries") or 0), n_candidates=int(row.get("n_candidates") or 0),
            ))
        return infos

    def select(self, patterns: list[str]) -> list[PoolInfo]:
        chosen = [p for p in self.pools if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)]
        if not chosen:
            names = [p.name for p in self.pools]
            close = [match for pattern in patterns
                     for match in difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)]
            hint = f"did you mean {', '.join(dict.fromkeys(close))}? " if close else ""
            listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            raise UserError(f"--pools {' '.join(patterns)!r} matches no pool of {self.ref}; {hint}"
                            f"(it has {len(names)}: {listed}; patterns take * and ?)")
        return chosen

    def open_pool(self, info: PoolInfo) -> "PoolData":
        return PoolData(self, info)


def _from_datasets_cache(builder) -> bool:
    """Whether ``datasets`` made ``builder`` from its own cache (its fallback when the Hub does not
    answer: "Using the latest cached version of the dataset"), not from the files asked for."""
    return type(builder).__module__.startswith("datasets.packaged_modules.cache")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _undecoded_images(table):
    """Images as {'bytes', 'path'} dicts: hashable for the cache, decoded only where a model needs them."""
    import datasets

    feature = table.features.get("images")
    inner = getattr(feature, "feature", None)
    if isinstance(inner, datasets.Image):
        return table.cast_column("images", datasets.List(datasets.Image(decode=False)))
    return table


def _image_bytes(value: dict | None, where: str) -> bytes:
    if value and value.get("bytes"):
        return value["bytes"]
    path = (value or {}).get("path")
    if path and os.path.exists(path):
        with open(path, "rb") as handle:
            return handle.read()
    raise PoolError(f"missing image in {where}")


class InMemoryPool:
    """The side access of ``PoolData`` for a pool held in memory (``queries`` and ``candidates`` lists of
    items, ``query_tokens`` and ``candidate_tokens`` its yardstick lengths): a test's pool, a hand-made one."""

    queries: list
    candidates: list

    def iter_side(self, side: str, batch_size: int, indices: list[int] | None = None) -> Iterator[list[Item]]:
        items = self.queries if side == "queries" else self.candidates
        chosen = items if indices is None else [items[i] for i in indices]
        for start in range(0, len(chosen), batch_size):
            yield list(chosen[start:start + batch_size])

    def iter_queries(self, batch_size: int) -> Iterator[list[Item]]:
        return self.iter_side("queries", batch_size)

    def iter_candidates(self, batch_size: int) -> Iterator[list[Item]]:
        return self.iter_side("candidates", batch_size)

    def side_tokens(self, side: str) -> list[int]:
        return list(self.query_tokens if side == "queries" else self.candidate_tokens)


class PoolData:
    """The three tables of one pool, checked against the layout, read in batches (memory bounded)."""

    def __init__(self, benchmark: Benchmark, info: PoolInfo):
        self.info = info
        self.benchmark = benchmark
        name = info.name
        tables = {}
        for part, columns in MODEL_COLUMNS.items():
            try:
                table = benchmark.load(f"{name}-{part}")
            except UserError:
                raise  # not a fault of this pool: the run stops (a cached copy is never scored)
            except Exception as exc:  # noqa: BLE001
                raise PoolError(f"cannot load config '{name}-{part}': {_one_line(exc)}") from None
            missing = [c for c in columns if c not in table.column_names]
            if missing:
                raise PoolError(f"layout: config '{name}-{part}' lacks columns {missing}")
            tables[part] = table
        self.corpus = _undecoded_images(tables["corpus"])
        self.queries = _undecoded_images(tables["queries"])
        every_query = list(self.queries["_id"])
        self.queries_in_pool = len(every_query)
        sample = info.sampled_queries(self.queries_in_pool)
        if sample is not None:
            self.queries = self.queries.select(sample)
        self.corpus_ids: list[str] = list(self.corpus["_id"])
        self.query_ids: list[str] = list(self.queries["_id"])
        self._check_ids()
        self.positive_index = self._positives(tables["qrels"], every_query)

    def audit(self) -> dict[str, list] | None:
        """The pool's `<pool>-audit` config (what each row is), for breakdowns only; None where the
        build has none (an older layout) or it cannot be read. Never used to score."""
        try:
            table = self.benchmark.load(f"{self.info.name}-audit")
        except Exception:  # noqa: BLE001  (a breakdown is optional)
            return None
        needed = ("_id", "role", "group", "variant")
        if any(c not in table.column_names for c in needed):
            return None
        try:
            optional = [c for c in ("kind", "internal_id") if c in table.column_names]
            return {c: table[c] for c in (*needed, *optional)}
        except Exception:  # noqa: BLE001  (an unreadable audit file: no breakdown)
            return None

    def needle_ranges(self) -> dict[str, tuple[int, int]] | None:
        """Per candidate id, the character range of its needle in its text, as the needle builder
        recorded it in the audit config (`needle_char_range` in `provenance`); None where the pool
        has none (not a grid pool, an older layout, an unreadable audit). Never used to score."""
        try:
            table = self.benchmark.load(f"{self.info.name}-audit")
            if "provenance" not in table.column_names:
                return None
            ranges = {}
            for cid, provenance in zip(table["_id"], table["provenance"]):
                recorded = json.loads(provenance) if isinstance(provenance, str) and provenance else {}
                if isinstance(recorded, dict) and recorded.get("needle_char_range"):
                    ranges[cid] = tuple(recorded["needle_char_range"])
        except Exception:  # noqa: BLE001  (a breakdown is optional)
            return None
        return ranges or None

    def _check_ids(self):
        for kind, ids in (("candidate", self.corpus_ids), ("query", self.query_ids)):
            if not ids:
                raise PoolError(f"layout: pool has no {kind}s")
            if len(set(ids)) != len(ids):
                raise PoolError(f"layout: duplicate {kind} ids")

    def _positives(self, qrels, every_query: list[str]) -> list[int]:
        """Index in the corpus of each query's single positive (the contract: exactly one);
        ``every_query``: the pool's queries, those not sampled included (their qrels are known)."""
        where = {cid: i for i, cid in enumerate(self.corpus_ids)}
        positives: dict[str, list[str]] = {}
        for qid, cid, score in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]):
            if score > 0:
                positives.setdefault(qid, []).append(cid)
        index = []
        for qid in self.query_ids:
            found = positives.get(qid, [])
            if len(found) != 1:
                raise PoolError(f"layout: query {qid!r} has {len(found)} positives in qrels (expected exactly 1)")
            if found[0] not in where:
                raise PoolError(f"layout: qrels name candidate {found[0]!r}, which is not in the corpus")
            index.append(where[found[0]])
        unknown = set(positives) - set(every_query)
        if unknown:
            raise PoolError(f"layout: qrels name unknown query {sorted(unknown)[0]!r}")
        return index

    def _items(self, table, is_query: bool, batch_size: int, indices=None) -> Iterator[list[Item]]:
        columns = ["_id", "text", "images"] + (["instruction"] if is_query else [])
        table = table.select_columns(columns)
        if indices is None:
            batches = table.iter(batch_size=batch_size)
        else:  # rows in the given order, read a batch at a time from the memory-mapped table
            batches = (table.select(indices[start:start + batch_size])[:]
                       for start in range(0, len(indices), batch_size))
        config = f"{self.info.name}-{'queries' if is_query else 'corpus'}"
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001  (a damaged file decodes into anything: one line)
                raise PoolError(f"cannot read config '{config}': {_one_line(exc)}") from None
            items = []
            for i, item_id in enumerate(batch["_id"]):
                text = batch["text"][i] or ""
                images = batch["images"][i] or []
                if text.count(IMAGE_PLACEHOLDER) != len(images):
                    raise PoolError(
                        f"layout: {item_id!r} has {text.count(IMAGE_PLACEHOLDER)} image placeholders "
                        f"but {len(images)} images")
                items.append(Item(
                    id=item_id, text=text, is_query=is_query,
                    images=tuple(_image_bytes(im, repr(item_id)) for im in images),
                    instruction=(batch["instruction"][i] or "") if is_query else "",
                ))
            yield items

    def iter_queries(self, batch_size: int) -> Iterator[list[Item]]:
        return self._items(self.queries, True, batch_size)

    def iter_candidates(self, batch_size: int) -> Iterator[list[Item]]:
        return self._items(self.corpus, False, batch_size)

    def iter_side(self, side: str, batch_size: int, indices: list[int] | None = None) -> Iterator[list[Item]]:
        """The items of one side ("queries" or "candidates") in batches: all in pool order, or the rows
        ``indices`` in that order."""
        is_query = side == "queries"
        return self._items(self.queries if is_query else self.corpus, is_query, batch_size, indices)

    def side_tokens(self, side: str) -> list[int]:
        """Each item's length on the benchmark's yardstick, for one side."""
        return self.query_tokens if side == "queries" else self.candidate_tokens

    @property
    def query_tokens(self) -> list[int]:
        """Each query's length on the benchmark's yardstick (its `n_tokens` column)."""
        return [int(n) for n in self.queries["n_tokens"]]

    @property
    def candidate_tokens(self) -> list[int]:
        return [int(n) for n in self.corpus["n_tokens"]]
