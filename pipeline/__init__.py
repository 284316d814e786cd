"""Building and running pass pipelines; kgc's compile stages and tools."""

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
