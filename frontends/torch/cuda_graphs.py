"""CUDA graphs for the kgc backend's mode "reduce-overhead".

`CudaGraphed` owns the capture and replay of one compiled aten graph as
CUDA graphs: the callable that `Backend.compile_aten` makes, kgc's kernel
graphs and the aten ops PyTorch runs between them, so that one replay
launches all of them with no Python in between. It keeps one CUDA graph per
static signature of the inputs (each tensor's device, dtype, shape and
strides; each other input's value):

- the first call with a new signature runs as compiled, on the caller's
  tensors. It is the warm-up: it loads kgc's kernels, makes cuBLAS's
  handles and compiles any bucket, none of which may happen while a stream
  is captured;
- the second captures the graph (`torch.cuda.graph`, on a stream and a
  memory pool of its own, after one more run on that stream) on static
  copies of the inputs and replays it; every later call copies the
  caller's tensors into those copies and replays.

Behind Dynamo's guards a graph of static shapes is only ever called with
inputs of one signature, which is then read at the first call alone (a
model's parameters are inputs: reading theirs every call cost half a
millisecond of host time).

Inputs whose address does not change from call to call (a module's
parameters and buffers, which Dynamo passes as inputs; tensors marked with
`torch._dynamo.mark_static_address`, such as transformers' static KV cache)
are captured where they are, not copied; if one of them moves, the graph is
captured again.

Results live in the graph's memory pool, as with torch's own CUDA graphs
(Inductor's `mode="reduce-overhead"`): a call's results stay valid until the
next call of the compiled model, which may overwrite them; clone what must
outlive it.

A graph that cannot be captured runs without CUDA graphs, with one
`KgcFallbackWarning` saying why: inputs or results off CUDA devices, an op
torch marks unsafe to capture or one whose result size depends on data,
inputs whose elements overlap, or a capture that failed.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable

import torch
import torch.fx

from kgc.torch.convert import KgcFallbackWarning

__all__ = ["CudaGraphed", "capture_obstacle", "mutated_inputs", "static_inputs", "static_shapes"]

# Signatures past this many in one compiled graph run without CUDA graphs:
# a graph and its memory pool per shape would hold memory without bound.
MAX_GRAPHS = 64


def static_inputs() -> frozenset[int]:
    """The inputs that AOTAutograd says keep their address (parameters and
    buffers of an inlined module, tensors marked static), read from the
    tracing context of the graph being compiled; empty outside one."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    indices = getattr(metadata, "static_input_indices", None) or ()
    return frozenset(int(i) for i in indices)


def static_shapes(module: torch.fx.GraphModule) -> bool:
    """Whether every input of the aten graph `module` is a tensor of static
    shape and strides: behind Dynamo's guards, every call then gives
    inputs of one signature."""
    for node in module.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or any(
                isinstance(n, torch.SymInt) for n in (*value.shape, *value.stride())):
            return False
    return True


def _view_base(node):
    """The tensor a chain of view ops starts from."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and \
            isinstance(node.target, torch._ops.OpOverload) and node.args and \
            any(r.alias_info is not None and not r.alias_info.is_write
                for r in node.target._schema.returns):
        node = node.args[0]
    return node


def mutated_inputs(module: torch.fx.GraphModule) -> frozenset[int]:
    """The inputs (by position) that an op of `module` writes in place: a
    copied input must be copied back to the caller's tensor after a replay."""
    placeholders = {n: i for i, n in enumerate(n for n in module.graph.nodes
                                               if n.op == "placeholder")}
    mutated = set()
    for node in module.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        for position, argument in enumerate(node.target._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = node.args[position] if position < len(node.args) \
                else node.kwargs.get(argument.name)
            base = _view_base(value)
            if base in placeholders:
                mutated.add(placeholders[base])
    return frozenset(mutated)


def capture_obstacle(module: torch.fx.GraphModule) -> str | None:
    """Why the aten graph `module` cannot be captured as a CUDA graph, or
    None: an input or result off CUDA devices (a replay neither reads new
    host values nor writes host results), an op torch marks unsafe to
    capture, or an op whose result size depends on data (it synchronizes)."""
    for node in module.graph.nodes:
        if node.op == "placeholder":
            values = [node.meta.get("val")]
        elif node.op == "output":
            values = []
            torch.fx.node.map_arg(node.args[0], lambda n: values.append(n.meta.get("val")) or n)
        else:
            continue
        for value in values:
            if isinstance(value, torch.Tensor) and value.device.type != "cuda":
                what = "an input" if node.op == "placeholder" else "a result"
                return f"{what} is on {value.device}, not a CUDA device"
    try:
        from torch._inductor.utils import get_first_incompatible_cudagraph_node
    except ImportError:
        return None
    try:
        node = get_first_incompatible_cudagraph_node(module)
    except Exception:  # noqa: BLE001 - torch's check is private; without it, the capture checks
        return None
    if node is not None:
        return f"{node.target} ({node.name}) cannot be captured in a CUDA graph"
    return None


def _dense(tensor: torch.Tensor) -> bool:
    """Whether the tensor's elements fill its span of memory once each, in
    some order of its dims: then a static copy of its strides holds it."""
    if tensor.numel() == 0:
        return True
    expected = 1
    for size, stride in sorted(((size, stride) for size, stride in
                                zip(tensor.shape, tensor.stride()) if size != 1),
                               key=lambda pair: pair[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _signature(arguments, device_type: str = "cuda") -> tuple | None:
    """What a CUDA graph is captured for: every tensor's device, dtype,
    shape and strides, every other argument's value; None for arguments a
    graph cannot take (host tensors, whose values a replay would not read;
    tensors on a second device; tensors whose elements overlap, which have
    no static copy)."""
    key = []
    devices = set()
    for argument in arguments:
        if isinstance(argument, torch.Tensor):
            if argument.device.type != device_type or not _dense(argument):
                return None
            devices.add(argument.device)
            if len(devices) > 1:  # one graph is captured on one device
                return None
            key.append((argument.device, argument.dtype, tuple(argument.shape),
                        argument.stride()))
        elif argument is None or isinstance(argument, (bool, int, float, str)):
            key.append((type(argument), argument))
        else:
            return None
    return tuple(key)


@dataclasses.dataclass
class _Recording:
    """One captured CUDA graph: its inputs as captured (the caller's static
    tensors, static copies of the others), which of them are copies, the
    addresses of the static ones, and its results."""

    graph: torch.cuda.CUDAGraph
    inputs: list
    copied: tuple[int, ...]
    static_addresses: tuple[tuple[int, int], ...]  # (input, data_ptr)
    results: object


class CudaGraphed:
    """`run` (a compiled aten graph's callable on its flat inputs) with
    every signature after its first call replayed from a CUDA graph."""

    # The device whose tensors a graph is captured on.
    device_type = "cuda"

    def __init__(self, run: Callable, name: str, static: frozenset[int] = frozenset(),
                 mutated: frozenset[int] = frozenset(), guarded: bool = False):
        """`guarded`: every call's inputs have the first's signature (a
        graph of static shapes behind Dynamo's guards, which check each
        tensor's device, dtype, shape and strides): it is then read once,
        not per call, where reading it costs several microseconds a tensor
        (a model's parameters are inputs: half a millisecond a call)."""
        self.run = run
        self.name = name
        self.static = static
        self.mutated = mutated
        self.guarded = guarded
        self._guarded_key: tuple | None = None
        self.warmed: set[tuple] = set()
        self.recordings: dict[tuple, _Recording] = {}
        self.uncapturable: set[tuple] = set()
        self.moved: set[int] = set()  # static inputs seen at a new address: copied since
        self._lock = threading.Lock()
        self._warned = False

    @property
    def graph_count(self) -> int:
        """How many CUDA graphs are held (one per signature captured)."""
        return len(self.recordings)

    def __call__(self, *arguments):
        key = self._guarded_key
        if key is None:
            key = _signature(arguments, self.device_type)
            if self.guarded and key is not None:
                self._guarded_key = key
        if key is None or key in self.uncapturable:
            if key is None:
                self._warn("an input is a host tensor, on a second device, a tensor whose "
                           "elements overlap or a value of no simple type")
            return self.run(*arguments)
        with self._lock:
            recording = self.recordings.get(key)
            if recording is not None:
                moved = [i for i, address in recording.static_addresses
                         if arguments[i].data_ptr() != address]
                if moved:
                    # An input taken for static moved: it is copied from now
                    # on, so that one that moves every call is captured once more
                    # rather than on every call.
                    self.moved.update(moved)
                    del self.recordings[key]
                    recording = None
            if recording is None:
                if key not in self.warmed:
                    self.warmed.add(key)
                    return self.run(*arguments)
                if len(self.recordings) >= MAX_GRAPHS:
                    self.uncapturable.add(key)
                    self._warn(f"more than {MAX_GRAPHS} input shapes were seen")
                    return self.run(*arguments)
                recording = self._capture(key, arguments)
                if recording is None:
                    return self.run(*arguments)
                self.recordings[key] = recording
            return self._replay(recording, arguments)

    def _is_static(self, index: int, argument) -> bool:
        if index in self.moved:
            return False
        return index in self.static or isinstance(argument, torch.nn.Parameter) or \
            hasattr(argument, "_dynamo_static_input_type")

    def _capture(self, key: tuple, arguments) -> _Recording | None:
        inputs, copied, addresses = [], [], []
        device = None
        for index, argument in enumerate(arguments):
            if not isinstance(argument, torch.Tensor):
                inputs.append(argument)
                continue
            device = argument.device if device is None else device
            if self._is_static(index, argument):
                inputs.append(argument)
                addresses.append((index, argument.data_ptr()))
            else:
                copy = torch.empty_strided(argument.shape, argument.stride(),
                                           dtype=argument.dtype, device=argument.device)
                copy.copy_(argument)
                inputs.append(copy)
                copied.append(index)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
                # The capture runs on a stream of its own, which kgc's
                # launches read as the current one. A run on that stream
                # first makes what torch makes per stream on first use (a
                # cuBLAS workspace) outside the capture, as torch's own
                # cudagraphify does; not where the graph writes an input in
                # place, which would then be written twice.
                caller = torch.cuda.current_stream()
                stream = torch.cuda.Stream()
                stream.wait_stream(caller)
                if not self.mutated:
                    with torch.cuda.stream(stream):
                        self.run(*inputs)
                caller.wait_stream(stream)
                with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                    results = self.run(*inputs)
        except Exception as error:  # noqa: BLE001 - any failure leaves the call uncaptured
            self.uncapturable.add(key)
            self._warn(f"the capture failed: {error}")
            return None
        return _Recording(graph, inputs, tuple(copied), tuple(addresses), results)

    def _replay(self, recording: _Recording, arguments):
        inputs = recording.inputs
        for index in recording.copied:
            inputs[index].copy_(arguments[index])
        recording.graph.replay()
        for index in recording.copied:
            if index in self.mutated:
                arguments[index].copy_(inputs[index])
        results = recording.results
        # A new container each call: the callers of a compiled graph may
        # change the one they are given.
        if type(results) in (list, tuple):
            return type(results)(results)
        return results

    def _warn(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"kgc: {self.name} runs without CUDA graphs: {reason}",
                          KgcFallbackWarning, stacklevel=3)
