#!/usr/bin/env python3
"""Checks the Dockerfile offline (no container runtime needed): that the image is built the way a
developer machine builds (scripts/bootstrap.sh, scripts/fetch-model.sh), that the runtime stage
installs a Debian package for every shared library the release binary links (ldd; the `dist` build
the image ships links the same), that the image builds the `dist` profile, and that the runtime
runs as a non-root user with OMP_NUM_THREADS=1 and `agentsearch` as its entry point.

Usage: scripts/check-dockerfile.py [DOCKERFILE]   (the repository's Dockerfile by default)
The binary is $AGENTSEARCH_BIN, else $CARGO_TARGET_DIR/release/agentsearch (target/ by default);
without it the ldd part is skipped with a message (the rest still runs). Exit status 1 on a problem.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
BOOTSTRAP = ROOT / "scripts" / "bootstrap.sh"

# Packages every debian:*-slim image has (priority required): their libraries need no install.
BASE_PACKAGES = {"libc6", "libgcc-s1"}
# Where dpkg cannot tell (a library not installed on this machine): soname -> Debian 12 packages.
KNOWN = {
    "libopenblas.so.0": {"libopenblas0-pthread", "libopenblas0-openmp", "libopenblas0-serial", "libopenblas0"},
    "liblapack.so.3": {"liblapack3", "libopenblas0-pthread", "libopenblas0-openmp", "libopenblas0-serial"},
    "libblas.so.3": {"libblas3", "libopenblas0-pthread", "libopenblas0-openmp", "libopenblas0-serial"},
    "libgomp.so.1": {"libgomp1"},
    "libgfortran.so.5": {"libgfortran5"},
    "libquadmath.so.0": {"libquadmath0"},
    "libstdc++.so.6": {"libstdc++6"},
    "libgcc_s.so.1": {"libgcc-s1"},
    "libm.so.6": {"libc6"},
    "libc.so.6": {"libc6"},
    "libpthread.so.0": {"libc6"},
    "libdl.so.2": {"libc6"},
    "librt.so.1": {"libc6"},
    "ld-linux-x86-64.so.2": {"libc6"},
    "linux-vdso.so.1": set(),
}

problems: list[str] = []


def problem(text: str) -> None:
    problems.append(text)
    print(f"FAIL {text}")


def ok(text: str) -> None:
    print(f"ok   {text}")


class Stage:
    def __init__(self, base: str, name: str | None):
        self.base = base
        self.name = name
        self.instructions: list[tuple[str, str]] = []

    def runs(self) -> list[str]:
        return [arg for op, arg in self.instructions if op == "RUN"]

    def __repr__(self) -> str:
        return f"stage {self.name or '(unnamed)'} FROM {self.base}"


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Instructions with continuations joined; ARG defaults substituted into FROM lines."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        logical.append((current + line).strip())
        current = ""
    if current:
        logical.append(current.strip())
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
            continue
        if op == "FROM":
            words = rest.split()
            words = [w for w in words if not w.startswith("--")]
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
            continue
        if not stages:
            problem(f"instruction before FROM: {line}")
            continue
        stages[-1].instructions.append((op, rest))
    return args, stages


def bootstrap_packages() -> list[str]:
    m = re.search(r"^packages=\(([^)]*)\)", BOOTSTRAP.read_text(), re.M)
    if not m:
        raise SystemExit(f"cannot find packages=(...) in {BOOTSTRAP}")
    return m.group(1).split()


def runs_script(stage: Stage, script: str) -> bool:
    pattern = re.compile(rf"(^|[\s;&|(])(\./|/src/|bash\s+|sh\s+)?{re.escape(script)}(\s|$|;|&)")
    return any(pattern.search(run) for run in stage.runs())


def apt_installs(stage: Stage) -> list[str]:
    packages: list[str] = []
    for run in stage.runs():
        for command in re.split(r"&&|;|\|\|", run):
            words = shlex.split(command)
            words = [w for w in words if "=" not in w or w.startswith("-")]  # drop VAR=value prefixes
            if len(words) >= 2 and words[0] in ("apt-get", "apt") and "install" in words:
                after = words[words.index("install") + 1:]
                packages += [w for w in after if not w.startswith("-")]
    return packages


def check_build(stages: list[Stage]) -> Stage | None:
    build = next((s for s in stages if any("cargo build" in r for r in s.runs())), None)
    if build is None:
        problem("no stage runs `cargo build`")
        return None
    ok(f"build stage: {build}")
    cargo = next(r for r in build.runs() if "cargo build" in r)
    # The image ships the `dist` profile (Cargo.toml): what the benchmarks measure.
    for flag in ("--profile dist", "--locked", "-p agentsearch"):
        if flag not in cargo:
            problem(f"`cargo build` in {build} lacks {flag}")
    if "target/dist/agentsearch" not in cargo:
        problem(f"`cargo build` in {build} does not install target/dist/agentsearch")
    if runs_script(build, "scripts/bootstrap.sh"):
        index_boot = next(i for i, (op, a) in enumerate(build.instructions) if op == "RUN" and "bootstrap.sh" in a)
        index_cargo = next(i for i, (op, a) in enumerate(build.instructions) if op == "RUN" and "cargo build" in a)
        if index_boot > index_cargo:
            problem("scripts/bootstrap.sh runs after `cargo build`")
        else:
            ok("build stage runs scripts/bootstrap.sh (the developer machine's system packages) before cargo build")
    else:
        wanted = sorted(bootstrap_packages())
        got = sorted(apt_installs(build))
        if got != wanted:
            problem(f"build stage neither runs scripts/bootstrap.sh nor installs exactly its packages {wanted} (installs {got})")
        else:
            ok(f"build stage installs exactly scripts/bootstrap.sh's packages {wanted}")
    m = re.match(r"rust:(\d+\.\d+)", build.base)
    if not m:
        problem(f"build stage is not on the Rust image: {build.base}")
    return build


def check_model(stages: list[Stage], final: Stage) -> None:
    model = next((s for s in stages if runs_script(s, "scripts/fetch-model.sh")), None)
    if model is None:
        problem("no stage runs scripts/fetch-model.sh (the model's weights must be in the image)")
        return
    ok(f"model stage runs scripts/fetch-model.sh: {model}")
    copies = [a for op, a in final.instructions if op == "COPY" and f"--from={model.name}" in a]
    if not copies:
        problem(f"the runtime stage copies nothing from the model stage `{model.name}`")
    else:
        ok(f"runtime stage copies the model: COPY {copies[0]}")


def check_runtime(final: Stage, build: Stage | None) -> list[str]:
    print(f"runtime stage: {final}")
    if not re.fullmatch(r"debian:[a-z]+-slim", final.base):
        problem(f"runtime stage is not on debian:<release>-slim: {final.base}")
    if build is not None:
        release = final.base.split(":")[1].removesuffix("-slim")
        if not build.base.endswith(f"-{release}"):
            problem(f"build ({build.base}) and runtime ({final.base}) are different Debian releases: library versions would differ")
        else:
            ok(f"build and runtime on the same Debian release ({release})")
    packages = apt_installs(final)
    for p in packages:
        if p.endswith("-dev") or p in ("cmake", "g++", "gcc", "build-essential"):
            problem(f"runtime stage installs a build package: {p}")
    if any("install" in r and "--no-install-recommends" not in r for r in final.runs() if "apt-get" in r):
        problem("runtime apt-get install without --no-install-recommends")
    users = [a.strip() for op, a in final.instructions if op == "USER"]
    if not users:
        problem("runtime stage sets no USER (runs as root)")
    else:
        uid = users[-1].split(":")[0]
        if uid != "10001":
            problem(f"runtime USER is {users[-1]}, expected the numeric uid 10001 (runAsNonRoot needs a number)")
        else:
            ok(f"runs as USER {users[-1]}")
    envs = " ".join(a for op, a in final.instructions if op == "ENV")
    if not re.search(r"(^|\s)OMP_NUM_THREADS[= ]1(\s|$)", envs):
        problem("runtime stage does not set OMP_NUM_THREADS=1")
    else:
        ok("ENV OMP_NUM_THREADS=1")
    if any(re.match(r"AGENTSEARCH_\w+__", w) for w in envs.split()):
        problem("runtime stage sets AGENTSEARCH_* configuration variables: they would override every mounted configuration file")
    entry = [a for op, a in final.instructions if op == "ENTRYPOINT"]
    try:
        if not entry or json.loads(entry[-1]) != ["agentsearch"]:
            problem(f"ENTRYPOINT is {entry[-1] if entry else 'missing'}, expected [\"agentsearch\"]")
        else:
            ok('ENTRYPOINT ["agentsearch"]')
    except json.JSONDecodeError:
        problem(f"ENTRYPOINT is not in exec form: {entry[-1]}")
    lock = ROOT / "Cargo.lock"
    if lock.exists() and 'name = "rustls-native-certs"' in lock.read_text():
        if "ca-certificates" not in packages:
            problem("the binary trusts the system's certificate authorities (rustls-native-certs, PostgreSQL "
                    "verify-full without ca_file) but the runtime stage does not install ca-certificates")
        else:
            ok("ca-certificates installed (the system's roots for PostgreSQL verify-full)")
    binary_copy = [a for op, a in final.instructions if op == "COPY" and build and f"--from={build.name}" in a]
    if not any(a.split()[-1] in ("/usr/local/bin/agentsearch", "/usr/bin/agentsearch") for a in binary_copy):
        problem("the runtime stage does not copy the binary from the build stage to /usr/local/bin/agentsearch")
    return packages


def providers(soname: str, path: str | None) -> set[str]:
    found: set[str] = set()
    try:
        out = subprocess.run(["dpkg", "-S", soname], capture_output=True, text=True).stdout
        for line in out.splitlines():
            pkgs, _, file = line.partition(": ")
            if file.strip().endswith("/" + soname):
                found |= {p.strip().split(":")[0] for p in pkgs.split(",")}
    except FileNotFoundError:
        pass
    return found | KNOWN.get(soname, set())


def check_libraries(installed: list[str]) -> None:
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    binary = pathlib.Path(os.environ.get("AGENTSEARCH_BIN") or f"{target}/release/agentsearch")
    if not binary.exists():
        problem(
            f"no release binary at {binary} for the shared-library check: build it with "
            "`cargo build --release --workspace --bins`, or set CARGO_TARGET_DIR / AGENTSEARCH_BIN"
        )
        return
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    if out.returncode != 0:
        problem(f"ldd {binary} failed: {out.stderr.strip()}")
        return
    have = set(installed) | BASE_PACKAGES
    print(f"shared libraries of {binary}:")
    for line in out.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            problem(f"ldd: {line}")
            continue
        m = re.match(r"(\S+)(?:\s+=>\s+(\S+))?", line)
        if not m:
            continue
        soname = os.path.basename(m.group(1))
        if soname.startswith("linux-vdso"):
            continue
        candidates = providers(soname, m.group(2))
        if not candidates:
            problem(f"{soname}: no Debian package known to provide it; add it to KNOWN in {pathlib.Path(__file__).name}")
        elif not candidates & have:
            problem(f"{soname}: the runtime stage installs none of {sorted(candidates)}")
        else:
            ok(f"{soname:24} <- {', '.join(sorted(candidates & have))}")


def check_dockerignore() -> None:
    if not DOCKERIGNORE.exists():
        problem(".dockerignore is missing (the build context would carry target/ and models/)")
        return
    lines = {l.strip().rstrip("/") for l in DOCKERIGNORE.read_text().splitlines() if l.strip() and not l.startswith("#")}
    for needed in ("target", "models", ".git"):
        if needed not in lines and f"/{needed}" not in lines:
            problem(f".dockerignore does not exclude {needed}")
    for needed_in_build in ("Cargo.toml", "Cargo.lock", "demo", "proto", "scripts"):
        if needed_in_build in lines:
            problem(f".dockerignore excludes {needed_in_build}, which the build needs")


def main() -> int:
    dockerfile = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DOCKERFILE
    _, stages = parse(dockerfile.read_text())
    if not stages:
        problem("the Dockerfile has no stage")
        return 1
    final = stages[-1]
    build = check_build(stages)
    check_model(stages, final)
    installed = check_runtime(final, build)
    check_libraries(installed)
    check_dockerignore()
    if problems:
        print(f"\n{len(problems)} problem(s) in the Dockerfile")
        return 1
    print("\nDockerfile checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
