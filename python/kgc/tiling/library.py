"""Library kernels: a kernel that is a bare matmul, run by the GPU's BLAS.

kgc writes every other kernel as Triton. A kernel whose ops after fusion
are one `kg.matmul` and nothing else (each operand a kernel input, or an
input whose last two axes a `kg.transpose` swaps), but for a bias added to
its rows and reshapes of its result (the same buffer), can instead be a call of
a hand-written library, as Inductor calls cuBLAS for its plain GEMMs: kgc
generates no code for it. What the kernel becomes:

* kg-tile: a tiled kernel of kind `library_matmul` with an empty tile
  program, grid [1, 1, 1], the knob `library = true`, and the call it makes
  as `library_call = {name = "matmul", operands = array<i64: A, B>,
  transpose_a = ..., transpose_b = ..., [bias = C]}` (A, B: the kernel
  inputs that are a and b; `transpose_x`: the operand is the input with its
  last two axes swapped; C: the input added to each row);
* convert-kg-to-ttir: a kernel module holding no `tt.func`, marked
  `kg.library_call`, and a `kg.launch` of it carrying the same
  `library_call`; Triton compiles nothing for it;
* the manifest: the kernel with `"library": {...}` (the call) and no
  artifact; the memory plan places its buffers like any kernel's;
* the Python runtime: `torch.mm(a, b, out=c)` (`torch.matmul` for a
  batched product; with a bias, `torch.addmm(bias, a, b, out=c)`) on the
  buffers (views where an operand is transposed), on the current stream
  (cuBLAS or cuBLASLt, as torch picks); the CPU executor: the same product
  (and sum) in f32;
* the C export: refused, naming the kernel and how to turn library kernels
  off (a C caller would need cuBLAS linked and a handle; kgc's C has only
  the driver API).

What it takes: f16, bf16 and f32 operands of one element type, the result
of that element type or, for a 2-d product of f16 or bf16 without a bias,
f32 (torch.mm's `out_dtype`: a weight's gradient for its f32 master weight,
kg-simplify's widened products), f32 operands only at the
default `ieee` precision (the runtime turns TF32 and torch's reduced-
precision reductions off around the call, so that cuBLAS accumulates in f32
as `kg.matmul` says); any batch axes `torch.matmul` broadcasts. One thing
is fused into it: a bias of the product's element type added to every row
of a 2-d product (`kg.add` of the matmul and an input of n elements), which
the call adds as torch.addmm and F.linear do, in cuBLASLt's epilogue: to
the f32 accumulator, rounded once, where kg rounds the product, then the
sum (one rounding less; eager PyTorch computes a linear layer the same
way). Nothing else (a scale, an activation, a residual): a fused Triton
kernel saves the round trip through memory that such an epilogue would,
and kgc would have to prove the library's epilogue matches kg's rounding.
Fusion does not grow such a matmul into a Triton kernel in the first
place (kg-fuse's `library-alone`, kgc.fusion.greedy): its norm, epilogue or
sibling becomes a kernel of its own beside the call, as Inductor's do; a
kernel fusion made is never split afterwards to use the library.

When kgc chooses it (`prefers_library`): a bare matmul with at least 128
rows (m), 256 columns (n) and 256 k steps per product, at f16, bf16 or f32;
and, at f16 and bf16, one of more rows than a decode step's over large
weights (below).
The rule comes from an H200 with Triton 3.6 (benchmarks/NOTES.md, "Real
models"): at 512 tokens kgc's Triton matmuls ran at 0.81x to 0.97x cuBLAS
(qkv 512x4096x6144: 48.3 us against 39.8; lm head 512x4096x32000: 227.7
against 205.7; down 512x14336x4096: 96.7 against 90.7), and a GEMM 4096^3
at 227.4 against 205.3 (issue 25's table). At 128 rows cuBLAS was faster on
seven of the eight projections of Llama-3-8B and the small models (0.57x to
0.95x, one even; "Folding a norm into a matmul"). Under 128 rows, over
8 MiB of weights or more (f16, bf16), a grid of 60 Triton configs beside
cuBLAS on 48 products of 1 to 80 rows (benchmarks/NOTES.md, stop 49) gave
cuBLAS within 4% of the best config at 80 rows, and at 20 and 40 rows
where no wave of wide tiles streams the weights (10% on one), while kgc's
heuristic tiles took up to 1.75x: such a product is a library call too
(`prefers_library`), but for a decode's few rows (at most SKINNY_ROWS) and
products that kgc's Triton kernel streams in one wave
(`kgc.tiling.matmul.one_wave_columns`). Since fusion asks the same rule,
those products keep their norms and epilogues out, as at 128 rows. The
same rule is used on every target; only sm_90 was measured.

Overrides: the kernel knob `library` (a flag of `LibraryMatmulConfig`,
kg-tile's option `library=true|false|auto`): true calls the library for a
bare matmul whatever its size, false keeps Triton; a kernel with Triton
matmul knobs set (a tile size a user or the search chose) is Triton.
`kgc.compile(..., library_kernels=False)` (`library_kernels`, around any
compile) or the environment variable `KGC_LIBRARY_KERNELS=0` turns kgc's
own choice off (an explicit `library = true` still holds), for benchmarks
that compare; the torch backend follows the environment variable.
The search offers both: the library config beside the Triton space of a
bare matmul (`search_space`), and `kgc.search.space` adds it where Triton
was kgc's choice.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from typing import ClassVar, Mapping, NamedTuple, Sequence

from kgc.targets import Target, target_for
from kgc.tiling.config import (DEFAULT_MIN_BYTES, SKINNY_ROWS, KernelConfig, KnobOption,
                               MatmulConfig, weight_bytes)
from kgc.tiling.graph_model import Node, topological
from kgc.tiling.index_maps import product
from kgc.tiling.iteration import Unplannable
from kgc.tiling.matmul import MatmulSchedule, one_wave_columns
from kgc.tiling.schedule import Schedule, TiledForm
from kgc.tuned_defaults import TableKey, TunedTable, log_distance

__all__ = ["ENVIRONMENT_SWITCH", "KIND", "LIBRARY_CALL_ATTRIBUTE", "LibraryCall",
           "LibraryMatmulConfig", "LibraryMatmulPlan", "LibraryMatmulSchedule",
           "MODULE_LIBRARY_CALL_ATTRIBUTE", "bare_matmul", "library_call_of", "library_kernels",
           "library_kernels_enabled", "prefers_library"]

KIND = "library_matmul"
# The attribute of a tiled kernel, a kernel module and a kg.launch that
# holds the call a library kernel makes.
LIBRARY_CALL_ATTRIBUTE = "library_call"
# A kernel module's attributes must name their dialect.
MODULE_LIBRARY_CALL_ATTRIBUTE = "kg.library_call"
# Set to 0 (or false, off, no): kgc never picks a library kernel itself.
ENVIRONMENT_SWITCH = "KGC_LIBRARY_KERNELS"
ELEMENTS = ("f16", "bf16", "f32")
# The rule's thresholds (see the module docstring for the measurements).
MIN_ROWS = 128
MIN_COLUMNS = 256
MIN_DEPTH = 256
# The elements the rule calls the library for under MIN_ROWS rows.
WIDE_ROW_ELEMENTS = ("f16", "bf16")
# Operand types whose 2-d product the library also writes as f32 (torch.mm's
# `out_dtype`; cuBLAS accumulates in f32 and skips the rounding to the
# operands' type).
WIDE_RESULT_ELEMENTS = ("f16", "bf16")


@dataclasses.dataclass(frozen=True)
class LibraryMatmulConfig(KernelConfig):
    """The one knob of a bare matmul's kernel that picks between a library
    call and kgc's Triton matmul: `library` (true: the library; false:
    Triton; unset: kgc's rule). A library call has no tiles, warps or
    stages: the inherited knobs are not this kind's."""

    kind: ClassVar[str] = KIND
    FLAGS: ClassVar[tuple[str, ...]] = ("library",)
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "library": KnobOption("call the GPU's BLAS for a kernel that is a bare matmul "
                              "(kgc.tiling.library)")}

    library: bool | None = None

    @classmethod
    def knobs(cls) -> tuple[str, ...]:
        return ("library",)

    @classmethod
    def _candidates(cls, extents, element, target):
        return {"library": (True,)}


@dataclasses.dataclass(frozen=True)
class LibraryCall:
    """The call a library kernel makes: `name` ("matmul": c = a @ b as
    torch.matmul computes it); which of the kernel's inputs are a and b
    (`operands`: fusion numbers a kernel's inputs by first use, so b may
    come first, and a @ a has one input); and whether each operand is its
    input with the last two axes swapped."""

    name: str
    operands: tuple[int, int] = (0, 1)
    transpose_a: bool = False
    transpose_b: bool = False
    # The kernel input holding a bias of n elements added to every row of
    # the product in its f32 accumulator, rounded once with it (what
    # torch.addmm and F.linear compute); None: no bias.
    bias: int | None = None

    def to_json(self) -> dict:
        data = {"name": self.name, "operands": list(self.operands),
                "transpose_a": self.transpose_a, "transpose_b": self.transpose_b}
        if self.bias is not None:
            data["bias"] = self.bias
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "LibraryCall":
        a, b = (int(index) for index in data["operands"])
        bias = data.get("bias")
        return cls(str(data["name"]), (a, b), bool(data.get("transpose_a", False)),
                   bool(data.get("transpose_b", False)), None if bias is None else int(bias))

    def to_attribute(self):
        """As an MLIR dictionary attribute (needs a context)."""
        from mlir import ir

        entries = {"name": ir.StringAttr.get(self.name),
                   "operands": ir.DenseI64ArrayAttr.get(list(self.operands)),
                   "transpose_a": ir.BoolAttr.get(self.transpose_a),
                   "transpose_b": ir.BoolAttr.get(self.transpose_b)}
        if self.bias is not None:
            entries["bias"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), self.bias)
        return ir.DictAttr.get(entries)

    @classmethod
    def from_attribute(cls, attribute) -> "LibraryCall":
        from mlir import ir

        entries = ir.DictAttr(attribute)
        a, b = ir.DenseI64ArrayAttr(entries["operands"])
        bias = ir.IntegerAttr(entries["bias"]).value if "bias" in entries else None
        return cls(ir.StringAttr(entries["name"]).value, (a, b),
                   ir.BoolAttr(entries["transpose_a"]).value,
                   ir.BoolAttr(entries["transpose_b"]).value, bias)

    def describe(self) -> str:
        a = "a^T" if self.transpose_a else "a"
        b = "b^T" if self.transpose_b else "b"
        bias = " + bias" if self.bias is not None else ""
        return f"library call: BLAS {self.name} {a} @ {b}{bias} (cuBLAS through torch)"

    def arguments(self, buffers: Sequence) -> tuple:
        """(a, b, c) of the kernel's `buffers` (its inputs, then its
        result), the operands swapped where the call says, the result
        viewed in the product's shape where the kernel returns a reshape of
        it."""
        a, b = buffers[self.operands[0]], buffers[self.operands[1]]
        if self.transpose_a:
            a = a.transpose(-1, -2)
        if self.transpose_b:
            b = b.transpose(-1, -2)
        c = buffers[-1]
        if c is not None:
            view = self.result_view([tuple(t.shape) for t in buffers])
            if view is not None:
                c = c.view(view)
        return a, b, c

    def result_view(self, shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
        """The shape the call sees the kernel's result in, for buffers of
        `shapes` (its inputs, then its result): the product's, where the
        result is a reshape of it; None where it is the product's already."""
        a, b = list(shapes[self.operands[0]]), list(shapes[self.operands[1]])
        if self.transpose_a:
            a[-2:] = a[-1], a[-2]
        if self.transpose_b:
            b[-2:] = b[-1], b[-2]
        c = tuple(shapes[-1])
        if c[-2:] == (a[-2], b[-1]) and len(c) == max(len(a), len(b)):
            return None
        # A linear layer's batch is its input's; only two batches need
        # broadcasting (torch's helper costs microseconds a call).
        if len(b) == 2:
            batch = tuple(a[:-2])
        elif len(a) == 2:
            batch = tuple(b[:-2])
        else:
            import torch

            batch = tuple(torch.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
        return (*batch, a[-2], b[-1])

    def bias_of(self, buffers: Sequence):
        """The bias among the kernel's `buffers`, as the n elements it adds
        to each row; None without one."""
        return None if self.bias is None else buffers[self.bias].reshape(-1)


def library_call_of(op) -> LibraryCall | None:
    """The call of a tiled kernel, kernel module or kg.launch that is a
    library kernel; None for every other op."""
    for name in (LIBRARY_CALL_ATTRIBUTE, MODULE_LIBRARY_CALL_ATTRIBUTE):
        if name in op.attributes:
            return LibraryCall.from_attribute(op.attributes[name])
    return None


@dataclasses.dataclass
class LibraryMatmulPlan:
    """A library kernel's plan: no tiles and no program, one call. It has
    what kg-tile and the registry read of every plan (kind, extents, tile,
    grid, config)."""

    outputs: list[Node]
    extents: tuple[int, ...]  # (batch..., m, k, n)
    call: LibraryCall
    config: LibraryMatmulConfig
    knob_extents: dict
    kind: str = KIND
    schedule: str = KIND
    # What fusion names the kernel after: the kind of kernel it stands in
    # for, so that names (which configs refer to) do not depend on the
    # choice of library.
    family: str = "matmul"
    scalar_arguments: tuple[int, ...] = ()
    persistent_programs: int | None = None
    split: None = None  # never split along k: the library decides how it runs
    dynamic_axis: None = None  # the library's schedule takes no dynamic extent

    @property
    def tile(self) -> tuple[int, ...]:
        return self.extents

    def grid(self) -> list[int]:
        return [1, 1, 1]

    def num_programs(self) -> int:
        return 1


def _operand(node: Node) -> tuple[Node, bool] | None:
    """The kernel input a matmul operand reads, and whether the operand
    swaps its last two axes; None when it is computed."""
    if node.is_input:
        return node, False
    if _swaps_last_axes(node) and node.operands[0].is_input:
        return node.operands[0], True
    return None


def _swaps_last_axes(node: Node) -> bool:
    """True when `node` is a transpose of its operand's last two axes."""
    if node.op != "transpose" or node.is_input:
        return False
    permutation = list(node.attrs["permutation"])
    rank = len(permutation)
    return rank >= 2 and permutation == list(range(rank - 2)) + [rank - 1, rank - 2]


class LibraryProduct(NamedTuple):
    """A group a library call computes: its matmul, its result (the matmul,
    or the matmul plus a bias) and the call."""

    matmul: Node
    result: Node
    call: LibraryCall


def _strip_casts(node: Node) -> Node:
    while node.op == "cast" and not node.is_input:
        node = node.operands[0]
    return node


def _row_bias(node: Node, n: int) -> Node | None:
    """The kernel input `node` reads when it is n elements added to every
    row of a product (shape [n], or ones then n, or a broadcast of such an
    input); None otherwise."""
    while node.op in ("reshape", "broadcast_to", "cast") and not node.is_input:
        node = node.operands[0]
    if not node.is_input or node.shape[-1:] != (n,) or any(d != 1 for d in node.shape[:-1]):
        return None
    return node


def _biased_sum(node: Node) -> tuple[Node, Node, Node] | None:
    """(matmul, sum, the bias input) where `node` is a 2-d matmul plus a
    bias of its rows in the matmul's shape and element type: the sum
    itself, or the sum under the casts kg-decompose's promotion puts around
    a half-float one (exact on the way in). None for any other node."""
    total = _strip_casts(node)
    if total.op != "add" or len(total.operands) != 2:
        return None
    terms = [_strip_casts(o) for o in total.operands]
    products = [t for t in terms if t.op == "matmul"]
    if len(products) != 1 or len(products[0].shape) != 2 or \
            node.shape != products[0].shape or node.element != products[0].element:
        return None
    (matmul,) = products
    (addend,) = [o for o, t in zip(total.operands, terms) if t is not matmul]
    bias = _row_bias(addend, matmul.shape[-1])
    if bias is None:
        return None
    return matmul, total, bias


def bare_matmul(order: Sequence[Node]) -> LibraryProduct | None:
    """The product of a group that is one kg.matmul of inputs (or of inputs
    whose last two axes are swapped) of a type the library takes, with a
    bias of its element type added to its rows or not, and its call; None
    for any other group."""
    computed = [n for n in order if not n.is_input]
    matmuls = [n for n in computed if n.op == "matmul"]
    if len(matmuls) != 1:
        return None
    matmul = matmuls[0]
    a, b = (_operand(o) for o in matmul.operands)
    if a is None or b is None:
        return None
    elements = {o.element for o in matmul.operands}
    if len(elements) != 1 or next(iter(elements)) not in ELEMENTS:
        return None
    (element,) = elements
    # A half-float product written as f32 (torch's `out_dtype`): 2-d, as
    # torch.mm takes it.
    widened = matmul.element == "f32" and element in WIDE_RESULT_ELEMENTS
    if matmul.element != element and not (widened and len(matmul.shape) == 2):
        return None
    if matmul.attrs.get("precision") not in (None, "ieee"):
        return None
    views = {id(o) for o in matmul.operands if not o.is_input}
    rest = [n for n in computed if n is not matmul and id(n) not in views]
    call = LibraryCall("matmul", (a[0].input_index, b[0].input_index), a[1], b[1])
    # A reshape of the result (a row-major tensor viewed in another shape)
    # is the same buffer: the call writes it in the product's shape.
    result = value = computed[-1]
    reshapes = set()
    while value.op == "reshape":
        reshapes.add(id(value))
        value = value.operands[0]
    rest = [n for n in rest if id(n) not in reshapes]
    if value is matmul:
        return LibraryProduct(matmul, result, call) if not rest else None
    if widened:
        return None  # torch's addmm adds a bias of the operands' type
    # torch.addmm's bias: 2-d operands, the sum of the product's element type.
    found = _biased_sum(value)
    if found is None or found[0] is not matmul:
        return None
    _, total, bias = found
    if bias.element != matmul.element:
        return None
    allowed = {id(n) for n in topological([value])} - {id(n) for n in topological([matmul])}
    if any(id(n) not in allowed for n in rest) or \
            any(n.op not in ("cast", "add", "reshape", "broadcast_to") for n in rest):
        return None
    return LibraryProduct(matmul, result, dataclasses.replace(call, bias=bias.input_index))


# What `library_kernels(...)` set for the code it runs; None: the environment.
_CHOSEN: contextvars.ContextVar[bool | None] = contextvars.ContextVar("library_kernels",
                                                                     default=None)


def library_kernels_enabled() -> bool:
    """Whether kgc may choose library kernels itself: as `library_kernels`
    set it around the caller, else off where the environment says
    `KGC_LIBRARY_KERNELS=0`."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip().lower() not in (
        "0", "false", "off", "no")


@contextlib.contextmanager
def library_kernels(enabled: bool | None):
    """Within the block, kgc chooses library kernels by its rule (True) or
    never (False); None leaves it to the environment
    (`kgc.compile(..., library_kernels=...)` uses it)."""
    token = _CHOSEN.set(enabled)
    try:
        yield
    finally:
        _CHOSEN.reset(token)


def prefers_library(m: int, n: int, k: int, element: str, target: Target | None = None,
                    batch: int = 1) -> bool:
    """kgc's rule: the GPU's BLAS for a bare matmul of at least 128 rows
    and 256 columns and k steps (see the module docstring for the
    measurements); and for one of more than SKINNY_ROWS rows, f16 or bf16,
    over at least DEFAULT_MIN_BYTES of weights, unless kgc's matmul streams
    them in one wave of wide tiles on `target` (`one_wave_columns`; None:
    kgc's default target)."""
    if element not in ELEMENTS or n < MIN_COLUMNS or k < MIN_DEPTH:
        return False
    if m >= MIN_ROWS:
        return True
    # H200, 20, 40 and 80 rows against the (n, k) of six projections of
    # 8 to 32 MiB: cuBLAS within 4% of the best of 60 Triton configs but
    # for one (40 x 3072 -> 3072, 10%), where kgc's heuristic tiles took
    # up to 1.75x (benchmarks/NOTES.md, stop 49). Below it one wave of
    # Triton tiles matched cuBLAS; above SKINNY_ROWS the split-K kernels
    # did not.
    extents = {"m": m, "n": n, "k": k}
    return (element in WIDE_ROW_ELEMENTS and m > SKINNY_ROWS
            and weight_bytes(extents, element) >= DEFAULT_MIN_BYTES
            and one_wave_columns(m, extents, batch, element, target_for(target)) is None)


def _measured_faster(table: TunedTable, matmul: Node, m: int, n: int, k: int) -> bool:
    """Whether the tuned-defaults table says the library call beats kgc's
    Triton matmul on this bare product: a `decisive` library entry within
    LIBRARY_ENTRY_RADIUS of it, nearer than any Triton entry (decisive or
    not: it says Triton won there). The search
    records, per kernel kgc planned as a Triton matmul, the fastest config
    it timed, the library call among them (`kgc.bench.tune_defaults`);
    below kgc's rule's 128 rows cuBLAS wins on some weights and not others
    (16 x 4096 -> 6144: 17.0 us against 18.6; 16 x 4096 -> 4096: 13.7
    against Triton's 12.3; H200, benchmarks/NOTES.md stop 38), which no row
    count alone tells apart."""
    key = TableKey(matmul.operands[0].element, "",
                   {"batch": product(matmul.shape[:-2]), "m": m, "n": n, "k": k})
    call = table.nearest(KIND, key)
    if call is None or not call.decisive:
        return False
    distance = log_distance(call.features, key.features)
    if distance > LIBRARY_ENTRY_RADIUS:
        return False
    triton = table.nearest(MatmulSchedule.kind, key)
    return triton is None or distance < log_distance(triton.features, key.features)


# How far (log2 units over batch, m, n, k) a library entry of the table
# speaks for a product: one doubling. Which kernel cuBLAS runs changes from
# shape to shape, so its lead does not carry as a Triton config does: the
# library entry of 16 x 4096 -> 6144 served 8 x 4096 -> 11008 (1.3 away) at
# 26.4 us, where a Triton matmul took 24.3; one of 64 x 4096 -> 4096 served
# 32 rows at 16.2 against Triton's 13.6 (H200, benchmarks/NOTES.md stop 48).
LIBRARY_ENTRY_RADIUS = 1.0


class LibraryMatmulSchedule(Schedule):
    kind = KIND
    config_class = LibraryMatmulConfig
    choice_knobs = ("library",)
    fusion_rule = "library-call"

    def fusion_pattern(self, node, users, escapes):
        # What a call takes beside its matmul; whether the group is a
        # library call is the plan's to say. A matmul's operands that swap
        # their last two axes: the call reads them in place (transpose_a,
        # transpose_b), where a kernel that computes the value would
        # otherwise store it a second time, transposed (a weight's cast
        # under autocast, stored for the backward too).
        if node.op == "matmul":
            swapped = [o for o in node.operands if _swaps_last_axes(o) and not o.is_input]
            return frozenset(id(n) for n in (node, *swapped)) if swapped else None
        # The end of a bias added to a 2-d matmul's rows: the sum, or the
        # cast of it back to the product's element type. The pattern is the
        # matmul, the sum and the casts between, the views of the bias
        # input and the matmul's swapped operands.
        found = _biased_sum(node)
        if found is None:
            return None
        matmul, total, _ = found
        # Walked down from the end along the chain only (the graph above
        # the matmul may be the whole model's).
        pattern = [matmul, total]
        for start in (node, *total.operands):
            while start is not total and start is not matmul and not start.is_input:
                pattern.append(start)
                start = start.operands[0]
        pattern += [o for o in matmul.operands if _swaps_last_axes(o) and not o.is_input]
        return frozenset(id(n) for n in pattern)

    def gathers(self, plan):
        # The bias is gathered for the call; where a Triton matmul is made
        # of the group, greedy fusion takes the bias as its epilogue anyway.
        return plan.kind == KIND

    def match(self, order):
        return bare_matmul(order) is not None

    def takes(self, outputs, order, knobs, target, table=None):
        # A transposed operand that the kernel returns too is not a call's.
        found = bare_matmul(order)
        if found is None or list(outputs) != [found.result]:
            return False
        # The kernel's own choice first; a Triton matmul knob set by a user
        # or the search is a choice of Triton.
        chosen = knobs.get("library")
        if chosen is not None:
            return bool(chosen)
        if any(knobs.get(name) is not None for name in MatmulConfig.knobs()):
            return False
        if not library_kernels_enabled():
            return False
        matmul = found.matmul
        m, n, k = matmul.shape[-2], matmul.shape[-1], matmul.operands[0].shape[-1]
        element = matmul.operands[0].element  # the product's, whatever it writes
        if prefers_library(m, n, k, element, target, product(matmul.shape[:-2])):
            return True
        return table is not None and _measured_faster(table, matmul, m, n, k)

    def plan(self, outputs, order, config, kernel, target):
        found = bare_matmul(order)
        if found is None or len(outputs) != 1 or outputs[0] is not found.result:
            raise Unplannable("a library kernel computes one bare matmul")
        if config.library is False:
            raise Unplannable("the kernel's knob library = false asks for a Triton matmul")
        matmul, _, call = found
        m, n = matmul.shape[-2], matmul.shape[-1]
        k = matmul.operands[0].shape[-1]
        extents = tuple(matmul.shape[:-2]) + (m, k, n)
        return LibraryMatmulPlan(list(outputs), extents, call, LibraryMatmulConfig(library=True),
                                 {"m": m, "n": n, "k": k})

    def generate(self, plan, builder):
        # No tile program: the kernel is a call.
        return None

    def tiled_form(self, plan):
        return TiledForm(attributes={LIBRARY_CALL_ATTRIBUTE: plan.call.to_attribute()})

    def search_space(self, plan, element, precision, target, runs_on, plannable):
        # The library call, then the Triton matmul's space and seeds for the
        # same kernel, so that the search times both.
        library = [plan.config]
        triton = plannable(MatmulConfig())
        if triton is None or triton.schedule != MatmulSchedule.kind:
            return library, library
        space, seeds = MatmulSchedule().search_space(triton, element, precision, target,
                                                     runs_on, plannable)
        return library + [triton.config] + space, library + seeds
