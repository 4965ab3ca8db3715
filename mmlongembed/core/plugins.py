"""Named plug-ins of one kind (harness model kinds, LLM backends, decode backends), found by name.

A plug-in registers itself (``@registry.register(name)``). The registry's owner never imports its
plug-ins: each known name maps to the module that registers it, imported by name on first use,
so a plug-in module may subclass what the owner defines (and pull in heavy optional
dependencies) without an import cycle.
"""

from __future__ import annotations

import importlib
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    def __init__(self, kind: str, homes: dict[str, str]):
        """``homes``: every known name -> the module that registers it, in the order users see them."""
        self.kind = kind
        self._homes = dict(homes)
        self._plugins: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(plugin: T) -> T:
            known = self._plugins.get(name)
            if known is not None and known is not plugin:
                raise RuntimeError(f"two {self.kind}s are registered as {name!r}: {known} and {plugin}")
            self._plugins[name] = plugin
            return plugin

        return add

    def get(self, name: str) -> T | None:
        """The plug-in registered as ``name`` (its home module imported first if need be); None: unknown."""
        if name not in self._plugins and name in self._homes:
            importlib.import_module(self._homes[name])
        return self._plugins.get(name)

    def names(self) -> list[str]:
        """Every known name: the declared ones in their order, then any registered from elsewhere."""
        return list(self._homes) + [name for name in self._plugins if name not in self._homes]
