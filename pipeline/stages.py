"""The compile pipeline of kgc, as a list of named stages.

    kg     the kernel graph, fused into kernels, tiled, padded and masked
    ttir   one Triton module per kernel (tt dialect), cleaned up
    ttgir  Triton GPU IR (layouts), from Triton
    llir   LLVM IR, from Triton
    ptx    PTX, from Triton
    cubin  the binary for the target GPU, from Triton's ptxas

`kg` and `ttir` come from kgc's passes (`KG_PASSES`, `TTIR_PASSES`); the
rest from `triton.compile`, which needs no GPU. The target reaches the
passes that depend on it as their `target` option: kg-fuse and kg-tile plan
kernels for its SMs (`kgc.targets`), kg-legalize-dot keeps the dots its
tensor cores take.
"""

from __future__ import annotations

import re

from kgc.pipeline.pipeline import Pipeline, PipelineError
from kgc.targets import DEFAULT_SM, SUPPORTED_SMS

STAGES = ("kg", "ttir", "ttgir", "llir", "ptx", "cubin")
TRITON_STAGES = STAGES[2:]

LOWERING_PASS = "convert-kg-to-ttir"

# From a kernel graph to tiled kernels.
KG_PASSES = (
    "kgc-cse",
    "kgc-dce",
    "kg-decompose",
    "kg-fold",
    "kg-simplify",
    "kgc-cse",
    "kgc-dce",
    "kg-split-reduction{{target={target}}}",
    "kg-fuse{{target={target}}}",
    "kg-tile{{target={target}}}",
    "kg-legalize-dot{{target={target}}}",
    "kg-pad-mask",
)
# From tiled kernels to TTIR that Triton's backend takes as is (Triton runs
# no clean-up of its own on TTIR input).
TTIR_PASSES = (LOWERING_PASS, "kgc-cse", "kgc-dce")


FUSION_PASS = "kg-fuse"


def default_pipeline_text(target: int = DEFAULT_SM) -> str:
    passes = [p.format(target=target) for p in KG_PASSES + TTIR_PASSES]
    return f"builtin.module({','.join(passes)})"


def pipeline_for_target(text: str, target: int) -> str:
    """`text` with the compile's target given to each kgc pass that has a
    `target` option and leaves it unset (`kg-legalize-dot`), so that a
    custom `--pass-pipeline` compiles for `--target` as kgc's own does.
    Raises PipelineError for a pass that sets another target: one compile
    cannot legalize for one GPU and build for another."""
    from kgc.passes import get_pass
    from kgc.pipeline.textual import PassSpec, PipelineSyntaxError, parse_pipeline

    try:
        spec = parse_pipeline(text)
    except PipelineSyntaxError as error:
        raise PipelineError(f"invalid pass pipeline: {error}") from None

    def visit(element) -> None:
        if not isinstance(element, PassSpec):
            for inner in element.elements:
                visit(inner)
            return
        registered = get_pass(element.name)
        if registered is None or "target" not in registered.option_specs():
            return
        given = element.options.get("target")
        if given is None:
            element.options["target"] = str(target)
        elif given.strip() != str(target):
            raise PipelineError(f"the pipeline's {element} compiles for sm_{given.strip()}, but the "
                                f"target is sm_{target}: drop the pass's target option, or give "
                                f"--target sm_{given.strip()}")

    visit(spec)
    return str(spec)


def decomposition_pipeline_text(target: int = DEFAULT_SM) -> str:
    """The default pipeline before kg-fuse, for sm_<target>: the graph
    cleaned up and decomposed into the ops kg-fuse partitions (some, such
    as a reduction split in two stages, depend on the target's SMs)."""
    return f"builtin.module({','.join(_before_fusion(target))})"


def _before_fusion(target: int) -> list[str]:
    return [p.format(target=target) for p in KG_PASSES[:_fusion_position()]]


def fusion_pipeline_text(fuse_options: str = "", target: int = DEFAULT_SM) -> str:
    """The default pipeline up to kg-fuse (with `fuse_options`, such as
    `{partition=0,1;2}`), its groups planned for sm_<target>: the graph cut
    into kernels still in graph form."""
    options = " ".join(filter(None, (f"target={target}", fuse_options.strip().strip("{}"))))
    passes = _before_fusion(target) + [f"{FUSION_PASS}{{{options}}}"]
    return f"builtin.module({','.join(passes)})"


def _fusion_position() -> int:
    return next(i for i, p in enumerate(KG_PASSES) if p.split("{")[0] == FUSION_PASS)


def kernel_pipeline_text(target: int = DEFAULT_SM) -> str:
    """The default pipeline after kg-fuse: kernels in graph form to TTIR."""
    position = _fusion_position()
    passes = [p.format(target=target) for p in KG_PASSES[position + 1:] + TTIR_PASSES]
    return f"builtin.module({','.join(passes)})"


def parse_target(text: str | int) -> int:
    """`sm_90`, `90`, `sm_90a`... -> 90. Raises PipelineError, naming the
    value, for anything but an SM kgc compiles for (`SUPPORTED_SMS`)."""
    supported = ", ".join(f"sm_{sm}" for sm in SUPPORTED_SMS)
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str):
        match = re.fullmatch(r"(?:sm_?)?(\d{1,4})a?", text.strip())
        if not match:
            raise PipelineError(f"target '{text}' is not an SM version such as sm_90 "
                                f"(supported: {supported})")
        value = int(match.group(1))
    else:
        raise PipelineError(f"target {text!r} ({type(text).__name__}) is not an SM version: give "
                            f"a string such as 'sm_90' or an integer such as 90")
    if value < 80:
        raise PipelineError(f"target sm_{value} is not supported: kgc needs sm_80 or newer")
    if value not in SUPPORTED_SMS:
        raise PipelineError(f"target sm_{value} is not a GPU kgc compiles for (supported: "
                            f"{supported})")
    return value


def split_at_lowering(pipeline: Pipeline) -> tuple[Pipeline, Pipeline]:
    """(the passes before convert-kg-to-ttir, the rest). The kg stage is the
    IR between the two."""
    position = None
    for index, element in enumerate(pipeline.elements):
        argument = getattr(element, "argument", getattr(element, "name", None))
        if argument == LOWERING_PASS:
            position = index
            break
    if position is None:
        raise PipelineError(f"the pipeline never lowers to TTIR: it needs {LOWERING_PASS} at its "
                            "top level")
    before, after = Pipeline(pipeline.anchor), Pipeline(pipeline.anchor)
    before.elements = pipeline.elements[:position]
    after.elements = pipeline.elements[position:]
    return before, after
