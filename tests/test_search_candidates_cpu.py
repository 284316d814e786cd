"""Every kernel the search may choose is right at kgc's default config: the
candidate partitions (`kgc.search.space.variant_space`) of tiny models'
kernel graphs, as the torch backend makes them, each distinct kernel tiled
for sm_90 and run on the CPU executor against the reference, on random
inputs.

The search checks its candidates on a GPU, and there it rejected a wrong
one: BERT's attention mask, a result of its partition, fused beside
softmax(scores + mask) V, was stored for one block of keys only. Only a
candidate partition made that kernel, so the model's own rows stayed
right. This catches such a lowering without a GPU.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from mlir import ir  # noqa: E402

from kgc.accuracy import mismatch  # noqa: E402
from kgc.bench import models  # noqa: E402
from kgc.bench.capture import forward_graphs  # noqa: E402
from kgc.execution import run_tiled  # noqa: E402
from kgc.execution.errors import TileProgramError  # noqa: E402
from kgc.parsing import canonical_source  # noqa: E402
from kgc.reference import evaluate  # noqa: E402
from kgc.search.kernels import compile_candidate, index_bounds, input_specs  # noqa: E402
from kgc.search.space import variant_space  # noqa: E402
from kgc.search.verify import random_inputs  # noqa: E402
from tests.comparison import as_tuple  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

# More tokens than one block of keys (64), so that a loop over them runs
# more than one step.
TOKENS = 100


def _wrong_kernels(text: str) -> list[str]:
    canonical, function, _ = canonical_source(text)
    _, kernels = variant_space(canonical, function, "default", 90)
    wrong = []
    for number, variants in enumerate(kernels.values()):
        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            module = ir.Module.parse(variants.inline_text).operation
            inputs = random_inputs(input_specs(module), number, "cpu", index_bounds(module))
            eager = evaluate(module, None, inputs)
            exact = evaluate(module, None, inputs, exact=True)
        tiled = compile_candidate(variants.launch_text, variants.default, 90, emit="kg")
        try:
            got = run_tiled(tiled.stages["kg"], None, *inputs)
        except TileProgramError as error:  # an element unwritten, a read out of bounds
            wrong.append(f"{variants.name} ({variants.default}): {error}")
            continue
        reason = mismatch(as_tuple(got), as_tuple(eager), as_tuple(exact))
        if reason is not None:
            wrong.append(f"{variants.name} ({variants.default}): {reason}")
    return wrong


@pytest.mark.parametrize("name", ["bert", "gpt2", "gemma2"])
def test_every_candidate_kernel_of_a_tiny_model_is_right_at_its_default_config(name):
    texts = forward_graphs(name, models.CPU, TOKENS)
    assert texts
    wrong = [line for text in texts for line in _wrong_kernels(text)]
    assert not wrong, "\n".join(wrong)
