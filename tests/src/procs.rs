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
