"""The scoring harness: load a built benchmark through `datasets.load_dataset`, embed, score, report.

It never imports builder code: the published layout (docs/LAYOUT.md) is the only contract. Its
packages, each importing only those above it:

- ``scoring``: a build read as a model sees it (``data``), the embedding cache, the metrics,
  middle truncation and each model's own token count;
- ``profiles``: one declarative profile per model (Table 2's facts, each with its source) and
  ``mmle models``;
- ``models``: the adapters behind one interface (bm25, sentence-transformers, transformers,
  vLLM, OpenAI-compatible and Doubao APIs, multi-vector, boundary readout), the profile runner,
  diagnostic rows and tiny random models;
- ``execution`` (the embedding step on several devices, each a process of its own, or on Ray),
  ``report`` (tables and plots, the leaderboard, predictions, training-overlap marks),
  ``explore`` (the static site of ``mmle explore``) and ``mteb`` (the pools and the video tasks
  through mteb's evaluators, MVEB ranking);
- then this package's own modules: ``runner`` (every pool with every model), ``cli``
  (``mmle score``), ``table3`` (``make table3``) and ``fixtures`` (small benchmarks for tests).

Modules that moved into these packages keep their old import path for one release.
"""

from mmlongembed.core import moved as _moved

_moved.install({
    "harness.boundary": "harness.models.boundary",
    "harness.cache": "harness.scoring.cache",
    "harness.data": "harness.scoring.data",
    "harness.diagnostics": "harness.models.diagnostics",
    "harness.doubao_model": "harness.models.doubao_model",
    "harness.explore_marks": "harness.explore.marks",
    "harness.explore_results": "harness.explore.results",
    "harness.fake_server": "harness.models.fake_server",
    "harness.leaderboard": "harness.report.leaderboard",
    "harness.metrics": "harness.scoring.metrics",
    "harness.mteb_retrieval": "harness.mteb.retrieval",
    "harness.mteb_video": "harness.mteb.video",
    "harness.multivector": "harness.models.multivector",
    "harness.mveb_ranking": "harness.mteb.ranking",
    "harness.openai_model": "harness.models.openai_model",
    "harness.own_lengths": "harness.scoring.own_lengths",
    "harness.predictions": "harness.report.predictions",
    "harness.profile_loader": "harness.models.profile_loader",
    "harness.profile_model": "harness.models.profile_model",
    "harness.profile_multivector": "harness.models.profile_multivector",
    "harness.profiles_cli": "harness.profiles.cli",
    "harness.qwen_vision": "harness.models.qwen_vision",
    "harness.tiny_models": "harness.models.tiny_models",
    "harness.training_overlap": "harness.report.training_overlap",
    "harness.truncation": "harness.scoring.truncation",
})
