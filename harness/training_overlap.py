"""Training overlap: which model x column cells of a leaderboard are not zero-shot, because the
column's source is among the training data the model's authors declare (as mteb's zero-shot
marker does). A model declares them in a `training_data` attribute (or its profile's): dataset
names, or records with a `dataset` name; a model that declares none is taken as declaring none.
A profiled model also declares every source whose entry in the toolkit's known overlaps
(`mmlongembed/overlaps.json`, the same table the dataset card and croissant.json disclose) names
that profile. `mmle score` records them per model in results.json; `mmle leaderboard` marks the cells.
"""

from __future__ import annotations

import re

from harness import report
from mmlongembed.disclosure import overlaps_declared_by

OVERLAP_MARK = "‡"
OVERLAP_NOTE = (f"{OVERLAP_MARK}: the column's source is in the model's declared training data (not zero-shot; "
                "as mteb's zero-shot marker).")
# The names a training set may give a column's source, beyond the paper's column title and the
# source's own name (harness.report.PAPER_DATASETS). Matched on letters and digits, case-folded,
# as a prefix (HotpotQA also covers mteb's HotpotQAHardNegatives).
SOURCE_ALIASES = {
    "mmlongbench": ("MMLongBench-Doc", "MMLongBench"),
    "activitynet": ("ActivityNet Captions", "ActivityNet"),
    "needle": ("NeedleBench",),
}
VG_SOURCES = {"NeedleBench": ("needle", ("NeedleBench",)), "MM-NIAH*": ("needle", ("MM-NIAH",))}


def _folded(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def declared_training_data(model) -> list[str]:
    """The dataset names a model (or its profile) declares training on, then the sources whose
    known overlaps name its profile; none by default."""
    profile = getattr(model, "profile", None)
    declared = getattr(model, "training_data", None)
    if declared is None:
        declared = getattr(profile, "training_data", None) or ()
    names = [str(getattr(entry, "dataset", entry)) for entry in declared]
    profile_name = getattr(profile, "name", None)
    extra = overlaps_declared_by(profile_name) if isinstance(profile_name, str) else []
    named = {_folded(n) for n in names}
    return names + [source for source in extra if _folded(source) not in named]


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
    names = [_folded(n) for n in column_source_names(column) if _folded(n)]
    return any(_folded(declared).startswith(name) for declared in training_data for name in names)
