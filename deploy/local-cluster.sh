#!/usr/bin/env bash
# A local distributed deployment: three shard processes and a router whose metadata lives in the
# local PostgreSQL (schema `agentsearch_local`). Ctrl-C stops everything. Load the demo catalog with
#   cargo run --release -p agentsearch -- catalog load demo/catalog.jsonl --server 127.0.0.1:50151
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
./scripts/fetch-model.sh
cargo build --release -p agentsearch
bin="${CARGO_TARGET_DIR:-target}/release/agentsearch"
dir="${DATA_DIR:-./data/local-cluster}"
pg="${AGENTSEARCH_POSTGRES__URL:-postgres://postgres@127.0.0.1:5432/postgres}"
mkdir -p "$dir"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for i in 0 1 2; do
  "$bin" shard --grpc "127.0.0.1:5016$i" --data-dir "$dir/shard-$i" &
  pids+=($!)
done
AGENTSEARCH_POSTGRES__SCHEMA=agentsearch_local "$bin" router --http 127.0.0.1:8180 --grpc 127.0.0.1:50151 \
  --shards 127.0.0.1:50160,127.0.0.1:50161,127.0.0.1:50162 --postgres "$pg" &
pids+=($!)
wait
