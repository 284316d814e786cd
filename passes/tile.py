"""kg-tile: turn each kernel's graph ops into a tile program.

Argument: `kg-tile`. No options; a kernel's tile sizes and launch settings
come from its own attributes when a user (or an autotuner) set them, and
from kgc's heuristics otherwise: `block_m`, `block_n`, `block_k`,
`group_m` (matmul kernels), `block_x`, `block_r` (reductions), `block_m`,
`block_n` (pointwise), and `num_warps`, `num_stages` for all.

Rewrite rules:

    kg.kernel @k(%x...) { graph ops; kg.yield %y... }
      =>  kg.kernel @k(%x...) attributes {kind, grid, iteration, tile,
                                          num_warps, num_stages, block_*} {
          ^bb0(%x_buf: memref..., %y_buf: memref...):
            kg.program_id, memref.reinterpret_cast views of the buffers,
            kg.tile_load, kg ops on tiles, kg.reduce, kg.tile_dot,
            scf.for loops over looped axes (marked kg.axis = N),
            kg.tile_store of every result
            kg.yield
          }
    kg.kernel already in tiled form  =>  unchanged

Tiles may have any size here; `kg-pad-mask` pads them to powers of two and
masks the accesses of partial tiles. See kgc.tiling.plan for how the
iteration space and tiles are chosen.
"""

from __future__ import annotations

from mlir import ir

from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling.graph_model import nodes_from_ops
from kgc.tiling.kernel_ops import is_tiled, kernel_name, kernels_in
from kgc.tiling.mlir_builder import MlirBuilder
from kgc.tiling.plan import KNOBS, KernelPlan, Unplannable, plan_group
from kgc.tiling.generate import Generator

# Kernel attributes kg-tile reads as integers when present.
_INTEGER_KNOBS = sorted({k for knobs in KNOBS.values() for k in knobs})


def read_config(kernel: ir.Operation) -> dict[str, int]:
    config = {}
    for name in _INTEGER_KNOBS:
        if name in kernel.attributes:
            attribute = kernel.attributes[name]
            if not isinstance(attribute, ir.IntegerAttr):
                raise PassFailure(f"kernel @{kernel_name(kernel)}: attribute {name} must be an "
                                  f"integer, got {attribute}", kernel.location)
            config[name] = ir.IntegerAttr(attribute).value
    return config


def plan_kernel(kernel: ir.Operation) -> tuple[KernelPlan, list]:
    block = kernel.regions[0].blocks[0]
    ops = [op.operation for op in block.operations][:-1]
    nodes, by_value = nodes_from_ops(ops, inputs=list(block.arguments))
    outputs = [by_value[value] for value in block.operations[len(ops)].operands]
    try:
        plan = plan_group(outputs, read_config(kernel))
    except Unplannable as reason:
        raise PassFailure(f"kernel @{kernel_name(kernel)} cannot be tiled: {reason}",
                          kernel.location) from None
    return plan, outputs


@register_pass
class KgTile(Pass):
    argument = "kg-tile"
    summary = "Turn kernels in graph form into tile programs with chosen tile sizes and grid"


    def run(self, op: ir.Operation) -> None:
        for kernel in kernels_in(op):
            if not is_tiled(kernel):
                tile_kernel(kernel)


def tile_kernel(kernel: ir.Operation) -> ir.Operation:
    plan, outputs = plan_kernel(kernel)
    i64 = ir.IntegerType.get_signless(64)
    attributes = {name: kernel.attributes[name] for name in kernel.attributes
                  if name not in _INTEGER_KNOBS}
    attributes["kind"] = ir.StringAttr.get(plan.kind)
    attributes["grid"] = ir.DenseI64ArrayAttr.get([plan.num_programs(), 1, 1])
    attributes["iteration"] = ir.DenseI64ArrayAttr.get(list(plan.extents))
    attributes["tile"] = ir.DenseI64ArrayAttr.get(list(plan.tile))
    for name, value in plan.config.items():
        attributes[name] = ir.IntegerAttr.get(i64, value)
    with kernel.location, ir.InsertionPoint(kernel):
        tiled = ir.Operation.create("kg.kernel", results=[r.type for r in kernel.results],
                                    operands=list(kernel.operands), attributes=attributes,
                                    regions=1)
        buffer_types = [
            ir.MemRefType.get(list(ir.RankedTensorType(t).shape), ir.RankedTensorType(t).element_type)
            for t in [v.type for v in kernel.operands] + [r.type for r in kernel.results]]
        block = tiled.regions[0].blocks.append(*buffer_types)
    builder = MlirBuilder(block, list(block.arguments), len(kernel.operands), kernel.location)
    with ir.InsertionPoint(block), kernel.location:
        Generator(plan, builder).run()
        ir.Operation.create("kg.yield")
    for old, new in zip(kernel.results, tiled.results):
        old.replace_all_uses_with(new)
    kernel.erase()
    return tiled
