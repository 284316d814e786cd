"""The package reads top to bottom: each layer imports only layers below it
(or packages of its own layer).

    kgc (base)   dialect loading, graph model, op table, tiling, fusion,
                 reference interpreter, CPU executor
    kgc.passes   the passes
    kgc.pipeline the pass manager and the compile driver
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
