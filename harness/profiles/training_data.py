"""The training data a model declares: dataset names in its `training_data` attribute (or its
profile's), or records with a `dataset` name; a model that declares none is taken as declaring none.
A profiled model also declares every source whose entry in the toolkit's known overlaps
(`mmlongembed/output/overlaps.json`, the same table the dataset card and croissant.json disclose)
names that profile. `mmle score` records them per model in results.json; the leaderboard's
training-overlap marks (harness.report.training_overlap) read them.
"""

from __future__ import annotations

import re

from mmlongembed.output.disclosure import overlaps_declared_by


def folded_name(name: str) -> str:
    """A dataset name as names are matched: letters and digits, case-folded."""
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
    named = {folded_name(n) for n in names}
    return names + [source for source in extra if folded_name(source) not in named]
