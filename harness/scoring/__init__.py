"""What scoring is made of, below any model: a build read through ``datasets`` and checked
against the layout (``data``), the embedding cache (``cache``), the metrics with bootstrap
intervals (``metrics``), middle truncation (``truncation``) and each model's own token counts
(``own_lengths``). Imports only mmlongembed's core, output and build stages.
"""
