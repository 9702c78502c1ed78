#!/usr/bin/env python3
"""The chart runs: renders helm/agentsearch with helm/agentsearch/ci/runs-values.yaml (2 routers,
3 shards) and starts every pod of the router Deployment and the shard StatefulSet as a local process,
exactly as its spec says: the container's args, its environment (secrets from the rendered Secret),
the rendered ConfigMap written where the pod mounts it (mount paths moved to a temporary folder,
volumes and emptyDirs likewise). The shards' Kubernetes DNS names map to 127.0.0.1 ports (the
routers' shard list and the shards' listen addresses are rewritten accordingly), PostgreSQL is a
fresh database on postgres://postgres@127.0.0.1:5432 (trust auth), Redis 127.0.0.1:6379.

Then: waits until every router is ready (its readiness probe's path 200), loads the demo catalog
through router 1, searches through router 2 (REST), checks a JWT of the project configured by
environment variable is accepted, kills one shard with SIGKILL (routers' /readyz must drop to 503,
/readyz?allowPartial=true stay 200, and searches still answer 200, flagged partial with the missing
integrations in errors), restarts it on the same
volume (routers ready again, complete answers, its tools still there), and drains a router and a
shard with SIGTERM (not ready at once: /readyz 503, gRPC health NOT_SERVING; still serving; gone
before the grace period ends). The gRPC health checks ask what the pods' `grpc:` probes ask. Each
process runs in an empty working directory that must stay empty (the pods' root filesystem is
read-only: relative writes there would fail). Every process and the
database are removed at exit, on failure too. Bounded to --timeout seconds (170 by default).

Run it with the virtual environment of scripts/check-chart.sh:
  /var/cache/agentsearch/venv/bin/python scripts/chart-runs.py
Environment: AGENTSEARCH_BIN (default $CARGO_TARGET_DIR/release/agentsearch), MODEL_DIR (default
models/all-MiniLM-L6-v2), AGENTSEARCH_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import chart_lib  # noqa: E402

DEMO_PROJECT = "00000000-0000-4000-8000-000000000001"
NAMESPACE = "search"
RELEASE = "as"
SEARCH = "/api/tools/projects/{project}/tools/search"


class Failed(Exception):
    pass


class TimedOut(Exception):
    pass


def grpc_health(port: int, timeout: float = 3) -> str:
    """What a Kubernetes `grpc:` probe asks: grpc.health.v1.Health/Check for the service ""."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError as e:
            return f"error {e.code().name}"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def http(method: str, url: str, body: dict | None = None, token: str | None = None, timeout: float = 10):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        status = e.code
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
        return None, str(e)
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


class Run:
    def __init__(self, args):
        self.args = args
        self.procs: list[dict] = []
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="agentsearch-chart-runs-"))
        self.database: str | None = None
        pg = urllib.parse.urlparse(os.environ.get("AGENTSEARCH_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres"))
        self.pg = {"host": pg.hostname or "127.0.0.1", "port": pg.port or 5432, "user": pg.username or "postgres"}

    # --- processes -------------------------------------------------------------------------

    def start(self, name: str, proc: chart_lib.Process, cwd: pathlib.Path) -> dict:
        logfile = open(self.tmp / f"{name}.log", "w")
        popen = subprocess.Popen(
            proc.argv, env=chart_lib.process_env(proc.env), cwd=cwd, stdout=logfile, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        entry = {"name": name, "popen": popen, "log": self.tmp / f"{name}.log", "proc": proc}
        self.procs.append(entry)
        log(f"started {name} (pid {popen.pid}): {' '.join(proc.argv[1:])}")
        return entry

    def rootfs(self, pod: str) -> pathlib.Path:
        """The working directory of a pod's process, standing for its read-only root filesystem:
        it must stay empty (every write belongs on a mounted volume)."""
        root = self.tmp / pod / "rootfs"
        root.mkdir(parents=True, exist_ok=True)
        return root

    def check_rootfs(self) -> None:
        for entry in self.procs:
            root = self.tmp / entry["name"] / "rootfs"
            written = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
            if written:
                raise Failed(f"{entry['name']} wrote outside its volumes (read-only root filesystem in the pod): {written[:10]}")
        log("no process wrote outside its volumes")

    def alive(self, entry: dict) -> None:
        code = entry["popen"].poll()
        if code is not None:
            raise Failed(f"{entry['name']} exited with status {code}:\n{self.tail(entry)}")

    def tail(self, entry: dict, lines: int = 25) -> str:
        try:
            text = entry["log"].read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + l for l in text[-lines:])

    def stop_all(self) -> None:
        for entry in self.procs:
            p = entry["popen"]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 10
        for entry in self.procs:
            p = entry["popen"]
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()

    def cleanup(self) -> None:
        self.stop_all()
        if self.database:
            subprocess.run(
                ["dropdb", "--if-exists", "-h", self.pg["host"], "-p", str(self.pg["port"]), "-U", self.pg["user"], self.database],
                capture_output=True,
            )
        if self.args.keep:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # --- setup ---------------------------------------------------------------------------

    def create_database(self) -> None:
        name = f"agentsearch_chart_runs_{os.getpid()}_{int(time.time())}"
        r = subprocess.run(
            ["createdb", "-h", self.pg["host"], "-p", str(self.pg["port"]), "-U", self.pg["user"], name],
            capture_output=True, text=True,
        )
        if r.returncode != 0:
            raise Failed(f"createdb {name}: {r.stderr.strip()}")
        self.database = name
        log(f"database {name} on {self.pg['host']}:{self.pg['port']}")

    def render(self) -> list[dict]:
        values = chart_lib.load_values(self.args.values)
        chart_lib.merge_into(values, {"postgres": {
            "host": self.pg["host"], "port": self.pg["port"], "user": self.pg["user"], "database": self.database,
        }})
        return chart_lib.render(values, name=RELEASE, namespace=NAMESPACE)

    # --- the run -------------------------------------------------------------------------

    def main(self) -> None:
        binary = self.args.binary
        if not pathlib.Path(binary).exists():
            raise Failed(f"no binary at {binary} (build it, or set AGENTSEARCH_BIN / CARGO_TARGET_DIR)")
        model = pathlib.Path(self.args.model_dir)
        if not (model / "model.safetensors").exists():
            raise Failed(f"no model in {model} (run scripts/fetch-model.sh, or set MODEL_DIR)")
        self.create_database()
        objects = self.render()
        deployment = chart_lib.find(objects, "Deployment", "-router")
        statefulset = chart_lib.find(objects, "StatefulSet", "-shard")
        secret = chart_lib.find(objects, "Secret", "-secrets")
        token = secret["stringData"]["auth-token"]

        # Shards: pod <statefulset>-<i>, reachable as <pod>.<serviceName>.<ns>.svc.<domain>.
        sts_name = statefulset["metadata"]["name"]
        service = statefulset["spec"]["serviceName"]
        shard_ports: dict[str, int] = {}
        shards = []
        for i in range(statefulset["spec"]["replicas"]):
            pod = f"{sts_name}-{i}"
            proc = chart_lib.materialize(objects, statefulset, self.tmp / pod, binary)
            port = chart_lib.free_port()
            declared = int(proc.config["grpc"].rsplit(":", 1)[1])
            proc.config["grpc"] = f"127.0.0.1:{port}"
            shard_ports[f"{pod}.{service}.{NAMESPACE}.svc.cluster.local:{declared}"] = port
            if proc.config.get("server", {}).get("metrics_listen"):
                proc.config["server"]["metrics_listen"] = f"127.0.0.1:{chart_lib.free_port()}"
            proc.write_config()
            shards.append((pod, proc))

        routers = []
        for i in range(deployment["spec"]["replicas"]):
            pod = f"{deployment['metadata']['name']}-{i}"
            proc = chart_lib.materialize(objects, deployment, self.tmp / pod, binary)
            remote = proc.config["shards"]["remote"]
            if sorted(remote) != sorted(shard_ports):
                raise Failed(f"the routers' shard list {remote} is not the StatefulSet's pods {sorted(shard_ports)}")
            proc.config["shards"]["remote"] = [f"127.0.0.1:{shard_ports[a]}" for a in remote]
            http_port, grpc_port = chart_lib.free_port(), chart_lib.free_port()
            proc.config["http"]["listen"] = f"127.0.0.1:{http_port}"
            proc.config["grpc"] = f"127.0.0.1:{grpc_port}"
            proc.config["embed"]["model_dir"] = str(model)
            proc.write_config()
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            routers.append({"pod": pod, "proc": proc, "http": http_port, "grpc": grpc_port, "container": container,
                            "grace": grace})

        # As the StatefulSet's Parallel policy and the Deployment do: everything at once.
        shard_entries = [self.start(pod, proc, self.rootfs(pod)) for pod, proc in shards]
        for r in routers:
            r["entry"] = self.start(r["pod"], r["proc"], self.rootfs(r["pod"]))

        probes = routers[0]["container"]
        ready_path = probes["readinessProbe"]["httpGet"]["path"]
        live_path = probes["livenessProbe"]["httpGet"]["path"]
        if ready_path not in ("/readyz", "/readyz?allowPartial=true"):
            raise Failed(f"the values set the routers' readiness to {ready_path}: this run checks /readyz")
        for r in routers:
            self.wait_status(r, ready_path, 200, self.args.ready_timeout, "ready")
            status, _ = http("GET", f"http://127.0.0.1:{r['http']}{live_path}")
            if status != 200:
                raise Failed(f"{r['pod']}: GET {live_path} answered {status}")
        log("every router is ready")
        for (pod, proc), entry in zip(shards, shard_entries):
            self.wait_health(entry, int(proc.config["grpc"].rsplit(":", 1)[1]), "SERVING", 30)
        for r in routers:
            self.wait_health(r["entry"], r["grpc"], "SERVING", 10)

        self.load_catalog(routers[0], token)
        r2 = routers[1 % len(routers)]
        body = self.search(r2, token, "post a message to a slack channel", expect_partial=False)
        top = body["tools"][0]
        if top.get("integration") != "slack":
            raise Failed(f"the best tool for a Slack message is {top.get('intentName')} ({top.get('integration')})")
        log(f"search through {r2['pod']}: {len(body['tools'])} tools, best {top.get('intentName')}")
        self.jwt_project(routers[0], r2)

        # One shard dies.
        victim = shard_entries[0]
        os.killpg(victim["popen"].pid, signal.SIGKILL)
        victim["popen"].wait()
        log(f"killed {victim['name']} (SIGKILL)")
        for r in routers:
            # Strict readiness drops; the probe that accepts partial answers keeps the router in.
            self.wait_status(r, "/readyz", 503, 30, "not ready after the shard died")
            status, _ = http("GET", f"http://127.0.0.1:{r['http']}/readyz?allowPartial=true")
            if status != 200:
                raise Failed(f"{r['pod']}: /readyz?allowPartial=true answered {status} with one shard down")
            if ready_path == "/readyz":
                self.wait_status(r, ready_path, 503, 30, "not ready after the shard died")
        for r in routers:
            body = self.search(r, token, "create an invoice for a customer", expect_partial=True)
            log(f"search through {r['pod']} with a shard down: 200, partial, {len(body['tools'])} tools, "
                f"failed integrations {body['usage'].get('failedIntegrations')}")

        # The StatefulSet restarts the pod on the same volume: the shard comes back with its id and
        # its indexes, the routers find it again at the same address.
        pod, proc = shards[0]
        self.procs.remove(victim)
        self.start(pod, proc, self.rootfs(pod))
        for r in routers:
            self.wait_status(r, "/readyz", 200, 30, "ready again with the shard back")
        # A tool of an integration the dead shard held is found again.
        lost = body["usage"]["failedIntegrations"][0]
        tool = next(t for t in self.catalog_tools if t["integration"] == lost)
        deadline = time.time() + 30
        while True:
            url = f"http://127.0.0.1:{r2['http']}{SEARCH.format(project=DEMO_PROJECT)}"
            status, body = http("POST", url, {"query": tool["description"], "topK": 10}, token=token)
            if status == 200 and isinstance(body, dict) and not body.get("usage", {}).get("partial"):
                break
            if time.time() > deadline:
                raise Failed(f"the restarted shard's integrations did not come back: {status} {body}")
            time.sleep(0.5)
        names = [t.get("intentName") for t in body["tools"]]
        if tool["name"] not in names:
            raise Failed(f"after the restart {tool['name']} ({lost}, on the restarted shard) is not found: {names}")
        log(f"{pod} restarted on its volume: complete answers again, {tool['name']} ({lost}) found")

        self.drain(routers[0], ready_path, live_path)
        pod, proc = shards[-1]
        self.drain_shard(next(e for e in self.procs if e["name"] == pod), proc, statefulset)
        self.check_rootfs()

    def wait_status(self, r: dict, path: str, want: int, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            self.alive(r["entry"])
            status, body = http("GET", f"http://127.0.0.1:{r['http']}{path}", timeout=3)
            last = (status, body)
            if status == want:
                log(f"{r['pod']}: GET {path} -> {status} ({what})")
                return
            time.sleep(0.5)
        raise Failed(f"{r['pod']}: GET {path} never answered {want} within {timeout}s (last: {last})\n{self.tail(r['entry'])}")

    def load_catalog(self, router: dict, token: str) -> None:
        catalog = chart_lib.ROOT / "demo" / "catalog.jsonl"
        if self.args.integrations:
            lines = catalog.read_text().splitlines()
            keep = sorted({json.loads(l)["integration"] for l in lines if l.strip()})[: self.args.integrations]
            if "slack" not in keep:
                keep.append("slack")
            subset = self.tmp / "catalog.jsonl"
            subset.write_text("\n".join(l for l in lines if l.strip() and json.loads(l)["integration"] in keep) + "\n")
            catalog = subset
        started = time.time()
        argv = [self.args.binary, "catalog", "load", str(catalog), "--server", f"127.0.0.1:{router['grpc']}",
                "--token", token, "--project", DEMO_PROJECT]
        env = chart_lib.process_env({})
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=max(10, self.remaining() - 30))
        if r.returncode != 0:
            raise Failed(f"catalog load through {router['pod']} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        self.catalog_tools = [json.loads(l) for l in catalog.read_text().splitlines() if l.strip()]
        count = len(self.catalog_tools)
        log(f"loaded {count} tools through {router['pod']} in {time.time() - started:.0f}s")

    def search(self, router: dict, token: str, query: str, expect_partial: bool) -> dict:
        url = f"http://127.0.0.1:{router['http']}{SEARCH.format(project=DEMO_PROJECT)}"
        status, body = http("POST", url, {"query": query, "topK": 10}, token=token, timeout=15)
        if status != 200 or not isinstance(body, dict):
            raise Failed(f"search through {router['pod']}: {status} {body}")
        if not body.get("tools"):
            raise Failed(f"search through {router['pod']} found nothing: {body}")
        usage = body.get("usage", {})
        if expect_partial:
            if usage.get("partial") is not True or not body.get("errors"):
                raise Failed(f"{router['pod']}: a shard is down but the answer is not flagged partial: usage={usage} errors={body.get('errors')}")
        elif usage.get("partial"):
            raise Failed(f"{router['pod']}: partial answer with every shard up: {usage}")
        return body

    def jwt_project(self, issuer: dict, router: dict) -> None:
        """The project whose HS256 secret reaches the router only as an environment variable from
        the Secret: a token signed with it is accepted, a token of another secret is not."""
        projects = issuer["proc"].config.get("auth", {}).get("projects", {})
        envs = [k for k in issuer["proc"].env if k.startswith("AGENTSEARCH_AUTH__PROJECTS__") and k.endswith("__HS256_SECRET")]
        if not envs:
            log("no project with an HS256 secret in the values: JWT check skipped")
            return
        key = envs[0].split("__")[2].lower()
        project = f"{key[:8]}-{key[8:12]}-{key[12:16]}-{key[16:20]}-{key[20:]}"
        argv = [self.args.binary, "token", "--config", str(issuer["proc"].config_path), "--user", "chart-runs@example.com",
                "--project", project]
        r = subprocess.run(argv, env=chart_lib.process_env(issuer["proc"].env), capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise Failed(f"agentsearch token for {project}: {r.stderr.strip()}")
        jwt = r.stdout.strip().splitlines()[-1]
        url = f"http://127.0.0.1:{router['http']}{SEARCH.format(project=project)}"
        status, body = http("POST", url, {"query": "anything"}, token=jwt)
        if status != 200:
            raise Failed(f"a JWT of project {project} (secret from the environment) was refused: {status} {body}")
        status, _ = http("POST", url, {"query": "anything"}, token=jwt[:-4] + ("AAAA" if not jwt.endswith("AAAA") else "BBBB"))
        if status != 401:
            raise Failed(f"a JWT with a bad signature answered {status}, expected 401")
        log(f"JWT of project {project} accepted through {router['pod']} ({len(projects)} project(s) in the file)")

    def drain(self, router: dict, ready_path: str, live_path: str) -> None:
        drain = int(router["proc"].config.get("server", {}).get("drain_secs", 0))
        grace = router["grace"]
        pod = router["entry"]["popen"]
        os.killpg(pod.pid, signal.SIGTERM)
        sent = time.time()
        log(f"{router['pod']}: SIGTERM (drain_secs {drain}, grace {grace}s)")
        if drain > 0:
            # Not ready as soon as the signal is handled (well within the drain period).
            deadline = sent + min(1.0, drain / 2)
            while True:
                status, _ = http("GET", f"http://127.0.0.1:{router['http']}{ready_path}", timeout=2)
                if status == 503 or time.time() > deadline:
                    break
                time.sleep(0.05)
            if status != 503:
                raise Failed(f"{router['pod']}: draining but GET {ready_path} answered {status}, expected 503")
            status, _ = http("GET", f"http://127.0.0.1:{router['http']}{live_path}", timeout=2)
            if status != 200:
                raise Failed(f"{router['pod']}: draining but GET {live_path} answered {status}, expected 200")
        try:
            pod.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            raise Failed(f"{router['pod']}: still running {grace}s after SIGTERM (terminationGracePeriodSeconds)")
        took = time.time() - sent
        if took < drain - 0.5:
            raise Failed(f"{router['pod']}: exited {took:.1f}s after SIGTERM, before drain_secs {drain}")
        log(f"{router['pod']}: drained and exited {took:.1f}s after SIGTERM, status {pod.returncode}")

    def wait_health(self, entry: dict, port: int, want: str, timeout: float) -> None:
        deadline = time.time() + timeout
        while True:
            self.alive(entry)
            got = grpc_health(port)
            if got == want:
                log(f"{entry['name']}: grpc.health.v1 {got}")
                return
            if time.time() > deadline:
                raise Failed(f"{entry['name']}: grpc.health.v1 answered {got}, expected {want} within {timeout}s")
            time.sleep(0.5)

    def drain_shard(self, entry: dict, proc: chart_lib.Process, statefulset: dict) -> None:
        """SIGTERM to a shard: its gRPC health (the pod's probes) reports NOT_SERVING at once while
        the port still answers, and the process is gone before terminationGracePeriodSeconds."""
        drain = int(proc.config.get("server", {}).get("drain_secs", 0))
        grace = statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        port = int(proc.config["grpc"].rsplit(":", 1)[1])
        popen = entry["popen"]
        os.killpg(popen.pid, signal.SIGTERM)
        sent = time.time()
        log(f"{entry['name']}: SIGTERM (drain_secs {drain}, grace {grace}s)")
        if drain > 0:
            deadline = sent + min(1.0, drain / 2)
            while True:
                got = grpc_health(port, timeout=1)
                if got == "NOT_SERVING" or time.time() > deadline:
                    break
                time.sleep(0.05)
            if got != "NOT_SERVING":
                raise Failed(f"{entry['name']}: draining but grpc.health.v1 answered {got}, expected NOT_SERVING")
        try:
            popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            raise Failed(f"{entry['name']}: still running {grace}s after SIGTERM (terminationGracePeriodSeconds)")
        took = time.time() - sent
        if took < drain - 0.5:
            raise Failed(f"{entry['name']}: exited {took:.1f}s after SIGTERM, before drain_secs {drain}")
        log(f"{entry['name']}: NOT_SERVING while draining, exited {took:.1f}s after SIGTERM, status {popen.returncode}")

    def remaining(self) -> float:
        return self.deadline - time.time()


def main() -> int:
    target = os.environ.get("CARGO_TARGET_DIR") or str(chart_lib.ROOT / "target")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", default=str(chart_lib.CHART / "ci" / "runs-values.yaml"))
    parser.add_argument("--binary", default=os.environ.get("AGENTSEARCH_BIN") or f"{target}/release/agentsearch")
    parser.add_argument("--model-dir", default=os.environ.get("MODEL_DIR") or str(chart_lib.ROOT / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--integrations", type=int, default=0,
                        help="load only the tools of this many integrations (0: the whole demo catalog)")
    parser.add_argument("--ready-timeout", type=float, default=90)
    parser.add_argument("--timeout", type=float, default=170, help="bound on the whole run, in seconds")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, configurations)")
    args = parser.parse_args()

    run = Run(args)
    run.deadline = time.time() + args.timeout

    def on_alarm(signum, frame):
        raise TimedOut(f"the run took longer than {args.timeout:.0f}s")

    def on_signal(signum, frame):
        raise Failed(f"interrupted by signal {signum}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.alarm(int(args.timeout))
    started = time.time()
    try:
        run.main()
        signal.alarm(0)
        log(f"PASSED in {time.time() - started:.0f}s")
        return 0
    except (Failed, TimedOut) as e:
        signal.alarm(0)
        log(f"FAILED: {e}")
        for entry in run.procs:
            print(f"--- {entry['name']} (last lines of {entry['log'].name})")
            print(run.tail(entry, 15))
        return 1
    finally:
        signal.alarm(0)
        run.cleanup()


if __name__ == "__main__":
    sys.exit(main())
