"""A schedule from outside the package, in this one file: defined here,
registered with `kgc.tiling.registry.register_schedule` for the tests that
use it, and compiled with, touching nothing else of kgc.

`RowsOnGridY` plans 2-D pointwise kernels as the built-in pointwise schedule
does, but launches them on a 2-D grid: column tiles along grid x, row tiles
along grid y (the built-in one numbers every tile along grid x). The tiled
kernels run on the CPU executor against torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

import kgc
from kgc.execution import run_tiled
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.stages import kernel_pipeline_text
from kgc.passes.registry import OptionError
from kgc.passes.tile import KgTile
from kgc.tiling.config import KnobOption, PointwiseConfig
from kgc.tiling.graph_model import ELEMENTWISE_OPS
from kgc.tiling.index_maps import next_power_of_two
from kgc.tiling.plan import PointwiseSchedule
from kgc.tiling.registry import register_schedule, schedules, unregister_schedule

torch = pytest.importorskip("torch")


class RowsOnGridY(PointwiseSchedule):
    kind = "pointwise_rows_on_grid_y"

    def match(self, order):
        return len(order[-1].shape) == 2 and all(
            node.is_input or node.op in ELEMENTWISE_OPS for node in order)

    def plan(self, outputs, order, config, kernel, target):
        plan = super().plan(outputs, order, config, kernel, target)
        # Grid x walks the last program axis (columns), grid y the one before.
        return dataclasses.replace(plan, grid_axes=tuple((a,) for a in reversed(plan.program_axes)))


@pytest.fixture
def rows_on_grid_y():
    schedule = register_schedule(RowsOnGridY())
    yield schedule
    unregister_schedule(schedule.kind)


def _scaled_gelu(rows: int, columns: int):
    graph = kgc.Graph("scaled_gelu")
    x = graph.input("x", (rows, columns), "f32")
    y = graph.input("y", (rows, columns), "f32")
    graph.output(graph.gelu(graph.mul(x, y)))
    return graph


@pytest.mark.parametrize("rows,columns,block_m,block_n", [(17, 1000, 4, 256), (3, 4097, 1, 1024),
                                                         (1000, 3, 16, 4), (1, 1, 1, 1)])
def test_a_registered_schedule_plans_and_compiles_a_graph(rows_on_grid_y, rows, columns, block_m,
                                                          block_n):
    assert next(iter(schedules())) == RowsOnGridY.kind  # tried first
    config = GraphConfig("scaled_gelu", kernels={
        "scaled_gelu_0_pointwise": PointwiseConfig(block_m=block_m, block_n=block_n)})
    graph = kgc.compile(_scaled_gelu(rows, columns), target="sm_90", config=config)
    (kernel,) = graph.module.kernels.values()
    # Axes of one tile are no program axes: what is left keeps its order.
    tiles = [t for t in (-(-columns // min(block_n, columns)), -(-rows // block_m)) if t > 1]
    assert kernel.grid == tuple(tiles + [1] * (3 - len(tiles)))
    assert kernel.asm["cubin"]
    x, y = torch.randn(rows, columns), torch.randn(rows, columns)
    result = run_tiled(graph.module.stages["kg"], "scaled_gelu", x, y)
    torch.testing.assert_close(result, torch.nn.functional.gelu(x * y), atol=1e-5, rtol=1e-5)


def test_other_graphs_keep_their_schedules(rows_on_grid_y):
    graph = kgc.Graph("row_sums")
    x = graph.input("x", (17, 1000), "f32")
    graph.output(graph.sum(x, 1))
    compiled = kgc.compile(graph, target="sm_90")
    assert 'kind = "reduction"' in compiled.module.stages["kg"]


def test_unregistering_leaves_the_built_in_schedules():
    schedule = register_schedule(RowsOnGridY())
    assert unregister_schedule(schedule.kind) is schedule
    assert list(schedules()) == ["gather_reduction", "gather", "attention", "library_matmul",
                                 "matmul", "reduction", "pointwise"]
    with pytest.raises(ValueError, match="no schedule of kind 'pointwise_rows_on_grid_y'"):
        unregister_schedule(schedule.kind)


@dataclasses.dataclass(frozen=True)
class _BandedConfig(PointwiseConfig):
    """The pointwise knobs and one of its own, which kg-tile offers."""

    kind: ClassVar[str] = "banded_probe"
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        **PointwiseConfig.OPTIONS, "bands": KnobOption("row bands per program")}

    bands: int | None = None


class _Banded(PointwiseSchedule):
    kind = "banded_probe"
    config_class = _BandedConfig

    def match(self, order):
        return False


def test_kg_tile_offers_the_knobs_of_the_registered_schedules():
    assert "bands" not in KgTile.option_specs()
    schedule = register_schedule(_Banded())
    try:
        options = KgTile.option_specs()
        assert options["bands"].kind is int and "banded_probe kernels" in options["bands"].help
        # A knob the new schedule shares names every kind that has it.
        assert "banded_probe" in options["block-m"].help and "matmul" in options["block-m"].help
        assert KgTile.from_textual_options({"bands": "4"}).bands == 4
    finally:
        unregister_schedule(schedule.kind)
    assert "bands" not in KgTile.option_specs()
    with pytest.raises(OptionError, match="has no option 'bands'"):
        KgTile.from_textual_options({"bands": "4"})


@dataclasses.dataclass(frozen=True)
class _RowBandsConfig(PointwiseConfig):
    """The pointwise knobs and `bands`: how many programs share the rows."""

    kind: ClassVar[str] = "row_bands"

    bands: int | None = None

    def _canonical_extra(self, extents, kernel):
        rows = extents.get("m", 1)
        if self.bands is not None and self.bands > rows:
            raise self._error(kernel, "bands", self.bands, f"at most {rows}, the rows")
        return self


class _RowBands(PointwiseSchedule):
    """2-D pointwise kernels whose rows go to `bands` programs (a row tile
    of the power of two that covers rows / bands)."""

    kind = "row_bands"
    config_class = _RowBandsConfig

    def match(self, order):
        return len(order[-1].shape) == 2 and all(
            node.is_input or node.op in ELEMENTWISE_OPS for node in order)

    def plan(self, outputs, order, config, kernel, target):
        if config.bands is not None:
            rows = outputs[0].shape[0]
            config = dataclasses.replace(config, block_m=next_power_of_two(-(-rows // config.bands)))
        return super().plan(outputs, order, config, kernel, target)


@pytest.fixture
def row_bands():
    schedule = register_schedule(_RowBands())
    yield schedule
    unregister_schedule(schedule.kind)


def _banded_text(config: str) -> str:
    return f"""
func.func @banded(%x: tensor<17x100xf32>) -> tensor<17x100xf32> {{
  %y = kg.kernel @banded_0(%x) attributes {{config = {{{config}}}}} : (tensor<17x100xf32>) -> tensor<17x100xf32> {{
  ^bb0(%a: tensor<17x100xf32>):
    %r = kg.exp %a : tensor<17x100xf32>
    kg.yield %r : tensor<17x100xf32>
  }}
  return %y : tensor<17x100xf32>
}}
"""


# The kernel is given already fused: the pipeline from kg-tile on.
_FROM_TILING = kernel_pipeline_text(90)


def test_a_registered_schedule_takes_its_own_knob_from_the_config_attribute(row_bands):
    # 17 rows in 2 bands: row tiles of 16 (the power of two covering 9), 2
    # programs along the rows; the knob stays in the tiled kernel's config.
    graph = kgc.compile(_banded_text("bands = 2, block_n = 128"), target="sm_90",
                        pipeline=_FROM_TILING)
    (kernel,) = graph.module.kernels.values()
    assert kernel.grid == (2, 1, 1)
    assert "config = {bands = 2 : i64, block_m = 16 : i64, block_n = 100 : i64" in \
        graph.module.stages["kg"]
    x = torch.randn(17, 100)
    torch.testing.assert_close(run_tiled(graph.module.stages["kg"], "banded", x), torch.exp(x))


def test_the_registered_schedule_validates_its_knob(row_bands):
    with pytest.raises(kgc.KgcError, match="row_bands kernel @banded_0: bands = 40 is not legal; "
                                           "bands must be at most 17, the rows"):
        kgc.compile(_banded_text("bands = 40"), target="sm_90", pipeline=_FROM_TILING)


def test_a_knob_of_an_unregistered_schedule_is_refused():
    # Without the schedule, the kernel is an ordinary pointwise one, whose
    # schedule has no such knob.
    with pytest.raises(kgc.KgcError, match=r"pointwise kernel @banded_0: its config has no knob "
                                           r"bands \(the knobs of pointwise kernels: "):
        kgc.compile(_banded_text("bands = 2"), target="sm_90", pipeline=_FROM_TILING)
