//! The tool-search pipeline: scope -> (embed the query || gather global BM25 statistics) ->
//! fan-out to shards -> merge each retriever across shards -> reciprocal rank fusion -> budget
//! packing -> response with exact usage counts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_common::config::SearchConfig;
use agentsearch_common::shard::{
    Hit, IndexedTool, InlineSearchRequest, RetrievalMode, ScopeStats, ShardSearchRequest,
    ShardSearchResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord, each_piece, identifier_pieces};
use agentsearch_common::{Error, Result};
use agentsearch_fusion::budget::result_limit;
use agentsearch_fusion::tokens::count_tokens;
use agentsearch_fusion::{
    BudgetScope, COVERAGE_DEPTH, FusedItem, MultiPacking, Packing, coverage_pair, merge_ranked,
    pack_queries, tool_coverage,
};
use agentsearch_hydrate::{HydratedSchema, HydrationRequest, Outcome};
use futures::future::join_all;
use serde_json::value::RawValue;
use tracing::Instrument;

use crate::Router;
use crate::cluster::replicas::{AlternativesFn, PartPlan, assign, run_part};
use crate::cluster::shards::ShardClient;
use crate::request::RequestContext;
use crate::tools::api::{
    Explain, FunctionDefinition, MAX_NEAR_MISSES, ModelTool, NearMiss, RetrieverHit, SearchError,
    ToolResult, ToolSearchRequest, ToolSearchResponse, Trace, TraceStep, Usage, Visibility,
};
use crate::tools::connections;
pub(crate) use crate::tools::fusion::{coverage_terms, fuse_keyed};
use crate::tools::stats_cache::answers_stamp;
use agentsearch_store::STALE_INTEGRATION;

/// Records named, timed steps; the list is returned only when diagnostics are on.
pub(crate) struct TraceRecorder {
    /// Steps are only recorded when the caller asked for diagnostics.
    pub(crate) enabled: bool,
    pub(crate) started: Instant,
    pub(crate) last: Instant,
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

/// The error code of inline tools that could not be searched (they are not retried on a replica).
const INLINE_UNAVAILABLE: &str = "INLINE_UNAVAILABLE";

/// One shard's part of a fan-out: the integrations it searches.
struct Part {
    shard_id: String,
    integrations: Vec<String>,
}

/// What to rank: one query of a search or of a batch.
pub(crate) struct RankQuery<'a> {
    pub project_id: &'a str,
    pub query: &'a str,
    pub integrations: &'a [String],
    pub categories: &'a [String],
    pub max_side_effect: Option<SideEffect>,
    /// `Some` with `connectedOnly`: the integrations the caller has an active connection for.
    pub connected: Option<&'a HashSet<String>>,
    /// The result window: removed tools ranked inside it are near misses.
    pub window: usize,
    pub mode: RetrievalMode,
    pub diagnostics: bool,
    /// Inline tools ranked with the catalog (batch only); never persisted.
    pub inline: &'a [IndexedTool],
    /// The caller's query embedding, checked: used instead of embedding `query`.
    pub vector: Option<Arc<Vec<f32>>>,
    /// The structured part of a query JSON document, for the shards: both retrievers rank only
    /// the tools it allows. With an empty `query`, the lexical retriever ranks by it alone.
    pub structured: Option<&'a str>,
    /// The caller did not opt out of reranking (`rerank: false`).
    pub rerank: bool,
}

/// One candidate of a ranking, after every filter.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub record: Arc<ToolRecord>,
    /// Fused score scaled from the floor (0) to the best candidate (1).
    pub relevancy: f64,
    pub explain: Option<Explain>,
    pub catalog_version: u64,
    /// 1-based position in the ranking before the side-effect and connection rules.
    pub unfiltered_rank: u32,
    /// The reranker's score, when the tool was among those reranked.
    pub rerank_score: Option<f64>,
    /// `record` is the stored tool. When false it holds only the name and integration of a hit
    /// whose record its shard did not send (ranked below the records the router asked for in both
    /// lists): [`Router::completed`] reads it before the tool is reranked or shaped.
    pub complete: bool,
}

/// The ranked pool of one query with what its usage needs.
pub(crate) struct Ranked {
    pub candidates: Vec<Candidate>,
    pub strategy: &'static str,
    pub mode: &'static str,
    pub degraded: Option<&'static str>,
    pub errors: Vec<SearchError>,
    pub omitted_for_side_effect: u32,
    pub omitted_not_connected: u32,
    pub entitled_integrations: u32,
    /// Tools removed by the side-effect ceiling or `connectedOnly` inside the window.
    pub removed: Vec<NearMiss>,
    /// Integrations in scope whose tools are missing from the ranking.
    pub failed_integrations: Vec<String>,
    /// The version of the project's ranking model that fused the lists (0: the deployment's
    /// weights).
    pub ranking_model: u64,
    /// What each retriever contributed to fusion, best first (what feedback learns from).
    pub lexical: Vec<Hit>,
    pub dense: Vec<Hit>,
    /// How much of the query each list's best candidates contain (adaptive fusion reads it).
    pub coverage: [f64; 2],
    /// With a structured query that asks for it: the exact number of tools in the caller's scope
    /// that satisfy it.
    pub matched: Option<u64>,
    /// With a structured query that asks for them: matched description fragments, by tool name.
    pub highlights: HashMap<String, Vec<String>>,
    pub rerank_outcome: crate::rerank::Outcome,
}

/// How a tool is returned to the caller: with the caller's schema, or the stored one.
#[derive(Clone, Debug)]
pub(crate) struct Shaped {
    /// The caller's schema; `None`: the stored one.
    pub hydrated: Option<HydratedSchema>,
    /// The stored tool shaped.
    pub record: Arc<ToolRecord>,
    /// Tokens of the definition as returned.
    pub tokens: u32,
    /// The integration hydrates schemas and the caller is a user: hydration was tried.
    pub attempted: bool,
    /// Hydration was tried and failed: the stored schema stands in.
    pub failed: bool,
}

impl Router {
    pub async fn search_tools(
        &self,
        req: ToolSearchRequest,
        ctx: &RequestContext,
    ) -> Result<ToolSearchResponse> {
        let started = Instant::now() - ctx.auth;
        let mut trace = TraceRecorder::new(started, req.diagnostics);
        trace.step("auth");
        let user = ctx.user.as_deref();
        connections::check_connected_only(req.connected_only, user)?;
        let rows = self
            .user_connections(&req.project_id, user)
            .instrument(tracing::info_span!("connections"))
            .await?;
        if user.is_some() {
            trace.step("connections");
        }
        let connected = connections::connected(&rows);
        let page = result_limit(
            req.top_k,
            req.max_tool_tokens.map(u64::from),
            self.settings.search.default_top_k,
        );
        let offset = req.typed.as_ref().map_or(0, |t| t.offset as usize);
        // Ranked as far as the page's end; the tools before `offset` are then skipped.
        let window = page + offset;
        let vector = self.given_vector(req.query_embedding.as_ref())?;
        let query = RankQuery {
            project_id: &req.project_id,
            query: &req.query,
            integrations: &req.integrations,
            categories: &req.categories,
            max_side_effect: req.max_side_effect,
            connected: req.connected_only.then_some(&connected),
            window,
            mode: req.mode,
            diagnostics: req.diagnostics,
            inline: &[],
            vector,
            structured: req.typed.as_ref().map(|t| t.structured.as_str()),
            rerank: req.rerank,
        };
        let mut ranked = self.rank(&query, &ctx.request_id, &mut trace).await?;
        self.search_log.record(
            crate::tools::feedback::TOOLS,
            &req.project_id,
            ctx.user.as_deref(),
            &ctx.request_id,
            || crate::tools::feedback::Lists::of(&ranked.lexical, &ranked.dense, ranked.coverage),
        );

        if offset > 0 {
            ranked
                .candidates
                .drain(..offset.min(ranked.candidates.len()));
        }
        let (packing, shaped) = self
            .pack_shaped(
                &req.project_id,
                user,
                &[&ranked.candidates],
                &[page],
                req.max_tool_tokens.map(u64::from),
                BudgetScope::Union,
                (
                    &ctx.request_id,
                    trace.started + Duration::from_millis(self.settings.search.deadline_ms),
                ),
                &mut trace,
            )
            .await?;
        let (tools, usage) = query_result(&ranked, &packing.queries[0], &shaped);
        trace.step("budget");
        let mut statuses = connections::statuses_for(&rows, tools.iter().map(|t| &t.integration));
        // Cached per router: a store read only when an entry is older than the placements'.
        self.describe_toolkits(&req.project_id, &mut statuses).await;
        Ok(ToolSearchResponse {
            tools,
            search_query: req.query,
            errors: ranked.errors,
            usage,
            trace: req.diagnostics.then(|| trace.finish()),
            toolkit_connection_statuses: statuses,
        })
    }

    /// Ranks one query: scope -> (embed the query || global BM25 statistics) -> fan-out to the
    /// shards (and the inline tools) -> merge each retriever across shards -> fuse -> exact-name
    /// promotion -> side-effect and connection rules, with the near misses they cause.
    pub(crate) async fn rank(
        &self,
        q: &RankQuery<'_>,
        request_id: &str,
        trace: &mut TraceRecorder,
    ) -> Result<Ranked> {
        let deadline = trace.started + Duration::from_millis(self.settings.search.deadline_ms);
        let search = &self.settings.search;

        let placements = self
            .placements(q.project_id)
            .instrument(tracing::info_span!("placement"))
            .await?;
        let requested: HashSet<&str> = q.integrations.iter().map(String::as_str).collect();
        let scope: Vec<_> = placements
            .iter()
            .filter(|p| requested.is_empty() || requested.contains(p.integration.as_str()))
            .collect();
        let mut errors: Vec<SearchError> = q
            .integrations
            .iter()
            .filter(|i| !placements.iter().any(|p| &p.integration == *i))
            .filter(|i| !q.inline.iter().any(|t| &t.record.integration == *i))
            .map(|i| SearchError {
                integration: i.clone(),
                code: "UNKNOWN_INTEGRATION".into(),
                message: "the project's catalog has no tools of this integration".into(),
            })
            .collect();
        // One replica per integration, the least loaded; the others stand by (see `replicas`).
        let salt = crate::cluster::replicas::salt_of(request_id);
        let stale = self.stale_replicas(q.project_id).await;
        let replicas_of: HashMap<&str, &[String]> = scope
            .iter()
            .map(|p| (p.integration.as_str(), p.shard_ids.as_slice()))
            .collect();
        let replicas = |key: &String| replicas_of.get(key.as_str()).copied().unwrap_or_default();
        let in_scope: Vec<String> = scope.iter().map(|p| p.integration.clone()).collect();
        let (groups, unplaced) = assign(&self.shards, salt, &in_scope, replicas, |key, s| {
            stale.skips(STALE_INTEGRATION, key, replicas(key), s)
        });
        errors.extend(unplaced.into_iter().map(|integration| SearchError {
            integration,
            code: "UNAVAILABLE".into(),
            message: "no configured shard holds this integration".into(),
        }));
        let parts: Vec<Part> = groups
            .into_iter()
            .map(|(shard_id, integrations)| Part {
                shard_id,
                integrations,
            })
            .collect();
        let alternatives = |keys: &[String], tried: &HashSet<String>| {
            assign(&self.shards, salt, keys, replicas, |key, s| {
                tried.contains(s) || stale.skips(STALE_INTEGRATION, key, replicas(key), s)
            })
        };
        let inline: Vec<IndexedTool> = q
            .inline
            .iter()
            .filter(|t| requested.is_empty() || requested.contains(t.record.integration.as_str()))
            .cloned()
            .collect();
        trace.step("placement");

        // The query embedding and the global lexical statistics are independent: run them together.
        // Statistics that searches of this query and scope confirmed are used without the round
        // (see `stats_cache`); the fan-out's stamps then tell whether they still hold.
        let searchable = !parts.is_empty() || !inline.is_empty();
        // Inline tools are scored on the catalog's statistics, so they are needed even for one
        // shard.
        let needs_stats = q.mode.lexical()
            && !q.query.is_empty()
            && !parts.is_empty()
            && (parts.len() >= 2 || !inline.is_empty());
        let stats_key = needs_stats.then(|| {
            self.stats_cache.key(
                q.project_id,
                q.query,
                parts
                    .iter()
                    .flat_map(|p| p.integrations.iter().map(String::as_str)),
            )
        });
        let cached = stats_key.as_ref().and_then(|key| self.stats_cache.get(key));
        let embed = async {
            if !q.mode.dense() || !searchable || q.query.is_empty() {
                return None;
            }
            if let Some(vector) = &q.vector {
                return Some((Ok((vector.clone(), false)), Duration::ZERO));
            }
            let t = Instant::now();
            let result = self
                .embed_query(q.query)
                .instrument(tracing::info_span!("embed"))
                .await;
            Some((result, t.elapsed()))
        };
        let (parts_ref, alternatives_ref, inline_ref) = (&parts, &alternatives, &inline);
        let gather = move || async move {
            let t = Instant::now();
            let stats = self
                .gather_stats(
                    q.project_id,
                    q.query,
                    parts_ref,
                    alternatives_ref,
                    request_id,
                    deadline,
                )
                .instrument(tracing::info_span!("term_stats"))
                .await;
            (stats, t.elapsed())
        };
        let stats = async {
            if !needs_stats || cached.is_some() {
                return None;
            }
            Some(gather().await)
        };
        let (embedded, gathered) = tokio::join!(embed, stats);
        let mut strategy = match q.mode {
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Dense => "dense",
        };
        let mut degraded = None;
        // A structured query without words ranks by its own score, on the lexical side.
        let mut lexical_on = q.mode.lexical() || q.query.is_empty();
        let vector = match embedded {
            None => None,
            Some((Ok((vector, cached)), took)) => {
                let label = match q.vector {
                    Some(_) => "embed_given",
                    None => embed_label(cached),
                };
                trace.push(label, took);
                Some(vector)
            }
            Some((Err(err), took)) => {
                trace.push("embed", took);
                embedding_failed(err, q.mode, request_id)?;
                strategy = "semantic_failed_open";
                degraded = Some("lexical_only");
                metrics::counter!(agentsearch_common::metrics::DEGRADED_ANSWERS, "mode" => "lexical_only")
                    .increment(1);
                None
            }
        };
        // The statistics the search runs on, and the stamp a search must report to confirm them.
        let (stats, expected): (Option<TermStats>, Option<u64>) = match (&cached, gathered) {
            (Some(entry), _) => {
                trace.push("term_stats_cached", Duration::ZERO);
                (Some(entry.stats.clone()), Some(entry.stamp))
            }
            (None, Some((gathered, took))) => {
                trace.push("term_stats", took);
                (Some(gathered.stats), gathered.stamp)
            }
            (None, None) => (None, None),
        };
        trace.last = Instant::now();

        // Records of the hits packing and reranking usually reach: twice the window (packing
        // shapes the window and the next as many at once), plus the reranked candidates. Records
        // of hits ranked further down in both lists are read only if the search reaches them.
        let reranked = if q.rerank {
            self.rerank.as_ref().map_or(0, |r| r.top_n)
        } else {
            0
        };
        // At least the candidates adaptive fusion reads the coverage of.
        let records_wanted =
            u32::try_from((2 * q.window + reranked).max(COVERAGE_DEPTH)).unwrap_or(u32::MAX);
        let shard_request =
            |integrations: Vec<String>, stats: Option<TermStats>| ShardSearchRequest {
                project_id: q.project_id.to_string(),
                integrations,
                query: q.query.to_string(),
                vector: vector.as_ref().map(|v| v.to_vec()),
                categories: q.categories.to_vec(),
                max_side_effect: q.max_side_effect,
                limit: search.candidates.max(q.window as u32),
                lexical: lexical_on,
                stats,
                structured: q.structured.map(str::to_string),
                records: Some(records_wanted),
            };
        // The catalog's indexes and the inline tools, searched together on `stats`.
        let (vector_ref, shard_request) = (&vector, &shard_request);
        let search_on = move |stats: Option<TermStats>| async move {
            let inline_search = async {
                if inline_ref.is_empty() {
                    return None;
                }
                let t = Instant::now();
                let request = InlineSearchRequest {
                    project_id: q.project_id.to_string(),
                    tools: inline_ref.clone(),
                    query: q.query.to_string(),
                    vector: vector_ref.as_ref().map(|v| v.to_vec()),
                    categories: q.categories.to_vec(),
                    max_side_effect: q.max_side_effect,
                    limit: search.candidates,
                    lexical: lexical_on,
                    stats: stats.clone(),
                };
                Some((
                    self.search_inline(request, request_id, deadline)
                        .instrument(tracing::info_span!("inline"))
                        .await,
                    t.elapsed(),
                ))
            };
            let make = |integrations| shard_request(integrations, stats.clone());
            let catalog_search = self
                .fan_out(parts_ref, alternatives_ref, &make, request_id, deadline)
                .instrument(tracing::info_span!("fanout", parts = parts_ref.len()));
            tokio::join!(catalog_search, inline_search)
        };
        let started = Instant::now();
        let ((mut answers, mut steps, mut failures), mut inline_answer) =
            search_on(stats.clone()).await;
        let failed = !failures.is_empty();
        let searched = answers_stamp(&answers, failed);
        if let Some(key) = stats_key {
            let confirmed = expected.is_some() && searched == expected;
            let lookups = agentsearch_common::metrics::TERM_STATS_CACHE;
            match (&cached, confirmed) {
                (Some(_), true) => metrics::counter!(lookups, "result" => "hit").increment(1),
                (None, confirmed) => {
                    metrics::counter!(lookups, "result" => "miss").increment(1);
                    if let (true, Some(stats), Some(stamp)) = (confirmed, stats, expected) {
                        self.stats_cache.confirm(key, stats, stamp);
                    }
                }
                (Some(_), false) => {
                    metrics::counter!(lookups, "result" => "stale").increment(1);
                    self.stats_cache.forget(&key);
                    // The statistics of an index in scope changed since they were confirmed:
                    // what was searched is dropped and the query runs again on fresh ones, if
                    // the deadline leaves room for it (else the answer stands, ranked on the
                    // statistics from before the change, as a search that races a write can
                    // be). A failed part would fail again and only spend the deadline: the
                    // others' answers stand (ranked on every index's statistics).
                    let room =
                        deadline.saturating_duration_since(Instant::now()) > started.elapsed() * 2;
                    if !failed && room {
                        trace.push("term_stats_stale", started.elapsed());
                        let (gathered, took) = gather().await;
                        trace.push("term_stats", took);
                        ((answers, steps, failures), inline_answer) =
                            search_on(Some(gathered.stats.clone())).await;
                        if let Some(stamp) = gathered.stamp
                            && answers_stamp(&answers, !failures.is_empty()) == Some(stamp)
                        {
                            self.stats_cache.confirm(key, gathered.stats, stamp);
                        }
                    }
                }
            }
        }
        for (label, took) in steps {
            trace.push(&label, took);
        }
        errors.extend(failures);
        if let Some((answer, took)) = inline_answer {
            trace.push("inline", took);
            match answer {
                Ok(answer) => answers.push(answer),
                Err(err) => {
                    tracing::warn!(request_id, error = %err, "inline tool search failed");
                    for integration in sorted_unique(inline.iter().map(|t| &t.record.integration)) {
                        errors.push(SearchError {
                            integration,
                            code: INLINE_UNAVAILABLE.into(),
                            message: format!(
                                "the inline tools could not be searched ({})",
                                err.code().as_str()
                            ),
                        });
                    }
                }
            }
        }
        trace.step("fanout");

        // The lexical index failed for every integration that answered: fail open to dense.
        let answered: HashSet<&str> = scope
            .iter()
            .map(|p| p.integration.as_str())
            .chain(inline.iter().map(|t| t.record.integration.as_str()))
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
            metrics::counter!(agentsearch_common::metrics::DEGRADED_ANSWERS, "mode" => "dense_only")
                .increment(1);
            lexical_on = false;
        }
        // Integrations missing from the ranking: their shard failed, or every retriever that ranks
        // failed on their index (a lexical failure answered by dense is degraded, not missing).
        let mut failed_integrations: std::collections::BTreeSet<String> = errors
            .iter()
            .filter(|e| e.code != "UNKNOWN_INTEGRATION")
            .map(|e| e.integration.clone())
            .collect();
        let mut failed_retrievers: HashMap<&str, HashSet<&str>> = HashMap::new();
        for f in answers.iter().flat_map(|a| a.failures.iter()) {
            failed_retrievers
                .entry(f.integration.as_str())
                .or_default()
                .insert(f.retriever.as_str());
        }
        for (integration, retrievers) in &failed_retrievers {
            let missing = retrievers.contains("")
                || ((!lexical_on || retrievers.contains("lexical"))
                    && (vector.is_none() || retrievers.contains("dense")));
            if missing {
                failed_integrations.insert(integration.to_string());
            }
        }
        let failed_integrations: Vec<String> = failed_integrations.into_iter().collect();
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

        // Deep pages of a typed query need more candidates than the deployment's default.
        let limit = (search.candidates as usize).max(q.window);
        let mut records: HashMap<String, Arc<ToolRecord>> = HashMap::new();
        let mut generations: HashMap<String, u64> = HashMap::new();
        let mut lexical_lists = Vec::new();
        let mut dense_lists = Vec::new();
        let mut excluded_lexical = Vec::new();
        let mut excluded_dense = Vec::new();
        let mut matched_by: HashMap<String, u64> = HashMap::new();
        let mut highlights: HashMap<String, Vec<String>> = HashMap::new();
        if q.structured.is_some() && answers.iter().any(|a| !a.structured) {
            // A shard that predates structured queries ignored the restriction: its answer
            // would show what the query excludes.
            return Err(Error::Unavailable(
                "a shard of this deployment cannot run typed queries yet (an upgrade is in \
                 progress?); retry later or send the query as a string"
                    .into(),
            ));
        }
        for answer in answers {
            for (integration, n) in answer.matched {
                *matched_by.entry(integration).or_insert(0) += n;
            }
            highlights.extend(answer.highlights);
            lexical_lists.push(answer.lexical);
            dense_lists.push(answer.dense);
            excluded_lexical.push(answer.excluded_lexical);
            excluded_dense.push(answer.excluded_dense);
            generations.extend(answer.generations);
            for tool in answer.tools {
                records.insert(tool.name.clone(), tool);
            }
        }
        // Eligible hits whose records the shards left out (see `records_wanted`), by name: their
        // integrations. Eligible means in `records` or here.
        let unsent: HashMap<&str, &str> = lexical_lists
            .iter()
            .chain(&dense_lists)
            .flatten()
            .filter(|h| !records.contains_key(&h.name))
            .map(|h| (h.name.as_str(), h.integration.as_str()))
            .collect();
        // A query naming a tool the retrievers missed: look the name up, so it can rank first.
        // Not for structured queries: a looked-up tool has not been checked against the nodes.
        let guesses: Vec<String> = name_guesses(q.query)
            .into_iter()
            .filter(|_| q.structured.is_none())
            .filter(|g| {
                !records.contains_key(g)
                    && !unsent.contains_key(g.as_str())
                    && !excluded_lexical
                        .iter()
                        .chain(excluded_dense.iter())
                        .flatten()
                        .any(|h| &h.name == g)
            })
            .collect();
        let mut looked_up: Vec<Hit> = Vec::new();
        let mut looked_up_excluded: Vec<Hit> = Vec::new();
        if !guesses.is_empty() {
            match self
                .fetch_tools(q.project_id, &guesses, request_id, deadline)
                .await
            {
                Ok(found) => {
                    for (record, generation) in found {
                        let in_scope =
                            requested.is_empty() || requested.contains(record.integration.as_str());
                        let in_categories =
                            q.categories.is_empty() || q.categories.contains(&record.category);
                        if !in_scope || !in_categories {
                            continue;
                        }
                        let hit = Hit {
                            name: record.name.clone(),
                            integration: record.integration.clone(),
                            score: 0.0,
                        };
                        if record.side_effect.allowed_under(q.max_side_effect) {
                            generations
                                .entry(record.integration.clone())
                                .or_insert(generation);
                            records.insert(record.name.clone(), Arc::new(record));
                            looked_up.push(hit);
                        } else {
                            looked_up_excluded.push(hit);
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(request_id, error = %err, "looking up a named tool failed")
                }
            }
            trace.step("name_lookup");
        }
        let dense_on = vector.is_some();
        let mut omitted_for_side_effect = side_effect_omissions(
            [
                (&lexical_lists, &excluded_lexical, lexical_on),
                (&dense_lists, &excluded_dense, dense_on),
            ],
            limit,
        );
        let merged = |lists: &Vec<Vec<Hit>>, on: bool| {
            if on {
                merge_ranked(lists.clone(), limit)
            } else {
                Vec::new()
            }
        };
        let lexical = merged(&lexical_lists, lexical_on);
        let dense = merged(&dense_lists, dense_on);
        // The project's model, learned from its feedback, or the deployment's weights.
        let model = self
            .ranking_model(crate::tools::feedback::TOOLS, q.project_id)
            .await;
        let weights = model
            .as_ref()
            .map_or([search.lexical_weight, search.dense_weight], |m| m.weights);
        // How much of the query each list's best candidates contain, from the records at hand
        // (a stand-in without its record counts as containing nothing); only when both lists
        // take part (one list alone ranks the same whatever its weight). A tool's parameter text
        // (its schema parsed) is produced only if its name and description leave terms missing,
        // and a tool in both lists is measured once.
        let coverage = coverage_terms(search, q.query)
            .filter(|_| lexical_on && dense_on)
            .map_or([0.0, 0.0], |terms| {
                let mut measured: Vec<(&str, f64)> = Vec::with_capacity(2 * COVERAGE_DEPTH);
                coverage_pair([&lexical[..], &dense[..]], |hit| {
                    let r = records.get(&hit.name)?;
                    if let Some(&(_, c)) = measured.iter().find(|(n, _)| *n == r.name) {
                        return Some(c);
                    }
                    let c = tool_coverage(&terms, r);
                    measured.push((r.name.as_str(), c));
                    Some(c)
                })
            });
        let (fused, floor) = fuse(search, weights, &lexical, &dense, coverage);
        let mut fused: Vec<_> = fused
            .into_iter()
            .filter(|f| records.contains_key(f.key) || unsent.contains_key(f.key))
            .collect();
        // Looked-up tools join the ranking at its end (the name promotion below moves them up).
        for hit in &looked_up {
            if !fused.iter().any(|f| f.key == hit.name) {
                fused.push(FusedItem {
                    key: hit.name.as_str(),
                    score: floor,
                    ranks: vec![None, None],
                });
            }
        }
        // The ranking before the side-effect ceiling: eligible and excluded hits ranked together,
        // uncut, so every eligible candidate has a place in it.
        let mut excluded_names: HashSet<String> = excluded_lexical
            .iter()
            .chain(excluded_dense.iter())
            .flatten()
            .map(|h| h.name.clone())
            .collect();
        let mut unfiltered: Vec<(String, String)> = if excluded_names.is_empty() {
            Vec::new()
        } else {
            let all = |eligible: &Vec<Vec<Hit>>, excluded: &Vec<Vec<Hit>>, on: bool| {
                if on {
                    merge_ranked(
                        eligible.iter().chain(excluded).cloned().collect(),
                        usize::MAX,
                    )
                } else {
                    Vec::new()
                }
            };
            let lexical_all = all(&lexical_lists, &excluded_lexical, lexical_on);
            let dense_all = all(&dense_lists, &excluded_dense, dense_on);
            let integration_of: HashMap<&str, &str> = lexical_all
                .iter()
                .chain(&dense_all)
                .map(|h| (h.name.as_str(), h.integration.as_str()))
                .collect();
            let (all_fused, _) = fuse(search, weights, &lexical_all, &dense_all, coverage);
            all_fused
                .into_iter()
                .filter(|f| {
                    records.contains_key(f.key)
                        || unsent.contains_key(f.key)
                        || excluded_names.contains(f.key)
                })
                .map(|f| (f.key.to_string(), integration_of[f.key].to_string()))
                .collect()
        };
        let mut present: HashSet<String> = unfiltered.iter().map(|(n, _)| n.clone()).collect();
        for f in &fused {
            if present.insert(f.key.to_string()) {
                let integration = records
                    .get(f.key)
                    .map_or_else(|| unsent[f.key], |r| r.integration.as_str());
                unfiltered.push((f.key.to_string(), integration.to_string()));
            }
        }
        // A looked-up tool above the ceiling: removed by it (and promoted below if named).
        for hit in looked_up_excluded {
            if excluded_names.insert(hit.name.clone()) {
                omitted_for_side_effect += 1;
            }
            if present.insert(hit.name.clone()) {
                unfiltered.push((hit.name, hit.integration));
            }
        }
        trace.step("fuse");

        // A query that names a tool ranks it first, before any rule applies.
        let named = named_tools(q.query, unfiltered.iter().map(|(name, _)| name.as_str()));
        let mut unfiltered = unfiltered;
        for name in named.iter().rev() {
            if let Some(pos) = unfiltered.iter().position(|(n, _)| n == name) {
                let item = unfiltered.remove(pos);
                unfiltered.insert(0, item);
            }
            if let Some(pos) = fused.iter().position(|f| f.key == name) {
                let item = fused.remove(pos);
                fused.insert(0, item);
            }
        }
        let unfiltered_rank: HashMap<&str, u32> = unfiltered
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i as u32 + 1))
            .collect();

        let best = fused
            .iter()
            .map(|f| f.score)
            .fold(f64::NEG_INFINITY, f64::max);
        let best = if best.is_finite() { best } else { 1.0 };
        let span = (best - floor).max(f64::MIN_POSITIVE);
        let is_connected =
            |integration: &str| q.connected.is_none_or(|set| set.contains(integration));
        let mut omitted_not_connected = 0u32;
        let mut candidates = Vec::with_capacity(fused.len());
        for (i, item) in fused.iter().enumerate() {
            let (record, complete) = match records.get(item.key) {
                Some(record) => (record.clone(), true),
                None => (Arc::new(unsent_record(item.key, unsent[item.key])), false),
            };
            let catalog_version = generations.get(&record.integration).copied().unwrap_or(0);
            if !is_connected(&record.integration) {
                omitted_not_connected += 1;
                continue;
            }
            let explain = q.diagnostics.then(|| {
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
            let relevancy = if i < named.len() && named.iter().any(|n| n == item.key) {
                1.0
            } else {
                (item.score - floor) / span
            };
            candidates.push(Candidate {
                record,
                relevancy,
                explain,
                catalog_version,
                unfiltered_rank: unfiltered_rank.get(item.key).copied().unwrap_or(0),
                rerank_score: None,
                complete,
            });
        }
        let rerank_outcome = self
            .rerank_candidates(q, &named, &mut candidates, request_id, deadline)
            .await?;
        if rerank_outcome != crate::rerank::Outcome::DisabledByDeployment
            && rerank_outcome != crate::rerank::Outcome::DisabledByRequest
        {
            trace.step("rerank");
        }
        let removed: Vec<NearMiss> = unfiltered
            .iter()
            .take(q.window)
            .enumerate()
            .filter_map(|(i, (name, integration))| {
                let reason = if excluded_names.contains(name)
                    && !records.contains_key(name)
                    && !unsent.contains_key(name.as_str())
                {
                    "side_effect"
                } else if !is_connected(integration) {
                    "not_connected"
                } else {
                    return None;
                };
                Some(NearMiss {
                    intent_name: name.clone(),
                    integration: integration.clone(),
                    reason,
                    rank: i as u32 + 1,
                    tokens: None,
                })
            })
            .collect();
        let mut entitled: HashSet<&str> = scope.iter().map(|p| p.integration.as_str()).collect();
        entitled.extend(inline.iter().map(|t| t.record.integration.as_str()));
        entitled.retain(|i| is_connected(i));
        errors.sort_by(|a, b| {
            a.integration
                .cmp(&b.integration)
                .then_with(|| a.code.cmp(&b.code))
        });
        errors.dedup();
        Ok(Ranked {
            candidates,
            strategy,
            mode: q.mode.as_str(),
            degraded,
            errors,
            omitted_for_side_effect,
            omitted_not_connected,
            entitled_integrations: entitled.len() as u32,
            removed,
            failed_integrations,
            ranking_model: model.map_or(0, |m| m.version),
            lexical,
            dense,
            coverage,
            matched: (!matched_by.is_empty()).then(|| {
                matched_by
                    .iter()
                    .filter(|(integration, _)| is_connected(integration))
                    .map(|(_, n)| n)
                    .sum()
            }),
            highlights,
            rerank_outcome,
        })
    }

    /// Reranks the first `rerank.top_n` candidates after the tools the query names (those stay
    /// first): see [`crate::rerank`].
    async fn rerank_candidates(
        &self,
        q: &RankQuery<'_>,
        named: &[String],
        candidates: &mut Vec<Candidate>,
        request_id: &str,
        deadline: Instant,
    ) -> Result<crate::rerank::Outcome> {
        let pinned = candidates
            .iter()
            .take_while(|c| named.iter().any(|n| *n == c.record.name))
            .count();
        let top_n = self.rerank.as_ref().map_or(0, |r| r.top_n);
        let end = (pinned + top_n).min(candidates.len());
        let requested = q.rerank && !q.query.trim().is_empty();
        if self.rerank.is_some() && requested && candidates[pinned..end].iter().any(|c| !c.complete)
        {
            let head: Vec<&Candidate> = candidates[pinned..end].iter().collect();
            let head = self
                .completed(q.project_id, &head, request_id, deadline)
                .await?;
            candidates.splice(pinned..end, head);
        }
        let texts: Vec<String> = candidates[pinned..end]
            .iter()
            .map(|c| rerank_text(&c.record))
            .collect();
        // A query document without free text ranks by its filter alone: nothing to rerank by.
        let (outcome, scores) = crate::rerank::score(
            self.rerank.as_ref(),
            requested,
            q.query,
            &texts,
            deadline,
            "tools",
        )
        .await;
        if let Some(scores) = scores {
            let mut head: Vec<Candidate> = candidates.drain(pinned..end).collect();
            for (c, score) in head.iter_mut().zip(&scores) {
                c.rerank_score = Some(f64::from(*score));
            }
            crate::rerank::reorder(&mut head, &scores, |c| &mut c.relevancy);
            candidates.splice(pinned..pinned, head);
        }
        Ok(outcome)
    }

    /// Packs the ranked lists of one or more queries under their limits and the budget, shaping
    /// (hydrating) candidates as packing reaches them, so tokens and budget are those of the
    /// schemas returned. A candidate without its record has it read first (`(request id,
    /// deadline)` for those reads).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn pack_shaped(
        &self,
        project_id: &str,
        user: Option<&str>,
        ranked: &[&Vec<Candidate>],
        limits: &[usize],
        max_tokens: Option<u64>,
        scope: BudgetScope,
        (request_id, deadline): (&str, Instant),
        trace: &mut TraceRecorder,
    ) -> Result<(MultiPacking, HashMap<String, Shaped>)> {
        let by_name: HashMap<&str, &Candidate> = ranked
            .iter()
            .flat_map(|list| list.iter())
            .map(|c| (c.record.name.as_str(), c))
            .collect();
        let lists: Vec<Vec<String>> = ranked
            .iter()
            .map(|list| list.iter().map(|c| c.record.name.clone()).collect())
            .collect();
        let mut shaped: HashMap<String, Shaped> = HashMap::new();
        let mut hydrate_took = Duration::ZERO;
        let mut records_took = Duration::ZERO;
        loop {
            let sized: Vec<Vec<(String, Option<u32>)>> = lists
                .iter()
                .map(|names| {
                    names
                        .iter()
                        .map(|n| (n.clone(), shaped.get(n).map(|s| s.tokens)))
                        .collect()
                })
                .collect();
            // Every name packing asks for is a candidate of `ranked`, so each round shapes at least
            // one more candidate and the loop ends.
            match pack_queries(&sized, limits, max_tokens, scope) {
                Ok(packing) => {
                    if records_took > Duration::ZERO {
                        trace.push("records", records_took);
                    }
                    if hydrate_took > Duration::ZERO {
                        trace.push("hydrate", hydrate_took);
                    }
                    trace.last = Instant::now();
                    return Ok((packing, shaped));
                }
                Err(needed) => {
                    // Shape what packing asks for plus the next candidates of every list, so a
                    // typical search needs one round of concurrent hydrations.
                    let mut wanted: Vec<&Candidate> = Vec::new();
                    let mut seen: HashSet<&str> = HashSet::new();
                    for name in &needed {
                        if let Some(c) = by_name.get(name.as_str())
                            && seen.insert(name.as_str())
                        {
                            wanted.push(c);
                        }
                    }
                    for (names, &limit) in lists.iter().zip(limits) {
                        for name in names
                            .iter()
                            .filter(|n| !shaped.contains_key(*n))
                            .take(limit.max(1))
                        {
                            if let Some(c) = by_name.get(name.as_str())
                                && seen.insert(name.as_str())
                            {
                                wanted.push(c);
                            }
                        }
                    }
                    let completed;
                    let wanted: Vec<&Candidate> = if wanted.iter().all(|c| c.complete) {
                        wanted
                    } else {
                        let t = Instant::now();
                        completed = self
                            .completed(project_id, &wanted, request_id, deadline)
                            .instrument(tracing::info_span!("records"))
                            .await?;
                        records_took += t.elapsed();
                        completed.iter().collect()
                    };
                    let t = Instant::now();
                    let results = self
                        .shape(project_id, user, &wanted)
                        .instrument(tracing::info_span!("hydrate", tools = wanted.len()))
                        .await;
                    if results.iter().any(|s| s.attempted) {
                        hydrate_took += t.elapsed();
                    }
                    for (c, s) in wanted.iter().zip(results) {
                        shaped.insert(c.record.name.clone(), s);
                    }
                }
            }
        }
    }

    /// Each candidate as returned to `user`: hydrated where its integration hydrates schemas and a
    /// user is known, else static. Runs the hydrations concurrently.
    pub(crate) async fn shape(
        &self,
        project_id: &str,
        user: Option<&str>,
        candidates: &[&Candidate],
    ) -> Vec<Shaped> {
        let calls = candidates.iter().map(|c| async move {
            let record = &c.record;
            let stored = |attempted: bool, failed: bool| Shaped {
                record: record.clone(),
                hydrated: None,
                tokens: record.tokens,
                attempted,
                failed,
            };
            let (Some(service), Some(user)) = (&self.hydration, user) else {
                return stored(false, false);
            };
            if !service.hydrates_for(project_id, &record.integration) {
                return stored(false, false);
            }
            let request = HydrationRequest {
                project_id: project_id.to_string(),
                user_id: user.to_string(),
                integration: record.integration.clone(),
                tool: record.name.clone(),
                catalog_version: c.catalog_version,
                description: record.description.clone(),
                parameters_json: record.parameters.clone(),
            };
            match service.hydrate(request).await {
                Outcome::Hydrated { schema, .. } => {
                    let mut definition = (**record).clone();
                    definition.parameters = schema.parameters_json.clone();
                    if let Some(description) = &schema.description {
                        definition.description = description.clone();
                    }
                    Shaped {
                        record: record.clone(),
                        tokens: count_tokens(&definition.llm_definition_json()),
                        hydrated: Some(schema),
                        attempted: true,
                        failed: false,
                    }
                }
                Outcome::Static => stored(true, false),
                Outcome::Failed(reason) => {
                    tracing::warn!(tool = %record.name, %reason, "schema hydration failed; the static schema stands in");
                    stored(true, true)
                }
            }
        });
        join_all(calls).await
    }

    /// Sums the BM25 statistics of every part; a shard that does not answer is left out (its
    /// search will fail too and be reported), and then the sum has no stamp.
    async fn gather_stats(
        &self,
        project_id: &str,
        query: &str,
        parts: &[Part],
        alternatives: &AlternativesFn<'_, String>,
        request_id: &str,
        deadline: Instant,
    ) -> ScopeStats {
        let plan = PartPlan {
            shards: &self.shards,
            alternatives,
            hedge_after: self.settings.hedge_after,
            deadline: tokio::time::Instant::from_std(deadline),
            rpc: "term_stats",
        };
        let call = |_: &str, client: ShardClient, integrations: Vec<String>, timeout| {
            let request = TermStatsRequest {
                project_id: project_id.to_string(),
                integrations,
                query: query.to_string(),
            };
            async move { client.term_stats(request, request_id, timeout).await }
        };
        let outcomes = join_all(parts.iter().map(|part| {
            run_part(
                &plan,
                part.shard_id.clone(),
                part.integrations.clone(),
                &call,
            )
        }))
        .await;
        let mut total = ScopeStats {
            stats: TermStats::default(),
            stamp: Some(0),
        };
        for outcome in outcomes {
            for (_, _, part, _) in &outcome.answers {
                total.stats.merge(&part.stats);
                total.stamp = total.stamp.zip(part.stamp).map(|(a, b)| a.wrapping_add(b));
            }
            for (shard_id, _, err) in &outcome.failed {
                tracing::warn!(request_id, shard_id = %shard_id, error = %err, "term statistics failed on a shard");
                total.stamp = None;
            }
        }
        total
    }

    /// Searches every part concurrently. Returns the answers, a trace step per shard (and per
    /// shard-side step), and an error per integration of a shard that failed.
    async fn fan_out(
        &self,
        parts: &[Part],
        alternatives: &AlternativesFn<'_, String>,
        make: &(dyn Fn(Vec<String>) -> ShardSearchRequest + Sync),
        request_id: &str,
        deadline: Instant,
    ) -> (
        Vec<ShardSearchResponse>,
        Vec<(String, Duration)>,
        Vec<SearchError>,
    ) {
        let plan = PartPlan {
            shards: &self.shards,
            alternatives,
            hedge_after: self.settings.hedge_after,
            deadline: tokio::time::Instant::from_std(deadline),
            rpc: "search_tools",
        };
        let call = |_: &str, client: ShardClient, integrations: Vec<String>, timeout| {
            let request = make(integrations);
            async move { client.search_tools(request, request_id, timeout).await }
        };
        let outcomes = join_all(parts.iter().map(|part| {
            run_part(
                &plan,
                part.shard_id.clone(),
                part.integrations.clone(),
                &call,
            )
        }))
        .await;
        let mut answers = Vec::with_capacity(parts.len());
        let mut steps = Vec::new();
        let mut errors = Vec::new();
        for outcome in outcomes {
            for (shard_id, _, answer, took) in outcome.answers {
                steps.push((format!("shard:{shard_id}"), took));
                let t = answer.timings;
                for (step, ms) in [
                    ("prepare", t.prepare_ms),
                    ("lexical", t.lexical_ms),
                    ("dense", t.dense_ms),
                    ("assemble", t.assemble_ms),
                ] {
                    steps.push((
                        format!("shard:{shard_id}:{step}"),
                        Duration::from_secs_f64(ms / 1e3),
                    ));
                }
                answers.push(answer);
            }
            for (shard_id, took) in outcome.failed_calls {
                steps.push((format!("shard:{shard_id}"), took));
            }
            for (shard_id, integrations, err) in outcome.failed {
                tracing::warn!(request_id, shard_id = %shard_id, error = %err, "shard search failed");
                let message = match &err {
                    Error::Timeout(_) => {
                        "the shard holding this integration did not answer in time".to_string()
                    }
                    _ => "no replica of this integration is available".to_string(),
                };
                for integration in integrations {
                    errors.push(SearchError {
                        integration,
                        code: err.code().as_str().to_string(),
                        message: message.clone(),
                    });
                }
            }
        }
        (answers, steps, errors)
    }

    /// Ranks inline tools on the first shard that answers (they are indexed in memory there for
    /// this request only).
    async fn search_inline(
        &self,
        request: InlineSearchRequest,
        request_id: &str,
        deadline: Instant,
    ) -> Result<ShardSearchResponse> {
        let mut last = Error::Unavailable("no shard is configured".into());
        // Start at a shard chosen by the request id, so inline work spreads over the shards.
        let ids = self.shards.ids();
        let start = request_id
            .bytes()
            .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
        let n = ids.len().max(1);
        for id in ids.iter().cycle().skip(start % n).take(ids.len()) {
            let Some(client) = self.shards.get(id) else {
                continue;
            };
            let timeout = deadline.saturating_duration_since(Instant::now());
            match client
                .search_inline(request.clone(), request_id, timeout)
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(err @ Error::InvalidArgument { .. }) => return Err(err),
                Err(err) => last = err,
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(last)
    }

    /// The query's embedding and whether the query-embedding cache answered. A query that
    /// would queue beyond `limits.max_queued_embeddings` is not embedded: the error makes the
    /// search rank by BM25 alone.
    pub(crate) async fn embed_query(&self, query: &str) -> Result<(Arc<Vec<f32>>, bool)> {
        self.start_embed_query(query).await
    }

    /// [`Router::embed_query`], started now (the cache read, the queue's turn taken, the model run
    /// handed to a blocking thread) whether or not the returned future is polled yet.
    pub(crate) fn start_embed_query(
        &self,
        query: &str,
    ) -> impl Future<Output = Result<(Arc<Vec<f32>>, bool)>> + Send + 'static {
        let started = if let Some(vector) = self.embedder.cached(query) {
            Ok(Ok((vector, true)))
        } else if let Ok(permit) = self.embed_queue.clone().try_acquire_owned() {
            let embedder = self.embedder.clone();
            let query = query.to_string();
            Ok(Err(tokio::task::spawn_blocking(move || {
                let vector = embedder.embed_query(&query);
                drop(permit);
                vector
            })))
        } else {
            metrics::counter!(agentsearch_common::metrics::EMBED_QUEUE_FULL).increment(1);
            Err(Error::RateLimited {
                retry_after: Duration::from_millis(self.limits.retry_after_ms),
            })
        };
        async move {
            match started? {
                Ok(cached) => Ok(cached),
                Err(task) => task
                    .await
                    .map_err(|e| Error::Internal(format!("embedding task: {e}")))?
                    .map_err(|e| Error::Unavailable(e.to_string())),
            }
        }
    }
}

impl Router {
    /// The caller's query embedding, checked against the deployment's model and dimension.
    pub(crate) fn given_vector(
        &self,
        given: Option<&crate::tools::api::QueryEmbedding>,
    ) -> Result<Option<Arc<Vec<f32>>>> {
        let Some(given) = given else {
            return Ok(None);
        };
        let model = self.embedder.inner();
        let mut v = Vec::new();
        let model_matches = given.model == model.model_id()
            || given
                .model
                .strip_prefix("sentence-transformers/")
                .is_some_and(|m| m == model.model_id());
        if !model_matches {
            v.push(agentsearch_common::FieldViolation::new(
                "queryEmbedding.model",
                format!(
                    "the vector must come from this deployment's model `{}`, got `{}`",
                    model.model_id(),
                    agentsearch_common::ids::truncate(&given.model, 64)
                ),
            ));
        }
        if given.vector.len() != model.dim() {
            v.push(agentsearch_common::FieldViolation::new(
                "queryEmbedding.vector",
                format!(
                    "this deployment's model has {} dimensions, got {}",
                    model.dim(),
                    given.vector.len()
                ),
            ));
        }
        if v.is_empty() {
            Ok(Some(Arc::new(given.vector.clone())))
        } else {
            Err(Error::invalid_many(v))
        }
    }
}

/// What a failed query embedding leaves a search: a dense-only search fails (`RATE_LIMITED` when
/// the embedding queue was full, `UNAVAILABLE` otherwise); any other goes on with BM25 alone.
pub(crate) fn embedding_failed(err: Error, mode: RetrievalMode, request_id: &str) -> Result<()> {
    if let Error::RateLimited { .. } = err {
        tracing::debug!(request_id, "query embedding skipped: the queue is full");
        if mode == RetrievalMode::Dense {
            return Err(err);
        }
    } else {
        tracing::warn!(request_id, error = %err, "query embedding failed");
    }
    if mode == RetrievalMode::Dense {
        return Err(Error::Unavailable(
            "the embedding model is unavailable".into(),
        ));
    }
    Ok(())
}

/// The trace label of a query embedding: `embed` when the model ran, `embed_cached` when the
/// query-embedding cache answered.
pub(crate) fn embed_label(cached: bool) -> &'static str {
    if cached { "embed_cached" } else { "embed" }
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
    weights: [f64; 2],
    lexical: &'a [Hit],
    dense: &'a [Hit],
    coverage: [f64; 2],
) -> (Vec<FusedItem<&'a str>>, f64) {
    let scored = |hits: &'a [Hit]| -> Vec<(&'a str, f64)> {
        hits.iter()
            .map(|h| (h.name.as_str(), f64::from(h.score)))
            .collect()
    };
    fuse_keyed(search, weights, &scored(lexical), &scored(dense), coverage)
}

pub(crate) fn to_result(c: &Candidate, shaped: &Shaped) -> ToolResult {
    let record = &shaped.record;
    let (description, parameters) = match &shaped.hydrated {
        Some(schema) => (
            schema.description.as_ref().unwrap_or(&record.description),
            &schema.parameters_json,
        ),
        None => (&record.description, &record.parameters),
    };
    let parameters = RawValue::from_string(parameters.clone())
        .unwrap_or_else(|_| RawValue::from_string("{}".to_string()).expect("valid JSON"));
    ToolResult {
        intent_name: record.name.clone(),
        integration: record.integration.clone(),
        category: record.category.clone(),
        side_effect: record.side_effect,
        approval_required: record.side_effect.approval_required(),
        schema_source: if shaped.hydrated.is_some() {
            "hydrated"
        } else {
            "static"
        },
        relevancy: c.relevancy,
        tool: ModelTool {
            kind: "function",
            function: FunctionDefinition {
                name: record.name.clone(),
                description: description.clone(),
                parameters,
            },
        },
        tokens: shaped.tokens,
        catalog_version: c.catalog_version,
        explain: c.explain.clone(),
        highlights: None,
        rerank_score: c.rerank_score,
    }
}

/// The stand-in for a record a shard did not send: the hit's name and integration only.
fn unsent_record(name: &str, integration: &str) -> ToolRecord {
    ToolRecord {
        name: name.to_string(),
        integration: integration.to_string(),
        category: String::new(),
        side_effect: agentsearch_common::tool::SideEffect::Unknown,
        description: String::new(),
        parameters: String::new(),
        tokens: 0,
    }
}

/// What the reranker reads of a tool: its name, words split, and its description.
fn rerank_text(record: &ToolRecord) -> String {
    format!(
        "{}: {}",
        record.name.replace(['_', '-'], " ").to_lowercase(),
        record.description
    )
}

/// The returned tools of one query and its usage, from its ranking, its packing and the shapes
/// packing settled on.
pub(crate) fn query_result(
    ranked: &Ranked,
    packing: &Packing,
    shaped: &HashMap<String, Shaped>,
) -> (Vec<ToolResult>, Usage) {
    let shape = |c: &Candidate| shaped.get(&c.record.name);
    let tools: Vec<ToolResult> = packing
        .selected
        .iter()
        .filter_map(|&pos| {
            let c = &ranked.candidates[pos];
            shape(c).map(|s| {
                let mut result = to_result(c, s);
                result.highlights = ranked.highlights.get(&c.record.name).cloned();
                result
            })
        })
        .collect();
    // The packer skips a tool that does not fit and keeps going: each skipped one would have been
    // returned with more budget.
    let selected: HashSet<usize> = packing.selected.iter().copied().collect();
    let visited = ranked.candidates.len() - packing.omitted_for_top_k;
    let budget_misses = ranked.candidates[..visited]
        .iter()
        .enumerate()
        .filter(|(i, _)| !selected.contains(i))
        .map(|(_, c)| NearMiss {
            intent_name: c.record.name.clone(),
            integration: c.record.integration.clone(),
            reason: "budget",
            rank: c.unfiltered_rank,
            tokens: shape(c).map(|s| s.tokens),
        });
    let mut near_misses: Vec<NearMiss> = ranked
        .removed
        .iter()
        .cloned()
        .chain(budget_misses)
        .collect();
    near_misses.sort_by_key(|m| m.rank);
    near_misses.truncate(MAX_NEAR_MISSES);
    let hydrated_integrations = sorted_unique(
        tools
            .iter()
            .filter(|t| t.schema_source == "hydrated")
            .map(|t| &t.integration),
    );
    let mut degradations: Vec<&'static str> = ranked.degraded.into_iter().collect();
    if tools
        .iter()
        .any(|t| shaped.get(&t.intent_name).is_some_and(|s| s.failed))
    {
        degradations.push("static_schema");
    }
    // Last: `degraded` names a retriever or a schema problem before a missing second opinion.
    degradations.extend(ranked.rerank_outcome.degraded());
    let candidates = ranked.candidates.len() as u32;
    let usage = Usage {
        strategy: ranked.strategy,
        mode: ranked.mode,
        candidates,
        returned: tools.len() as u32,
        tool_tokens: packing.tokens,
        omitted_for_budget: packing.omitted_for_budget as u32,
        omitted_for_side_effect: ranked.omitted_for_side_effect,
        omitted_for_top_k: packing.omitted_for_top_k as u32,
        hydrated_integrations,
        degraded: degradations.first().copied(),
        visibility: Visibility {
            mode: "filtered",
            entitled_integrations: ranked.entitled_integrations,
            candidates_before_filter: candidates
                + ranked.omitted_for_side_effect
                + ranked.omitted_not_connected,
            candidates_after_filter: candidates,
        },
        omitted_not_connected: ranked.omitted_not_connected,
        near_misses,
        partial: !ranked.failed_integrations.is_empty(),
        failed_integrations: ranked.failed_integrations.clone(),
        degradations,
        ranking_model: ranked.ranking_model,
        matched: ranked.matched,
        rerank_outcome: ranked.rerank_outcome.as_str(),
    };
    if usage.partial {
        metrics::counter!(agentsearch_common::metrics::PARTIAL_ANSWERS, "search" => "tools")
            .increment(1);
    }
    (tools, usage)
}

pub(crate) fn sorted_unique<'a>(items: impl Iterator<Item = &'a String>) -> Vec<String> {
    let set: std::collections::BTreeSet<&String> = items.collect();
    set.into_iter().cloned().collect()
}

/// `SLACK_POST_MESSAGE`, `slack post message`, `slack.post-message` and `SlackPostMessage` all
/// normalise to `slack_post_message`.
fn normalise_name(text: &str) -> String {
    identifier_pieces(text).join("_")
}

/// [`normalise_name`] into `out` (cleared first), without allocating for ASCII names: a search
/// normalises every candidate's name.
fn normalise_name_into(text: &str, out: &mut String) {
    out.clear();
    each_piece(text, |start, end| {
        if !out.is_empty() {
            out.push('_');
        }
        let piece = &text[start..end];
        if piece.is_ascii() {
            out.extend(piece.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.push_str(&piece.to_lowercase());
        }
    });
}

/// Whether a word of a query looks like an identifier: it has `_` or `.` inside, or a capital
/// after its first letter (`SLACK_POST_MESSAGE`, `slack.post`, `createIssue`), and two pieces or
/// more.
fn identifier_like(word: &str) -> bool {
    let marked = word.contains('_')
        || word.contains('.')
        || word.chars().skip(1).any(|c| c.is_ascii_uppercase());
    marked && identifier_pieces(word).len() >= 2
}

/// The words of a query stripped of surrounding punctuation.
fn query_words(query: &str) -> impl Iterator<Item = &str> {
    query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
}

/// Names a query may be spelling out exactly: its identifier-like words, as written, upper-case and
/// lower-case snake. Plain prose gives none, so ordinary searches cost no lookup.
pub(crate) fn name_guesses(query: &str) -> Vec<String> {
    let mut guesses = Vec::new();
    for word in query_words(query).take(32) {
        if !identifier_like(word) || word.len() > 128 {
            continue;
        }
        let snake = normalise_name(word);
        for guess in [word.to_string(), snake.to_uppercase(), snake] {
            if !guess.is_empty() && !guesses.contains(&guess) {
                guesses.push(guess);
            }
        }
        if guesses.len() >= 9 {
            break;
        }
    }
    guesses
}

/// Tool names among `names` that the query names: the whole query or one of its words equals a
/// name once normalised, or the whole query is within a small edit distance of a long name
/// (a typo). In order of appearance in `names` (the ranking), at most 3.
pub(crate) fn named_tools<'a>(query: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let whole = normalise_name(query);
    if whole.is_empty() {
        return Vec::new();
    }
    let words: HashSet<String> = query_words(query)
        .filter(|w| identifier_like(w))
        .map(normalise_name)
        .collect();
    let mut exact = Vec::new();
    let mut near = Vec::new();
    let mut normalised = String::new();
    for name in names {
        normalise_name_into(name, &mut normalised);
        if normalised == whole || words.contains(&normalised) {
            exact.push(name.to_string());
        } else if normalised.len() >= 10
            && whole.len() >= 10
            && normalised.len().abs_diff(whole.len()) <= 2
            && strsim::levenshtein(&normalised, &whole) <= 2
        {
            near.push(name.to_string());
        }
    }
    if exact.is_empty() {
        near.truncate(1);
        return near;
    }
    exact.truncate(3);
    exact
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

    proptest::proptest! {
        /// The allocation-free normalisation is the pieces joined, for any text.
        #[test]
        fn names_normalise_in_place_as_their_pieces_joined(
            text in proptest::prop_oneof![
                "[a-zA-Z0-9_. -]{0,24}",
                "[A-Z]{0,4}[a-z0-9]{0,4}[A-Z_]{0,4}[a-z]{0,3}",
                "\\PC{0,16}",
            ]
        ) {
            let mut out = String::from("left over");
            normalise_name_into(&text, &mut out);
            proptest::prop_assert_eq!(out, normalise_name(&text));
        }
    }

    #[test]
    fn a_query_naming_a_tool_finds_it() {
        let names = [
            "SLACK_SEND_MESSAGE",
            "SLACK_POST_MESSAGE",
            "GMAIL_SEND_EMAIL",
        ];
        let named = |q: &str| named_tools(q, names.iter().copied());
        assert_eq!(named("SLACK_POST_MESSAGE"), ["SLACK_POST_MESSAGE"]);
        assert_eq!(named("slack post message"), ["SLACK_POST_MESSAGE"]);
        assert_eq!(named("slack.post-message"), ["SLACK_POST_MESSAGE"]);
        assert_eq!(named("SlackPostMessage"), ["SLACK_POST_MESSAGE"]);
        assert_eq!(
            named("use GMAIL_SEND_EMAIL to mail bob"),
            ["GMAIL_SEND_EMAIL"]
        );
        // A typo of a long name is near enough; prose is not a name.
        assert_eq!(named("SLACK_POST_MESAGE"), ["SLACK_POST_MESSAGE"]);
        assert!(named("post a message to a slack channel").is_empty());
        assert!(named("send").is_empty());
    }

    #[test]
    fn only_identifier_like_words_are_looked_up() {
        assert!(name_guesses("post a message to a slack channel").is_empty());
        assert_eq!(
            name_guesses("run SLACK_POST_MESSAGE now"),
            ["SLACK_POST_MESSAGE", "slack_post_message"]
        );
        assert_eq!(
            name_guesses("createIssue"),
            ["createIssue", "CREATE_ISSUE", "create_issue"]
        );
        // One plain word is prose, not a name.
        assert!(name_guesses("weather").is_empty());
        // Every word that is looked up can also be promoted.
        assert_eq!(
            named_tools("run gmailSend", ["GMAIL_SEND"].into_iter()),
            ["GMAIL_SEND"]
        );
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
