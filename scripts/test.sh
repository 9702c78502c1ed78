#!/usr/bin/env bash
# Runs every test of the workspace on an optimized build (the embedding model is ~140x slower in a
# debug build), then the deployment checks: the Dockerfile against the release binary, the Helm
# chart offline (render, strict Kubernetes schemas, refused values, `config check` of every
# rendered configuration), the chart run as local processes, and the MCP server with the official
# Python MCP client. Needs PostgreSQL at
# AGENTSEARCH_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/postgres) and Redis on
# 127.0.0.1:6379; fetches the model weights if missing. Arguments go to nextest (a filter), and
# then the deployment checks are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
./scripts/fetch-model.sh
command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# The query JSON agreement test leaves its documents here for Python's validator (below).
export AGENTSEARCH_QUERY_CORPUS="${AGENTSEARCH_QUERY_CORPUS:-$CARGO_TARGET_DIR/query-corpus}"
rm -rf "$AGENTSEARCH_QUERY_CORPUS"
cargo nextest run --release --workspace --no-fail-fast "$@"
if [ $# -gt 0 ]; then
  exit 0
fi
# The checks run the release binary the test build linked (the CLI's tests run it).
python3 scripts/check-dockerfile.py
./scripts/check-chart.sh
"${AGENTSEARCH_VENV:-/var/cache/agentsearch/venv}/bin/python" scripts/check-query-schema.py "$AGENTSEARCH_QUERY_CORPUS"
"${AGENTSEARCH_VENV:-/var/cache/agentsearch/venv}/bin/python" scripts/chart-runs.py
"${AGENTSEARCH_VENV:-/var/cache/agentsearch/venv}/bin/python" scripts/check-mcp.py
"${AGENTSEARCH_VENV:-/var/cache/agentsearch/venv}/bin/python" scripts/check-openapi.py
