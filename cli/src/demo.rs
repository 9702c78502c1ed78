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
