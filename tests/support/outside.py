"""What ``Builder.build_pools`` must not reach (the contract: files are read in ``load_sources``,
the LLM is called in ``run_steps``), blocked for the length of one call."""

from __future__ import annotations

import builtins
import inspect
import io
from contextlib import contextmanager

# the LLM layer: a step's entry, the runner every backend path goes through, and the backend factory
LLM_CALLS = ("mmlongembed.llm.steps.audit_queries", "mmlongembed.llm.steps.run_llm_step",
             "mmlongembed.llm.runner.run_llm_step", "mmlongembed.llm.backends.make_backend")


def outside(*args, **kwargs):
    raise AssertionError("build_pools reached outside its inputs")


def _paths_refused(real_open):
    """``open`` that refuses every path (pathlib and zipfile open through io.open too) but lets an
    already open file descriptor through: the forked workers that share out a pool's work reopen
    their standard streams by number."""

    def opener(file, *args, **kwargs):
        if isinstance(file, int):
            return real_open(file, *args, **kwargs)
        raise AssertionError(f"build_pools opened a file: {file}")

    return opener


@contextmanager
def nothing_outside(monkeypatch, *targets: str, methods: tuple[tuple[type, str], ...] = ()):
    """Inside the block, opening a file, any LLM call and each of ``targets`` (dotted names, such
    as the builder module's own import of a step) or ``methods`` ((class, name) pairs: methods or
    properties) raise."""
    with monkeypatch.context() as patched:
        patched.setattr(builtins, "open", _paths_refused(builtins.open))
        patched.setattr(io, "open", _paths_refused(io.open))
        for target in (*LLM_CALLS, *targets):
            patched.setattr(target, outside)
        for cls, name in methods:
            is_property = isinstance(inspect.getattr_static(cls, name), property)
            patched.setattr(cls, name, property(outside) if is_property else outside)
        yield
