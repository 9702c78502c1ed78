//! `agentsearch config check` as an operator runs it: the real binary, a file and variables.

use std::process::Command;

fn check(role: &str, file: &std::path::Path, env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentsearch"));
    command
        .args(["config", "check", "--role", role, "--config"])
        .arg(file)
        .env("OMP_NUM_THREADS", "1");
    // Only the variables of this test reach the configuration.
    for (key, _) in std::env::vars() {
        if key.starts_with("AGENTSEARCH_") {
            command.env_remove(key);
        }
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_router_configuration_is_checked_and_printed_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentsearch.toml");
    std::fs::write(
        &file,
        r#"
grpc = "0.0.0.0:50051"

[http]
listen = "0.0.0.0:8080"

[shards]
remote = ["as-shard-0.as-shard-headless.search.svc.cluster.local:50052", "as-shard-1.as-shard-headless.search.svc.cluster.local:50052"]
replication = 2

[server]
drain_secs = 10
"#,
    )
    .unwrap();
    // No token and no PostgreSQL: both named.
    let (ok, _, stderr) = check("router", &file, &[]);
    assert!(!ok);
    assert!(stderr.contains("postgres.url"), "{stderr}");
    assert!(stderr.contains("auth.token"), "{stderr}");

    let env = [
        (
            "AGENTSEARCH_AUTH__TOKEN",
            "a-service-token-of-the-cluster-0123",
        ),
        (
            "AGENTSEARCH_POSTGRES__URL",
            "postgres://agentsearch:pg-password-42@db.search.svc:5432/agentsearch",
        ),
    ];
    let (ok, stdout, stderr) = check("router", &file, &env);
    assert!(ok, "{stderr}");
    assert!(
        !stdout.contains("a-service-token-of-the-cluster"),
        "{stdout}"
    );
    assert!(!stdout.contains("pg-password-42"), "{stdout}");
    assert!(
        stdout.contains("db.search.svc:5432/agentsearch"),
        "{stdout}"
    );
    assert!(stdout.contains("drain_secs = 10"), "{stdout}");
    // The printed configuration is a valid configuration file itself.
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, &stdout).unwrap();
    let (ok, _, stderr) = check("router", &printed, &env);
    assert!(ok, "{stderr}");

    // The same file is not a shard's: a shard needs no PostgreSQL but a valid bind.
    let (ok, _, stderr) = check("shard", &file, &env[..1]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = check("shard", &file, &[]);
    assert!(!ok);
    assert!(stderr.contains("auth.token"), "{stderr}");

    // A wrong type names its key.
    std::fs::write(&file, "[server]\ndrain_secs = \"ten\"\n").unwrap();
    let (ok, _, stderr) = check("serve", &file, &[]);
    assert!(!ok);
    assert!(stderr.contains("server.drain_secs"), "{stderr}");
}

#[test]
fn tls_files_are_read_as_the_process_would() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentsearch.toml");
    let missing = dir.path().join("missing.crt");
    std::fs::write(
        &file,
        format!(
            "[tls]\ncert_file = \"{0}\"\nkey_file = \"{0}\"\n\n[shards]\nremote = [\"127.0.0.1:50052\"]\ntls_ca_file = \"{0}\"\n\n[hydration]\ntls_ca_file = \"{0}\"\n",
            missing.display()
        ),
    )
    .unwrap();
    let env = [(
        "AGENTSEARCH_POSTGRES__URL",
        "postgres://agentsearch@127.0.0.1:5432/x",
    )];
    let (ok, _, stderr) = check("router", &file, &env);
    assert!(!ok);
    assert!(stderr.contains("tls.cert_file: cannot read"), "{stderr}");
    assert!(
        stderr.contains("shards.tls_ca_file: cannot read"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hydration.tls_ca_file: cannot read"),
        "{stderr}"
    );
    // A shard does not call shards: only its own listener's files matter.
    let (ok, _, stderr) = check("shard", &file, &[]);
    assert!(!ok);
    assert!(!stderr.contains("shards.tls_ca_file"), "{stderr}");
    // A key path without its certificate is refused before any file is read.
    std::fs::write(&file, "[tls]\nkey_file = \"/x.key\"\n").unwrap();
    let (ok, _, stderr) = check("shard", &file, &[]);
    assert!(!ok);
    assert!(
        stderr.contains("tls.cert_file: required with tls.key_file"),
        "{stderr}"
    );
}
