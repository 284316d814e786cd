"""The package reads top to bottom: each layer imports only layers below it.

    kgc (base)   dialect loading, graph model, op table, tiling, fusion,
                 reference interpreter, CPU executor
    kgc.passes   the passes
    kgc.pipeline the pass manager and the compile driver
    kgc.runtime  running compiled graphs
    kgc.search   superoptimize
    kgc.api, kgc.tools, kgc.export   the front ends (Python API; kgc and kgc-opt;
                 C source of a compiled graph)

Every import counts, also one inside a function: a lazy import is still a
dependency. `kgc/__init__.py` is the facade that re-exports the front end.
"""

import ast
import pathlib

import pytest

import kgc

LAYERS = ["kgc", "kgc.passes", "kgc.pipeline", "kgc.runtime", "kgc.search", "kgc.api",
          "kgc.tools", "kgc.export"]
FRONT_ENDS = {"kgc.api", "kgc.tools", "kgc.export"}
ROOT = pathlib.Path(kgc.__file__).parent


def _layer(module: str) -> int:
    best = 0
    for index, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            best = index
    return best


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        parts = ["kgc", *relative.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if name == "kgc" or "dialects" in parts:
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
        if theirs > mine and not (LAYERS[mine] in FRONT_ENDS and LAYERS[theirs] in FRONT_ENDS):
            upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {imported}")
    assert not upward, "\n".join(upward)


def test_the_base_does_not_import_the_facade():
    # `import kgc` in the base would pull every layer in through the facade.
    offenders = [f"{path}" for name, path in MODULES if _layer(name) == 0
                 for imported, _ in _imports(path, name) if imported == "kgc"]
    assert not offenders
