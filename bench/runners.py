"""The contenders of `kgc bench`, each a way to make a callable of a
workload's inputs.

- kgc: the workload's graph through `kgc.superoptimize` with the on-disk
  cache (the first run searches, later runs load the choice);
- kgc-default: the same graph through `kgc.compile`, kgc's default choices
  with no search, which is what most callers get;
- eager: the workload's torch code as written;
- torch.compile with the default mode, and with
  "max-autotune-no-cudagraphs" (its own Triton and cuBLAS choices, timed
  without CUDA graphs of its own as the bench captures every contender in
  one the same way).

A contender that cannot be made raises `Unavailable` with the reason,
which the bench reports in the workload's row.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Callable

from kgc.bench.workloads import Workload

_LOG = logging.getLogger(__name__)
KGC, KGC_DEFAULT = "kgc", "kgc-default"
EAGER, INDUCTOR, MAX_AUTOTUNE = "eager", "torch.compile", "max-autotune"
TORCH_RUNNERS = (EAGER, INDUCTOR, MAX_AUTOTUNE)
RUNNERS = (KGC, KGC_DEFAULT, *TORCH_RUNNERS)
LABELS = {KGC: "kgc", KGC_DEFAULT: "kgc default", EAGER: "eager", INDUCTOR: "torch.compile",
          MAX_AUTOTUNE: "max-autotune-no-cudagraphs"}


class Unavailable(Exception):
    """A contender could not be made or run; the message says why."""


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def make_kgc(workload: Workload, effort: str, reps: int, verbose: bool):
    """The workload's graph after superoptimize (cache on, each candidate
    timed over about `reps` calls), with the search's `.report`."""
    from kgc.api import superoptimize

    with _compile_failures(workload, "kgc"):
        return superoptimize(workload.build(), effort=effort, profile_iters=reps,
                             verbose=verbose)


def make_kgc_default(workload: Workload):
    """The workload's graph through `kgc.compile`: kgc's default choices for
    the current GPU, no search."""
    from kgc.api import compile as compile_graph

    with _compile_failures(workload, "kgc's default compile"):
        return compile_graph(workload.build())


@contextlib.contextmanager
def _compile_failures(workload: Workload, who: str):
    """A compile's failure as this row's result (`Unavailable`), not the
    run's: kgc's own errors with their locations, anything else by its
    first line (the traceback logged at debug level)."""
    from kgc.diagnostics import KgcError

    try:
        yield
    except KgcError as error:
        raise Unavailable("; ".join((f"{d.location}: " if d.location else "") + d.message
                                    for d in error.diagnostics)) from None
    except Exception as error:
        _LOG.debug("%s failed on %s", who, workload.name, exc_info=True)
        raise Unavailable(f"kgc failed: {first_line(error)}") from None


def make_torch(workload: Workload, runner: str) -> Callable:
    """The workload's torch code for `runner` (eager or a torch.compile
    mode); compiling happens on the first call."""
    import torch

    if runner == EAGER:
        return workload.reference
    # Dynamo keeps compiled code on the function's code object: without a
    # reset, one mode could run what another compiled, and a workload
    # sharing its torch code with an earlier one (the GEMMs) would count
    # against the recompile limit.
    torch._dynamo.reset()
    if runner == INDUCTOR:
        return torch.compile(workload.reference)
    if runner == MAX_AUTOTUNE:
        return torch.compile(workload.reference, mode="max-autotune-no-cudagraphs")
    raise ValueError(f"unknown torch runner {runner!r}")
