"""One module per source dataset. Importing this package imports every builder module, and
each registers itself with ``mmlongembed.core.builder.register`` (duplicate names fail loudly)."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")
