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
