"""The memory plan of a function (kgc.pipeline.memory_plan): where each
intermediate lives in the one workspace a call uses for them, written to
manifest.json and read from there by the runtime and by the C export alike
(no GPU needed)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import kgc
from kgc.diagnostics import KgcError
from kgc.element_types import torch_dtype
from kgc.export import export_c
from kgc.pipeline.compiler import Function, Launch, TensorSpec
from kgc.pipeline.memory_plan import (MemoryPlan, Placement, argument_releases, buffer_steps,
                                      lifetimes, plan_memory)
from tests.cases import ALL_CASES


def chain(*specs, results=(1,)):
    """A function of one argument whose launches each make one buffer from
    the one before, numbered from 1; `results` are returned."""
    buffers = [TensorSpec((7,), "f32")] + [TensorSpec(shape, dtype) for shape, dtype in specs]
    launches = [Launch(f"k{i}", [i], [i + 1]) for i in range(len(specs))]
    return Function("f", buffers, 1, launches, list(results))


def _live_at_once(function, plan):
    """Pairs of placements whose lives meet."""
    lives = lifetimes(function)
    placed = plan.intermediates
    return [(a, b) for i, a in enumerate(placed) for b in placed[i + 1:]
            if lives[a.buffer][0] <= lives[b.buffer][1] and lives[b.buffer][0] <= lives[a.buffer][1]]


def test_intermediates_live_at_once_get_disjoint_aligned_ranges_and_results_none():
    function = chain(((3, 17), "f16"), ((1000,), "f32"), ((4097,), "i1"), ((1,), "f16"),
                     ((64, 64), "bf16"), results=(2,))
    plan = plan_memory(function)
    assert [p.buffer for p in plan.intermediates] == [1, 3, 4, 5]  # 2 is a result
    assert [p.bytes for p in plan.intermediates] == [3 * 17 * 2, 4097, 2, 64 * 64 * 2]
    assert all(p.offset % 256 == 0 for p in plan.intermediates)
    pairs = _live_at_once(function, plan)
    assert pairs  # each launch reads one and writes the next
    for a, b in pairs:
        assert a.offset + a.bytes <= b.offset or b.offset + b.bytes <= a.offset
    end = max(p.offset + p.bytes for p in plan.intermediates)
    assert end <= plan.workspace_bytes < end + 256
    plan.check(function)


def test_intermediates_whose_lives_do_not_meet_share_bytes():
    # Six buffers of 4 KiB, each read by the next launch only: two are live
    # at a time, so two places serve all six (the sum would be 24 KiB).
    function = chain(*[((1024,), "f32")] * 6, results=(6,))
    plan = plan_memory(function)
    assert plan.workspace_bytes == 2 * 4096
    assert len({p.offset for p in plan.intermediates}) == 2
    plan.check(function)
    # A buffer the last launch reads again stays live throughout: it shares
    # with none of the others.
    long_lived = Function("f", function.buffers, 1,
                          function.launches[:-1] + [Launch("k5", [5, 1], [6])], [6])
    plan = plan_memory(long_lived)
    first = next(p for p in plan.intermediates if p.buffer == 1)
    assert all(p.offset != first.offset for p in plan.intermediates if p.buffer != 1)
    assert plan.workspace_bytes == 3 * 4096
    plan.check(long_lived)


def test_a_function_whose_fresh_buffers_are_all_results_needs_no_workspace():
    plan = plan_memory(chain(((17, 1000), "f32")))
    assert plan.intermediates == () and plan.workspace_bytes == 0


def test_the_alignment_is_the_plans():
    plan = plan_memory(chain(((3,), "f32"), ((5,), "f32"), ((1,), "f32"), results=(3,)),
                       alignment=1024)
    assert sorted(p.offset for p in plan.intermediates) == [0, 1024]
    assert plan.workspace_bytes == 2048


def test_a_streamed_call_makes_each_buffer_at_its_first_writer_and_frees_it_after_its_last():
    # k0: 0 -> 1 (a large intermediate), k1: 1 -> 2, k2: 0 -> 3, k3: (3, 0) -> 4;
    # 2 and 4 are results.
    sizes = {1: 1 << 16, 2: 1024, 3: 4096, 4: 1024}
    buffers = [TensorSpec((7,), "f32")] + [TensorSpec((sizes[b] // 4,), "f32") for b in sizes]
    launches = [Launch("k0", [0], [1]), Launch("k1", [1], [2]), Launch("k2", [0], [3]),
                Launch("k3", [3, 0], [4])]
    function = Function("f", buffers, 1, launches, [2, 4])
    made, freed = buffer_steps(function)
    assert made == ((1,), (2,), (3,), (4,))
    assert freed == ((), (1,), (), (3,))  # results are the caller's to free
    # What is live launch by launch peaks below the workspace plus every
    # result made at once, which is what a call without streaming holds.
    live, peak = set(), 0
    for step in range(len(launches)):
        live |= set(made[step])
        peak = max(peak, sum(sizes[b] for b in live))
        live -= set(freed[step])
    assert peak == sizes[1] + sizes[2]
    assert plan_memory(function).workspace_bytes + sizes[2] + sizes[4] == peak + sizes[4]


def test_a_call_that_owns_its_arguments_drops_each_after_its_last_reader():
    # Arguments 0..3: 0 is read by k0 and k2, 1 by k1 only, 2 by no launch,
    # 3 is returned as it is (a result the caller gets back).
    buffers = [TensorSpec((7,), "f32") for _ in range(6)]
    launches = [Launch("k0", [0], [4]), Launch("k1", [4, 1], [5]), Launch("k2", [5, 0], [4])]
    function = Function("f", buffers, 4, launches, [4, 3])
    assert argument_releases(function) == ((2,), (1,), (0,))


def test_a_function_without_launches_releases_nothing():
    function = Function("f", [TensorSpec((7,), "f32")], 1, [], [0])
    assert argument_releases(function) == ()


@pytest.mark.parametrize("plan,message", [
    (MemoryPlan(256, (Placement(1, 0, 12), Placement(2, 0, 20)), 512), "overlap"),
    (MemoryPlan(256, (Placement(1, 0, 12), Placement(2, 100, 20)), 512), "multiple of 256"),
    (MemoryPlan(256, (Placement(1, 0, 12), Placement(2, 256, 20)), 260), "past the workspace"),
    (MemoryPlan(256, (Placement(1, 0, 12), Placement(2, 256, 24)), 512), "takes 20 bytes"),
    (MemoryPlan(256, (Placement(1, 0, 12),), 512), "intermediates are \\[1, 2\\]"),
    (MemoryPlan(100, (Placement(1, 0, 12), Placement(2, 200, 20)), 512), "power of two"),
])
def test_a_plan_that_does_not_fit_its_function_is_named(plan, message):
    function = chain(((3,), "f32"), ((5,), "f32"), ((1,), "f32"), results=(3,))
    with pytest.raises(KgcError, match=message):
        plan.check(function)


# -- the manifest, the runtime and the export read one plan ---------------------

# Two kernels with an intermediate between them: split-KV attention and the
# kernel that combines its splits.
ATTENTION = next(c for c in ALL_CASES if c.name == "attention_decode-1x8x1x1000x64")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    graph = kgc.compile(ATTENTION.graph("f16"), target="sm_90")
    directory = tmp_path_factory.mktemp("attention")
    graph.module.write(directory, "attention")
    return directory


def _exported_workspace(graph, directory) -> tuple[dict[int, int], int, int]:
    """({buffer: offset}, workspace bytes, workspace alignment) as the C
    source the export writes for `graph` uses them."""
    exported = export_c(graph, directory)
    source = exported.source.read_text()
    offsets = {int(b): int(o) for b, o in
               re.findall(r"CUdeviceptr kgc_buffer(\d+) = workspace \+ (\d+);", source)}
    alignment = int(re.search(r"workspace % (\d+) != 0", source).group(1))
    return offsets, exported.workspace_bytes[graph.name], alignment


def _runtime_workspace(graph) -> tuple[dict[int, int], int]:
    layout = graph.buffer_layout()
    return dict(layout.offsets), layout.workspace_bytes


def test_the_manifest_holds_the_plan_that_runtime_and_export_use(written, tmp_path):
    pytest.importorskip("torch")
    manifest = json.loads((written / "manifest.json").read_text())
    memory = manifest["functions"][0]["memory"]
    assert memory["alignment"] == 256 and memory["intermediates"]
    offsets = {p["buffer"]: p["offset"] for p in memory["intermediates"]}
    graph = kgc.runtime.load(written)
    assert _runtime_workspace(graph) == (offsets, memory["workspace_bytes"])
    exported_offsets, exported_bytes, alignment = _exported_workspace(graph, tmp_path)
    assert exported_offsets == offsets and alignment == 256
    assert exported_bytes >= memory["workspace_bytes"]  # any global scratch follows


def test_runtime_and_export_follow_a_changed_plan(written, tmp_path):
    pytest.importorskip("torch")
    path = written / "manifest.json"
    manifest = json.loads(path.read_text())
    function = manifest["functions"][0]
    before = function["memory"]
    # A coarser alignment, the intermediates in reverse order, and room to
    # spare at the start: a plan the pipeline would not make.
    alignment, offset, placed = 4096, 4096, []
    for placement in reversed(before["intermediates"]):
        placed.append({**placement, "offset": offset})
        offset += -(-placement["bytes"] // alignment) * alignment
    function["memory"] = {"alignment": alignment, "workspace_bytes": offset,
                          "intermediates": placed}
    changed = tmp_path / "changed"
    shutil.copytree(written, changed)
    (changed / "manifest.json").write_text(json.dumps(manifest))
    offsets = {p["buffer"]: p["offset"] for p in placed}
    assert offsets != {p["buffer"]: p["offset"] for p in before["intermediates"]}
    graph = kgc.runtime.load(changed)
    assert _runtime_workspace(graph) == (offsets, offset)
    exported_offsets, exported_bytes, exported_alignment = _exported_workspace(
        graph, tmp_path / "c")
    assert exported_offsets == offsets and exported_alignment == alignment
    assert exported_bytes >= offset


def test_a_manifest_whose_plan_overlaps_is_refused(written, tmp_path):
    changed = tmp_path / "overlapping"
    shutil.copytree(written, changed)
    manifest = json.loads((changed / "manifest.json").read_text())
    memory = manifest["functions"][0]["memory"]
    memory["intermediates"] = [{**p, "offset": 0} for p in memory["intermediates"]] * 2
    (changed / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(KgcError, match="manifest.json'.*memory plan of @"):
        kgc.runtime.load(changed)


def test_launches_get_the_pointers_the_plan_gives(written):
    # The launching itself, on the CPU: each launch records the pointers it
    # is given, and an intermediate's is the workspace's plus its offset.
    torch = pytest.importorskip("torch")
    from kgc.runtime import launching
    from kgc.runtime.internals import LaunchCall

    graph = kgc.runtime.load(written)
    function = graph.function
    calls = []

    def record(*arguments):
        calls.append(arguments)

    bound = launching.BoundFunction("cpu", tuple(
        launching.BoundLaunch(launch.kernel, (1, 2, 3), tuple(launch.inputs + launch.outputs),
                              tuple(launch.scalars), LaunchCall(record, ("fixed",)),
                              LaunchCall(record, ("bare",)))
        for launch in function.launches), (None, None), lambda device: "stream")
    buffers = [torch.randn(spec.shape).to(torch_dtype(spec.dtype))
               for spec in function.buffers[:function.num_arguments]]
    buffers += [None] * (len(function.buffers) - function.num_arguments)
    launching.launch(bound, graph.buffer_layout(), buffers, poison=True)
    assert len(calls) == len(function.launches)
    pointers = {}
    for launch, arguments in zip(function.launches, calls):
        assert arguments[:5] == (1, 2, 3, "stream", "fixed")
        operands = launch.inputs + launch.outputs
        pointers.update(zip(operands, arguments[5:5 + len(operands)]))
    placements = function.memory.intermediates
    base = pointers[placements[0].buffer] - placements[0].offset
    assert {p.buffer: pointers[p.buffer] - base for p in placements} == function.memory.offsets()
    for index in function.results:  # results are tensors of their own, poisoned
        assert buffers[index].isnan().all()


def test_a_streamed_twin_leaves_the_graph_it_came_from_as_it_was(written):
    # The backend keeps one compiled graph per graph text, shared by every
    # partition of that text: a training half's streamed call must not
    # change an inference graph's.
    graph = kgc.runtime.load(written)
    twin = graph.streamed()
    assert twin.streams_buffers and not graph.streams_buffers
    assert twin.function is graph.function and twin.name == graph.name


def test_the_backend_streams_the_halves_of_a_training_graph_only(written):
    import importlib

    partition_for_kind = importlib.import_module("kgc.torch.backend")._partition_for_kind

    def for_kind(run, kind):
        # The partition's converted graph plays no part in the choice.
        return partition_for_kind(None, run, kind)

    graph = kgc.runtime.load(written)
    assert for_kind(graph, "inference").run is graph
    assert not for_kind(graph, "inference").takes_list
    assert for_kind(graph, "forward").run.streams_buffers
    assert for_kind(graph, "backward").run.streams_buffers
    assert for_kind(graph, "forward").takes_list and for_kind(graph, "backward").takes_list
    cpu_run = object()  # the CPU executor's callable is not a compiled graph
    assert for_kind(cpu_run, "backward").run is cpu_run
