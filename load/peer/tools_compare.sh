#!/usr/bin/env bash
# Warm tool search on the load driver's synthetic catalog, agentsearch beside two peers, in one
# sitting: `agentsearch serve` on a fresh data dir (over gRPC on loopback, timed by the load
# driver), then the same catalog and query pool in-process in Python: tantivy-py + faiss-cpu +
# reciprocal rank fusion ("glue") and LanceDB hybrid (glue_peer.py). One after the other, so
# they never compete for the cores.
#
#   load/peer/tools_compare.sh [--tools 10000] [--integrations 200] [--shards 1] [--duration 20]
#                              [--out-dir DIR]
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
out_dir=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$1" in
    --tools) tools="$2" ;;
    --integrations) integrations="$2" ;;
    --shards) shards="$2" ;;
    --duration) duration="$2" ;;
    --out-dir) out_dir="$2" ;;
    *) die "unknown argument: $1" ;;
  esac
  shift 2
done
for n in "$tools" "$integrations" "$shards" "$duration"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "counts and seconds must be positive integers, got $n"
done

bin_dir="${AGENTSEARCH_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}"
for b in agentsearch agentsearch-load; do
  [ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing (cargo build --release --bins)"
done
out_dir="${out_dir:-$here/results/tools-$tools-s$shards}"
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
serve_pid=""
start_serve() {
  "$bin_dir/agentsearch" serve --no-demo --data-dir "$data_dir" --shards "$shards" \
    --grpc "127.0.0.1:$port_grpc" --http "127.0.0.1:$port_http" >>"$out_dir/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 120); do
    curl -fsS "http://127.0.0.1:$port_http/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$serve_pid" 2>/dev/null || die "serve exited (see $out_dir/serve.log)"
    sleep 1
  done
  die "serve did not become ready (see $out_dir/serve.log)"
}
stop_serve() {
  [ -n "$serve_pid" ] || return 0
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
}
cleanup() {
  stop_serve
  rm -rf "$data_dir"
}
trap cleanup EXIT
rss_mb() { echo $(($(ps -o rss= -p "$serve_pid" | tr -d ' ') / 1024)); }
server=(--server "127.0.0.1:$port_grpc")

: >"$out_dir/serve.log"
start_serve
echo "ingesting $tools tools (embedding them)..." >&2
"${load[@]}" "${server[@]}" --concurrency 1 --duration 2 --warmup 0 --query-pool 200 \
  --out "$out_dir/agentsearch-ingest.json"
rss_after_ingest="$(rss_mb)"
# Measured on a server started on the loaded data dir (as one runs between catalog changes),
# so what ingest left in the allocator does not count against the search.
stop_serve
start_serve
"${load[@]}" "${server[@]}" --skip-ingest --concurrency 1 --duration "$duration" --warmup 12 \
  --query-pool 200 --diagnostics --out "$out_dir/agentsearch-warm.json"
echo "{\"serveRssMb\": $(rss_mb), \"serveRssAfterIngestMb\": $rss_after_ingest}" \
  >"$out_dir/agentsearch-rss.json"
cleanup
trap - EXIT

# LANCEDB_LOG: LanceDB would otherwise log a deprecation warning on every hybrid query.
LANCEDB_LOG="${LANCEDB_LOG:-error}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$venv/bin/python" "$here/glue_peer.py" \
  --export-dir "$out_dir/export" --model-dir "$model_dir" --duration "$duration" \
  --cache-dir "${AGENTSEARCH_PEER_CACHE-/var/cache/agentsearch/peer-cache}" \
  --out "$out_dir/peers.json" >/dev/null

python3 - "$out_dir" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
ours = json.loads((out / "agentsearch-warm.json").read_text())
rss = json.loads((out / "agentsearch-rss.json").read_text())["serveRssMb"]
peers = json.loads((out / "peers.json").read_text())
s = ours["search"]
rows = [("agentsearch (serve, gRPC)", s["p50Ms"], s["p99Ms"], s["qps"], rss)]
for p in peers["peers"]:
    rows.append((f"{p['peer']} (in-process)", p["p50"], p["p99"], p["qps"], peers["peakRssMb"]))
lines = ["| system | p50 ms | p99 ms | QPS | resident MB |", "|---|--:|--:|--:|--:|"]
for name, p50, p99, qps, mem in rows:
    f = lambda v, spec: "-" if v is None else format(v, spec)
    lines.append(f"| {name} | {f(p50, '.2f')} | {f(p99, '.2f')} | {f(qps, '.0f')} | {f(mem, '.0f')} |")
text = "\n".join(lines)
print(text)
(out / "side_by_side.md").write_text(text + "\n")
EOF
