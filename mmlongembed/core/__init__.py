"""Core: the data model and the yardsticks every stage shares. Imports nothing of the toolkit's
other packages.

- ``errors``: errors a user can act on, printed as one line;
- ``tokens``: the one yardstick for every length (Qwen3 tokenizer, image tokens);
- ``text``: lossless splitting into paragraphs and sentences; ``documents``: ordered segments with
  their token counts; ``pools``: queries, candidates and qrels of one length band;
- ``rng``: every random generator, derived from (seed, item identity); ``digests``: sha256;
- ``builder``: what a builder is, how builders register, the skips a build counts;
  ``synthetic``: the marker of generated sources; ``flags``: config dataclasses as flags;
- ``plugins``: named plug-ins found by name; ``parallel``: work over cores, independent of the
  split; ``moved``: the old import paths of moved modules, for one release.
"""
