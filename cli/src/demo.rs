//! The demo catalog (written for this project, `demo/catalog.jsonl`), compiled into the binary and
//! loaded into the demo project on the first start of `serve`.

use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_router::Router;
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

/// Loads the demo catalog into the demo project unless the project already has tools.
pub async fn load_if_empty(router: &Router) -> anyhow::Result<()> {
    if router.store().catalog_size(DEMO_PROJECT_ID).await? > 0 {
        tracing::info!(project_id = DEMO_PROJECT_ID, "demo catalog already loaded");
        return Ok(());
    }
    let tools = parse_catalog(CATALOG).context("demo catalog")?;
    let total = tools.len();
    tracing::info!(
        tools = total,
        "loading the demo catalog (embedding every tool once; later starts reuse the index)"
    );
    let started = std::time::Instant::now();
    let mut done = 0;
    for batch in tools.chunks(64) {
        router
            .upsert_tools(DEMO_PROJECT_ID, batch.to_vec(), "demo-load")
            .await?;
        done += batch.len();
        tracing::info!(done, total, "demo catalog");
    }
    tracing::info!(
        tools = total,
        secs = started.elapsed().as_secs_f64(),
        "demo catalog loaded"
    );
    Ok(())
}
