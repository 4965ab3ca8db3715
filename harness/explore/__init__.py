"""``mmle explore``: a static site to look inside a build (``site``, its page in ``assets/``),
each edit of a hard negative marked in place (``marks``) and each model's picks (``results``).
Imports ``report``'s predictions, and mmlongembed's layout, word statistics and release tables.
"""

from mmlongembed.core.moved import old_names_from

# `harness.explore` was the site's module
__getattr__ = old_names_from(__name__, "harness.explore.site")
