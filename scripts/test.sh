#!/usr/bin/env bash
# Runs every test of the workspace on an optimized build (the embedding model is ~140x slower in a
# debug build). Needs PostgreSQL at AGENTSEARCH_TEST_POSTGRES (default
# postgres://postgres@127.0.0.1:5432/postgres); fetches the model weights if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
./scripts/fetch-model.sh
command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec cargo nextest run --release --workspace --no-fail-fast "$@"
