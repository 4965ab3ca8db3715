"""What a run reports: ``tables`` (results.json, the paper's Tables 3, 4 and 12, plots),
``leaderboard`` (``mmle leaderboard``: runs merged beside the paper's rows), ``predictions``
(each model's pick per query) and ``training_overlap`` (the cells that are not zero-shot).
Imports ``scoring``, ``profiles`` and ``models``.
"""

from mmlongembed.core.moved import old_names_from

# `harness.report` was the tables' module
__getattr__ = old_names_from(__name__, "harness.report.tables")
