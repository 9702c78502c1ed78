//! Client commands over the router's public gRPC API: `catalog load` and `search`.

use std::path::PathBuf;
use std::time::Duration;

use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_proto::error_from_status;
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::tool_catalog_client::ToolCatalogClient;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use anyhow::Context;
use clap::Args;
use tonic::transport::{Channel, Endpoint};

#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// Router gRPC address (`https://host:port` for a router serving TLS).
    #[arg(long, default_value = "127.0.0.1:50051", env = "AGENTSEARCH_SERVER")]
    pub server: String,
    /// PEM file of the authorities a TLS router's certificate must chain to (default: the
    /// system's roots); implies TLS.
    #[arg(long, env = "AGENTSEARCH_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Bearer token, when the server requires one.
    #[arg(long, env = "AGENTSEARCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Project id (UUID).
    #[arg(long, default_value = DEMO_PROJECT_ID)]
    pub project: String,
}

impl Connection {
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        let tls = self.ca_file.is_some() || self.server.starts_with("https://");
        let url = match (self.server.contains("://"), tls) {
            (true, _) => self.server.clone(),
            (false, true) => format!("https://{}", self.server),
            (false, false) => format!("http://{}", self.server),
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .with_context(|| format!("invalid server address `{}`", self.server))?;
        if tls {
            let config = match &self.ca_file {
                Some(path) => {
                    let pem = std::fs::read(path)
                        .with_context(|| format!("reading --ca-file {}", path.display()))?;
                    tonic::transport::ClientTlsConfig::new()
                        .ca_certificate(tonic::transport::Certificate::from_pem(pem))
                }
                None => tonic::transport::ClientTlsConfig::new().with_native_roots(),
            };
            endpoint = endpoint.tls_config(config).context("TLS to the router")?;
        }
        endpoint
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .connect()
            .await
            .with_context(|| {
                format!("cannot reach agentsearch at {url} (is `agentsearch serve` running?)")
            })
    }

    pub fn request<T>(&self, message: T) -> anyhow::Result<tonic::Request<T>> {
        let mut request = tonic::Request::new(message);
        if let Some(token) = &self.token {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().context("token")?,
            );
        }
        Ok(request)
    }
}

/// A failed call as a readable error: the envelope's code, message and field details.
pub fn call_error(status: tonic::Status) -> anyhow::Error {
    let err = error_from_status(&status);
    let envelope = err.to_envelope("");
    let mut text = format!("{}: {}", envelope.error.code, envelope.error.message);
    for d in &envelope.error.details {
        text.push_str(&format!("\n  {}: {}", d.field, d.issue));
    }
    anyhow::anyhow!(text)
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// JSONL file: one tool per line ({name, integration, category, sideEffect, description, parameters}).
    pub file: PathBuf,
    /// Tools per batch (each batch is acknowledged once indexed).
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    #[command(flatten)]
    pub connection: Connection,
}

/// `agentsearch catalog load`.
pub async fn load(args: LoadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=1000).contains(&args.batch_size),
        "--batch-size must be between 1 and 1000"
    );
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let tools =
        crate::demo::parse_catalog(&text).with_context(|| format!("{}", args.file.display()))?;
    let total = tools.len() as u64;
    let batches: Vec<pb::UpsertToolsRequest> = tools
        .chunks(args.batch_size)
        .map(|chunk| pb::UpsertToolsRequest {
            project_id: args.connection.project.clone(),
            tools: chunk
                .iter()
                .map(|t| pb::ToolDefinition {
                    name: t.name.clone(),
                    integration: t.integration.clone(),
                    category: t.category.clone().unwrap_or_default(),
                    side_effect: t
                        .side_effect
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    description: t.description.clone(),
                    parameters_json: t
                        .parameters
                        .as_ref()
                        .map(|p| p.to_string())
                        .unwrap_or_default(),
                })
                .collect(),
        })
        .collect();
    let mut client = ToolCatalogClient::new(args.connection.channel().await?)
        .max_decoding_message_size(32 << 20);
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} tools ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let (upserted, unchanged) = {
        let outbound = tokio_stream::iter(batches);
        let mut acks = client
            .upsert_tools(args.connection.request(outbound)?)
            .await
            .map_err(call_error)?
            .into_inner();
        let (mut upserted, mut unchanged) = (0u64, 0u64);
        while let Some(ack) = acks.message().await.map_err(call_error)? {
            upserted += u64::from(ack.upserted);
            unchanged += u64::from(ack.unchanged);
            bar.set_position(ack.total);
        }
        (upserted, unchanged)
    };
    bar.finish_and_clear();
    anyhow::ensure!(
        upserted + unchanged == total,
        "the server acknowledged {} of {total} tools",
        upserted + unchanged
    );
    println!("{total} tools acknowledged: {upserted} written, {unchanged} unchanged");
    Ok(())
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What the agent wants to do; a JSON object is a query JSON document (see the schema at
    /// `/api/tools/projects/{projectId}/tools/schema`).
    pub query: String,
    #[arg(long)]
    pub top_k: Option<u32>,
    /// Token budget for the returned tool definitions.
    #[arg(long)]
    pub max_tool_tokens: Option<u32>,
    /// read, write, delete or send.
    #[arg(long)]
    pub max_side_effect: Option<String>,
    /// Only these integrations (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub integrations: Vec<String>,
    /// Only these categories (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub categories: Vec<String>,
    /// hybrid (default), lexical or dense.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only integrations the token's user has an active connection for.
    #[arg(long)]
    pub connected_only: bool,
    /// Include the trace of named steps.
    #[arg(long)]
    pub diagnostics: bool,
    /// Print the response as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// `agentsearch search`.
pub async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let mut client =
        ToolSearchClient::new(args.connection.channel().await?).max_decoding_message_size(32 << 20);
    // A query that is a JSON object is a query JSON document.
    let document = args
        .query
        .trim_start()
        .starts_with('{')
        .then(|| args.query.clone());
    let request = pb::SearchToolsRequest {
        project_id: args.connection.project.clone(),
        query: if document.is_some() {
            String::new()
        } else {
            args.query.clone()
        },
        query_json: document,
        top_k: args.top_k,
        max_tool_tokens: args.max_tool_tokens,
        integrations: args.integrations.clone(),
        categories: args.categories.clone(),
        max_side_effect: args.max_side_effect.clone(),
        connected_only: args.connected_only,
        rerank: None,
        diagnostics: args.diagnostics,
        mode: args.mode.clone(),
        query_embedding: None,
    };
    let response = client
        .search_tools(args.connection.request(request)?)
        .await
        .map_err(call_error)?
        .into_inner();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&response))?);
    } else {
        print!("{}", table(&response));
    }
    Ok(())
}

/// The response as the REST API would render it.
pub fn to_json(r: &pb::SearchToolsResponse) -> serde_json::Value {
    let usage = r.usage.clone().unwrap_or_default();
    let visibility = usage.visibility.clone().unwrap_or_default();
    serde_json::json!({
        "tools": r.tools.iter().map(|t| {
            let f = t.tool.as_ref().and_then(|m| m.function.clone()).unwrap_or_default();
            serde_json::json!({
                "intentName": t.intent_name,
                "integration": t.integration,
                "category": t.category,
                "sideEffect": t.side_effect,
                "approvalRequired": t.approval_required,
                "schemaSource": t.schema_source,
                "relevancy": t.relevancy,
                "tool": {"type": "function", "function": {
                    "name": f.name,
                    "description": f.description,
                    "parameters": serde_json::from_str::<serde_json::Value>(&f.parameters_json).unwrap_or_default(),
                }},
                "tokens": t.tokens,
                "catalogVersion": t.catalog_version,
            })
        }).collect::<Vec<_>>(),
        "searchQuery": r.search_query,
        "errors": r.errors.iter().map(|e| serde_json::json!({"integration": e.integration, "code": e.code, "message": e.message})).collect::<Vec<_>>(),
        "usage": {
            "strategy": usage.strategy,
            "candidates": usage.candidates,
            "returned": usage.returned,
            "toolTokens": usage.tool_tokens,
            "omittedForBudget": usage.omitted_for_budget,
            "omittedForSideEffect": usage.omitted_for_side_effect,
            "omittedForTopK": usage.omitted_for_top_k,
            "hydratedIntegrations": usage.hydrated_integrations,
            "degraded": usage.degraded,
            "omittedNotConnected": usage.omitted_not_connected,
            "nearMisses": usage.near_misses.iter().map(|m| serde_json::json!({
                "intentName": m.intent_name, "integration": m.integration,
                "reason": m.reason, "rank": m.rank, "tokens": m.tokens,
            })).collect::<Vec<_>>(),
            "partial": usage.partial,
            "failedIntegrations": usage.failed_integrations,
            "visibility": {
                "mode": visibility.mode,
                "entitledIntegrations": visibility.entitled_integrations,
                "candidatesBeforeFilter": visibility.candidates_before_filter,
                "candidatesAfterFilter": visibility.candidates_after_filter,
            },
        },
        "trace": r.trace.as_ref().map(|t| serde_json::json!({
            "totalMs": t.total_ms,
            "steps": t.steps.iter().map(|s| serde_json::json!({"label": s.label, "durationMs": s.duration_ms})).collect::<Vec<_>>(),
        })),
    })
}

/// A readable table of the results and a usage line.
pub fn table(r: &pb::SearchToolsResponse) -> String {
    let mut out = String::new();
    let name_width = r
        .tools
        .iter()
        .map(|t| t.intent_name.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    let integration_width = r
        .tools
        .iter()
        .map(|t| t.integration.len())
        .max()
        .unwrap_or(11)
        .clamp(11, 24);
    out.push_str(&format!(
        "{:>3}  {:<name_width$}  {:<integration_width$}  {:<7}  {:>9}  {:>6}  description\n",
        "#", "tool", "integration", "effect", "relevancy", "tokens"
    ));
    for (i, t) in r.tools.iter().enumerate() {
        let description = t
            .tool
            .as_ref()
            .and_then(|m| m.function.as_ref())
            .map_or("", |f| f.description.as_str());
        let short: String = description.chars().take(60).collect();
        let ellipsis = if description.chars().count() > 60 {
            "…"
        } else {
            ""
        };
        let hydrated = if t.schema_source == "hydrated" {
            "*"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:>3}  {:<name_width$}  {:<integration_width$}  {:<7}  {:>9.3}  {:>6}  {short}{ellipsis}\n",
            i + 1, t.intent_name, t.integration, t.side_effect, t.relevancy, format!("{hydrated}{}", t.tokens)
        ));
    }
    if r.tools.is_empty() {
        out.push_str("  (no tools)\n");
    }
    if let Some(u) = &r.usage {
        out.push_str(&format!(
            "\n{} returned of {} candidates · {} tokens · omitted: {} budget, {} side effect, {} topK · strategy {}{}\n",
            u.returned,
            u.candidates,
            u.tool_tokens,
            u.omitted_for_budget,
            u.omitted_for_side_effect,
            u.omitted_for_top_k,
            u.strategy,
            u.degraded.as_ref().map(|d| format!(" (degraded: {d})")).unwrap_or_default()
        ));
    }
    if let Some(u) = &r.usage {
        for m in &u.near_misses {
            out.push_str(&format!(
                "near miss: #{} {} ({}): removed by {}\n",
                m.rank, m.intent_name, m.integration, m.reason
            ));
        }
        if r.tools.iter().any(|t| t.schema_source == "hydrated") {
            out.push_str("* schema hydrated for this user\n");
        }
    }
    for e in &r.errors {
        out.push_str(&format!(
            "warning: {}: {} ({})\n",
            e.integration, e.message, e.code
        ));
    }
    if let Some(t) = &r.trace {
        out.push_str(&format!("trace: {:.2} ms total\n", t.total_ms));
        for s in &t.steps {
            out.push_str(&format!("  {:<24} {:>8.3} ms\n", s.label, s.duration_ms));
        }
    }
    out
}
