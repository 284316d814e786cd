"""Whether compiled kernels fit their target: the shared memory, registers
and threads one program uses (Triton's metadata, and the registers ptxas
allotted, read from the cubin) against the target's per-block limits
(`kgc.targets.LIMITS`).

ptxas compiles a kernel whatever shared memory it asks for: the driver
refuses it only at launch. kgc checks at compile time and again at C export
(a loaded module may come from elsewhere), naming the kernel, what it
needs, the limit, and the knobs that set its size.
"""

from __future__ import annotations

import re

from kgc.diagnostics import Diagnostic, KgcError
from kgc.targets import target_limits

# The knobs whose values set a program's shared memory (the tiles each
# pipeline stage holds) and its registers (the tiles over its threads).
_SHARED_KNOBS = re.compile(r"block_\w+|num_stages")
_REGISTER_KNOBS = re.compile(r"block_\w+|num_warps")


def kernel_knobs(kg_stage: str | None, kernel) -> dict[str, int]:
    """The integer knobs of `kernel` as the config attribute of the kg
    stage's `kg.kernel` op holds them (block sizes, warps, stages), else its
    warps and stages."""
    if kg_stage:
        match = re.search(rf"kg\.kernel @{re.escape(kernel.name)}\([^\n]*?\bconfig = \{{([^}}]*)\}}",
                          kg_stage)
        if match:
            return {name: int(value) for name, value in
                    re.findall(r"\b(\w+) = (-?\d+) : i64", match.group(1))}
    return {"num_warps": kernel.num_warps, "num_stages": kernel.num_stages}


def _now(knobs: dict[str, int], pattern: re.Pattern) -> str:
    chosen = [f"{name}={value}" for name, value in knobs.items() if pattern.fullmatch(name)]
    return " ".join(chosen)


def resource_problem(kernel, target: int, kg_stage: str | None = None) -> str | None:
    """Why `kernel` (compiled, with an artifact) cannot launch on
    sm_<target>, or None when it fits."""
    artifact = kernel.artifact
    if artifact is None:
        return None
    limits = target_limits(target)
    knobs = kernel_knobs(kg_stage, kernel)
    threads = int(artifact.metadata.get("num_warps", kernel.num_warps)) * 32
    if artifact.shared > limits.max_shared_mem:
        return (f"kernel @{kernel.name} needs {artifact.shared} B of shared memory per program; "
                f"sm_{target} allows at most {limits.max_shared_mem} B per block: lower its tile "
                f"sizes or num_stages ({_now(knobs, _SHARED_KNOBS)})")
    if threads > limits.max_threads:
        return (f"kernel @{kernel.name} needs {threads} threads per program; sm_{target} runs at "
                f"most {limits.max_threads}: lower num_warps ({_now(knobs, _REGISTER_KNOBS)})")
    registers = artifact.resources.get("registers")
    if registers is not None and registers * threads > limits.max_num_regs:
        return (f"kernel @{kernel.name} needs {registers} registers x {threads} threads = "
                f"{registers * threads} registers per program; sm_{target} has "
                f"{limits.max_num_regs} per block: lower its tile sizes or num_warps "
                f"({_now(knobs, _REGISTER_KNOBS)})")
    return None


def check_resources(kernels, target: int, kg_stage: str | None = None) -> None:
    """Raises KgcError naming every kernel of `kernels` (compiled Kernel
    records) that does not fit sm_<target>."""
    problems = [problem for kernel in kernels
                if (problem := resource_problem(kernel, target, kg_stage)) is not None]
    if problems:
        raise KgcError([Diagnostic("error", "", problem) for problem in problems])
