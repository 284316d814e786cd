"""kgc-cse: common subexpression elimination for kg and Triton IR.

Argument: `kgc-cse`. No options.

Rewrite rules (`a` and `b` have the same name, operands, attributes and
result types, and `a` dominates `b`):

    pure a; ...; pure b           =>  a; ... (uses of b use a)
    read a; <no write>; read b    =>  a; ... (uses of b use a)
    read a; write w; read b       =>  unchanged (w may change what b reads)
    write a; write b              =>  unchanged (stores are never merged)

Values defined outside a region are visible inside it, so an op in a loop
body reuses a dominating op from outside the loop. A region that writes
memory (a loop that stores) starts a new memory epoch: reads inside it never
merge with reads outside it, nor with reads after it. Ops that hold regions
are not merged themselves.

Triton skips its own clean-up for TTIR input, so this runs on the TTIR that
kgc emits as well as on kg graphs.
"""

from __future__ import annotations

import itertools
from collections import ChainMap

from mlir import ir

from kgc.passes.effects import Effect, contains_write, effect_of
from kgc.passes.registry import Pass, register_pass


@register_pass
class CommonSubexpressionElimination(Pass):
    """Merges ops that compute the same value; see the module docstring."""

    argument = "kgc-cse"
    summary = "Eliminate common subexpressions in kg and tt IR, respecting memory effects"

    @classmethod
    def display_name(cls) -> str:
        return "KgcCSE"

    def run(self, op: ir.Operation) -> None:
        self._epochs = itertools.count(1)
        self._epoch = 0
        for region in op.regions:
            self._visit_region(region, ChainMap())

    def _visit_region(self, region: ir.Region, scope: ChainMap) -> None:
        for block in region.blocks:
            self._visit_block(block, scope.new_child())

    def _visit_block(self, block: ir.Block, scope: ChainMap) -> None:
        for op in list(block.operations):
            if op.regions:
                writes = any(contains_write(r) for r in op.regions)
                if writes:
                    self._epoch = next(self._epochs)
                for region in op.regions:
                    self._visit_region(region, scope)
                if writes:
                    self._epoch = next(self._epochs)
                continue
            effect = effect_of(op)
            if effect is Effect.WRITE:
                self._epoch = next(self._epochs)
                continue
            if not op.results:
                continue
            key = self._key(op, effect)
            existing = scope.get(key)
            if existing is None:
                scope[key] = op
                continue
            for old, new in zip(op.results, existing.results):
                old.replace_all_uses_with(new)
            op.erase()

    def _key(self, op: ir.Operation, effect: Effect) -> tuple:
        attributes = tuple(sorted((name, str(op.attributes[name])) for name in op.attributes))
        return (
            op.operation.name,
            tuple(op.operands),
            attributes,
            tuple(str(result.type) for result in op.results),
            self._epoch if effect is Effect.READ else None,
        )
