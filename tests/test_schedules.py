"""Schedules and what the generator offers them: loop attributes for
Triton's pipeliner and grids of more than one dimension, compiled down to
cubin (no GPU needed)."""

from __future__ import annotations

import dataclasses
import re

import pytest

import kgc
from kgc.tiling import registry
from kgc.tiling.config import MatmulConfig
from kgc.tiling.iteration import Unplannable
from kgc.tiling.matmul import MatmulSchedule
from kgc.tiling.plan import PointwiseSchedule
from kgc.tiling.registry import plan_group, register_schedule, schedules
from kgc.tiling.schedule import Schedule

MATMUL_WITH_FLAGS = """
func.func @flags(%a: tensor<128x512xf16>, %b: tensor<512x128xf16>) -> tensor<128x128xf16> {
  %y = kg.kernel @flags_0(%a, %b) attributes {config = {block_k = 64, %s}} : (tensor<128x512xf16>, tensor<512x128xf16>) -> tensor<128x128xf16> {
  ^bb0(%x: tensor<128x512xf16>, %w: tensor<512x128xf16>):
    %m = kg.matmul %x, %w : (tensor<128x512xf16>, tensor<512x128xf16>) -> tensor<128x128xf16>
    kg.yield %m : tensor<128x128xf16>
  }
  return %y : tensor<128x128xf16>
}
"""
FROM_TILING = ("builtin.module(kg-tile,kg-legalize-dot,kg-pad-mask,convert-kg-to-ttir,kgc-cse,"
               "kgc-dce)")
FROM_TILING_AFTER_FUSION = FROM_TILING.replace("kg-tile", "kg-decompose,kg-fuse,kg-tile")


# Triton 3.6 warp-specializes loops of pointer loads on sm_100 and newer;
# on sm_90 it needs TMA descriptors (the tma knob: tests/test_hopper_gemm.py).
@pytest.mark.parametrize("flags,attributes,target", [
    ("flatten = true", "{tt.flatten}", "sm_90"),
    ("warp_specialize = true", "{tt.warp_specialize}", "sm_100"),
    ("warp_specialize = true, flatten = true", "{tt.flatten, tt.warp_specialize}", "sm_100"),
])
def test_loop_flags_reach_the_ttir_loop_and_compile(flags, attributes, target):
    pipeline = FROM_TILING.replace("kg-legalize-dot", f"kg-legalize-dot{{target={target[3:]}}}")
    graph = kgc.compile(MATMUL_WITH_FLAGS.replace("%s", flags), target=target, pipeline=pipeline)
    (kernel,) = graph.module.kernels.values()
    loop_ends = [line.strip() for line in kernel.asm["ttir"].splitlines()
                 if line.strip().startswith("} {")]
    assert loop_ends == ["} " + attributes]
    assert kernel.asm["cubin"]


def test_warp_specialize_below_sm100_is_refused_before_triton():
    with pytest.raises(kgc.KgcError, match=r":3:8: error: kernel @flags_0: warp_specialize needs "
                                           r"sm_100 or newer, .* the target is sm_90"):
        kgc.compile(MATMUL_WITH_FLAGS.replace("%s", "warp_specialize = true"), target="sm_90",
                     pipeline=FROM_TILING)


def test_without_flags_the_loop_has_no_attributes():
    graph = kgc.compile(MATMUL_WITH_FLAGS.replace(", %s", ""), target="sm_90", pipeline=FROM_TILING)
    (kernel,) = graph.module.kernels.values()
    assert "tt.warp_specialize" not in kernel.asm["ttir"]
    assert "tt.flatten" not in kernel.asm["ttir"]


class BatchOnGridY(MatmulSchedule):
    """A batched matmul whose batch axes walk grid y and whose (m, n) tiles
    walk grid x, as a schedule that a user adds."""

    kind = "matmul_batch_on_grid_y"

    def match(self, order):
        return any(n.op == "matmul" and len(n.shape) > 2 for n in order)

    def plan(self, outputs, order, config, kernel, target):
        plan = super().plan(outputs, order, config, kernel, target)
        batch = tuple(a for a in plan.program_axes if a < plan.matmul_axes[0])
        tiles = tuple(a for a in plan.program_axes if a not in batch)
        return dataclasses.replace(plan, grid_axes=(tiles, batch))


@pytest.fixture
def batch_on_grid_y(monkeypatch):
    monkeypatch.setattr(registry, "_SCHEDULES", list(registry._SCHEDULES))
    return register_schedule(BatchOnGridY())


def _batched_matmul():
    graph = kgc.Graph("batched")
    a = graph.input("a", (3, 100, 64), "f16")
    b = graph.input("b", (3, 64, 96), "f16")
    graph.output(graph.matmul(a, b))
    return graph


def test_a_registered_schedule_goes_first_and_plans_a_two_dimensional_grid(batch_on_grid_y):
    assert list(schedules())[0] == "matmul_batch_on_grid_y"
    graph = kgc.compile(_batched_matmul(), target="sm_90")
    (kernel,) = graph.module.kernels.values()
    # 100 rows in tiles of 100 and 96 columns in one tile: one program per
    # batch entry along y.
    assert kernel.grid == (1, 3, 1)
    ttir = kernel.asm["ttir"]
    # Triton's custom form, as Triton compiled it: axes 0 and 1 are x and y.
    assert "tt.get_program_id y : i32" in ttir
    assert "tt.get_program_id x : i32" not in ttir
    assert kernel.asm["cubin"]


def test_the_default_schedule_keeps_one_grid_dimension():
    graph = kgc.compile(_batched_matmul(), target="sm_90", pipeline=None)
    (kernel,) = graph.module.kernels.values()
    assert kernel.grid == (3, 1, 1)


def test_grid_axes_must_share_out_the_program_axes():
    from kgc.tiling.graph_model import Node

    a = Node("input", [], (3, 100, 64), "f16", {}, input_index=0)
    b = Node("input", [], (3, 64, 96), "f16", {}, input_index=1)
    plan = plan_group([Node("matmul", [a, b], (3, 100, 96), "f16", {"precision": None})],
                      MatmulConfig(block_m=32))
    assert plan.grid() == [3 * 4, 1, 1]
    split = dataclasses.replace(plan, grid_axes=((1,), (0,)))
    assert split.grid() == [4, 3, 1]
    with pytest.raises(Unplannable, match="must share out the program axes"):
        dataclasses.replace(plan, grid_axes=((1,),)).grid()


def test_a_schedule_kind_is_registered_once():
    with pytest.raises(ValueError, match="a schedule of kind 'matmul' is registered already"):
        register_schedule(MatmulSchedule())
    with pytest.raises(ValueError, match="needs a `kind`"):
        register_schedule(Schedule())


def _four_rows(config):
    """`config` with tiles of four rows where it leaves them open (kgc's
    default gives a few rows one row a program)."""
    return dataclasses.replace(config, block_m=4) if config.block_m is None else config


class PersistentPointwise(PointwiseSchedule):
    """Four programs that each walk every fourth tile of four rows."""

    kind = "pointwise_persistent"

    def plan(self, outputs, order, config, kernel, target):
        return dataclasses.replace(super().plan(outputs, order, _four_rows(config), kernel,
                                                target), persistent_programs=4)


@pytest.fixture
def persistent_pointwise(monkeypatch):
    monkeypatch.setattr(registry, "_SCHEDULES", list(registry._SCHEDULES))
    return register_schedule(PersistentPointwise())


def _relu_rows():
    graph = kgc.Graph("relu_rows")
    x = graph.input("x", (37, 1000), "f16")
    graph.output(graph.relu(x))
    return graph


def test_a_persistent_program_walks_its_tiles_in_a_loop(persistent_pointwise):
    graph = kgc.compile(_relu_rows(), target="sm_90", pipeline=FROM_TILING_AFTER_FUSION)
    (kernel,) = graph.module.kernels.values()
    assert kernel.grid == (4, 1, 1)
    kg_text = graph.module.stages["kg"]
    # 37 rows in tiles of 4: 10 tiles, from the program id in steps of 4.
    assert "kind = \"pointwise\"" in kg_text
    lines = kg_text.splitlines()
    pid = next(line.split(" = ")[0].strip() for line in lines if "kg.program_id 0" in line)
    loop = next(line for line in lines if "scf.for" in line)
    assert f"= {pid} to " in loop
    # The loads, the relu and the store all sit in the loop.
    body = kg_text[kg_text.index(loop):]
    assert body.index("kg.tile_load") < body.index("kg.relu") < body.index("kg.tile_store") \
        < body.index("kg.yield")
    # Rows start at 4 * (a tile below 10): masked past row 37 only, never
    # below 0.
    assert "lower [-2147483648, -2147483648] upper [37, 1000]" in body
    assert "scf.for" in kernel.asm["ttir"] and kernel.asm["cubin"]


def test_persistent_programs_and_a_grid_of_several_dimensions_do_not_mix():
    from kgc.tiling.graph_model import Node

    x = Node("input", [], (37, 1000), "f16", {}, input_index=0)
    plan = plan_group([Node("relu", [x], (37, 1000), "f16", {})])
    assert dataclasses.replace(plan, persistent_programs=64).grid() == [plan.num_programs(), 1, 1]
    with pytest.raises(Unplannable, match="along grid x only"):
        dataclasses.replace(plan, persistent_programs=4, grid_axes=((0,), ())).grid()


SCALAR_KERNEL = """
func.func @scaled(%x: tensor<9x8xf32>) -> tensor<9x8xf32> {
  %y = kg.kernel @scaled_0(%x) attributes {grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 2, 8>, config = {num_warps = 1, num_stages = 1}, scalars = array<i64: 5>} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<9x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %pid = kg.program_id 0 : i32
    %tiles = kg.scalar_arg 0 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    scf.for %t = %pid to %tiles step %c2 : i32 {
      %row = arith.muli %t, %c2 : i32
      %v = kg.tile_load %vin[%row, %c0] : memref<9x8xf32, strided<[8, 1]>> -> tensor<2x8xf32>
      %e = kg.exp %v : tensor<2x8xf32>
      kg.tile_store %e, %vout[%row, %c0] : tensor<2x8xf32>, memref<9x8xf32, strided<[8, 1]>>
    }
    kg.yield
  }
  return %y : tensor<9x8xf32>
}
"""


def test_scalar_arguments_are_in_the_launch_record_and_compile():
    graph = kgc.compile(SCALAR_KERNEL, target="sm_90",
                        pipeline="builtin.module(kg-pad-mask,convert-kg-to-ttir,kgc-cse,kgc-dce)")
    (kernel,) = graph.module.kernels.values()
    assert kernel.scalars == (5,)
    (launch,) = graph.function.launches
    assert launch.scalars == [5]
    assert re.search(r"tt\.func public @\w+\(%arg0: !tt\.ptr<f32> [^,]*, %arg1: !tt\.ptr<f32> [^,]*, "
                     r"%arg2: i32\)", kernel.asm["ttir"])
    assert kernel.asm["cubin"]
    # Triton's kernel takes the i32 after the two pointers.
    assert list(kernel.artifact.signature) == ["*f32", "*f32", "i32"]


class ScalarOfTiles(PointwiseSchedule):
    """Passes the number of tiles (of four rows) to the kernel at launch."""

    kind = "pointwise_with_scalar"

    def plan(self, outputs, order, config, kernel, target):
        plan = super().plan(outputs, order, _four_rows(config), kernel, target)
        return dataclasses.replace(plan, scalar_arguments=(plan.num_programs(),))


def test_a_schedule_passes_scalar_arguments(monkeypatch):
    monkeypatch.setattr(registry, "_SCHEDULES", list(registry._SCHEDULES))
    register_schedule(ScalarOfTiles())
    graph = kgc.compile(_relu_rows(), target="sm_90")
    (kernel,) = graph.module.kernels.values()
    assert kernel.scalars == (kernel.grid[0],)
    assert "scalars = array<i64: 10>" in graph.module.stages["kg"]
