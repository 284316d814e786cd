"""A real Redis server for the tests of the shared cache: started on a free
loopback port in a temporary folder, stopped after the test. Tests that use
it skip when Debian's redis-server is not installed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    def __init__(self, folder):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        # No snapshots or append-only file: the server's data lives as long as it does.
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        self.client = redis.Redis.from_url(self.url, socket_timeout=5)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path):
    pytest.importorskip("redis")
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder)
    yield server
    server.stop()
