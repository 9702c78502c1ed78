"""One `agentsearch serve` on the embedded default, for the checks that need a running server.

`run(name, timeout, body)` starts the release binary (AGENTSEARCH_BIN, default
$CARGO_TARGET_DIR/release/agentsearch) with the model of MODEL_DIR (default
models/all-MiniLM-L6-v2) in a temporary data directory, on free loopback ports, waits for
/readyz, calls `body` with the running server, and stops it; a failure prints the error and the
tail of the server's log as `NAME: FAILED`.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO_PROJECT = "00000000-0000-4000-8000-000000000001"


class Failed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary() -> str:
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return os.environ.get("AGENTSEARCH_BIN", str(target / "release" / "agentsearch"))


def wait_ready(base: str, process: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Failed(f"agentsearch serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise Failed("agentsearch serve did not become ready")


class Served:
    """A running `agentsearch serve`: `base` (its REST address), `tmp` (a scratch directory, its
    working directory), `data` (its data directory), `env` (its environment), `binary` and
    `process`."""

    def __init__(self, tmp: pathlib.Path, deadline: float):
        self.deadline = deadline
        self.binary = binary()
        model = os.environ.get("MODEL_DIR", str(ROOT / "models" / "all-MiniLM-L6-v2"))
        self.env = dict(os.environ, AGENTSEARCH_EMBED__MODEL_DIR=model, OMP_NUM_THREADS="1")
        self.tmp = tmp
        self.data = tmp / "data"
        http_port, grpc_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{http_port}"
        self.grpc_port = grpc_port
        self.log_path = tmp / "serve.log"

    def remaining(self, at_least: float = 1.0) -> float:
        return max(at_least, self.deadline - time.monotonic())

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise Failed(f"agentsearch serve exited with {self.process.returncode} during the run")


def run(name: str, timeout: float, body: Callable[[Served], None]) -> int:
    """Runs `body` against a fresh server within `timeout` seconds (start-up included); the
    exit status of the check: 0, or 1 with the error and the tail of the server's log printed."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix=f"agentsearch-{name}-") as tmp:
        served = Served(pathlib.Path(tmp), deadline)
        with open(served.log_path, "wb") as log:
            served.process = subprocess.Popen(
                [
                    served.binary,
                    "serve",
                    "--data-dir",
                    str(served.data),
                    "--http",
                    served.base.removeprefix("http://"),
                    "--grpc",
                    f"127.0.0.1:{served.grpc_port}",
                ],
                env=served.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
            try:
                wait_ready(served.base, served.process, deadline)
                body(served)
            except Exception as err:  # noqa: BLE001 - every failure ends the check with its log
                log.flush()
                tail = served.log_path.read_text(errors="replace")[-3000:]
                print(f"{name}: FAILED: {err!r}\n--- serve log (tail) ---\n{tail}", file=sys.stderr)
                return 1
            finally:
                served.process.terminate()
                try:
                    served.process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    served.process.kill()
    return 0
