"""Suite-wide reporting, the tuned-defaults table off by default, and the
fixtures several files use.

The tests pin kgc's heuristic choices (tile sizes, splits, warps); a table
shipped for a target (`kgc.tuned_defaults`) would change them. Tests of the
table name the one they use; `KGC_TUNED_DEFAULTS=on` runs the suite with the
shipped tables instead.
"""

import os

import pytest

os.environ.setdefault("KGC_TUNED_DEFAULTS", "off")


@pytest.fixture
def one_torch_thread():
    """torch on one thread: the CPU executor's tensors are small, and more
    threads only contend (badly so when tests run in parallel). A file
    takes it with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    torch = pytest.importorskip("torch")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def pytest_terminal_summary(terminalreporter, config):
    # pytest-randomly prints its seed in the header, which -q hides; an
    # order-dependent failure needs the seed to be repeated.
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(f"random test order: --randomly-seed={seed} repeats it")


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches cleared before and after: each test compiles what it
    calls, and leaves no compiled frame to the next. A file takes it with
    `pytestmark = pytest.mark.usefixtures("fresh_dynamo")`."""
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
