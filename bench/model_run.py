"""Running the model suite (`kgc bench --models`): each row of each model
(`kgc.bench.models`) with eager PyTorch, torch.compile, torch.compile with
CUDA graphs and kgc, checked and timed; and its results as a table, JSON
and a chart.

A row's contenders compile `model.forward` as a user would
(`model.forward = torch.compile(model.forward, backend="kgc")`), each from a
fresh Dynamo state, and run the row's call: the forward's logits, or
`generate()`'s tokens and the logits of every step.

Correct means, for kgc's result:
- its logits are as close to a reference as eager's (`kgc.search.verify.
  mismatch`: off by at most twice eager's own error plus a floor of the
  dtype's precision), the reference being the same model in f32 (GPU, f16
  suite) or f64 (CPU, f32 check); for `generate()` the reference's logits
  are those of one forward over eager's tokens, step by step;
- `generate()`'s greedy tokens are eager's.

On a GPU each contender's first call (its compile) is timed by the clock,
and then each call as called (the host's clock around the call, median of a
few; a forward row's contenders take one call each in turn, round after
round, so that the host's slow spells fall on all of them) and its GPU
kernel time (the sum of the kernels' times in one call,
from torch's profiler). kgc's row also says how many kgc kernels its graphs
launch, the ops left to PyTorch (`kgc.torch.reports()`), and how many
times Dynamo compiled the forward after its first graph (a new shape: a
decode step after the prefill, a cache that grows; or a graph break's
resumed frame).

The dynamic-cache `generate()` row is served as a server serves: every
compiled contender compiles the forward with `dynamic=True` (prompts and
caches of every length, one graph each for the prefill and the decode
step, where Dynamo's default compiles the first prompt's length alone and
recompiles on the next), and after its first call kgc serves a second
request of another prompt length and number of new tokens, checked as the
row is; the row says how much that request compiled (Dynamo frames and
kernel graphs: 0 when one compile serves every length).

The training and LoRA rows (one training step; `kgc.bench.model_train`)
are checked on their gradients and timed per step, with their peak memory.

With `device="cpu"` only the correctness half runs, in f32 on CPU tensors,
with kgc's kernel graphs on the CPU executor of tiled kernels
(`options={"executor": "cpu"}`): a wrong lowering in a real model shows
without a GPU.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Sequence

from kgc.bench import model_train
from kgc.bench.model_rows import (CUDA_GRAPHS, EAGER, FAILED, GPU_RUNNERS, INDUCTOR, KGC,
                                  KGC_GRAPHS, LABELS, OK, WRONG, ModelRow, contending,
                                  first_line, gpu_kernel_ms, kgc_compiled_graphs)
from kgc.bench.models import (CPU, DYNAMIC, FORWARD, GENERATE, GPU, KINDS, TRAINING_KINDS,
                              ModelSpec, RowSpec)

# 2: training and LoRA rows; rows have "peak_mb" (per runner) and
# "kgc_graphs" (per kind of graph: inference, forward, backward).
# 3: each of "kgc_graphs" has "failed_partitions" (reason -> count).
# 4: and "failed_kernels" (the error of a kernel that failed to compile ->
# how many ops it left to PyTorch).
# 5: rows have "second_call_compiles" (dynamic-cache generate rows).
SCHEMA_VERSION = 5


@dataclasses.dataclass
class ModelSuiteResult:
    device: str
    settings: dict
    rows: list[ModelRow]

    @property
    def failed(self) -> list[ModelRow]:
        return [row for row in self.rows if row.status != OK]

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "device": self.device,
                "settings": self.settings, "runners": dict(LABELS),
                "rows": [row.to_dict() for row in self.rows]}

    def write_json(self, path) -> None:
        from kgc.bench import provenance

        # The models' code is transformers': its version is part of what
        # produced the numbers.
        provenance.write_json(path, self.to_dict(),
                              packages=("kgc", "torch", "triton", "transformers"))

    def table(self) -> str:
        timed = bool(self.settings.get("timed"))
        headers = ["model", "row", "kgc", "kgc err", "eager err"]
        if timed:
            headers += [f"{LABELS[r] if r not in (CUDA_GRAPHS, KGC_GRAPHS) else r} ms"
                        for r in GPU_RUNNERS]
            headers += [f"{r} gpu ms" for r in GPU_RUNNERS]
            headers += ["speedup", "kgc 1st s", "compile 1st s"]
            memory = [r for r in GPU_RUNNERS if any(r in row.peak_mb for row in self.rows)]
            headers += [f"{LABELS[r]} MiB" for r in memory]
        else:
            headers += ["kgc 1st s"]
        headers += ["kernels", "left to torch", "recompiles", "2nd request compiles"]
        lines = []
        for row in self.rows:
            cells = [row.model, row.row, row.status.upper() if row.status != OK else OK,
                     _number(row.kgc_error, ".2g"), _number(row.eager_error, ".2g")]
            if timed:
                cells += [_time(row, r, row.wall_ms) for r in GPU_RUNNERS]
                cells += [_time(row, r, row.gpu_ms) for r in GPU_RUNNERS]
                speedup = row.speedup()
                cells += ["-" if speedup is None else f"{speedup:.2f}x",
                          _number(row.compile_s.get(KGC), ".1f"),
                          _number(row.compile_s.get(INDUCTOR), ".1f")]
                cells += [_number(row.peak_mb.get(r), ".0f") for r in memory]
            else:
                cells += [_number(row.compile_s.get(KGC), ".1f")]
            cells += [_number(row.kgc_kernels, "d"), row.fallback_cell(),
                      _number(row.recompiles, "d"), _number(row.second_call_compiles, "d")]
            lines.append(cells)
        widths = [max(len(str(c)) for c in column) for column in zip(headers, *lines)]
        out = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w)
                         for i, (h, w) in enumerate(zip(headers, widths)))]
        out += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))) for cells in lines]
        wrong = len(self.failed)
        note = (f"err: max |logits - {self.settings.get('reference_dtype')} reference|; "
                f"{len(self.rows) - wrong} of {len(self.rows)} rows correct")
        if any(row.kgc_graphs.get("backward") for row in self.rows):
            note += ("; train and lora rows: err is the largest over the loss and each "
                     "gradient of max |x - reference| / max |reference|, left to torch is "
                     "forward+backward")
        if timed:
            note += ("; ms as called (median) and GPU kernel time per call; speedup: "
                     "torch.compile's GPU time / kgc's")
            if memory:
                note += ("; MiB: a training step's peak memory above what it starts with "
                         "(activations, gradients, workspaces)")
        out.append(note)
        for row in self.rows:
            if row.reason:
                out.append(f"  {row.model} {row.row}: kgc {row.status}: {row.reason}")
            for runner, reason in row.errors.items():
                if runner != KGC:
                    out.append(f"  {row.model} {row.row}: {LABELS.get(runner, runner)}: {reason}")
        return "\n".join(out)

    def write_chart(self, path) -> None:
        """A PNG bar chart: each row's GPU kernel time per contender,
        relative to torch.compile's (lower is faster)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        width = 0.8 / len(GPU_RUNNERS)
        figure, axes = plt.subplots(figsize=(max(6.0, 0.6 * len(self.rows) + 2), 4.5))
        tallest = 1.0
        for index, runner in enumerate(GPU_RUNNERS):
            positions, heights = [], []
            for position, row in enumerate(self.rows):
                base, value = row.gpu_ms.get(INDUCTOR), row.gpu_ms.get(runner)
                if base and value is not None:
                    positions.append(position + (index - (len(GPU_RUNNERS) - 1) / 2) * width)
                    heights.append(value / base)
            axes.bar(positions, heights, width, label=LABELS[runner])
            tallest = max([tallest, *heights])
        for position, row in enumerate(self.rows):
            if row.status != OK:
                axes.annotate(f"kgc {row.status}", (position, 0.05), ha="center",
                              va="bottom", rotation=90, fontsize=8, color="red")
        axes.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        axes.set_xticks(range(len(self.rows)), [f"{r.model} {r.row}" for r in self.rows],
                        rotation=40, ha="right", fontsize=7)
        axes.set_ylim(0, tallest * 1.3)
        axes.set_ylabel("GPU time / torch.compile's (lower is faster)")
        axes.set_title(f"kgc model suite on {self.device}")
        axes.legend(fontsize=8, ncols=2)
        figure.tight_layout()
        figure.savefig(path, format="png", dpi=120)
        plt.close(figure)


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _time(row: ModelRow, runner: str, times: dict) -> str:
    if runner in times:
        return f"{times[runner]:.3f}"
    if runner == KGC and row.status == WRONG:
        return "WRONG"
    return "failed" if runner in row.errors else "-"


def describe_row(row: ModelRow) -> str:
    """One line per row as it finishes: what a reader of a CI log needs."""
    text = f"{row.model:18} {row.row:20} {row.status.upper() if row.status != OK else OK:6}"
    if row.kgc_error is not None:
        text += f" kgc err {row.kgc_error:.3g} (eager {row.eager_error:.3g})"
    if row.tokens_equal is not None:
        text += " tokens " + ("equal" if row.tokens_equal else "DIFFER")
    if KGC in row.wall_ms:
        text += f", kgc {row.wall_ms[KGC]:.3f} ms"
        if INDUCTOR in row.wall_ms:
            text += f" (torch.compile {row.wall_ms[INDUCTOR]:.3f})"
    if KGC in row.gpu_ms and INDUCTOR in row.gpu_ms:
        text += f", GPU {row.gpu_ms[KGC]:.3f} ms (torch.compile {row.gpu_ms[INDUCTOR]:.3f})"
    if row.kgc_kernels is not None:
        text += f", {row.kgc_kernels} kernels, {row.fallback_cell()} ops left to torch"
    if row.reason:
        text += f": {row.reason}"
    elif row.note:
        text += f": {row.note}"
    return text


def run_models(specs: Sequence[ModelSpec], *, device: str = "cuda", seed: int = 0,
               reps: int = 20, timed: bool = True, kinds: tuple[str, ...] = KINDS,
               progress: Callable[[ModelRow], None] | None = None,
               checkpoint: Callable[[ModelSuiteResult], None] | None = None
               ) -> ModelSuiteResult:
    """Every row of the `kinds` asked for of every model in `specs`, on the
    GPU (f16, training rows in f32 under bf16 autocast; timed against eager
    and torch.compile unless `timed` is False) or, with `device="cpu"`, on
    the CPU executor (correctness only, f32). After each row, `progress`
    gets the row and `checkpoint` the results so far (a run cut short
    keeps the rows it finished)."""
    import torch

    size = CPU if device == "cpu" else GPU
    dtype, reference_dtype = ((torch.float32, torch.float64) if size == CPU
                              else (torch.float16, torch.float32))
    name = torch.cuda.get_device_name() if size == GPU else "CPU (kgc's CPU executor)"
    settings = {"size": size, "dtype": str(dtype).removeprefix("torch."),
                "reference_dtype": str(reference_dtype).removeprefix("torch."), "seed": seed,
                "reps": reps, "timed": timed and size == GPU}
    rows = []
    result = ModelSuiteResult(name, settings, rows)
    for spec in specs:
        model = spec.build(size, seed).to(device=device, dtype=dtype)
        reference = spec.build(size, seed).to(device=device, dtype=reference_dtype)
        for index, row_spec in enumerate(spec.rows(size, kinds)):
            if row_spec.kind in TRAINING_KINDS:
                row = model_train.run_training_row(spec, reference, row_spec, size,
                                                   seed + index, reps if timed else 0)
            else:
                row = _run_row(spec, model, reference, row_spec, size, seed + index,
                               reps if timed else 0)
            rows.append(row)
            if progress is not None:
                progress(row)
            if checkpoint is not None:
                checkpoint(result)
        del model, reference
        if size == GPU:
            torch.cuda.empty_cache()
    return result


def _run_row(spec: ModelSpec, model, reference, row_spec: RowSpec, size: str, seed: int,
             reps: int) -> ModelRow:
    import torch

    row = ModelRow(spec.name, row_spec.name)
    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    # Token 0 is the padding token of some configs: draw from the rest.
    ids = torch.randint(1, vocab, (row_spec.batch, row_spec.tokens), generator=generator)
    ids = ids.to(next(model.parameters()).device)
    call = _caller(spec, row_spec, ids)
    with torch.no_grad():
        try:
            eager = call(model)
        except Exception as error:
            row.status, row.reason = FAILED, f"eager PyTorch fails this row: {first_line(error)}"
            return row
        expected = _reference_logits(reference, spec, row_spec, ids, eager)
        runners = GPU_RUNNERS if size == GPU and reps else (KGC,)
        if row_spec.kind == FORWARD and size == GPU and reps:
            _run_forward_side_by_side(row, runners, model, call, reps, eager, expected)
            return row
        serving = None
        if row_spec.kind == GENERATE and row_spec.cache == DYNAMIC:
            serving = _second_request(spec, reference, row_spec, model, generator, ids.device)
        for runner in runners:
            # generate() makes many forwards: fewer of them give as steady a median.
            _run_contender(row, runner, model, call, size, max(3, reps // 5) if reps else 0,
                           eager, expected, serving)
    return row


@dataclasses.dataclass
class _Request:
    """Another generate() of a dynamic-cache row, as a server meets it: its
    row (another prompt length and number of new tokens), call, eager's
    result and the reference's logits."""

    row_spec: RowSpec
    call: Callable
    eager: tuple
    expected: object


def _second_request(spec: ModelSpec, reference, row_spec: RowSpec, model, generator,
                    device) -> _Request:
    import torch

    other = dataclasses.replace(row_spec, tokens=row_spec.tokens * 2 // 3 + 1,
                                new_tokens=row_spec.new_tokens // 2 + 3)
    ids = torch.randint(1, model.config.vocab_size, (other.batch, other.tokens),
                        generator=generator).to(device)
    call = _caller(spec, other, ids)
    eager = call(model)
    return _Request(other, call, eager, _reference_logits(reference, spec, other, ids, eager))


def _run_forward_side_by_side(row: ModelRow, runners: Sequence[str], model, call, calls: int,
                              eager, expected) -> None:
    """A forward row's contenders compiled and checked one after another,
    then timed side by side: `calls` rounds of one call each, so that what
    slows the host for a while slows every contender alike. (A forward
    compiles one graph per contender, which Dynamo keeps beside the others;
    a generate row compiles several, and its contenders take turns.)"""
    import torch

    torch._dynamo.reset()
    forwards = {}
    for runner in runners:
        with contending(row, runner, model, GPU, reset=False):
            if _first_call(row, runner, model, call, GPU, eager, expected):
                forwards[runner] = model.__dict__.get("forward")  # None: the class's, eager
    if forwards:
        _time_side_by_side(row, forwards, model, call, calls)


def _time_side_by_side(row: ModelRow, forwards: dict, model, call, calls: int) -> None:
    """Median wall time of a call as called, each contender's `forward`
    installed in turn for one call of each round, after warm-up; then each
    one's GPU kernel time of one call."""
    import torch
    from torch._dynamo.utils import counters

    def install(runner: str) -> None:
        if forwards[runner] is None:
            model.__dict__.pop("forward", None)
        else:
            model.forward = forwards[runner]

    compiled_before = counters["frames"]["ok"]
    try:
        for runner in forwards:
            install(runner)
            for _ in range(2):  # CUDA graphs are recorded on the second and third calls
                call(model)
        times = {runner: [] for runner in forwards}
        for _ in range(calls):
            for runner in forwards:
                install(runner)
                torch.cuda.synchronize()
                started = time.perf_counter()
                call(model)
                torch.cuda.synchronize()
                times[runner].append(time.perf_counter() - started)
        for runner in forwards:
            install(runner)
            row.wall_ms[runner] = statistics.median(times[runner]) * 1e3
            row.gpu_ms[runner] = gpu_kernel_ms(lambda: call(model))
    finally:
        model.__dict__.pop("forward", None)
    if counters["frames"]["ok"] != compiled_before:
        # Taking turns made Dynamo compile again: some times hold a compile.
        row.errors["side by side"] = (f"{counters['frames']['ok'] - compiled_before} compiles "
                                      "while the contenders took turns")


def _caller(spec: ModelSpec, row_spec: RowSpec, ids) -> Callable:
    """model -> (tokens or None, logits): the row's call."""
    import torch

    if row_spec.kind == FORWARD:
        extra = {"use_cache": False} if spec.decoder else {}

        def forward(model):
            return None, model(ids, **extra).logits
        return forward

    def generate(model):
        out = model.generate(ids, max_new_tokens=row_spec.new_tokens, do_sample=False,
                             cache_implementation=row_spec.cache, output_logits=True,
                             return_dict_in_generate=True)
        return out.sequences, torch.stack(out.logits)  # (steps, batch, vocab)
    return generate


def _reference_logits(reference, spec: ModelSpec, row_spec: RowSpec, ids, eager):
    """The reference model's logits for the row: its forward on the same
    tokens, or for generate, one forward over eager's tokens, whose
    positions from the prompt's last on are the steps' logits."""
    tokens, _ = eager
    if row_spec.kind == FORWARD:
        return reference(ids, **({"use_cache": False} if spec.decoder else {})).logits
    logits = reference(tokens[:, :-1], use_cache=False).logits
    return logits[:, ids.shape[1] - 1:].transpose(0, 1)


def _run_contender(row: ModelRow, runner: str, model, call, size: str, calls: int, eager,
                   expected, serving: _Request | None = None) -> None:
    """`runner`'s first call of the row (checked when it is kgc's), then,
    when `calls`, its time over that many calls. With `serving` (a dynamic-
    cache row), every compiled contender compiles the forward with
    `dynamic=True`, as a server that meets prompts of every length does,
    and kgc's second request is checked and its compiles counted."""
    with contending(row, runner, model, size, dynamic=True if serving else None):
        if not _first_call(row, runner, model, call, size, eager, expected):
            return
        if runner == KGC and serving is not None:
            _serve_second_request(row, model, serving)
        if size == GPU and calls:
            _time_calls(row, runner, model, call, calls)


def _serve_second_request(row: ModelRow, model, request: _Request) -> None:
    """kgc's generate() of another request after the row's first: its
    compiles counted, its result checked as the row's."""
    from torch._dynamo.utils import counters

    frames, graphs = counters["frames"]["ok"], kgc_compiled_graphs()
    result = request.call(model)
    row.second_call_compiles = counters["frames"]["ok"] - frames + kgc_compiled_graphs() - graphs
    probe = ModelRow(model="", row="")
    _check(probe, result, request.eager, request.expected)
    if probe.status != OK:
        row.status = WRONG
        why = (f"a second generate() of {request.row_spec.tokens} tokens and "
               f"{request.row_spec.new_tokens} new: {probe.reason}")
        row.reason = why if row.reason is None else f"{row.reason}; {why}"


def _first_call(row: ModelRow, runner: str, model, call, size: str, eager, expected) -> bool:
    """`runner`'s first call of the row, its compile timed, checked when it
    is kgc's; whether its result may be timed (a wrong one's time would
    mean nothing)."""
    started = time.perf_counter()
    result = call(model)
    _synchronize(size)
    if runner != EAGER:
        row.compile_s[runner] = time.perf_counter() - started
    if runner == KGC:
        _check(row, result, eager, expected)
        return row.status != WRONG
    if runner == KGC_GRAPHS and not _replays_right(result, eager, expected):
        # Not timed: the row's status is kgc's own compile's.
        row.errors[runner] = "wrong result under CUDA graphs"
        return False
    return True


def _replays_right(result, eager, expected) -> bool:
    """Whether kgc under CUDA graphs gave what kgc's own check accepts:
    the same tokens as eager, logits within the accuracy rule."""
    probe = ModelRow(model="", row="")
    _check(probe, result, eager, expected)
    return probe.status == OK


def _check(row: ModelRow, result, eager, expected) -> None:
    from kgc.search.verify import mismatch

    tokens, logits = result
    eager_tokens, eager_logits = eager
    if tokens is not None:
        row.tokens_equal = bool(torch_equal(tokens, eager_tokens))
        if not row.tokens_equal:
            # Steps up to the first differing token saw the same prefix.
            prompt = tokens.shape[1] - logits.shape[0]
            differs = (tokens[:, prompt:] != eager_tokens[:, prompt:]).any(0)
            step = int(differs.nonzero()[0, 0])
            logits, eager_logits, expected = (logits[:step + 1], eager_logits[:step + 1],
                                              expected[:step + 1])
            margin = _tie_margin(expected[step], tokens[:, prompt + step],
                                 eager_tokens[:, prompt + step])
            eager_error = (eager_logits.double() - expected.to(eager_logits.device).double()
                           ).abs().max().item()
            if margin <= 2 * eager_error:
                # The wider reference scores the two tokens closer together
                # than eager's own rounding error: a near-tie that either
                # half-precision run may break either way, not a wrong
                # kernel. The steps up to it are still checked below.
                row.note = (f"tokens part from eager's at step {step}, a near-tie (the "
                            f"reference's margin {margin:.2g} is within twice eager's error)")
            else:
                row.status = WRONG
                row.reason = f"greedy tokens differ from eager's from step {step}"
    ideal = expected.to(logits.device).double()
    row.kgc_error = (logits.double() - ideal).abs().max().item()
    row.eager_error = (eager_logits.double() - ideal).abs().max().item()
    wrong = mismatch((logits,), (eager_logits,), (expected,))
    if wrong is not None:
        row.status = WRONG
        why = f"logits: {wrong.removeprefix('result #0 ')}"
        row.reason = why if row.reason is None else f"{row.reason}; {why}"


def _tie_margin(reference_logits, tokens, eager_tokens) -> float:
    """The largest gap, in the reference's logits of one step (batch,
    vocab), between the token kgc chose and the one eager chose."""
    reference_logits = reference_logits.double()
    rows = range(reference_logits.shape[0])
    return max(abs(reference_logits[b, int(tokens[b])] - reference_logits[b, int(eager_tokens[b])])
               .item() for b in rows)


def torch_equal(a, b) -> bool:
    import torch

    return a.shape == b.shape and torch.equal(a, b)


def _time_calls(row: ModelRow, runner: str, model, call, calls: int) -> None:
    """Median wall time of a call as called over `calls` calls after
    warm-up, and the GPU kernel time of one call."""
    import torch

    for _ in range(2):  # CUDA graphs are recorded on the second and third calls
        call(model)
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call(model)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    row.wall_ms[runner] = statistics.median(times) * 1e3
    row.gpu_ms[runner] = gpu_kernel_ms(lambda: call(model))


def _synchronize(size: str) -> None:
    if size == GPU:
        import torch

        torch.cuda.synchronize()
