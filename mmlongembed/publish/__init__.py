"""Publishing: ``push`` (``mmle push``: a validated build as one Hub commit and an immutable
tag), ``hub_server`` (a Hub look-alike on loopback, for tests and trying it locally) and
``reproduce`` (``mmle reproduce``: rebuild from a manifest and compare). Imports every build stage.
"""

from mmlongembed.core.moved import old_names_from

# `mmlongembed.publish` was push's module
__getattr__ = old_names_from(__name__, "mmlongembed.publish.push")
