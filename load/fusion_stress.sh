#!/usr/bin/env bash
# Candidate dumps for load/fusion_lodo.py: every shared dataset once as is and once per degraded
# retriever and level, all through one `agentsearch serve` (each dataset in a project of its own,
# ingested once: later runs find every document unchanged).
#
#   load/fusion_stress.sh [--out-dir DIR] [--levels "0.25 0.5 0.75"] [--bin target/release/agentsearch]
#
# Then: python3 load/fusion_lodo.py $(cat DIR/specs)
set -euo pipefail

out_dir=fusion-stress
levels="0.25 0.5 0.75"
bin=${CARGO_TARGET_DIR:-target}/release/agentsearch
data=../shared/data/eval
while [ $# -gt 0 ]; do
  case "$1" in
    --out-dir) out_dir=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "$bin: build it first (cargo build --release -p agentsearch)" >&2; exit 2; }
mkdir -p "$out_dir"
http=127.0.0.1:28181
grpc=127.0.0.1:25151

"$bin" serve --no-demo --data-dir "$out_dir/data" --http "$http" --grpc "$grpc" \
  >"$out_dir/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://$http/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done

# name dataset split kind project [extra eval arguments]
sets=(
  "toollens toollens test tools 70011e45-0000-4000-8000-000000000001"
  "bfcl bfcl test tools 70011e45-0000-4000-8000-000000000002"
  "metatool-multi metatool multi tools 70011e45-0000-4000-8000-000000000003"
  "metatool-test metatool test tools 70011e45-0000-4000-8000-000000000003 --max-queries 3000"
  "scifact scifact train passages 70011e45-0000-4000-8000-000000000005"
)
: >"$out_dir/specs"
for set in "${sets[@]}"; do
  read -r name dataset split kind project extra <<<"$set"
  run() {
    "$bin" eval --server "$grpc" --project "$project" --dataset "$data/$dataset" --split "$split" \
      --kind "$kind" $extra "$@"
  }
  echo "== $name" >&2
  run --modes lexical,dense --dump "$out_dir/$name.base.jsonl" --out "$out_dir/$name.base.json"
  spec="$name=$data/$dataset/qrels/$split.tsv:$out_dir/$name.base.jsonl"
  for level in $levels; do
    for retriever in lexical dense; do
      file="$out_dir/$name.$retriever-$level.jsonl"
      run --modes "$retriever" --degrade "$retriever=$level" --dump "$file" \
        --out "$out_dir/$name.$retriever-$level.json"
      spec="$spec:$file"
    done
  done
  echo "$spec" >>"$out_dir/specs"
done
echo "dumps in $out_dir; python3 load/fusion_lodo.py \$(cat $out_dir/specs)" >&2
