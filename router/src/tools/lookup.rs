//! Tools by name: the ledger says which integration holds a name, the shard holding that
//! integration returns the stored record. Serves `GET .../tools/{name}` and the exact-name
//! guarantee of search (a query naming a tool that the retrievers missed still ranks it first).

use agentsearch_store::STALE_INTEGRATION;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use agentsearch_common::shard::{GetToolsRequest, GetToolsResponse};
use agentsearch_common::tool::ToolRecord;
use agentsearch_common::{Error, Result};
use serde::Serialize;

use crate::Router;
use crate::request::RequestContext;
use crate::tools::api::{ToolResult, ToolkitConnectionStatus};
use crate::tools::connections;
use crate::tools::search::{Candidate, to_result};

/// Longest tool name looked up.
const MAX_NAME_CHARS: usize = 256;

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetToolResponse {
    pub tool: ToolResult,
    /// `static_schema` when hydration failed and the static schema stands in.
    pub degraded: Option<&'static str>,
    /// The caller's connection status for the tool's integration.
    pub connection: ToolkitConnectionStatus,
}

impl Router {
    /// The stored records of `names` that exist, with the generation of the index each came from.
    /// Names not in the catalog are left out.
    pub(crate) async fn fetch_tools(
        &self,
        project_id: &str,
        names: &[String],
        request_id: &str,
        deadline: Instant,
    ) -> Result<Vec<(ToolRecord, u64)>> {
        let entries = self.store.catalog_entries(project_id, names).await?;
        let mut by_integration: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for entry in entries.into_iter().filter(|e| !e.content_hash.is_empty()) {
            by_integration
                .entry(entry.integration)
                .or_default()
                .push(entry.name);
        }
        let read = self
            .read_tools(project_id, by_integration, None, request_id, deadline)
            .await?;
        Ok(read
            .into_iter()
            .flat_map(|answer| {
                let generation = answer.generation;
                answer.tools.into_iter().map(move |t| (t, generation))
            })
            .collect())
    }

    /// The records of candidates whose records the shards did not send with their hits (see
    /// [`Candidate::complete`]), read from a replica at the generation the search ranked them
    /// from: every candidate of `wanted`, complete. A tool changed or removed since the search is
    /// an `Unavailable` error (a retry searches the new catalog).
    pub(crate) async fn completed(
        &self,
        project_id: &str,
        wanted: &[&Candidate],
        request_id: &str,
        deadline: Instant,
    ) -> Result<Vec<Candidate>> {
        let mut by_integration: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut generations: HashMap<&str, u64> = HashMap::new();
        for c in wanted.iter().filter(|c| !c.complete) {
            by_integration
                .entry(c.record.integration.clone())
                .or_default()
                .push(c.record.name.clone());
            generations.insert(&c.record.integration, c.catalog_version);
        }
        let read = self
            .read_tools(
                project_id,
                by_integration,
                Some(&generations),
                request_id,
                deadline,
            )
            .await?;
        let mut found: HashMap<(String, String), ToolRecord> = read
            .into_iter()
            .flat_map(|answer| answer.tools)
            .map(|t| ((t.integration.clone(), t.name.clone()), t))
            .collect();
        wanted
            .iter()
            .map(|c| {
                if c.complete {
                    return Ok((*c).clone());
                }
                let key = (c.record.integration.clone(), c.record.name.clone());
                let record = found.remove(&key).ok_or_else(|| {
                    Error::Unavailable(format!(
                        "the tool `{}` changed while the search ran; retry",
                        agentsearch_common::ids::truncate(&c.record.name, 64)
                    ))
                })?;
                Ok(Candidate {
                    record: std::sync::Arc::new(record),
                    complete: true,
                    ..(*c).clone()
                })
            })
            .collect()
    }

    /// Reads `names` of each integration from a replica of it, integrations concurrently; with
    /// `generations`, only from a replica whose index is at the given generation of its
    /// integration (an integration without one is an `Unavailable` error).
    async fn read_tools(
        &self,
        project_id: &str,
        by_integration: BTreeMap<String, Vec<String>>,
        generations: Option<&HashMap<&str, u64>>,
        request_id: &str,
        deadline: Instant,
    ) -> Result<Vec<GetToolsResponse>> {
        if by_integration.is_empty() {
            return Ok(Vec::new());
        }
        let placements = self.placements(project_id).await?;
        let shards_of: HashMap<&str, &Vec<String>> = placements
            .iter()
            .map(|p| (p.integration.as_str(), &p.shard_ids))
            .collect();
        let stale = self.stale_replicas(project_id).await;
        let reads = by_integration.into_iter().map(|(integration, names)| {
            let shard_ids = shards_of.get(integration.as_str()).copied();
            let wanted = generations.and_then(|g| g.get(integration.as_str()).copied());
            let stale = &stale;
            async move {
                let Some(shard_ids) = shard_ids else {
                    return match wanted {
                        None => Ok(None),
                        Some(_) => Err(Error::Unavailable(format!(
                            "the integration {integration} is no longer placed; retry"
                        ))),
                    };
                };
                let mut last =
                    Error::Unavailable(format!("no shard holding {integration} answered"));
                for id in shard_ids.iter() {
                    if stale.skips(STALE_INTEGRATION, &integration, shard_ids, id) {
                        continue;
                    }
                    let Some(client) = self.shards.get(id) else {
                        continue;
                    };
                    let request = GetToolsRequest {
                        project_id: project_id.to_string(),
                        integration: integration.clone(),
                        names: names.clone(),
                    };
                    let timeout = deadline.saturating_duration_since(Instant::now());
                    match client.get_tools(request, request_id, timeout).await {
                        Ok(answer) if wanted.is_none_or(|g| g == answer.generation) => {
                            return Ok(Some(answer));
                        }
                        Ok(answer) => {
                            last = Error::Unavailable(format!(
                                "the tools of {integration} changed while the search ran \
                                 (generation {} searched, {} now); retry",
                                wanted.unwrap_or(0),
                                answer.generation
                            ))
                        }
                        Err(err) => last = err,
                    }
                }
                Err(last)
            }
        });
        let answers = futures::future::join_all(reads).await;
        let mut read = Vec::with_capacity(answers.len());
        for answer in answers {
            read.extend(answer?);
        }
        Ok(read)
    }

    /// One catalog tool by name, hydrated for the caller.
    pub async fn get_tool(
        &self,
        project_id: &str,
        name: &str,
        ctx: &RequestContext,
    ) -> Result<GetToolResponse> {
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(Error::invalid(
                "name",
                format!("must be 1..{MAX_NAME_CHARS} characters"),
            ));
        }
        let deadline = Instant::now() + Duration::from_millis(self.settings.search.deadline_ms);
        let mut found = self
            .fetch_tools(project_id, &[name.to_string()], &ctx.request_id, deadline)
            .await?;
        let Some((record, generation)) = found.pop() else {
            return Err(Error::NotFound(format!(
                "the project's catalog has no tool named `{}`",
                agentsearch_common::ids::truncate(name, 64)
            )));
        };
        let candidate = Candidate {
            record: std::sync::Arc::new(record),
            relevancy: 1.0,
            explain: None,
            catalog_version: generation,
            unfiltered_rank: 1,
            rerank_score: None,
            complete: true,
        };
        let user = ctx.user.as_deref();
        let mut shaped = self.shape(project_id, user, &[&candidate]).await;
        let shaped = shaped
            .pop()
            .ok_or_else(|| Error::Internal("no shape for the tool".into()))?;
        let rows = self.user_connections(project_id, user).await?;
        let connection = connections::statuses_for(&rows, [&candidate.record.integration])
            .pop()
            .ok_or_else(|| Error::Internal("no connection status for the tool".into()))?;
        Ok(GetToolResponse {
            degraded: shaped.failed.then_some("static_schema"),
            tool: to_result(&candidate, &shaped),
            connection,
        })
    }
}
