#!/usr/bin/env bash
# Times embedding at ingest: agentsearch (`agentsearch embed-bench`: segment a BEIR corpus as record
# ingest does and embed every passage with its own kernels) and PyTorch sentence-transformers on exactly the
# same passages, one after the other on this machine.
#
#   load/peer/embed_compare.sh --dataset DIR [--passages N] [--out-dir DIR]
#
# Environment:
#   AGENTSEARCH_BIN            the agentsearch binary (default $CARGO_TARGET_DIR/release/agentsearch,
#                              or target/release/agentsearch)
#   AGENTSEARCH_EMBED_VENV     the PyTorch virtualenv (default /var/cache/agentsearch/embed-venv);
#                              created on first use from embed/requirements.txt
#   AGENTSEARCH_EMBED__MODEL_DIR   all-MiniLM-L6-v2 (default models/all-MiniLM-L6-v2)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/load/peer"
dataset=""
passages=10000
out_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --passages) passages="$2"; shift 2 ;;
    --out-dir) out_dir="$2"; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "embed_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$dataset/corpus.jsonl" ] || { echo "embed_compare.sh: --dataset DIR with a corpus.jsonl is required" >&2; exit 2; }
dataset="$(cd "$dataset" && pwd)"
out_dir="${out_dir:-$here/results/embed-$(basename "$dataset")-$passages}"
mkdir -p "$out_dir"

bin="${AGENTSEARCH_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/agentsearch}"
[ -x "$bin" ] || (cd "$root" && cargo build --release -p agentsearch)
model_dir="${AGENTSEARCH_EMBED__MODEL_DIR:-$root/models/all-MiniLM-L6-v2}"
[ -f "$model_dir/model.safetensors" ] || (cd "$root" && ./scripts/fetch-model.sh)

venv="${AGENTSEARCH_EMBED_VENV:-/var/cache/agentsearch/embed-venv}"
stamp="$venv/.requirements"
if ! cmp -s "$here/embed/requirements.txt" "$stamp" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -r "$here/embed/requirements.txt"
  cp "$here/embed/requirements.txt" "$stamp"
fi

cd "$root"
echo "agentsearch:" >&2
OMP_NUM_THREADS=1 "$bin" embed-bench --dataset "$dataset" --passages "$passages" \
  --out "$out_dir/passages.jsonl" | tee "$out_dir/agentsearch.json"
echo "sentence-transformers:" >&2
"$venv/bin/python" "$here/embed/st_embed.py" --model-dir "$model_dir" \
  --passages "$out_dir/passages.jsonl" | tee "$out_dir/sentence-transformers.json"
