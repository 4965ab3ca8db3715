"""The packages' import graph: no cycle, and no import from a lower layer to a higher one.

Every module of mmlongembed, builders and harness is parsed with ``ast`` (imports inside functions
count: a lazy import is still a dependency) and placed in a layer by the longest prefix of its name
in ``LAYERS``. The test fails on any cycle and on any import from a lower layer to a higher one:
there is no allowlist (plug-ins, builders included, are found by name through a registry, as
``mmlongembed.core.plugins`` and ``mmlongembed.core.builder.registered`` do).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mmlongembed", "builders", "harness")

# Declared once, by package: module-name prefix -> layer (a module may import its own layer and those
# below). Each stage package is one layer; the packages' own __init__ docstrings say the same.
LAYERS = {
    # 0 core: the data model and the yardsticks every stage shares (tokens, text, seeds, digests,
    #   documents and pools, what a builder is)
    "mmlongembed": 0, "mmlongembed.core": 0,
    # 1 pure operations (no I/O) and the needles they insert
    "mmlongembed.ops": 1, "mmlongembed.needles": 1,
    # 2 services a builder calls: source readers, media decoding, the LLM layer
    "mmlongembed.readers": 2, "mmlongembed.media": 2, "mmlongembed.llm": 2,
    # 3 the published layout and its writers: config names, output folder, data files, manifest, card
    "mmlongembed.output": 3,
    # 4 checks of what was built: invariants, the shortcut audit, the summary a user reads
    "mmlongembed.checks": 4,
    # 5 the build: pipelines per output kind, the pool loop, capacity, validation; generated sources
    "mmlongembed.build": 5, "mmlongembed.testing": 5,
    # 6 what is built: the builders, training sets, the release of every task, MTEB video tasks
    "builders": 6, "mmlongembed.training": 6, "mmlongembed.release": 6, "mmlongembed.video_tasks": 6,
    # 7 publishing: push, the loopback Hub, reproduce
    "mmlongembed.publish": 7,
    # 8-12 the scoring harness (reads builds as a user does; imports no builder), floor by floor
    "harness.scoring": 8, "harness.profiles": 9, "harness.models": 10,
    "harness.report": 11, "harness.explore": 11, "harness.mteb": 11, "harness.execution": 11, "harness.audit": 11,
    "harness": 12, "harness.__main__": 12, "harness.cli": 12, "harness.runner": 12, "harness.table3": 12,
    "harness.fixtures": 12,
    # 13 command lines
    "mmlongembed.cli": 13, "mmlongembed.readme": 13, "mmlongembed.demo_sources": 13, "mmlongembed.video_tasks.cli": 13,
}

def module_files(root: Path, packages) -> dict[str, Path]:
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    """Module -> the package modules it imports (``from a import b`` counts as a.b when b is one)."""
    modules = module_files(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                targets.update(resolve(f"{base}.{alias.name}") for alias in node.names)
        graph[module] = {t for t in targets if t and t != module}
    return graph


# The roots name their own __init__ only: a module added beside the stage packages is declared
# on purpose, not given the root's layer by its prefix.
ROOTS_BY_NAME_ONLY = {"mmlongembed", "harness"}


def layer_of(module: str) -> int | None:
    prefixes = [p for p in LAYERS if module == p or (module.startswith(p + ".") and p not in ROOTS_BY_NAME_ONLY)]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_every_module_has_a_declared_layer():
    assert [m for m in import_graph() if layer_of(m) is None] == []


def test_no_upward_import():
    graph = import_graph()
    upward = {(a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a)}
    assert sorted(upward) == [], "an import from a lower layer to a higher one (see LAYERS)"


def test_no_cycle():
    graph = import_graph()
    assert cycles(graph) == [], "an import cycle (move the shared piece down, or use a registry)"


def test_the_checks_catch_what_they_are_for(tmp_path):
    # the walk sees imports inside functions, relative ones, and `from package import module`
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from . import leaf\n")
    (tmp_path / "pkg" / "sub" / "leaf.py").write_text("def later():\n    from pkg import top\n")
    (tmp_path / "pkg" / "top.py").write_text("from .sub.leaf import later\nimport pkg.sub\n")
    assert import_graph(tmp_path, ["pkg"]) == {"pkg": set(), "pkg.sub": {"pkg.sub.leaf"}, "pkg.sub.leaf": {"pkg.top"},
                                               "pkg.top": {"pkg.sub.leaf", "pkg.sub"}}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("mmlongembed.video_tasks.cli") == 13 and layer_of("mmlongembed.video_tasks.build") == 6
    assert layer_of("mmlongembed.new_module") is None and layer_of("harness.new_module") is None


# -- the rooms: each folder is one stage, small enough to read, its functions short enough to read ------------

MOST_MODULES_PER_FOLDER = 15  # a folder's own .py files, __init__ aside
PER_SOURCE_REGISTRIES = {"builders", "mmlongembed/readers"}  # one module per source, as mteb keeps one per task
LONGEST_FUNCTION = 80  # lines, decorators and docstring included


def _python_files(folders=(*PACKAGES, "tests", "bench")) -> list[Path]:
    return list(module_files(ROOT, folders).values())


def crowded_folders(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    """Folders holding more than MOST_MODULES_PER_FOLDER modules directly (the registries aside)."""
    counts: dict[str, int] = {}
    for path in paths:
        if path.name != "__init__.py":
            folder = path.parent.relative_to(root).as_posix()
            counts[folder] = counts.get(folder, 0) + 1
    return {f: n for f, n in counts.items() if n > MOST_MODULES_PER_FOLDER and f not in PER_SOURCE_REGISTRIES}


def long_functions(paths: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - first + 1 > LONGEST_FUNCTION:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_no_folder_holds_more_modules_than_one_can_scan():
    assert crowded_folders(_python_files()) == {}


def test_no_function_is_longer_than_a_screenful_or_two():
    assert long_functions(_python_files()) == []


def test_every_stage_package_says_what_it_holds():
    undocumented = [p.parent.relative_to(ROOT).as_posix() for p in _python_files(PACKAGES)
                    if p.name == "__init__.py" and not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert undocumented == []


def test_the_room_checks_catch_what_they_are_for(tmp_path):
    (tmp_path / "pkg").mkdir()
    for k in range(MOST_MODULES_PER_FOLDER + 1):
        (tmp_path / "pkg" / f"m{k}.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    body = "\n".join(f"    x{k} = {k}" for k in range(LONGEST_FUNCTION - 1))
    (tmp_path / "pkg" / "m0.py").write_text(f"def fits():\n{body}\n\n\n@staticmethod\ndef over():\n{body}\n")
    paths = sorted((tmp_path / "pkg").glob("*.py"))
    assert crowded_folders(paths, tmp_path) == {"pkg": MOST_MODULES_PER_FOLDER + 1}  # __init__ not counted
    assert crowded_folders([p for p in paths if p.name != "m1.py"], tmp_path) == {}
    # fits: 80 lines; over: 80 lines and its decorator (its def on line 84)
    assert long_functions(paths, tmp_path) == [f"pkg/m0.py:{LONGEST_FUNCTION + 4} over"]
