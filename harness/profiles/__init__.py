"""Model profiles as data: one declarative entry per model of the paper, every fact with its
source, under a strict schema; ``mmle models`` lists them; the training data each declares.
Imports mmlongembed's core and output only; running a profile is ``harness.models.profile_model``'s job.
"""

from mmlongembed.core.moved import old_names_from

# `harness.profiles` was the catalogue's module
__getattr__ = old_names_from(__name__, "harness.profiles.catalogue")
