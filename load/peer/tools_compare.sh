#!/usr/bin/env bash
# Tool search on the load driver's synthetic catalog, agentsearch beside two peers, in one
# sitting: agentsearch on a fresh data dir (over gRPC on loopback, timed by the load driver), warm
# (query embeddings cached) and cold (every query embedded), then the same catalog and query pool
# in-process in Python: tantivy-py + faiss-cpu + reciprocal rank fusion ("glue") and LanceDB
# hybrid (glue_peer.py), warm. One after the other, so they never compete for the cores.
#
#   load/peer/tools_compare.sh [--tools 10000] [--integrations 200] [--shards 1] [--duration 20]
#                              [--topology serve|processes] [--out-dir DIR]
#
# --topology serve (default): one `agentsearch serve` process with --shards in-process shards.
# --topology processes: --shards `agentsearch shard` processes and an `agentsearch router` whose
# metadata is in PostgreSQL (AGENTSEARCH_POSTGRES__URL, default the local server; a schema of its
# own, dropped at the end), all on loopback.
#
# Environment: AGENTSEARCH_BIN_DIR (default $CARGO_TARGET_DIR/release or target/release; build
# with `cargo build --release --bins` first), AGENTSEARCH_PEER_VENV, AGENTSEARCH_PEER_CACHE and
# AGENTSEARCH_EMBED__MODEL_DIR as for compare.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/load/peer"
die() {
  echo "tools_compare.sh: $*" >&2
  exit 1
}

tools=10000
integrations=200
shards=1
duration=20
topology=serve
out_dir=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$1" in
    --tools) tools="$2" ;;
    --integrations) integrations="$2" ;;
    --shards) shards="$2" ;;
    --duration) duration="$2" ;;
    --topology) topology="$2" ;;
    --out-dir) out_dir="$2" ;;
    *) die "unknown argument: $1" ;;
  esac
  shift 2
done
for n in "$tools" "$integrations" "$shards" "$duration"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "counts and seconds must be positive integers, got $n"
done
case "$topology" in
  serve | processes) ;;
  *) die "--topology is serve or processes, got $topology" ;;
esac

bin_dir="${AGENTSEARCH_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}"
for b in agentsearch agentsearch-load; do
  [ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing (cargo build --release --bins)"
done
out_dir="${out_dir:-$here/results/tools-$tools-$topology-s$shards}"
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"

"$root/scripts/fetch-model.sh" >/dev/null
model_dir="${AGENTSEARCH_EMBED__MODEL_DIR:-$root/models/all-MiniLM-L6-v2}"

venv="${AGENTSEARCH_PEER_VENV:-/var/cache/agentsearch/peer-venv}"
stamp="$(sha256sum "$here/requirements.txt" | cut -c1-16)"
if [ ! -f "$venv/.requirements-$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$here/requirements.txt"
  rm -f "$venv"/.requirements-*
  touch "$venv/.requirements-$stamp"
fi

load=("$bin_dir/agentsearch-load" --tools "$tools" --integrations "$integrations")
"${load[@]}" --export "$out_dir/export" --query-pool 200

data_dir="$(mktemp -d /tmp/agentsearch-tools-compare.XXXXXX)"
port_grpc=50151
port_http=8181
port_shard=50160
pg_url="${AGENTSEARCH_POSTGRES__URL:-postgres://postgres@127.0.0.1:5432/postgres}"
pg_schema="tools_compare_$$"
pids=()
if [ "$topology" = processes ]; then
  command -v psql >/dev/null || die "psql is needed (to drop the run's schema at the end)"
fi
# Dies if any process of the system has exited.
check_alive() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || die "a process exited (see $out_dir/serve.log)"
  done
}
# Waits until `probe` succeeds, every process staying up meanwhile.
wait_for() {
  local what="$1"
  shift
  for _ in $(seq 1 120); do
    "$@" >/dev/null 2>&1 && return 0
    check_alive
    sleep 1
  done
  die "$what did not become ready (see $out_dir/serve.log)"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1"); }
start_system() {
  if [ "$topology" = serve ]; then
    "$bin_dir/agentsearch" serve --no-demo --data-dir "$data_dir" --shards "$shards" \
      --grpc "127.0.0.1:$port_grpc" --http "127.0.0.1:$port_http" >>"$out_dir/serve.log" 2>&1 &
    pids=($!)
  else
    local addresses=() i
    pids=()
    for ((i = 0; i < shards; i++)); do
      "$bin_dir/agentsearch" shard --grpc "127.0.0.1:$((port_shard + i))" \
        --data-dir "$data_dir/shard-$i" >>"$out_dir/serve.log" 2>&1 &
      pids+=($!)
      addresses+=("127.0.0.1:$((port_shard + i))")
    done
    # Every shard listens before the router starts, so that it places on all of them.
    for ((i = 0; i < shards; i++)); do
      wait_for "shard $i" port_open "$((port_shard + i))"
    done
    AGENTSEARCH_POSTGRES__SCHEMA="$pg_schema" "$bin_dir/agentsearch" router \
      --grpc "127.0.0.1:$port_grpc" --http "127.0.0.1:$port_http" \
      --shards "$(IFS=,; echo "${addresses[*]}")" --postgres "$pg_url" >>"$out_dir/serve.log" 2>&1 &
    pids+=($!)
  fi
  wait_for "the router" curl -fsS "http://127.0.0.1:$port_http/readyz"
}
stop_system() {
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
cleanup() {
  stop_system
  rm -rf "$data_dir"
  if [ "$topology" = processes ]; then
    psql -q "$pg_url" -c "DROP SCHEMA IF EXISTS $pg_schema CASCADE" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
# Resident memory of every process of the system, summed (not the PostgreSQL server's).
rss_mb() {
  local kb=0 pid rss
  for pid in "${pids[@]}"; do
    rss="$(ps -o rss= -p "$pid" | tr -d ' ')" || die "process $pid exited (see $out_dir/serve.log)"
    kb=$((kb + rss))
  done
  echo $((kb / 1024))
}
server=(--server "127.0.0.1:$port_grpc")

: >"$out_dir/serve.log"
start_system
echo "ingesting $tools tools (embedding them)..." >&2
"${load[@]}" "${server[@]}" --concurrency 1 --duration 2 --warmup 0 --query-pool 200 \
  --out "$out_dir/agentsearch-ingest.json"
rss_after_ingest="$(rss_mb)"
# Measured on processes started on the loaded data dir (as one runs between catalog changes),
# so what ingest left in the allocator does not count against the search.
stop_system
start_system
"${load[@]}" "${server[@]}" --skip-ingest --concurrency 1 --duration "$duration" --warmup 12 \
  --query-pool 200 --diagnostics --out "$out_dir/agentsearch-warm.json"
rss_warm="$(rss_mb)"
# Cold: queries drawn while measuring from a seed new in every run, each one embedded.
"${load[@]}" "${server[@]}" --skip-ingest --concurrency 1 --duration "$duration" --warmup 2 \
  --query-pool 0 --diagnostics --out "$out_dir/agentsearch-cold.json"
rss_cold="$(rss_mb)"
echo "{\"serveRssMb\": $rss_warm, \"coldRssMb\": $rss_cold, \"serveRssAfterIngestMb\": $rss_after_ingest}" \
  >"$out_dir/agentsearch-rss.json"
cleanup
trap - EXIT

# LANCEDB_LOG: LanceDB would otherwise log a deprecation warning on every hybrid query.
LANCEDB_LOG="${LANCEDB_LOG:-error}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$venv/bin/python" "$here/glue_peer.py" \
  --export-dir "$out_dir/export" --model-dir "$model_dir" --duration "$duration" \
  --cache-dir "${AGENTSEARCH_PEER_CACHE-/var/cache/agentsearch/peer-cache}" \
  --out "$out_dir/peers.json" >/dev/null

python3 - "$out_dir" "$topology" "$shards" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
topology, shards = sys.argv[2], sys.argv[3]
rss = json.loads((out / "agentsearch-rss.json").read_text())
peers = json.loads((out / "peers.json").read_text())
if topology == "serve":
    system = f"serve, {shards} shard{'s' if shards != '1' else ''}"
else:
    system = f"router + {shards} shard process{'es' if shards != '1' else ''}"
rows = []
for kind, rss_key in (("warm", "serveRssMb"), ("cold", "coldRssMb")):
    s = json.loads((out / f"agentsearch-{kind}.json").read_text())["search"]
    rows.append((f"agentsearch {kind} ({system}, gRPC)", s["p50Ms"], s["p99Ms"], s["qps"], rss[rss_key]))
for p in peers["peers"]:
    rows.append((f"{p['peer']} warm (in-process)", p["p50"], p["p99"], p["qps"], peers["peakRssMb"]))
lines = ["| system | p50 ms | p99 ms | QPS | resident MB |", "|---|--:|--:|--:|--:|"]
for name, p50, p99, qps, mem in rows:
    f = lambda v, spec: "-" if v is None else format(v, spec)
    lines.append(f"| {name} | {f(p50, '.2f')} | {f(p99, '.2f')} | {f(qps, '.0f')} | {f(mem, '.0f')} |")
text = "\n".join(lines)
print(text)
(out / "side_by_side.md").write_text(text + "\n")
EOF
