"""Rendering the Helm chart offline and turning its pod specs into local processes.

Used by scripts/check-chart.sh (through check_chart.py) and scripts/chart-runs.py. Needs the
packages check-chart.sh installs in its virtual environment: helm-python-sdk (Helm's Go SDK behind
a C ABI: no helm binary) and PyYAML.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import re
import tomllib
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "agentsearch"
FIXTURES = ROOT / "helm" / "tests" / "fixtures"


def load_values(*files: pathlib.Path | str) -> dict:
    """Value files parsed by Helm's own parser (as `helm install -f` reads them), merged in order."""
    import helm_python

    values: dict = {}
    for f in files:
        merge_into(values, helm_python.values_from_yaml(pathlib.Path(f).read_text()) or {})
    return values


def merge_into(base: dict, extra: dict) -> dict:
    """Helm's coalescing for maps: nested maps merge, anything else replaces."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_into(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def render(values: dict, name: str = "as", namespace: str = "search") -> list[dict]:
    """Renders the chart; returns every object of every manifest (NOTES.txt skipped)."""
    import helm_python
    import yaml

    chart = helm_python.Chart.load(str(CHART))
    manifests = chart.render(values, name=name, namespace=namespace)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for obj in yaml.safe_load_all(text):
            if obj:
                obj.setdefault("metadata", {}).setdefault("annotations", {})
                obj["__template__"] = path
                objects.append(obj)
    return objects


def strip(obj: dict) -> dict:
    """The object as the API server would receive it (without the template note)."""
    out = {k: v for k, v in obj.items() if k != "__template__"}
    if not out.get("metadata", {}).get("annotations"):
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "annotations"}
    return out


def find(objects: list[dict], kind: str, suffix: str = "") -> dict:
    hits = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    if len(hits) != 1:
        raise LookupError(f"expected one {kind} named *{suffix}, found {len(hits)}")
    return hits[0]


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_dump(table: dict, prefix: str = "") -> str:
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    for k, v in table.items():
        if isinstance(v, dict):
            name = f"{prefix}.{toml_key(k)}" if prefix else toml_key(k)
            lines.append(f"\n[{name}]")
            body = toml_dump(v, name)
            if body:
                lines.append(body)
    return "\n".join(lines)


# Values for keys of Secrets the chart does not create (secrets.existingSecret, the PostgreSQL CA),
# chosen by what consumes them.
DUMMY_TOKEN = "dummy-service-token-0123456789"
DUMMY_HS256 = "dummy-hs256-secret-0123456789abcdef0123"


def dummy_for_env(name: str) -> str:
    if name == "AGENTSEARCH_AUTH__TOKEN":
        return DUMMY_TOKEN
    if name == "AGENTSEARCH_POSTGRES__URL":
        return "postgres://agentsearch:dummy@127.0.0.1:5432/agentsearch"
    if name == "AGENTSEARCH_HYDRATION__REDIS_URL":
        return "redis://127.0.0.1:6379/0"
    if name.endswith("__HS256_SECRET"):
        return DUMMY_HS256
    if name == "POSTGRES_PASSWORD":
        return "dummy"
    raise KeyError(f"no dummy value for the environment variable {name}")


def dummy_for_mount(mount_path: str, key: str) -> str:
    if "postgres-ca" in mount_path or "redis-ca" in mount_path:
        return (FIXTURES / "test-ca.crt").read_text()
    if mount_path.rstrip("/").endswith("/internal") and key == "ca.crt":
        return (FIXTURES / "test-ca.crt").read_text()
    if mount_path.rstrip("/").endswith(("/tls", "/internal")):
        return (FIXTURES / ("test-server.key" if key.endswith(".key") else "test-server.crt")).read_text()
    if "jwt" in mount_path:
        return (FIXTURES / "ec-p256-public.pem").read_text()
    raise KeyError(f"no dummy file for a secret mounted at {mount_path}")


@dataclass
class Process:
    """One container of a rendered pod, made runnable on this machine."""

    role: str
    argv: list[str]
    env: dict[str, str]
    config_path: pathlib.Path
    config: dict
    mounts: dict[str, pathlib.Path] = field(default_factory=dict)

    def write_config(self) -> None:
        self.config_path.write_text(toml_dump(self.config) + "\n")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of env values and args ($$ escapes)."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, value)


def materialize(objects: list[dict], workload: dict, workdir: pathlib.Path, binary: str) -> Process:
    """The first container of `workload` (Deployment or StatefulSet) as a local process: its
    ConfigMap and Secret volumes written under `workdir`, emptyDirs and claims as folders there,
    every path of the configuration that lies under a mount rewritten to the folder, and its
    environment with values from the rendered Secret (dummies for Secrets the chart does not make)
    and the pod name of the downward API."""
    spec = workload["spec"]["template"]["spec"]
    container = spec["containers"][0]
    role = container["name"]
    workdir.mkdir(parents=True, exist_ok=True)
    secrets = {
        o["metadata"]["name"]: {**o.get("stringData", {})} for o in objects if o["kind"] == "Secret"
    }
    configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "claim": True}

    mounts: dict[str, pathlib.Path] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        target = workdir / "mounts" / mount["name"]
        target.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            data = configmaps[volume["configMap"]["name"]]
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                (target / item["path"]).write_text(data[item["key"]])
        elif "secret" in volume:
            data = secrets.get(volume["secret"]["secretName"])
            items = volume["secret"].get("items") or [{"key": k, "path": k} for k in (data or {})]
            for item in items:
                text = data[item["key"]] if data is not None else dummy_for_mount(mount["mountPath"], item["key"])
                (target / item["path"]).write_text(text)
        if "subPath" in mount:
            mounts[mount["mountPath"]] = target / mount["subPath"]
        else:
            mounts[mount["mountPath"]] = target

    def local(path: str) -> str:
        for mount_path in sorted(mounts, key=len, reverse=True):
            if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
                return str(mounts[mount_path]) + path[len(mount_path):]
        return path

    env: dict[str, str] = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = expand(entry["value"], env)
        elif "secretKeyRef" in entry.get("valueFrom", {}):
            ref = entry["valueFrom"]["secretKeyRef"]
            data = secrets.get(ref["name"])
            env[name] = data[ref["key"]] if data is not None else dummy_for_env(name)
        elif entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            # The downward API: the pod's name is the workload's name and the role here.
            env[name] = f"{workload['metadata']['name']}-{role}"
        else:
            raise ValueError(f"{role}: unsupported env source for {name}")

    args = [expand(a, env) for a in container.get("command", []) + container.get("args", [])]
    config_file = pathlib.Path(local(args[args.index("--config") + 1]))
    config = tomllib.loads(config_file.read_text())

    def rewrite(node):
        if isinstance(node, dict):
            return {k: rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        if isinstance(node, str) and node.startswith("/"):
            return local(node)
        return node

    config = rewrite(config)
    args[args.index("--config") + 1] = str(config_file)
    argv = [binary] + args
    proc = Process(role, argv, env, config_file, config, mounts)
    proc.write_config()
    return proc


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a local process: this one's without configuration variables (a pod has
    none but its own), plus the pod's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSEARCH_")}
    env.update(extra)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env
