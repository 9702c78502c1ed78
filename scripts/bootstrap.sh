#!/usr/bin/env bash
# Installs what building agentsearch needs from the system's package registry (Debian/Ubuntu):
# cmake and a C++ compiler (FAISS is compiled from the sources its crate bundles) and BLAS/LAPACK.
# Idempotent: does nothing when everything is present.
set -euo pipefail

packages=(cmake g++ libopenblas-dev liblapack-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "Rust is required: https://rustup.rs" >&2; exit 1; }
