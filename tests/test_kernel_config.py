"""Kernel configs: legal values, canonical forms, JSON and attribute round
trips, the search space, and the planner tiling with them."""

from __future__ import annotations

import pytest
from mlir import ir

import kgc  # noqa: F401  (loads the kg dialect)
from kgc.tiling.config import (CONFIG_CLASSES, ConfigError, KernelConfig, MatmulConfig,
                               PointwiseConfig, ReductionConfig)
from kgc.tiling.graph_model import Node
from kgc.tiling.registry import plan_group

POINTWISE = {"m": 17, "n": 1000}
REDUCTION = {"x": 17, "r": 1000}
MATMUL = {"m": 384, "n": 1024, "k": 512}


def _input(shape, element="f16", index=0):
    return Node("input", [], tuple(shape), element, {}, input_index=index)


def _matmul_graph(m=384, k=512, n=1024, element="f16"):
    a, b = _input((m, k), element, 0), _input((k, n), element, 1)
    return [Node("matmul", [a, b], (m, n), element, {"precision": None})]


def _exp_graph(shape=(17, 1000)):
    return [Node("exp", [_input(shape, "f32")], tuple(shape), "f32", {})]


# -- legality -------------------------------------------------------------------


@pytest.mark.parametrize("config,extents,message", [
    (PointwiseConfig(block_n=100), POINTWISE,
     "pointwise kernel @k: block_n = 100 is not legal; block_n must be a power of two, or at "
     "least 1000 to cover its axis"),
    (PointwiseConfig(block_m=0), POINTWISE, "block_m = 0 is not legal"),
    (ReductionConfig(num_warps=3), REDUCTION,
     "reduction kernel @k: num_warps = 3 is not legal; num_warps must be a power of two up to 32"),
    (ReductionConfig(num_warps=64), REDUCTION, "num_warps = 64 is not legal"),
    (MatmulConfig(num_stages=0), MATMUL, "num_stages = 0 is not legal; num_stages must be a "
                                         "positive integer"),
    (MatmulConfig(group_m=3), MATMUL, "group_m = 3 is not legal; group_m must be a power of two"),
    (MatmulConfig(block_k=2.5), MATMUL, "block_k = 2.5 is not legal; block_k must be an integer"),
    (MatmulConfig(warp_specialize=1), MATMUL, "warp_specialize = 1 is not legal; warp_specialize "
                                              "must be true or false"),
])
def test_an_illegal_value_is_an_error_naming_kernel_knob_and_legal_values(config, extents, message):
    with pytest.raises(ConfigError) as error:
        config.canonical(extents, kernel="k")
    assert message in str(error.value)


def test_a_tile_at_or_above_its_extent_is_the_extent():
    assert PointwiseConfig(block_n=1000).canonical(POINTWISE).block_n == 1000
    assert PointwiseConfig(block_n=1024).canonical(POINTWISE).block_n == 1000
    assert PointwiseConfig(block_n=4096).canonical(POINTWISE) == PointwiseConfig(block_n=1000)
    # Below the extent a power of two stays as it is.
    assert PointwiseConfig(block_n=512).canonical(POINTWISE).block_n == 512


def test_a_knob_of_an_axis_the_kernel_lacks_is_dropped():
    assert PointwiseConfig(block_m=8, block_n=64).canonical({"n": 1000}) == PointwiseConfig(block_n=64)
    assert ReductionConfig(block_x=4).canonical({"r": 1000}) == ReductionConfig()


def test_group_m_is_one_where_the_grid_has_one_tile_along_m_or_n():
    assert MatmulConfig(block_m=512, block_n=64, group_m=8).canonical(MATMUL).group_m == 1
    assert MatmulConfig(block_m=64, block_n=64, group_m=8).canonical(MATMUL).group_m == 8


def test_configs_that_give_the_same_kernel_plan_to_equal_configs():
    outputs = _exp_graph()
    wide = plan_group(outputs, PointwiseConfig(block_m=2, block_n=4096)).config
    exact = plan_group(outputs, PointwiseConfig(block_m=2, block_n=1000)).config
    assert wide == exact
    # Knobs left open are filled in; setting them to what kgc picks changes nothing.
    default = plan_group(outputs).config
    assert plan_group(outputs, default).config == default
    assert plan_group(outputs, PointwiseConfig(block_m=2)).config != default


def test_the_plan_follows_the_config():
    plan = plan_group(_matmul_graph(), MatmulConfig(block_m=64, block_n=32, block_k=16,
                                                    num_warps=2, num_stages=5))
    assert plan.tile == (64, 16, 32)
    assert (plan.num_warps, plan.num_stages) == (2, 5)
    assert plan.num_programs() == (384 // 64) * (1024 // 32)
    assert plan.knob_extents == MATMUL


def test_a_config_of_another_kind_is_refused():
    from kgc.tiling.plan import Unplannable

    with pytest.raises(Unplannable, match="a reduction config was given for a pointwise kernel"):
        plan_group(_exp_graph(), ReductionConfig(block_r=64))


# -- forms ----------------------------------------------------------------------


@pytest.mark.parametrize("config", [
    PointwiseConfig(), PointwiseConfig(block_m=4, block_n=256, num_warps=8, num_stages=1),
    ReductionConfig(block_x=2, block_r=512),
    MatmulConfig(block_m=128, block_n=64, block_k=32, group_m=8, warp_specialize=True,
                 flatten=False),
])
def test_json_and_attributes_round_trip(config):
    assert KernelConfig.from_json(config.to_json()) == config
    with ir.Context():
        assert type(config).from_attribute(config.to_attribute()) == config


def test_json_names_the_kind_and_only_the_set_knobs():
    assert PointwiseConfig(block_n=256).to_dict() == {"kind": "pointwise", "block_n": 256}


@pytest.mark.parametrize("text,message", [
    ('{"kind": "conv"}', "kind 'conv' is not one of pointwise, reduction, matmul"),
    ('{"kind": "reduction", "block_k": 64}', "reduction kernels have no knob block_k"),
    ("[1]", "an object of knobs"),
    ("{", "not JSON"),
])
def test_bad_json_is_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        KernelConfig.from_json(text)


def test_a_config_knob_of_the_wrong_type_is_refused():
    with ir.Context():
        config = ir.DictAttr.get({"block_m": ir.BoolAttr.get(True)})
        with pytest.raises(ConfigError, match="pointwise kernel @k: config knob block_m must be an "
                                              "integer, got true"):
            PointwiseConfig.from_attribute(config, kernel="k")
        flag = ir.DictAttr.get({"tma": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)})
        with pytest.raises(ConfigError, match="config knob tma must be true or false, got 1"):
            MatmulConfig.from_attribute(flag, kernel="k")


def test_a_config_knob_the_kind_does_not_have_is_refused():
    with ir.Context():
        config = ir.DictAttr.get({"block_k": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)})
        with pytest.raises(ConfigError, match="reduction kernel @k: its config has no knob block_k "
                                              r"\(the knobs of reduction kernels: num_warps, "):
            ReductionConfig.from_attribute(config, kernel="k")


def test_no_config_attribute_is_an_empty_config():
    assert MatmulConfig.from_attribute(None) == MatmulConfig()


# -- search space ---------------------------------------------------------------


@pytest.mark.parametrize("cls,extents,element", [
    (PointwiseConfig, POINTWISE, "f32"), (PointwiseConfig, {"n": 3}, "f16"),
    (ReductionConfig, REDUCTION, "f32"), (ReductionConfig, {"r": 70000}, "bf16"),
    (MatmulConfig, MATMUL, "f16"), (MatmulConfig, {"m": 16, "n": 6144, "k": 4096}, "f8E4M3FN"),
])
def test_the_space_is_finite_canonical_and_distinct(cls, extents, element):
    space = cls.space(extents, element)
    assert 0 < len(space) < 2000
    assert len(set(space)) == len(space)
    for config in space:
        assert config.canonical(extents) == config
        for knob, axis in cls.TILE_AXES.items():
            value = getattr(config, knob)
            assert value is None if axis not in extents else value <= extents[axis]


def test_the_space_of_the_base_class_names_the_kinds_that_have_one():
    with pytest.raises(ConfigError, match="KernelConfig.space: the configs of one kind of kernel; "
                                          "call it on PointwiseConfig, ReductionConfig, "
                                          "MatmulConfig, AttentionConfig"):
        KernelConfig.space({"m": 128, "n": 768, "k": 3072}, "f16")


@pytest.mark.parametrize("extents, element, message", [
    # Which tuple entry is which axis is not said: the axes are named.
    ((128, 768, 3072), "f16",
     "MatmulConfig.space: extents must map each axis name to its size, as "
     "{'m': 128, 'n': 768, 'k': 3072} (matmul kernels tile the axes m, n, k); "
     "got (128, 768, 3072) (tuple)"),
    ({"m": 128, "n": "768"}, "f16", "extents must map axis names to integer sizes"),
    ({"m": 128, "n": 768, "k": 3072}, 16,
     "element must be an element type name such as 'f16', got 16 (int)"),
])
def test_space_arguments_it_cannot_take_are_named(extents, element, message):
    with pytest.raises(ConfigError) as raised:
        MatmulConfig.space(extents, element)
    assert message in str(raised.value)


def test_the_space_shrinks_with_the_extents():
    small = PointwiseConfig.space({"m": 3, "n": 17}, "f32")
    assert {c.block_n for c in small} == {17}
    assert {c.block_m for c in small} <= {1, 2, 3}
    large = PointwiseConfig.space(POINTWISE, "f32")
    assert len(small) < len(large)


def test_every_config_of_a_space_plans():
    outputs = _matmul_graph(m=64, k=64, n=128)
    extents = {"m": 64, "n": 128, "k": 64}
    for config in MatmulConfig.space(extents, "f16"):
        assert plan_group(outputs, config).config.block_m == config.block_m


def test_each_kind_has_its_config():
    # The library kernel's config (kgc.tiling.library) is registered with its
    # schedule.
    import kgc.tiling.registry  # noqa: F401

    assert set(CONFIG_CLASSES) == {"pointwise", "reduction", "matmul", "attention",
                                   "library_matmul"}
    assert MatmulConfig.knobs() == ("num_warps", "num_stages", "num_programs", "block_m", "block_n",
                                    "block_k", "group_m", "warp_specialize", "flatten", "split_k", "tma")


def test_num_programs_makes_a_persistent_kernel_of_at_most_one_program_per_tile():
    outputs = _exp_graph()  # 17 rows of 1000: 17 tiles of one row
    plan = plan_group(outputs, PointwiseConfig(block_m=1, num_programs=4))
    assert plan.persistent_programs == 4 and plan.grid() == [4, 1, 1]
    many = plan_group(outputs, PointwiseConfig(block_m=1, num_programs=1000)).config
    assert many == plan_group(outputs, PointwiseConfig(block_m=1, num_programs=17)).config
    assert many.num_programs == 17
    with pytest.raises(ConfigError, match="num_programs = 0 is not legal"):
        plan_group(outputs, PointwiseConfig(num_programs=0))
