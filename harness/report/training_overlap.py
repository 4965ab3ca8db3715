"""Training overlap: which model x column cells of a leaderboard are not zero-shot, because the
column's source is among the training data the model's authors declare (as mteb's zero-shot
marker does; what a model declares: harness.profiles.training_data). `mmle leaderboard` marks
the cells.
"""

from __future__ import annotations

import re

# declared_training_data: imported here too, as harness.training_overlap had it (for one release)
from harness.profiles.training_data import declared_training_data, folded_name  # noqa: F401
from harness.report import tables as report

OVERLAP_MARK = "‡"
OVERLAP_NOTE = (f"{OVERLAP_MARK}: the column's source is in the model's declared training data (not zero-shot; "
                "as mteb's zero-shot marker).")
# The names a training set may give a column's source, beyond the paper's column title and the
# source's own name (harness.report.tables.PAPER_DATASETS). Matched on letters and digits, case-folded,
# as a prefix (HotpotQA also covers mteb's HotpotQAHardNegatives).
SOURCE_ALIASES = {
    "mmlongbench": ("MMLongBench-Doc", "MMLongBench"),
    "activitynet": ("ActivityNet Captions", "ActivityNet"),
    "needle": ("NeedleBench",),
}
VG_SOURCES = {"NeedleBench": ("needle", ("NeedleBench",)), "MM-NIAH*": ("needle", ("MM-NIAH",))}


def column_source_names(column: str) -> tuple[str, ...]:
    """The names a training set may give a Table 3 column's source (`HotpotQA Easy` -> HotpotQA)."""
    if column in VG_SOURCES:
        return VG_SOURCES[column][1]
    title = re.sub(r" (Easy|Hard)$", "", column)
    for pairs in report.PAPER_DATASETS.values():
        for dataset, paper_title in pairs:
            if title == paper_title:
                return (paper_title, dataset, *SOURCE_ALIASES.get(dataset, ()))
    return (title, *SOURCE_ALIASES.get(title, ()))


def trained_on(column: str, training_data) -> bool:
    """Whether a column's source is among the declared training data."""
    names = [folded_name(n) for n in column_source_names(column) if folded_name(n)]
    return any(folded_name(declared).startswith(name) for declared in training_data for name in names)
