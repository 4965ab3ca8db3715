"""One module per source dataset. Importing this package imports every builder module, and
each registers itself with ``mmlongembed.core.builder.register`` (duplicate names fail loudly).
Builders import the build stage and those below it (a training-set builder also ``training``),
never the harness."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")
