"""What a builder is, how builders register, and the common build options.

A builder is one module in ``builders/`` that names its sources, wires operations and declares
its pool plan. It subclasses ``Builder`` and registers with ``@register``; a duplicate name
fails loudly at import time.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable

from mmlongembed.core.pools import Pool


class StepBar:
    """A progress bar moved by hand (``update``, ``close``, ``n``). A step that stops before its
    total (a pool that fills up early) closes as done at what it did."""

    def __init__(self, bar):
        self._bar = bar

    @property
    def n(self) -> int:
        return self._bar.n

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        if not self._bar.disable and self._bar.total and self._bar.n < self._bar.total:
            self._bar.total = self._bar.n
            self._bar.refresh()
        self._bar.close()


@dataclass
class BuildReport:
    """Skips and notes collected during a build; rendered in the summary and the manifest."""

    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    llm_steps: list[dict] = field(default_factory=list)
    shortcuts: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)  # a builder's own figures (manifest and card)
    progress: bool = True  # whether long steps show progress bars (the CLI's --no-progress)
    # the CLI's --skip-unreadable-files: a source file that cannot be parsed at all is skipped
    # (named in lost_files) instead of stopping the build (mmlongembed.readers.sources.unreadable_file)
    skip_unreadable_files: bool = False
    lost_files: list[tuple[str, str]] = field(default_factory=list)  # (path, why it cannot be read)

    def bar(self, items, description: str, unit: str, min_items: int = 50):
        """A progress bar over a long step: hidden for short ones and when progress is off."""
        from tqdm.auto import tqdm

        items = list(items)
        return tqdm(items, desc=description, unit=unit, disable=not self.progress or len(items) < min_items)

    def progress_bar(self, total: int, description: str, unit: str, min_items: int = 50):
        """A progress bar moved by hand (``update``, ``close``) over a step of at most ``total``
        items (a step that ends early closes at what it did): hidden for short steps and when
        progress is off."""
        from tqdm.auto import tqdm

        return StepBar(tqdm(total=total, desc=description, unit=unit, disable=not self.progress or total < min_items))

    def skip(self, reason: str, item: str = "") -> None:
        self.skipped[reason] += 1
        if item:
            bucket = self.examples.setdefault(reason, [])
            if len(bucket) < 5:
                bucket.append(item)

    def skip_counts(self) -> str:
        """The skips so far on one line, most frequent first (``missing_quote_image: 3,
        evidence_count_outside_2_to_5: 1``), or ``nothing skipped``: for a one-line error that
        must say what the sources lost on the way."""
        ranked = sorted(self.skipped.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{reason}: {count}" for reason, count in ranked) or "nothing skipped"

    def as_dict(self) -> dict:
        return {
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_examples": {k: v for k, v in sorted(self.examples.items())},
            "lost_files": [f"{Path(path).name} ({why})" for path, why in self.lost_files],
            "notes": self.notes,
            "llm_steps": self.llm_steps,
            "shortcuts": self.shortcuts,
            "stats": self.stats,
        }


@dataclass
class CommonConfig:
    """Options every builder has. Field metadata ``help`` becomes the CLI help text."""

    OPTIONS_TITLE = "options every builder has"  # its flags' group in --help (mmlongembed.core.flags)

    seed: int = field(default=0, metadata={"help": "seed from which every random choice is derived"})
    sources: str | None = field(
        default=None,
        metadata={"help": "directory of local source files in the source's original format; "
                          "without it the builder reads the Hub dataset at its pinned revision"},
    )
    max_queries_per_pool: int = field(default=120, metadata={"help": "cap on queries per pool (paper: 120)"})


@dataclass
class Problem:
    pool: str
    check: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.pool}] {self.check}: {self.detail}"


class Builder:
    name: ClassVar[str]  # registry key and CLI name
    version: ClassVar[str]  # bump when a change alters built data
    task: ClassVar[str]
    title: ClassVar[str]  # benchmark name shown in the card
    config_class: ClassVar[type] = CommonConfig
    card_template: ClassVar[str]  # file name in cards/
    licence: ClassVar[str] = "other"
    # the builder's row in the README's builder tables (``make readme`` writes them from these):
    # what it makes, opening with its task's name, and the local source formats it reads
    summary: ClassVar[str] = ""
    source_formats: ClassVar[str] = ""
    languages: ClassVar[tuple[str, ...]] = ("en",)
    # the pipeline of this builder's output kind (a mmlongembed.build.pipeline.Pipeline), which builds,
    # keeps and validates its output: None, a benchmark of pools (build_pools, the blind layout;
    # mmlongembed.build.run.BENCHMARK); mmlongembed.training.pipeline.TRAINING, a training set (build_training,
    # split `train`); mmlongembed.release.composite.RELEASE_PIPELINE, a release of several builds
    pipeline: ClassVar[Any] = None
    # word statistics (mmlongembed.ops.wordstats) that the paper's own design moves in its hard
    # negatives (GovReport's: a quarter to a half of another report): the shortcut audit reports
    # their readings (``design_signals``) instead of failing the build on them; the card says so
    design_signals: ClassVar[tuple[str, ...]] = ()
    # the shortest ``--lengths`` target its recipe makes sense at, and why (one line before the
    # sources are read: ``capacity.check_shortest_length``); 1 where only positive lengths are asked
    shortest_length: ClassVar[int] = 1
    shortest_length_reason: ClassVar[str] = ""

    def load_sources(self, config, report: BuildReport) -> Any:
        """All I/O happens here: read local files or the Hub at a pinned revision."""
        raise NotImplementedError

    def source_identity(self, config) -> dict:
        """What pins the inputs: Hub repo + revision, or sha256 of local files."""
        raise NotImplementedError

    def input_paths(self, config) -> dict[str, list[str]]:
        """The local paths the build reads, by the flag that names them: each must exist, checked
        before anything about the output (``pipeline.check_inputs``), so that a mistyped path is
        named as such, not as a conflict with an existing build. Here ``--sources``; a builder
        with more path options adds them."""
        sources = getattr(config, "sources", None)
        if not sources:
            return {}
        return {"--sources": [sources] if isinstance(sources, (str, Path)) else list(sources)}

    def output_tokenizer(self, config) -> dict | None:
        """The identity of the tokenizer whose token ids a training build's tables hold, where it
        is not the Qwen3 yardstick (a student's); what the manifest records and the up-to-date
        check compares. None: the yardstick."""
        return None

    def run_steps(self, sources: Any, config, report: BuildReport) -> Any:
        """The builder's declared steps, run after ``load_sources`` and the length check and
        before ``build_pools`` (a training builder's ``build_training``): what calls out but needs
        the sources first (an LLM writing the queries, a teacher's evidence). Returns what
        ``build_pools`` takes; by default the sources, unchanged."""
        return sources

    def build_pools(self, sources: Any, config, report: BuildReport) -> list[Pool]:
        """Pure: what ``load_sources`` (and ``run_steps``) gave in, pools out, every random
        choice from derive_rng(seed, ...); what reads files or calls out belongs in those two."""
        raise NotImplementedError

    def largest_length(self, sources: Any, config):
        """The largest ``--lengths`` target the loaded sources can fill (a
        ``mmlongembed.build.capacity.LengthLimit``), or None where the sources set no bound; checked
        before any pool is built (``capacity.check_lengths``)."""
        return None

    def memory_needed(self, config) -> int | None:
        """About how many bytes of documents the build holds at once, where the sources do not
        bound it (``capacity.check_lengths`` refuses a build that cannot fit); None: not known."""
        return None

    def output_estimate(self, sources: Any, config):
        """What the build would write and hold (a ``mmlongembed.build.capacity.OutputEstimate``: its
        largest candidate's bytes, its peak memory), estimated from the loaded sources before
        anything is rendered; None: not known. ``capacity.check_lengths`` refuses a build whose
        output could not be read back or held."""
        return None

    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        """Builder-specific invariants, checked on the data as written (column dicts)."""
        return ()

    def build_training(self, sources: Any, config, report: BuildReport):
        """Training builders (``pipeline = TRAINING``): what ``run_steps`` gave in (pure), a
        ``mmlongembed.training.tables.TrainingData`` out, every random choice from derive_rng(seed, ...)."""
        raise NotImplementedError

    def validate_training(self, tables: dict[str, dict[str, list]], manifest: dict) -> Iterable[Problem]:
        """Training builders' invariants, on the tables as written (config -> column -> values)."""
        return ()

    def example_config(self, directory) -> Any:
        """A config for a tiny build from generated sources written into ``directory`` (a few
        seconds on a laptop); the registry-wide test builds and validates it for every builder."""
        raise NotImplementedError

    def synthetic_parts(self, config, pools: list[Pool], report: BuildReport) -> list[str]:
        """What in this build is generated or test-only rather than real source data, one
        sentence each (the manifest's ``synthetic``; ``mmle push`` refuses a build that lists
        anything unless ``--allow-synthetic``). Here: sources whose root holds a SYNTHETIC marker
        (what ``mmlongembed.testing`` and the demo-source writers leave); builders that make
        fallback content (``mmlongbench``'s ``--llm none`` queries) add theirs."""
        marker = self.sources_marker(config)
        return [f"sources: {marker.split('. ')[0].rstrip('.')}"] if marker else []

    def sources_marker(self, config) -> str:
        """The text of the SYNTHETIC marker of this build's sources ("" when they are real): here
        the one in the sources root; builders that know which files they read look further."""
        from mmlongembed.core.synthetic import synthetic_marker

        return synthetic_marker(getattr(config, "sources", None))

    def card_context(self, config, pools: list[Pool], report: BuildReport) -> dict:
        """Extra variables for this builder's card template (``report`` holds the build's
        skips, LLM steps and shortcut checks)."""
        return {}


_REGISTRY: dict[str, type[Builder]] = {}


def register(cls: type[Builder]) -> type[Builder]:
    if "output_kind" in vars(cls):  # the string switch the pipelines replaced: never build it as a benchmark
        raise RuntimeError(f"builder {cls.__name__} sets output_kind, which is gone: name its pipeline instead "
                           "(pipeline = TRAINING from mmlongembed.training.pipeline; a benchmark names none)")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise RuntimeError(f"two builders are registered as {cls.name!r}: {_REGISTRY[cls.name]} and {cls}")
    _REGISTRY[cls.name] = cls
    return cls


# Where builders live, imported by name on first use (as mmlongembed.core.plugins finds its plug-ins):
# this module defines what a builder is and must not import the builders, which subclass it.
# Importing the ``builders`` package imports each of its public modules; a package of one's own
# registers its builders through the ``mmlongembed.builders`` entry-point group.
BUILDER_HOMES = ("builders", "mmlongembed.release.composite")
ENTRY_POINT_GROUP = "mmlongembed.builders"


def registered() -> dict[str, type[Builder]]:
    import importlib
    from importlib.metadata import entry_points

    for home in BUILDER_HOMES:
        importlib.import_module(home)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        entry.load()
    return dict(sorted(_REGISTRY.items()))


def get_builder(name: str) -> Builder:
    from mmlongembed.core.errors import UserError

    known = registered()
    if name not in known:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(known)}")
    return known[name]()


def config_from_dict(config_class: type, values: dict):
    """``config_class`` from ``values`` (unknown keys ignored); a list given for a tuple field, as a
    manifest's JSON records it, becomes the tuple the command line would have made."""
    import typing

    hints = typing.get_type_hints(config_class)
    names = {f.name for f in dataclasses.fields(config_class)}
    return config_class(**{k: tuple(v) if isinstance(v, list) and typing.get_origin(hints[k]) is tuple else v
                           for k, v in values.items() if k in names})
