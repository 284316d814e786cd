"""kgc's passes, written in Python, and the registry that names them.

Importing this package registers every built-in pass. To add one:

    from kgc.passes import Pass, register_pass

    @register_pass
    class MyPass(Pass):
        argument = "my-pass"
        summary = "what it does"

        def run(self, op):
            ...
"""

from kgc.passes.registry import (
    Option,
    OptionError,
    Pass,
    PassFailure,
    PluginError,
    function_pass,
    get_pass,
    load_pass_plugin,
    register_pass,
    registered_passes,
)

# Built-in passes register themselves on import.
from kgc.passes import (  # noqa: E402,F401
    cse, dce, decompose, fold, fuse, legalize_dot, pad_mask, simplify, split_reduction, tile,
    to_ttir)

__all__ = [
    "Option",
    "OptionError",
    "Pass",
    "PassFailure",
    "PluginError",
    "function_pass",
    "get_pass",
    "load_pass_plugin",
    "register_pass",
    "registered_passes",
]
