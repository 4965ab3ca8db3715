"""mmlongembed: build long-context multimodal embedding benchmarks and score models on them.

The packages are the stages the data passes through, in order; a stage imports only the stages
above it in this list (tests/test_import_graph.py holds each to that):

- ``core``: the data model and yardsticks every stage shares (errors, tokens, text, seeds, digests,
  documents, pools, what a builder is, flags, plug-in registries, work across cores);
- ``ops``: pure operations over documents (fit to length, insert a needle, replace a span with a
  donor, remove evidence, shuffle time), with an explicit generator and no I/O; ``needles``: the
  needles they insert;
- ``readers``: one module per source, its files or Hub rows into records; ``media``: PDF pages,
  video frames and clips; ``llm``: the LLM steps (versioned prompts, cache, replay);
- ``output``: the published layout and its writers (config names, output folder, parquet files,
  manifest, card, croissant.json, disclosure);
- ``checks``: the checks of a written build, the label-free shortcut audit, the build summary;
- ``build``: ``mmle build`` and ``mmle validate``: the benchmark pipeline and what every output
  kind's pipeline shares, the pool loop every builder shares, capacity checks; with it ``testing``
  (small generated sources for tests and examples);
- ``training``: training-set builds (EviAlign evidence); ``release``: ``mmle build mmlongembed``,
  every task of the paper in one release; ``video_tasks``: MTEB video tasks (``mmle mveb``);
- ``publish``: ``mmle push``, the loopback Hub, ``mmle reproduce``;
- ``cli`` (``mmle``), ``readme`` (the README's builder tables) and ``demo_sources``.

The builders themselves are the top-level ``builders`` package, one module per source; the
scoring harness is the top-level ``harness`` package. Modules that moved into these stages keep
their old import path for one release (``core.moved``; a DeprecationWarning names the new one).
"""

from mmlongembed.core import moved as _moved

__version__ = "0.1.0"

_moved.install({
    "mmlongembed.bm25": "mmlongembed.ops.bm25",
    "mmlongembed.build_checks": "mmlongembed.checks.build_checks",
    "mmlongembed.builder": "mmlongembed.core.builder",
    "mmlongembed.capacity": "mmlongembed.build.capacity",
    "mmlongembed.card": "mmlongembed.output.card",
    "mmlongembed.composite": "mmlongembed.release.composite",
    "mmlongembed.croissant": "mmlongembed.output.croissant",
    "mmlongembed.digests": "mmlongembed.core.digests",
    "mmlongembed.disclosure": "mmlongembed.output.disclosure",
    "mmlongembed.documents": "mmlongembed.core.documents",
    "mmlongembed.errors": "mmlongembed.core.errors",
    "mmlongembed.evialign": "mmlongembed.training.evialign",
    "mmlongembed.flags": "mmlongembed.core.flags",
    "mmlongembed.hub_server": "mmlongembed.publish.hub_server",
    "mmlongembed.layout": "mmlongembed.output.layout",
    "mmlongembed.manifest": "mmlongembed.output.manifest",
    "mmlongembed.mmeb_samples": "mmlongembed.training.mmeb_samples",
    "mmlongembed.ops.answers": "mmlongembed.ops.multisource.answers",
    "mmlongembed.ops.evidence": "mmlongembed.ops.multisource.evidence",
    "mmlongembed.ops.evidence_guard": "mmlongembed.ops.multisource.evidence_guard",
    "mmlongembed.ops.padding": "mmlongembed.ops.multisource.padding",
    "mmlongembed.ops.quote_supply": "mmlongembed.ops.multisource.quote_supply",
    "mmlongembed.ops.quotes": "mmlongembed.ops.multisource.quotes",
    "mmlongembed.ops.refill": "mmlongembed.ops.multisource.refill",
    "mmlongembed.outdir": "mmlongembed.output.outdir",
    "mmlongembed.parallel": "mmlongembed.core.parallel",
    "mmlongembed.pipeline": "mmlongembed.build.pipeline",
    "mmlongembed.plugins": "mmlongembed.core.plugins",
    "mmlongembed.pool_plan": "mmlongembed.build.pool_plan",
    "mmlongembed.pools": "mmlongembed.core.pools",
    "mmlongembed.release_plan": "mmlongembed.release.plan",
    "mmlongembed.release_tables": "mmlongembed.release.tables",
    "mmlongembed.report": "mmlongembed.checks.summary",
    "mmlongembed.reproduce": "mmlongembed.publish.reproduce",
    "mmlongembed.rng": "mmlongembed.core.rng",
    "mmlongembed.shortcuts": "mmlongembed.checks.shortcuts",
    "mmlongembed.sources": "mmlongembed.readers.sources",
    "mmlongembed.synthetic": "mmlongembed.core.synthetic",
    "mmlongembed.text": "mmlongembed.core.text",
    "mmlongembed.tokens": "mmlongembed.core.tokens",
    "mmlongembed.training_data": "mmlongembed.training.tables",
    "mmlongembed.validate": "mmlongembed.build.validate",
    "mmlongembed.wordstats": "mmlongembed.ops.wordstats",
})
