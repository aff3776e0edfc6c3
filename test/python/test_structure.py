"""The package's structure (docs/architecture.md), checked on the source with ``ast``.

* layers import only downward: formats/types (0) -> IR utilities (1) -> lowering recipes (2)
  -> passes (3) -> pipelines (4) -> execution (5) -> tools, JAX API, harnesses (6);
* no import cycle among module-level imports;
* no pass module imports another pass module;
* function-level imports only of heavy optional dependencies, each with a comment saying why;
* compatibility modules (kept so old import paths work) only re-export, and no library module
  imports one.
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


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The mxlower modules an import statement loads (package __init__s included)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                pkg = pkg.rpartition(".")[0]
            base = f"{pkg}.{base}" if base else pkg
        names = [base] + [f"{base}.{a.name}" for a in node.names]
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


def is_compat(module: str) -> bool:
    """A compatibility module: a docstring, imports, ``__all__`` and a ``__main__`` guard."""
    body = TREES[module].body
    if not body or module in ("mxlower",) or MODULES[module].name == "__init__.py":
        return False
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            continue  # the old module's `python -m` entry point
        return False
    return any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("mxlower")
               for n in body)


COMPAT = {m for m in MODULES if is_compat(m)}


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, tree in TREES.items():
        for node in _top_level_imports(tree):
            graph[m].update(t for t in _resolve(m, node) if t != m)
    return graph


def test_layers_import_only_downward():
    bad = []
    for m, targets in edges().items():
        if m in COMPAT:
            continue
        for t in targets:
            if t in COMPAT:
                continue  # reported by test_library_code_does_not_use_compat_modules
            if layer_of(t) > layer_of(m):
                bad.append(f"{m} ({LAYER_NAMES[layer_of(m)]}) imports {t} "
                           f"({LAYER_NAMES[layer_of(t)]})")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if m != "mxlower" and m not in COMPAT
                and max((k for k in LAYERS if m == k or m.startswith(k + ".")), key=len)
                == "mxlower"]
    assert not unplaced, f"modules outside every layer of docs/architecture.md: {unplaced}"


def test_library_code_does_not_use_compat_modules():
    bad = [f"{m} imports {t}" for m, ts in edges().items() if m not in COMPAT
           for t in ts if t in COMPAT]
    assert not bad, "library modules importing compatibility re-exports:\n" + "\n".join(bad)


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
    return [m for m in MODULES if m.startswith("mxlower.passes.") and m not in PASS_INFRA
            and m not in COMPAT]


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


@pytest.mark.parametrize("module", sorted(COMPAT) or ["<none>"])
def test_compat_modules_only_reexport(module):
    if module == "<none>":
        pytest.skip("no compatibility modules")
    for node in TREES[module].body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mxlower"):
            target = node.module
            assert target in MODULES, f"{module} re-exports from a missing module {target}"


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
