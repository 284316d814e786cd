"""A graph's compile choices as data: what a search chose, or a user wrote.

    {"format": "kgc-config-1",
     "function": "rmsnorm_matmul",
     "partition": "0,1,2,3,4,5,6",          # kg-fuse's groups (kgc.fusion)
     "kernels": {"rmsnorm_matmul_0_matmul": {"kind": "matmul", "block_m": 16, ...}}}

`partition` is given to kg-fuse (`partition=`), so the function is cut into
the same kernels, named as kg-fuse names them; each kernel's knobs are then
set as its attributes before kg-tile, which validates them (kgc.tiling.config).
A config is plain JSON: `result.config` of a search, saved by a user and
passed back to `kgc.compile(..., config=)` or `kgc compile --config FILE`.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Mapping

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.targets import DEFAULT_SM
from kgc.tiling.config import ConfigError, KernelConfig
from kgc.tiling.kernel_ops import CONFIG_ATTRIBUTE, config_attribute, kernel_name, kernels_in

FORMAT = "kgc-config-1"


@dataclasses.dataclass(frozen=True)
class GraphConfig:
    function: str
    partition: str | None = None  # None: kg-fuse's default fusion
    kernels: Mapping[str, KernelConfig] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "function": self.function, "partition": self.partition,
                "kernels": {name: config.to_dict() for name, config in sorted(self.kernels.items())}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any) -> "GraphConfig":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise KgcError(f"a kgc config is a JSON object with \"format\": \"{FORMAT}\"")
        function, partition = data.get("function"), data.get("partition")
        if not isinstance(function, str) or not (partition is None or isinstance(partition, str)):
            raise KgcError("a kgc config names its \"function\" and its \"partition\" as strings")
        kernels = data.get("kernels", {})
        if not isinstance(kernels, dict):
            raise KgcError("\"kernels\" of a kgc config maps kernel names to their knobs")
        try:
            parsed = {name: KernelConfig.from_dict(knobs) for name, knobs in kernels.items()}
        except (ConfigError, TypeError) as error:
            raise KgcError(f"kgc config: {error}") from None
        return cls(function, partition, parsed)

    @classmethod
    def load(cls, source: "str | pathlib.Path | dict | GraphConfig") -> "GraphConfig":
        """A config from a GraphConfig, a dict, JSON text or a JSON file."""
        if isinstance(source, GraphConfig):
            return source
        if isinstance(source, dict):
            return cls.from_dict(source)
        text = str(source)
        if isinstance(source, pathlib.Path) or not text.lstrip().startswith("{"):
            try:
                text = pathlib.Path(source).read_text()
            except OSError as error:
                raise KgcError(f"cannot read the config {source}: {error.strerror}") from None
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as error:
            raise KgcError(f"the config is not JSON: {error}") from None

    def fuse_options(self) -> str:
        """kg-fuse's options for this config, in pipeline syntax."""
        if self.partition is None:
            return ""
        return f"{{partition={self.partition} function={self.function}}}"

    def configure_kernels(self, module: ir.Operation) -> None:
        """Sets each named kernel's knobs as its attributes (after kg-fuse,
        before kg-tile). A kernel the config names that the module lacks is
        an error: the config is for another graph or partition."""
        found = {kernel_name(k): k for k in kernels_in(module)}
        for name, config in self.kernels.items():
            kernel = found.get(name)
            if kernel is None:
                raise KgcError(f"the config sets knobs of kernel @{name}, which this graph does "
                               f"not have (kernels: {', '.join(sorted(found)) or 'none'})")
            set_knobs(kernel, config)

    def fuse(self, module: ir.Operation, target: int = DEFAULT_SM, planner=None) -> None:
        """Cuts `module`'s function into this config's kernels (kgc's passes
        up to kg-fuse, planning for sm_<target> with `planner`, a
        kgc.tiling.planner.Planner: None, one of this run's own) and sets
        their knobs."""
        from kgc.pipeline.pipeline import Pipeline
        from kgc.pipeline.stages import fusion_pipeline_text

        Pipeline.parse(fusion_pipeline_text(self.fuse_options(), target)).run(
            module, planner=planner)
        self.configure_kernels(module)

    def apply(self, module: ir.Operation, target: int, planner=None) -> str:
        """`fuse`, then the pipeline that compiles the rest (kg-tile onwards),
        to run with the same `planner`."""
        from kgc.pipeline.stages import kernel_pipeline_text

        self.fuse(module, target, planner)
        return kernel_pipeline_text(target)


def set_knobs(kernel: ir.Operation, config: KernelConfig) -> None:
    """Writes the knobs `config` sets into the config attribute of `kernel`
    (a kg.kernel in graph form), where kg-tile reads them; knobs it leaves
    unset keep their values."""
    with kernel.context:
        knobs = config_attribute(kernel)
        merged = {} if knobs is None else {knobs[i].name: knobs[i].attr for i in range(len(knobs))}
        new = config.to_attribute()
        merged.update({new[i].name: new[i].attr for i in range(len(new))})
        kernel.attributes[CONFIG_ATTRIBUTE] = ir.DictAttr.get(merged)
