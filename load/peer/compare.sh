#!/usr/bin/env bash
# Runs `agentsearch eval --embedded` and the LanceDB peer (lancedb_peer.py) on the same BEIR-format
# dataset, one after the other, and prints both systems' rows in one table.
#
#   load/peer/compare.sh --dataset DIR [--split test] [--max-queries N] [--out-dir DIR]
#
# Environment:
#   AGENTSEARCH_BIN          the agentsearch binary (default $CARGO_TARGET_DIR/release/agentsearch,
#                            or target/release/agentsearch)
#   AGENTSEARCH_PEER_VENV    the peer's virtualenv (default /var/cache/agentsearch/peer-venv);
#                            created on first use, reinstalled when requirements.txt changes
#   AGENTSEARCH_PEER_CACHE   corpus embeddings of the peer between runs
#                            (default /var/cache/agentsearch/peer-cache; empty = no cache)
#   AGENTSEARCH_EMBED__MODEL_DIR   all-MiniLM-L6-v2 (default models/all-MiniLM-L6-v2), fetched
#                            by scripts/fetch-model.sh when missing
#   AGENTSEARCH_EMBED__QUERY_CACHE_MIB  agentsearch's query-embedding cache; 0 here by default so
#                            that every timed search of both systems embeds its query
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/load/peer"

usage() {
  echo "usage: load/peer/compare.sh --dataset DIR [--split test] [--max-queries N] [--out-dir DIR]"
}
die() {
  echo "compare.sh: $*" >&2
  exit 1
}

dataset=""
split="test"
max_queries=""
out_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) [ $# -ge 2 ] || die "--dataset needs a value"; dataset="$2"; shift 2 ;;
    --dataset=*) dataset="${1#*=}"; shift ;;
    --split) [ $# -ge 2 ] || die "--split needs a value"; split="$2"; shift 2 ;;
    --split=*) split="${1#*=}"; shift ;;
    --max-queries) [ $# -ge 2 ] || die "--max-queries needs a value"; max_queries="$2"; shift 2 ;;
    --max-queries=*) max_queries="${1#*=}"; shift ;;
    --out-dir) [ $# -ge 2 ] || die "--out-dir needs a value"; out_dir="$2"; shift 2 ;;
    --out-dir=*) out_dir="${1#*=}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[ -n "$dataset" ] || { usage >&2; exit 2; }
[ -f "$dataset/corpus.jsonl" ] || die "$dataset has no corpus.jsonl"
[ -f "$dataset/qrels/$split.tsv" ] || die "$dataset has no qrels/$split.tsv"
if [ -n "$max_queries" ] && ! [[ "$max_queries" =~ ^[1-9][0-9]*$ ]]; then
  die "--max-queries must be a positive integer"
fi

# Paths given by the caller are taken from the caller's directory; the rest from the repo root.
dataset="$(cd "$dataset" && pwd)"
name="$(basename "$dataset")"
out_dir="${out_dir:-$here/results/$name-$split${max_queries:+-q$max_queries}}"
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
cd "$root"

# --- the peer's virtualenv (idempotent) ------------------------------------------------------
venv="${AGENTSEARCH_PEER_VENV:-/var/cache/agentsearch/peer-venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "creating the peer virtualenv: $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
stamp="$venv/.agentsearch-peer-requirements.sha256"
want="$({ sha256sum <"$here/requirements.txt"; "$venv/bin/python" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "installing load/peer/requirements.txt into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" >"$stamp"
fi

# --- the model ---------------------------------------------------------------------------------
bash "$root/scripts/fetch-model.sh" >&2
model_dir="${AGENTSEARCH_EMBED__MODEL_DIR:-$root/models/all-MiniLM-L6-v2}"
model_dir="$(cd "$model_dir" && pwd)"
export AGENTSEARCH_EMBED__MODEL_DIR="$model_dir"

# --- agentsearch -------------------------------------------------------------------------------
bin="${AGENTSEARCH_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/agentsearch}"
[ -x "$bin" ] || die "no agentsearch binary at $bin: build it (cargo build --release --bin agentsearch) or set AGENTSEARCH_BIN"

# FAISS's OpenMP threads spin between calls; one thread, as scripts/run.sh runs the service.
export OMP_NUM_THREADS=1
# Every timed search embeds its query, in both systems: agentsearch's query-embedding cache would
# otherwise serve the hybrid pass from the dense pass's embeddings.
export AGENTSEARCH_EMBED__QUERY_CACHE_MIB="${AGENTSEARCH_EMBED__QUERY_CACHE_MIB:-0}"

limit=()
[ -z "$max_queries" ] || limit=(--max-queries "$max_queries")

echo "== agentsearch ($bin)" >&2
"$bin" eval --embedded --dataset "$dataset" --split "$split" "${limit[@]}" --out "$out_dir/agentsearch.json"

# --- the LanceDB peer --------------------------------------------------------------------------
echo "== lancedb peer" >&2
cache=()
peer_cache="${AGENTSEARCH_PEER_CACHE-/var/cache/agentsearch/peer-cache}"
[ -z "$peer_cache" ] || cache=(--cache-dir "$peer_cache")
"$venv/bin/python" "$here/lancedb_peer.py" --dataset "$dataset" --split "$split" "${limit[@]}" \
  --model-dir "$model_dir" "${cache[@]}" --out "$out_dir/lancedb.json"

# --- side by side ------------------------------------------------------------------------------
echo
"$venv/bin/python" "$here/lancedb_peer.py" --compare "$out_dir/agentsearch.json" "$out_dir/lancedb.json" |
  tee "$out_dir/side_by_side.txt"
echo "results: $out_dir" >&2
