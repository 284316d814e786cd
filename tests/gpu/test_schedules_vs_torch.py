"""Kernels of the generator's schedule capabilities, run against torch: a
grid of two dimensions and persistent programs."""

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from tests.test_schedules import BatchOnGridY, PersistentPointwise, _batched_matmul, _relu_rows
from kgc.tiling import plan as planning
from kgc.tiling.plan import register_schedule

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(planning, "_SCHEDULES", list(planning._SCHEDULES))


def test_batch_on_grid_y_matches_torch(registry):
    register_schedule(BatchOnGridY())
    graph = kgc.compile(_batched_matmul())
    assert graph.module.kernels[next(iter(graph.module.kernels))].grid == (1, 3, 1)
    a = torch.randn(3, 100, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(3, 64, 96, device="cuda", dtype=torch.float16)
    reason = tensor_mismatch(graph.run(a, b, poison=True), a @ b, a.double() @ b.double())
    assert reason is None, reason


def test_persistent_programs_match_torch(registry):
    register_schedule(PersistentPointwise())
    graph = kgc.compile(_relu_rows())
    x = torch.randn(37, 1000, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(graph.run(x, poison=True), torch.relu(x))
