"""Affine maps from a kernel's iteration space to the index of a value.

A kernel iterates over a box of integer points `i = (i_0, ..., i_{n-1})`.
Each value `v` of rank r used at point `i` is read at index
`A @ i + b` (`A` is r x n, `b` has r entries): an `IndexMap`. View ops only
change the map: a transpose permutes its rows, a broadcast zeroes rows, a
slice scales and shifts them, a reshape that splits dimensions combines
them. A concat restricts its inputs to windows of one iteration axis, kept
in `windows`. Merging dimensions by a reshape is not affine; it is only
possible on a buffer, whose elements sit at affine addresses anyway
(`BufferView`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Sequence


class NotAffine(Exception):
    """The access cannot be written as an affine map of the iteration."""


@dataclasses.dataclass(frozen=True)
class IndexMap:
    rows: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    extents: tuple[int, ...]  # the iteration space
    windows: tuple[tuple[int, int], ...]  # valid [lo, hi) per iteration axis

    @classmethod
    def identity(cls, extents: Sequence[int]) -> "IndexMap":
        n = len(extents)
        rows = tuple(tuple(1 if j == i else 0 for j in range(n)) for i in range(n))
        return cls(rows, (0,) * n, tuple(extents), tuple((0, e) for e in extents))

    @classmethod
    def select(cls, extents: Sequence[int], axes: Sequence[int | None]) -> "IndexMap":
        """Row k reads iteration axis `axes[k]`, or is 0 where that is None."""
        n = len(extents)
        rows = tuple(
            tuple(1 if (axis is not None and j == axis) else 0 for j in range(n)) for axis in axes
        )
        return cls(rows, (0,) * len(axes), tuple(extents), tuple((0, e) for e in extents))

    @property
    def rank(self) -> int:
        return len(self.rows)

    def depends_on(self) -> frozenset[int]:
        return frozenset(j for row in self.rows for j, c in enumerate(row) if c != 0)

    def axis_of_row(self, k: int) -> int | None:
        """The iteration axis that row k reads with coefficient 1, if it is
        that simple."""
        nonzero = [j for j, c in enumerate(self.rows[k]) if c != 0]
        if len(nonzero) == 1 and self.rows[k][nonzero[0]] == 1:
            return nonzero[0]
        return None

    def reads_like(self, other: "IndexMap", shape: Sequence[int]) -> bool:
        """Whether this map and `other` read the same element of a value of
        `shape` at every point of the iteration space. Their rows may differ
        for a dimension of size 1 that both read at 0: a view writes it as a
        row of zeros, the value's own map as an axis of extent 1."""
        if self.extents != other.extents or self.windows != other.windows:
            return False
        for k, size in enumerate(shape):
            if self.rows[k] == other.rows[k] and self.offsets[k] == other.offsets[k]:
                continue
            if size != 1 or not (self._reads_zero(k) and other._reads_zero(k)):
                return False
        return True

    def _reads_zero(self, k: int) -> bool:
        """Whether row k is 0 at every point: no offset, and only axes of
        extent 1 (always 0) read."""
        return self.offsets[k] == 0 and all(
            c == 0 or self.extents[j] == 1 for j, c in enumerate(self.rows[k]))

    # -- views, from a value's map to its operand's map -------------------

    def covers(self, shape: Sequence[int]) -> bool:
        """Whether the points of the iteration space (within the windows)
        reach every index of a value of `shape`: a kernel result stored
        through this map is then written whole. Rows of one axis each, with
        different axes, are checked as ranges; rows that combine axes (a
        reshape's) by their positions in row-major order; a small map of
        any other form is enumerated, a large one is taken as covering."""
        axes = [self.axis_of_row(k) for k in range(self.rank)]
        simple = all(axis is not None or not any(row) for axis, row in zip(axes, self.rows))
        used = [axis for axis in axes if axis is not None]
        if simple and len(used) == len(set(used)):
            for k, size in enumerate(shape):
                if axes[k] is None:
                    if size != 1 or self.offsets[k] != 0:
                        return False
                    continue
                lo, hi = self.windows[axes[k]]
                if lo + self.offsets[k] > 0 or hi + self.offsets[k] < size:
                    return False
            return True
        answer = self._covers_as_mixed_radix(shape)
        if answer is not None:
            return answer
        return self._covers_by_enumeration(shape)

    def _covers_as_mixed_radix(self, shape: Sequence[int]) -> bool | None:
        """The answer without enumerating, for maps whose every reached
        index lies inside `shape` (each row's range over the box is found at
        its corners): each index is then one position of the value in
        row-major order, an affine function of the point with a weight per
        axis, and the points reach every position exactly when, in the
        order of their weights, each axis's weight is the count of positions
        the axes before it span (the digits of a mixed-radix number) and the
        first position is 0. None where the weights are of another form."""
        size = math.prod(shape)
        if size == 0:
            return True
        strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
        lowest = 0
        for k, (row, offset) in enumerate(zip(self.rows, self.offsets)):
            low = high = offset
            for j, c in enumerate(row):
                lo, hi = self.windows[j]
                if c == 0:
                    continue
                if hi <= lo:
                    return False  # an empty window reaches nothing
                low += min(c * lo, c * (hi - 1))
                high += max(c * lo, c * (hi - 1))
            if low < 0 or high >= shape[k]:
                return None  # out of bounds somewhere: not one position per index
            lowest += low * strides[k]
        weights = sorted(
            (abs(w), self.windows[j][1] - self.windows[j][0])
            for j in range(len(self.extents))
            for w in [sum(row[j] * stride for row, stride in zip(self.rows, strides))]
            if w and self.windows[j][1] - self.windows[j][0] > 1)
        if math.prod(count for _, count in weights) < size:
            return False  # fewer distinct points than positions
        spanned = 1
        for weight, count in weights:
            if weight != spanned:
                return None
            spanned *= count
        return lowest == 0 and spanned == size

    def _covers_by_enumeration(self, shape: Sequence[int]) -> bool:
        depends = sorted(self.depends_on())
        points = math.prod(self.windows[j][1] - self.windows[j][0] for j in depends)
        if points > 1 << 20:
            return True
        reached = set()
        for point in itertools.product(*(range(*self.windows[j]) for j in depends)):
            full = dict(zip(depends, point))
            reached.add(tuple(sum(c * full.get(j, 0) for j, c in enumerate(row)) + offset
                              for row, offset in zip(self.rows, self.offsets)))
        return all(index in reached for index in itertools.product(*map(range, shape)))

    def broadcast_from(self, result_shape: Sequence[int], operand_shape: Sequence[int]) -> "IndexMap":
        """The map of an operand that numpy-broadcasts to the result. A
        dimension of size 1 is always read at 0."""
        lead = len(result_shape) - len(operand_shape)
        rows, offsets = [], []
        zero = (0,) * len(self.extents)
        for k, size in enumerate(operand_shape):
            if size == 1:
                rows.append(zero)
                offsets.append(0)
            else:
                rows.append(self.rows[lead + k])
                offsets.append(self.offsets[lead + k])
        return dataclasses.replace(self, rows=tuple(rows), offsets=tuple(offsets))

    def transposed_from(self, permutation: Sequence[int]) -> "IndexMap":
        """The map of x where this is the map of transpose(x, permutation)."""
        rows: list = [None] * len(permutation)
        offsets: list = [0] * len(permutation)
        for k, p in enumerate(permutation):
            rows[p] = self.rows[k]
            offsets[p] = self.offsets[k]
        return dataclasses.replace(self, rows=tuple(rows), offsets=tuple(offsets))

    def sliced_from(self, offsets: Sequence[int], strides: Sequence[int]) -> "IndexMap":
        """The map of x where this is the map of slice(x, offsets, strides)."""
        rows = tuple(tuple(s * c for c in row) for row, s in zip(self.rows, strides))
        new_offsets = tuple(o + s * b for o, s, b in zip(offsets, strides, self.offsets))
        return dataclasses.replace(self, rows=rows, offsets=new_offsets)

    def reshaped_from(self, result_shape: Sequence[int], operand_shape: Sequence[int]) -> "IndexMap":
        """The map of x where this is the map of reshape(x). Affine when
        every group of x's dimensions stays or is split in the result;
        merging dimensions raises NotAffine."""
        zero = (0,) * len(self.extents)
        rows: list = [zero] * len(operand_shape)
        offsets: list = [0] * len(operand_shape)
        for xs, vs in reshape_groups(operand_shape, result_shape):
            if len(xs) > 1:
                unmerged = self._unmerged(vs, xs, operand_shape) if len(vs) == 1 else None
                if unmerged is None:
                    raise NotAffine(
                        f"reshape {tuple(operand_shape)} -> {tuple(result_shape)} merges dimensions")
                for x, row in zip(xs, unmerged):
                    rows[x] = row
                continue
            rows[xs[0]], offsets[xs[0]] = self._row_major(vs, result_shape)
        return dataclasses.replace(self, rows=tuple(rows), offsets=tuple(offsets))

    def _unmerged(self, vs: Sequence[int], xs: Sequence[int], operand_shape: Sequence[int]):
        """The rows of dimensions `xs` merged into the one dimension vs[0],
        when its row is already their row-major combination: every axis it
        reads has the coefficient of one of them and an extent within it
        (a head read at hkv * G + g is key/value head hkv, member g)."""
        row, offset = self.rows[vs[0]], self.offsets[vs[0]]
        if offset != 0:
            return None
        scales, scale = [], 1
        for x in reversed(xs):
            scales.insert(0, scale)
            scale *= operand_shape[x]
        parts = [[0] * len(self.extents) for _ in xs]
        for axis, coefficient in enumerate(row):
            if coefficient == 0:
                continue
            if coefficient not in scales:
                return None
            k = scales.index(coefficient)
            lo, hi = self.windows[axis]
            if parts[k] != [0] * len(self.extents) or lo != 0 or hi > operand_shape[xs[k]]:
                return None
            parts[k][axis] = 1
        return [tuple(p) for p in parts]

    def merged_to(self, operand_shape: Sequence[int], result_shape: Sequence[int]) -> "IndexMap | None":
        """The map of reshape(x) where this is the map of x, when the reshape
        only merges dimensions (a split is not affine this way round)."""
        zero = (0,) * len(self.extents)
        rows: list = [zero] * len(result_shape)
        offsets: list = [0] * len(result_shape)
        for xs, vs in reshape_groups(operand_shape, result_shape):
            if len(vs) != 1:
                return None
            rows[vs[0]], offsets[vs[0]] = self._row_major(xs, operand_shape)
        return dataclasses.replace(self, rows=tuple(rows), offsets=tuple(offsets))

    def _row_major(self, dims: Sequence[int], shape: Sequence[int]) -> tuple[tuple[int, ...], int]:
        """The row and offset of the row-major index over `dims` (of a value
        of `shape`) that this map reads."""
        row = [0] * len(self.extents)
        offset, scale = 0, 1
        for d in reversed(dims):
            row = [r + scale * c for r, c in zip(row, self.rows[d])]
            offset += scale * self.offsets[d]
            scale *= shape[d]
        return tuple(row), offset

    def concat_piece(self, dim: int, start: int, size: int) -> "IndexMap":
        """The map of concat input k (starting at `start` along `dim`), with
        the iteration restricted to where that input is read."""
        axis = self.axis_of_row(dim)
        if axis is None:
            raise NotAffine("a concat must be read along one iteration axis, unscaled")
        shift = start - self.offsets[dim]
        lo, hi = self.windows[axis]
        window = (max(lo, shift), min(hi, shift + size))
        offsets = list(self.offsets)
        offsets[dim] -= start
        windows = list(self.windows)
        windows[axis] = window
        return dataclasses.replace(self, offsets=tuple(offsets), windows=tuple(windows))

    def concat_window(self, dim: int, start: int, size: int) -> tuple[int, tuple[int, int]]:
        """(iteration axis, [lo, hi)) where concat input k is read."""
        axis = self.axis_of_row(dim)
        if axis is None:
            raise NotAffine("a concat must be read along one iteration axis, unscaled")
        shift = start - self.offsets[dim]
        return axis, (shift, shift + size)


def reshape_groups(source: Sequence[int], target: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Pairs of groups of non-unit dimensions, in order, with equal element
    counts, that a row-major reshape maps onto each other. Dimensions of
    size 1 belong to no group."""
    xs_all = [d for d, size in enumerate(source) if size != 1]
    vs_all = [d for d, size in enumerate(target) if size != 1]
    groups = []
    i = j = 0
    while i < len(xs_all) and j < len(vs_all):
        xs, vs = [xs_all[i]], [vs_all[j]]
        px, pv = source[xs_all[i]], target[vs_all[j]]
        i += 1
        j += 1
        while px != pv:
            if px < pv:
                xs.append(xs_all[i])
                px *= source[xs_all[i]]
                i += 1
            else:
                vs.append(vs_all[j])
                pv *= target[vs_all[j]]
                j += 1
        groups.append((xs, vs))
    return groups


class DynamicExtent(int):
    """The dynamic extent (`?`) in a planned shape: the size hint to every
    computation of the planner (its arithmetic gives plain ints), marked
    so that the strides it sets in a buffer keep their dependence on the
    size (`SizeAffine`, made by `times`)."""


class SizeAffine(int):
    """A stride or offset that depends on the dynamic extent S:
    `constant + per_size * S`. It is an int worth its value at the hint,
    so the planner reads it as any stride (orders, signs, tile counts);
    its own +, - and * keep the dependence, == compares the forms (a stride
    of S * 64 is not one of 16384 even where the hint makes them equal), and
    the tile program computes it from the size (`kgc.tiling.mlir_builder`).
    Any other operation gives a plain int at the hint, which no address is
    made of: views take strides from `BufferView` alone."""

    constant: int
    per_size: int
    hint: int

    def __new__(cls, constant: int, per_size: int, hint: int):
        value = super().__new__(cls, constant + per_size * hint)
        value.constant, value.per_size, value.hint = constant, per_size, hint
        return value

    def __repr__(self) -> str:
        return f"({self.constant} + {self.per_size} * size)"

    def __add__(self, other):
        return _affine_sum(self, other, 1) if isinstance(other, int) else NotImplemented

    def __radd__(self, other):
        return _affine_sum(other, self, 1) if isinstance(other, int) else NotImplemented

    def __sub__(self, other):
        return _affine_sum(self, other, -1) if isinstance(other, int) else NotImplemented

    def __rsub__(self, other):
        return _affine_sum(other, self, -1) if isinstance(other, int) else NotImplemented

    def __mul__(self, other):
        return times(self, other) if isinstance(other, int) else NotImplemented

    __rmul__ = __mul__

    def __neg__(self):
        return _affine(-self.constant, -self.per_size, self.hint)

    def __eq__(self, other):
        if not isinstance(other, int):
            return NotImplemented
        return _parts(self)[:2] == _parts(other)[:2]

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        return hash((self.constant, self.per_size))


def _parts(value: int) -> tuple[int, int, int | None]:
    """(constant, per size, hint) of an int, a DynamicExtent or a SizeAffine."""
    if isinstance(value, SizeAffine):
        return value.constant, value.per_size, value.hint
    if isinstance(value, DynamicExtent):
        return 0, 1, int(value)
    return int(value), 0, None


def _affine(constant: int, per_size: int, hint: int | None) -> int:
    return int(constant) if per_size == 0 or hint is None else SizeAffine(constant, per_size, hint)


def _affine_sum(a: int, b: int, sign: int) -> int:
    (ca, pa, ha), (cb, pb, hb) = _parts(a), _parts(b)
    return _affine(ca + sign * cb, pa + sign * pb, ha if ha is not None else hb)


def times(a: int, b: int) -> int:
    """a * b, where either may be a stride that depends on the dynamic
    extent or the extent itself. A product that grows with the square of
    the size (a buffer with the extent in two dims) keeps no form: its value
    at the hint, a plain int, as planning reads it. No address is made of
    one: kg-tile refuses a buffer with the extent in two dims
    (`kgc.tiling.dynamic`)."""
    (ca, pa, ha), (cb, pb, hb) = _parts(a), _parts(b)
    if pa and pb:
        return int(a) * int(b)
    return _affine(ca * cb, pa * cb + pb * ca, ha if ha is not None else hb)


def depends_on_size(value: int) -> bool:
    return isinstance(value, SizeAffine)


@dataclasses.dataclass(frozen=True)
class BufferView:
    """A strided view of a kernel buffer: element `idx` sits at
    `offset + sum(idx[k] * strides[k])` of the buffer."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def contiguous(cls, shape: Sequence[int]) -> "BufferView":
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step = times(step, size)
        return cls(tuple(shape), tuple(reversed(strides)), 0)

    def is_contiguous(self) -> bool:
        return self.strides == BufferView.contiguous(self.shape).strides

    def reshaped(self, shape: Sequence[int]) -> "BufferView":
        """The view as `shape` without copying, as torch.Tensor.view allows;
        NotAffine when the strides do not."""
        strides: list[int] = [0] * len(shape)
        for xs, vs in reshape_groups(self.shape, shape):
            for a, b in zip(xs, xs[1:]):
                if self.strides[a] != times(self.strides[b], self.shape[b]):
                    raise NotAffine("reshape of a non-contiguous view merges strided dimensions")
            step = self.strides[xs[-1]]
            for v in reversed(vs):
                strides[v] = step
                step = times(step, shape[v])
        return BufferView(tuple(shape), tuple(strides), self.offset)

    def _with_offset(self, offset: int) -> "BufferView":
        return dataclasses.replace(self, offset=offset)

    def address_map(self, index_map: IndexMap) -> tuple[tuple[int, ...], int]:
        """(stride per iteration axis, offset) of the elements that
        `index_map` reads from this view."""
        n = len(index_map.extents)
        strides = [0] * n
        for row, stride in zip(index_map.rows, self.strides):
            for j, c in enumerate(row):
                strides[j] += c * stride
        offset = self.offset + sum(b * s for b, s in zip(index_map.offsets, self.strides))
        return tuple(strides), offset


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def product(values: Sequence[int]) -> int:
    return math.prod(values)
