"""Tile loads and stores on flat CPU buffers, with every lane checked.

A kernel buffer is a flat tensor; a view (`memref.reinterpret_cast`) puts
element `idx` of its shape at `offset + sum(idx[d] * strides[d])`. A tile
at `offsets` covers the indices `offsets[d] + lane[d]`. A lane is inside
when every index lies in `[0, sizes[d])` of the view and its address in the
buffer. Triton reads and writes whatever address a lane computes, so an
unmasked lane outside reads a neighbour's data or writes over it without a
sign; here it is an error (`Fault`), and so is a masked-in lane outside.
Strides may be negative (a view that walks its buffer backwards, as a flip
does) or zero (a broadcast).

Each result buffer has a writer map beside it: the number of the program
(1 + its index in the grid, 0: none yet) that last stored each element. A
program that stores an element another program stored has no ordering with
it on a GPU (programs run concurrently, in no set order), so the element's
value depends on the schedule: that is an error too, unless both store the
very same bits (programs that each compute a shared tile, as every n tile
of a split-K LoRA kernel stores the same X A partial: whichever lands, the
element is the same). One program storing an element again (a loop that
rewrites its own tile) is ordered and fine; lanes of one store that share
an element (a view with a stride of 0) are not ordered among themselves,
so they too must store the same bits.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from kgc.execution.errors import Fault


@dataclasses.dataclass(frozen=True)
class View:
    """A strided view of kernel buffer number `buffer`."""

    buffer: int
    buffer_shape: tuple[int, ...]
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    text: str  # the view's memref type, for messages

    @property
    def buffer_elements(self) -> int:
        return math.prod(self.buffer_shape)


def _strided(buffer, sizes: Sequence[int], strides: Sequence[int], start: int):
    """The elements of flat `buffer` at `start + sum(i[d] * strides[d])`
    for every index `i` below `sizes`. torch's as_strided takes no negative
    stride: those axes are read forwards from their far end and flipped."""
    backwards = [d for d, stride in enumerate(strides) if stride < 0]
    if not backwards:
        return buffer.as_strided(tuple(sizes), tuple(strides), start)
    lowest = start + sum((sizes[d] - 1) * strides[d] for d in backwards)
    forwards = buffer.as_strided(tuple(sizes), tuple(abs(s) for s in strides), lowest)
    return forwards.flip(backwards)


def gather(buffer, view: View, offsets: Sequence[int], indices, dim: int, shape: Sequence[int],
           mask, padding: float):
    """The tile of a kg.tile_gather: lane l reads `view` at offsets[d] + l[d]
    along every dimension d but `dim`, at offsets[dim] + indices[l] along
    `dim` (indices broadcast to `shape`); lanes whose mask is false hold
    `padding`. A lane that the mask lets through (every lane, unmasked) at
    an index outside the view is a Fault, naming the index it read."""
    import torch

    rank = len(shape)
    positions = []
    for d, lanes in enumerate(shape):
        if d == dim:
            position = offsets[d] + indices.to(torch.int64)
        else:
            position = offsets[d] + torch.arange(lanes).reshape(
                [lanes if k == d else 1 for k in range(rank)])
        positions.append(position.expand(tuple(shape)))
    inside = torch.ones(tuple(shape), dtype=torch.bool)
    for position, size in zip(positions, view.sizes):
        inside &= (position >= 0) & (position < size)
    stray = ~inside if mask is None else mask & ~inside
    if bool(stray.any()):
        lane = tuple(int(i) for i in stray.nonzero()[0])
        index = tuple(int(p[lane]) for p in positions)
        count = int(stray.sum())
        guard = "its mask lets it through" if mask is not None else "no mask guards it"
        along = "" if 0 <= index[dim] < view.sizes[dim] else \
            f"; its index along the gathered dimension {dim} came from the indices"
        raise Fault(f"lane {lane} of the gathered tile of {list(shape)} reads index {index} "
                    f"outside {view.text} ({count} such lane{'s' if count != 1 else ''}); "
                    f"{guard}{along}")
    read = inside if mask is None else mask
    address = torch.full(tuple(shape), view.offset, dtype=torch.int64)
    for position, stride in zip(positions, view.strides):
        address = address + position * stride
    taken = address[read]
    if taken.numel() and (int(taken.min()) < 0 or int(taken.max()) >= view.buffer_elements):
        raise Fault(f"{view.text} puts gathered lanes at elements [{int(taken.min())}, "
                    f"{int(taken.max())}] of a buffer of {view.buffer_elements} elements")
    values = torch.tensor(padding).to(buffer.dtype).expand(tuple(shape)).clone()
    values[read] = buffer[taken]
    return values


def _same_bits(a, b):
    """Whether each element of `a` and `b` (one dtype) has the same bits:
    NaN matches NaN, 0.0 does not match -0.0."""
    import torch

    if a.is_floating_point():
        as_integer = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        integer = as_integer[a.element_size()]
        a, b = a.view(integer), b.view(integer)
    return a == b


def program_of(number: int, grid: Sequence[int]) -> tuple[int, int, int]:
    """The (x, y, z) program id of writer number `number` (1 + the index of
    the program in a grid walked x fastest)."""
    index = number - 1
    x = index % grid[0]
    y = index // grid[0] % grid[1]
    return x, y, index // (grid[0] * grid[1])


class TileAccess:
    """Tiles of one shape read or written through one view: the address of
    every lane relative to the tile's first element is computed once."""

    def __init__(self, view: View, shape: Sequence[int]):
        import torch

        if len(shape) != len(view.sizes):
            raise ValueError(f"a tile of rank {len(shape)} cannot address {view.text}")
        self.view = view
        self.shape = tuple(shape)
        rank = len(shape)
        self._lanes = [torch.arange(n).reshape([n if k == d else 1 for k in range(rank)])
                       for d, n in enumerate(shape)]
        relative = torch.zeros(self.shape, dtype=torch.int64)
        for lane, stride in zip(self._lanes, view.strides):
            relative = relative + lane * stride
        self._relative = relative
        # Lanes that share an address: only a stride of 0 (or strides that
        # overlap) makes them, so most accesses skip the check per store.
        self._aliased = relative.unique().numel() < relative.numel()

    def _locate(self, offsets: Sequence[int]):
        """(address of the tile's first lane, lanes inside the view as a
        bool tile or None when all are, [first, last) of the lanes inside
        per axis). Raises Fault when lanes inside the view fall outside the
        buffer (a view larger than its buffer)."""
        view = self.view
        base = view.offset
        inside = None
        box = []
        low = high = base
        for d, (offset, lanes, size, stride) in enumerate(
                zip(offsets, self.shape, view.sizes, view.strides)):
            base += offset * stride
            first, last = max(0, -offset), min(lanes, size - offset)
            box.append((first, max(first, last)))
            if first >= last:
                low, high = 0, -1  # no lane inside: nothing to check against the buffer
            elif high >= low:
                ends = ((offset + first) * stride, (offset + last - 1) * stride)
                low, high = low + min(ends), high + max(ends)
            if first > 0 or last < lanes:
                along = (self._lanes[d] >= first) & (self._lanes[d] < last)
                inside = along if inside is None else inside & along
        if high >= low and (low < 0 or high >= view.buffer_elements):
            raise Fault(f"{view.text} puts lanes at elements [{low}, {high}] of a buffer of "
                        f"{view.buffer_elements} elements")
        if inside is not None:
            inside = inside.expand(self.shape)
        return base, inside, box

    def _stray(self, stray, offsets: Sequence[int], verb: str, masked: bool) -> Fault:
        lane = [int(i) for i in stray.nonzero()[0]]
        index = tuple(o + l for o, l in zip(offsets, lane))
        count = int(stray.sum())
        guard = "its mask lets it through" if masked else "no mask guards it"
        return Fault(f"lane {tuple(lane)} of the tile of {list(self.shape)} at offsets "
                     f"{list(offsets)} {verb} index {index} outside {self.view.text} "
                     f"({count} such lane{'s' if count != 1 else ''}); {guard}")

    def load(self, buffer, offsets: Sequence[int], mask, padding: float):
        """The tile at `offsets`; lanes whose mask is false hold `padding`."""
        import torch

        base, inside, box = self._locate(offsets)
        if inside is not None:
            stray = ~inside if mask is None else mask & ~inside
            if bool(stray.any()):
                raise self._stray(stray, offsets, "reads", mask is not None)
        fill = torch.tensor(padding).to(buffer.dtype)
        sizes = [last - first for first, last in box]
        start = base + sum(first * stride for (first, _), stride in zip(box, self.view.strides))
        if inside is None:
            values = _strided(buffer, self.shape, self.view.strides, base).clone()
        else:
            values = fill.expand(self.shape).clone()
            if min(sizes) > 0:
                values[tuple(slice(first, last) for first, last in box)] = \
                    _strided(buffer, sizes, self.view.strides, start)
        if mask is not None:
            values = torch.where(mask, values, fill)
        return values

    def _check_shared_lanes(self, addresses, value, what: str) -> None:
        """Raises Fault where lanes that store into one element store
        different values."""
        import torch

        order = torch.argsort(addresses, stable=True)
        addresses, value = addresses[order], value[order]
        clash = (addresses[1:] == addresses[:-1]) & ~_same_bits(value[1:], value[:-1])
        if bool(clash.any()):
            address = int(addresses[int(clash.nonzero()[0, 0])])
            element = tuple(int(i) for i in torch.unravel_index(
                torch.tensor(address), self.view.buffer_shape))
            count = int(torch.unique(addresses[1:][clash]).numel())
            raise Fault(f"lanes of the tile of {list(self.shape)} through {self.view.text} store "
                        f"different values into element {element} of {what} ({count} such "
                        f"element{'s' if count != 1 else ''}); which lane's value stays is "
                        "undefined on a GPU")

    def store(self, buffer, writers, offsets: Sequence[int], value, mask, program: int,
              grid: Sequence[int], what: str) -> None:
        """Writes the lanes of `value` whose mask is true (every lane without
        a mask) and records `program` (its writer number) as their writer in
        `writers`. Raises Fault when another program wrote one of the
        elements before (`what` names the buffer in the message)."""
        import torch

        base, inside, _ = self._locate(offsets)
        if inside is not None:
            stray = ~inside if mask is None else mask & ~inside
            if bool(stray.any()):
                raise self._stray(stray, offsets, "writes", mask is not None)
        addresses = base + self._relative
        value = value.expand(self.shape)
        if mask is None:
            addresses, value = addresses.reshape(-1), value.reshape(-1)
        else:
            mask = mask.expand(self.shape)
            addresses, value = addresses[mask], value[mask]
        value = value.to(buffer.dtype)
        if self._aliased:
            self._check_shared_lanes(addresses, value, what)
        before = writers[addresses]
        raced = (before != 0) & (before != program)
        if bool(raced.any()):
            raced &= ~_same_bits(buffer[addresses], value)
        if bool(raced.any()):
            first = int(raced.nonzero()[0, 0])
            address, other = int(addresses[first]), int(before[first])
            element = tuple(int(i) for i in torch.unravel_index(
                torch.tensor(address), self.view.buffer_shape))
            count = int(torch.unique(addresses[raced]).numel())
            raise Fault(f"program {program_of(other, grid)} stored element {element} of {what} "
                        f"with another value ({count} such element{'s' if count != 1 else ''} "
                        "in this tile); programs run in no set order on a GPU, so which value "
                        "stays is a race")
        buffer[addresses] = value
        writers[addresses] = program
