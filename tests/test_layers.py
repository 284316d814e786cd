"""The package reads top to bottom: each layer imports only layers below it
(or packages of its own layer).

    kgc (base)   dialect loading, graph model, op table, tiling, fusion,
                 reference interpreter, CPU executor
    kgc.passes   the passes
    kgc.pipeline the pass manager, the compile driver and the cache of
                 compiled kernels (a local folder, and a Redis server a
                 fleet shares behind it)
    kgc.runtime, kgc.export   running compiled graphs: launching them from
                 Python, or writing them as C that launches them without it
    kgc.search   superoptimize
    kgc.api      the Python API (kgc.compile, kgc.superoptimize)
    kgc.torch    the PyTorch front end (torch.compile backend, explain)
    kgc.bench, kgc.tools   the benchmark against torch (its model suite
                 runs models through the torch.compile backend) and the
                 kgc and kgc-opt commands

Every import counts, also one inside a function: a lazy import is still a
dependency. `kgc/__init__.py` is the facade that re-exports the front end.

Below the layers: no import circle among the modules, the base lookups
(`kgc.tiling.kernel_ops`, `kgc.tiling.constants`) clear of the code
generator, and only `kgc.runtime.internals` using Triton's and torch's
private API.
"""

import ast
import pathlib

import pytest

import kgc  # noqa: F401  (so that the layers import as in use)

# Bottom to top; packages of one layer may import each other.
LAYERS = [("kgc",), ("kgc.passes",), ("kgc.pipeline",), ("kgc.runtime", "kgc.export"),
          ("kgc.search",), ("kgc.api",), ("kgc.torch",), ("kgc.bench", "kgc.tools")]
SOURCE = pathlib.Path(__file__).resolve().parent.parent


def _packages() -> dict[str, pathlib.Path]:
    """Package name -> its source folder, as the wheel maps them."""
    import tomllib

    with open(SOURCE / "pyproject.toml", "rb") as handle:
        mapping = tomllib.load(handle)["tool"]["scikit-build"]["wheel"]["packages"]
    return {target.replace("/", "."): SOURCE / source for target, source in mapping.items()}


def _layer(module: str) -> int:
    """The layer of the longest package that holds `module`."""
    best, length = 0, 0
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > length:
                best, length = index, len(name)
    return best


def _modules():
    packages = _packages()
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(folder).with_suffix("")
            parts = [package, *relative.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            # Another mapping owns this folder (kgc.passes inside kgc, say).
            owner = max((p for p in packages if name == p or name.startswith(p + ".")), key=len)
            if owner != package or name == "kgc" or ".dialects" in name:
                continue
            yield name, path


def _imports(path: pathlib.Path, package: str):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "kgc" and not node.level:
            for alias in node.names:  # `from kgc import reference`: a module of the base
                yield f"kgc.{alias.name}", node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}", node.lineno
            else:
                yield node.module, node.lineno


MODULES = list(_modules())


@pytest.mark.parametrize("name,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_go_down_only(name, path):
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    mine = _layer(name)
    upward = []
    for imported, line in _imports(path, package):
        if not imported.startswith("kgc"):
            continue
        theirs = _layer(imported)
        if imported == "kgc":
            continue  # the facade's names are the base's, but see below
        if theirs > mine:
            upward.append(f"{path.relative_to(SOURCE)}:{line} imports {imported}")
    assert not upward, "\n".join(upward)


def test_the_base_does_not_import_the_facade():
    # `import kgc` in the base would pull every layer in through the facade.
    offenders = [f"{path}" for name, path in MODULES if _layer(name) == 0
                 for imported, _ in _imports(path, name) if imported == "kgc"]
    assert not offenders


def _edges(top_level_only: bool) -> dict[str, set[str]]:
    """Module -> the package's modules it imports by name (`from kgc.tiling
    import tma` names the module tma; `from kgc.passes import
    Pass` the package kgc.passes). The parent packages that Python runs
    first are not counted: every module would import its package's facade."""
    known = {name for name, _ in MODULES} | {"kgc"}
    edges = {}
    for name, path in MODULES:
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        targets = set()
        for node in _run_imports(tree, top_level_only):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    module = f"{base}.{node.module}"
                else:
                    module = node.module
                for alias in node.names:
                    submodule = f"{module}.{alias.name}"
                    targets.add(submodule if submodule in known else module)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        edges[name] = {t for t in targets if t in known and t != name}
    return edges


def _run_imports(tree: ast.Module, top_level_only: bool):
    """The import statements of a module that run: those of its body (and,
    unless `top_level_only`, of its functions), not those under
    `if TYPE_CHECKING:`, which only type checkers read."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not top_level_only:
                todo.extend(ast.iter_child_nodes(node))
        else:
            todo.extend(ast.iter_child_nodes(node))


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_among_the_modules():
    # Importing any module runs its imports before its own body: in a
    # circle, one of the modules would run half-made.
    assert _circles(_edges(top_level_only=True)) == []


# Circles closed only by an import inside a function (which runs after both
# modules are made). Each still ties its modules into one unit, so no new
# one may appear; these two are older than the check.
LAZY_CIRCLES = [
    # The compile pool starts workers that run the Triton stage's compile.
    ["kgc.pipeline.compile_worker", "kgc.pipeline.triton_stage"],
]


def test_no_new_import_circle_through_lazy_imports():
    assert _circles(_edges(top_level_only=False)) == LAZY_CIRCLES


def test_a_circle_is_found():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _reachable(edges: dict[str, set[str]], module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("module", ["kgc.tiling.kernel_ops", "kgc.tiling.constants"])
def test_base_lookups_do_not_pull_in_the_code_generator(module):
    # Sixteen modules read kernels with kernel_ops; passes share constants:
    # neither may cost them the generator and its schedules.
    reached = _reachable(_edges(top_level_only=False), module)
    assert not reached & {"kgc.tiling.generate", "kgc.tiling.mlir_builder", "kgc.tiling.plan",
                          "kgc.tiling.registry"}, sorted(reached)


def _private_uses(path: pathlib.Path) -> list[str]:
    """Where a module imports Triton or reads or imports a private name of
    torch's."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "triton"]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level \
                and node.module.split(".")[0] == "triton":
            found.append(f"{node.lineno}: from {node.module}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level \
                and node.module.split(".")[0] == "torch" and (
                    any(part.startswith("_") for part in node.module.split("."))
                    or any(a.name.startswith("_") for a in node.names)):
            found.append(f"{node.lineno}: from {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and isinstance(node.value, ast.Name) and node.value.id == "torch":
            found.append(f"{node.lineno}: torch.{node.attr}")
    return found


@pytest.mark.parametrize("name,path", [(n, p) for n, p in MODULES if n.startswith("kgc.runtime")],
                         ids=[n for n, _ in MODULES if n.startswith("kgc.runtime")])
def test_only_the_runtimes_internals_touch_triton_and_torch_internals(name, path):
    uses = _private_uses(path)
    if name == "kgc.runtime.internals":
        assert uses  # what this check looks for is there to be found
    else:
        assert not uses, f"{path.relative_to(SOURCE)}: {uses}"


# The modules of the built-in schedules: what a kind of kernel owns.
SCHEDULE_MODULES = {"kgc.tiling.attention", "kgc.tiling.matmul", "kgc.tiling.matmul_generator",
                    "kgc.tiling.split_k", "kgc.tiling.low_rank", "kgc.tiling.plan"}


@pytest.mark.parametrize("module", ["kgc.tiling.generate", "kgc.tiling.schedule"])
def test_the_generic_generator_and_the_protocol_reach_no_schedule(module):
    # A schedule builds on them; were they to import one, every schedule
    # would depend on it.
    reached = _reachable(_edges(top_level_only=False), module)
    assert not reached & SCHEDULE_MODULES, sorted(reached & SCHEDULE_MODULES)


@pytest.mark.parametrize("module", ["kgc.passes.tile", "kgc.fusion.greedy", "kgc.search.space"])
def test_tiling_fusion_and_search_ask_the_registry_not_a_schedule(module):
    # kg-tile, fusion and the search reach a kind of kernel through the
    # registered schedules' hooks, so that a new schedule changes none of them.
    imported = _edges(top_level_only=False)[module]
    assert "kgc.tiling.registry" in imported
    assert not imported & SCHEDULE_MODULES, sorted(imported & SCHEDULE_MODULES)
