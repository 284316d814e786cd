"""Checking and timing candidates in a worker process that a faulting kernel
may take down.

A kernel that faults on the GPU (a misaligned or illegal address) leaves
its process's CUDA context broken: every later launch and copy of that
process fails, so one such candidate would end the whole search. Triton
3.6 produced such kernels for some configs of products whose k loop
computes an operand (benchmarks/NOTES.md, stops 33 to 35), and the next
compiler may produce others. So the search checks and times in a worker:

    gpu = IsolatedGPU(device)
    outcomes = gpu.run(trial, settings)      # one Outcome per candidate, in order
    gpu.close()

`IsolatedGPU` owns one worker process (a fresh interpreter that imports
this module and calls its `_main`, so that nothing of the caller's main
script runs again in it; not `python -m`, under which the package's
imports would load this module once before running it again as
`__main__`), pinned to its device for its whole life. The
worker makes a kernel's reference once for the candidates that come
together (`profile.make_reference`; only the last kernel's is kept) and runs
`profile.run_trial` on one candidate at a time, answering after each. When
its CUDA context breaks, the worker says so and exits; when it dies or does
not answer within `answer_timeout_s`, it is stopped. Either way the
candidate it was on is REJECTED with the reason, a new worker is started,
and the trial goes on with the candidates after it. Any other error of the
worker is raised here as a KgcError with its traceback.

Messages go over two pipes as pickles (`multiprocessing.connection`): a
trial's candidates are `CompiledModule`s, plain data with their cubins.
`hooks` names the module whose `make_reference`, `run_trial` and
`context_error` the worker calls; tests give one that fakes faults without
a GPU.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection

from kgc.diagnostics import KgcError
from kgc.search.profile import REJECTED, KernelTrial, Outcome, TrialSettings

# Between two answers the worker makes a kernel's reference or checks and
# times one candidate (a thousand timed runs): seconds. Ten minutes means a
# kernel that never ends.
ANSWER_TIMEOUT_S = 600.0
DEFAULT_HOOKS = "kgc.search.isolation"
# What the worker's interpreter runs; its arguments follow in sys.argv.
_WORKER_MAIN = "import sys; from kgc.search.isolation import _main; _main(sys.argv[1:])"


class IsolatedGPU:
    """A worker process that checks and times candidates on `device`; see
    the module docstring."""

    def __init__(self, device: int, *, hooks: str = DEFAULT_HOOKS,
                 answer_timeout_s: float = ANSWER_TIMEOUT_S):
        self.device, self.hooks, self.answer_timeout_s = device, hooks, answer_timeout_s
        self._process: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._receive: Connection | None = None
        self.started = 0  # workers started so far: one, plus one after each loss

    def run(self, trial: KernelTrial, settings: TrialSettings) -> list[Outcome]:
        if settings.tamper is not None:
            raise ValueError("a TrialSettings with a tamper hook runs in process: the hook "
                             "does not cross to a worker")
        outcomes: list[Outcome] = []
        remaining = list(trial.candidates)
        while remaining:
            self._ensure_started()
            self._send.send((dataclasses.replace(trial, candidates=remaining), settings))
            while remaining:
                answer = self._answer()
                kind = answer[0]
                if kind == "outcome":
                    outcomes.append(answer[1])
                    remaining.pop(0)
                    continue
                if kind == "error":
                    self.close()
                    raise KgcError(f"checking the candidates of {trial.signature} failed in "
                                   f"the worker process on GPU {self.device}:\n{answer[1]}")
                # "lost": the worker broke its context, died or hung on this candidate.
                self.close()
                outcomes.append(Outcome(remaining.pop(0)[0], REJECTED, reason=answer[1],
                                        device=self.device))
                break
            else:
                if self._answer()[0] != "done":
                    raise KgcError("the search's worker process answered out of turn")
        return outcomes

    def close(self) -> None:
        """Stops the worker, if one runs; the next `run` starts another."""
        process, self._process = self._process, None
        for connection in (self._send, self._receive):
            if connection is not None:
                connection.close()
        self._send = self._receive = None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()

    def __enter__(self) -> "IsolatedGPU":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ensure_started(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self.close()
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        # The worker imports kgc as this process does, from the same paths.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, str(to_worker_r),
                 str(from_worker_w), str(self.device), self.hooks],
                pass_fds=(to_worker_r, from_worker_w), env=env, stdin=subprocess.DEVNULL)
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self._send, self._receive = Connection(to_worker_w), Connection(from_worker_r)
        self.started += 1

    def _answer(self) -> tuple:
        """The worker's next message, or ("lost", why) when it broke its
        context, died or did not answer in time."""
        try:
            if self._receive.poll(self.answer_timeout_s):
                answer = self._receive.recv()
                if answer[0] == "fault":
                    return ("lost", f"faulted on the GPU, which ends the process that runs it: "
                                    f"{answer[1]}")
                return answer
        except (EOFError, OSError):
            pass
        else:
            return ("lost", f"did not finish within {self.answer_timeout_s:.0f} s")
        code = self._process.wait()
        return ("lost", f"the worker process running it died (exit code {code})")


# -- the worker ----------------------------------------------------------------------


def make_reference(trial: KernelTrial, settings: TrialSettings):
    from kgc.search.profile import make_reference as reference

    return reference(trial, settings)


def run_trial(trial: KernelTrial, settings: TrialSettings, reference) -> list[Outcome]:
    from kgc.search.profile import run_trial as run

    return run(trial, settings, reference)


def context_error() -> str | None:
    """Why this process's CUDA context can run nothing more, or None."""
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as error:  # noqa: BLE001  (any failure here means a broken context)
        return str(error).strip().splitlines()[0]
    return None


def pin(device: int) -> None:
    import torch

    torch.cuda.set_device(device)


def serve(receive: Connection, send: Connection, device: int, hooks) -> None:
    """The worker's loop: one trial per message, one answer per candidate."""
    hooks.pin(device)
    # The reference of the kernel whose candidates came last: a kernel's
    # candidates come together (in parts, on several GPUs), and each
    # reference holds inputs, results and the copies to time with, which
    # would pile up on the GPU over a search's kernels.
    reference_key, reference = None, None
    while True:
        try:
            trial, settings = receive.recv()
        except EOFError:
            return
        try:
            key = (trial.signature, trial.inline_text)
            if key != reference_key:
                reference_key, reference = None, None  # freed before the next is made
                reference = hooks.make_reference(trial, settings)
                reference_key = key
            for candidate in trial.candidates:
                one = dataclasses.replace(trial, candidates=[candidate])
                try:
                    outcomes = hooks.run_trial(one, settings, reference)
                except Exception:
                    broken = hooks.context_error()
                    if broken is not None:
                        send.send(("fault", broken))
                        return
                    raise
                broken = hooks.context_error()
                if broken is not None:
                    send.send(("fault", broken))
                    return
                send.send(("outcome", outcomes[0]))
            send.send(("done",))
        except Exception:  # noqa: BLE001  (reported to the parent, which raises it)
            send.send(("error", traceback.format_exc()))
            return


def _main(argv: list[str]) -> None:
    import importlib

    receive_fd, send_fd, device, hooks = int(argv[0]), int(argv[1]), int(argv[2]), argv[3]
    with Connection(receive_fd) as receive, Connection(send_fd) as send:
        serve(receive, send, device, importlib.import_module(hooks))
