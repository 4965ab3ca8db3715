"""MTEB video tasks in the MVEB family, built from local video collections (``mmle mveb``).

- ``collection``: reading a labelled collection (class folders, or a CSV/JSON table);
- ``build``: the pipeline (decode once, cut clips, filter, split, cap) and its options;
- ``tasks``: the task families (classification, clustering, pairs, zero-shot, retrieval, QA) in
  V and VA variants, as rows plus generated mteb ``TaskMetadata``;
- ``temporal``: Temporal Summarization builds exported as an mteb retrieval task;
- ``writer``: parquet, card, ``tasks.json``, ``manifest.json``;
- ``mteb_tasks``: the loader copied into every build (needs only mteb and datasets);
- ``cli``: ``mmle mveb build | export-temporal | eval | rank | prune``.

The pure operations are in ``mmlongembed.ops.mveb``, clip containers in
``mmlongembed.media.clips``; evaluation (model wrappers) in ``harness.mteb.video`` and ranking
and pruning in ``harness.mteb.ranking``. Imports the build stage and those below it (its
``cli`` is a command line, above them all). See docs/MVEB.md.
"""
