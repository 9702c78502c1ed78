"""Offline checks of the Helm chart (run by scripts/check-chart.sh in its virtual environment).

1. values.schema.json is a valid draft-07 schema and accepts values.yaml.
2. Every value set (the chart's defaults plus the required values, each file under
   helm/agentsearch/ci/ and the examples deploy/values-*.yaml) renders; every object validates strictly against Kubernetes 1.31; the
   objects have the properties the deployment relies on (probes, security context, shard list).
3. Every file under helm/tests/refused/ is refused, with the message or schema path its
   `# expect:` line names (schema paths are refused by jsonschema and by Helm alike).
4. Each rendered agentsearch.toml, with the environment its pod gets (dummy secrets), passes
   `agentsearch config check --role router|shard` without printing a secret, and the files under
   helm/tests/config-refused/ (values of the right type the loader refuses) fail it, naming the key
   (skipped, loudly, while the binary lacks `config check`).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import chart_lib  # noqa: E402

KUBERNETES = "1.31"
CI = chart_lib.CHART / "ci"
REFUSED = chart_lib.ROOT / "helm" / "tests" / "refused"
CONFIG_REFUSED = chart_lib.ROOT / "helm" / "tests" / "config-refused"
# What the shards' file carries besides data_dir and grpc.
SHARD_SECTIONS = ("server", "lexical", "context", "log")
REQUIRED = {
    "auth": {"token": "ci-service-token-0123456789"},
    "postgres": {"url": "postgres://agentsearch:secret@postgres.example.internal:5432/agentsearch"},
}

failures: list[str] = []


def fail(text: str) -> None:
    failures.append(text)
    print(f"  FAIL {text}")


def check(condition: bool, text: str) -> None:
    if not condition:
        fail(text)


def value_sets() -> dict[str, dict]:
    sets = {"defaults": json.loads(json.dumps(REQUIRED))}
    for path in sorted(CI.glob("*-values.yaml")):
        sets[path.name.removesuffix("-values.yaml")] = chart_lib.load_values(path)
    for path in sorted((chart_lib.ROOT / "deploy").glob("values-*.yaml")):
        sets[f"deploy/{path.stem}"] = chart_lib.load_values(path)
    return sets


def check_schema() -> None:
    import jsonschema
    import yaml

    print("== values.schema.json")
    schema = json.loads((chart_lib.CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((chart_lib.CHART / "values.yaml").read_text())
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(defaults))
    check(not errors, f"values.yaml does not match the schema: {[e.message for e in errors]}")
    print("  ok: draft-07 schema, values.yaml matches it")


def properties(name: str, objects: list[dict], values: dict) -> None:
    """What the deployment relies on, beyond the Kubernetes schemas."""
    merged = chart_lib.merge_into(
        __import__("yaml").safe_load((chart_lib.CHART / "values.yaml").read_text()), values
    )
    router = chart_lib.find(objects, "Deployment", "-router")
    shards = chart_lib.find(objects, "StatefulSet", "-shard")
    headless = chart_lib.find(objects, "Service", "-shard-headless")
    config = chart_lib.find(objects, "ConfigMap", "-config")
    import tomllib

    router_toml = tomllib.loads(config["data"]["router.toml"])
    shard_toml = tomllib.loads(config["data"]["shard.toml"])
    replicas = merged["shard"]["replicas"]
    check(shards["spec"]["replicas"] == replicas, f"{name}: shard replicas")
    check(shards["spec"]["podManagementPolicy"] == "Parallel", f"{name}: podManagementPolicy")
    check(headless["spec"]["clusterIP"] == "None", f"{name}: headless shard Service")
    check(shards["spec"]["serviceName"] == headless["metadata"]["name"], f"{name}: serviceName")
    base = shards["metadata"]["name"]
    expected = [
        f"{base}-{i}.{headless['metadata']['name']}.search.svc.{merged['clusterDomain']}:{merged['shard']['grpcPort']}"
        for i in range(replicas)
    ]
    check(router_toml["shards"]["remote"] == expected, f"{name}: shards.remote {router_toml['shards']['remote']} != {expected}")
    check(router_toml["server"]["drain_secs"] == merged["router"]["drainSecs"], f"{name}: router drain_secs")
    check(shard_toml["server"]["drain_secs"] == merged["shard"]["drainSecs"], f"{name}: shard drain_secs")
    check(shard_toml["data_dir"] == merged["shard"]["dataDir"], f"{name}: shard data_dir")
    check(router_toml.get("lexical") == shard_toml.get("lexical"), f"{name}: lexical differs between roles")
    check(router_toml.get("context") == shard_toml.get("context"), f"{name}: context differs between roles")
    hpa = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    check(bool(hpa) == merged["router"]["autoscaling"]["enabled"], f"{name}: HPA presence")
    check(("replicas" in router["spec"]) != bool(hpa), f"{name}: Deployment replicas set while autoscaled")
    check(
        bool([o for o in objects if o["kind"] == "NetworkPolicy"]) == merged["networkPolicy"]["enabled"],
        f"{name}: NetworkPolicy presence",
    )
    secret_objects = [o for o in objects if o["kind"] == "Secret"]
    check(bool(secret_objects) != bool(merged["secrets"]["existingSecret"]), f"{name}: Secret presence")
    text = json.dumps(config)
    for s in secret_objects:
        for key, value in s.get("stringData", {}).items():
            if len(value) >= 8 and value in text:
                fail(f"{name}: the secret {key} appears in the ConfigMap")
    for workload, drain in ((router, merged["router"]["drainSecs"]), (shards, merged["shard"]["drainSecs"])):
        pod = workload["spec"]["template"]
        spec = pod["spec"]
        c = spec["containers"][0]
        who = f"{name}/{workload['kind']}"
        check(spec.get("enableServiceLinks") is False, f"{who}: enableServiceLinks")
        check(spec["terminationGracePeriodSeconds"] > drain, f"{who}: grace period <= drain")
        check(spec["securityContext"].get("runAsNonRoot") is True, f"{who}: runAsNonRoot")
        check(spec["securityContext"].get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{who}: seccomp")
        sc = c["securityContext"]
        check(sc.get("readOnlyRootFilesystem") is True, f"{who}: readOnlyRootFilesystem")
        check(sc.get("allowPrivilegeEscalation") is False, f"{who}: allowPrivilegeEscalation")
        check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{who}: capabilities")
        check(any(m["mountPath"] == "/tmp" for m in c["volumeMounts"]), f"{who}: writable /tmp")
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            check(probe in c, f"{who}: {probe}")
        check("checksum/config" in pod["metadata"]["annotations"], f"{who}: checksum/config")
        if not merged["secrets"]["existingSecret"]:
            check("checksum/secret" in pod["metadata"]["annotations"], f"{who}: checksum/secret")
        check("topologySpreadConstraints" in spec or not merged[c["name"]]["topologySpread"]["enabled"], f"{who}: spread")
        for e in c.get("env", []):
            if e["name"].startswith("AGENTSEARCH_") and "value" in e and "://" in e["value"] and "$(" not in e["value"]:
                fail(f"{who}: {e['name']} carries a URL inline instead of from the Secret")
    rc = router["spec"]["template"]["spec"]["containers"][0]
    check(rc["args"][:3] == ["router", "--config", "/etc/agentsearch/config/agentsearch.toml"], f"{name}: router args")
    check(rc["livenessProbe"]["httpGet"]["path"] == "/livez", f"{name}: router liveness path")
    check(rc["readinessProbe"]["httpGet"]["path"] == merged["router"]["readinessProbe"]["path"], f"{name}: router readiness path")
    sc = shards["spec"]["template"]["spec"]["containers"][0]
    check(sc["args"][:3] == ["shard", "--config", "/etc/agentsearch/agentsearch.toml"], f"{name}: shard args")
    if merged["internalTls"]["secretName"]:
        # gRPC probes cannot speak TLS: HTTP on the metrics port, readiness on /readyz.
        metrics_port = merged["shard"]["metricsPort"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            check(sc[probe].get("httpGet", {}).get("port") == metrics_port, f"{name}: shard {probe} is not on the metrics port")
        check(sc["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{name}: shard readiness path")
        check(shard_toml.get("tls", {}).get("client_ca_file") == "/etc/agentsearch/internal/ca.crt", f"{name}: shards require client certificates")
        check(router_toml["shards"].get("tls_cert_file") == "/etc/agentsearch/internal/tls.crt", f"{name}: routers present a client certificate")
    else:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            check("grpc" in sc[probe], f"{name}: shard {probe} is not a grpc probe")
    check(
        sc["startupProbe"]["periodSeconds"] * sc["startupProbe"]["failureThreshold"] >= 300,
        f"{name}: shard startupProbe shorter than 5 minutes",
    )
    check(bool(shards["spec"].get("volumeClaimTemplates")), f"{name}: volumeClaimTemplates")


def check_lint() -> None:
    import helm_python

    print("== helm lint (strict)")
    values = chart_lib.load_values(CI / "minimal-values.yaml")
    report = helm_python.lint(str(chart_lib.CHART), values, strict=True, kube_version=f"v{KUBERNETES}.0")
    for message in report.get("messages", []):
        if message["severity"] >= 2:
            fail(f"helm lint: {message['path']}: {message['error']}")
    for error in report.get("errors", []):
        fail(f"helm lint: {error}")
    print(f"  ok: {len(report.get('messages', []))} message(s), none a warning or an error")


def check_value_sets(sets: dict[str, dict]) -> dict[str, list[dict]]:
    import kubernetes_validate

    rendered = {}
    for name, values in sets.items():
        print(f"== render {name}")
        try:
            objects = chart_lib.render(values)
        except Exception as e:  # noqa: BLE001
            fail(f"{name}: does not render: {e}")
            continue
        rendered[name] = objects
        for obj in objects:
            try:
                kubernetes_validate.validate(chart_lib.strip(obj), KUBERNETES, strict=True)
            except Exception as e:  # noqa: BLE001
                fail(f"{name}: {obj['kind']} {obj['metadata']['name']}: {str(e)[:500]}")
        properties(name, objects, values)
        kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
        print(f"  {len(objects)} objects valid against Kubernetes {KUBERNETES} (strict): {', '.join(kinds)}")
    return rendered


def check_rolls() -> None:
    """A change rolls the pods that read it and no others (checksum annotations)."""
    print("== which changes roll which pods")
    base = chart_lib.load_values(CI / "minimal-values.yaml")

    def annotations(values: dict) -> tuple[dict, dict]:
        objects = chart_lib.render(values)
        pick = lambda kind, suffix: chart_lib.find(objects, kind, suffix)["spec"]["template"]["metadata"]["annotations"]
        return pick("Deployment", "-router"), pick("StatefulSet", "-shard")

    router0, shard0 = annotations(base)
    cases = [
        ("shard.replicas 3 -> 5 (the routers' shard list)", {"shard": {"replicas": 5}}, True, False),
        ("config.search.rrf_k (routers only)", {"config": {"search": {"rrf_k": 30}}}, True, False),
        ("postgres.url (routers only)", {"postgres": {"url": "postgres://other@db:5432/agentsearch"}}, True, False),
        ("config.lexical.b (both roles)", {"config": {"lexical": {"b": 0.6}}}, True, True),
        ("auth.token (both roles)", {"auth": {"token": "another-service-token-0123456789"}}, True, True),
        ("shard.drainSecs (shards only)", {"shard": {"drainSecs": 5}}, False, True),
    ]
    for what, change, router_rolls, shard_rolls in cases:
        router, shard = annotations(chart_lib.merge_into(json.loads(json.dumps(base)), change))
        good = (router != router0) == router_rolls and (shard != shard0) == shard_rolls
        check((router != router0) == router_rolls, f"{what}: routers {'do not roll' if router_rolls else 'roll'}")
        check((shard != shard0) == shard_rolls, f"{what}: shards {'do not roll' if shard_rolls else 'roll'}")
        if good:
            print(f"  ok: {what}: routers {'roll' if router_rolls else 'stay'}, shards {'roll' if shard_rolls else 'stay'}")


def expectation(path: pathlib.Path) -> str | None:
    return next((l.split(":", 1)[1].strip() for l in path.read_text().splitlines() if l.startswith("# expect:")), None)


def check_refused() -> None:
    import jsonschema
    import yaml

    schema = json.loads((chart_lib.CHART / "values.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    defaults = yaml.safe_load((chart_lib.CHART / "values.yaml").read_text())
    files = sorted(REFUSED.glob("*.yaml"))
    check(len(files) >= 2, "fewer than two refused value files")
    for path in files:
        expect = expectation(path)
        if not expect:
            fail(f"{path.name}: no `# expect:` line")
            continue
        values = chart_lib.load_values(path)
        print(f"== refused {path.name} (expect {expect})")
        if expect.startswith("/"):
            merged = chart_lib.merge_into(json.loads(json.dumps(defaults)), values)
            paths = ["/" + "/".join(str(p) for p in e.absolute_path) for e in validator.iter_errors(merged)]
            check(any(p == expect or p.startswith(expect + "/") for p in paths),
                  f"{path.name}: jsonschema did not refuse {expect} (errors at {paths})")
        try:
            chart_lib.render(values)
            fail(f"{path.name}: rendered, expected a refusal naming {expect}")
        except Exception as e:  # noqa: BLE001
            message = str(e)
            where = expect if not expect.startswith("/") else f"at '{expect}"
            check(where in message, f"{path.name}: refused, but the message does not name `{expect}`: {message[:400]}")
            print(f"  ok: {message.strip().splitlines()[-1][:160]}")


def binary() -> pathlib.Path:
    target = os.environ.get("CARGO_TARGET_DIR") or str(chart_lib.ROOT / "target")
    return pathlib.Path(os.environ.get("AGENTSEARCH_BIN", f"{target}/release/agentsearch"))


def has_config_check(bin_path: pathlib.Path) -> bool:
    try:
        r = subprocess.run([str(bin_path), "config", "check", "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return r.returncode == 0 and "--role" in r.stdout


def model_dir() -> str:
    return os.environ.get("MODEL_DIR") or str(chart_lib.ROOT / "models" / "all-MiniLM-L6-v2")


def check_configs(rendered: dict[str, list[dict]]) -> None:
    bin_path = binary()
    print(f"== agentsearch config check ({bin_path})")
    if not bin_path.exists():
        fail(f"no binary at {bin_path}: build it (cargo build --release --workspace --bins), or set CARGO_TARGET_DIR / AGENTSEARCH_BIN")
        return
    if not has_config_check(bin_path):
        fail(f"{bin_path} has no `config check --role` subcommand: the rendered configurations cannot be checked")
        return
    with tempfile.TemporaryDirectory(prefix="agentsearch-chart-") as tmp:
        for name, objects in rendered.items():
            for kind, suffix, role in (("Deployment", "-router", "router"), ("StatefulSet", "-shard", "shard")):
                workload = chart_lib.find(objects, kind, suffix)
                proc = chart_lib.materialize(objects, workload, pathlib.Path(tmp) / name / role, str(bin_path))
                if role == "router":
                    proc.config.setdefault("embed", {})["model_dir"] = model_dir()
                    proc.write_config()
                argv = [str(bin_path), "config", "check", "--role", role, "--config", str(proc.config_path)]
                r = subprocess.run(argv, env=chart_lib.process_env(proc.env), capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    fail(f"{name}/{role}: config check failed:\n{r.stdout}\n{r.stderr}")
                    continue
                printed = r.stdout + r.stderr
                for key, value in proc.env.items():
                    secret = urllib.parse.urlparse(value).password if "://" in value else value
                    if secret and len(secret) >= 5 and secret in printed:
                        fail(f"{name}/{role}: config check printed the secret of {key}")
                print(f"  ok: {name}/{role}")
        for path in sorted(CONFIG_REFUSED.glob("*.yaml")):
            expect = expectation(path)
            objects = chart_lib.render(chart_lib.load_values(path))
            for kind, suffix, role in (("Deployment", "-router", "router"), ("StatefulSet", "-shard", "shard")):
                proc = chart_lib.materialize(objects, chart_lib.find(objects, kind, suffix),
                                             pathlib.Path(tmp) / path.stem / role, str(bin_path))
                if role == "router":
                    proc.config.setdefault("embed", {})["model_dir"] = model_dir()
                    proc.write_config()
                argv = [str(bin_path), "config", "check", "--quiet", "--role", role, "--config", str(proc.config_path)]
                r = subprocess.run(argv, env=chart_lib.process_env(proc.env), capture_output=True, text=True, timeout=120)
                if role == "shard" and expect.split(".")[0] not in SHARD_SECTIONS:
                    continue  # a key only the routers' file has
                if r.returncode == 0 or expect not in r.stdout + r.stderr:
                    fail(f"{path.name}/{role}: config check should refuse `{expect}`: status {r.returncode}\n{r.stderr}")
                else:
                    print(f"  ok: {path.name}/{role} refused: {(r.stdout + r.stderr).strip().splitlines()[0][:140]}")


def main() -> int:
    check_schema()
    check_lint()
    rendered = check_value_sets(value_sets())
    check_rolls()
    check_refused()
    check_configs(rendered)
    if failures:
        print(f"\n{len(failures)} check(s) failed:")
        for f in failures:
            print(f"  - {f.splitlines()[0]}")
        return 1
    print("\nchart checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
