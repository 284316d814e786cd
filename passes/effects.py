"""What an op does to memory, for the clean-up passes.

The MLIR Python bindings do not expose side-effect interfaces, and the
Triton ops we emit are unregistered in our context, so the facts live here,
by op name. Anything not listed is assumed to write memory: the passes then
leave it, and everything around it, alone.
"""

from __future__ import annotations

import enum

from mlir import ir


class Effect(enum.Enum):
    PURE = "pure"  # no memory effect: may be merged, moved or removed
    READ = "read"  # reads memory: may be removed, merged only with no write between
    WRITE = "write"  # writes or has unknown effects: never touched


# Dialects whose every op is free of memory effects.
_PURE_DIALECTS = ("arith", "math", "tensor", "ub")

# Triton ops free of memory effects.
_PURE_TT_OPS = frozenset(
    f"tt.{name}"
    for name in (
        "splat make_range expand_dims broadcast addptr advance dot dot_scaled trans "
        "reshape get_program_id get_num_programs fp_to_fp bitcast int_to_ptr "
        "ptr_to_int join split cat clampf precise_sqrt precise_divf mulhiui "
        "histogram make_tensor_ptr reduce scan gather unsplat"
    ).split()
)

_READ_OPS = frozenset({"tt.load", "tt.descriptor_load", "kg.tile_load", "kg.tile_gather",
                       "memref.load"})

# kg ops that touch memory; every other kg op works on values.
_KG_MEMORY_OPS = frozenset({"kg.tile_load", "kg.tile_gather", "kg.tile_store"})

# Ops with regions whose effect is only that of the ops they hold.
_REGION_CONTAINERS = frozenset(
    {"scf.for", "scf.if", "scf.while", "scf.execute_region", "tt.reduce", "tt.scan", "kg.kernel"}
)


def _own_effect(op: ir.Operation) -> Effect:
    name = op.operation.name
    if name in _READ_OPS:
        if "isVolatile" in op.attributes and str(op.attributes["isVolatile"]) == "true":
            return Effect.WRITE
        return Effect.READ
    dialect = name.split(".", 1)[0]
    if dialect == "kg":
        return Effect.WRITE if name in _KG_MEMORY_OPS else Effect.PURE
    if dialect in _PURE_DIALECTS or name in _PURE_TT_OPS:
        return Effect.PURE
    if name in ("tt.extern_elementwise", "tt.elementwise_inline_asm"):
        pure = op.attributes["pure"] if "pure" in op.attributes else None
        return Effect.PURE if pure is not None and str(pure) == "true" else Effect.WRITE
    return Effect.WRITE


def effect_of(op: ir.Operation) -> Effect:
    """The strongest effect of `op`, counting the ops in its regions."""
    own = _own_effect(op) if not op.regions else _container_effect(op)
    return own


def _container_effect(op: ir.Operation) -> Effect:
    if op.operation.name not in _REGION_CONTAINERS and _own_effect(op) is Effect.WRITE:
        return Effect.WRITE
    strongest = Effect.PURE
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if is_terminator(inner):
                    continue
                effect = effect_of(inner)
                if effect is Effect.WRITE:
                    return Effect.WRITE
                if effect is Effect.READ:
                    strongest = Effect.READ
    return strongest


# Terminators must stay even when unused; tensor.yield matters most, as the
# tensor dialect counts as pure (dead code elimination would empty the body
# of a tensor.pad or tensor.generate).
_TERMINATORS = frozenset(
    {"scf.yield", "scf.condition", "tt.reduce.return", "tt.scan.return", "kg.yield",
     "func.return", "tt.return", "cf.br", "cf.cond_br", "tensor.yield"}
)


def is_terminator(op: ir.Operation) -> bool:
    return op.operation.name in _TERMINATORS


def contains_write(region: ir.Region) -> bool:
    for block in region.blocks:
        for op in block.operations:
            if not is_terminator(op) and effect_of(op) is Effect.WRITE:
                return True
    return False
