"""The tuned-defaults builder on a GPU: two small shapes searched at low
effort (8 configs each, within a minute), the table it writes loads, and
the default compile follows its decisive entries; the checker
compares the default with the search."""

import dataclasses
import json

import pytest

from kgc.bench.tune_defaults import Shape, build, check
from kgc.pipeline.compiler import compile_module
from kgc.tiling.config import CONFIG_CLASSES, KernelConfig
from kgc.tiling.kernel_ops import config_attribute, kernels_in
from kgc.tuned_defaults import ENVIRONMENT, Entry, load_table

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

SHAPES = [Shape.of("matmul", m=17, n=512, k=512), Shape.of("softmax", rows=16, columns=512)]


def _default_config(shape: Shape, sm: int, kind: str) -> KernelConfig:
    module = shape.build().build()
    with module.context:
        compile_module(module, emit="kg", target=sm)
        (kernel,) = [k for k in kernels_in(module.operation)]
        return CONFIG_CLASSES[kind].from_attribute(config_attribute(kernel))


def test_the_builder_writes_a_table_the_default_compile_uses(tmp_path, monkeypatch):
    out = tmp_path / "table.json"
    lines = []
    table = build(SHAPES, out, budget_s=300, shape_budget_s=60, effort="low",
                  log=lines.append, reports=tmp_path / "reports")
    # Each shape's search report: the evidence behind its entries.
    reports = [json.loads(p.read_text()) for p in sorted((tmp_path / "reports").iterdir())]
    assert [r["shape"] for r in reports] == [s.name for s in SHAPES]
    assert all(any(row["status"] == "timed" for row in r["rows"]) for r in reports)
    major, minor = torch.cuda.get_device_capability()
    sm = major * 10 + minor
    loaded = load_table(out)
    assert loaded.to_json() == table.to_json()
    assert loaded.target == f"sm_{sm}" and loaded.gpu == torch.cuda.get_device_name()
    # A shape whose search timed no config but the heuristic's gives no
    # entry, and says so; one whose heuristic config was the fastest gives
    # an entry that is not decisive.
    assert {e.workload for e in loaded.entries} <= {s.name for s in SHAPES}, lines
    for shape in SHAPES:
        (line,) = [x for x in lines if f"] {shape.name}: " in x]
        assert ("no entry" in line) == (shape.name not in {e.workload for e in loaded.entries})
    for entry in loaded.entries:
        assert entry.time_us > 0 and entry.heuristic_us > 0
        # The search's best is no slower than the heuristic it timed.
        assert entry.time_us <= entry.heuristic_us

    # The default compile follows the product's entry where its win is
    # decisive, else the heuristics.
    by_kind = {e.kind: e for e in loaded.entries}
    monkeypatch.setenv(ENVIRONMENT, "off")
    heuristic = _default_config(SHAPES[0], sm, "matmul")
    monkeypatch.setenv(ENVIRONMENT, str(out))
    matmul = _default_config(SHAPES[0], sm, "matmul")
    entry = by_kind.get("matmul")
    expected = (entry.config.canonical({"m": 17, "n": 512, "k": 512})
                if entry is not None and entry.decisive else heuristic)
    for knob in ("block_m", "block_n", "block_k", "num_warps", "num_stages"):
        if getattr(expected, knob) is not None:
            assert getattr(matmul, knob) == getattr(expected, knob), knob

    # A decisive entry of another config: the compile follows it; with the
    # table off it does not.
    base = entry.config if entry is not None else heuristic
    warps = next(w for w in (2, 4, 8) if w not in (heuristic.num_warps, base.num_warps))
    made = Entry("matmul", "f16", "", {"batch": 1, "m": 17, "n": 512, "k": 512},
                 dataclasses.replace(base, num_warps=warps), 1.0, 2.0, SHAPES[0].name)
    entries = tuple(e for e in loaded.entries if e.kind != "matmul") + (made,)
    out.write_text(dataclasses.replace(loaded, entries=entries).to_json())
    monkeypatch.setenv(ENVIRONMENT, str(out))
    assert _default_config(SHAPES[0], sm, "matmul").num_warps == warps
    monkeypatch.setenv(ENVIRONMENT, "off")
    assert _default_config(SHAPES[0], sm, "matmul").num_warps == heuristic.num_warps

    # A second run keeps what the first measured (and measures only the
    # shapes that gave no entry).
    again = build(SHAPES, out, budget_s=300, shape_budget_s=60, effort="low",
                  log=lines.append)
    assert again.entries == load_table(out).entries


def test_the_checker_compares_the_default_with_the_search():
    lines = []
    (result,) = check([(SHAPES[1].name, SHAPES[1].build())], "off", budget_s=5, effort="low",
                      tolerance=0.05, log=lines.append)
    assert result.default_us > 0 and result.heuristic_us > 0 and result.searched_us > 0
    # The search's result is the faster of its choice and the default.
    assert result.searched_us <= result.default_us and result.ratio >= 1.0
    assert SHAPES[1].name in lines[-1]
