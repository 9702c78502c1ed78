//! The demo data (written for this project): the tool catalog (`demo/catalog.jsonl`) and the
//! content set of context search (`demo/documents.jsonl`, `demo/groups.jsonl`), compiled into the
//! binary and loaded into the demo project when `serve` starts.

use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_router::Router;
use agentsearch_router::context::api::{
    CreateSync, RawGroup, RawPutGroups, RawRecord, RawUpsertRecords,
};
use anyhow::Context;

/// The demo catalog, one tool per line.
pub const CATALOG: &str = include_str!("../../demo/catalog.jsonl");

/// Parses JSONL tool definitions; errors name the line and field.
pub fn parse_catalog(text: &str) -> anyhow::Result<Vec<ToolDefinition>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let mut de = serde_json::Deserializer::from_str(line);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = e.path().to_string();
                anyhow::anyhow!(
                    "line {}: {}: {}",
                    i + 1,
                    if path == "." { "tool".into() } else { path },
                    e.into_inner()
                )
            })
        })
        .collect()
}

/// Loads the demo catalog into the demo project. Idempotent and cheap once loaded (unchanged tools
/// are skipped without embedding), so a first start that was interrupted completes on the next.
pub async fn load(router: &Router) -> anyhow::Result<()> {
    let tools = parse_catalog(CATALOG).context("demo catalog")?;
    let total = tools.len();
    let started = std::time::Instant::now();
    let (mut done, mut written) = (0, 0);
    for batch in tools.chunks(64) {
        let outcome = router
            .upsert_tools(DEMO_PROJECT_ID, batch.to_vec(), "demo-load")
            .await?;
        done += batch.len();
        written += outcome.upserted as usize;
        if outcome.upserted > 0 {
            tracing::info!(
                done,
                total,
                "loading the demo catalog (each tool is embedded once)"
            );
        }
    }
    if written > 0 {
        tracing::info!(
            tools = total,
            written,
            secs = started.elapsed().as_secs_f64(),
            "demo catalog loaded"
        );
    } else {
        tracing::info!(tools = total, "demo catalog up to date");
    }
    Ok(())
}

/// The demo user's connected accounts: alice@example.com has two Gmail accounts (so an agent must
/// pick one), Slack, Google Drive and Salesforce active, and an expired Zoom connection.
pub async fn load_connections(router: &Router) -> anyhow::Result<()> {
    let account = |integration: &str, id: &str, alias: &str, status: &str, default: bool| {
        agentsearch_router::tools::connections::RawConnection {
            integration: Some(integration.into()),
            account_id: Some(id.into()),
            alias: Some(alias.into()),
            status: Some(status.into()),
            account_type: Some("private".into()),
            is_default: Some(default),
            user_info: Some(serde_json::json!({"email": "alice@example.com", "name": "Alice"})),
        }
    };
    let inputs = agentsearch_router::tools::connections::validate_connections(vec![
        account("gmail", "gmail-work", "work", "active", true),
        account("gmail", "gmail-personal", "personal", "active", false),
        account("slack", "slack-acme", "acme", "active", true),
        account("google_drive", "drive-acme", "acme", "active", true),
        account("salesforce", "sf-acme", "acme", "active", true),
        account("zoom", "zoom-acme", "acme", "expired", true),
    ])?;
    router
        .upsert_connections(DEMO_PROJECT_ID, DEMO_USER, inputs)
        .await?;
    Ok(())
}

/// The user of the demo's connections and hydrated schemas.
pub const DEMO_USER: &str = "alice@example.com";

/// The demo content set (`demo/documents.jsonl`): documents of a fictional company in two sources,
/// with varied ACLs.
/// Per-user schemas of demo Salesforce tools (the file provider's format).
pub const HYDRATION: &str = include_str!("../../demo/hydration.json");

pub const DOCUMENTS: &str = include_str!("../../demo/documents.jsonl");
/// Group memberships of the demo content (`demo/groups.jsonl`).
pub const GROUPS: &str = include_str!("../../demo/groups.jsonl");

/// The demo syncs: fixed ids so a restart finds them again.
pub const DEMO_SYNCS: [(&str, &str); 2] = [
    ("googledrive", "5ea5c0de-0000-4000-8000-00000000d001"),
    ("confluence", "5ea5c0de-0000-4000-8000-00000000d002"),
];

/// Who connected the demo sources.
const DEMO_OWNER: &str = "dave@example.com";

/// Parses the demo documents into `(source, record)` pairs; errors name the line and field.
pub fn parse_documents(text: &str) -> anyhow::Result<Vec<(String, RawRecord)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut value: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        let source = value
            .as_object_mut()
            .and_then(|o| o.remove("source"))
            .and_then(|s| s.as_str().map(str::to_string))
            .with_context(|| format!("line {}: source is required", i + 1))?;
        let record: RawRecord = serde_json::from_value(value)
            .with_context(|| format!("line {}: not a record", i + 1))?;
        out.push((source, record));
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoGroup {
    source: String,
    group: String,
    members: Vec<String>,
}

/// Creates the demo syncs and loads the demo documents and groups into the demo project.
/// Idempotent: unchanged documents are skipped without embedding.
pub async fn load_documents(router: &Router) -> anyhow::Result<()> {
    let documents = parse_documents(DOCUMENTS).context("demo documents")?;
    let started = std::time::Instant::now();
    let mut written = 0;
    for (source, sync_id) in DEMO_SYNCS {
        router
            .create_sync(CreateSync {
                project_id: DEMO_PROJECT_ID.to_string(),
                id: sync_id.to_string(),
                source: source.to_string(),
                owner: DEMO_OWNER.to_string(),
                fields: Vec::new(),
            })
            .await?;
        let mut groups = Vec::new();
        for (i, line) in GROUPS.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let group: DemoGroup = serde_json::from_str(line)
                .with_context(|| format!("demo groups, line {}", i + 1))?;
            if group.source == source {
                groups.push(RawGroup {
                    id: group.group,
                    members: group.members,
                });
            }
        }
        router
            .put_groups(DEMO_PROJECT_ID, sync_id, RawPutGroups { groups })
            .await?;
        let records: Vec<RawRecord> = documents
            .iter()
            .filter(|(s, _)| s == source)
            .map(|(_, r)| r.clone())
            .collect();
        for batch in records.chunks(16) {
            let outcome = router
                .upsert_records(
                    DEMO_PROJECT_ID,
                    sync_id,
                    RawUpsertRecords {
                        records: batch.to_vec(),
                        embedding: None,
                    },
                    "demo-load",
                )
                .await?;
            written += outcome.upserted as usize;
            if outcome.upserted > 0 {
                tracing::info!(
                    source,
                    upserted = outcome.upserted,
                    "loading the demo documents"
                );
            }
        }
    }
    if written > 0 {
        tracing::info!(
            documents = documents.len(),
            written,
            secs = started.elapsed().as_secs_f64(),
            "demo documents loaded"
        );
    } else {
        tracing::info!(documents = documents.len(), "demo documents up to date");
    }
    Ok(())
}
