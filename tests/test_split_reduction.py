"""kg-split-reduction's choice (`split_point`): how many outer reduced axes
the first stage keeps, by the target's SM count (lit_tests has the
rewrites)."""

from __future__ import annotations

import pytest

from kgc.passes.split_reduction import split_point
from kgc.targets import target_for


@pytest.mark.parametrize("shape,dims,sm,kept", [
    # Qwen3's query norm weight: 8 programs whole; batch alone gives 32,
    # batch and tokens 8192.
    ((4, 256, 8, 64), (0, 1, 2), 90, 2),
    # 108 SMs: the same split.
    ((4, 256, 8, 64), (0, 1, 2), 80, 2),
    # 16 SMs (Jetson Orin): 8 programs are one for every 2 SMs.
    ((4, 256, 8, 64), (0, 1, 2), 87, None),
    # A batch of 256 kept gives 256 x 8 programs: keep it alone.
    ((256, 16, 8, 64), (0, 1, 2), 90, 1),
    # No outer axes reach a program per SM (3 x 3 programs at most).
    ((3, 1000, 17), (0, 1), 90, None),
    # One real reduced axis.
    ((1, 1024, 1, 64), (0, 1, 2), 90, None),
    # The last axis reduced.
    ((4, 256, 64), (0, 2), 90, None),
])
def test_the_first_stage_keeps_the_fewest_outer_axes_that_fill_the_sms(shape, dims, sm, kept):
    assert split_point(list(shape), list(dims), target_for(sm)) == kept
