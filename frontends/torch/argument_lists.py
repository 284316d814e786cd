"""Compiled graphs that take their inputs as one list and empty it.

AOTAutograd calls a compiled graph "boxed": with one list of its inputs,
which the graph may empty, and it keeps no reference of its own. A backward
graph's inputs are the activations its forward saved: emptied at the start,
the list no longer holds them, and each is freed as soon as the graph's last
op that reads it has run (FX's generated code drops every value after its
last use). A graph called with `*arguments` instead holds every input to its
end, so a training step's peak holds every activation saved for its
backward as the gradients are made (what `make_boxed_func` gives: a boxed
call that still unpacks the list into a call with all of it).

`taking_argument_list(module)` makes an FX graph module's generated code
take the list so: `def forward(self, arguments): a, b, = arguments;
arguments.clear()`.

Within such a graph, a call of a submodule (a partition kgc runs) holds its
arguments to the call's end, since the generated code drops a value only
after its last use has returned. `handing_over_arguments(module, names)`
makes the calls of the named submodules take their arguments as one list
too, built just before the call, so that the graph's names no longer hold
those whose last use the call is, and the submodule may drop each while it
runs: `box = packed(a, b); a = b = None; r = self.part(box)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx

__all__ = ["handing_over_arguments", "packed", "taking_argument_list"]


class _ArgumentListCodeGen(torch.fx.graph.CodeGen):
    """FX's Python code generation, but the function takes its placeholders
    as one list, unpacks it and empties it."""

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str, **_) -> str:
        # A free variable reads "name", "name: annotation" or "name = default".
        names = [v.split(":")[0].split("=")[0].strip() for v in free_vars if v != "self"]
        function = getattr(self, "_func_name", "forward")
        lines = [f"def {function}(self, arguments){maybe_return_annotation}:"]
        if names:
            lines.append(f"    {', '.join(names)}, = arguments")
        lines.append("    arguments.clear()")
        return "\n".join(lines)


def taking_argument_list(module: torch.fx.GraphModule) -> Callable[[list], Any]:
    """`module` (an FX graph module, whose code is generated again) as a
    boxed callable: it takes a list of the graph's inputs and empties it
    before the first op runs."""
    module.graph.set_codegen(_ArgumentListCodeGen())
    module.recompile()
    # The generated method itself: a module call's hooks and error wrapping
    # cost microseconds a call, which a decode step's graphs feel.
    forward = module.forward

    def call(arguments: list):
        return forward(arguments)

    call._boxed_call = True  # AOTAutograd's mark of a function that takes a list
    return call


def packed(*arguments) -> list:
    """The arguments as a list, which the call that takes it empties."""
    return list(arguments)


def handing_over_arguments(module: torch.fx.GraphModule, names) -> None:
    """Makes each call of a submodule of `module` named in `names` take its
    positional arguments as one list (`packed`), built just before it, which
    the submodule is to empty. The module's code is generated again."""
    names = set(names)
    for node in list(module.graph.nodes):
        if node.op != "call_module" or node.target not in names or node.kwargs:
            continue
        with module.graph.inserting_before(node):
            box = module.graph.call_function(packed, tuple(node.args))
        node.args = (box,)
    module.recompile()
