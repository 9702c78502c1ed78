#!/usr/bin/env bash
# Runs agentsearch on the embedded default: router + 2 in-process shards + embedded metadata store,
# loaded with the demo catalog on first start. REST on 127.0.0.1:8080, gRPC on 127.0.0.1:50051.
# Extra arguments go to `agentsearch serve` (e.g. --data-dir, --shards).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
./scripts/fetch-model.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec cargo run --release -p agentsearch -- serve "$@"
