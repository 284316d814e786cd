"""Worker processes that compile kernels: `CompilePool` and the worker's
own loop.

    with CompilePool(jobs=4, timeout=60) as pool:
        results = pool.map([(ttir, options, target), ...])

A worker is a fresh interpreter (`python -m kgc.pipeline.compile_worker`)
that compiles one kernel after another, so that Triton's start-up cost (it
hashes its own installation once per process, about a second) is paid once
per worker, not per kernel. Nothing of the parent is forked or run again
there: not its `__main__` (a script without an `if __name__ == "__main__"`
guard is safe), not its MLIR contexts and threads.

Protocol: the parent writes a request (a pickled `(ttir, KernelOptions,
target)`, preceded by its length as 8 bytes) to the worker's stdin; the
worker answers on its stdout with `(outcome, stdout, stderr)`: the
`Artifact` or `CompileFailure` (for options None, the TTIR in Triton's
custom form: `submit_custom_form`), and what Triton printed while compiling,
which the worker captures by pointing its own fds 1 and 2 at files for the
time of the compile (the worker runs nothing else). A worker that outlives
`timeout` on a kernel is killed alone and replaced. Its temporary files go
to a directory of the pool's, removed when the pool closes.

IR dumps: `MLIR_ENABLE_DUMP=<kernel>` reaches Triton as the name of the
kernel compiled when that kernel is the one named or one kg-tile made of it
(Triton knows only the name it compiles), and not at all for other kernels
(Triton's software pipeliner prints its dumps for any name).
`MLIR_DUMP_PATH` never reaches Triton, which would truncate the file kgc's
passes wrote to: its dumps come back as the worker's stderr, and the parent
appends them to the file (`triton_stage.compile_kernels`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time

from kgc.pipeline.artifact import kernel_symbol
from kgc.pipeline.instrumentation import follows
from kgc.pipeline.triton_stage import CompileFailure, compile_outcome, custom_form_outcome

_LENGTH = struct.Struct("<Q")


@dataclasses.dataclass
class WorkerResult:
    outcome: object  # Artifact or CompileFailure
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class CompilePool:
    """Up to `jobs` worker processes compiling kernels side by side, each
    kernel for at most `timeout` seconds (None: no limit)."""

    def __init__(self, jobs: int, timeout: float | None = None):
        self.jobs = jobs
        self.timeout = timeout
        self.target: int | None = None
        self._scratch = tempfile.TemporaryDirectory(prefix="kgc-workers-")
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = concurrent.futures.ThreadPoolExecutor(jobs)
        self._all: list[_Worker] = []
        self._starting = threading.Lock()

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Starts every worker now rather than as kernels wait for them: a
        worker loads Triton before its first request (about a second), so
        a caller that starts them before it has kernels to compile (the
        torch backend, as Dynamo hands it a first graph) hides that behind
        its own work."""
        with self._starting:
            while len(self._all) < self.jobs:
                worker = _Worker(self._scratch.name)
                self._all.append(worker)
                self._idle.put(worker)

    def submit(self, ttir: str, options, target: int,
               timeout: float | None = None) -> concurrent.futures.Future:
        """A future of the WorkerResult of compiling one kernel, within
        `timeout` seconds (default: the pool's). Every kernel of a pool is
        for one target (`triton_stage` says why)."""
        if self.target is None:
            self.target = target
        elif target != self.target:
            raise ValueError(f"this pool compiles for sm_{self.target}, not sm_{target}")
        # Triton reads its knobs (cache folder, dumps, TRITON_ALWAYS_COMPILE)
        # from the environment when it compiles: the caller's, as of now.
        request = (ttir, options, target, dict(os.environ))
        return self._threads.submit(self._compile, request,
                                    self.timeout if timeout is None else timeout)

    def submit_custom_form(self, ttir: str, target: int) -> concurrent.futures.Future:
        """A future of the WorkerResult of printing a kernel's TTIR in
        Triton's custom form (its outcome the text, or a CompileFailure)."""
        return self.submit(ttir, None, target)

    def map(self, requests) -> list[WorkerResult]:
        futures = [self.submit(*request) for request in requests]
        return [future.result() for future in futures]

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)
        for worker in self._all:
            worker.close()
        self._scratch.cleanup()

    def _compile(self, request, timeout: float | None) -> WorkerResult:
        try:
            worker = self._idle.get_nowait()
        except queue.Empty:
            with self._starting:
                worker = _Worker(self._scratch.name)
                self._all.append(worker)
        result = worker.compile(request, timeout)
        if worker.alive:
            self._idle.put(worker)
        return result


class _Worker:
    def __init__(self, scratch: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kgc.pipeline.compile_worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=dict(os.environ, TMPDIR=scratch))
        self.alive = True

    def compile(self, request, timeout: float | None) -> WorkerResult:
        payload = pickle.dumps(request)
        try:
            self.process.stdin.write(_LENGTH.pack(len(payload)) + payload)
            self.process.stdin.flush()
            deadline = None if timeout is None else time.monotonic() + timeout
            header = self._read(_LENGTH.size, deadline)
            reply = self._read(_LENGTH.unpack(header)[0], deadline)
        except TimeoutError:
            self.close()
            return WorkerResult(CompileFailure(
                "TimeoutExpired", f"Triton did not finish within {timeout} s; the worker was "
                "stopped", ""), "", "")
        except (EOFError, BrokenPipeError):
            self.close()
            return WorkerResult(CompileFailure(
                "WorkerFailed", f"the worker process died (exit status {self.process.returncode}: "
                "out of memory, or Triton crashed); compile with jobs=1 to see Triton's own "
                "output", ""), "", "")
        return WorkerResult(*pickle.loads(reply))

    def _read(self, size: int, deadline: float | None) -> bytes:
        data = b""
        stream = self.process.stdout
        while len(data) < size:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([stream], [], [], wait)
            if not ready:
                raise TimeoutError
            chunk = os.read(stream.fileno(), size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def close(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def _triton_dump_environment(ttir: str) -> None:
    """Sets Triton's dump variables for compiling `ttir` (see the module
    docstring)."""
    os.environ.pop("MLIR_DUMP_PATH", None)
    wanted = os.environ.get("MLIR_ENABLE_DUMP", "").strip()
    if wanted in ("", "0", "1"):
        return
    name = kernel_symbol(ttir)
    if follows(wanted, name):
        os.environ["MLIR_ENABLE_DUMP"] = name
    else:
        del os.environ["MLIR_ENABLE_DUMP"]


def _load_triton() -> None:
    """Imports Triton and computes the hash of its installation that keys
    its cache, which it does once per process, before the first request
    rather than during it."""
    from triton.runtime.cache import triton_key

    triton_key()


def serve() -> None:
    """The worker's loop: compile each request from stdin until it closes."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    # Whatever else writes to fd 1 must not reach the parent's reply pipe.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    _load_triton()
    while header := requests.read(_LENGTH.size):
        ttir, options, target, environment = pickle.loads(
            requests.read(_LENGTH.unpack(header)[0]))
        scratch = os.environ.get("TMPDIR")
        os.environ.clear()
        os.environ.update(environment)
        if scratch is not None:
            os.environ["TMPDIR"] = scratch
        _triton_dump_environment(ttir)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                outcome = (compile_outcome(ttir, options, target) if options is not None
                           else custom_form_outcome(ttir, target))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            out.seek(0)
            err.seek(0)
            reply = pickle.dumps((outcome, out.read(), err.read()))
        replies.write(_LENGTH.pack(len(reply)) + reply)
        replies.flush()


if __name__ == "__main__":
    serve()
