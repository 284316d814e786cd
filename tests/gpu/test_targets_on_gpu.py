"""The target record of the GPU at hand: read from the device, and the one a
compile for its SM version plans with."""

from __future__ import annotations

import pytest
from mlir import ir

import kgc
from kgc import targets
from kgc.pipeline.compiler import compile_module
from kgc.tiling.kernel_ops import int_array, kernel_name, kernels_in

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _sm() -> int:
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def test_the_present_gpu_is_read_from_the_device():
    if _sm() not in targets.SUPPORTED_SMS:
        pytest.skip(f"sm_{_sm()} is not a GPU kgc compiles for")
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    record = targets.present_gpu()
    assert record is not None and record.from_device and record.sm == _sm()
    assert record.sm_count == properties.multi_processor_count
    assert record.max_shared_memory_per_block == properties.shared_memory_per_block_optin
    assert record.l2_bytes == properties.L2_cache_size
    # A compile for this GPU's SM version plans with its figures, another
    # SM version with the table's.
    assert targets.target_for(_sm()) == record
    other = next(sm for sm in targets.SUPPORTED_SMS if sm != _sm())
    assert targets.target_for(other) == targets.table_record(other)


def test_kgc_s_split_fills_the_gpu_at_hand():
    # 1 x 4096 x 1024 in f16: 16 tiles of 64 columns, split until they fill
    # this GPU's SMs once (at most 16 ways, each of at least 4 k steps).
    if _sm() not in targets.SUPPORTED_SMS:
        pytest.skip(f"sm_{_sm()} is not a GPU kgc compiles for")
    graph = kgc.Graph("gemv")
    x = graph.input("x", (1, 4096), "f16")
    w = graph.input("w", (4096, 1024), "f16")
    graph.output(graph.matmul(x, w))
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, target=_sm(), emit="kg")
        grids = {kernel_name(k): int_array(k, "grid") for k in kernels_in(module)}
    sms = targets.present_gpu().sm_count
    splits = 1
    while 16 * splits < sms and splits < 16:
        splits *= 2
    if splits == 1:
        assert list(grids) == ["gemv_0_matmul"]
    else:
        assert list(grids["gemv_0_matmul_partials"]) == [16, splits, 1]
