//! Logging setup shared by every binary.

use tracing_subscriber::EnvFilter;

/// Installs a `tracing` subscriber: `RUST_LOG` filter (default `info`), text or JSON lines on stderr.
pub fn init(json: bool) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tantivy=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
