"""The model suite's correctness rows on a GPU: every model of
`kgc.bench.models` at its GPU size in f16, compiled with
`torch.compile(model.forward, backend="kgc")`, its logits checked against
eager PyTorch's and an f32 reference, and `generate()`'s greedy tokens
against eager's (forward at 1, 64 and 512 tokens; 32 new tokens with the
static and with the dynamic cache; a training and a LoRA step, their
gradients); and `kgc bench --models` end to end on one model, timed, with
its JSON and chart."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from kgc.bench import model_run, models  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_dynamo")]


# One test per model and kind of row, so that a model's rows (the 8B-shaped
# layers' take minutes each) can run side by side.
_MODEL_ROWS = [(name, kind) for name, spec in models.CATALOGUE.items() for kind in models.KINDS
               if spec.rows(models.GPU, (kind,))]


@pytest.mark.parametrize("name,kind", _MODEL_ROWS, ids=[f"{n}-{k}" for n, k in _MODEL_ROWS])
def test_every_row_of_the_model_is_right_on_the_gpu(name, kind):
    result = model_run.run_models(models.select([name]), device="cuda", timed=False,
                                  kinds=(kind,))
    spec = models.CATALOGUE[name]
    assert [row.row for row in result.rows] == [r.name for r in spec.rows(models.GPU, (kind,))]
    for row in result.rows:
        assert row.kgc_kernels, model_run.describe_row(row)
    wrong = [model_run.describe_row(row) for row in result.rows if row.status != model_run.OK]
    assert not wrong, "\n" + "\n".join(wrong)


def test_bench_models_times_every_contender(tmp_path):
    import json
    import subprocess

    from tests.tools import console_script

    results, chart = tmp_path / "models.json", tmp_path / "models.png"
    command = [console_script("kgc"), "bench", "--models", "llama", "--reps", "5",
               "--json", str(results), "--chart", str(chart)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "llama" in done.stdout and "speedup" in done.stdout
    data = json.loads(results.read_text())
    assert [row["row"] for row in data["rows"]] == [
        r.name for r in models.CATALOGUE["llama"].rows(models.GPU)]
    for row in data["rows"]:
        assert row["status"] == "ok", row
        for times in ("wall_ms", "gpu_ms"):
            # CUDA graphs may not take a row (the reason is in errors).
            assert {"eager", "torch.compile", "kgc"} <= set(row[times]), row
            assert all(t > 0 for t in row[times].values())
        assert row["compile_s"]["kgc"] > 0 and row["kgc_kernels"] >= 1
    assert chart.read_bytes().startswith(b"\x89PNG")
