#!/usr/bin/env python3
"""The REST contract checked against a running server with schemathesis.

Starts `agentsearch serve` on the embedded default (demo catalog and demo content) in a temporary
data directory, checks that `/openapi.json` serves exactly the committed `openapi.json`, then runs
schemathesis with that document against the server: generated valid and invalid requests for
every operation, and for each answer that it is not a server error, that its status is documented,
that its content type and headers are the documented ones and that its body conforms to the
documented schema. Bounded: --max-examples cases per operation and --timeout seconds in all.
The server's log is printed on failure.

Run it with the virtual environment of scripts/check-chart.sh (which installs `schemathesis`):
  /var/cache/agentsearch/venv/bin/python scripts/check-openapi.py
Environment: AGENTSEARCH_BIN (default $CARGO_TARGET_DIR/release/agentsearch), MODEL_DIR (default
models/all-MiniLM-L6-v2).
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
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO_PROJECT = "00000000-0000-4000-8000-000000000001"
DEMO_SYNC = "5ea5c0de-0000-4000-8000-00000000d001"
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)


class Failed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--max-examples", type=int, default=15)
    args = parser.parse_args()
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = os.environ.get("AGENTSEARCH_BIN", str(target / "release" / "agentsearch"))
    model = os.environ.get("MODEL_DIR", str(ROOT / "models" / "all-MiniLM-L6-v2"))
    schemathesis = pathlib.Path(sys.executable).parent / "schemathesis"
    committed = ROOT / "openapi.json"
    deadline = time.monotonic() + args.timeout
    with tempfile.TemporaryDirectory(prefix="agentsearch-openapi-") as tmp:
        data = pathlib.Path(tmp) / "data"
        http_port, grpc_port = free_port(), free_port()
        base = f"http://127.0.0.1:{http_port}"
        env = dict(os.environ, AGENTSEARCH_EMBED__MODEL_DIR=model, OMP_NUM_THREADS="1")
        log_path = pathlib.Path(tmp) / "serve.log"
        log = open(log_path, "wb")
        server = subprocess.Popen(
            [
                binary,
                "serve",
                "--data-dir",
                str(data),
                "--http",
                f"127.0.0.1:{http_port}",
                "--grpc",
                f"127.0.0.1:{grpc_port}",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        try:
            wait_ready(base, server, deadline)
            with urllib.request.urlopen(f"{base}/openapi.json", timeout=10) as r:
                served = json.load(r)
            if served != json.loads(committed.read_text()):
                raise Failed("/openapi.json differs from the committed openapi.json")
            # Generated requests act on the demo project and one of its syncs (ids drawn at random would only meet
            # "no such project" and never reach the routes' own logic).
            (pathlib.Path(tmp) / "schemathesis.toml").write_text(
                f'[parameters]\n"path.project_id" = "{DEMO_PROJECT}"\n"path.sync_id" = "{DEMO_SYNC}"\n'
            )
            remaining = max(10, int(deadline - time.monotonic()))
            run = subprocess.run(
                [
                    str(schemathesis),
                    "--no-color",
                    "run",
                    str(committed),
                    "--url",
                    base,
                    "--checks",
                    CHECKS,
                    "--max-examples",
                    str(args.max_examples),
                    "--generation-deterministic",
                    "--phases",
                    "examples,coverage,fuzzing",
                    "--workers",
                    "1",
                    "--request-timeout",
                    "30",
                ],
                env=dict(os.environ, SCHEMATHESIS_TELEMETRY="false"),
                timeout=remaining,
                cwd=tmp,
            )
            if server.poll() is not None:
                raise Failed(f"agentsearch serve exited with {server.returncode} during the run")
            if run.returncode != 0:
                raise Failed(f"schemathesis found problems (exit {run.returncode})")
        except Exception as err:  # noqa: BLE001 - every failure ends the check with its log
            log.flush()
            tail = log_path.read_text(errors="replace")[-3000:]
            print(f"check-openapi: FAILED: {err}\n--- serve log (tail) ---\n{tail}", file=sys.stderr)
            return 1
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
    print("check-openapi: ok (served document is the committed one; schemathesis found no problem)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
