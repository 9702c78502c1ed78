//! The `agentsearch` command line: `serve` (the embedded default), `shard`, `router`,
//! `catalog load`, `search`, `context search|read|syncs|load`, `eval`, `embed-bench`, `token`,
//! `mcp` (the meta-tools over MCP on stdio), `admin` (placements, drains, rebalances).
//! Assembly of the processes lives here ([`node`]); the client commands talk to a router over its
//! public gRPC API ([`client`], [`context_client`]).

pub mod admin;
pub mod client;
pub mod context_client;
pub mod demo;
pub mod embed_bench;
pub mod eval;
pub mod node;
pub mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use agentsearch_common::config::{Config, Role, Secret};
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
    /// Serve the meta-tools (search_tools, search_context, read_context, get_tool) over MCP on
    /// stdio, for desktop agents, calling a running server's REST API.
    Mcp(McpArgs),
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Operate a cluster through a router: placements and replica health, drain or replace a
    /// shard, rebalance.
    Admin(admin::AdminArgs),
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Load the configuration as `--role` does (file, then AGENTSEARCH_* variables), validate it,
    /// print it with secrets hidden; exit 1 naming the key of each problem.
    Check(ConfigCheckArgs),
}

#[derive(Args, Debug)]
pub struct ConfigCheckArgs {
    /// The process the configuration is for.
    #[arg(long, value_enum, default_value = "serve")]
    pub role: RoleArg,
    /// Print nothing when the configuration is valid.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum RoleArg {
    Serve,
    Router,
    Shard,
}

impl From<RoleArg> for Role {
    fn from(role: RoleArg) -> Self {
        match role {
            RoleArg::Serve => Role::Serve,
            RoleArg::Router => Role::Router,
            RoleArg::Shard => Role::Shard,
        }
    }
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

#[derive(Args, Debug)]
pub struct McpArgs {
    /// The server's REST address.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "AGENTSEARCH_HTTP"
    )]
    pub http: String,
    /// Bearer token: a user's JWT (the user is the identity content is read as) or the service
    /// token.
    #[arg(long, env = "AGENTSEARCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Project id (UUID).
    #[arg(long, default_value = agentsearch_common::ids::DEMO_PROJECT_ID)]
    pub project: String,
    /// With the service token: the principal whose content search_context and read_context
    /// read (a user token decides it itself).
    #[arg(long, env = "AGENTSEARCH_IDENTITY")]
    pub identity: Option<String>,
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
            check_role(&config, Role::Serve)?;
            let telemetry = start_telemetry(&config, "serve")?;
            let result = node::serve_embedded(config, !args.no_demo, shutdown_signal()).await;
            stop_telemetry(telemetry).await;
            result
        }
        Command::Shard(args) => {
            let mut config = load_config(cli.config.as_deref())?;
            config.grpc = args.grpc.unwrap_or(config.grpc);
            config.data_dir = args.data_dir.unwrap_or(config.data_dir);
            config.validate()?;
            check_role(&config, Role::Shard)?;
            let telemetry = start_telemetry(&config, "shard")?;
            let result = node::serve_shard(config, shutdown_signal()).await;
            stop_telemetry(telemetry).await;
            result
        }
        Command::Router(args) => {
            let mut config = load_config(cli.config.as_deref())?;
            config.http.listen = args.http.unwrap_or(config.http.listen);
            config.grpc = args.grpc.unwrap_or(config.grpc);
            // Shards given on the command line are fixed; from the file, they are read again.
            let shards_file = if args.shards.is_empty() {
                cli.config.clone()
            } else {
                config.shards.remote = args.shards;
                None
            };
            if let Some(url) = args.postgres {
                config.postgres.url = Some(Secret::new(url));
            }
            config.validate()?;
            check_role(&config, Role::Router)?;
            let telemetry = start_telemetry(&config, "router")?;
            let result = node::serve_router(config, shards_file, shutdown_signal()).await;
            stop_telemetry(telemetry).await;
            result
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
        Command::Config(ConfigCommand::Check(args)) => config_check(cli.config.as_deref(), &args),
        Command::Admin(args) => admin::run(args).await,
        Command::Mcp(args) => {
            use agentsearch_router::agent::mcp;
            // stdout carries the protocol: nothing else may be printed there.
            let backend =
                mcp::Remote::new(&args.http, args.token.is_some()).map_err(anyhow::Error::msg)?;
            let connection = mcp::Connection {
                project_id: Some(args.project),
                authorization: args.token.map(|token| format!("Bearer {token}")),
                identity: args.identity,
                ..Default::default()
            };
            mcp::serve_stdio(mcp::McpServer::fixed(
                std::sync::Arc::new(backend),
                connection,
            ))
            .await
            .map_err(anyhow::Error::msg)
        }
    }
}

/// `config check`: every problem on stderr (one per line, key first), the effective configuration
/// on stdout when there is none.
fn config_check(file: Option<&std::path::Path>, args: &ConfigCheckArgs) -> anyhow::Result<()> {
    let config = match Config::load(file) {
        Ok(config) => config,
        Err(err) => {
            for problem in &err.0 {
                eprintln!("{problem}");
            }
            anyhow::bail!("the configuration has {} problem(s)", err.0.len());
        }
    };
    let role: Role = args.role.into();
    let mut problems = config.role_problems(role);
    problems.extend(tls_problems(&config, role));
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{problem}");
        }
        anyhow::bail!("the configuration has {} problem(s)", problems.len());
    }
    if !args.quiet {
        print!("{}", config.redacted_toml());
    }
    Ok(())
}

/// Logs, and traces when a collector is configured.
fn start_telemetry(
    config: &Config,
    role: &str,
) -> anyhow::Result<agentsearch_common::telemetry::Telemetry> {
    let telemetry = agentsearch_common::telemetry::init(&config.log, &config.telemetry, role)
        .map_err(anyhow::Error::msg)?;
    if telemetry.exporting() {
        tracing::info!(role, "exporting traces over OTLP");
    }
    Ok(telemetry)
}

/// Sends the spans still buffered before the process exits.
async fn stop_telemetry(telemetry: agentsearch_common::telemetry::Telemetry) {
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
}

/// The TLS files the role reads at start, read and checked as it does (paths, PEM, key pairs).
fn tls_problems(config: &Config, role: Role) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(err) = agentsearch_proto::tls::ServerTls::load(&config.tls) {
        problems.push(err.to_string());
    }
    if role == Role::Router
        && let Err(err) = agentsearch_proto::tls::shard_client_tls(&config.shards)
    {
        problems.push(err.to_string());
    }
    if role != Role::Shard {
        let h = &config.hydration;
        for (key, path) in [
            ("hydration.redis_ca_file", &h.redis_ca_file),
            ("hydration.tls_ca_file", &h.tls_ca_file),
        ] {
            if let Some(path) = path
                && let Err(err) = std::fs::read(path)
            {
                problems.push(format!("{key}: cannot read {}: {err}", path.display()));
            }
        }
    }
    problems
        .into_iter()
        .map(|p| {
            p.strip_prefix("invalid configuration: ")
                .map_or(p.clone(), str::to_string)
        })
        .collect()
}

/// Refuses to start a process whose configuration lacks what its role needs.
fn check_role(config: &Config, role: Role) -> anyhow::Result<()> {
    let problems = config.role_problems(role);
    anyhow::ensure!(
        problems.is_empty(),
        "invalid configuration: {}",
        problems.join("; ")
    );
    Ok(())
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
