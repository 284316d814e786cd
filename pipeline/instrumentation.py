"""IR printing around passes, in MLIR's "IR Dump After" form.

`MLIR_ENABLE_DUMP=1` prints the IR after every pass of every kgc entry point
to stderr; `MLIR_ENABLE_DUMP=<name>` prints only the function or kernel of
that symbol name (Triton's convention, so that one variable traces a kernel
from the kg graph down to cubin), and of the kernels kg-tile makes of it
(a split-K kernel's `_partials` and `_reduce`, a split-KV attention's
`_combine`). `MLIR_DUMP_PATH=<file>` appends the dumps, kgc's and
Triton's, to a file instead. kgc-opt's `--mlir-print-ir-before=`, `--mlir-print-ir-
after=` and `--mlir-print-ir-after-all` use the same printer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pathlib
import re
import sys
import tempfile
from typing import Iterator, TextIO

from mlir import ir
from mlir.passmanager import PassManager

ALL_PASSES = "*"

# The kernels kg-tile makes of a kernel @k, named @k<suffix>: a split-K
# matmul's partials and reduce kernels, the combining kernel of split-KV
# attention. A dump of @k follows it into them.
DERIVED_KERNEL_SUFFIXES = ("_partials", "_reduce", "_combine")


def follows(symbol: str, name: str) -> bool:
    """Whether a dump of `symbol` shows the op named `name`: the op itself,
    or a kernel kg-tile made of it."""
    return name == symbol or (name.startswith(symbol)
                              and name[len(symbol):] in DERIVED_KERNEL_SUFFIXES)


@dataclasses.dataclass
class IRPrinting:
    """Which passes to print around, and where.

    `before` and `after` hold pass arguments, or `ALL_PASSES`. `symbol`
    restricts the dump to the op (func, kernel, tt.func) of that name.
    """

    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    symbol: str | None = None
    path: str | None = None

    @classmethod
    def from_environment(cls) -> "IRPrinting | None":
        value = os.environ.get("MLIR_ENABLE_DUMP", "").strip()
        if value in ("", "0"):
            return None
        symbol = None if value == "1" else value
        return cls(after=frozenset({ALL_PASSES}), symbol=symbol,
                   path=os.environ.get("MLIR_DUMP_PATH") or None)

    def wants(self, when: str, argument: str) -> bool:
        chosen = self.before if when == "Before" else self.after
        return ALL_PASSES in chosen or argument in chosen

    def merged(self, other: "IRPrinting | None") -> "IRPrinting":
        if other is None:
            return self
        return IRPrinting(
            before=self.before | other.before,
            after=self.after | other.after,
            symbol=self.symbol or other.symbol,
            path=self.path or other.path,
        )

    @contextlib.contextmanager
    def stream(self) -> Iterator[TextIO]:
        if self.path:
            with open(self.path, "a", encoding="utf-8") as handle:
                yield handle
        else:
            sys.stderr.flush()
            yield sys.stderr

    def dump(self, root: ir.Operation, when: str, display: str, argument: str,
             anchors: tuple[str, ...]) -> None:
        """Prints `root`, or the ops it holds that the pass ran on."""
        with self.stream() as out:
            for op, suffix in self._targets(root, anchors):
                out.write(f"// -----// IR Dump {when} {display} ({argument}){suffix} //----- //\n")
                out.write(op.get_asm(large_elements_limit=16).rstrip("\n"))
                out.write("\n\n")
            out.flush()

    def _targets(self, root: ir.Operation, anchors: tuple[str, ...]):
        if self.symbol is not None:
            for op in _symbol_ops(root, self.symbol):
                yield op, f" ('{op.name}' operation: @{_symbol_name(op)})"
            return
        if not anchors:
            yield root, ""
            return
        for op in anchored_ops(root, anchors):
            name = _symbol_name(op)
            yield op, f" ('{op.name}' operation{': @' + name if name else ''})"


def _symbol_name(op: ir.Operation) -> str | None:
    if "sym_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["sym_name"]).value


def _symbol_ops(op: ir.Operation, symbol: str) -> Iterator[ir.Operation]:
    """The outermost ops named `symbol`, or kernels made of it, inside `op`
    (a kernel's module, not also the tt.func of the same name inside it)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                name = _symbol_name(inner)
                if name is not None and follows(symbol, name):
                    yield inner
                else:
                    yield from _symbol_ops(inner, symbol)


def anchored_ops(root: ir.Operation, anchors: tuple[str, ...]) -> list[ir.Operation]:
    """The ops a nested pipeline `a(b(...))` runs on: ops named `a` directly
    inside `root`, then ops named `b` directly inside those, and so on."""
    current = [root]
    for anchor in anchors:
        current = [
            inner.operation
            for op in current
            for region in op.regions
            for block in region.blocks
            for inner in block.operations
            if inner.operation.name == anchor
        ]
    return current


_HEADER = re.compile(r"IR Dump After (\S+) \(")


@functools.lru_cache(maxsize=None)
def upstream_display_name(pass_text: str, anchors: tuple[str, ...]) -> str:
    """The name MLIR gives an upstream pass in its dumps ("Canonicalizer" for
    `canonicalize`). The bindings do not expose it, so the pass runs once on
    a one-function module with MLIR's own printing into a directory tree,
    whose header is read back. Falls back to the pass argument."""
    argument = re.match(r"[A-Za-z0-9_.\-]+", pass_text).group()
    text = pass_text
    for anchor in reversed(anchors):
        text = f"{anchor}({text})"
    try:
        with ir.Context(), ir.Location.unknown(), \
                tempfile.TemporaryDirectory(prefix="kgc-probe-") as directory:
            module = ir.Module.parse("func.func @probe() {\n  return\n}")
            manager = PassManager.parse(f"builtin.module({text})")
            manager.enable_ir_printing(print_after_all=True, tree_printing_dir_path=directory)
            manager.run(module.operation)
            del manager
            dumps = "".join(path.read_text() for path in pathlib.Path(directory).rglob("*.mlir"))
            match = _HEADER.search(dumps)
    except Exception:  # the probe is best effort: any failure keeps the argument
        return argument
    return match.group(1) if match else argument
