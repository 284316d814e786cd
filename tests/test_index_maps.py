"""Index maps and buffer views, checked against torch's own views.

The tiler reads each kernel input through an affine map from the
iteration space (`IndexMap`) and a strided view of its buffer
(`BufferView`); the offsets and view sizes that decide the masks come from
them. Here a graph value made by view ops from `x = arange(n)` is read
back through the map derived for it, at every point of the iteration, and
must equal what torch's views give.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgc.tiling.index_maps import (BufferView, IndexMap, NotAffine, ceil_div, next_power_of_two,
                                   reshape_groups)

torch = pytest.importorskip("torch")


def numbered(shape) -> "torch.Tensor":
    """A tensor whose every element is its own row-major address."""
    return torch.arange(torch.Size(shape).numel()).reshape(shape)


def read(x, index_map: IndexMap):
    """`x` read at `index_map` over its iteration window, as the tile
    program's addresses would read it."""
    strides, offset = BufferView.contiguous(x.shape).address_map(index_map)
    points = torch.meshgrid(*[torch.arange(lo, hi) for lo, hi in index_map.windows], indexing="ij")
    address = offset + sum(point * stride for point, stride in zip(points, strides))
    return x.reshape(-1)[address]


def window(value, index_map: IndexMap):
    return value[tuple(slice(lo, hi) for lo, hi in index_map.windows)]


# (input shape, torch view ops, the same as maps from the result back to the
# input). Each `back` step takes the map of an op's result to its operand's.
VIEW_CHAINS = {
    "transpose": ((3, 17, 5), lambda x: x.permute(2, 0, 1),
                  lambda m: m.transposed_from((2, 0, 1))),
    "slice with offsets and strides": ((17, 1000), lambda x: x[1:17:2, 3:903:3],
                                       lambda m: m.sliced_from((1, 3), (2, 3))),
    "broadcast of a vector": ((1000,), lambda x: x.expand(3, 1000),
                              lambda m: m.broadcast_from((3, 1000), (1000,))),
    "broadcast of a unit axis": ((17, 1), lambda x: x.expand(17, 5),
                                 lambda m: m.broadcast_from((17, 5), (17, 1))),
    "reshape splitting an axis": ((17, 1000), lambda x: x.reshape(17, 10, 100),
                                  lambda m: m.reshaped_from((17, 10, 100), (17, 1000))),
    "reshape adding unit axes": ((4097,), lambda x: x.reshape(1, 4097, 1),
                                 lambda m: m.reshaped_from((1, 4097, 1), (4097,))),
    "slice of a transpose of a split": (
        (6, 35), lambda x: x.reshape(6, 5, 7).permute(2, 0, 1)[1:7:3, :, 2:5],
        lambda m: m.sliced_from((1, 0, 2), (3, 1, 1)).transposed_from((2, 0, 1))
        .reshaped_from((6, 5, 7), (6, 35))),
    "extent 1": ((1,), lambda x: x.expand(1, 1), lambda m: m.broadcast_from((1, 1), (1,))),
}


@pytest.mark.parametrize("name", VIEW_CHAINS)
def test_a_map_reads_what_torch_views_give(name):
    shape, view, back = VIEW_CHAINS[name]
    x = numbered(shape)
    value = view(x)
    index_map = back(IndexMap.identity(value.shape))
    assert index_map.rank == len(shape) and index_map.extents == tuple(value.shape)
    assert torch.equal(read(x, index_map), value)


def test_a_transposed_map_permutes_rows():
    index_map = IndexMap.identity((5, 3, 17)).transposed_from((2, 0, 1))
    assert index_map.rows == ((0, 1, 0), (0, 0, 1), (1, 0, 0))
    assert index_map.depends_on() == frozenset({0, 1, 2})


def test_a_broadcast_reads_unit_axes_at_zero():
    index_map = IndexMap.identity((17, 5)).broadcast_from((17, 5), (1, 5))
    assert index_map.rows == ((0, 0), (0, 1)) and index_map.offsets == (0, 0)
    assert index_map.depends_on() == frozenset({1})
    assert index_map.axis_of_row(0) is None and index_map.axis_of_row(1) == 1


def test_a_slice_scales_and_shifts_rows():
    index_map = IndexMap.identity((8, 300)).sliced_from((1, 3), (2, 3))
    assert index_map.rows == ((2, 0), (0, 3)) and index_map.offsets == (1, 3)
    assert index_map.axis_of_row(0) is None  # scaled: not a plain iteration axis


def test_select_reads_chosen_axes():
    index_map = IndexMap.select((4, 6, 8), (2, None, 0))
    assert index_map.rows == ((0, 0, 1), (0, 0, 0), (1, 0, 0))
    assert index_map.windows == ((0, 4), (0, 6), (0, 8))


def test_merging_dimensions_is_not_affine():
    # x (3, 17, 5) read through reshape(x) to (51, 5): one row of the
    # result mixes three of x's.
    with pytest.raises(NotAffine, match=r"reshape \(3, 17, 5\) -> \(51, 5\) merges dimensions"):
        IndexMap.identity((51, 5)).reshaped_from((51, 5), (3, 17, 5))


def test_a_merge_read_at_its_own_row_major_combination_is_affine():
    # The 8 query heads of grouped attention, iterated as (kv head 2, member
    # 4): head = 4 * kv + member. K broadcast to them through (2, 4) -> 8 is
    # read at kv and member, then member is dropped by the broadcast.
    heads = IndexMap.identity((2, 4, 7)).merged_to((2, 4, 7), (8, 7))
    assert heads.rows == ((4, 1, 0), (0, 0, 1))
    split = heads.reshaped_from((8, 7), (2, 4, 7))
    assert split.rows == ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    x = numbered((2, 4, 7))
    assert torch.equal(read(x, split), read(x.reshape(8, 7), heads))
    # A combination the dimensions cannot be read from stays NotAffine: an
    # axis of 5 along a dimension of 4.
    wide = IndexMap.identity((2, 5, 7)).merged_to((2, 5, 7), (10, 7))
    with pytest.raises(NotAffine, match="merges dimensions"):
        wide.reshaped_from((8, 7), (2, 4, 7))


def test_a_merged_map_reads_the_merged_value():
    x = numbered((3, 17, 5))
    merged = IndexMap.identity((3, 17, 5)).merged_to((3, 17, 5), (51, 5))
    assert merged.rows == ((17, 1, 0), (0, 0, 1))
    # Reading the merged value at `merged` over x's iteration gives x.
    assert torch.equal(read(x.reshape(51, 5), merged), x)
    assert IndexMap.identity((17, 10, 100)).merged_to((17, 10, 100), (17, 1000)) is not None
    assert IndexMap.identity((17, 1000)).merged_to((17, 1000), (17, 10, 100)) is None


def test_reshape_groups_pair_dimensions_of_equal_size():
    assert reshape_groups((17, 1000), (17, 10, 100)) == [([0], [0]), ([1], [1, 2])]
    assert reshape_groups((3, 17, 5), (51, 5)) == [([0, 1], [0]), ([2], [1])]
    # Unit dimensions belong to no group.
    assert reshape_groups((1, 4097, 1), (4097,)) == [([1], [0])]
    assert reshape_groups((1,), (1, 1)) == []


@pytest.mark.parametrize("start,size,lo,hi", [(0, 3, 0, 3), (3, 100, 3, 103)])
def test_a_concat_piece_reads_its_input_in_its_window(start, size, lo, hi):
    a, b = numbered((17, 3)), numbered((17, 100)) + 10_000
    result = torch.cat([a, b], 1)
    whole = IndexMap.identity((17, 103))
    piece = whole.concat_piece(1, start, size)
    assert whole.concat_window(1, start, size) == (1, (lo, hi))
    assert piece.windows == ((0, 17), (lo, hi)) and piece.offsets == (0, -start)
    source = a if start == 0 else b
    assert torch.equal(read(source, piece), window(result, piece))


def test_a_concat_read_along_a_scaled_axis_is_not_affine():
    strided = IndexMap.identity((8, 300)).sliced_from((0, 0), (1, 2))
    with pytest.raises(NotAffine, match="a concat must be read along one iteration axis, unscaled"):
        strided.concat_piece(1, 0, 3)


def test_contiguous_views_and_addresses():
    view = BufferView.contiguous((3, 17, 5))
    assert view.strides == (85, 5, 1) and view.offset == 0 and view.is_contiguous()
    assert BufferView.contiguous((1,)).strides == (1,)
    transposed = IndexMap.identity((5, 3, 17)).transposed_from((2, 0, 1))
    assert view.address_map(transposed) == ((1, 85, 5), 0)
    sliced = IndexMap.identity((8, 300)).sliced_from((1, 3), (2, 3))
    assert BufferView.contiguous((17, 1000)).address_map(sliced) == ((2000, 3), 1003)
    broadcast = IndexMap.identity((17, 1000)).broadcast_from((17, 1000), (1000,))
    assert BufferView.contiguous((1000,)).address_map(broadcast) == ((0, 1), 0)


@pytest.mark.parametrize("shape,strides,offset,target", [
    ((17, 1000), (1000, 1), 0, (17, 10, 100)),   # split, contiguous
    ((3, 17, 5), (85, 5, 1), 0, (51, 5)),        # merge, contiguous
    ((1000, 17), (1, 1000), 0, (10, 100, 17)),   # split of a transposed view
    ((8, 300), (2000, 3), 1003, (8, 3, 100)),    # split of a strided window
    ((8, 300), (2000, 3), 1003, (2400,)),        # merge of a strided window: torch copies too
    ((17, 1000), (1, 17), 0, (17000,)),          # merge of a transposed view
])
def test_a_reshaped_view_addresses_what_torch_views_address(shape, strides, offset, target):
    buffer = numbered((20_000,))
    view = BufferView(shape, strides, offset)
    tensor = buffer.as_strided(shape, strides, offset)
    try:
        expected = tensor.view(target)
    except RuntimeError:
        with pytest.raises(NotAffine):
            view.reshaped(target)
        return
    reshaped = view.reshaped(target)
    assert reshaped.shape == tuple(target)
    assert torch.equal(buffer.as_strided(target, reshaped.strides, reshaped.offset), expected)


def test_tile_arithmetic():
    assert [next_power_of_two(n) for n in (0, 1, 2, 3, 4, 17, 1000, 1024, 4097)] == \
        [1, 1, 2, 4, 4, 32, 1024, 1024, 8192]
    assert [ceil_div(n, 4) for n in (1, 4, 5, 17)] == [1, 1, 2, 5]


def test_covers_asks_every_index_of_the_value_to_be_reached():
    whole = IndexMap.identity((5, 48))
    assert whole.covers((5, 48))
    # The first 17 columns of a (5, 48) value: a kernel iterating over them
    # would store a (5, 48) result in part.
    window = IndexMap.identity((5, 17))
    assert window.covers((5, 17)) and not window.covers((5, 48))
    shifted = window.sliced_from((0, 17), (1, 1))
    assert not shifted.covers((5, 48))
    # A dimension no axis reads covers only a size of 1.
    row = IndexMap.select((5, 48), (None, 1))
    assert row.covers((1, 48)) and not row.covers((2, 48))
    # Two dims reading one axis (a diagonal) reach n of n*n indices.
    diagonal = IndexMap.select((4,), (0, 0))
    assert not diagonal.covers((4, 4))


def test_covers_reads_a_reshape_of_merged_dims_as_positions():
    # A (6, 4) result iterated as (2, 3, 4): row 0 reads 3*i0 + i1 (a
    # reshape that split 6 into 2 x 3), row 1 reads i2.
    split = IndexMap(((3, 1, 0), (0, 0, 1)), (0, 0), (2, 3, 4), ((0, 2), (0, 3), (0, 4)))
    assert split.covers((6, 4))
    # The same map over a window of i1 that skips its last value misses
    # every third row.
    gap = IndexMap(split.rows, split.offsets, split.extents, ((0, 2), (0, 2), (0, 4)))
    assert not gap.covers((6, 4))
    # Weights of no mixed radix (2*i0 + i1 over 2 x 3 points reaches 0..4,
    # 2 twice) are answered by enumeration.
    overlap = IndexMap(((2, 1),), (0,), (2, 3), ((0, 2), (0, 3)))
    assert overlap.covers((5,)) and not overlap.covers((6,))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_covers_agrees_with_enumerating_every_point(data):
    axes = data.draw(st.integers(1, 3))
    rank = data.draw(st.integers(1, 3))
    extents = tuple(data.draw(st.integers(1, 4)) for _ in range(axes))
    windows = []
    for extent in extents:
        lo = data.draw(st.integers(0, extent - 1))
        windows.append((lo, data.draw(st.integers(lo + 1, extent))))
    rows = tuple(tuple(data.draw(st.integers(-1, 4)) for _ in range(axes)) for _ in range(rank))
    offsets = tuple(data.draw(st.integers(-2, 3)) for _ in range(rank))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(rank))
    index_map = IndexMap(rows, offsets, extents, tuple(windows))
    assert index_map.covers(shape) == index_map._covers_by_enumeration(shape), \
        (index_map, shape)
