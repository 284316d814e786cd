"""The model suite's CPU check: real transformers architectures, on tiny
configs with random weights, compiled with
`torch.compile(..., backend="kgc", options={"executor": "cpu"})` so that
kgc's kernels run on the CPU executor of tiled kernels, and checked against
eager PyTorch and an f64 reference: a forward and a short greedy
`generate()` with the static and with the dynamic cache. A wrong lowering in
a real model fails here without a GPU.

Also: the executor option itself, the suite's check on results made wrong
on purpose, and `kgc bench --models` on the command line.
"""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("transformers")

from kgc.bench import model_run, models  # noqa: E402
from kgc.diagnostics import KgcError  # noqa: E402
from kgc.tools.cli import run as cli  # noqa: E402

DECODERS = [spec.name for spec in models.CATALOGUE.values() if spec.decoder and not spec.gpu_only]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", DECODERS)
def test_every_row_of_a_tiny_decoder_is_right_on_the_cpu_executor(name):
    result = model_run.run_models(models.select([name], models.CPU), device="cpu")
    rows = {row.row: row for row in result.rows}
    assert set(rows) == {"forward 17", "generate static 4", "generate dynamic 4"}
    for row in result.rows:
        # Each row ran kgc's kernels, not PyTorch alone.
        assert row.kgc_kernels, model_run.describe_row(row)
    wrong = [model_run.describe_row(row) for row in result.rows if row.status != model_run.OK]
    assert not wrong, "\n" + "\n".join(wrong)
    assert all(rows[r].tokens_equal for r in ("generate static 4", "generate dynamic 4"))
    # The embedding's lookup (kg.gather) and the static cache's update at the
    # cache positions (index_copy_, as index_put: kg.scatter) run in kgc.
    for row in result.rows:
        indexed = {op for op in row.kgc_fallbacks
                   if op in ("aten.embedding.default", "aten.index_put.default")}
        assert not indexed, (row.row, indexed)


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
