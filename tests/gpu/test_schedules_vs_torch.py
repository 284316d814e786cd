"""Kernels of the generator's schedule capabilities, run against torch: a
grid of two dimensions and persistent programs."""

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from tests.test_schedules import BatchOnGridY, PersistentPointwise, _batched_matmul, _relu_rows
from kgc.tiling import registry as schedules
from kgc.tiling.registry import register_schedule

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(schedules, "_SCHEDULES", list(schedules._SCHEDULES))


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


@pytest.mark.parametrize("rows,columns", [(17, 1000), (3, 4097), (1000, 3)])
def test_a_schedule_from_outside_the_package_matches_torch(rows, columns):
    from kgc.tiling.registry import unregister_schedule
    from tests.test_extra_schedule import RowsOnGridY, _scaled_gelu

    schedule = register_schedule(RowsOnGridY())
    try:
        graph = kgc.compile(_scaled_gelu(rows, columns))
    finally:
        unregister_schedule(schedule.kind)
    x = torch.randn(rows, columns, device="cuda")
    y = torch.randn(rows, columns, device="cuda")
    torch.testing.assert_close(graph.run(x, y, poison=True), torch.nn.functional.gelu(x * y))
