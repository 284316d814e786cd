"""Writing the tile program of a planned kernel.

The generator walks from each output down to the kernel inputs, asking for
every value "at this index map"; the answer is a tile whose axes are the
iteration axes the value varies along (its size is the tile size on those
axes and 1 elsewhere). View ops only change the map; an input becomes a
strided view of its buffer and a load. Values are made in the outermost
loop scope that binds every axis they vary along, so loop-invariant work is
hoisted. Reductions over looped axes run in phases, one loop nest each.

`Generator` knows no kind of kernel: a schedule whose programs need more
(the grouped tile order, the dot order and TMA copies of matmuls,
`kgc.tiling.matmul_generator`) subclasses it and overrides its hooks
(`_grouped_axes`, `_phase_order`, `_tma_load`, `_tma_store`).

The generator talks to a `Builder`: `kgc.tiling.mlir_builder` writes kg tile
ops; `DryBuilder` writes nothing and only checks that the program can be
written, which is how `plan_group` decides whether ops can be one kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Sequence

from kgc.tiling.constants import COMBINE, INT32_MAX, INT32_MIN, NEUTRAL
from kgc.tiling.graph_model import ELEMENTWISE_OPS, Node
from kgc.tiling.index_maps import BufferView, IndexMap, NotAffine
from kgc.tiling.iteration import (TILE_LOOP, KernelPlan, Unplannable, axes_of, is_affine_reshape,
                                  leaf_view, matmul_operand_maps, operand_maps, reduce_input_map)



@dataclasses.dataclass(frozen=True)
class Tile:
    value: Any  # what the builder returned (None in a dry run)
    axes: frozenset[int]  # iteration axes the tile varies along
    element: str


class Builder:
    """What the generator needs from an IR writer. Scalars are i32."""

    def program_id(self, axis: int = 0) -> Any: ...  # along grid axis 0, 1 or 2
    def scalar_argument(self, index: int) -> Any: ...  # the plan's scalar_arguments[index]
    def const(self, value: int) -> Any: ...
    def scalar(self, op: str, lhs: Any, rhs: Any) -> Any: ...  # add sub mul div rem min
    # The kernel's dynamic extent (`?`), the size each call gives, as an i32.
    def extent(self) -> Any: ...
    # `tma`: copy the tile with the tensor memory accelerator (kgc.tiling.tma).
    def load(self, input_index: int, element: str, view: BufferView, offsets: Sequence[Any],
             shape: Sequence[int], tma: bool = False) -> Any: ...
    def store(self, output_index: int, element: str, value: Any, view: BufferView,
              offsets: Sequence[Any], shape: Sequence[int], tma: bool = False) -> None: ...
    # A load whose position along view dimension `dim` is offsets[dim] +
    # `indices` (a tile of i32 or i64) lane by lane (kgc.tiling.gather).
    def gather(self, input_index: int, element: str, view: BufferView, offsets: Sequence[Any],
               indices: Any, dim: int, shape: Sequence[int]) -> Any: ...
    def constant(self, value: float, element: str, shape: Sequence[int]) -> Any: ...
    def elementwise(self, op: str, operands: Sequence[Any], attrs: dict, element: str,
                    shape: Sequence[int]) -> Any: ...
    def reduce(self, kind: str, x: Any, axes: Sequence[int], element: str,
               shape: Sequence[int]) -> Any: ...
    def dot(self, a: Any, b: Any, acc: Any, precision: str | None, shape: Sequence[int],
            dims: Sequence[int] | None = None) -> Any: ...  # dims: the (M, K, N) axes
    def mask(self, offsets: Sequence[Any], lower: Sequence[int], upper: Sequence[int],
             shape: Sequence[int]) -> Any: ...
    def lanes(self, offset: Any, axis: int, shape: Sequence[int]) -> Any: ...  # i32 offset + lane
    def select(self, mask: Any, a: Any, b: Any, element: str, shape: Sequence[int]) -> Any: ...
    def broadcast(self, x: Any, element: str, shape: Sequence[int]) -> Any: ...

    @contextlib.contextmanager
    def loop(self, axis: int | None, extent: int | Any, step: int, inits: Sequence[Any],
             attributes: dict | None = None, start: Any = None, end: Any = None
             ) -> Iterator[Any]:
        """A loop over `axis` (None: over tiles of a persistent program or
        the splits of a split-K kernel) from `start` (a scalar; None: 0) to
        `end` (a scalar; None: `extent`, a number or a scalar) carrying `inits`;
        yields a LoopBody whose
        `offset` is the loop offset and `carried` the current values. Set
        `body.results` to the values to carry on; after the block
        `body.finals` holds the loop's results. `attributes` (name -> int
        or True) go on the loop for Triton: `tt.num_stages`, `tt.flatten`,
        `tt.warp_specialize`."""
        raise NotImplementedError

    @contextlib.contextmanager
    def hoisted(self, depth: int) -> Iterator[None]:
        """Writes at loop depth `depth` (0: outside every loop), before the
        loop under construction there."""
        raise NotImplementedError


@dataclasses.dataclass
class LoopBody:
    offset: Any
    carried: list
    results: list = dataclasses.field(default_factory=list)
    finals: list = dataclasses.field(default_factory=list)


class DryBuilder(Builder):
    """Writes nothing; every value is None."""

    def program_id(self, axis=0): return None
    def scalar_argument(self, index): return None
    def const(self, value): return None
    def scalar(self, op, lhs, rhs): return None
    def extent(self): return None
    def load(self, *args, **kwargs): return None
    def store(self, *args, **kwargs): return None
    def gather(self, *args): return None
    def constant(self, *args): return None
    def elementwise(self, *args): return None
    def reduce(self, *args): return None
    def dot(self, *args): return None
    def mask(self, *args): return None
    def lanes(self, *args): return None
    def select(self, *args): return None
    def broadcast(self, *args): return None

    @contextlib.contextmanager
    def loop(self, axis, extent, step, inits, attributes=None, start=None, end=None):
        body = LoopBody(None, list(inits))
        yield body
        body.finals = list(body.results)

    @contextlib.contextmanager
    def hoisted(self, depth):
        yield


class Generator:
    def __init__(self, plan: KernelPlan, builder: Builder):
        self.plan = plan
        self.b = builder
        self.n = len(plan.extents)
        self.offsets: dict[int, Any] = {}
        self.bound: list[int | None] = []  # loop axes bound at depths 1, 2, ...
        self.memo: list[dict] = [{}]  # per depth
        # The outermost depth that values of a tile may go to: 1 inside the
        # tile loop of a persistent program, 0 otherwise.
        self.base = 0
        self.axes_memo: dict = {}
        self.matmul_accumulators: dict[int, Tile] = {}

    # -- driving --------------------------------------------------------------

    def run(self) -> None:
        if self.plan.persistent_programs is None:
            self._program_offsets()
            self._tile_program()
            return
        # A persistent program: a loop over the tiles pid, pid + programs,
        # ...; every value of a tile is made inside it.
        zero = self.b.const(0)
        for axis in range(self.n):
            self.offsets[axis] = zero
        programs = self.plan.grid()[0]
        with self.b.loop(None, self.plan.num_programs(), programs, [],
                         self.plan.loop_attributes.get(TILE_LOOP),
                         start=self.b.program_id(0)) as body:
            self.bound.append(None)
            self.memo.append({})
            self.base = 1
            try:
                if self.plan.program_axes:
                    self._tile_offsets(body.offset, self.plan.program_axes)
                self._tile_program()
            finally:
                self.base = 0
                self.memo.pop()
                self.bound.pop()
            body.results = []

    def _tile_program(self) -> None:
        for axes, nodes in self.plan.phases:
            self._run_phase(list(axes), nodes)
        deferred = []
        for index, (output, index_map) in enumerate(zip(self.plan.outputs, self.plan.output_maps)):
            if self._looped_store_axes(output, index_map):
                deferred.append((index, output, index_map))
            else:
                self._store(index, output, index_map)
        if deferred:
            needed = sorted(set().union(*(self._looped_store_axes(o, m) for _, o, m in deferred)))

            def store_deferred(carried):
                for index, output, index_map in deferred:
                    self._store(index, output, index_map)
                return []

            self._loop_nest(needed, [], store_deferred)

    def _program_offsets(self) -> None:
        zero = self.b.const(0)
        for axis in range(self.n):
            self.offsets[axis] = zero
        if not self.plan.program_axes:
            return
        for dimension, axes in enumerate(self.plan.grid_dimensions()):
            if axes:
                self._tile_offsets(self.b.program_id(dimension), axes)

    def _tile_offsets(self, pid, program_axes: Sequence[int]) -> None:
        """Offsets along `program_axes` of the tile that program `pid`
        computes, the last axis varying fastest (grouped along the axes
        `_grouped_axes` names)."""
        plan = self.plan
        counts = {a: plan.tiles_along(a) for a in program_axes}
        swizzled = self._grouped_axes(counts)
        remaining = pid
        plain = [a for a in program_axes if a not in swizzled]
        if swizzled:
            m_axis, n_axis = swizzled
            tiles_mn = counts[m_axis] * counts[n_axis]
            rest = self.b.scalar("rem", remaining, self.b.const(tiles_mn)) if plain else remaining
            if plain:
                remaining = self.b.scalar("div", remaining, self.b.const(tiles_mn))
            pid_m, pid_n = self._swizzle(rest, counts[m_axis], counts[n_axis])
            self.offsets[m_axis] = self.b.scalar("mul", pid_m, self.b.const(plan.tile[m_axis]))
            self.offsets[n_axis] = self.b.scalar("mul", pid_n, self.b.const(plan.tile[n_axis]))
        for position, axis in enumerate(reversed(plain)):
            outermost = position == len(plain) - 1
            index = remaining if outermost else self.b.scalar("rem", remaining, self.b.const(counts[axis]))
            if not outermost:
                remaining = self.b.scalar("div", remaining, self.b.const(counts[axis]))
            self.offsets[axis] = index if plan.tile[axis] == 1 else \
                self.b.scalar("mul", index, self.b.const(plan.tile[axis]))

    def _grouped_axes(self, counts: dict[int, int]) -> tuple[int, ...]:
        """The (row, column) program axes whose tiles are walked in groups of
        `group_m` rows (`_swizzle`), given the tiles along each program
        axis; () for none, the default."""
        return ()

    def _swizzle(self, rest, tiles_m: int, tiles_n: int):
        """Triton's grouped ordering: consecutive programs share B tiles and
        walk `group_m` rows of A tiles, which keeps them in L2."""
        b = self.b
        group_m = self.plan.config.group_m
        width = group_m * tiles_n
        group = b.scalar("div", rest, b.const(width))
        first_m = b.scalar("mul", group, b.const(group_m))
        size_m = b.scalar("min", b.scalar("sub", b.const(tiles_m), first_m), b.const(group_m))
        within = b.scalar("rem", rest, b.const(width))
        pid_m = b.scalar("add", first_m, b.scalar("rem", within, size_m))
        pid_n = b.scalar("div", within, size_m)
        return pid_m, pid_n

    def _loop_nest(self, axes: list[int], inits: list, body_fn) -> list:
        """Loops over `axes` (outermost first), carrying `inits`;
        `body_fn(carried) -> results` is the innermost body."""
        if not axes:
            return body_fn(inits)
        axis, rest = axes[0], axes[1:]
        with self.b.loop(axis, self.plan.extents[axis], self.plan.tile[axis], inits,
                         self.plan.loop_attributes.get(axis), **self._loop_bounds(axis)) as body:
            self.bound.append(axis)
            self.memo.append({})
            saved = self.offsets[axis]
            self.offsets[axis] = body.offset
            try:
                body.results = self._loop_nest(rest, body.carried, body_fn)
            finally:
                self.offsets[axis] = saved
                self.memo.pop()
                self.bound.pop()
        return body.finals

    def _loop_bounds(self, axis: int) -> dict:
        """`start` and `end` of the loop over `axis` where they are not 0
        and its extent (a split-K kernel's k loop walks its split only; a
        loop over the dynamic extent ends at the call's size)."""
        if axis == self.plan.dynamic_axis:
            return {"end": self.b.extent()}
        return {}

    def _run_phase(self, axes: list[int], nodes: list[Node]) -> None:
        """One loop nest over `axes` accumulating every reduction in `nodes`:
        reduces keep a whole tile of partial results, reduced once after
        the loop; matmuls accumulate their dot."""
        nodes = self._phase_order(nodes)
        inits = [self._accumulator_init(node) for node in nodes]

        def body(carried):
            return [self._accumulate(node, acc) for node, acc in zip(nodes, carried)]

        finals = self._loop_nest(axes, [t.value for t in inits], body)
        for node, init, final in zip(nodes, inits, finals):
            acc = Tile(final, init.axes, init.element)
            if node.op == "matmul":
                # Finished on first use: its factors may need later phases.
                self.matmul_accumulators[id(node)] = acc
            else:
                self.memo[self.base][(id(node), self._natural_map(node))] = \
                    self._reduce_tile(node, acc)

    def _phase_order(self, nodes: list[Node]) -> list[Node]:
        """The order in which a phase writes its reductions (that of the
        plan by default)."""
        return nodes

    def _natural_map(self, node: Node) -> IndexMap:
        if node not in self.plan.maps:
            raise Unplannable(f"kg.{node.op} {node.shape} does not follow the kernel's iteration")
        return self.plan.maps[node]

    # -- reductions -------------------------------------------------------------

    def _reduce_input_map(self, node: Node) -> IndexMap:
        return reduce_input_map(node, self._natural_map(node), self.plan.reduce_axes[node])

    def _accumulator_init(self, node: Node) -> Tile:
        if node.op == "matmul":
            m_axis, _, n_axis = self.plan.axes_of_dot(node)
            axes, element, neutral = frozenset({m_axis, n_axis}), "f32", 0.0
        else:
            axes = self._axes(node.operands[0], self._reduce_input_map(node))
            element, neutral = node.element, NEUTRAL[node.attrs["kind"]]
        with self.b.hoisted(self.base):
            value = self.b.constant(neutral, element, self._shape(axes))
        return Tile(value, axes, element)

    def _accumulate(self, node: Node, acc_value) -> Any:
        if node.op == "matmul":
            return self._accumulate_dot(node, acc_value)
        x = self.gen(node.operands[0], self._reduce_input_map(node))
        return self.b.elementwise(COMBINE[node.attrs["kind"]], [acc_value, x.value], {},
                                  node.element, self._shape(x.axes))

    def _accumulate_dot(self, node: Node, acc_value) -> Any:
        expansion = self.plan.matmul_expansions()[node]
        dims = self.plan.axes_of_dot(node)
        a_map, b_map = matmul_operand_maps(node, self._natural_map(node), dims)
        a = self.gen(expansion.core_a, a_map)
        b = self.gen(expansion.core_b, b_map)
        return self._dot(a, b, acc_value, node.attrs.get("precision"), dims)

    def _dot(self, a: Tile, b: Tile, acc_value, precision, dims: tuple[int, int, int]) -> Any:
        """acc + a @ b over the (m, k, n) axes `dims`, with tile_dot's
        layout: an operand that does not vary along one of its axes is
        broadcast along it first. Dims other than the last three axes
        (LoRA's rank axis) are written on the op."""
        m_axis, k_axis, n_axis = dims
        if n_axis in a.axes or m_axis in b.axes:
            raise Unplannable("a matmul operand varies along the other operand's axis")
        a_shape = self._shape(frozenset({m_axis, k_axis}))
        b_shape = self._shape(frozenset({k_axis, n_axis}))
        c_shape = self._shape(frozenset({m_axis, n_axis}))
        a_value = a.value if self._shape(a.axes) == a_shape else \
            self.b.broadcast(a.value, a.element, a_shape)
        b_value = b.value if self._shape(b.axes) == b_shape else \
            self.b.broadcast(b.value, b.element, b_shape)
        named = None if tuple(dims) == (self.n - 3, self.n - 2, self.n - 1) else dims
        return self.b.dot(a_value, b_value, acc_value, precision, c_shape, named)

    def _reduce_tile(self, node: Node, x: Tile) -> Tile:
        """Reduces `x` over the node's axes. Along an axis where x does not
        vary, a sum multiplies by the extent and max/min change nothing."""
        axes = set(self.plan.reduce_axes[node])
        varying = sorted(axes & x.axes)
        result_axes = x.axes - axes
        value = x.value
        if varying:
            value = self.b.reduce(node.attrs["kind"], value, varying, x.element, self._shape(result_axes))
        constant_axes = axes - x.axes
        if constant_axes and node.attrs["kind"] == "sum":
            count = 1
            for axis in constant_axes:
                count *= self.plan.extents[axis]
            factor = self.b.constant(float(count), x.element, self._shape(frozenset()))
            value = self.b.elementwise("mul", [value, factor], {}, x.element, self._shape(result_axes))
        return Tile(value, frozenset(result_axes), x.element)

    def _finish_reduction(self, node: Node, acc: Tile) -> Tile:
        if node.op != "matmul":
            return acc
        expansion = self.plan.matmul_expansions()[node]
        value, axes = acc.value, acc.axes
        for group, op in ((expansion.factors, "mul"), (expansion.divisors, "div")):
            for factor in group:
                factor_tile = self.gen(factor, self._factor_map(factor))
                factor_tile = self._cast(factor_tile, "f32")
                axes = axes | factor_tile.axes
                value = self.b.elementwise(op, [value, factor_tile.value], {}, "f32", self._shape(axes))
        return self._cast(Tile(value, axes, "f32"), node.element)

    def _factor_map(self, factor: Node) -> IndexMap:
        if factor in self.plan.maps:
            return self.plan.maps[factor]
        raise Unplannable("a factor moved out of a matmul has no map")

    def _cast(self, tile: Tile, element: str) -> Tile:
        if tile.element == element:
            return tile
        value = self.b.elementwise("cast", [tile.value], {}, element, self._shape(tile.axes))
        return Tile(value, tile.axes, element)

    # -- values -----------------------------------------------------------------

    def _looped_store_axes(self, output: Node, index_map: IndexMap) -> frozenset:
        """The loop axes the store of `output` must run over: those its value
        varies along, and those its address moves along where the value does
        not (a mask broadcast over the keys, stored beside an attention's
        product: one tile stored after the loop would cover one key block)."""
        strides, _ = BufferView.contiguous(output.shape).address_map(index_map)
        addressed = {a for a, s in enumerate(strides) if s != 0 and self.plan.extents[a] != 1}
        return (self._axes(output, index_map) | addressed) & set(self.plan.loop_axes)

    def _axes(self, node: Node, index_map: IndexMap) -> frozenset:
        return axes_of(node, index_map, self.plan.reduce_axes, self.plan.contraction_axes(),
                       self.plan.matmul_expansions(), self.axes_memo)

    def _shape(self, axes: frozenset) -> tuple[int, ...]:
        return tuple(self.plan.tile[a] if a in axes else 1 for a in range(self.n))

    def gen(self, node: Node, index_map: IndexMap) -> Tile:
        if node.op == "matmul":
            natural = self.plan.maps.get(node)
            # A view that only drops or adds dimensions of size 1 reads the
            # matmul's own elements: one accumulator, one tile.
            if natural is not None and index_map != natural and \
                    index_map.reads_like(natural, node.shape):
                index_map = natural
        key = (id(node), index_map)
        for memo in reversed(self.memo):
            if key in memo:
                return memo[key]
        axes = self._axes(node, index_map)
        depth = self.base
        for position, axis in enumerate(self.bound):
            if axis in axes:
                depth = max(depth, position + 1)
        unbound = axes & (set(self.plan.loop_axes) - set(self.bound))
        if unbound:
            raise Unplannable(f"kg.{node.op} {node.shape} varies along a looped axis outside its "
                              "loop (a looped reduction is read through a view)")
        with self.b.hoisted(depth):
            tile = self._emit(node, index_map, axes)
        self.memo[depth][key] = tile
        return tile

    def _emit(self, node: Node, index_map: IndexMap, axes: frozenset) -> Tile:
        op = node.op
        if op == "input":
            return self._load(node, BufferView.contiguous(node.shape), index_map, axes)
        if op == "constant":
            return Tile(self.b.constant(node.attrs["value"], node.element, self._shape(frozenset())),
                        frozenset(), node.element)
        if op == "iota":
            return self._iota(node, index_map, axes)
        if op == "reshape" and not is_affine_reshape(node, index_map):
            leaf = leaf_view(node)
            if leaf is None:
                raise Unplannable(f"kg.reshape {node.operands[0].shape} -> {node.shape} merges "
                                  "dimensions of a computed value")
            return self._load(leaf[0], leaf[1], index_map, axes)
        if op == "matmul":
            if index_map != self._natural_map(node):
                raise Unplannable("a matmul is read through a view in its own kernel")
            if id(node) in self.matmul_accumulators:
                return self._finish_reduction(node, self.matmul_accumulators[id(node)])
            dims = self.plan.axes_of_dot(node)
            m_axis, _, n_axis = dims
            full = frozenset({m_axis, n_axis})
            expansion = self.plan.matmul_expansions()[node]
            a_map, b_map = matmul_operand_maps(node, index_map, dims)
            zero = self.b.constant(0.0, "f32", self._shape(full))
            acc = self._dot(self.gen(expansion.core_a, a_map), self.gen(expansion.core_b, b_map),
                            zero, node.attrs.get("precision"), dims)
            return self._finish_reduction(node, Tile(acc, full, "f32"))
        if op == "reduce":
            reduce_axes = self.plan.reduce_axes[node]
            x_map = reduce_input_map(node, index_map, reduce_axes)
            if set(reduce_axes) & set(self.plan.loop_axes) & self._axes(node.operands[0], x_map):
                raise Unplannable("a looped reduction is read through a view")
            return self._reduce_tile(node, self.gen(node.operands[0], x_map))
        if op == "concat":
            return self._concat(node, index_map, axes)
        maps = operand_maps(node, index_map, self.plan.reduce_axes, self.plan.contraction_axes())
        if any(m is None for m in maps):
            raise Unplannable(f"kg.{op} cannot be read at an affine index here")
        if op in ("transpose", "broadcast_to", "slice", "reshape"):
            return self.gen(node.operands[0], maps[0])
        if op in ELEMENTWISE_OPS:
            operands = [self.gen(o, m) for o, m in zip(node.operands, maps)]
            # A dot's accumulator spans its whole tile even where its operands
            # do not vary along an axis (a broadcast row times a constant
            # matrix); what is computed from it spans that tile too.
            axes = frozenset(axes).union(*(t.axes for t in operands))
            value = self.b.elementwise(op, [t.value for t in operands], node.attrs, node.element,
                                       self._shape(axes))
            return Tile(value, axes, node.element)
        raise Unplannable(f"kg.{op} has no tile form")

    def _iota(self, node: Node, index_map: IndexMap, axes: frozenset) -> Tile:
        """start + the index along `dim`, which is affine in the iteration:
        sum of coefficient * (tile offset + lane) over the axes it varies
        along, plus the map's offset. Positions are i32 (the iteration's
        extents are) and an i64 result adds its start in i64."""
        dim, start = node.attrs["dim"], node.attrs["start"]
        row, shift = index_map.rows[dim], index_map.offsets[dim]
        position, position_axes = None, frozenset()
        for axis in sorted(axes):
            lanes_shape = self._shape(frozenset({axis}))
            term = self.b.lanes(self.offsets[axis], axis, lanes_shape)
            if row[axis] != 1:
                factor = self.b.constant(float(row[axis]), "i32", self._shape(frozenset()))
                term = self.b.elementwise("mul", [term, factor], {}, "i32", lanes_shape)
            position_axes = position_axes | {axis}
            position = term if position is None else self.b.elementwise(
                "add", [position, term], {}, "i32", self._shape(position_axes))
        wide = node.element == "i64"
        count = "i64" if wide else "i32"
        base = float(shift + (start if not wide else 0))
        if position is None:
            value = self.b.constant(float(shift + start), node.element, self._shape(frozenset()))
            return Tile(value, frozenset(), node.element)
        shape = self._shape(position_axes)
        if base:
            offset = self.b.constant(base, "i32", self._shape(frozenset()))
            position = self.b.elementwise("add", [position, offset], {}, "i32", shape)
        if node.element != "i32":
            position = self.b.elementwise("cast", [position], {}, node.element, shape)
        if wide and start:
            offset = self.b.constant(float(start), count, self._shape(frozenset()))
            position = self.b.elementwise("add", [position, offset], {}, count, shape)
        return Tile(position, position_axes, node.element)

    def _load(self, source: Node, view: BufferView, index_map: IndexMap, axes: frozenset) -> Tile:
        strides, offset = view.address_map(index_map)
        sizes, offsets = [], []
        for axis in range(self.n):
            if strides[axis] == 0:
                sizes.append(1)
                offsets.append(self.b.const(0))
                continue
            lo, hi = index_map.windows[axis]
            offset += strides[axis] * lo
            sizes.append(hi - lo)
            offsets.append(self.offsets[axis] if lo == 0 else
                           self.b.scalar("sub", self.offsets[axis], self.b.const(lo)))
        if offset < 0:
            raise Unplannable("a view starts before its buffer")
        load_view = BufferView(tuple(sizes), tuple(s if s else 0 for s in strides), offset)
        bulk = self._tma_load(source, load_view, axes)
        value = self.b.load(source.input_index, source.element, load_view, offsets,
                            self._shape(axes), **({"tma": True} if bulk else {}))
        return Tile(value, axes, source.element)

    def _tma_load(self, source: Node, view: BufferView, axes: frozenset) -> bool:
        """Whether the load of `source` through `view` goes through a TMA
        descriptor (never, by default); raises ConfigError where the
        kernel's knobs ask for one that cannot be."""
        return False

    def _tma_store(self, output: Node, view: BufferView, axes: frozenset) -> bool:
        """Whether the store of `output` through `view` goes through a TMA
        descriptor (never, by default)."""
        return False

    def _concat(self, node: Node, index_map: IndexMap, axes: frozenset) -> Tile:
        dim = node.attrs["dim"]
        pieces, start = [], 0
        for operand in node.operands:
            size = operand.shape[dim]
            try:
                piece_map = index_map.concat_piece(dim, start, size)
                axis, (lo, hi) = index_map.concat_window(dim, start, size)
            except NotAffine as error:
                raise Unplannable(str(error)) from None
            pieces.append((self.gen(operand, piece_map), axis, lo, hi))
            start += size
        result = pieces[-1][0]
        result_axes = set(result.axes)
        for tile, axis, lo, hi in reversed(pieces[:-1]):
            lower = [INT32_MIN] * self.n
            upper = [INT32_MAX] * self.n
            lower[axis], upper[axis] = lo, hi
            # Only `axis` is bounded: the other offsets are 0, never a loop's
            # offset, which is out of scope where a tile that does not vary
            # along its axis is hoisted (Q of attention, above the key loop).
            mask = self.b.mask([self.offsets[a] if a == axis else self.b.const(0)
                                for a in range(self.n)], lower, upper,
                               self._shape(frozenset({axis})))
            result_axes |= tile.axes | {axis}
            value = self.b.select(mask, tile.value, result.value, node.element,
                                  self._shape(frozenset(result_axes)))
            result = Tile(value, frozenset(result_axes), node.element)
        return result

    def _store(self, index: int, output: Node, index_map: IndexMap) -> None:
        tile = self.gen(output, index_map)
        strides, offset = BufferView.contiguous(output.shape).address_map(index_map)
        store_axes = frozenset(a for a, s in enumerate(strides) if s != 0)
        # An axis of extent 1 has one point: a tile along it is stored whole
        # by a view that does not read it (a matmul's one row kept as a
        # dimension of size 1).
        if any(self.plan.extents[a] != 1 for a in tile.axes - store_axes):
            raise Unplannable(f"output {output.shape} varies along an axis it is not stored by")
        value = tile.value
        if self._shape(tile.axes) != self._shape(store_axes):
            value = self.b.broadcast(value, tile.element, self._shape(store_axes))
        sizes = tuple(self.plan.extents[a] if a in store_axes else 1 for a in range(self.n))
        offsets = [self.offsets[a] if a in store_axes else self.b.const(0) for a in range(self.n)]
        view = BufferView(sizes, tuple(strides), offset)
        tma_store = self._tma_store(output, view, store_axes)
        self.b.store(index, output.element, value, view, offsets, self._shape(store_axes),
                     **({"tma": True} if tma_store else {}))
