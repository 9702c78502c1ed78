//! The `agentsearch` command line: `serve` (the embedded default), `shard`, `router`,
//! `catalog load`, `search`, `context search|read|syncs|load`, `eval`, `embed-bench`, `token`.
//! Assembly of the processes lives here ([`node`]); the client commands talk to a router over its
//! public gRPC API ([`client`], [`context_client`]).

pub mod client;
pub mod context_client;
pub mod demo;
pub mod embed_bench;
pub mod eval;
pub mod node;
pub mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use agentsearch_common::config::{Config, Secret};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "agentsearch",
    version,
    about = "Retrieval for AI agents: tool search and context search over gRPC and HTTP/JSON"
)]
pub struct Cli {
    /// TOML configuration file (overridden by AGENTSEARCH_* environment variables, then flags).
    #[arg(long, global = true, env = "AGENTSEARCH_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Router, in-process shards, embedded metadata store and the demo catalog, in one process.
    Serve(ServeArgs),
    /// One shard process serving the internal shard API.
    Shard(ShardArgs),
    /// A router over remote shards, with metadata in PostgreSQL.
    Router(RouterArgs),
    /// Catalog maintenance.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Search tools and print a table (or the JSON response).
    Search(client::SearchArgs),
    /// Context search over synced content: search, read around a passage, syncs, load.
    #[command(subcommand)]
    Context(context_client::ContextCommand),
    /// Score retrieval on a BEIR-format dataset through the real search path.
    Eval(eval::EvalArgs),
    /// Time segmenting and embedding a BEIR corpus the way record ingest does.
    EmbedBench(embed_bench::EmbedBenchArgs),
    /// Issue a JWT for a user of a project (HS256 with the project's secret, or RS256 / ES256).
    Token(token::TokenArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// REST listen address.
    #[arg(long)]
    pub http: Option<std::net::SocketAddr>,
    /// gRPC listen address.
    #[arg(long)]
    pub grpc: Option<std::net::SocketAddr>,
    /// Where indexes and metadata persist.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Number of in-process shards.
    #[arg(long)]
    pub shards: Option<u32>,
    /// Do not load the demo catalog on first start.
    #[arg(long)]
    pub no_demo: bool,
}

#[derive(Args, Debug)]
pub struct ShardArgs {
    #[arg(long)]
    pub grpc: Option<std::net::SocketAddr>,
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RouterArgs {
    #[arg(long)]
    pub http: Option<std::net::SocketAddr>,
    #[arg(long)]
    pub grpc: Option<std::net::SocketAddr>,
    /// Shard gRPC addresses, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub shards: Vec<String>,
    /// PostgreSQL URL (or postgres.url in the config, or AGENTSEARCH_POSTGRES__URL).
    #[arg(long)]
    pub postgres: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Upsert tools from a JSONL file (one tool per line), idempotent per tool name.
    Load(client::LoadArgs),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    limit_openmp_threads();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let mut config = load_config(cli.config.as_deref())?;
            config.http.listen = args.http.unwrap_or(config.http.listen);
            config.grpc = args.grpc.unwrap_or(config.grpc);
            config.data_dir = args.data_dir.unwrap_or(config.data_dir);
            config.shards.local = args.shards.unwrap_or(config.shards.local);
            config.validate()?;
            agentsearch_common::telemetry::init(config.log.json);
            node::serve_embedded(config, !args.no_demo, shutdown_signal()).await
        }
        Command::Shard(args) => {
            let mut config = load_config(cli.config.as_deref())?;
            config.grpc = args.grpc.unwrap_or(config.grpc);
            config.data_dir = args.data_dir.unwrap_or(config.data_dir);
            config.validate()?;
            agentsearch_common::telemetry::init(config.log.json);
            node::serve_shard(config, shutdown_signal()).await
        }
        Command::Router(args) => {
            let mut config = load_config(cli.config.as_deref())?;
            config.http.listen = args.http.unwrap_or(config.http.listen);
            config.grpc = args.grpc.unwrap_or(config.grpc);
            if !args.shards.is_empty() {
                config.shards.remote = args.shards;
            }
            if let Some(url) = args.postgres {
                config.postgres.url = Some(Secret::new(url));
            }
            config.validate()?;
            agentsearch_common::telemetry::init(config.log.json);
            node::serve_router(config, shutdown_signal()).await
        }
        Command::Catalog(CatalogCommand::Load(args)) => client::load(args).await,
        Command::Search(args) => client::search(args).await,
        Command::Context(command) => context_client::run(command).await,
        Command::Eval(args) => {
            let config = load_config(cli.config.as_deref())?;
            config.validate()?;
            eval::run(args, config).await
        }
        Command::EmbedBench(args) => {
            let config = load_config(cli.config.as_deref())?;
            config.validate()?;
            embed_bench::run(args, config)
        }
        Command::Token(args) => {
            let config = load_config(cli.config.as_deref())?;
            token::run(args, &config)
        }
    }
}

fn load_config(file: Option<&std::path::Path>) -> anyhow::Result<Config> {
    Ok(Config::load(file)?)
}

/// FAISS's OpenMP threads spin-wait between calls and slow everything else on a few cores, while
/// our FAISS calls are small. OpenMP reads `OMP_NUM_THREADS` when the process loads, before `main`,
/// so when it is unset the binary re-executes itself once with `OMP_NUM_THREADS=1`.
fn limit_openmp_threads() {
    if std::env::var_os("OMP_NUM_THREADS").is_some() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if let Ok(exe) = std::env::current_exe() {
            let err = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env("OMP_NUM_THREADS", "1")
                .exec();
            eprintln!("warning: could not re-execute with OMP_NUM_THREADS=1: {err}");
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
