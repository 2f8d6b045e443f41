"""The package's layers, read from the source: no import cycles, no upward imports,
nothing private at the package root, and workflows that use only public names.

The graph counts every import statement, those inside functions and under
``TYPE_CHECKING`` included: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dxrf"
WORKFLOWS = ROOT / "workflows"

#: each sub-package's layer: a module imports from its own sub-package or from lower layers only
LAYERS = {
    "core": 0,
    "engine": 1,
    "cluster": 1,
    "io": 2,
    "features": 3,
    "stats": 4,
    "selection": 5,
    "solvers": 6,
    "search": 7,
    "learners": 8,
    "persist": 9,
    "datasets": 9,
    "cli": 12,  # the command line: an application of the public API, above dxrf/__init__.py
}
TOP = 11  # dxrf/__init__.py: the public names


def _modules(package: Path, prefix: str) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([prefix, *parts])] = path
    return found


MODULES = _modules(PACKAGE, "dxrf")


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported from, names imported, line) for each import statement of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names], node.lineno))
    return found


def _targets(module: str, names: list[str]) -> set[str]:
    """The dxrf modules an import statement loads: a named submodule, else the module itself."""
    out = set()
    for n in names or [None]:
        full = f"{module}.{n}" if n else module
        if full in MODULES:
            out.add(full)
            continue
        while module and module not in MODULES:
            module = module.rpartition(".")[0]
        if module:
            out.add(module)
    return out


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        edges = set()
        for module, names, _ in _imports(name, path):
            if module == "dxrf" or module.startswith("dxrf."):
                edges |= _targets(module, names)
        edges.discard(name)
        graph[name] = edges
    return graph


def layer(module: str) -> tuple[str, int]:
    parts = module.split(".")
    if len(parts) == 1:
        return "dxrf", TOP
    return parts[1], LAYERS[parts[1]]


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, targets in graph.items():
        src_pkg, src_rank = layer(src)
        for dst in targets:
            dst_pkg, dst_rank = layer(dst)
            if dst_pkg != src_pkg and dst_rank >= src_rank:
                bad.append(f"{src} ({src_pkg}, layer {src_rank}) imports {dst} ({dst_pkg}, layer {dst_rank})")
    return sorted(bad)


def test_every_subpackage_has_a_layer():
    assert {layer(m)[0] for m in MODULES} - {"dxrf"} == set(LAYERS)


def test_no_import_cycles():
    assert find_cycles(import_graph()) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    assert upward_imports(import_graph()) == []


def test_core_imports_nothing_else_from_dxrf():
    graph = import_graph()
    assert {m: sorted(t) for m, t in graph.items() if layer(m)[0] == "core" and any(layer(x)[0] != "core" for x in t)} == {}


def test_nothing_private_at_the_package_root():
    root_files = sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py")
    assert root_files == ["__init__.py", "cluster.py"]


def test_the_checks_find_a_cycle_and_an_upward_import():
    # the detectors themselves must be able to fail
    graph = {"dxrf.core.a": {"dxrf.engine.b"}, "dxrf.engine.b": {"dxrf.core.a"}, "dxrf.io.c": set()}
    assert find_cycles(graph) == [["dxrf.core.a", "dxrf.engine.b"]]
    assert upward_imports(graph) == ["dxrf.core.a (core, layer 0) imports dxrf.engine.b (engine, layer 1)"]


def _private_uses(path: Path) -> list[str]:
    bad = []
    for module, names, line in _imports("dxrf.workflows." + path.stem, path):
        if not (module == "dxrf" or module.startswith("dxrf.")) or module.startswith("dxrf.workflows"):
            continue
        if any(part.startswith("_") for part in module.split(".")):
            bad.append(f"{path.name}:{line}: private module {module}")
        bad.extend(f"{path.name}:{line}: private name {module}.{n}" for n in names if n.startswith("_"))
    return bad


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.py")), ids=lambda p: p.name)
def test_workflows_use_public_names_only(path):
    assert _private_uses(path) == []
