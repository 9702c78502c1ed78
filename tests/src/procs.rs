//! The real binary as child processes: a router and shards started as they run in production, to
//! be killed with SIGKILL and restarted on their data dirs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `agentsearch` binary of the build the tests belong to.
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir.join("agentsearch");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo nextest run --workspace)",
        path.display()
    );
    path
}

/// A child process killed when the test ends, however it ends.
pub struct Process(Child);

impl Process {
    /// Kills the process with SIGKILL (no drain, no flush) and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Starts the binary with `args`, no `AGENTSEARCH_*` or `OTEL_*` variable of the test's own
/// environment, `env` added, stderr to `stderr`.
pub fn spawn(args: &[String], env: &[(&str, String)], stderr: std::fs::File) -> Process {
    let mut command = Command::new(binary());
    command
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (key, _) in std::env::vars() {
        if key.starts_with("AGENTSEARCH_") || key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    for (key, value) in env {
        command.env(key, value);
    }
    Process(command.spawn().unwrap())
}

/// A loopback address nothing listens on (yet).
pub async fn free_addr() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// Waits until a TCP listener answers at `addr` (30 s at most).
pub async fn wait_listening(addr: SocketAddr) {
    let started = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing listens at {addr}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A PostgreSQL server of the test's own (initdb in a temporary directory, on a free loopback
/// port), so a drill can stop and start it without touching the shared one. Run as the
/// `postgres` user when the test runs as root (PostgreSQL refuses root). Stopped when dropped.
pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    pub port: u16,
}

impl PrivatePostgres {
    /// Creates the cluster and starts the server.
    pub async fn start() -> PrivatePostgres {
        let bin = postgres_bindir();
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = output("id", &["-u"]).trim() == "0";
        if as_postgres {
            output(
                "chown",
                &["-R", "postgres", &dir.path().display().to_string()],
            );
        }
        let port = free_addr().await.port();
        let pg = PrivatePostgres {
            dir,
            bin,
            as_postgres,
            port,
        };
        pg.run(
            "initdb",
            &[
                "-D",
                &pg.data(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        );
        pg.start_server();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Runs a PostgreSQL program of the server's installation (as `postgres` when root).
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program).display().to_string();
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", &path]);
            c
        } else {
            Command::new(&path)
        };
        let out = command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server the way a crash does (`immediate`: no checkpoint, connections cut).
    pub fn stop_server(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl").display().to_string();
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--", &path])
                .args(args)
                .output()
        } else {
            Command::new(&path).args(args).output()
        };
    }
}

/// The directory of the installed server's programs (`initdb`, `pg_ctl`): the newest
/// `/usr/lib/postgresql/*/bin` (Debian, Ubuntu), else wherever `pg_ctl` is on the PATH.
fn postgres_bindir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return bin;
    }
    let which = output("sh", &["-c", "command -v pg_ctl"]);
    let path = PathBuf::from(which.trim());
    path.parent()
        .map(PathBuf::from)
        .filter(|p| p.join("initdb").exists())
        .expect("PostgreSQL's server programs (initdb, pg_ctl) are required: install postgresql")
}

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
