"""Loads the kg dialect's native library into the MLIR Python bindings.

The library (built from dialect/ by CMake) exports two C functions that take
the bindings' C API handles. At import we add the dialect to the bindings'
global DialectRegistry, which every `mlir.ir.Context` created afterwards
appends; `load_dialect` covers contexts that already existed.
"""

from __future__ import annotations

import ctypes
import pathlib
import sys

from mlir import ir
from mlir._mlir_libs import get_dialect_registry
from mlir.dialects._ods_common import _cext

_LIBRARY_NAME = "libkgc_dialect.so"


def _find_library() -> pathlib.Path:
    # The package's folders (several in an editable install), read from the
    # package being initialized rather than by importing it again.
    roots = list(sys.modules[__package__].__path__)
    for root in roots:
        candidate = pathlib.Path(root) / "_lib" / _LIBRARY_NAME
        if candidate.is_file():
            return candidate
    raise ImportError(
        f"kgc: {_LIBRARY_NAME} is missing from {roots}; "
        "reinstall kgc (pip install .) so that CMake builds the kg dialect"
    )


_library = ctypes.CDLL(str(_find_library()))
_library.kgcRegisterKgDialect.argtypes = [ctypes.c_void_p]
_library.kgcLoadKgDialect.argtypes = [ctypes.c_void_p]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _handle(obj, kind: str) -> int:
    return _capsule_pointer(obj._CAPIPtr, f"mlir.ir.{kind}._CAPIPtr".encode())


def register_dialect(registry: ir.DialectRegistry) -> None:
    """Adds the kg dialect to `registry`."""
    _library.kgcRegisterKgDialect(_handle(registry, "DialectRegistry"))


def load_dialect(context: ir.Context) -> None:
    """Loads the kg dialect into `context` (needed only for contexts created
    before `import kgc`)."""
    _library.kgcLoadKgDialect(_handle(context, "Context"))


register_dialect(get_dialect_registry())

# The bindings find the Python classes of a dialect's ops by importing
# `<prefix>.<namespace>`, with only `mlir.dialects` as prefix. Without
# `kgc.dialects` the generated classes are never looked up, and kg ops read
# back from IR are plain OpViews without their accessors (`op.kind`).
if "kgc.dialects" not in _cext.globals.dialect_search_modules:
    _cext.globals.append_dialect_search_prefix("kgc.dialects")
