"""kg-legalize-dot: make every tile dot one that Triton's tensor cores take.

Argument: `kg-legalize-dot`. Option `target` (default 90): the SM version
compiled for, which decides whether 8-bit float dots exist (sm_89 and up).

Runs after kg-tile and before kg-pad-mask, since it may grow tiles that
kg-pad-mask then pads and masks. With a: [.., M, K, 1], b: [.., 1, K, N]:

    tile_dot a, b, acc with K = 1       =>  acc + f32(a) * f32(b)
    tile_dot a, b, acc with M = 1 or N = 1 (a matrix-vector product) on
    f32 without tf32, or along an axis the kernel reduces over (keys of
    one position in attention)
                                        =>  acc + reduce sum over K of
                                            f32(a) * f32(b)
    tile_dot with M, N or K in [1, 16)  =>  the same dot on tiles grown to 16
                                            along that axis (the tile covers
                                            the whole axis, so the new lanes
                                            fall outside it and get masked)

    tile_dot on f32 without precision   =>  precision = ieee (exact, as torch)
    tile_dot on 8-bit floats below sm_89, or on two different 8-bit floats
                                        =>  tile_dot on f16 casts of both
                                            (without precision = fast_accum,
                                            which f16 dots have no use for)
    tile_dot on f16, bf16, 8-bit floats =>  unchanged
    kernel with tma below sm_90         =>  error (no tensor memory accelerator;
                                            Triton 3.6 cannot lower descriptors
                                            made on the device there)
    kernel with warp_specialize below sm_100, unless it has tma on sm_90
                                        =>  error (Triton 3.6 warp-specializes
                                            loops of pointer loads on sm_100
                                            and newer, and on sm_90 loops of
                                            TMA descriptor loads; on sm_90 it
                                            fails with pointer loads)

A matrix-vector product of 16-bit or 8-bit floats (or f32 under tf32) stays
a dot on a tile grown to 16 rows: the rows it adds cost tensor-core work a
memory-bound product does not notice, and Triton software-pipelines the
loads of a dot's k loop (num_stages), which it does not do for a loop of
multiplies and sums. On an H100 a decoder block's one-row projections took
a third of their time once grown (and split over k; benchmarks/NOTES.md,
"Decode"). An exact f32 dot has no tensor cores to hide the added rows in,
so it keeps the multiply and sum.
"""

from __future__ import annotations

from mlir import ir

from kgc.dialects import kg
from kgc.passes.registry import Option, Pass, PassFailure, register_pass
from kgc.tiling.kernel_ops import (dot_dims, int_array, is_tiled, kernel_name, kernels_in, knob,
                                   replace_with, resize_axes, set_int_array, tensor_values,
                                   walk_ops)
from kgc.targets import SUPPORTED_SMS
from kgc.tiling.constants import MIN_DOT_TILE
from kgc.tiling.dynamic import kernel_dynamic_axis

# The first SM on which Triton warp-specializes kgc's loops (pointer loads,
# no TMA descriptors).
WARP_SPECIALIZE_SM = 100
# The first SM on which it warp-specializes loops of TMA descriptor loads.
WARP_SPECIALIZE_TMA_SM = 90
# The first SM with a tensor memory accelerator.
TMA_SM = 90
_FLOAT8 = ("f8E4M3FN", "f8E5M2")


@register_pass
class KgLegalizeDot(Pass):
    argument = "kg-legalize-dot"
    summary = "Rewrite tile dots to shapes and types Triton's tl.dot supports"

    target = Option(int, 90, "SM version to compile for (80, 86, 89, 90, ...)",
                    choices=SUPPORTED_SMS)

    def run(self, op: ir.Operation) -> None:
        for kernel in kernels_in(op):
            if is_tiled(kernel):
                self._legalize_kernel(kernel)

    def _legalize_kernel(self, kernel: ir.Operation) -> None:
        warp_specialize = knob(kernel, "warp_specialize") is True
        tma = knob(kernel, "tma") is True
        if tma and self.target < TMA_SM:
            raise PassFailure(f"kernel @{kernel_name(kernel)}: tma = true needs sm_{TMA_SM} or "
                              f"newer, which have a tensor memory accelerator; the target is "
                              f"sm_{self.target}", kernel.location)
        lowest = WARP_SPECIALIZE_TMA_SM if tma else WARP_SPECIALIZE_SM
        if warp_specialize and self.target < lowest:
            raise PassFailure(f"kernel @{kernel_name(kernel)}: warp_specialize needs "
                              f"sm_{WARP_SPECIALIZE_SM} or newer, where Triton warp-specializes "
                              f"loops of pointer loads, or tma = true on sm_"
                              f"{WARP_SPECIALIZE_TMA_SM} or newer; the target is sm_{self.target}"
                              + ("" if tma else " and the kernel has no tma"),
                              kernel.location)
        for dot in [o for o in walk_ops(kernel) if o.name == "kg.tile_dot"]:
            dot = self._legalize_types(dot)
            self._legalize_shape(kernel, dot)

    def _legalize_types(self, dot: ir.Operation) -> ir.Operation:
        a, b, acc = dot.operands
        ea, eb = (str(ir.RankedTensorType(v.type).element_type) for v in (a, b))
        precision = dot.attributes["precision"] if "precision" in dot.attributes else None
        operands = [a, b, acc]
        if ea in _FLOAT8 or eb in _FLOAT8:
            if self.target < 89 or ea != eb:
                with ir.InsertionPoint(dot), dot.location:
                    operands[0], operands[1] = (_cast(v, "f16") for v in (a, b))
                precision = None  # fast_accum, if set, is for 8-bit dots only
        elif ea == "f32" and precision is None:
            precision = kg.Precision.ieee
        if operands == [a, b, acc] and (precision is None) == ("precision" not in dot.attributes):
            return dot
        with ir.InsertionPoint(dot), dot.location:
            legal = kg.TileDotOp(dot.results[0].type, *operands, precision=precision)
        replace_with(dot, legal.operation, keep_attributes=True)
        if precision is None and "precision" in legal.operation.attributes:
            del legal.operation.attributes["precision"]  # kept from `dot` above
        return legal.operation

    def _legalize_shape(self, kernel: ir.Operation, dot: ir.Operation) -> None:
        a_shape = list(ir.RankedTensorType(dot.operands[0].type).shape)
        b_shape = list(ir.RankedTensorType(dot.operands[1].type).shape)
        m_axis, k_axis, n_axis = dot_dims(dot)
        m, k, nn = a_shape[m_axis], a_shape[k_axis], b_shape[n_axis]
        if k == 1:
            self._multiply_and_reduce(dot, None)
            return
        unit = [axis for axis, size in ((m_axis, m), (n_axis, nn)) if size == 1]
        if unit and (not _on_tensor_cores(dot) or any(_reduced(kernel, a) for a in unit)
                     or _stored_along(kernel, k_axis)):
            self._multiply_and_reduce(dot, k_axis)
            return
        if min(m, k, nn) >= MIN_DOT_TILE:
            return
        tile = int_array(kernel, "tile")
        extents = int_array(kernel, "iteration")
        if tile is None or extents is None:
            # A kernel written in tiled form by hand, not by kg-tile: its
            # dot cannot be grown without knowing the tiling.
            raise PassFailure(
                f"kernel @{kernel_name(kernel)}: a dot of {m}x{k}x{nn} needs tiles of at least "
                f"{MIN_DOT_TILE}, and the kernel has no 'tile' and 'iteration' attributes (from "
                "kg-tile) to grow them by", dot.location)
        grown = list(tile)
        unit_axes = []
        for axis, size in ((m_axis, m), (k_axis, k), (n_axis, nn)):
            if size < MIN_DOT_TILE:
                if tile[axis] != size or extents[axis] != size:
                    extent = ("the dynamic extent, whose size each call gives"
                              if axis == kernel_dynamic_axis(kernel)
                              else f"the axis ({extents[axis]})")
                    raise PassFailure(
                        f"kernel @{kernel_name(kernel)}: a dot tile of {size} along axis {axis} "
                        f"does not cover {extent}; choose a tile of at least {MIN_DOT_TILE} "
                        "there", dot.location)
                grown[axis] = MIN_DOT_TILE
                if size == 1:
                    unit_axes.append(axis)
        if grown == tile:
            return
        # An axis of 2 to 15 shows in the sizes of the tiles that span it;
        # one of extent 1 does not (a tile that spans it and one broadcast
        # along it both have size 1 there), so it grows in every tile but
        # those a dot's operand that must not span it is made of (b of
        # [.., 1, K, N] along m, a along n; every dot of the kernel, as an
        # attention kernel's two share their rows). A broadcast tile grown along
        # such an axis reads its one row again and the masked lanes beyond
        # it; only lane 0 is ever stored.
        plain = [grown[d] if d not in unit_axes else tile[d] for d in range(len(tile))]
        if plain != tile:
            resize_axes(kernel, tile, plain)
        for axis in unit_axes:
            keep = _not_spanning(kernel, axis)
            for value in list(tensor_values(kernel)):
                type_ = ir.RankedTensorType(value.type)
                shape = list(type_.shape)
                if shape[axis] == 1 and value not in keep:
                    shape[axis] = MIN_DOT_TILE
                    value.set_type(ir.RankedTensorType.get(shape, type_.element_type))
        set_int_array(kernel, "tile", grown)
        if unit_axes:
            try:
                kernel.verify()
            except ir.MLIRError as error:
                raise PassFailure(
                    f"kernel @{kernel_name(kernel)}: growing its dot of {m}x{k}x{nn} to "
                    f"{MIN_DOT_TILE} along an axis of extent 1 left the kernel invalid: "
                    f"{str(error).splitlines()[0]}", dot.location) from None

    def _multiply_and_reduce(self, dot: ir.Operation, k_axis: int | None) -> None:
        a, b, acc = dot.operands
        with ir.InsertionPoint(dot), dot.location:
            af, bf = _cast(a, "f32"), _cast(b, "f32")
            a_shape = ir.RankedTensorType(a.type).shape
            b_shape = ir.RankedTensorType(b.type).shape
            product_shape = [max(x, y) for x, y in zip(a_shape, b_shape)]
            f32 = ir.F32Type.get()
            product = kg.mul(ir.RankedTensorType.get(product_shape, f32), af, bf)
            if k_axis is not None:
                reduced_shape = list(product_shape)
                reduced_shape[k_axis] = 1
                product = kg.reduce(ir.RankedTensorType.get(reduced_shape, f32),
                                    kg.ReduceKind.sum, product, [k_axis], keepdim=True)
            total = kg.AddOp(acc.type, acc, product)
        replace_with(dot, total.operation)


def _reduced(kernel: ir.Operation, axis: int) -> bool:
    """Whether an op of the kernel sums or reduces over `axis` (a dot's k, a
    kg.reduce's dims): growing an axis of extent 1 is kept to axes whose
    grown lanes no reduction has to leave out."""
    for op in walk_ops(kernel):
        if op.name == "kg.tile_dot" and dot_dims(op)[1] == axis:
            return True
        if op.name == "kg.reduce" and axis in int_array(op, "dims"):
            return True
    return False


def _stored_along(kernel: ir.Operation, axis: int) -> bool:
    """Whether the kernel stores tiles that span `axis`: a one-row matmul's
    result broadcast to the rows of an epilogue operand that the plan reads
    along the dot's k (out[k, n] = (a @ b)[0, n] + b[k, n]). Growing the
    dot's unit axis would grow those tiles' rows too."""
    for op in walk_ops(kernel):
        if op.name == "kg.tile_store" and \
                ir.RankedTensorType(op.operands[0].type).shape[axis] > 1:
            return True
    return False


def _not_spanning(kernel: ir.Operation, axis: int) -> set:
    """The values that the operands of the kernel's dots that must not span
    `axis` are computed from: b where `axis` is a dot's m, a where it is
    its n."""
    keep: set = set()
    for dot in walk_ops(kernel):
        if dot.name != "kg.tile_dot":
            continue
        m_axis, _, n_axis = dot_dims(dot)
        if axis == m_axis:
            keep |= _backward_slice(dot.operands[1])
        if axis == n_axis:
            keep |= _backward_slice(dot.operands[0])
    return keep


def _backward_slice(value: ir.Value) -> set:
    """`value` and every value of the kernel it is computed from."""
    seen, stack = set(), [value]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        owner = current.owner
        if isinstance(owner, ir.Block):
            continue  # a block argument: a kernel operand or a loop-carried value
        for operand in owner.operands:
            stack.append(operand)
    return seen


def _on_tensor_cores(dot: ir.Operation) -> bool:
    """Whether Triton runs this (type-legal) dot on tensor cores: 16-bit and
    8-bit floats, and f32 under tf32."""
    element = str(ir.RankedTensorType(dot.operands[0].type).element_type)
    if element != "f32":
        return True
    return "precision" in dot.attributes and \
        kg.Precision(ir.IntegerAttr(dot.attributes["precision"]).value) == kg.Precision.tf32


def _cast(value: ir.Value, element: str) -> ir.Value:
    type_ = ir.RankedTensorType(value.type)
    if str(type_.element_type) == element:
        return value
    target = ir.RankedTensorType.get(list(type_.shape), ir.Type.parse(element))
    return kg.cast(target, value)


