"""kgc-cse: common subexpression elimination for kg and Triton IR.

Argument: `kgc-cse`. No options.

Rewrite rules (`a` and `b` have the same name, operands, attributes and
result types, and `a` dominates `b`):

    pure a; ...; pure b           =>  a; ... (uses of b use a)
    read a; <no write>; read b    =>  a; ... (uses of b use a)
    read a; write w; read b       =>  unchanged (w may change what b reads)
    write a; write b              =>  unchanged (stores are never merged)

Values defined outside a region are visible inside it, so an op in a loop
body reuses a dominating op from outside the loop. Regions of other ops
(func.func, tt.func, kg.kernel, which are isolated from above, and any op
not known to be open) start with nothing in scope. A region that writes
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

# Ops whose regions may use the values defined around them. Replacing a use
# inside an IsolatedFromAbove region (kg.kernel, func.func, tt.func) by a
# value from outside would leave invalid IR, so only these share the scope.
_OPEN_REGION_OPS = frozenset(
    {"scf.for", "scf.if", "scf.while", "scf.execute_region", "scf.forall", "scf.parallel",
     "scf.index_switch"}
)


@register_pass
class KgcCSE(Pass):
    """Merges ops that compute the same value; see the module docstring."""

    argument = "kgc-cse"
    summary = "Eliminate common subexpressions in kg and tt IR, respecting memory effects"


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
                inner_scope = scope if op.operation.name in _OPEN_REGION_OPS else ChainMap()
                for region in op.regions:
                    self._visit_region(region, inner_scope)
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
        attributes = tuple(sorted((name, str(value)) for name, value in _all_attributes(op).items()))
        return (
            op.operation.name,
            tuple(op.operands),
            attributes,
            tuple(str(result.type) for result in op.results),
            self._epoch if effect is Effect.READ else None,
        )


def _all_attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    """Every attribute of `op` by name, its properties included.

    Iterating `op.attributes` lists the inherent attributes of registered
    ops, but skips the properties of an op this context does not register
    (Triton's generic form: `"tt.get_program_id"() <{axis = 0 : i32}>`),
    though a lookup by name finds them. They are read back from the op's
    generic form; without them a `tt.get_program_id` of axis 0 and one of
    axis 1 would look alike and be merged.
    """
    found = {name: op.attributes[name] for name in op.attributes}
    operation = op.operation
    if not operation.context.is_registered_operation(operation.name):
        properties = _unregistered_properties(operation)
        if properties is not None:
            for named in properties:
                found.setdefault(named.name, named.attr)
    return found


def _unregistered_properties(op: ir.Operation) -> ir.DictAttr | None:
    # Generic form: %r = "name"(%operands) [^successors] <{properties}> ...
    text = op.get_asm(print_generic_op_form=True, skip_regions=True, assume_verified=True)
    head = text.find(f'"{op.name}"(')
    if head < 0:
        return None
    rest = text[text.find(")", head + len(op.name) + 3) + 1 :].lstrip()
    if rest.startswith("["):
        rest = rest[rest.find("]") + 1 :].lstrip()
    if not rest.startswith("<{"):
        return None
    end = _closing_brace(rest, 1)
    if end is None:
        return None
    return ir.DictAttr(ir.Attribute.parse(rest[1 : end + 1], op.context))


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the `}` matching the `{` at `start`, skipping strings."""
    depth, index, in_string = 0, start, False
    while index < len(text):
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None
