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
import pathlib
import subprocess
import sys
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from serve_lib import DEMO_PROJECT, ROOT, Failed, Served, run  # noqa: E402

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


def contract(served: Served, max_examples: int) -> None:
    committed = ROOT / "openapi.json"
    with urllib.request.urlopen(f"{served.base}/openapi.json", timeout=10) as r:
        document = json.load(r)
    if document != json.loads(committed.read_text()):
        raise Failed("/openapi.json differs from the committed openapi.json")
    # Generated requests act on the demo project and one of its syncs (ids drawn at random would
    # only meet "no such project" and never reach the routes' own logic).
    (served.tmp / "schemathesis.toml").write_text(
        f'[parameters]\n"path.project_id" = "{DEMO_PROJECT}"\n"path.sync_id" = "{DEMO_SYNC}"\n'
    )
    schemathesis = pathlib.Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [
            str(schemathesis),
            "--no-color",
            "run",
            str(committed),
            "--url",
            served.base,
            "--checks",
            CHECKS,
            "--max-examples",
            str(max_examples),
            "--generation-deterministic",
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "1",
            "--request-timeout",
            "30",
        ],
        env=dict(served.env, SCHEMATHESIS_TELEMETRY="false"),
        timeout=served.remaining(at_least=10),
        cwd=served.tmp,
    )
    served.check_alive()
    if result.returncode != 0:
        raise Failed(f"schemathesis found problems (exit {result.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--max-examples", type=int, default=15)
    args = parser.parse_args()
    if run("check-openapi", args.timeout, lambda served: contract(served, args.max_examples)):
        return 1
    print("check-openapi: ok (served document is the committed one; schemathesis found no problem)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
