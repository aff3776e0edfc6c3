"""The package's structure (docs/architecture.md), checked on the source with ``ast``.

* layers import only downward: formats/types (0) -> IR utilities (1) -> lowering recipes (2)
  -> passes (3) -> pipelines (4) -> execution (5) -> tools, JAX API, harnesses (6);
* no import cycle among module-level imports;
* no pass module imports another pass module;
* function-level imports only of heavy optional dependencies, each with a comment saying why;
* no re-export-only module (a module that imports names and defines nothing: the old
  compatibility modules); a package's ``__init__`` is where a package re-exports;
* no package cycle through ``__init__``: a module inside a package below ``mxlower`` does not
  import that package's namespace (``from mxlower.jax import kernels`` in
  ``mxlower/jax/api.py``), nor an ancestor's whose ``__init__`` imports the module; it imports
  its siblings as modules (``import mxlower.jax.kernels as kernels``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "mxlower"

#: Module-name prefixes -> layer (longest prefix wins).
LAYERS = {
    "mxlower": 0,
    "mxlower.types": 0,
    "mxlower.formats": 0,
    "mxlower.diagnostics": 0,
    "mxlower.reference": 0,
    "mxlower.numbers": 0,
    "mxlower.cast_reference": 0,
    "mxlower.bindings": 1,
    "mxlower.ir": 1,
    "mxlower.dialect": 1,
    "mxlower.lowering": 2,
    "mxlower.passes": 3,
    "mxlower.pipeline": 4,
    "mxlower.execution": 5,
    "mxlower.tools": 6,
    "mxlower.jax": 6,
    "mxlower.testing": 6,
    "mxlower.benchmarking": 6,
}
LAYER_NAMES = ("formats/types", "IR utilities", "lowering recipes", "passes", "pipelines",
               "execution", "tools/JAX")
#: Passes' own infrastructure, which every pass may import.
PASS_INFRA = {"mxlower.passes", "mxlower.passes.base"}
#: Dependencies heavy enough (or optional enough) to be imported inside a function.
HEAVY = ("jax", "jaxlib", "mlir", "cuda", "cupy", "matplotlib", "mxlower.bindings.upstream",
         "mxlower.bindings.jaxlib", "mxlower.execution.xla", "mxlower.jax")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
TREES: dict[str, ast.Module] = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}


def layer_of(module: str) -> int:
    best = max((k for k in LAYERS if module == k or module.startswith(k + ".")), key=len)
    return LAYERS[best]


def _namespace_imports(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules whose namespace ``node`` binds or reads: ``P`` of ``import P`` and ``from P
    import x`` (relative forms resolved), and ``P.x`` of the latter (``x`` may be a package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            pkg = pkg.rpartition(".")[0]
        base = f"{pkg}.{base}" if base else pkg
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The mxlower modules an import statement loads (package __init__s included)."""
    names = _namespace_imports(module, node)
    out = []
    for n in names:
        if not n.startswith("mxlower"):
            continue
        # every package on the way is imported too
        parts = n.split(".")
        for i in range(1, len(parts) + 1):
            m = ".".join(parts[:i])
            if m in MODULES and m not in out:
                out.append(m)
    return out


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports executed when the module is imported (module body, incl. if/try blocks)."""
    found: list = []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for sub in getattr(node, field, []) or []:
                        visit(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])
    visit(tree.body)
    return [n for n in found if not _type_checking_only(tree, n)]


def _type_checking_only(tree: ast.Module, node: ast.AST) -> bool:
    for top in tree.body:
        if (isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test)
                and any(node is n for n in ast.walk(top))):
            return True
    return False


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, tree in TREES.items():
        for node in _top_level_imports(tree):
            graph[m].update(t for t in _resolve(m, node) if t != m)
    return graph


def test_layers_import_only_downward():
    bad = []
    for m, targets in edges().items():
        for t in targets:
            if layer_of(t) > layer_of(m):
                bad.append(f"{m} ({LAYER_NAMES[layer_of(m)]}) imports {t} "
                           f"({LAYER_NAMES[layer_of(t)]})")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if m != "mxlower"
                and max((k for k in LAYERS if m == k or m.startswith(k + ".")), key=len)
                == "mxlower"]
    assert not unplaced, f"modules outside every layer of docs/architecture.md: {unplaced}"


def test_no_module_level_import_cycle():
    graph = edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            # a package importing its own submodule (and back) is how packages work: only
            # count edges that are not "package -> its child"
            if w.startswith(v + "."):
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert not cycles, f"module-level import cycles: {cycles}"


def _pass_modules() -> list[str]:
    return [m for m in MODULES if m.startswith("mxlower.passes.") and m not in PASS_INFRA]


def test_no_pass_imports_another_pass():
    passes = set(_pass_modules())
    assert len(passes) >= 8, sorted(passes)
    bad = []
    for m in passes:
        for node in ast.walk(TREES[m]):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bad += [f"{m} imports {t}" for t in _resolve(m, node) if t in passes and t != m]
    assert not bad, "\n".join(bad)


def _function_imports(tree: ast.Module):
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node


def test_function_level_imports_are_heavy_and_explained():
    bad = []
    for m, tree in TREES.items():
        lines = MODULES[m].read_text().splitlines()
        for node in _function_imports(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""])
            if getattr(node, "level", 0):  # relative: resolve to the mxlower module
                names = _resolve(m, node)[-1:]
            heavy = all(any(n == h or n.startswith(h + ".") for h in HEAVY) for n in names)
            here = lines[node.lineno - 1]
            above = lines[node.lineno - 2] if node.lineno > 1 else ""
            explained = "#" in here or above.strip().startswith("#")
            if not (heavy and explained):
                why = "not a heavy optional dependency" if not heavy else "no comment saying why"
                bad.append(f"{MODULES[m].relative_to(ROOT.parent)}:{node.lineno}: "
                           f"{here.strip()}  ({why})")
    assert not bad, "function-level imports:\n" + "\n".join(bad)


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT.parent)}:{line}"


def _defines_nothing(node: ast.stmt) -> bool:
    """A statement of a re-export-only module: the docstring, an import, ``__all__ = ...``, a
    ``del``, or a ``__main__`` guard (running an imported ``main``)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Delete)):
        return True
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [ast.unparse(t) for t in targets] == ["__all__"]
    return isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"


def test_no_reexport_only_modules():
    """A module that imports names and defines nothing (no def, class or other statement) is a
    second path to names that live elsewhere: import the real module instead.  A package's
    ``__init__`` is exempt (re-exporting its submodules' API is its job)."""
    bad = []
    for m, tree in TREES.items():
        if MODULES[m].name == "__init__.py" or not all(_defines_nothing(n) for n in tree.body):
            continue
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        line = imports[0].lineno if imports else 1
        bad.append(f"{_where(m, line)}: {m} only re-exports (it defines nothing); import "
                   "the module that defines the names instead")
    assert not bad, "re-export-only modules:\n" + "\n".join(sorted(bad))


def _packages_of(module: str) -> list[str]:
    """The packages ``module`` lies in, innermost first (its own package, then ancestors)."""
    parts = module.split(".")
    if MODULES[module].name == "__init__.py":
        parts = parts[:-1]
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _imported_at_load(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing ``start`` imports (module-level imports, transitively)."""
    seen, todo = set(), [start]
    while todo:
        for t in graph[todo.pop()]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def test_no_package_cycle_through_init():
    """A module inside package P imports its siblings as modules (``import P.x as x``, ``from
    P.x import name``), never P's namespace (``from P import x``, ``import P``): P's
    ``__init__`` may be importing that very module, and the name is then looked up on a
    half-initialised package.  Forbidden for the module's own package (any package below
    ``mxlower``), and for an ancestor package whose ``__init__`` imports the module at load
    time (``mxlower`` itself, whose ``__init__`` imports nothing, is checked only so)."""
    graph = edges()
    loads = {p: _imported_at_load(graph, p) for p in MODULES
             if MODULES[p].name == "__init__.py"}
    bad = []
    for m, tree in TREES.items():
        packages = _packages_of(m)
        if MODULES[m].name == "__init__.py" or not packages:
            continue
        own = packages[0]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for p in _namespace_imports(m, node):
                if p not in packages:
                    continue
                own_rule = p == own and p != "mxlower"
                if own_rule or m in loads[p]:
                    why = ("its own package" if own_rule else
                           f"a package whose __init__ imports {m} at load time")
                    bad.append(f"{_where(m, node.lineno)}: {ast.unparse(node)}  ({p} is {why}; "
                               f"import the module itself, e.g. `import {p}.NAME as NAME`)")
    assert not bad, "imports of a package's namespace from inside it:\n" + "\n".join(bad)


# --- private JAX/jaxlib APIs: one home --------------------------------------------------------

#: The one module that touches private JAX/jaxlib APIs and knows the differences between the JAX
#: releases mxlower supports.
JAX_PRIVATE = "mxlower.bindings.jax_private"


def _private_jax_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """Imports of private JAX/jaxlib modules or names, and reads of private attributes of JAX
    modules (``mlir._lowerings``), as (line, source)."""
    def private(name: str) -> bool:
        return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))

    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.partition(".")[0] in ("jax", "jaxlib"):
                    bound.add(a.asname or a.name.partition(".")[0])
                    if private(a.name):
                        found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if (node.module or "").partition(".")[0] in ("jax", "jaxlib"):
                bound.update(a.asname or a.name for a in node.names)
                if private(node.module) or any(private(a.name) for a in node.names):
                    found.append((node.lineno, ast.unparse(node)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_private_jax_apis_only_in_jax_private():
    assert _private_jax_uses(TREES[JAX_PRIVATE]), "the checker finds nothing where it must"
    bad = [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: {src}"
           for m, tree in TREES.items() if m != JAX_PRIVATE
           for line, src in _private_jax_uses(tree)]
    assert not bad, (f"private JAX/jaxlib APIs outside {JAX_PRIVATE} (add a function there):\n"
                     + "\n".join(bad))


def test_supported_jax_range_is_pyprojects():
    import tomllib

    from mxlower.bindings import jax_private

    deps = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    lo, hi = (".".join(map(str, v)) for v in (jax_private.MIN_JAX, jax_private.NEXT_JAX))
    for pkg in ("jax", "jaxlib"):
        assert f"{pkg}>={lo},<{hi}" in deps, deps
