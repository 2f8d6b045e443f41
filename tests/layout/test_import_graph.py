"""The package's layers, read from the source: no import cycles, no upward imports,
nothing private at the package root, and workflows that use only public names.

The graph counts every import statement, those inside functions and under
``TYPE_CHECKING`` included: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

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
    "kernels": 3,
    "stats": 4,
    "features": 5,  # a data-dependent map (leverage Nyström) runs a statistics pass in its fit
    "selection": 6,
    "solvers": 7,
    "search": 8,
    "learners": 9,
    "persist": 10,
    "datasets": 10,
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


# --------------------------------------------------------------------------- workflows: public names only
#
# A workflow may use, from the library, only
#   (a) the names in ``dxrf.__all__``;
#   (b) the first-level sub-packages and modules (``dxrf.io``, ``dxrf.features``,
#       ..., ``dxrf.cluster``, ``dxrf.core``) and the names in their ``__all__``;
#       a name there that is itself a module (``dxrf.features.samplers``) is
#       public in turn, with its own ``__all__``;
#   (c) the other modules of ``dxrf.workflows``.
# Deeper module paths (``dxrf.stats.tiles``) and names outside those ``__all__``
# lists (underscore names included) are private, whether imported or reached by
# attributes of an imported module (``dxrf.io.files._describe``). ``__all__`` is
# read by importing the package, so a re-export counts where it is made.

SUBPACKAGES = set(LAYERS)


def _exported(module: ModuleType) -> set[str]:
    names = set(getattr(module, "__all__", ()))
    return names | SUBPACKAGES if module.__name__ == "dxrf" else names


def _child(module: ModuleType, name: str) -> object:
    """``module.name``, importing a sub-package of ``dxrf`` not loaded yet; None when absent."""
    child = getattr(module, name, None)
    if child is None and module.__name__ == "dxrf" and name in SUBPACKAGES:
        child = importlib.import_module(f"dxrf.{name}")
    return child


def _public_module(dotted: str) -> ModuleType | None:
    """The module ``dotted`` names if it is public by the rule above, else None."""
    parts = dotted.split(".")
    if parts[0] != "dxrf":
        return None
    module = importlib.import_module("dxrf")
    for part in parts[1:]:
        if part not in _exported(module):
            return None
        child = _child(module, part)
        if not isinstance(child, ModuleType):
            return None
        module = child
    return module


def _is_workflow(dotted: str) -> bool:
    return dotted == "dxrf.workflows" or dotted.startswith("dxrf.workflows.")


def _is_dxrf(dotted: str) -> bool:
    return dotted == "dxrf" or dotted.startswith("dxrf.")


def _chain(node: ast.Attribute) -> tuple[str | None, list[str]]:
    """``(root name, [attr, ...])`` of ``a.b.c``; root None when the chain starts with a call or subscript."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), attrs[::-1]


def _embedded_scripts(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, code)`` of the string constants that are scripts importing dxrf (run in a subprocess).

    Such a string is often a ``str.format`` template: its fields become ``0``
    and doubled braces single ones so that it parses.
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if not re.search(r"^\s*(import|from)\s+dxrf\b", text, flags=re.MULTILINE):
                continue
            code = re.sub(r"(?<!\{)\{\w*\}(?!\})", "0", text).replace("{{", "{").replace("}}", "}")
            try:
                ast.parse(code)
            except SyntaxError:  # keep its import lines at least
                code = "\n".join(ln.strip() if re.match(r"\s*(import|from)\s", ln) else "" for ln in code.splitlines())
            found.append((node.lineno, code))
    return found


def private_uses(source: str, filename: str = "<workflow>", name: str = "dxrf.workflows.x") -> list[str]:
    """Every use of a private library name in a workflow's source (rule above), as ``file:line: what``."""
    tree = ast.parse(source)
    package = name.split(".")[:-1]
    bad: set[tuple[int, str]] = set()
    bound: dict[str, object] = {}  # local names bound to public dxrf modules and objects

    def refuse(line: int, what: str) -> None:
        bad.add((line, f"{filename}:{line}: {what}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_dxrf(alias.name) or _is_workflow(alias.name):
                    continue
                module = _public_module(alias.name)
                if module is None:
                    refuse(node.lineno, f"private module {alias.name}")
                elif alias.asname:
                    bound[alias.asname] = module
                else:
                    bound["dxrf"] = importlib.import_module("dxrf")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if not _is_dxrf(source_module) or _is_workflow(source_module):
                continue
            module = _public_module(source_module)
            if module is None:
                refuse(node.lineno, f"private module {source_module}")
                continue
            for alias in node.names:
                if alias.name not in _exported(module):
                    refuse(node.lineno, f"private name {source_module}.{alias.name}")
                    continue
                child = _child(module, alias.name)
                if child is not None:
                    bound[alias.asname or alias.name] = child
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            # __import__("dxrf.x") / importlib.import_module("dxrf.x")
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            target = node.args[0].value
            if called in ("__import__", "import_module") and isinstance(target, str) and _is_dxrf(target):
                if not _is_workflow(target) and _public_module(target) is None:
                    refuse(node.lineno, f"private module {target}")

    for line, code in _embedded_scripts(tree):
        for text in private_uses(code, filename, name):
            where, _, what = text.partition(": ")
            refuse(line + int(where.rpartition(":")[2]) - 1, what)

    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        root, attrs = _chain(node)
        if root not in bound:
            continue
        current: object = bound[root]
        path = [getattr(current, "__module__", None) or "", getattr(current, "__qualname__", None) or root]
        if isinstance(current, ModuleType):
            path = [current.__name__]
        path = [p for p in path if p]
        for attr in attrs:
            path.append(attr)
            if isinstance(current, ModuleType):
                if _is_workflow(current.__name__):
                    break
                if attr not in _exported(current):
                    refuse(node.lineno, f"private name {'.'.join(path)}")
                    break
                current = _child(current, attr)
            elif attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__")):
                refuse(node.lineno, f"private attribute {'.'.join(path)}")
                break
            else:
                current = getattr(current, attr, None)
    return [text for _, text in sorted(bad)]


def test_the_public_name_check_finds_every_kind_of_private_use():
    # the detector itself must be able to fail: each line below breaks the rule once
    source = """
import dxrf.stats.tiles
import dxrf.io
from dxrf.io.files import describe
from dxrf.io import _describe
from dxrf.features import samplers
from dxrf import FeatureStats
dxrf.io.files.check_destination
dxrf.datasets.loaders.load
samplers.weighted_pairs
FeatureStats._private
__import__("dxrf.stats.compensated")
SCRIPT = '''
import dxrf
M = {m}
dxrf.io.files.check_destination
'''
"""
    assert private_uses(source, "w.py") == [
        "w.py:2: private module dxrf.stats.tiles",
        "w.py:4: private module dxrf.io.files",
        "w.py:5: private name dxrf.io._describe",
        "w.py:8: private name dxrf.io.files",
        "w.py:9: private name dxrf.datasets.loaders",
        "w.py:10: private name dxrf.features.samplers.weighted_pairs",
        "w.py:11: private attribute dxrf.stats.feature_stats.FeatureStats._private",
        "w.py:12: private module dxrf.stats.compensated",
        "w.py:16: private name dxrf.io.files",
    ]
    fine = """
import dxrf
import dxrf.io
from dxrf import RandomFourierFeatures, stats
from dxrf.features import samplers
from dxrf.learners import solve_ridge
from . import _common
from ._paper import say
from dxrf.workflows._common import peak_rss
dxrf.io.open_zarr
dxrf.learners.solve_ridge
dxrf.RandomFourierFeatures.fit
stats.score_models
samplers.iid_frequencies
__import__("dxrf.io")
"""
    assert private_uses(fine) == []


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.py")), ids=lambda p: p.name)
def test_workflows_use_public_names_only(path):
    assert private_uses(path.read_text(encoding="utf-8"), path.name, "dxrf.workflows." + path.stem) == []


@pytest.mark.parametrize("package", ["dxrf", *sorted(f"dxrf.{p}" for p in SUBPACKAGES)])
def test_every_public_name_exists(package):
    # the rule above trusts the __all__ lists: each must name what the package really holds
    module = importlib.import_module(package)
    assert [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)] == []
