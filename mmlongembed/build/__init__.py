"""The build: ``run`` (``mmle build``: inputs checked, the kind's pipeline run, the result
validated and moved into place), ``pipeline`` (what every output kind's build shares), the pool
loop every builder uses (``pool_plan``), the capacity checks made before any pool is built, and
``validate`` (``mmle validate``). Imports core, ops, readers, media, llm, output and checks; never
a builder (builders are found by name through ``mmlongembed.core.builder``).
"""

from mmlongembed.core.moved import old_names_from

# `mmlongembed.build` was the module of run_build
__getattr__ = old_names_from(__name__, "mmlongembed.build.run")
