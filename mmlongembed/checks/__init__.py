"""Checks of a written build: every invariant recounted (``build_checks``), the label-free
shortcut audit (``shortcuts``: can a rule that never reads the query find the positive?), and the
summary a user reads after a build (``summary``: tables, histograms, BM25 and length baselines).
Imports core, ops and output.
"""
