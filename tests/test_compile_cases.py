"""Every case of the GPU suite compiles to cubin without a GPU, with the
number of kernels the fusion promises for the named patterns."""

import pytest

import kgc
from tests.cases import parameters

FUSED_INTO_ONE_KERNEL = ("rmsnorm_matmul", "gated_mlp", "softmax", "rms_norm", "layer_norm",
                         "bias_gelu_residual", "layernorm_then_softmax")


@pytest.mark.parametrize("case,dtype", parameters(), ids=lambda p: getattr(p, "name", p))
def test_compiles_to_cubin(case, dtype):
    graph = kgc.compile(case.graph(dtype))
    kernels = graph.module.kernels
    function = graph.function
    if not kernels:
        # Only a graph that returns its arguments (a cast to the same type)
        # needs no kernel.
        assert all(r < function.num_arguments for r in function.results)
        return
    assert all(k.asm.get("cubin") for k in kernels.values())
    if case.name.split("-")[0] in FUSED_INTO_ONE_KERNEL:
        # One kernel, launched once, or twice where its k loop is split (a
        # partials kernel, then the kernel that sums them).
        launched = [launch.kernel for launch in graph.function.launches]
        split = len(launched) == 2 and launched[0].endswith("_partials") and \
            launched[1] == launched[0].removesuffix("_partials") + "_reduce"
        assert len(launched) == 1 or split, launched
    if case.name.startswith("attention"):
        assert len(graph.function.launches) <= 2
