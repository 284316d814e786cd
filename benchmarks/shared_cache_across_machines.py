"""A model of the suite served to a second GPU host from the shared cache.

    python benchmarks/shared_cache_across_machines.py fill  DUMP_DIR   # host A
    python benchmarks/shared_cache_across_machines.py serve DUMP_DIR   # host B

Each phase starts a throwaway `redis-server` (on the PATH) whose data lives
in DUMP_DIR, and runs the suite's llama (f16, a forward of 64 tokens and a
static-cache `generate()` of 8 tokens) in a fresh interpreter with an empty
local kernel-cache folder and `KGC_CACHE_URL` naming that server. `fill`
compiles and leaves the server's dump (`kgc.rdb`) in DUMP_DIR; copy that
folder to the other host and `serve` starts its server from it. The child
prints what the kernel cache did (`compiled` counts Triton compiles), the
first call's wall time, and the logits and tokens against eager's; `serve`
exits non-zero when anything was compiled or a result differs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

_MODEL = r"""
import json, time, torch
from kgc.bench.models import select
from kgc.pipeline.kernel_cache import KernelCache

spec, = select(["llama"])
model = spec.build("gpu").to("cuda", torch.float16)
ids = torch.randint(0, 2048, (1, 64), device="cuda",
                    generator=torch.Generator("cuda").manual_seed(1))
with torch.no_grad():
    expected = model(ids).logits
    eager_forward = model.forward
    model.forward = torch.compile(eager_forward, backend="kgc")
    torch.cuda.synchronize()
    started = time.perf_counter()
    got = model(ids).logits
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - started
    tokens = model.generate(ids[:, :16], max_new_tokens=8, do_sample=False,
                            cache_implementation="static")
    model.forward = eager_forward
    eager_tokens = model.generate(ids[:, :16], max_new_tokens=8, do_sample=False,
                                  cache_implementation="static")
print(json.dumps({"gpu": torch.cuda.get_device_name(),
                  "kernel_cache": KernelCache.resolve(None).stats,
                  "first_call_s": round(first_call_s, 2),
                  "logits_max_difference": (got.float() - expected.float()).abs().max().item(),
                  "tokens_equal": torch.equal(tokens, eager_tokens)}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_server(folder: pathlib.Path):
    import redis

    port = _free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
         "--dbfilename", "kgc.rdb", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_timeout=5)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return server, client, f"redis://127.0.0.1:{port}/0"
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                sys.exit("redis-server did not start")
            time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=("fill", "serve"))
    parser.add_argument("dump_dir", type=pathlib.Path)
    arguments = parser.parse_args()
    arguments.dump_dir.mkdir(parents=True, exist_ok=True)
    server, client, url = _start_server(arguments.dump_dir)
    try:
        entries_before = client.dbsize()
        env = dict(os.environ, KGC_CACHE_DIR=tempfile.mkdtemp(prefix="kgc-local-"),
                   KGC_CACHE_URL=url)
        child = subprocess.run([sys.executable, "-c", _MODEL], env=env, capture_output=True,
                               text=True)
        if child.returncode != 0:
            print(child.stderr[-4000:], file=sys.stderr)
            return child.returncode
        result = json.loads(child.stdout.strip().splitlines()[-1])
        result.update(phase=arguments.phase, server_entries_before=entries_before,
                      server_entries_after=client.dbsize())
        print(json.dumps(result, indent=1))
        if arguments.phase == "fill":
            client.save()
            return 0
        served = result["kernel_cache"]["compiled"] == 0 and result["tokens_equal"]
        return 0 if served else 1
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
