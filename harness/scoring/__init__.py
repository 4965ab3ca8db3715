"""What scoring is made of, below any model: a build read through ``datasets`` and checked
against the layout (``data``), the embedding cache (``cache``), the metrics with bootstrap
intervals (``metrics``), middle truncation (``truncation``), each model's own token counts
(``own_lengths``), and the embedding step every executor runs (``embedding``): token-budget calls
with out-of-memory back-off and throughput (``batching``), fed by input-assembly workers (``loader``).
Imports only mmlongembed's core, output and build stages.
"""
