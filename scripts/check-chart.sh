#!/usr/bin/env bash
# Offline checks of the Helm chart in helm/agentsearch (no cluster, no helm binary): renders it with
# Helm's own Go engine (the helm-python-sdk package), validates every object strictly against the
# Kubernetes 1.31 schemas (kubernetes-validate), checks the values schema refuses wrong values, and
# runs `agentsearch config check` on every rendered configuration. See scripts/check_chart.py.
# The Python packages live in a virtual environment outside the clone (reused between runs).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${AGENTSEARCH_VENV:-/var/cache/agentsearch/venv}"
# Pinned: a new Helm engine or schema set is a change to review, not a surprise in CI.
requirements=(
  "helm-python-sdk==0.2.2"
  "kubernetes-validate==1.37.0"
  "jsonschema==4.26.0"
  "PyYAML==6.0.4"
  # scripts/chart-runs.py: the gRPC health checks of the shard probes
  "grpcio==1.85.1"
  "grpcio-health-checking==1.85.1"
  "protobuf==7.36.2"
  # scripts/check-mcp.py: the official MCP client
  "mcp==2.3.0"
  # scripts/check-openapi.py: the REST contract against a running server
  "schemathesis==4.32.5"
)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
missing=()
for r in "${requirements[@]}"; do
  have="$("$venv/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "${r%%==*}" 2>/dev/null || true)"
  [ "$have" = "${r##*==}" ] || missing+=("$r")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing into $venv: ${missing[*]}"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
exec "$venv/bin/python" scripts/check_chart.py "$@"
