"""The model suite's CPU check: real transformers architectures, on tiny
configs with random weights, compiled with
`torch.compile(..., backend="kgc", options={"executor": "cpu"})` so that
kgc's kernels run on the CPU executor of tiled kernels, and checked against
eager PyTorch and an f64 reference: a forward and a short greedy
`generate()` with the static and with the dynamic cache, and a training
step (loss and every gradient; for the Llama also a LoRA step). A wrong
lowering in a real model fails here without a GPU.

Also: the executor option itself, the suite's check on results and on a
gradient made wrong on purpose, and `kgc bench --models` on the command
line.
"""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("transformers")

from kgc.bench import model_run, models  # noqa: E402
from kgc.diagnostics import KgcError  # noqa: E402
from kgc.tools.cli import run as cli  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

DECODERS = [spec.name for spec in models.CATALOGUE.values() if spec.decoder and not spec.gpu_only]


@pytest.mark.parametrize("name", DECODERS)
def test_every_inference_row_of_a_tiny_decoder_is_right_on_the_cpu_executor(name):
    result = model_run.run_models(models.select([name], models.CPU), device="cpu",
                                  kinds=(models.FORWARD, models.GENERATE))
    rows = {row.row: row for row in result.rows}
    assert set(rows) == {"forward 17", "generate static 4", "generate dynamic 4"}
    for row in result.rows:
        # Each row ran kgc's kernels, not PyTorch alone.
        assert row.kgc_kernels, model_run.describe_row(row)
    wrong = [model_run.describe_row(row) for row in result.rows if row.status != model_run.OK]
    assert not wrong, "\n" + "\n".join(wrong)
    assert all(rows[r].tokens_equal for r in ("generate static 4", "generate dynamic 4"))
    # A second request of other lengths ran on what the first compiled.
    assert rows["generate dynamic 4"].second_call_compiles == 0, \
        model_run.describe_row(rows["generate dynamic 4"])
    # The embedding's lookup (kg.gather) and the static cache's update at the
    # cache positions (index_copy_, as index_put: kg.scatter) run in kgc.
    for row in result.rows:
        indexed = {op for op in row.kgc_fallbacks
                   if op in ("aten.embedding.default", "aten.index_put.default")}
        assert not indexed, (row.row, indexed)


@pytest.mark.parametrize("name", DECODERS)
def test_a_tiny_decoders_training_step_is_right_on_the_cpu_executor(name):
    (row,) = model_run.run_models(models.select([name], models.CPU), device="cpu",
                                  kinds=(models.TRAIN,)).rows
    assert row.row == "train 2x17", row.row
    assert row.status == model_run.OK, model_run.describe_row(row)
    # Both halves of the step ran kgc kernels.
    assert row.kgc_graphs["forward"]["kernels"] and row.kgc_graphs["backward"]["kernels"], \
        row.kgc_graphs
    # One graph for the step: nothing in the model's forward (a warning
    # transformers logs, say) made Dynamo break it into frames.
    assert row.recompiles == 0, row.recompiles


def test_the_cli_checks_a_training_and_a_lora_step_on_the_cpu(tmp_path, capsys):
    import json

    path = tmp_path / "training.json"
    assert cli(["bench", "--models", "llama", "--rows", "train,lora", "--device", "cpu",
                "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "train 2x17" in out and "lora 2x17" in out and "2 of 2 rows correct" in out
    rows = {row["row"]: row for row in json.loads(path.read_text())["rows"]}
    assert set(rows) == {"train 2x17", "lora 2x17"}
    for row in rows.values():
        assert row["status"] == "ok", row
        assert row["kgc_graphs"]["backward"]["kernels"] >= 1, row
    # The embedding's lookup (forward) and its gradient's scatter-add
    # (backward) run in kgc's kernels.
    for row in ("train 2x17", "lora 2x17"):
        assert "aten.embedding.default" not in rows[row]["kgc_graphs"]["forward"]["fallbacks"]
        assert "aten.index_put.default" not in rows[row]["kgc_graphs"]["backward"]["fallbacks"]


def _with_a_wrong_gradient(monkeypatch, parameter_name):
    """kgc's compile of the training rows, with a hook that moves one
    element of `parameter_name`'s gradient by 0.1 % of the gradient's
    largest magnitude: what a slightly wrong backward kernel would give."""
    from kgc.bench import model_rows

    compile_forward = model_rows.compile_forward

    def compile_with_a_wrong_gradient(model, runner, size, dynamic=None):
        compile_forward(model, runner, size, dynamic)
        if runner == model_run.KGC:
            def perturb(grad):
                grad = grad.clone()
                grad.view(-1)[7] += 1e-3 * grad.abs().max()
                return grad
            model.get_parameter(parameter_name).register_hook(perturb)

    monkeypatch.setattr(model_rows, "compile_forward", compile_with_a_wrong_gradient)


def test_a_wrong_gradient_fails_the_training_row_and_the_cli(monkeypatch, capsys):
    name = "model.layers.1.mlp.up_proj.weight"
    _with_a_wrong_gradient(monkeypatch, name)
    assert cli(["bench", "--models", "llama", "--rows", "train", "--device", "cpu"]) == 1
    captured = capsys.readouterr()
    assert "llama train 2x17 (wrong)" in captured.err
    assert f"the gradient of {name} is off by" in captured.out


def test_a_wrong_adapter_gradient_fails_the_lora_row(monkeypatch):
    name = "model.layers.0.self_attn.v_proj.down"
    _with_a_wrong_gradient(monkeypatch, name)
    (row,) = model_run.run_models(models.select(["llama"], models.CPU), device="cpu",
                                  kinds=(models.LORA,)).rows
    assert row.status == model_run.WRONG and f"the gradient of {name}" in row.reason


def test_a_gradient_of_a_frozen_parameter_is_wrong():
    from kgc.bench import model_train

    model = torch.nn.Linear(3, 2)
    model.weight.requires_grad_(False)
    model.weight.grad = torch.ones(2, 3)
    model.bias.grad = torch.tensor([0.5, -0.25])
    loss = torch.tensor(1.0)
    expected = (loss.double(), {"bias": model.bias.grad.double()})
    row = model_run.ModelRow("m", "lora 1x1")
    model_train.check_gradients(row, model, loss, (loss, {"bias": model.bias.grad}), expected)
    assert row.status == model_run.WRONG and row.reason.startswith("frozen weight has a gradient")


def test_adapters_wrap_the_attention_projections_and_train_alone():
    from kgc.bench import lora

    model = models.CATALOGUE["llama"].build(models.CPU)
    ids = torch.randint(1, 256, (1, 5), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        base = model(ids).logits
    wrapped = lora.add_adapters(model)
    assert wrapped == [f"model.layers.{i}.self_attn.{p}_proj" for i in range(2)
                       for p in "qkvo"]
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == [f"{module}.{matrix}" for module in wrapped for matrix in ("down", "up")]
    with torch.no_grad():
        adapted = model(ids).logits
    # The adapters start from small random values, not LoRA's zero `up`:
    # their first gradients are all non-zero, so a check of them can fail.
    assert not torch.allclose(adapted, base, atol=1e-4)
    model(ids, labels=ids).loss.backward()
    assert all(model.get_parameter(name).grad.abs().min() > 0 for name in trainable)


def test_gpt2s_conv1d_projections_take_adapters():
    from kgc.bench import lora

    model = models.CATALOGUE["gpt2"].build(models.CPU)
    assert lora.add_adapters(model) == [f"transformer.h.{i}.attn.{p}" for i in range(2)
                                        for p in ("c_attn", "c_proj")]


def test_a_tiny_encoder_forward_is_right_on_the_cpu_executor():
    (row,) = model_run.run_models(models.select(["bert"], models.CPU), device="cpu").rows
    assert row.row == "forward 17" and row.kgc_kernels
    assert row.status == model_run.OK, model_run.describe_row(row)


def test_the_cpu_executor_runs_kernel_graphs_without_cuda():
    from kgc.torch import KgcFallbackWarning, reports

    weight = torch.randn(33, 17, generator=torch.Generator().manual_seed(3))

    def function(x):
        return torch.softmax(x @ weight, dim=-1) * 2

    x = torch.randn(3, 33, generator=torch.Generator().manual_seed(4))
    before = len(reports())
    compiled = torch.compile(function, backend="kgc", options={"executor": "cpu"})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)  # no whole-graph fallback
        got = compiled(x)
    torch.testing.assert_close(got, function(x), atol=2e-5, rtol=2e-5)
    (report,) = reports()[before:]
    assert report.whole_graph_reason is None and report.kernel_count >= 1


def test_the_cpu_executor_reads_inputs_that_start_inside_their_storage():
    # A slice of a fused projection's output reaches a partition as a view
    # whose first element is not its storage's first.
    def function(x):
        return torch.exp(x) * 2 + x.sum(-1, keepdim=True)

    storage = torch.randn(5, 17, generator=torch.Generator().manual_seed(5))
    view = storage[2:]
    assert view.is_contiguous() and view.storage_offset() == 34
    compiled = torch.compile(function, backend="kgc", options={"executor": "cpu"})
    with torch.no_grad():
        got = compiled(view)
    torch.testing.assert_close(got, function(view), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("options,message", [
    ({"executor": "tpu"}, "unknown executor 'tpu'"),
    ({"executor": "cpu", "mode": "max-autotune"}, "CPU executor runs kgc's default kernels"),
    ({"executors": "cpu"}, "unknown options executors"),
])
def test_bad_executor_options_are_refused(options, message):
    from kgc.torch.backend import _resolve_options

    with pytest.raises(KgcError, match=message):
        _resolve_options(None, options)


def _eager_like(tokens, logits):
    return (None if tokens is None else tokens.clone(), logits.clone())


def test_the_check_rejects_wrong_logits_and_wrong_tokens():
    generator = torch.Generator().manual_seed(7)
    exact = torch.randn(4, 1, 50, generator=generator, dtype=torch.float64)
    eager = exact.float()
    tokens = torch.randint(0, 50, (1, 10), generator=generator)

    right = model_run.ModelRow("m", "generate static 4")
    model_run._check(right, _eager_like(tokens, eager), (tokens, eager), exact)
    assert right.status == model_run.OK and right.tokens_equal

    off = eager.clone()
    off[2, 0, 5] += 0.01
    wrong_logits = model_run.ModelRow("m", "generate static 4")
    model_run._check(wrong_logits, (tokens, off), (tokens, eager), exact)
    assert wrong_logits.status == model_run.WRONG and "off by" in wrong_logits.reason

    other = tokens.clone()
    other[0, 8] = (other[0, 8] + 1) % 50  # the third new token (of four after a prompt of 6)
    wrong_tokens = model_run.ModelRow("m", "generate static 4")
    model_run._check(wrong_tokens, (other, eager), (tokens, eager), exact)
    assert wrong_tokens.status == model_run.WRONG and not wrong_tokens.tokens_equal
    assert "from step 2" in wrong_tokens.reason


def test_tokens_parting_at_a_near_tie_are_no_error_but_a_clear_gap_is():
    generator = torch.Generator().manual_seed(8)
    exact = torch.randn(4, 1, 50, generator=generator, dtype=torch.float64)
    tokens = torch.randint(0, 50, (1, 10), generator=generator)
    chosen, other = int(tokens[0, 8]), (int(tokens[0, 8]) + 1) % 50
    # At the third new token the reference scores both tokens 1e-5 apart,
    # while eager's rounding error is 1e-3: either run may pick either.
    exact[2, 0, chosen] = exact[2, 0].max() + 1.0
    exact[2, 0, other] = exact[2, 0, chosen] - 1e-5
    eager = (exact + 1e-3 * torch.randn(exact.shape, generator=generator,
                                        dtype=torch.float64)).float()
    parted = tokens.clone()
    parted[0, 8] = other
    near_tie = model_run.ModelRow("m", "generate static 4")
    model_run._check(near_tie, (parted, eager), (tokens, eager), exact)
    assert near_tie.status == model_run.OK and not near_tie.tokens_equal
    assert "near-tie" in near_tie.note and "step 2" in near_tie.note
    # A margin of 0.5, far beyond eager's error, is a wrong token.
    exact[2, 0, other] = exact[2, 0, chosen] - 0.5
    eager = (exact + 1e-3 * torch.randn(exact.shape, generator=generator,
                                        dtype=torch.float64)).float()
    clear = model_run.ModelRow("m", "generate static 4")
    model_run._check(clear, (parted, eager), (tokens, eager), exact)
    assert clear.status == model_run.WRONG and "from step 2" in clear.reason


def test_the_cli_lists_the_models(capsys):
    assert cli(["bench", "--models", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in models.CATALOGUE:
        assert name in listed
    assert "gpu only" in listed.splitlines()[-1]


@pytest.mark.parametrize("argv,message", [
    (["bench", "--models", "llama,nope", "--device", "cpu"], "unknown model(s) nope"),
    (["bench", "--models", "llama3-8b-layers", "--device", "cpu"], "run on a GPU only"),
    (["bench", "--device", "cpu"], "add --models"),
    (["bench", "--models", "llama", "--workloads", "softmax"], "--workloads is for the workloads"),
    (["bench", "--models", "llama", "--rows", "train,backward", "--device", "cpu"],
     "unknown row kind(s) backward"),
    (["bench", "--rows", "train"], "add --models"),
])
def test_the_cli_refuses_bad_model_requests(argv, message, capsys):
    assert cli(argv) == 1
    assert message in capsys.readouterr().err


def test_the_cli_checks_a_model_on_the_cpu_and_writes_json(tmp_path, capsys):
    import json

    path = tmp_path / "models.json"
    assert cli(["bench", "--models", "bert", "--device", "cpu", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "bert" in out and "forward 17" in out and "1 of 1 rows correct" in out
    data = json.loads(path.read_text())
    (row,) = data["rows"]
    assert row["status"] == "ok" and row["kgc_kernels"] >= 1


def test_a_model_run_cut_short_keeps_the_rows_it_finished_in_its_json(tmp_path, monkeypatch,
                                                                       capsys):
    # A device's time limit stops a run between rows: the JSON and the log
    # already hold every row finished before.
    import json

    finished = []
    real_run_row = model_run._run_row

    def run_row(*args, **kwargs):
        if finished:
            raise KeyboardInterrupt  # the limit, at the second row
        row = real_run_row(*args, **kwargs)
        finished.append(row)
        return row

    monkeypatch.setattr(model_run, "_run_row", run_row)
    path = tmp_path / "models.json"
    with pytest.raises(KeyboardInterrupt):
        cli(["bench", "--models", "llama", "--rows", "forward,generate", "--device", "cpu",
             "--no-progress", "--json", str(path)])
    (row,) = json.loads(path.read_text())["rows"]
    assert row["row"] == finished[0].row and row["status"] == "ok"
    assert finished[0].row in capsys.readouterr().out


def test_the_cli_exits_non_zero_when_a_row_is_wrong(monkeypatch, capsys):
    def wrong_check(row, result, eager, expected):
        row.status, row.reason = model_run.WRONG, "logits: is off by 1"

    monkeypatch.setattr(model_run, "_check", wrong_check)
    assert cli(["bench", "--models", "bert", "--device", "cpu"]) == 1
    captured = capsys.readouterr()
    assert "WRONG" in captured.out and "bert forward 17 (wrong)" in captured.err


def test_the_suites_json_says_what_produced_it(tmp_path):
    import json

    import transformers

    from kgc.bench.provenance import FIELDS

    result = model_run.ModelSuiteResult("CPU", {"size": "cpu"}, [model_run.ModelRow("m", "r")])
    path = tmp_path / "models.json"
    result.write_json(path)
    data = json.loads(path.read_text())
    assert set(FIELDS) <= set(data["provenance"]) and data["rows"][0]["model"] == "m"
    assert data["provenance"]["versions"]["transformers"] == transformers.__version__


def test_a_timed_training_row_shows_in_the_table_json_and_chart(tmp_path):
    import json

    pytest.importorskip("matplotlib")
    forward = model_run.ModelRow("llama", "forward 64", kgc_error=1e-3, eager_error=1e-3,
                                 wall_ms={"eager": 2.0, "torch.compile": 1.0, "kgc": 0.9},
                                 gpu_ms={"eager": 1.5, "torch.compile": 0.8, "kgc": 0.7},
                                 kgc_kernels=20, kgc_fallbacks={"aten.embedding.default": 1},
                                 kgc_graphs={"inference": {
                                     "kernels": 20, "fallbacks": {"aten.embedding.default": 1}}})
    train = model_run.ModelRow(
        "llama", "train 4x256", kgc_error=2e-3, eager_error=3e-3,
        wall_ms={"eager": 9.0, "torch.compile": 6.0, "kgc": 5.0},
        gpu_ms={"eager": 8.0, "torch.compile": 5.5, "kgc": 4.4},
        peak_mb={"eager": 1500.0, "torch.compile": 1200.0, "kgc": 1100.0},
        compile_s={"torch.compile": 30.0, "kgc": 20.0}, kgc_kernels=120,
        kgc_fallbacks={"aten.embedding.default": 1, "aten.index_put.default": 1},
        kgc_graphs={"forward": {"kernels": 50, "fallbacks": {"aten.embedding.default": 1}},
                    "backward": {"kernels": 70, "fallbacks": {"aten.index_put.default": 1}}})
    result = model_run.ModelSuiteResult("H100", {"size": "gpu", "timed": True,
                                                 "reference_dtype": "float32"}, [forward, train])
    table = result.table()
    header, forward_line, train_line = table.splitlines()[:3]
    for runner in ("eager", "torch.compile", "kgc"):
        assert f"{runner} MiB" in header
    # Peak memory only where a training step measured it; the ops left to
    # PyTorch as forward+backward.
    # (the last columns: MiB per contender, kernels, left to torch, recompiles,
    # a second request's compiles)
    assert forward_line.split()[-7:] == ["-", "-", "-", "20", "1", "-", "-"]
    assert train_line.split()[-7:] == ["1500", "1200", "1100", "120", "1+1", "-", "-"]
    assert "1.25x" in train_line
    assert "forward+backward" in table and "peak memory" in table
    # The row's line in the log, as it finishes, holds its times too.
    assert "kgc 5.000 ms (torch.compile 6.000), GPU 4.400 ms (torch.compile 5.500)" in \
        model_run.describe_row(train)
    path = tmp_path / "models.json"
    result.write_json(path)
    (_, row) = json.loads(path.read_text())["rows"]
    assert row["peak_mb"]["kgc"] == 1100.0 and row["kgc_graphs"]["backward"]["kernels"] == 70
    chart = tmp_path / "models.png"
    result.write_chart(chart)
    assert chart.read_bytes().startswith(b"\x89PNG")


def test_training_steps_are_timed_side_by_side_and_peaks_count_from_each_steps_start(
        monkeypatch):
    # Each round times one step of every contender, so that a slow stretch
    # of the host slows them alike; the peak counts what a step adds.
    from kgc.bench import model_train
    from kgc.bench.model_rows import ModelRow

    order, clock = [], iter(range(1, 1000))

    class Event:
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = next(clock)

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return float(end.at - self.at)

    allocated = {"now": 100}
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: allocated["now"] * 2**20)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated",
                        lambda: (allocated["now"] + 7) * 2**20)
    monkeypatch.setattr(model_train, "gpu_kernel_ms", lambda call: 0.5)

    class Model(torch.nn.Module):
        def forward(self):
            order.append("eager")

    model = Model()

    def training_step(model, ids, autocast, optimizer):
        model.forward()

    monkeypatch.setattr(model_train, "training_step", training_step)

    class Optimizer:
        def zero_grad(self, set_to_none):
            pass

    contenders = {"eager": (None, Optimizer()), "kgc": (lambda: order.append("kgc"), Optimizer())}
    row = ModelRow("m", "train")
    model_train._time_steps_side_by_side(row, contenders, model, None, True, steps=3)
    warmup = model_train.WARMUP_STEPS
    timed = order[2 * warmup:2 * warmup + 6]
    assert timed == ["eager", "kgc"] * 3
    assert row.wall_ms == {"eager": 1.0, "kgc": 1.0}
    assert row.peak_mb == {"eager": 7.0, "kgc": 7.0}
    assert "forward" not in model.__dict__  # the class's forward again


def test_kgc_under_cuda_graphs_is_a_column_of_its_own():
    row = model_run.ModelRow("llama", "forward 1", kgc_error=1e-3, eager_error=1e-3,
                             wall_ms={"eager": 2.0, "torch.compile": 0.9, "kgc": 1.3,
                                      "kgc-cudagraphs": 0.31},
                             gpu_ms={"eager": 0.2, "torch.compile": 0.08, "kgc": 0.079,
                                     "kgc-cudagraphs": 0.078})
    result = model_run.ModelSuiteResult("H100", {"size": "gpu", "timed": True,
                                                 "reference_dtype": "float32"}, [row])
    header, line = result.table().splitlines()[:2]
    assert "kgc-cudagraphs ms" in header and "kgc-cudagraphs gpu ms" in header
    assert "0.310" in line.split() and "0.078" in line.split()


def test_a_partition_that_failed_to_compile_is_recorded_with_its_reason():
    from types import SimpleNamespace

    from kgc.bench.model_rows import record_kgc
    from kgc.torch.backend import KERNEL_FAILED

    def partition(ops, reason=None):
        return SimpleNamespace(ops=ops, fallback_reason=reason)

    failed = ("KgcError: @kgc_1: kernel @kgc_1_0_matmul needs 300 KiB of shared memory\n"
              "the GPU has 228 KiB")
    kernel_failed = "kernel @kgc_0_2_matmul needs 300 KiB of shared memory"
    report = SimpleNamespace(kind="backward", kernel_count=3, whole_graph_reason=None,
                             fallbacks=[("aten.cumsum.default:cumsum", "not supported"),
                                        ("aten.mm.default:mm_3", KERNEL_FAILED + kernel_failed),
                                        ("aten.mul.Tensor:mul", KERNEL_FAILED + kernel_failed)],
                             partitions=[partition(["aten.mm.default:mm"]),
                                         partition(["aten.mm.default:mm_1",
                                                    "aten.add.Tensor:add"], failed),
                                         partition(["aten.mm.default:mm_2"], failed)])
    row = model_run.ModelRow("llama", "train 1x512")
    record_kgc(row, [report])
    graph = row.kgc_graphs["backward"]
    assert graph["kernels"] == 3
    assert graph["fallbacks"] == {"aten.cumsum.default": 1, "aten.mm.default": 3,
                                  "aten.add.Tensor": 1, "aten.mul.Tensor": 1}
    assert graph["failed_partitions"] == {failed.splitlines()[0]: 2}
    # The ops of a kernel that failed to compile, counted by its error.
    assert graph["failed_kernels"] == {kernel_failed: 2}


def test_generates_of_other_lengths_compile_nothing_after_the_first():
    """Serving: after the first `generate()` with the dynamic cache, calls
    with other prompt lengths and other numbers of new tokens run on what
    it compiled (no Dynamo frame, no kernel graph), with eager's tokens.
    (The suite's rows check one such request for every decoder.)"""
    from torch._dynamo.utils import counters

    from kgc.torch.backend import compiled_graphs

    model = models.CATALOGUE["llama"].build(models.CPU).eval()
    generator = torch.Generator().manual_seed(0)
    calls = [(16, 6), (11, 9), (23, 4), (5, 13)]  # (prompt length, new tokens)
    prompts = [torch.randint(0, model.config.vocab_size, (1, length), generator=generator)
               for length, _ in calls]

    def generate(ids, new):
        return model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [generate(ids, new) for ids, (_, new) in zip(prompts, calls)]
        model.forward = torch.compile(model.forward, backend="kgc",
                                      options={"executor": "cpu"}, dynamic=True)
        for index, (ids, (length, new)) in enumerate(zip(prompts, calls)):
            frames, graphs = counters["frames"]["ok"], len(compiled_graphs())
            tokens = generate(ids, new)
            assert torch.equal(tokens, expected[index]), (length, new)
            if index == 0:
                assert len(compiled_graphs()) > graphs
            else:
                assert counters["frames"]["ok"] == frames, (length, new)
                assert compiled_graphs()[graphs:] == [], (length, new)
