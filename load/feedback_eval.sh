#!/usr/bin/env bash
# Learning from feedback, measured: for every shared tool set, clean and with each retriever
# weakened (`--degrade`), `agentsearch eval --feedback-half` in a fresh project: lexical, dense
# and hybrid on the held-out half, then hybrid again once the project's model has been refit
# from the other half's feedback. All through one `agentsearch serve`.
#
#   load/feedback_eval.sh [--out-dir DIR] [--levels "0.25 0.5 0.75"] [--scifact] [--bin target/release/agentsearch]
#
# Then: python3 load/feedback_table.py DIR
set -euo pipefail

out_dir=feedback-eval
levels="0.25 0.5 0.75"
bin=${CARGO_TARGET_DIR:-target}/release/agentsearch
data=../shared/data/eval
scifact=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out-dir) out_dir=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --scifact) scifact=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "$bin: build it first (cargo build --release -p agentsearch)" >&2; exit 2; }
mkdir -p "$out_dir"
http=127.0.0.1:28191
grpc=127.0.0.1:25161

rm -rf "$out_dir/data"
"$bin" serve --no-demo --data-dir "$out_dir/data" --http "$http" --grpc "$grpc" \
  >"$out_dir/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://$http/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done

# name dataset split [extra eval arguments]
sets=(
  "toollens toollens test"
  "bfcl bfcl test"
  "metatool-multi metatool multi"
)
# SciFact through context search (clean only: each condition re-ingests 5,183 records) with
# --scifact.
for set in "${sets[@]}"; do
  read -r name dataset split extra <<<"$set"
  conditions="clean"
  for level in $levels; do conditions="$conditions lexical=$level dense=$level"; done
  for condition in $conditions; do
    degrade=()
    [ "$condition" = clean ] || degrade=(--degrade "$condition")
    # A report already written is kept: a stopped run resumes where it stopped.
    [ -s "$out_dir/$name.$condition.json" ] && continue
    echo "== $name $condition" >&2
    # Each run ingests into a fresh project: a model learned in one condition stays there.
    "$bin" eval --server "$grpc" --dataset "$data/$dataset" --split "$split" --kind tools $extra \
      --modes lexical,dense,hybrid --feedback-half "${degrade[@]}" \
      --out "$out_dir/$name.$condition.json"
  done
done
if [ "$scifact" = 1 ] && [ ! -s "$out_dir/scifact.clean.json" ]; then
  echo "== scifact clean" >&2
  "$bin" eval --server "$grpc" --dataset "$data/scifact" --split train --kind passages \
    --modes lexical,dense,hybrid --feedback-half --out "$out_dir/scifact.clean.json"
fi
echo "reports in $out_dir; python3 load/feedback_table.py $out_dir" >&2
