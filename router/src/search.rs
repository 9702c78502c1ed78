//! The tool-search pipeline: scope -> (embed the query || gather global BM25 statistics) ->
//! fan-out to shards -> merge each retriever across shards -> reciprocal rank fusion -> budget
//! packing -> response with exact usage counts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_common::config::{Fusion, SearchConfig};
use agentsearch_common::shard::{
    Hit, RetrievalMode, ShardSearchRequest, ShardSearchResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::ToolRecord;
use agentsearch_common::{Error, Result};
use agentsearch_fusion::budget::result_limit;
use agentsearch_fusion::{
    FusedItem, RankedList, ScoredList, merge_ranked, pack, reciprocal_rank_fusion, score_fusion,
};
use futures::future::join_all;
use serde_json::value::RawValue;

use crate::Router;
use crate::api::{
    Explain, FunctionDefinition, ModelTool, RetrieverHit, SearchError, ToolResult,
    ToolSearchRequest, ToolSearchResponse, Trace, TraceStep, Usage, Visibility,
};

/// Records named, timed steps; the list is returned only when diagnostics are on.
pub(crate) struct TraceRecorder {
    /// Steps are only recorded when the caller asked for diagnostics.
    enabled: bool,
    started: Instant,
    last: Instant,
    steps: Vec<TraceStep>,
}

impl TraceRecorder {
    pub(crate) fn new(started: Instant, enabled: bool) -> Self {
        Self {
            enabled,
            started,
            last: started,
            steps: Vec::new(),
        }
    }

    /// Ends the step that began at the previous call.
    pub(crate) fn step(&mut self, label: &str) {
        let now = Instant::now();
        self.push(label, now - self.last);
        self.last = now;
    }

    /// Adds a step measured elsewhere (concurrent work).
    pub(crate) fn push(&mut self, label: &str, took: Duration) {
        if !self.enabled {
            return;
        }
        self.steps.push(TraceStep {
            label: label.to_string(),
            duration_ms: took.as_secs_f64() * 1e3,
        });
    }

    pub(crate) fn finish(self) -> Trace {
        Trace {
            total_ms: self.started.elapsed().as_secs_f64() * 1e3,
            steps: self.steps,
        }
    }
}

/// One shard's part of a fan-out: the integrations it searches.
struct Part {
    shard_id: String,
    integrations: Vec<String>,
}

impl Router {
    pub async fn search_tools(
        &self,
        req: ToolSearchRequest,
        request_id: &str,
    ) -> Result<ToolSearchResponse> {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(self.settings.search.deadline_ms);
        let mut trace = TraceRecorder::new(started, req.diagnostics);
        let search = &self.settings.search;

        let placements = self.placements(&req.project_id).await?;
        let requested: HashSet<&str> = req.integrations.iter().map(String::as_str).collect();
        let scope: Vec<_> = placements
            .iter()
            .filter(|p| requested.is_empty() || requested.contains(p.integration.as_str()))
            .collect();
        let mut errors: Vec<SearchError> = req
            .integrations
            .iter()
            .filter(|i| !placements.iter().any(|p| &p.integration == *i))
            .map(|i| SearchError {
                integration: i.clone(),
                code: "UNKNOWN_INTEGRATION".into(),
                message: "the project's catalog has no tools of this integration".into(),
            })
            .collect();
        let mut by_shard: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for placement in &scope {
            match placement
                .shard_ids
                .iter()
                .find(|id| self.shards.get(id).is_some())
            {
                Some(id) => by_shard
                    .entry(id.clone())
                    .or_default()
                    .push(placement.integration.clone()),
                None => errors.push(SearchError {
                    integration: placement.integration.clone(),
                    code: "UNAVAILABLE".into(),
                    message: "no configured shard holds this integration".into(),
                }),
            }
        }
        let parts: Vec<Part> = by_shard
            .into_iter()
            .map(|(shard_id, integrations)| Part {
                shard_id,
                integrations,
            })
            .collect();
        trace.step("placement");

        // The query embedding and the global lexical statistics are independent: run them together.
        let embed = async {
            if !req.mode.dense() || parts.is_empty() {
                return None;
            }
            let t = Instant::now();
            let result = self.embed_query(&req.query).await;
            Some((result, t.elapsed()))
        };
        let stats = async {
            if !req.mode.lexical() || parts.len() < 2 {
                return None;
            }
            let t = Instant::now();
            let stats = self.gather_stats(&req, &parts, request_id, deadline).await;
            Some((stats, t.elapsed()))
        };
        let (embedded, stats) = tokio::join!(embed, stats);
        let mut strategy = match req.mode {
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Dense => "dense",
        };
        let mut degraded = None;
        let mut lexical_on = req.mode.lexical();
        let vector = match embedded {
            None => None,
            Some((Ok(vector), took)) => {
                trace.push("embed", took);
                Some(vector)
            }
            Some((Err(err), took)) => {
                trace.push("embed", took);
                tracing::warn!(request_id, error = %err, "query embedding failed");
                if req.mode == RetrievalMode::Dense {
                    return Err(Error::Unavailable(
                        "the embedding model is unavailable".into(),
                    ));
                }
                strategy = "semantic_failed_open";
                degraded = Some("lexical_only");
                None
            }
        };
        let stats: Option<TermStats> = stats.map(|(stats, took)| {
            trace.push("term_stats", took);
            stats
        });
        trace.last = Instant::now();

        let shard_request =
            |integrations: Vec<String>, stats: Option<TermStats>| ShardSearchRequest {
                project_id: req.project_id.clone(),
                integrations,
                query: req.query.clone(),
                vector: vector.as_ref().map(|v| v.to_vec()),
                categories: req.categories.clone(),
                max_side_effect: req.max_side_effect,
                limit: search.candidates,
                lexical: lexical_on,
                stats,
            };
        let mut answers = self
            .fan_out(
                &parts,
                &|integrations| shard_request(integrations, stats.clone()),
                request_id,
                deadline,
                &mut trace,
                &mut errors,
            )
            .await;
        // Retry the integrations of failed shards once, on their next replica, within the deadline.
        let failed: Vec<String> = errors
            .iter()
            .filter(|e| e.code != "UNKNOWN_INTEGRATION")
            .map(|e| e.integration.clone())
            .collect();
        if !failed.is_empty() && Instant::now() < deadline {
            let retry = self.replica_parts(&scope, &failed, &parts);
            if !retry.is_empty() {
                // The statistics gathered first lack the failed shard's part: add the replicas'.
                let retry_stats = match &stats {
                    Some(first) => {
                        let mut merged = first.clone();
                        merged.merge(&self.gather_stats(&req, &retry, request_id, deadline).await);
                        Some(merged)
                    }
                    None => None,
                };
                let mut retry_errors = Vec::new();
                let more = self
                    .fan_out(
                        &retry,
                        &|integrations| shard_request(integrations, retry_stats.clone()),
                        request_id,
                        deadline,
                        &mut trace,
                        &mut retry_errors,
                    )
                    .await;
                let recovered: HashSet<String> = retry
                    .iter()
                    .flat_map(|p| p.integrations.iter().cloned())
                    .filter(|i| !retry_errors.iter().any(|e| &e.integration == i))
                    .collect();
                errors.retain(|e| !recovered.contains(&e.integration));
                answers.extend(more);
            }
        }
        trace.step("fanout");

        // The lexical index failed for every integration that answered: fail open to dense.
        let answered: HashSet<&str> = scope
            .iter()
            .map(|p| p.integration.as_str())
            .filter(|i| !errors.iter().any(|e| e.integration == *i))
            .collect();
        let lexical_failures: HashSet<&str> = answers
            .iter()
            .flat_map(|a| a.failures.iter())
            .filter(|f| f.retriever == "lexical")
            .map(|f| f.integration.as_str())
            .collect();
        let lexical_failed =
            lexical_on && !answered.is_empty() && answered.is_subset(&lexical_failures);
        if lexical_failed && vector.is_some() {
            strategy = "lexical_failed_open";
            degraded = Some("dense_only");
            lexical_on = false;
        }
        for answer in &answers {
            for f in &answer.failures {
                errors.push(SearchError {
                    integration: f.integration.clone(),
                    code: "INDEX_UNAVAILABLE".into(),
                    message: format!(
                        "the {} index of this integration failed; its tools may be missing",
                        f.retriever
                    ),
                });
            }
        }

        let limit = search.candidates as usize;
        let mut records: HashMap<String, ToolRecord> = HashMap::new();
        let mut lexical_lists = Vec::new();
        let mut dense_lists = Vec::new();
        let mut excluded_lexical = Vec::new();
        let mut excluded_dense = Vec::new();
        for answer in answers {
            lexical_lists.push(answer.lexical);
            dense_lists.push(answer.dense);
            excluded_lexical.push(answer.excluded_lexical);
            excluded_dense.push(answer.excluded_dense);
            for tool in answer.tools {
                records.insert(tool.name.clone(), tool);
            }
        }
        let omitted_for_side_effect = side_effect_omissions(
            [
                (&lexical_lists, &excluded_lexical, lexical_on),
                (&dense_lists, &excluded_dense, vector.is_some()),
            ],
            limit,
        );
        let lexical = if lexical_on {
            merge_ranked(lexical_lists, limit)
        } else {
            Vec::new()
        };
        let dense = if vector.is_some() {
            merge_ranked(dense_lists, limit)
        } else {
            Vec::new()
        };
        let (fused, floor) = fuse(search, &lexical, &dense);
        let fused: Vec<_> = fused
            .into_iter()
            .filter(|f| records.contains_key(f.key))
            .collect();
        trace.step("fuse");

        let tokens: Vec<u32> = fused.iter().map(|f| records[f.key].tokens).collect();
        let packing = pack(
            &tokens,
            result_limit(
                req.top_k,
                req.max_tool_tokens.map(u64::from),
                search.default_top_k,
            ),
            req.max_tool_tokens.map(u64::from),
        );
        let best = fused.first().map_or(1.0, |f| f.score);
        let span = (best - floor).max(f64::MIN_POSITIVE);
        let tools: Vec<ToolResult> = packing
            .selected
            .iter()
            .map(|&pos| {
                let item = &fused[pos];
                let record = &records[item.key];
                let explain = req.diagnostics.then(|| {
                    let hit = |list: &[Hit], rank: Option<usize>| {
                        rank.map(|r| RetrieverHit {
                            rank: r as u32,
                            score: f64::from(list[r - 1].score),
                        })
                    };
                    Explain {
                        lexical: hit(&lexical, item.ranks[0]),
                        dense: hit(&dense, item.ranks[1]),
                    }
                });
                to_result(record, (item.score - floor) / span, explain)
            })
            .collect();
        trace.step("budget");

        let candidates = fused.len() as u32;
        let usage = Usage {
            strategy,
            mode: req.mode.as_str(),
            candidates,
            returned: tools.len() as u32,
            tool_tokens: packing.tokens,
            omitted_for_budget: packing.omitted_for_budget as u32,
            omitted_for_side_effect,
            omitted_for_top_k: packing.omitted_for_top_k as u32,
            hydrated_integrations: Vec::new(),
            degraded,
            visibility: Visibility {
                mode: "filtered",
                entitled_integrations: scope.len() as u32,
                candidates_before_filter: candidates + omitted_for_side_effect,
                candidates_after_filter: candidates,
            },
        };
        errors.sort_by(|a, b| {
            a.integration
                .cmp(&b.integration)
                .then_with(|| a.code.cmp(&b.code))
        });
        errors.dedup();
        Ok(ToolSearchResponse {
            tools,
            search_query: req.query,
            errors,
            usage,
            trace: req.diagnostics.then(|| trace.finish()),
        })
    }

    /// Sums the BM25 statistics of every part; a shard that does not answer is left out (its
    /// search will fail too and be reported).
    async fn gather_stats(
        &self,
        req: &ToolSearchRequest,
        parts: &[Part],
        request_id: &str,
        deadline: Instant,
    ) -> TermStats {
        let calls = parts.iter().filter_map(|part| {
            let client = self.shards.get(&part.shard_id)?.clone();
            let request = TermStatsRequest {
                project_id: req.project_id.clone(),
                integrations: part.integrations.clone(),
                query: req.query.clone(),
            };
            let timeout = deadline.saturating_duration_since(Instant::now());
            Some(async move { client.term_stats(request, request_id, timeout).await })
        });
        let mut total = TermStats::default();
        for result in join_all(calls).await {
            match result {
                Ok(stats) => total.merge(&stats),
                Err(err) => {
                    tracing::warn!(request_id, error = %err, "term statistics failed on a shard")
                }
            }
        }
        total
    }

    async fn fan_out(
        &self,
        parts: &[Part],
        make: &(dyn Fn(Vec<String>) -> ShardSearchRequest + Sync),
        request_id: &str,
        deadline: Instant,
        trace: &mut TraceRecorder,
        errors: &mut Vec<SearchError>,
    ) -> Vec<ShardSearchResponse> {
        let calls = parts.iter().map(|part| {
            let client = self.shards.get(&part.shard_id).cloned();
            let request = make(part.integrations.clone());
            async move {
                let t = Instant::now();
                let timeout = deadline.saturating_duration_since(Instant::now());
                let result = match client {
                    Some(client) => client.search_tools(request, request_id, timeout).await,
                    None => Err(Error::Unavailable("shard not configured".into())),
                };
                (part, result, t.elapsed())
            }
        });
        let mut answers = Vec::with_capacity(parts.len());
        for (part, result, took) in join_all(calls).await {
            if trace.enabled {
                trace.push(&format!("shard:{}", part.shard_id), took);
                if let Ok(answer) = &result {
                    let t = answer.timings;
                    for (step, ms) in [
                        ("prepare", t.prepare_ms),
                        ("lexical", t.lexical_ms),
                        ("dense", t.dense_ms),
                        ("assemble", t.assemble_ms),
                    ] {
                        trace.push(
                            &format!("shard:{}:{step}", part.shard_id),
                            Duration::from_secs_f64(ms / 1e3),
                        );
                    }
                }
            }
            match result {
                Ok(answer) => answers.push(answer),
                Err(err) => {
                    tracing::warn!(request_id, shard_id = %part.shard_id, error = %err, "shard search failed");
                    let message = match &err {
                        Error::Timeout(_) => {
                            "the shard holding this integration did not answer in time".to_string()
                        }
                        _ => "the shard holding this integration is unavailable".to_string(),
                    };
                    for integration in &part.integrations {
                        errors.push(SearchError {
                            integration: integration.clone(),
                            code: err.code().as_str().to_string(),
                            message: message.clone(),
                        });
                    }
                }
            }
        }
        answers
    }

    /// Parts that search `failed` integrations on a replica other than the one that failed.
    fn replica_parts(
        &self,
        scope: &[&agentsearch_store::Placement],
        failed: &[String],
        tried: &[Part],
    ) -> Vec<Part> {
        let tried_on: HashMap<&str, &str> = tried
            .iter()
            .flat_map(|p| {
                p.integrations
                    .iter()
                    .map(move |i| (i.as_str(), p.shard_id.as_str()))
            })
            .collect();
        let mut by_shard: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for placement in scope.iter().filter(|p| failed.contains(&p.integration)) {
            let previous = tried_on.get(placement.integration.as_str()).copied();
            let next = placement
                .shard_ids
                .iter()
                .find(|id| Some(id.as_str()) != previous && self.shards.get(id).is_some());
            if let Some(id) = next {
                by_shard
                    .entry(id.clone())
                    .or_default()
                    .push(placement.integration.clone());
            }
        }
        by_shard
            .into_iter()
            .map(|(shard_id, integrations)| Part {
                shard_id,
                integrations,
            })
            .collect()
    }

    pub(crate) async fn embed_query(&self, query: &str) -> Result<Arc<Vec<f32>>> {
        if let Some(vector) = self.embedder.cached(query) {
            return Ok(vector);
        }
        let embedder = self.embedder.clone();
        let query = query.to_string();
        tokio::task::spawn_blocking(move || embedder.embed_query(&query))
            .await
            .map_err(|e| Error::Internal(format!("embedding task: {e}")))?
            .map(|(v, _hit)| v)
            .map_err(|e| Error::Unavailable(e.to_string()))
    }
}

/// Distinct tools removed by the side-effect ceiling that rank inside a retriever's candidate
/// window (its top `limit` when eligible and excluded hits are ranked together).
fn side_effect_omissions(
    retrievers: [(&Vec<Vec<Hit>>, &Vec<Vec<Hit>>, bool); 2],
    limit: usize,
) -> u32 {
    let mut omitted: HashSet<String> = HashSet::new();
    for (eligible, excluded, on) in retrievers {
        if !on || excluded.iter().all(Vec::is_empty) {
            continue;
        }
        let excluded_names: HashSet<&str> =
            excluded.iter().flatten().map(|h| h.name.as_str()).collect();
        let all: Vec<Vec<Hit>> = eligible.iter().chain(excluded.iter()).cloned().collect();
        for hit in merge_ranked(all, limit) {
            if excluded_names.contains(hit.name.as_str()) {
                omitted.insert(hit.name);
            }
        }
    }
    omitted.len() as u32
}

/// Fuses the merged lexical and dense candidates with the configured function. Returns the fused
/// items (keys are tool names, `ranks` index the two lists) and the lowest score an item can get:
/// relevancies are scaled from it (0) to the best item (1).
fn fuse<'a>(
    search: &SearchConfig,
    lexical: &'a [Hit],
    dense: &'a [Hit],
) -> (Vec<FusedItem<&'a str>>, f64) {
    let scored = |hits: &'a [Hit]| -> Vec<(&'a str, f64)> {
        hits.iter()
            .map(|h| (h.name.as_str(), f64::from(h.score)))
            .collect()
    };
    fuse_keyed(
        search.fusion,
        search.rrf_k,
        [search.lexical_weight, search.dense_weight],
        &scored(lexical),
        &scored(dense),
    )
}

/// Fuses two ranked `(key, score)` lists, best first, with `fusion`; see [`fuse`].
pub(crate) fn fuse_keyed<'a>(
    fusion: Fusion,
    rrf_k: f64,
    weights: [f64; 2],
    lexical: &[(&'a str, f64)],
    dense: &[(&'a str, f64)],
) -> (Vec<FusedItem<&'a str>>, f64) {
    match fusion {
        Fusion::Rrf => {
            let lexical_keys: Vec<&str> = lexical.iter().map(|h| h.0).collect();
            let dense_keys: Vec<&str> = dense.iter().map(|h| h.0).collect();
            let lists = [
                RankedList {
                    weight: weights[0],
                    keys: &lexical_keys[..],
                },
                RankedList {
                    weight: weights[1],
                    keys: &dense_keys[..],
                },
            ];
            (reciprocal_rank_fusion(&lists, rrf_k), 0.0)
        }
        Fusion::Score => {
            let lists = [
                ScoredList {
                    weight: weights[0],
                    hits: lexical,
                },
                ScoredList {
                    weight: weights[1],
                    hits: dense,
                },
            ];
            let fused = score_fusion(&lists);
            (fused.items, fused.floor)
        }
    }
}

fn to_result(record: &ToolRecord, relevancy: f64, explain: Option<Explain>) -> ToolResult {
    let parameters = RawValue::from_string(record.parameters.clone())
        .unwrap_or_else(|_| RawValue::from_string("{}".to_string()).expect("valid JSON"));
    ToolResult {
        intent_name: record.name.clone(),
        integration: record.integration.clone(),
        category: record.category.clone(),
        side_effect: record.side_effect,
        approval_required: record.side_effect.approval_required(),
        schema_source: "static",
        relevancy,
        tool: ModelTool {
            kind: "function",
            function: FunctionDefinition {
                name: record.name.clone(),
                description: record.description.clone(),
                parameters,
            },
        },
        tokens: record.tokens,
        explain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(name: &str, score: f32) -> Hit {
        Hit {
            name: name.into(),
            integration: "i".into(),
            score,
        }
    }

    #[test]
    fn omissions_count_only_excluded_tools_inside_the_window() {
        let eligible = vec![vec![hit("a", 5.0), hit("b", 3.0)], vec![hit("c", 4.0)]];
        let excluded = vec![vec![hit("x", 6.0), hit("y", 1.0)], vec![]];
        // Window of 3 over x a c b y -> x, a, c: one excluded tool inside.
        assert_eq!(
            side_effect_omissions([(&eligible, &excluded, true), (&vec![], &vec![], true)], 3),
            1
        );
        // Window of 10: x and y.
        assert_eq!(
            side_effect_omissions([(&eligible, &excluded, true), (&vec![], &vec![], true)], 10),
            2
        );
        // The same tool excluded in both retrievers counts once; a retriever that did not run, never.
        let dense_excluded = vec![vec![hit("x", 0.9)]];
        assert_eq!(
            side_effect_omissions(
                [
                    (&eligible, &excluded, true),
                    (&vec![], &dense_excluded, true)
                ],
                3
            ),
            1
        );
        assert_eq!(
            side_effect_omissions([(&eligible, &excluded, false), (&vec![], &vec![], true)], 3),
            0
        );
    }
}
