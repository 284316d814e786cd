"""Triton compiles in worker processes, one process per target.

Triton 3.6 builds its table of 8-bit float conversions (a function-local
static in the NVIDIA backend's FpToFpOpConversion) once per process, for the
compute capability of the first kernel that converts 8-bit floats; every
later compile in that process, whatever its target, gets the same table.
After an sm_90 compile, an sm_80 kernel gets `cvt.rn.f16x2.e5m2x2`, which
ptxas refuses below sm_89; after an sm_80 compile, an sm_90 kernel silently
gets the emulated conversions instead of the native ones (f16 -> e5m2 then
overflows to inf where the native conversion saturates). Triton's on-disk
cache is keyed by the TTIR, the target and the options, rightly, but the
code stored under a key then depends on what the process that filled it had
compiled before, and every later run trusts it.

So kgc never calls `triton.compile` in its own process: each target gets a
worker process that compiles for that target only, and a kernel's code
depends on nothing but the kernel, the target and the options. A worker is a
fresh Python running this file (not the `kgc` package, and not the caller's
`__main__`, which `multiprocessing` would import again); it reads one JSON
request per line on stdin and answers one JSON line. Its stderr (Triton's
C++ diagnostics and IR dumps) goes to a file named by each request, so that
the caller reports it even when the worker dies on a fatal error.

The caller's side is `compile_in_worker`; `main` is the worker's loop.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading


@dataclasses.dataclass
class WorkerResult:
    """What triton.compile left: the files of the compiled kernel in Triton's
    cache (`metadata_group`, by file name) and its hash, or `error`; `log`
    is what Triton wrote to stderr."""

    metadata_group: dict[str, str] | None
    hash: str | None
    error: str | None
    log: str


class _Worker:
    def __init__(self, target: int):
        self.target = target
        environment = dict(os.environ)
        # The worker imports Triton from wherever this process found it.
        environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment,
            start_new_session=True)  # a Ctrl-C reaches kgc, which then ends its workers

    def compile(self, path: str, options: dict) -> WorkerResult:
        log_fd, log_path = tempfile.mkstemp(prefix="kgc-triton-", suffix=".log")
        os.close(log_fd)
        try:
            request = {"path": path, "target": self.target, "options": options,
                       "environment": dict(os.environ), "log": log_path}
            try:
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
                reply = self.process.stdout.readline()
            except (BrokenPipeError, OSError):
                reply = ""
            log = pathlib.Path(log_path).read_text(errors="replace")
        finally:
            os.unlink(log_path)
        if not reply:
            return WorkerResult(None, None, self._death(), log)
        answer = json.loads(reply)
        return WorkerResult(answer["metadata_group"], answer["hash"], answer["error"], log)

    def _death(self) -> str:
        code = self.process.wait()
        if code < 0:
            return f"the Triton compiler process was killed by {signal.Signals(-code).name}"
        return f"the Triton compiler process exited with status {code}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.alive():
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_workers: dict[int, _Worker] = {}
_lock = threading.Lock()


def compile_in_worker(path: str | os.PathLike, target: int, options: dict) -> WorkerResult:
    """Runs `triton.compile(path, GPUTarget("cuda", target, 32), options)` in
    the worker of `target`, started on first use (and again after a crash)."""
    with _lock:
        worker = _workers.get(target)
        if worker is None or not worker.alive():
            worker = _workers[target] = _Worker(target)
        return worker.compile(str(path), options)


@atexit.register
def _close_workers() -> None:
    for worker in _workers.values():
        worker.close()
    _workers.clear()


# ---------------------------------------------------------------------------
# The worker
# ---------------------------------------------------------------------------


def _compile(path: str, target: int, options: dict, environment: dict, log: str) -> dict:
    # Triton reads its knobs (cache folder, TRITON_ALWAYS_COMPILE, dumps)
    # from the environment when it compiles: the caller's, as of this call.
    os.environ.clear()
    os.environ.update(environment)
    import triton
    from triton.backends.compiler import GPUTarget

    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "w") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            compiled = triton.compile(path, target=GPUTarget("cuda", target, 32), options=options)
            return {"metadata_group": compiled.metadata_group, "hash": compiled.hash,
                    "error": None}
        except Exception as error:  # Triton raises many kinds; the caller reports them all
            lines = str(error).strip().splitlines()
            return {"metadata_group": None, "hash": None,
                    "error": lines[-1] if lines else type(error).__name__}
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def main() -> None:
    # Answers go to the original stdout; anything Triton prints goes to
    # stderr, so that it cannot break the protocol.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller ends this process
    for line in sys.stdin:
        answers.write(json.dumps(_compile(**json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
