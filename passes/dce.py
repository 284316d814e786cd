"""kgc-dce: dead code elimination for kg and Triton IR.

Argument: `kgc-dce`. No options.

Rewrite rules (a result is dead when nothing uses it):

    %r = pure op (dead)                     =>  (erased)
    %r = read op (dead)                     =>  (erased)
    %r = scf.for/scf.if/tt.reduce/kg.kernel (dead, body does not write)
                                            =>  (erased)
    write op (tt.store, kg.tile_store, ...) =>  unchanged, whatever its users
    volatile load                           =>  unchanged

Ops are visited bottom-up, so a chain of dead ops goes in one run; bodies are
cleaned before the ops that hold them are judged.
"""

from __future__ import annotations

from mlir import ir

from kgc.passes.effects import Effect, effect_of, is_terminator
from kgc.passes.registry import Pass, register_pass


@register_pass
class KgcDCE(Pass):
    """Erases ops whose results are unused and that write no memory."""

    argument = "kgc-dce"
    summary = "Erase unused side-effect-free ops in kg and tt IR, never stores"


    def run(self, op: ir.Operation) -> None:
        for region in op.regions:
            self._visit_region(region)

    def _visit_region(self, region: ir.Region) -> None:
        for block in region.blocks:
            for op in reversed(list(block.operations)):
                for inner in op.regions:
                    self._visit_region(inner)
                if self._is_dead(op):
                    op.erase()

    @staticmethod
    def _is_dead(op: ir.Operation) -> bool:
        if is_terminator(op) or effect_of(op) is Effect.WRITE:
            return False
        return all(_unused(result) for result in op.results)


def _unused(value: ir.Value) -> bool:
    return next(iter(value.uses), None) is None
