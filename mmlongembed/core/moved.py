"""Old import paths of modules that moved into the stage packages, kept for one release.

Two cases, each one line where the old path is declared:

- a module that moved (``mmlongembed.layout`` -> ``mmlongembed.output.layout``): ``MovedModules``
  answers the old name with the moved module itself (the same object, so registries and module
  state are not doubled), and ``python -m OLD`` runs the moved module;
- a module whose name is now a stage package (``mmlongembed.output``, once the writer): the
  package's ``__getattr__ = old_names_from(...)`` gives the old module's names from the module
  that took its place.

Either warns with a DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

REMOVED_IN = "the next release"


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in {REMOVED_IN}", DeprecationWarning, stacklevel=3)


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        # The import system reads sys.modules back after exec_module: the old name then holds the
        # moved module, whose own __spec__ and __file__ stay as they are.
        _warn(self.old, self.new)
        sys.modules[self.old] = importlib.import_module(self.new)

    def get_code(self, fullname):
        """What `python -m OLD` runs: the moved module's code."""
        _warn(self.old, self.new)
        return importlib.util.find_spec(self.new).loader.get_code(self.new)


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules (old dotted name -> new dotted name)."""

    def __init__(self, moved: dict[str, str]):
        self.moved = dict(moved)

    def find_spec(self, fullname, path=None, target=None):
        new = self.moved.get(fullname)
        if new is None:
            return None
        origin = getattr(importlib.util.find_spec(new), "origin", None)
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(fullname, new), origin=origin)


def install(moved: dict[str, str]) -> None:
    """Answer the old names in ``moved`` from now on (once per table: a package imported again
    does not add a second finder)."""
    if not any(isinstance(f, MovedModules) and f.moved == moved for f in sys.meta_path):
        sys.meta_path.append(MovedModules(moved))


def old_names_from(package: str, module: str):
    """A package ``__getattr__`` that gives the names of the module that had the package's name
    (``mmlongembed.output.write_tables`` from ``mmlongembed.output.writer``)."""

    def __getattr__(name: str):
        # `from package import submodule` asks for the attribute first: a submodule is imported as
        # such, never looked up in the old home (which would import that whole module first)
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is None:
            names = vars(importlib.import_module(module))
            if name in names and not isinstance(names[name], type(sys)):
                _warn(f"{package}.{name}", f"{module}.{name}")
                return names[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
