"""Building the tuned-defaults table on a GPU, and checking the default compile against the search.

    python -m kgc.bench.tune_defaults build --out sm_90.json --budget-s 3600
    python -m kgc.bench.tune_defaults build --out sm_90.json --graphs PARTITIONS/*.mlir
    python -m kgc.bench.tune_defaults check --table sm_90.json --held-out shapes.json
    python -m kgc.bench.tune_defaults merge --out sm_90.json part-0.json part-1.json
    python -m kgc.bench.tune_defaults corpus        # the corpus, one shape a line

(`kgc tune-defaults ...` is the same command.)

`build` runs superoptimize (`kgc.search`) with kgc's heuristics alone as
the default (`KGC_TUNED_DEFAULTS=off`) on each shape of the corpus
(`corpus()`: matmuls with M from 1 to 8192 against the N, K of Llama-3-8B
and of the model suite's small models, RMSNorm folded into a matmul, gated
MLPs, LoRA, attention prefill and decode, softmax, norms and the sums across
token rows of norm weights' gradients), at most
`--shape-budget-s` per shape and `--budget-s` in all, and records for each
kernel of kg-fuse's default partition the fastest config the search timed,
its time and the heuristic config's time (`kgc.tuned_defaults.Entry`). The
table is rewritten after every shape (to a temporary file, then renamed),
so that a run cut short keeps what it measured; a later run with the same
`--out` keeps those entries and skips their shapes. The table records the
GPU, Triton's version, the kgc commit and the date. Configs are written so
that they carry over to other shapes: a tile that covered its axis is
written as the power of two that covers it. `--graphs` measures kgc graph
files the same way, a model's captured partitions
(`benchmarks/capture_partitions.py`): their kernels carry the prologues and
epilogues of real models (two norms folded into a projection, a residual
sum stored from the k loop) that no corpus shape has. `--reports DIR` keeps
each search's report, every candidate's config and time.

`check` runs superoptimize with the table in use (`--table`, or the one
kgc reads by default) on the workloads of `kgc bench` and on the shapes of
`--held-out` (a JSON list of shapes, as `corpus` prints them), then checks
and times in one trial, on fresh inputs, the search's result, kgc's
default compile with the table and with the heuristics alone
(`KGC_TUNED_DEFAULTS=off`), and prints per shape the three times and the
default's over the search's; under a shape whose default is more than
`--tolerance` (5%) slower, the search's choice (partition and each
kernel's knobs). It exits 1 when a shape's default is that much slower.

`--shard I/N` (build and check) takes every N-th shape from the I-th, so
that N processes, one per GPU of a host (`CUDA_VISIBLE_DEVICES`), share
the corpus; `merge` joins their tables into one (all of one target and
GPU model; where two measured the same key, the faster entry stays).

Both need a CUDA device; without one they exit 1 saying so.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import sys
import time
from typing import Iterable, Sequence

from kgc.diagnostics import KgcError

# Kinds of shapes, each a kgc graph of one computation.
MATMUL, RMSNORM_MATMUL, GATED_MLP, LORA = "matmul", "rmsnorm-matmul", "gated-mlp", "lora"
ATTENTION, DECODE = "attention", "attention-decode"
SOFTMAX, RMS_NORM, LAYER_NORM = "softmax", "rms-norm", "layer-norm"
# A norm weight's gradient in a training step's backward: the token rows of
# float(dy) * float(x) * (1/rms of the row) summed, the columns kept.
NORM_WEIGHT_GRADIENT = "norm-weight-gradient"
# The dims each kind takes, in order.
DIMS = {
    MATMUL: ("m", "n", "k"), RMSNORM_MATMUL: ("m", "n", "k"), GATED_MLP: ("m", "n", "k"),
    LORA: ("m", "n", "k", "rank"),
    # Heads, queries and keys per head, head dim (prefill: one key/value
    # head per query head; decode: one query, `group` query heads per
    # key/value head, as in kgc bench's gqa-decode).
    ATTENTION: ("heads", "queries", "keys", "dim"), DECODE: ("kv_heads", "group", "keys", "dim"),
    SOFTMAX: ("rows", "columns"), RMS_NORM: ("rows", "columns"), LAYER_NORM: ("rows", "columns"),
    NORM_WEIGHT_GRADIENT: ("rows", "columns"),
}
DTYPES = ("f16", "bf16", "f32")


@dataclasses.dataclass(frozen=True)
class Shape:
    """One computation of the corpus or the held-out set: its kind, element
    type and dims (see DIMS)."""

    kind: str
    dtype: str
    dims: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, kind: str, dtype: str = "f16", **dims: int) -> "Shape":
        return cls.from_dict({"kind": kind, "dtype": dtype, **dims})

    @classmethod
    def from_dict(cls, data) -> "Shape":
        if not isinstance(data, dict):
            raise KgcError(f"a shape is an object of \"kind\", \"dtype\" and dims, got {data!r}")
        data = dict(data)
        kind, dtype = data.pop("kind", None), data.pop("dtype", "f16")
        if kind not in DIMS:
            raise KgcError(f"shape kind {kind!r} is not one of {', '.join(DIMS)}")
        if dtype not in DTYPES:
            raise KgcError(f"shape {kind}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        if set(data) != set(DIMS[kind]) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in data.values()):
            raise KgcError(f"shape {kind} takes the positive integer dims "
                           f"{', '.join(DIMS[kind])}; got {data}")
        return cls(kind, dtype, tuple((name, data[name]) for name in DIMS[kind]))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "dtype": self.dtype, **dict(self.dims)}

    @property
    def name(self) -> str:
        return f"{self.kind} {self.dtype} " + " ".join(f"{k}={v}" for k, v in self.dims)

    def build(self):
        """The computation as a kgc graph."""
        from kgc.api import KernelGraph

        d = dict(self.dims)
        g = KernelGraph(self.kind.replace("-", "_"))
        t = self.dtype
        if self.kind in (MATMUL, RMSNORM_MATMUL, GATED_MLP, LORA):
            m, n, k = d["m"], d["n"], d["k"]
            x = g.input("x", (m, k), t)
            if self.kind == MATMUL:
                g.output(g.matmul(x, g.input("w", (k, n), t)))
            elif self.kind == RMSNORM_MATMUL:
                gamma = g.input("gamma", (k,), t)
                g.output(g.matmul(g.rms_norm(x, gamma, eps=1e-6), g.input("w", (k, n), t)))
            elif self.kind == GATED_MLP:
                w1, w2 = g.input("w1", (k, n), t), g.input("w2", (k, n), t)
                g.output(g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2)))
            else:
                w = g.input("w", (k, n), t)
                a, b = g.input("a", (k, d["rank"]), t), g.input("b", (d["rank"], n), t)
                g.output(g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b)))
        elif self.kind in (ATTENTION, DECODE):
            # Decoding: a key/value head's group of query heads, one query
            # each, as the rows of its attention.
            heads, rows = ((d["heads"], d["queries"]) if self.kind == ATTENTION
                           else (d["kv_heads"], d["group"]))
            keys, dim = d["keys"], d["dim"]
            q = g.input("q", (heads, rows, dim), t)
            k = g.input("k", (heads, keys, dim), t)
            v = g.input("v", (heads, keys, dim), t)
            scores = g.mul(g.matmul(q, g.transpose(k, (0, 2, 1))), 1 / math.sqrt(dim))
            g.output(g.matmul(g.softmax(scores, dim=-1), v))
        else:
            rows, columns = d["rows"], d["columns"]
            x = g.input("x", (rows, columns), t)
            if self.kind == SOFTMAX:
                g.output(g.softmax(x, dim=-1))
            elif self.kind == NORM_WEIGHT_GRADIENT:
                dy = g.input("dy", (rows, columns), t)
                scale = g.input("inverse_rms", (rows, 1), "f32")
                product = g.mul(g.mul(g.cast(dy, "f32"), g.cast(x, "f32")), scale)
                g.output(g.sum(product, (0,)))
            elif self.kind == RMS_NORM:
                g.output(g.rms_norm(x, g.input("gamma", (columns,), t), eps=1e-6))
            else:
                g.output(g.layer_norm(x, g.input("weight", (columns,), t),
                                      g.input("bias", (columns,), t), eps=1e-5))
        return g


@dataclasses.dataclass(frozen=True)
class GraphFile:
    """A kgc graph read from an `.mlir` file (a partition that the torch
    frontend captured from a model, `benchmarks/capture_partitions.py`),
    measured as a whole like a shape: its kernels are what a model runs,
    with the prologues and epilogues no corpus shape has."""

    path: str

    @property
    def name(self) -> str:
        return f"graph {pathlib.Path(self.path).name}"

    def build(self) -> str:
        return self.path


def read_graphs(paths: Sequence[str]) -> list[GraphFile]:
    """The `.mlir` files named, each parsed now so that a bad one fails
    before any GPU work (the error names the file, line and column)."""
    from kgc.parsing import canonical_source

    graphs = []
    for path in paths:
        if not pathlib.Path(path).is_file() or not path.endswith(".mlir"):
            raise KgcError(f"{path}: not an .mlir file")
        canonical_source(path, None)
        graphs.append(GraphFile(path))
    return graphs


# Llama-3-8B's projections as (N, K): q/k/v fused, o, gate and up fused,
# down, the LM head; and the model suite's small models (hidden 512,
# intermediate 1376, 8 heads of 64, 4 key/value heads, vocabulary 2048).
LLAMA3_8B = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (32000, 4096))
SMALL_MODEL = ((1024, 512), (512, 512), (2752, 512), (512, 1376), (2048, 512))
ROWS = (1, 16, 64, 128, 512, 2048, 8192)


def corpus() -> list[Shape]:
    """The shapes the table is built from, the most used first (a run cut
    short by its budget has measured those)."""
    shapes: list[Shape] = []
    for m in ROWS:
        for n, k in LLAMA3_8B + SMALL_MODEL:
            shapes.append(Shape.of(MATMUL, m=m, n=n, k=k))
    for m in (1, 16, 64, 512, 2048):
        for n, k in ((6144, 4096), (28672, 4096), (1024, 512), (2752, 512)):
            shapes.append(Shape.of(RMSNORM_MATMUL, m=m, n=n, k=k))
    for m in (1, 8, 16, 64, 512):
        for n, k in ((14336, 4096), (1376, 512)):
            shapes.append(Shape.of(GATED_MLP, m=m, n=n, k=k))
    for m in (1, 16, 64, 512):
        for n, k in ((4096, 4096), (512, 512)):
            shapes.append(Shape.of(LORA, m=m, n=n, k=k, rank=16))
    for tokens in (128, 512, 2048):
        shapes.append(Shape.of(ATTENTION, heads=32, queries=tokens, keys=tokens, dim=128))
        shapes.append(Shape.of(ATTENTION, heads=8, queries=tokens, keys=tokens, dim=64))
    # Prefill of other head counts and of lengths that are not powers of
    # two, where the query tiles' waves and the last key block's fill
    # differ from the shapes above: CLIP's text (32 x 77), ViT-B (12 x 197),
    # BERT-base (12 x 512), Whisper's encoder (20 x 1500), and prompts of
    # 300 to 1000 tokens.
    for heads, tokens, dim in ((32, 77, 64), (12, 197, 64), (16, 384, 64), (12, 512, 64),
                               (8, 1000, 64), (20, 1500, 64), (8, 300, 128), (32, 300, 128)):
        shapes.append(Shape.of(ATTENTION, heads=heads, queries=tokens, keys=tokens, dim=dim))
    for keys in (512, 4096, 16384):
        shapes.append(Shape.of(DECODE, kv_heads=8, group=4, keys=keys, dim=128))
        shapes.append(Shape.of(DECODE, kv_heads=4, group=2, keys=keys, dim=64))
    for rows in (16, 512, 8192):
        for columns in (512, 4096):
            for kind in (RMS_NORM, LAYER_NORM, SOFTMAX):
                shapes.append(Shape.of(kind, rows=rows, columns=columns))
    for rows in (16, 512, 4096):
        shapes.append(Shape.of(SOFTMAX, rows=rows, columns=32000))
    # The backward's reductions across the token rows (bf16 autocast).
    for rows in (512, 2048, 8192):
        for columns in (512, 4096):
            shapes.append(Shape.of(NORM_WEIGHT_GRADIENT, "bf16", rows=rows, columns=columns))
    # bf16 GEMMs of the most common widths.
    for m in ROWS:
        shapes.append(Shape.of(MATMUL, "bf16", m=m, n=4096, k=4096))
        shapes.append(Shape.of(MATMUL, "bf16", m=m, n=14336, k=4096))
    return list(dict.fromkeys(shapes))


def read_shapes(path: str | os.PathLike) -> list[Shape]:
    """The shapes of a JSON file: a list of shape objects (`Shape.to_dict`)."""
    try:
        data = json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise KgcError(f"{path}: cannot read a list of shapes: {error}") from None
    if not isinstance(data, list):
        raise KgcError(f"{path}: expected a JSON list of shapes")
    shapes = []
    for index, item in enumerate(data):
        try:
            shapes.append(Shape.from_dict(item))
        except KgcError as error:
            raise KgcError(f"{path}: shape {index}: {error.diagnostics[0].message}") from None
    return shapes


@dataclasses.dataclass(frozen=True)
class Shard:
    """The `index`-th of `count` interleaved parts of a list of shapes
    (`I/N` on the command line): every shape whose position is `index`
    modulo `count`. Interleaved, so that each part holds its share of the
    corpus's most used shapes, which come first."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> "Shard":
        index, slash, count = text.partition("/")
        try:
            shard = cls(int(index), int(count)) if slash else None
        except ValueError:
            shard = None
        if shard is None or shard.count < 1 or not 0 <= shard.index < shard.count:
            raise KgcError(f"--shard {text!r}: expected I/N with 0 <= I < N, such as 0/2")
        return shard

    def of(self, items: Sequence) -> list:
        return [item for position, item in enumerate(items)
                if position % self.count == self.index]


# -- building ------------------------------------------------------------------------

def portable(config, extents: dict):
    """`config` (canonical for a kernel of `extents`) with each tile that
    covers its axis written as the power of two that covers it, the same
    kernel here and a legal tile for a kernel of another extent."""
    from kgc.tiling.index_maps import next_power_of_two

    changes = {}
    for knob, axis in type(config).TILE_AXES.items():
        value = getattr(config, knob)
        if value is not None and extents.get(axis) is not None and value >= extents[axis]:
            changes[knob] = next_power_of_two(value)
    return dataclasses.replace(config, **changes) if changes else config


def default_kernels(shape: Shape, target: int):
    """(signature, table key, kind, knob extents) of each kernel of the
    default partition of `shape`'s graph, planned with kgc's heuristics for
    sm_<target>."""
    from mlir import ir

    from kgc.parsing import canonical_source
    from kgc.passes.tile import plan_kernel
    from kgc.pipeline.pipeline import Pipeline
    from kgc.pipeline.stages import fusion_pipeline_text
    from kgc.search import kernels as kernel_forms
    from kgc.targets import target_for
    from kgc.tiling.kernel_ops import kernels_in
    from kgc.tiling.registry import schedules

    text, _, _ = canonical_source(shape.build(), None)
    made = []
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(text).operation
        Pipeline.parse(fusion_pipeline_text("", target)).run(module)
        for kernel in kernels_in(module):
            plan, _ = plan_kernel(kernel, target=target_for(target), table=None)
            key = schedules()[plan.schedule].table_key(plan)
            made.append((kernel_forms.signature(kernel), key, plan.schedule,
                         dict(plan.knob_extents)))
    return made


def measure_shape(shape: Shape, target: int, budget_s: float, effort: str, verbose: bool):
    """The table's entries for `shape` (`entries_from_report`) and the
    search's report (None where no kernel of the default partition has a
    table key, and nothing was searched): superoptimize with kgc's
    heuristics as the default."""
    from kgc.search.tuner import superoptimize

    with tuned_defaults_setting("off"):
        kernels = default_kernels(shape, target)
        # Kernels the table has nothing for (a library call kgc's rule
        # chose): no search, whose results would go nowhere.
        if all(key is None for _, key, _, _ in kernels):
            return [], None
        graph = superoptimize(shape.build(), target=target, budget_s=budget_s, effort=effort,
                              cache=False, verbose=verbose)
    return entries_from_report(shape, kernels, graph.report), graph.report


def entries_from_report(shape: Shape, kernels, report) -> list:
    """Per kernel of the default partition (`default_kernels`), the fastest
    config the search's `report` timed for it (written `portable`), its
    time and the heuristic config's time: where the heuristic's config was
    the fastest, that config at its time, an entry that is not `decisive`
    (it replaces no heuristic, and tells which kind of kernel won)."""
    from kgc.tiling.config import KernelConfig
    from kgc.tuned_defaults import Entry

    entries = []
    for signature, key, _, extents in kernels:
        if key is None:
            continue
        rows = [row for row in report.rows if row.signature == signature
                and row.status == "timed" and row.time_us is not None]
        defaults = [row for row in rows if row.default]
        # A search that timed nothing but the heuristic's config (its budget
        # spent) says nothing of which config wins: no entry, so that nearby
        # shapes keep their own heuristics.
        if len(rows) < 2 or not defaults:
            continue
        heuristic = min(defaults, key=lambda row: row.time_us)
        best = min(rows, key=lambda row: row.time_us)
        # Where the heuristic's config was the fastest, it is the entry, at
        # the heuristic's time: not decisive, so that it never replaces the
        # heuristic's own choice on nearby shapes (an attention entry of the
        # heuristic's config at 512 queries took 12.96 us at 300 queries
        # against the heuristic's 10.13; H200), while it still says that a
        # Triton kernel beat the library call there.
        if best.time_us >= heuristic.time_us:
            best = heuristic
        config = portable(KernelConfig.from_dict(best.config), extents)
        # Keyed as the kernel kgc planned, of the kind of schedule that won
        # (a library call where it beat the Triton matmul).
        entries.append(Entry(config.kind, key.element, key.variant, dict(key.features), config,
                             round(best.time_us, 3), round(heuristic.time_us, 3), shape.name))
    return entries


@contextlib.contextmanager
def tuned_defaults_setting(value: str | None):
    """KGC_TUNED_DEFAULTS set to `value` (None: unset) for the block."""
    from kgc.tuned_defaults import ENVIRONMENT

    before = os.environ.get(ENVIRONMENT)
    if value is None:
        os.environ.pop(ENVIRONMENT, None)
    else:
        os.environ[ENVIRONMENT] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENVIRONMENT, None)
        else:
            os.environ[ENVIRONMENT] = before


def _error_summary(error: Exception) -> str:
    """An error on one line: its first line, and where a worker's traceback
    follows it, that traceback's last line (the exception that ended it)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def _entry_key(entry) -> tuple:
    """What one kernel's entry is: its element, variant and shape. Not its
    kind: a library call and a Triton matmul measured on one kernel are two
    answers to one question, of which a table keeps the faster."""
    return entry.element, entry.variant, tuple(sorted(entry.features.items()))


def _keep_faster(entries: dict, entry) -> None:
    key = _entry_key(entry)
    if key not in entries or entry.time_us < entries[key].time_us:
        entries[key] = entry


def write_table(path: pathlib.Path, table) -> None:
    """`table` written to `path` through a temporary file and a rename: an
    interrupted write leaves the previous table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(table.to_json())
    os.replace(temporary, path)


def build(shapes: Sequence[Shape | GraphFile], out: pathlib.Path, budget_s: float,
          shape_budget_s: float, effort: str = "low", verbose: bool = False, log=print,
          reports: pathlib.Path | None = None):
    """Measures `shapes` on the current GPU into the table at `out` (see the
    module docstring); returns the table. With `reports`, each shape's
    search report is written there as JSON (every candidate's config, time
    or reason), the evidence behind its entries."""
    import torch
    import triton

    from kgc.bench import provenance
    from kgc.tuned_defaults import TunedTable, load_table

    major, minor = torch.cuda.get_device_capability()
    target = major * 10 + minor
    record = provenance.collect()
    header = dict(target=f"sm_{target}", gpu=torch.cuda.get_device_name(),
                  triton=triton.__version__,
                  kgc_commit=(record["commit"] or "unknown")
                  + ("-dirty" if record["dirty"] else ""),
                  date=record["date"])
    entries: dict[tuple, object] = {}
    done: set[str] = set()
    if out.exists():
        earlier = load_table(out)
        if (earlier.target, earlier.gpu) != (header["target"], header["gpu"]):
            raise KgcError(f"{out} is a table of {earlier.gpu} ({earlier.target}); this GPU is "
                           f"{header['gpu']} ({header['target']}): give another --out")
        entries = {_entry_key(e): e for e in earlier.entries}
        done = {e.workload for e in earlier.entries}
    started = time.monotonic()
    table = TunedTable(entries=tuple(entries.values()), **header)
    for index, shape in enumerate(shapes):
        if shape.name in done:
            continue
        left = budget_s - (time.monotonic() - started)
        if left <= 0:
            log(f"budget of {budget_s:g} s spent; {len(shapes) - index} shape(s) not measured")
            break
        try:
            measured, report = measure_shape(shape, target, min(shape_budget_s, left), effort,
                                             verbose)
        except Exception as error:  # noqa: BLE001 - one shape's failure is its line, not the run's
            log(f"[{index + 1}/{len(shapes)}] {shape.name}: failed: {_error_summary(error)}")
            continue
        for entry in measured:
            _keep_faster(entries, entry)
        table = TunedTable(entries=tuple(entries.values()), **header)
        write_table(out, table)
        if reports is not None and report is not None:
            reports.mkdir(parents=True, exist_ok=True)
            (reports / f"{index:03d}.json").write_text(json.dumps(
                {"shape": shape.name, **report.to_dict()}, indent=1))
        summary = ", ".join(f"{e.time_us:.2f} us (heuristic {e.heuristic_us:.2f})"
                            for e in measured) or ("no entry" if report is not None else
                                                   "not searched: no kernel the table keys")
        log(f"[{index + 1}/{len(shapes)}] {shape.name}: {summary}")
    return table


def merge(paths: Sequence[str | os.PathLike], out: pathlib.Path):
    """One table of the tables at `paths` (the parts of a sharded build),
    written to `out`: all must be of one target, GPU model and Triton
    version (a KgcError names the first that is not); where two hold an
    entry of the same key, the faster stays. Its commit and date are the
    parts' (their commits joined where they differ, the latest date)."""
    from kgc.tuned_defaults import TunedTable, load_table

    if not paths:
        raise KgcError("merge: give the tables to merge")
    tables = [load_table(path) for path in paths]
    first = tables[0]
    for path, table in zip(paths, tables):
        for field in ("target", "gpu", "triton"):
            if getattr(table, field) != getattr(first, field):
                raise KgcError(f"merge: {path} is a table of {field} {getattr(table, field)!r}, "
                               f"{paths[0]} of {getattr(first, field)!r}: one table holds one "
                               f"{field}")
    entries: dict[tuple, object] = {}
    for table in tables:
        for entry in table.entries:
            _keep_faster(entries, entry)
    commits = list(dict.fromkeys(table.kgc_commit for table in tables))
    merged = TunedTable(target=first.target, gpu=first.gpu, triton=first.triton,
                        kgc_commit="+".join(commits), date=max(t.date for t in tables),
                        entries=tuple(entries.values()))
    write_table(out, merged)
    return merged


# -- checking ------------------------------------------------------------------------

@dataclasses.dataclass
class Comparison:
    name: str
    default_us: float | None  # kgc's default compile, the table in use
    searched_us: float | None  # superoptimize's result
    heuristic_us: float | None = None  # the default compile with the heuristics alone
    note: str = ""
    report: object = None  # the search's SearchReport: what it tried and chose
    chosen: object = None  # the search's GraphConfig (None: kgc's default compile)

    @property
    def ratio(self) -> float | None:
        """The default compile's time over the search's result."""
        if self.default_us is None or self.searched_us is None:
            return None
        return self.default_us / self.searched_us


def compare(name: str, graph, budget_s: float, effort: str, verbose: bool) -> Comparison:
    """kgc's default compile (with the tuned-defaults table in force, and
    with the heuristics alone) against superoptimize's result on `graph`,
    the three checked and timed side by side in one trial on fresh inputs,
    as the search times its last candidates."""
    from mlir import ir

    from kgc.parsing import canonical_source
    from kgc.pipeline.compiler import compile_module
    from kgc.search.profile import TIMED, KernelTrial, TrialSettings, run_trial
    from kgc.search.tuner import superoptimize

    try:
        searched = superoptimize(graph, budget_s=budget_s, effort=effort, cache=False,
                                 verbose=verbose)
        text, function, _ = canonical_source(graph, None)
        candidates = [("searched", searched.module)]
        for label, setting in (("default", None), ("heuristic", "off")):
            with tuned_defaults_setting(setting if setting else
                                        os.environ.get("KGC_TUNED_DEFAULTS")):
                with ir.Context() as context:
                    context.allow_unregistered_dialects = True
                    module = ir.Module.parse(text).operation
                    candidates.append((label, compile_module(
                        module, target=searched.module.target)))
        outcomes = run_trial(KernelTrial("graph", function, text, candidates), TrialSettings())
    except KgcError as error:
        return Comparison(name, None, None, note=_error_summary(error))
    times = {o.candidate: o.time_us if o.status == TIMED else None for o in outcomes}
    notes = "; ".join(f"{o.candidate} {o.status}: {o.reason}" for o in outcomes
                      if o.status != TIMED)
    # superoptimize keeps the default where its own choice is slower: the
    # search's result is the faster of the two.
    best = [t for t in (times["searched"], times["default"]) if t is not None]
    return Comparison(name, times["default"], min(best) if best else None, times["heuristic"],
                      notes, searched.report, searched.config)


def describe_choice(config) -> str:
    """The search's choice (a GraphConfig), one line: its partition and each
    kernel's knobs; "kgc's default compile" where it chose nothing else."""
    if config is None or (config.partition is None and not config.kernels):
        return "kgc's default compile"
    parts = [f"partition {config.partition}"] if config.partition is not None else []
    for kernel, knobs in sorted(config.kernels.items()):
        given = " ".join(f"{k}={v}" for k, v in knobs.to_dict().items() if k != "kind")
        parts.append(f"{kernel}: {knobs.kind} {given}")
    return "; ".join(parts)


def check(shapes: Iterable[tuple[str, object]], table: str | None, budget_s: float,
          effort: str, tolerance: float, verbose: bool = False, log=print,
          reports: pathlib.Path | None = None) -> list[Comparison]:
    """`compare` on each (name, graph), with the tuned-defaults `table`
    (a setting of KGC_TUNED_DEFAULTS; None: the one in force); prints a
    line per shape and returns the comparisons. With `reports`, each
    shape's search report is written there (JSON, and its table as text):
    which config the search chose where the default is slower."""
    results = []
    log(f"{'shape':<60} {'heuristic':>10} {'default':>10} {'searched':>10} {'ratio':>7}")

    def shown(value):
        return f"{value:10.2f}" if value is not None else f"{'-':>10}"

    with tuned_defaults_setting(table if table is not None
                                else os.environ.get("KGC_TUNED_DEFAULTS")):
        for index, (name, graph) in enumerate(shapes):
            result = compare(name, graph, budget_s, effort, verbose)
            results.append(result)
            if reports is not None and result.report is not None:
                _write_report(reports, index, name, result)
            ratio = f"{result.ratio:7.3f}" if result.ratio is not None else f"{'-':>7}"
            flag = "" if result.ratio is not None and result.ratio <= 1 + tolerance else "  over"
            log(f"{name:<60} {shown(result.heuristic_us)} {shown(result.default_us)} "
                f"{shown(result.searched_us)} {ratio}{flag}"
                + (f"  ({result.note})" if result.note else ""))
            if flag and result.searched_us is not None:
                # What the default missed, kept with the line it explains.
                log(f"    searched: {describe_choice(result.chosen)}")
    return results


def _write_report(folder: pathlib.Path, index: int, name: str, result: Comparison) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    report = result.report
    (folder / f"{index:03d}.json").write_text(json.dumps(
        {"shape": name, "default_us": result.default_us, "searched_us": result.searched_us,
         **report.to_dict()}, indent=1))
    partitions = "\n".join(f"  {row['origin']}: {row['time_us']} us, kernels "
                           f"{', '.join(row['kernels'])}" for row in report.partitions)
    (folder / f"{index:03d}.txt").write_text(
        f"{name}\ndefault {result.default_us} us, searched {result.searched_us} us\n"
        f"partitions:\n{partitions}\n{report.table()}\n")


# -- the command line ----------------------------------------------------------------

def _shard_argument(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except KgcError as error:
        raise argparse.ArgumentTypeError(error.diagnostics[0].message) from None


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog,
                                     description="Build kgc's tuned-defaults table on this GPU, "
                                                 "or check the default compile against the "
                                                 "search.")
    actions = parser.add_subparsers(dest="action", required=True)
    build_ = actions.add_parser("build", help="search each shape of the corpus and write the "
                                              "table")
    build_.add_argument("--out", required=True, help="the table file to write (kept and "
                                                     "extended when it exists)")
    build_.add_argument("--budget-s", type=float, default=3600.0,
                        help="seconds for the whole run (default 3600)")
    build_.add_argument("--shape-budget-s", type=float, default=60.0,
                        help="seconds of search per shape (default 60)")
    build_.add_argument("--shapes", help="a JSON list of shapes to measure instead of the "
                                         "corpus")
    build_.add_argument("--graphs", nargs="+", metavar="MLIR",
                        help="kgc graphs (.mlir files, such as a model's captured partitions) "
                             "to measure, after the --shapes if given, instead of the corpus "
                             "if not")
    build_.add_argument("--reports", metavar="DIR",
                        help="write each shape's search report there as JSON")
    build_.add_argument("--effort", choices=("low", "default", "high"), default="default")
    build_.add_argument("--shard", type=_shard_argument, default=Shard(), metavar="I/N",
                        help="measure every N-th shape from the I-th (one process per GPU)")
    build_.add_argument("--verbose", action="store_true", help="the search's progress bars")
    check_ = actions.add_parser("check", help="the default compile against superoptimize on "
                                              "kgc bench's workloads and held-out shapes")
    check_.add_argument("--table", help="the table to use: a file, a folder of sm_<N>.json, "
                                        "on or off (default: what kgc reads)")
    check_.add_argument("--held-out", help="a JSON list of shapes to check besides the "
                                           "workloads")
    check_.add_argument("--graphs", nargs="+", metavar="MLIR",
                        help="kgc graphs (.mlir files) to check besides the workloads")
    check_.add_argument("--workloads", default=None,
                        help="comma-separated kgc bench workloads (default: all; '' for none)")
    check_.add_argument("--budget-s", type=float, default=120.0,
                        help="seconds of search per shape (default 120)")
    check_.add_argument("--effort", choices=("low", "default", "high"), default="default")
    check_.add_argument("--tolerance", type=float, default=0.05,
                        help="how much slower the default may be (default 0.05)")
    check_.add_argument("--shard", type=_shard_argument, default=Shard(), metavar="I/N",
                        help="check every N-th shape from the I-th (one process per GPU)")
    check_.add_argument("--verbose", action="store_true")
    check_.add_argument("--reports", metavar="DIR",
                        help="write each shape's search report there (JSON and a table)")
    merge_ = actions.add_parser("merge", help="join the tables of a sharded build into one")
    merge_.add_argument("--out", required=True, help="the table file to write")
    merge_.add_argument("tables", nargs="+", help="the tables to join")
    actions.add_parser("corpus", help="print the corpus, one JSON shape a line")
    return parser


def main(argv: Sequence[str] | None = None,
         prog: str = "python -m kgc.bench.tune_defaults") -> int:
    """The command line (`kgc tune-defaults` too); the exit status."""
    args = _parser(prog).parse_args(argv)
    try:
        if args.action == "corpus":
            for shape in corpus():
                print(json.dumps(shape.to_dict()))
            return 0
        if args.action == "merge":
            table = merge(args.tables, pathlib.Path(args.out))
            print(f"{args.out}: {len(table.entries)} entries for {table.target} ({table.gpu}) "
                  f"from {len(args.tables)} table(s)")
            return 0
        # What to measure first, so that a bad file fails before any GPU work.
        if args.action == "build":
            # Graphs alone measure only them; with --shapes, those shapes first.
            shapes = (read_shapes(args.shapes) if args.shapes
                      else [] if args.graphs else corpus())
            shapes = args.shard.of(shapes + read_graphs(args.graphs or []))
        else:
            from kgc.bench.workloads import select

            names = None if args.workloads is None else \
                [n.strip() for n in args.workloads.split(",") if n.strip()]
            workloads = select(names, quick=False) if names != [] else []
            graphs = [(f"kgc bench {w.name}", w.build()) for w in workloads]
            if args.held_out:
                graphs += [(s.name, s.build()) for s in read_shapes(args.held_out)]
            if args.graphs:
                graphs += [(g.name, g.build()) for g in read_graphs(args.graphs)]
            graphs = args.shard.of(graphs)
        from kgc.runtime import cuda_available

        if not cuda_available():
            raise KgcError("tune_defaults measures on a GPU: it needs a CUDA device, and torch "
                           "sees none")
        if args.action == "build":
            table = build(shapes, pathlib.Path(args.out), args.budget_s, args.shape_budget_s,
                          args.effort, args.verbose,
                          reports=pathlib.Path(args.reports) if args.reports else None)
            print(f"{args.out}: {len(table.entries)} entries for {table.target} ({table.gpu})")
            return 0
        results = check(graphs, args.table, args.budget_s, args.effort, args.tolerance,
                        args.verbose, reports=pathlib.Path(args.reports) if args.reports
                        else None)
        over = [r for r in results if r.ratio is None or r.ratio > 1 + args.tolerance]
        print(f"{len(results) - len(over)} of {len(results)} within {args.tolerance:.0%} of the "
              f"search")
        return 1 if over else 0
    except KgcError as error:
        print(error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
