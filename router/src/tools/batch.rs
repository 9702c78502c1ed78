//! Multi-query tool search (`tools/search:batch`): up to [`MAX_QUERIES`] use cases ranked in
//! parallel, each with optional known fields, plus inline custom tools and toolkits that are ranked
//! with the catalog for this request only (never persisted). Primary tools are packed under one
//! budget across queries (or one per query), their schemas returned once each.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentsearch_common::shard::IndexedTool;
use agentsearch_common::tool::{MAX_SLUG_CHARS, SideEffect, ToolRecord};
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_fusion::BudgetScope;
use agentsearch_fusion::tokens::count_tokens;
use futures::future::join_all;
use serde::{Deserialize, Serialize};

use crate::Router;
use crate::request::RequestContext;
use crate::tools::api::Int;
use crate::tools::api::{
    MAX_QUERY_CHARS, MAX_TOOL_TOKENS, MAX_TOP_K, SearchError, ToolResult, ToolkitConnectionStatus,
    Trace, Usage, range, retrieval_mode, slugs,
};
pub use crate::tools::batch_request::{BatchQuery, BatchRequest, CustomTool, CustomToolkit};
use crate::tools::connections;
use crate::tools::plans::plan_match::RecommendedPlan;
use crate::tools::search::{
    Candidate, RankQuery, Ranked, TraceRecorder, query_result, sorted_unique,
};

pub const MAX_QUERIES: usize = 10;
pub const MAX_KNOWN_FIELDS_CHARS: usize = 500;
pub const MAX_CUSTOM_TOOLS: usize = 200;
pub const MAX_CUSTOM_NAME_CHARS: usize = 60;
/// Longest custom tool or toolkit description: what is embedded and shown to the LLM.
pub const MAX_CUSTOM_DESCRIPTION_CHARS: usize = 2048;
/// Longest display name of a custom tool or toolkit.
pub const MAX_CUSTOM_DISPLAY_NAME_CHARS: usize = 256;
/// Largest `inputSchema` or `outputSchema` of a custom tool, as compact JSON.
pub const MAX_CUSTOM_SCHEMA_BYTES: usize = 32 * 1024;
pub const DEFAULT_BATCH_TOP_K: u32 = 5;
pub const DEFAULT_RELATED_K: u32 = 5;
pub const MAX_RELATED_K: i64 = 20;
/// The integration of standalone custom tools: outside the catalog slug alphabet, so no catalog
/// integration can share it.
pub const LOCAL_INTEGRATION: &str = agentsearch_common::tool::INLINE_INTEGRATION;

/// A batch request as received (REST camelCase JSON; gRPC builds the same).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawBatch {
    pub queries: Option<Vec<RawBatchQuery>>,
    #[serde(alias = "top_k")]
    pub top_k: Option<Int>,
    #[serde(alias = "max_tool_tokens")]
    pub max_tool_tokens: Option<Int>,
    #[serde(alias = "budget_scope")]
    pub budget_scope: Option<String>,
    pub integrations: Option<Vec<String>>,
    pub categories: Option<Vec<String>>,
    #[serde(alias = "max_side_effect")]
    pub max_side_effect: Option<String>,
    #[serde(alias = "connected_only")]
    pub connected_only: Option<bool>,
    pub rerank: Option<bool>,
    #[serde(alias = "related_k")]
    pub related_k: Option<Int>,
    pub model: Option<String>,
    pub mode: Option<String>,
    #[serde(default, alias = "custom_tools")]
    pub custom_tools: Vec<RawCustomTool>,
    #[serde(default, alias = "custom_toolkits")]
    pub custom_toolkits: Vec<RawCustomToolkit>,
    /// The tool router's wrapper of the custom tools and toolkits; merged with the top-level ones.
    pub experimental: Option<RawExperimental>,
    #[serde(skip)]
    pub diagnostics: bool,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawExperimental {
    #[serde(default, alias = "custom_tools")]
    pub custom_tools: Vec<RawCustomTool>,
    #[serde(default, alias = "custom_toolkits")]
    pub custom_toolkits: Vec<RawCustomToolkit>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawBatchQuery {
    #[serde(alias = "use_case")]
    pub use_case: Option<String>,
    #[serde(alias = "known_fields")]
    pub known_fields: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCustomTool {
    pub slug: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(alias = "input_schema")]
    pub input_schema: Option<serde_json::Value>,
    #[serde(alias = "output_schema")]
    pub output_schema: Option<serde_json::Value>,
    #[serde(alias = "extends_toolkit")]
    pub extends_toolkit: Option<String>,
    pub preload: Option<bool>,
    #[serde(alias = "side_effect")]
    pub side_effect: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCustomToolkit {
    pub slug: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub preload: Option<bool>,
    #[serde(default)]
    pub tools: Vec<RawCustomTool>,
}

impl RawBatch {
    /// Checks every field; all violations are reported at once.
    pub fn validate(mut self, project_id: String) -> Result<BatchRequest> {
        let mut v: Vec<FieldViolation> = Vec::new();
        if let Some(experimental) = self.experimental.take() {
            self.custom_tools.extend(experimental.custom_tools);
            self.custom_toolkits.extend(experimental.custom_toolkits);
        }
        // Count before validating (validation tokenizes every tool).
        let custom_count = self.custom_tools.len()
            + self
                .custom_toolkits
                .iter()
                .map(|k| k.tools.len())
                .sum::<usize>();
        if custom_count > MAX_CUSTOM_TOOLS {
            return Err(Error::invalid(
                "customTools",
                format!(
                    "at most {MAX_CUSTOM_TOOLS} custom tools per request (with those of \
                     customToolkits), got {custom_count}"
                ),
            ));
        }
        let queries = match self.queries {
            None => {
                v.push(FieldViolation::new("queries", "is required"));
                Vec::new()
            }
            Some(q) if q.is_empty() || q.len() > MAX_QUERIES => {
                v.push(FieldViolation::new(
                    "queries",
                    format!("must have 1..{MAX_QUERIES} items, got {}", q.len()),
                ));
                Vec::new()
            }
            Some(q) => q
                .into_iter()
                .enumerate()
                .map(|(i, q)| validate_query(&mut v, i, q))
                .collect(),
        };
        let top_k = range(&mut v, "topK", self.top_k, 1, i64::from(MAX_TOP_K))
            .unwrap_or(DEFAULT_BATCH_TOP_K);
        let related_k = range(&mut v, "relatedK", self.related_k, 0, MAX_RELATED_K)
            .unwrap_or(DEFAULT_RELATED_K);
        let max_tool_tokens = range(
            &mut v,
            "maxToolTokens",
            self.max_tool_tokens,
            1,
            i64::from(MAX_TOOL_TOKENS),
        );
        let scope = match self.budget_scope.as_deref() {
            None | Some("union") => BudgetScope::Union,
            Some("per_query") => BudgetScope::PerQuery,
            Some(_) => {
                v.push(FieldViolation::new(
                    "budgetScope",
                    "must be union or per_query",
                ));
                BudgetScope::Union
            }
        };
        let integrations = slugs(&mut v, "integrations", self.integrations);
        let categories = slugs(&mut v, "categories", self.categories);
        let max_side_effect = match self.max_side_effect.as_deref() {
            None => None,
            Some(s @ ("read" | "write" | "delete" | "send")) => s.parse().ok(),
            Some(_) => {
                v.push(FieldViolation::new(
                    "maxSideEffect",
                    "must be one of read, write, delete, send",
                ));
                None
            }
        };
        let mode = retrieval_mode(&mut v, self.mode.as_deref());
        if let Some(model) = &self.model
            && model.chars().count() > 128
        {
            v.push(FieldViolation::new(
                "model",
                "must be at most 128 characters",
            ));
        }
        let mut custom = Vec::new();
        let mut toolkits = BTreeMap::new();
        for (i, tool) in self.custom_tools.into_iter().enumerate() {
            let path = format!("customTools[{i}]");
            if let Some(t) = validate_custom(&mut v, &path, None, tool) {
                custom.push(t);
            }
        }
        for (i, kit) in self.custom_toolkits.into_iter().enumerate() {
            let path = format!("customToolkits[{i}]");
            let slug = kit.slug.unwrap_or_default();
            if !is_custom_slug(&slug) {
                v.push(FieldViolation::new(
                    format!("{path}.slug"),
                    "is required: letters, digits, `_` and `-`",
                ));
            }
            display_name(&mut v, &format!("{path}.name"), kit.name.as_deref());
            let description = kit.description.unwrap_or_default();
            custom_description(&mut v, &format!("{path}.description"), &description);
            if kit.tools.is_empty() {
                v.push(FieldViolation::new(
                    format!("{path}.tools"),
                    "must have at least one tool",
                ));
            }
            let integration = slug.to_lowercase().replace('-', "_");
            if integration == LOCAL_INTEGRATION {
                v.push(FieldViolation::new(
                    format!("{path}.slug"),
                    format!(
                        "`{LOCAL_INTEGRATION}` is the toolkit of standalone custom tools: pick \
                         another slug"
                    ),
                ));
            }
            let kit_entry = CustomToolkit {
                path: path.clone(),
                description,
            };
            if toolkits.insert(integration.clone(), kit_entry).is_some() {
                v.push(FieldViolation::new(
                    format!("{path}.slug"),
                    "duplicates an earlier custom toolkit",
                ));
            }
            for (j, tool) in kit.tools.into_iter().enumerate() {
                let tool_path = format!("{path}.tools[{j}]");
                if tool.extends_toolkit.is_some() {
                    v.push(FieldViolation::new(
                        format!("{tool_path}.extendsToolkit"),
                        "is only for standalone custom tools",
                    ));
                }
                if let Some(t) = validate_custom(&mut v, &tool_path, Some(&slug), tool) {
                    custom.push(t);
                }
            }
        }
        let mut names: HashMap<&str, &str> = HashMap::new();
        for t in &custom {
            if let Some(first) = names.insert(t.record.name.as_str(), t.path.as_str()) {
                v.push(FieldViolation::new(
                    format!("{}.slug", t.path),
                    format!("makes the name {} that {first} already has", t.record.name),
                ));
            }
        }
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(BatchRequest {
            project_id,
            queries,
            top_k,
            related_k,
            max_tool_tokens,
            scope,
            integrations,
            categories,
            max_side_effect,
            connected_only: self.connected_only.unwrap_or(false),
            rerank: self.rerank.unwrap_or(true),
            diagnostics: self.diagnostics,
            mode,
            custom,
            toolkits,
        })
    }
}

fn validate_query(v: &mut Vec<FieldViolation>, i: usize, q: RawBatchQuery) -> BatchQuery {
    let use_case = q.use_case.unwrap_or_default();
    if use_case.trim().is_empty() {
        v.push(FieldViolation::new(
            format!("queries[{i}].useCase"),
            "is required and must not be empty",
        ));
    } else if use_case.chars().count() > MAX_QUERY_CHARS {
        v.push(FieldViolation::new(
            format!("queries[{i}].useCase"),
            format!("must be at most {MAX_QUERY_CHARS} characters"),
        ));
    }
    let known_fields = match q.known_fields.as_deref() {
        None => Vec::new(),
        Some(text) => match parse_known_fields(text) {
            Ok(fields) => fields,
            Err(issue) => {
                v.push(FieldViolation::new(
                    format!("queries[{i}].knownFields"),
                    issue,
                ));
                Vec::new()
            }
        },
    };
    BatchQuery {
        use_case,
        known_fields,
    }
}

/// Parses `key:value, key:value`: keys are identifiers (letters, digits, `_`, `.`, `-`); a value
/// runs to the next comma. An empty text is no fields.
pub fn parse_known_fields(text: &str) -> std::result::Result<Vec<(String, String)>, String> {
    if text.chars().count() > MAX_KNOWN_FIELDS_CHARS {
        return Err(format!(
            "must be at most {MAX_KNOWN_FIELDS_CHARS} characters"
        ));
    }
    let mut fields = Vec::new();
    for (n, piece) in text.split(',').enumerate() {
        let piece = piece.trim();
        if piece.is_empty() {
            if text.trim().is_empty() {
                continue;
            }
            return Err(format!(
                "pair {} is empty: expected `key:value, ...`",
                n + 1
            ));
        }
        let Some((key, value)) = piece.split_once(':') else {
            return Err(format!(
                "pair {} (`{}`) has no `:`: expected `key:value, ...`",
                n + 1,
                agentsearch_common::ids::truncate(piece, 40)
            ));
        };
        let key = key.trim();
        let ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !ok {
            return Err(format!(
                "pair {}: the key `{}` must be letters, digits, `_`, `.` or `-`",
                n + 1,
                agentsearch_common::ids::truncate(key, 40)
            ));
        }
        fields.push((key.to_string(), value.trim().to_string()));
    }
    Ok(fields)
}

/// A required display name of at most [`MAX_CUSTOM_DISPLAY_NAME_CHARS`] characters.
fn display_name(v: &mut Vec<FieldViolation>, field: &str, name: Option<&str>) {
    match name {
        Some(n) if !n.trim().is_empty() => {
            if n.chars().count() > MAX_CUSTOM_DISPLAY_NAME_CHARS {
                v.push(FieldViolation::new(
                    field,
                    format!("must be at most {MAX_CUSTOM_DISPLAY_NAME_CHARS} characters"),
                ));
            }
        }
        _ => v.push(FieldViolation::new(field, "is required")),
    }
}

/// A required description of at most [`MAX_CUSTOM_DESCRIPTION_CHARS`] characters.
fn custom_description(v: &mut Vec<FieldViolation>, field: &str, description: &str) {
    if description.trim().is_empty() {
        v.push(FieldViolation::new(field, "is required"));
    } else {
        let chars = description.chars().count();
        if chars > MAX_CUSTOM_DESCRIPTION_CHARS {
            v.push(FieldViolation::new(
                field,
                format!("must be at most {MAX_CUSTOM_DESCRIPTION_CHARS} characters, got {chars}"),
            ));
        }
    }
}

fn schema_size(v: &mut Vec<FieldViolation>, field: &str, bytes: usize) {
    if bytes > MAX_CUSTOM_SCHEMA_BYTES {
        v.push(FieldViolation::new(
            field,
            format!(
                "must be at most {} KiB as compact JSON, got {bytes} bytes",
                MAX_CUSTOM_SCHEMA_BYTES / 1024
            ),
        ));
    }
}

fn is_custom_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= MAX_SLUG_CHARS
        && slug
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn name_piece(slug: &str) -> String {
    slug.to_ascii_uppercase().replace('-', "_")
}

/// Validates one custom tool; `toolkit` is the slug of the custom toolkit holding it.
fn validate_custom(
    v: &mut Vec<FieldViolation>,
    path: &str,
    toolkit: Option<&str>,
    t: RawCustomTool,
) -> Option<CustomTool> {
    let before = v.len();
    let field = |name: &str| format!("{path}.{name}");
    let slug = t.slug.unwrap_or_default();
    if !is_custom_slug(&slug) {
        v.push(FieldViolation::new(
            field("slug"),
            "is required: letters, digits, `_` and `-`",
        ));
    }
    display_name(v, &field("name"), t.name.as_deref());
    let description = t.description.unwrap_or_default();
    custom_description(v, &field("description"), &description);
    let parameters = match &t.input_schema {
        Some(schema @ serde_json::Value::Object(map))
            if map.get("type").and_then(|t| t.as_str()) == Some("object")
                && map.get("properties").is_some_and(|p| p.is_object()) =>
        {
            let text = schema.to_string();
            schema_size(v, &field("inputSchema"), text.len());
            text
        }
        _ => {
            v.push(FieldViolation::new(
                field("inputSchema"),
                "is required: a JSON Schema object with `type: \"object\"` and `properties`",
            ));
            String::new()
        }
    };
    match &t.output_schema {
        Some(schema) if !schema.is_object() => v.push(FieldViolation::new(
            field("outputSchema"),
            "must be a JSON Schema object",
        )),
        Some(schema) => schema_size(v, &field("outputSchema"), schema.to_string().len()),
        None => {}
    }
    let side_effect = match t.side_effect.as_deref() {
        None => SideEffect::Unknown,
        Some(s) => match s.parse() {
            Ok(e) => e,
            Err(_) => {
                v.push(FieldViolation::new(
                    field("sideEffect"),
                    "must be one of read, write, delete, send, unknown",
                ));
                SideEffect::Unknown
            }
        },
    };
    let extends = match t.extends_toolkit {
        None => None,
        Some(kit) if is_custom_slug(&kit) && kit == kit.to_lowercase() => Some(kit),
        Some(_) => {
            v.push(FieldViolation::new(
                field("extendsToolkit"),
                "must be a catalog integration slug",
            ));
            None
        }
    };
    let (name, integration) = match (toolkit, &extends) {
        (Some(kit), _) => (
            format!("LOCAL_{}_{}", name_piece(kit), name_piece(&slug)),
            kit.to_lowercase().replace('-', "_"),
        ),
        (None, Some(kit)) => (
            format!("LOCAL_{}_{}", name_piece(kit), name_piece(&slug)),
            kit.clone(),
        ),
        (None, None) => (
            format!("LOCAL_{}", name_piece(&slug)),
            LOCAL_INTEGRATION.to_string(),
        ),
    };
    if name.len() > MAX_CUSTOM_NAME_CHARS {
        v.push(FieldViolation::new(
            field("slug"),
            format!(
                "makes the name {}, longer than {MAX_CUSTOM_NAME_CHARS} characters",
                agentsearch_common::ids::truncate(&name, crate::json::MAX_ECHOED_VALUE)
            ),
        ));
    }
    if v.len() > before {
        return None;
    }
    let mut record = ToolRecord {
        name,
        integration,
        category: "custom".into(),
        side_effect,
        description,
        parameters,
        tokens: 0,
    };
    record.tokens = count_tokens(&record.llm_definition_json());
    Some(CustomTool {
        path: path.to_string(),
        record,
        extends,
    })
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    /// False when any query failed.
    pub success: bool,
    /// `X out of Y searches failed, reasons: ...`; null when all succeeded.
    pub error: Option<String>,
    pub results: Vec<BatchResult>,
    pub toolkit_connection_statuses: Vec<ToolkitConnectionStatus>,
    /// Every primary tool once, by name.
    pub tool_schemas: BTreeMap<String, ToolResult>,
    pub usage: BatchUsage,
    pub time_info: TimeInfo,
    /// What the agent should do next: connect missing accounts, pick among several.
    pub next_steps_guidance: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    /// 1-based position of the query in the request.
    pub index: u32,
    pub use_case: String,
    pub primary_tool_slugs: Vec<String>,
    pub related_tool_slugs: Vec<String>,
    pub toolkits: Vec<String>,
    pub error: Option<String>,
    /// Parts of the catalog this query could not search.
    pub errors: Vec<SearchError>,
    /// The query's usage (absent when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A plan recorded for a similar use case (`recommendedPlanSteps`, `planId`, `difficulty`,
    /// `planNotes`, `planPitfalls`), when one is close enough; see [`crate::tools::plans::plan_match`].
    #[serde(flatten)]
    pub plan: Option<RecommendedPlan>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchUsage {
    /// `union` or `per_query`.
    pub budget_scope: &'static str,
    /// Distinct tools in `toolSchemas` and their tokens, counted once each.
    pub tools: u32,
    pub tool_tokens: u64,
    pub custom_tools: u32,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeInfo {
    pub current_time_utc: String,
    pub current_time_utc_epoch_seconds: i64,
    pub message: String,
}

impl Router {
    pub async fn search_batch(
        &self,
        req: BatchRequest,
        ctx: &RequestContext,
    ) -> Result<BatchResponse> {
        let started = Instant::now() - ctx.auth;
        let mut trace = TraceRecorder::new(started, req.diagnostics);
        trace.step("auth");
        let user = ctx.user.as_deref();
        connections::check_connected_only(req.connected_only, user)?;
        let rows = self.user_connections(&req.project_id, user).await?;
        let placements = self.placements(&req.project_id).await?;
        let catalog: HashSet<&str> = placements.iter().map(|p| p.integration.as_str()).collect();
        let mut v = Vec::new();
        for t in &req.custom {
            if let Some(kit) = &t.extends
                && !catalog.contains(kit.as_str())
            {
                v.push(FieldViolation::new(
                    format!("{}.extendsToolkit", t.path),
                    format!("the catalog has no integration `{kit}`"),
                ));
            }
        }
        for (slug, kit) in &req.toolkits {
            if catalog.contains(slug.as_str()) {
                v.push(FieldViolation::new(
                    format!("{}.slug", kit.path),
                    format!("`{slug}` is a catalog integration: pick another slug"),
                ));
            }
        }
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        // Custom tools need no connection unless they extend a catalog integration.
        let mut connected = connections::connected(&rows);
        connected.extend(req.toolkits.keys().cloned());
        connected.insert(LOCAL_INTEGRATION.to_string());
        trace.step("connections");

        let inline = self.embed_custom(&req.custom).await?;
        if !inline.is_empty() {
            trace.step("embed_custom");
        }
        let window = req.top_k as usize;
        let texts: Vec<String> = req.queries.iter().map(BatchQuery::search_text).collect();
        let runs = req.queries.iter().enumerate().map(|(i, _)| {
            let query = RankQuery {
                project_id: &req.project_id,
                query: &texts[i],
                integrations: &req.integrations,
                categories: &req.categories,
                max_side_effect: req.max_side_effect,
                connected: req.connected_only.then_some(&connected),
                window,
                mode: req.mode,
                diagnostics: req.diagnostics,
                inline: &inline,
                vector: None,
                structured: None,
                rerank: req.rerank,
            };
            let mut query_trace = TraceRecorder::new(Instant::now(), req.diagnostics);
            async move {
                let ranked = self.rank(&query, &ctx.request_id, &mut query_trace).await;
                (ranked, query_trace.finish())
            }
        });
        // The project's plans are read while the queries rank.
        let plans_read = async {
            if self.settings.plans.enabled {
                self.project_plans(&req.project_id).await
            } else {
                None
            }
        };
        let (outcomes, plans) = tokio::join!(join_all(runs), plans_read);
        let mut ranked: Vec<Option<Ranked>> = Vec::new();
        let mut failures: Vec<(usize, String)> = Vec::new();
        for (i, (outcome, query_trace)) in outcomes.into_iter().enumerate() {
            for step in query_trace.steps {
                trace.push(
                    &format!("q{}:{}", i + 1, step.label),
                    Duration::from_secs_f64(step.duration_ms / 1e3),
                );
            }
            match outcome {
                Ok(r) => ranked.push(Some(r)),
                Err(err) => {
                    failures.push((i, err.to_string()));
                    ranked.push(None);
                }
            }
        }
        trace.last = Instant::now();
        let has_plans = plans.as_ref().is_some_and(|p| !p.is_empty());
        let deadline = started + Duration::from_millis(self.settings.search.deadline_ms);
        let mut recommended = self
            .recommend_plans(plans, &req, &connected, &ranked, &ctx.request_id, deadline)
            .await;
        if has_plans {
            trace.step("plans");
        }

        let empty: Vec<Candidate> = Vec::new();
        let pools: Vec<&Vec<Candidate>> = ranked
            .iter()
            .map(|r| r.as_ref().map_or(&empty, |r| &r.candidates))
            .collect();
        let limits = vec![window; pools.len()];
        let (packing, shaped) = self
            .pack_shaped(
                &req.project_id,
                user,
                &pools,
                &limits,
                req.max_tool_tokens.map(u64::from),
                req.scope,
                (&ctx.request_id, deadline),
                &mut trace,
            )
            .await?;

        let mut tool_schemas: BTreeMap<String, ToolResult> = BTreeMap::new();
        let mut results = Vec::with_capacity(req.queries.len());
        let mut mentioned: BTreeSet<String> = BTreeSet::new();
        for (i, query) in req.queries.iter().enumerate() {
            let Some(r) = &ranked[i] else {
                let error = failures
                    .iter()
                    .find(|(q, _)| *q == i)
                    .map(|(_, e)| e.clone());
                results.push(BatchResult {
                    index: i as u32 + 1,
                    use_case: query.use_case.clone(),
                    primary_tool_slugs: Vec::new(),
                    related_tool_slugs: Vec::new(),
                    toolkits: Vec::new(),
                    error,
                    errors: Vec::new(),
                    usage: None,
                    plan: None,
                });
                continue;
            };
            let packed = &packing.queries[i];
            let (tools, query_usage) = query_result(r, packed, &shaped);
            let primary: Vec<String> = tools.iter().map(|t| t.intent_name.clone()).collect();
            // Related tools are further candidates of the primary tools' integrations, so the
            // query's toolkits are those of its primary tools.
            let toolkits = sorted_unique(tools.iter().map(|t| &t.integration));
            let selected: HashSet<usize> = packed.selected.iter().copied().collect();
            let related: Vec<String> = r
                .candidates
                .iter()
                .enumerate()
                .filter(|(pos, c)| {
                    !selected.contains(pos) && toolkits.contains(&c.record.integration)
                })
                .take(req.related_k as usize)
                .map(|(_, c)| c.record.name.clone())
                .collect();
            mentioned.extend(toolkits.iter().cloned());
            for tool in tools {
                tool_schemas
                    .entry(tool.intent_name.clone())
                    .and_modify(|t| {
                        // The best placement across queries, with the rerank score that came
                        // with it.
                        if tool.relevancy > t.relevancy {
                            t.relevancy = tool.relevancy;
                            t.rerank_score = tool.rerank_score;
                        }
                    })
                    .or_insert(tool);
            }
            results.push(BatchResult {
                index: i as u32 + 1,
                use_case: query.use_case.clone(),
                primary_tool_slugs: primary,
                related_tool_slugs: related,
                toolkits,
                error: None,
                errors: r.errors.clone(),
                usage: Some(query_usage),
                plan: recommended[i].take(),
            });
        }
        trace.step("assemble");

        let mut statuses = self.batch_statuses(&req, &rows, &mentioned);
        self.describe_toolkits(&req.project_id, &mut statuses).await;
        let error = (!failures.is_empty()).then(|| {
            format!(
                "{} out of {} searches failed, reasons: {}",
                failures.len(),
                req.queries.len(),
                failures
                    .iter()
                    .map(|(i, e)| format!("query {}: {e}", i + 1))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        });
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let next_steps_guidance = guidance(&statuses);
        Ok(BatchResponse {
            next_steps_guidance,
            success: failures.is_empty(),
            error,
            results,
            toolkit_connection_statuses: statuses,
            usage: BatchUsage {
                budget_scope: match req.scope {
                    BudgetScope::Union => "union",
                    BudgetScope::PerQuery => "per_query",
                },
                tools: tool_schemas.len() as u32,
                tool_tokens: tool_schemas.values().map(|t| u64::from(t.tokens)).sum(),
                custom_tools: req.custom.len() as u32,
            },
            tool_schemas,
            time_info: TimeInfo {
                current_time_utc: connections::rfc3339(now.as_millis() as i64),
                current_time_utc_epoch_seconds: now.as_secs() as i64,
                message: "Times are UTC; convert to the user's time zone before showing or \
                          passing them to tools that expect local time."
                    .into(),
            },
            trace: req.diagnostics.then(|| trace.finish()),
        })
    }

    /// Embeds the custom tools' texts (cached by text, so tools sent on every request are embedded
    /// once) and returns them ready for a shard's in-memory index.
    async fn embed_custom(&self, custom: &[CustomTool]) -> Result<Vec<IndexedTool>> {
        if custom.is_empty() {
            return Ok(Vec::new());
        }
        let texts: Vec<String> = custom.iter().map(|t| t.record.embedding_text()).collect();
        let embedder = self.embedder.clone();
        let batch_size = self.settings.embed_batch_size;
        // Bounded forward passes; tools sent before (an agent resends its custom tools with every
        // request) come from the embedding cache.
        let (vectors, _cached) = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed_many(&refs, batch_size)
        })
        .await
        .map_err(|e| Error::Internal(format!("embedding task: {e}")))?
        .map_err(|e| Error::Unavailable(format!("embedding the custom tools failed: {e}")))?;
        Ok(custom
            .iter()
            .zip(vectors)
            .map(|(t, v)| IndexedTool {
                record: t.record.clone(),
                vector: v.to_vec(),
            })
            .collect())
    }

    /// Connection statuses of every toolkit the results mention: custom toolkits and standalone
    /// custom tools need none; catalog integrations show the caller's accounts.
    fn batch_statuses(
        &self,
        req: &BatchRequest,
        rows: &[agentsearch_store::ConnectionRow],
        mentioned: &BTreeSet<String>,
    ) -> Vec<ToolkitConnectionStatus> {
        let catalog: Vec<String> = mentioned
            .iter()
            .filter(|k| !req.toolkits.contains_key(*k) && k.as_str() != LOCAL_INTEGRATION)
            .cloned()
            .collect();
        let mut statuses = connections::statuses_for(rows, &catalog);
        for kit in mentioned
            .iter()
            .filter(|k| req.toolkits.contains_key(*k) || k.as_str() == LOCAL_INTEGRATION)
        {
            statuses.push(ToolkitConnectionStatus {
                current_user_info: None,
                toolkit: kit.clone(),
                description: req
                    .toolkits
                    .get(kit)
                    .map(|k| k.description.clone())
                    .unwrap_or_else(|| "Standalone custom tools of this request.".into()),
                has_active_connection: true,
                accounts: Vec::new(),
                account_selection: None,
                status_message: "No connection needed: custom tools run without authentication."
                    .into(),
                account_type: None,
            });
        }
        statuses.sort_by(|a, b| a.toolkit.cmp(&b.toolkit));
        statuses
    }
}

/// One step per toolkit that needs the user: connect it, or pick one of several accounts.
fn guidance(statuses: &[ToolkitConnectionStatus]) -> Vec<String> {
    let mut steps: Vec<String> = statuses
        .iter()
        .filter_map(|s| {
            if !s.has_active_connection {
                Some(format!(
                    "Ask the user to connect {} before running its tools.",
                    s.toolkit
                ))
            } else if s.account_selection.is_some() {
                Some(format!(
                    "The user has several {} accounts: name the account to use when running its tools.",
                    s.toolkit
                ))
            } else {
                None
            }
        })
        .collect();
    steps.push(
        "Run primary tools first; related tools are alternatives and follow-ups. Ask the user \
         before running any tool whose approvalRequired is true."
            .into(),
    );
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fields_parse_and_name_the_bad_pair() {
        assert_eq!(
            parse_known_fields("channel_name:general, user_email:john@example.com").unwrap(),
            [
                ("channel_name".to_string(), "general".to_string()),
                ("user_email".to_string(), "john@example.com".to_string())
            ]
        );
        assert!(parse_known_fields("").unwrap().is_empty());
        assert!(parse_known_fields("a:1, b").unwrap_err().contains("pair 2"));
        assert!(parse_known_fields("a b:1").unwrap_err().contains("key"));
        assert!(parse_known_fields(&"k:v,".repeat(200)).is_err());
    }

    fn tool(slug: &str) -> RawCustomTool {
        RawCustomTool {
            slug: Some(slug.into()),
            name: Some("Lookup".into()),
            description: Some("Looks up an order by id.".into()),
            input_schema: Some(serde_json::json!({
                "type": "object", "properties": {"order_id": {"type": "string"}}
            })),
            ..Default::default()
        }
    }

    fn violations(raw: RawBatch) -> Vec<(String, String)> {
        match raw.validate("p".into()) {
            Err(Error::InvalidArgument { violations, .. }) => {
                violations.into_iter().map(|v| (v.field, v.issue)).collect()
            }
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    fn one_query() -> Option<Vec<RawBatchQuery>> {
        Some(vec![RawBatchQuery {
            use_case: Some("find an order".into()),
            known_fields: None,
        }])
    }

    #[test]
    fn custom_tools_over_the_size_caps_are_refused_by_field() {
        let long = "word ".repeat(MAX_CUSTOM_DESCRIPTION_CHARS / 5 + 1);
        let wide: serde_json::Map<String, serde_json::Value> = (0..2000)
            .map(|i| (format!("p{i:05}"), serde_json::json!({"type": "string"})))
            .collect();
        let raw = RawBatch {
            queries: one_query(),
            custom_tools: vec![
                RawCustomTool {
                    description: Some(long.clone()),
                    ..tool("a")
                },
                RawCustomTool {
                    input_schema: Some(serde_json::json!({"type": "object", "properties": wide})),
                    output_schema: Some(serde_json::json!({"type": "object", "properties": wide})),
                    name: Some("n".repeat(MAX_CUSTOM_DISPLAY_NAME_CHARS + 1)),
                    ..tool("b")
                },
            ],
            custom_toolkits: vec![RawCustomToolkit {
                slug: Some("crm".into()),
                name: Some("CRM".into()),
                description: Some(long),
                preload: None,
                tools: vec![tool("c")],
            }],
            ..Default::default()
        };
        let got = violations(raw);
        let fields: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "customTools[0].description",
                "customTools[1].name",
                "customTools[1].inputSchema",
                "customTools[1].outputSchema",
                "customToolkits[0].description",
            ]
        );
        assert!(
            got[0].1.starts_with("must be at most 2048 characters, got"),
            "{}",
            got[0].1
        );
        assert!(
            got[2].1.starts_with("must be at most 32 KiB"),
            "{}",
            got[2].1
        );

        // At the caps, accepted.
        let raw = RawBatch {
            queries: one_query(),
            custom_tools: vec![RawCustomTool {
                description: Some("é".repeat(MAX_CUSTOM_DESCRIPTION_CHARS)),
                name: Some("n".repeat(MAX_CUSTOM_DISPLAY_NAME_CHARS)),
                ..tool("a")
            }],
            ..Default::default()
        };
        assert_eq!(raw.validate("p".into()).unwrap().custom.len(), 1);
    }

    #[test]
    fn a_custom_toolkit_cannot_take_the_standalone_toolkit() {
        for slug in ["_local", "-local", "_LOCAL"] {
            let raw = RawBatch {
                queries: one_query(),
                custom_toolkits: vec![RawCustomToolkit {
                    slug: Some(slug.into()),
                    name: Some("Mine".into()),
                    description: Some("Mine".into()),
                    preload: None,
                    tools: vec![tool("c")],
                }],
                ..Default::default()
            };
            let got = violations(raw);
            assert_eq!(got[0].0, "customToolkits[0].slug", "{slug}");
            assert!(got[0].1.contains("standalone custom tools"), "{}", got[0].1);
        }
        // `local` itself is an ordinary slug now (a catalog may have it too).
        let raw = RawBatch {
            queries: one_query(),
            custom_toolkits: vec![RawCustomToolkit {
                slug: Some("local".into()),
                name: Some("Mine".into()),
                description: Some("Mine".into()),
                preload: None,
                tools: vec![tool("c")],
            }],
            ..Default::default()
        };
        assert!(raw.validate("p".into()).is_ok());
    }

    #[test]
    fn custom_tools_get_local_names_and_every_bad_field_is_named() {
        let raw = RawBatch {
            queries: Some(vec![RawBatchQuery {
                use_case: Some("find an order".into()),
                known_fields: None,
            }]),
            custom_tools: vec![
                tool("order-lookup"),
                RawCustomTool {
                    extends_toolkit: Some("shopify".into()),
                    ..tool("refund")
                },
            ],
            custom_toolkits: vec![RawCustomToolkit {
                slug: Some("crm".into()),
                name: Some("In-house CRM".into()),
                description: Some("Our CRM".into()),
                preload: None,
                tools: vec![tool("find_contact")],
            }],
            ..Default::default()
        };
        let req = raw.validate("p".into()).unwrap();
        let names: Vec<(&str, &str)> = req
            .custom
            .iter()
            .map(|t| (t.record.name.as_str(), t.record.integration.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("LOCAL_ORDER_LOOKUP", "_local"),
                ("LOCAL_SHOPIFY_REFUND", "shopify"),
                ("LOCAL_CRM_FIND_CONTACT", "crm")
            ]
        );
        assert!(req.custom.iter().all(|t| t.record.tokens > 0));
        assert_eq!(req.top_k, DEFAULT_BATCH_TOP_K);

        let bad = RawBatch {
            queries: Some(vec![RawBatchQuery {
                use_case: Some(" ".into()),
                known_fields: Some("nokey".into()),
            }]),
            budget_scope: Some("all".into()),
            custom_tools: vec![RawCustomTool {
                input_schema: Some(serde_json::json!({"type": "string"})),
                ..tool("x y")
            }],
            ..Default::default()
        };
        let Error::InvalidArgument { violations, .. } = bad.validate("p".into()).unwrap_err()
        else {
            panic!()
        };
        let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "queries[0].useCase",
                "queries[0].knownFields",
                "budgetScope",
                "customTools[0].slug",
                "customTools[0].inputSchema"
            ]
        );
        let too_many = RawBatch {
            queries: Some((0..11).map(|_| RawBatchQuery::default()).collect()),
            ..Default::default()
        };
        assert!(too_many.validate("p".into()).is_err());
    }
}
