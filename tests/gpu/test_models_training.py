"""The model suite's training rows on a GPU: the suite's Llama (hidden 512,
2 layers) through one training step and one LoRA fine-tuning step, f32
master weights under bf16 autocast, every contender timed; kgc's loss and
gradients checked against eager's and an f32 reference by the accuracy
rule (`kgc.bench.model_train`)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from kgc.bench import model_run, models  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_dynamo")]


def test_the_llamas_training_and_lora_steps_are_right_and_timed():
    result = model_run.run_models(models.select(["llama"]), device="cuda", reps=3,
                                  kinds=(models.TRAIN, models.LORA))
    rows = {row.row: row for row in result.rows}
    assert set(rows) == {"train 4x256", "lora 4x256"}, set(rows)
    for row in rows.values():
        assert row.status == model_run.OK, model_run.describe_row(row)
        # Checked against a reference that differs from eager's result:
        # bf16 autocast rounds where the f32 step does not.
        assert row.eager_error > 1e-4, model_run.describe_row(row)
        for runner in ("eager", "torch.compile", "kgc"):
            for measured in (row.wall_ms, row.gpu_ms, row.peak_mb):
                assert measured.get(runner, 0) > 0, (runner, row)
        assert row.compile_s["kgc"] > 0 and row.compile_s["torch.compile"] > 0
        assert row.kgc_graphs["forward"]["kernels"] and row.kgc_graphs["backward"]["kernels"]
        assert row.recompiles == 0, row
    table = result.table()
    assert "kgc MiB" in table and "train 4x256" in table and "lora 4x256" in table


# Steps of the loss-curve test, and the batches it cycles through: few
# enough that the model learns them, so that the loss falls and a wrong
# gradient shows as a curve that leaves eager's.
CURVE_STEPS, CURVE_BATCHES = 50, 4
# A rate at which the loss falls over the 50 steps rather than in the first
# few (at 3e-4 the 8B-shaped layers learn their batches by step 10).
CURVE_LEARNING_RATES = {"llama": 3e-4, "qwen2": 3e-4, "llama3-8b-layers": 1e-5}


def _loss_curve(model, batches, runner: str, rate: float) -> tuple[list[float], int]:
    """The losses of AdamW steps of `model` (its forward compiled as
    `runner` compiles it, under bf16 autocast) over `batches`, and the most
    memory allocated during the steps after the first (which compiles and
    makes the optimizer's state) beyond what was allocated before them."""
    from kgc.bench import model_train
    from kgc.bench.model_rows import compile_forward

    torch._dynamo.reset()
    compile_forward(model, runner, models.GPU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=rate)
    losses = [model_train.training_step(model, batches[0], True, optimizer)]
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for step in range(1, CURVE_STEPS):
        losses.append(model_train.training_step(model, batches[step % len(batches)], True,
                                                optimizer))
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    model.__dict__.pop("forward", None)
    return torch.stack(losses).float().tolist(), peak


@pytest.mark.parametrize("name", list(CURVE_LEARNING_RATES))
def test_fifty_adamw_steps_follow_eagers_loss_curve(name, record_property):
    import copy

    from kgc.bench.model_rows import EAGER, INDUCTOR, KGC

    spec = models.CATALOGUE[name]
    initial = spec.build(models.GPU, seed=0).cuda()  # f32 master weights
    batch, tokens = spec.training_shape or models.GPU_TRAINING_SHAPE
    generator = torch.Generator(device="cuda").manual_seed(7)
    batches = [torch.randint(1, initial.config.vocab_size, (batch, tokens), device="cuda",
                             generator=generator) for _ in range(CURVE_BATCHES)]
    curves, peaks = {}, {}
    for runner in (EAGER, INDUCTOR, KGC):
        model = copy.deepcopy(initial)
        curves[runner], peaks[runner] = _loss_curve(model, batches, runner,
                                                    CURVE_LEARNING_RATES[name])
        del model
        torch.cuda.empty_cache()
    record_property("peak_mib", {r: round(p / 2**20) for r, p in peaks.items()})
    record_property("losses_every_10_steps", {r: [round(x, 3) for x in c[::10] + c[-1:]]
                                              for r, c in curves.items()})
    print(f"\n{name} losses every 10 steps: " + "; ".join(
        f"{r} {[round(x, 3) for x in c[::10]]}" for r, c in curves.items()))
    print(f"{name} peak MiB after the first step: " +
          ", ".join(f"{r} {p / 2**20:.0f}" for r, p in peaks.items()))
    eager, inductor, kgc_curve = curves[EAGER], curves[INDUCTOR], curves[KGC]
    assert eager[-1] < 0.9 * eager[0], f"the model did not learn its batches: {eager}"
    # bf16 autocast rounds each op's result to 8 bits, differently in fused
    # kernels than in eager's ops, and 50 steps carry the differences on:
    # kgc may part from eager's curve by 2% and by as much as Inductor's does.
    for step, (got, want, other) in enumerate(zip(kgc_curve, eager, inductor)):
        allowed = 2e-2 * abs(want) + abs(other - want)
        assert abs(got - want) <= allowed, (step, got, want, other)
