"""The memory plan of a compiled function: where each intermediate lives.

The intermediates of a function are the buffers that kernels pass to one
another and the caller never sees (neither an argument nor a result). They
live in one workspace, each at its own offset, so that running a function
costs one allocation for all of them. The pipeline plans that workspace
once per function (`plan_memory`), and the plan travels in manifest.json;
the runtime (`kgc.runtime`) and the C export (`kgc.export`) both place the
intermediates where the plan says, and size the workspace from it.

An intermediate is live from the first launch that writes it to the last
that reads or writes it. Two intermediates share bytes only where their
lives do not meet: the launches of a call run in order on one stream, so a
buffer's bytes are free for another once the last kernel that reads it has
run (a launch that reads one and writes the other keeps them apart). The
plan places the largest first, each at the lowest offset that no placed
intermediate live at the same time covers (greedy by size, first fit), so
the workspace is about the most bytes live at once rather than the sum of
every intermediate: a training step's backward holds hundreds of them.
Each offset is a multiple of the plan's alignment: 256 bytes, what torch's
CUDA allocations and cuMemAlloc's are aligned to at least, which covers what
kernels assume of a pointer (16 bytes) and keeps every buffer's rows on
whole cache lines.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from kgc.diagnostics import KgcError
from kgc.element_types import ELEMENT_BYTES

if TYPE_CHECKING:
    from kgc.pipeline.compiler import Function

WORKSPACE_ALIGNMENT = 256


def tensor_bytes(shape, dtype: str) -> int:
    """The bytes of a dense tensor of `shape` and element type `dtype`."""
    if dtype not in ELEMENT_BYTES:
        raise KgcError(f"no size is known for element type {dtype}")
    return math.prod(shape) * ELEMENT_BYTES[dtype]


def _aligned(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


@dataclasses.dataclass(frozen=True)
class Placement:
    """One intermediate in the workspace: buffer number, byte offset, bytes."""

    buffer: int
    offset: int
    bytes: int


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """The workspace of one function: its intermediates' places and its size
    (`workspace_bytes`; 0 when the function has no intermediate). The
    workspace's base must be aligned to `alignment`."""

    alignment: int
    intermediates: tuple[Placement, ...]
    workspace_bytes: int

    def offsets(self) -> dict[int, int]:
        """{buffer number: byte offset in the workspace}, in plan order."""
        return {p.buffer: p.offset for p in self.intermediates}

    def to_json(self) -> dict:
        return {"alignment": self.alignment, "workspace_bytes": self.workspace_bytes,
                "intermediates": [dataclasses.asdict(p) for p in self.intermediates]}

    @classmethod
    def from_json(cls, data: dict) -> "MemoryPlan":
        return cls(int(data["alignment"]),
                   tuple(Placement(int(p["buffer"]), int(p["offset"]), int(p["bytes"]))
                         for p in data["intermediates"]),
                   int(data["workspace_bytes"]))

    def check(self, function: "Function") -> None:
        """KgcError naming the first thing that does not hold: every
        intermediate of `function` placed once, with its size, at an
        aligned offset inside the workspace, overlapping no other live at
        the same time."""
        where = f"the memory plan of @{function.name}"
        if self.alignment < 1 or self.alignment & (self.alignment - 1):
            raise KgcError(f"{where}: alignment {self.alignment} is not a power of two")
        wanted = intermediates_of(function)
        placed = [p.buffer for p in self.intermediates]
        if sorted(placed) != sorted(wanted):
            raise KgcError(f"{where} places buffers {sorted(placed)}; the function's "
                           f"intermediates are {sorted(wanted)}")
        spans = []
        lives = lifetimes(function)
        for placement in self.intermediates:
            spec = function.buffers[placement.buffer]
            size = tensor_bytes(spec.shape, spec.dtype)
            if placement.bytes != size:
                raise KgcError(f"{where}: buffer {placement.buffer} ({spec.dtype}"
                               f"{list(spec.shape)}) takes {size} bytes, the plan says "
                               f"{placement.bytes}")
            if placement.offset < 0 or placement.offset % self.alignment:
                raise KgcError(f"{where}: buffer {placement.buffer} is at offset "
                               f"{placement.offset}, not a multiple of {self.alignment}")
            if placement.offset + size > self.workspace_bytes:
                raise KgcError(f"{where}: buffer {placement.buffer} ends at byte "
                               f"{placement.offset + size}, past the workspace's "
                               f"{self.workspace_bytes}")
            spans.append((placement.offset, placement.offset + size, placement.buffer))
        spans.sort()
        for index, (_, end, first) in enumerate(spans):
            for start, _, second in spans[index + 1:]:
                if start >= end:
                    break
                if _meet(lives[first], lives[second]):
                    raise KgcError(f"{where}: buffers {first} and {second} overlap while "
                                   f"both are live")


def intermediates_of(function: "Function") -> list[int]:
    """The buffers of `function` that are neither arguments nor results, in
    the order the launches write them."""
    results = set(function.results)
    found = []
    for launch in function.launches:
        for buffer in launch.outputs:
            if buffer >= function.num_arguments and buffer not in results \
                    and buffer not in found:
                found.append(buffer)
    return found


def lifetimes(function: "Function") -> dict[int, tuple[int, int]]:
    """{intermediate: (the first launch that writes it, the last launch that
    reads or writes it)}, launches counted from 0."""
    intermediates = set(intermediates_of(function))
    lives: dict[int, tuple[int, int]] = {}
    for index, launch in enumerate(function.launches):
        for buffer in (*launch.inputs, *launch.outputs):
            if buffer in intermediates:
                lives[buffer] = (lives.get(buffer, (index, index))[0], index)
    return lives


def buffer_steps(function: "Function") -> tuple[tuple[tuple[int, ...], ...],
                                                 tuple[tuple[int, ...], ...]]:
    """Per launch of `function`: the buffers that are not arguments which
    it is the first to write (results and intermediates), and the
    intermediates it is the last to read or write. A call that gives each
    buffer an allocation of its own, rather than places in one workspace,
    makes them before and frees them after those launches."""
    first: dict[int, int] = {}
    for index, launch in enumerate(function.launches):
        for buffer in launch.outputs:
            if buffer >= function.num_arguments:
                first.setdefault(buffer, index)
    lives = lifetimes(function)
    count = len(function.launches)
    made = tuple(tuple(b for b, i in first.items() if i == step) for step in range(count))
    freed = tuple(tuple(b for b, (_, end) in lives.items() if end == step)
                  for step in range(count))
    return made, freed


def argument_releases(function: "Function") -> tuple[tuple[int, ...], ...]:
    """Per launch of `function`: the arguments that are not results which it
    is the last to read or write (an argument no launch touches, at the
    first). A call that owns its arguments (their caller keeps no reference)
    may drop each after that launch, so that the memory of an activation
    that only this call still reads comes back while it runs."""
    results = set(function.results)
    last: dict[int, int] = {b: 0 for b in range(function.num_arguments) if b not in results}
    for index, launch in enumerate(function.launches):
        for buffer in (*launch.inputs, *launch.outputs):
            if buffer in last:
                last[buffer] = index
    return tuple(tuple(b for b, step in last.items() if step == index)
                 for index in range(len(function.launches)))


def _meet(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def plan_memory(function: "Function", alignment: int = WORKSPACE_ALIGNMENT) -> MemoryPlan:
    """The workspace of `function`: the largest intermediates first, each at
    the lowest multiple of `alignment` that no intermediate live at the same
    time covers. The placements are listed in launch order."""
    lives = lifetimes(function)
    order = intermediates_of(function)
    sizes = {b: tensor_bytes(function.buffers[b].shape, function.buffers[b].dtype)
             for b in order}
    offsets: dict[int, int] = {}
    for buffer in sorted(order, key=lambda b: (-sizes[b], lives[b][0])):
        taken = sorted((offsets[other], offsets[other] + sizes[other]) for other in offsets
                       if _meet(lives[other], lives[buffer]))
        offset = 0
        for start, end in taken:
            if offset + sizes[buffer] <= start:
                break
            offset = max(offset, _aligned(end, alignment))
        offsets[buffer] = offset
    end = max((offsets[b] + sizes[b] for b in order), default=0)
    return MemoryPlan(alignment, tuple(Placement(b, offsets[b], sizes[b]) for b in order),
                      _aligned(end, alignment))
