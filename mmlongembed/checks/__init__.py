"""Checks of a written build: every invariant recounted (``build_checks``), the label-free
shortcut audit (``shortcuts``: can a rule that never reads the query find the positive?), and the
summary a user reads after a build (``summary``: tables, histograms, BM25 and length baselines),
and a lexical tier's pool levelled against the audit's rules and BM25's top before it is written
(``levelling``, which builders call). Imports core, ops and output.
"""
