"""The pass manager (pipelines, their textual form, IR printing) and the compile
driver (stages, Triton workers, artifacts, the kernel cache and its shared Redis
level: `kernel_cache`, `remote_cache`; whole default compiles: `graph_cache`). The
command-line tools are in kgc.tools."""

from kgc.pipeline.instrumentation import ALL_PASSES, IRPrinting
from kgc.pipeline.pipeline import Pipeline, PipelineError
from kgc.pipeline.textual import PassSpec, PipelineSpec, PipelineSyntaxError, parse_pipeline

__all__ = [
    "ALL_PASSES",
    "IRPrinting",
    "PassSpec",
    "Pipeline",
    "PipelineError",
    "PipelineSpec",
    "PipelineSyntaxError",
    "parse_pipeline",
]
