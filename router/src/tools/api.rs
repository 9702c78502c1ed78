//! The public tool-search request and response, validated and in domain form. REST (camelCase
//! JSON) and gRPC both build a [`RawSearch`] and call [`RawSearch::validate`], so the rules and the
//! field names in errors are the same on both.

use std::fmt;

use agentsearch_common::shard::RetrievalMode;
use agentsearch_common::tool::{MAX_SLUG_CHARS, SideEffect};
use agentsearch_common::{Error, FieldViolation};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub use crate::json::Int;

pub const MAX_QUERY_CHARS: usize = 1024;
pub const MAX_TOP_K: u32 = 50;
pub const MAX_TOOL_TOKENS: u32 = 100_000;
pub const MAX_FILTER_ITEMS: usize = 500;
/// Values a `queryEmbedding.vector` may have (far above any embedding model's dimension).
pub const MAX_QUERY_VECTOR_VALUES: usize = 4096;

/// A query embedding the caller computed with the deployment's model, as sent: used by the dense
/// retriever instead of embedding `query` (which the lexical retriever still searches).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "QueryEmbedding")]
pub struct RawQueryEmbedding {
    /// The model that made `vector`; must be the deployment's.
    pub model: Option<String>,
    pub vector: Option<Vec<f64>>,
}

/// A checked query embedding: finite values, not all zero, scaled to unit length. Its model and
/// dimension are checked against the deployment's by the router.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryEmbedding {
    pub model: String,
    pub vector: Vec<f32>,
}

/// Checks a `queryEmbedding` (`field` names it in violations) and scales it to unit length.
pub(crate) fn query_embedding(
    v: &mut Vec<FieldViolation>,
    field: &str,
    raw: Option<RawQueryEmbedding>,
) -> Option<QueryEmbedding> {
    let raw = raw?;
    let model = match raw.model {
        Some(m) if !m.trim().is_empty() => Some(m),
        _ => {
            v.push(FieldViolation::new(
                format!("{field}.model"),
                "is required: the model that computed the vector",
            ));
            None
        }
    };
    let vector = match raw.vector {
        None => {
            v.push(FieldViolation::new(
                format!("{field}.vector"),
                "is required",
            ));
            None
        }
        Some(values) if values.is_empty() || values.len() > MAX_QUERY_VECTOR_VALUES => {
            v.push(FieldViolation::new(
                format!("{field}.vector"),
                format!(
                    "must have 1 to {MAX_QUERY_VECTOR_VALUES} values, got {}",
                    values.len()
                ),
            ));
            None
        }
        Some(values) => {
            let vector: Vec<f32> = values.iter().map(|&x| x as f32).collect();
            match vector.iter().position(|x| !x.is_finite()) {
                Some(i) => {
                    v.push(FieldViolation::new(
                        format!("{field}.vector[{i}]"),
                        "must be a finite number",
                    ));
                    None
                }
                None => {
                    let norm = vector
                        .iter()
                        .map(|&x| f64::from(x) * f64::from(x))
                        .sum::<f64>()
                        .sqrt();
                    if norm > 1e-12 && norm.is_finite() {
                        Some(
                            vector
                                .iter()
                                .map(|&x| (f64::from(x) / norm) as f32)
                                .collect(),
                        )
                    } else {
                        v.push(FieldViolation::new(
                            format!("{field}.vector"),
                            "must not be all zeros",
                        ));
                        None
                    }
                }
            }
        }
    };
    Some(QueryEmbedding {
        model: model?,
        vector: vector?,
    })
}

/// Request fields as received, before validation; `None` = absent.
#[derive(Debug, Default)]
pub struct RawSearch {
    pub query: Option<String>,
    pub top_k: Option<Int>,
    pub max_tool_tokens: Option<Int>,
    pub integrations: Option<Vec<String>>,
    pub categories: Option<Vec<String>>,
    pub max_side_effect: Option<String>,
    pub connected_only: Option<bool>,
    pub rerank: Option<bool>,
    pub mode: Option<String>,
    pub diagnostics: bool,
    pub query_embedding: Option<RawQueryEmbedding>,
    /// `query` sent as a query JSON document rather than a string.
    pub query_document: Option<serde_json::Value>,
}

/// A validated tool search.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSearchRequest {
    pub project_id: String,
    pub query: String,
    pub top_k: Option<u32>,
    pub max_tool_tokens: Option<u32>,
    pub integrations: Vec<String>,
    pub categories: Vec<String>,
    pub max_side_effect: Option<SideEffect>,
    /// Only integrations the caller has an active connection for.
    pub connected_only: bool,
    pub rerank: bool,
    pub diagnostics: bool,
    pub mode: RetrievalMode,
    /// The caller's query embedding, if sent.
    pub query_embedding: Option<QueryEmbedding>,
    /// Set when `query` was a query JSON document (then `query` is its `q`, possibly empty).
    pub typed: Option<TypedQuery>,
}

/// What a query JSON document adds to a search, beyond its `q` and `limit`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypedQuery {
    /// `{"v": 1, "query": ..., "filter": ..., "countExactly": ..., "highlight": ...}`, as the
    /// shards execute it.
    pub structured: String,
    /// Results skipped before the first returned.
    pub offset: u32,
    pub count_exactly: bool,
    pub highlight: bool,
}

impl TypedQuery {
    /// Parses a tool search's query JSON document (paths under the request's `query`): its `q`,
    /// its `limit`, and the rest.
    pub fn parse_tools(
        document: &serde_json::Value,
    ) -> Result<(Option<String>, Option<u32>, TypedQuery), FieldViolation> {
        Self::parse(agentsearch_query::Catalog::tools(), document)
    }

    /// Parses a query JSON document against `catalog` (paths under the request's `query`): its
    /// `q` (when it has words), its `limit`, and the rest.
    pub fn parse(
        catalog: &agentsearch_query::Catalog,
        document: &serde_json::Value,
    ) -> Result<(Option<String>, Option<u32>, TypedQuery), FieldViolation> {
        let doc = agentsearch_query::parse(catalog, document, "query")
            .map_err(|e| FieldViolation::new(e.path, e.message))?;
        let mut structured = serde_json::json!({"v": agentsearch_query::limits::VERSION});
        for key in ["query", "filter", "countExactly", "highlight"] {
            if let Some(value) = document.get(key) {
                structured[key] = value.clone();
            }
        }
        Ok((
            doc.q.filter(|q| !q.trim().is_empty()),
            doc.limit,
            TypedQuery {
                structured: structured.to_string(),
                offset: doc.offset,
                count_exactly: doc.count_exactly,
                highlight: doc.highlight,
            },
        ))
    }
}

impl RawSearch {
    /// Checks every field; all violations are reported at once.
    pub fn validate(self, project_id: String) -> Result<ToolSearchRequest, Error> {
        let mut v: Vec<FieldViolation> = Vec::new();
        let mut typed = None;
        let mut limit = None;
        let query = match (self.query, self.query_document) {
            (_, Some(document)) => match TypedQuery::parse_tools(&document) {
                Ok((q, l, t)) => {
                    typed = Some(t);
                    limit = l;
                    q.unwrap_or_default()
                }
                Err(violation) => {
                    v.push(violation);
                    String::new()
                }
            },
            (query, None) => query_text(&mut v, query, "query should not be empty"),
        };
        let mut top_k = range(&mut v, "topK", self.top_k, 1, i64::from(MAX_TOP_K));
        if let Some(limit) = limit {
            if top_k.is_some() {
                v.push(FieldViolation::new(
                    "topK",
                    "give `topK` or the query document's `limit`, not both",
                ));
            }
            top_k = Some(limit);
        }
        let max_tool_tokens = range(
            &mut v,
            "maxToolTokens",
            self.max_tool_tokens,
            1,
            i64::from(MAX_TOOL_TOKENS),
        );
        let integrations = slugs(&mut v, "integrations", self.integrations);
        let categories = slugs(&mut v, "categories", self.categories);
        let max_side_effect = match self.max_side_effect.as_deref() {
            None => None,
            Some(s @ ("read" | "write" | "delete" | "send")) => s.parse().ok(),
            Some(other) => {
                v.push(FieldViolation::new(
                    "maxSideEffect",
                    format!(
                        "must be one of read, write, delete, send; got `{}`",
                        agentsearch_common::ids::truncate(other, 32)
                    ),
                ));
                None
            }
        };
        let mode = retrieval_mode(&mut v, self.mode.as_deref());
        let query_embedding = query_embedding(&mut v, "queryEmbedding", self.query_embedding);
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(ToolSearchRequest {
            project_id,
            query,
            top_k,
            max_tool_tokens,
            integrations,
            categories,
            max_side_effect,
            connected_only: self.connected_only.unwrap_or(false),
            rerank: self.rerank.unwrap_or(true),
            diagnostics: self.diagnostics,
            mode,
            query_embedding,
            typed,
        })
    }
}

/// A string `query`: required, not blank (`blank` says so), at most [`MAX_QUERY_CHARS`].
pub(crate) fn query_text(
    v: &mut Vec<FieldViolation>,
    query: Option<String>,
    blank: &str,
) -> String {
    match query {
        None => {
            v.push(FieldViolation::new("query", "is required"));
            String::new()
        }
        Some(q) if q.trim().is_empty() => {
            v.push(FieldViolation::new("query", blank));
            q
        }
        Some(q) if q.chars().count() > MAX_QUERY_CHARS => {
            v.push(FieldViolation::new(
                "query",
                format!(
                    "must be at most {MAX_QUERY_CHARS} characters, got {}",
                    q.chars().count()
                ),
            ));
            q
        }
        Some(q) => q,
    }
}

/// The evaluation-only `mode` field: hybrid (default), lexical or dense.
pub(crate) fn retrieval_mode(v: &mut Vec<FieldViolation>, mode: Option<&str>) -> RetrievalMode {
    match mode {
        None | Some("hybrid") => RetrievalMode::Hybrid,
        Some("lexical") => RetrievalMode::Lexical,
        Some("dense") => RetrievalMode::Dense,
        Some(other) => {
            v.push(FieldViolation::new(
                "mode",
                format!(
                    "must be one of hybrid, lexical, dense; got `{}`",
                    agentsearch_common::ids::truncate(other, 32)
                ),
            ));
            RetrievalMode::Hybrid
        }
    }
}

/// Reads any JSON integer; other values are refused as by `i64` (`invalid type: floating point
/// `2.5`, expected i64`), so the messages of other mistakes stay the same.
impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntVisitor)
    }
}

/// Documented as a JSON integer (the range checks come after parsing).
impl schemars::JsonSchema for Int {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Integer".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "integer"})
    }
}

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = Int;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("i64")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Int, E> {
        Ok(Int::Exact(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Int, E> {
        Ok(Int::Exact(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Int, E> {
        Int::beyond_64_bits(value).ok_or_else(|| E::invalid_type(Unexpected::Float(value), &self))
    }
}

/// A required `u32` field (`deserialize_with`): the messages of `u32`, except that an integer
/// beyond 64 bits is called one rather than a floating-point number.
pub(crate) fn u32_field<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    deserializer.deserialize_u32(U32Visitor)
}

struct U32Visitor;

impl Visitor<'_> for U32Visitor {
    type Value = u32;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("u32")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<u32, E> {
        u32::try_from(value).map_err(|_| E::invalid_value(Unexpected::Signed(value), &self))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<u32, E> {
        u32::try_from(value).map_err(|_| E::invalid_value(Unexpected::Unsigned(value), &self))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<u32, E> {
        Err(match Int::beyond_64_bits(value) {
            Some(beyond) => E::invalid_value(Unexpected::Other(&beyond.to_string()), &self),
            None => E::invalid_type(Unexpected::Float(value), &self),
        })
    }
}

/// Checks an integer field against `min..=max`, naming the value as sent when it is not.
pub(crate) fn range(
    v: &mut Vec<FieldViolation>,
    field: &str,
    value: Option<Int>,
    min: i64,
    max: i64,
) -> Option<u32> {
    let value = value?;
    match value.within(min, max) {
        Some(n) => Some(n as u32),
        None => {
            v.push(FieldViolation::new(
                field,
                format!("must be between {min} and {max}, got {value}"),
            ));
            None
        }
    }
}

pub(crate) fn slugs(
    v: &mut Vec<FieldViolation>,
    field: &str,
    values: Option<Vec<String>>,
) -> Vec<String> {
    let Some(values) = values else {
        return Vec::new();
    };
    if values.is_empty() {
        v.push(FieldViolation::new(
            field,
            "must not be empty when present; omit it to search all",
        ));
    }
    if values.len() > MAX_FILTER_ITEMS {
        v.push(FieldViolation::new(
            field,
            format!("must have at most {MAX_FILTER_ITEMS} items"),
        ));
        return Vec::new();
    }
    for (i, s) in values.iter().enumerate() {
        let ok = !s.is_empty()
            && s.len() <= MAX_SLUG_CHARS
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !ok {
            v.push(FieldViolation::new(
                format!("{field}[{i}]"),
                format!(
                    "must be a lowercase slug [a-z0-9_-], got `{}`",
                    agentsearch_common::ids::truncate(s, 64)
                ),
            ));
        }
    }
    let mut out = values;
    out.sort();
    out.dedup();
    out
}

/// The response of a tool search.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSearchResponse {
    pub tools: Vec<ToolResult>,
    pub search_query: String,
    pub errors: Vec<SearchError>,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// The caller's connection status for the integration of every returned tool.
    pub toolkit_connection_statuses: Vec<ToolkitConnectionStatus>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub intent_name: String,
    pub integration: String,
    pub category: String,
    pub side_effect: SideEffect,
    pub approval_required: bool,
    /// `static`, or `hydrated` when the schema was hydrated for the caller.
    pub schema_source: &'static str,
    pub relevancy: f64,
    pub tool: ModelTool,
    /// Tokens of `tool` as returned (hydrated schemas are counted as hydrated).
    pub tokens: u32,
    /// The generation of the integration's index the tool was ranked from (0 for inline tools).
    pub catalog_version: u64,
    /// Where each retriever ranked the tool; only with diagnostics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explain>,
    /// The matched fragments of the description, matched words in `<em>`; only when a query JSON
    /// document asks for `highlight` and something matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highlights: Option<Vec<String>>,
    /// The reranker's score; null when the tool was not reranked.
    pub rerank_score: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Explain {
    pub lexical: Option<RetrieverHit>,
    pub dense: Option<RetrieverHit>,
}

#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct RetrieverHit {
    pub rank: u32,
    pub score: f64,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ModelTool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionDefinition,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct FunctionDefinition {
    pub name: String,
    pub description: String,
    /// The stored JSON Schema, passed through verbatim.
    #[schemars(with = "serde_json::Value")]
    pub parameters: Box<RawValue>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SearchError {
    pub integration: String,
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub strategy: &'static str,
    /// Retrievers that ran: hybrid, lexical or dense.
    pub mode: &'static str,
    pub candidates: u32,
    pub returned: u32,
    pub tool_tokens: u64,
    pub omitted_for_budget: u32,
    pub omitted_for_side_effect: u32,
    pub omitted_for_top_k: u32,
    pub hydrated_integrations: Vec<String>,
    pub degraded: Option<&'static str>,
    pub visibility: Visibility,
    /// Candidates removed because the caller has no active connection to their integration.
    pub omitted_not_connected: u32,
    /// Up to 5 tools that ranked inside the result window but were removed by
    /// the side-effect ceiling, `connectedOnly` or the budget, best first.
    pub near_misses: Vec<NearMiss>,
    /// Some integrations in scope could not be searched: their tools are missing.
    pub partial: bool,
    pub failed_integrations: Vec<String>,
    /// Every degradation that applied, `degraded` first.
    pub degradations: Vec<&'static str>,
    /// The version of the project's ranking model, learned from its feedback, that fused the
    /// retrievers' lists; 0: the deployment's weights.
    pub ranking_model: u64,
    /// The exact number of tools in the caller's scope that satisfy a query JSON document's
    /// `query` and `filter`; only when it asks for `countExactly`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<u64>,
    /// `applied`, `failed_open`, `skipped_deadline`, `disabled_by_request` or
    /// `disabled_by_deployment`.
    pub rerank_outcome: &'static str,
}

pub const MAX_NEAR_MISSES: usize = 5;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NearMiss {
    pub intent_name: String,
    pub integration: String,
    /// `side_effect`, `not_connected` or `budget`.
    pub reason: &'static str,
    /// 1-based position in the ranking before the rule that removed it.
    pub rank: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
}

/// One integration's connection status for the caller (field names of the tool-router seed).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolkitConnectionStatus {
    pub toolkit: String,
    pub description: String,
    pub has_active_connection: bool,
    pub accounts: Vec<ConnectedAccount>,
    /// `required` when the caller has more than one active account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_selection: Option<&'static str>,
    pub status_message: String,
    /// Of the default account, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_type: Option<String>,
    /// The default account's `userInfo`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_user_info: Option<serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectedAccount {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_info: Option<serde_json::Value>,
    pub status: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub is_default: bool,
    pub account_type: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Visibility {
    pub mode: &'static str,
    pub entitled_integrations: u32,
    pub candidates_before_filter: u32,
    pub candidates_after_filter: u32,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    pub total_ms: f64,
    pub steps: Vec<TraceStep>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceStep {
    pub label: String,
    pub duration_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(err: Error) -> Vec<String> {
        match err {
            Error::InvalidArgument { violations, .. } => {
                violations.into_iter().map(|v| v.field).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_bad_field_is_named() {
        let raw = RawSearch {
            query: Some("  ".into()),
            top_k: Some(Int::Exact(51)),
            max_tool_tokens: Some(Int::Exact(0)),
            integrations: Some(vec!["Slack".into()]),
            categories: Some(vec![]),
            max_side_effect: Some("unknown".into()),
            mode: Some("fast".into()),
            ..Default::default()
        };
        assert_eq!(
            fields(raw.validate("p".into()).unwrap_err()),
            [
                "query",
                "topK",
                "maxToolTokens",
                "integrations[0]",
                "categories",
                "maxSideEffect",
                "mode"
            ]
        );
    }

    #[test]
    fn ranges_name_the_value_sent() {
        let mut v = Vec::new();
        assert_eq!(range(&mut v, "topK", Some(Int::Exact(50)), 1, 50), Some(50));
        assert_eq!(range(&mut v, "topK", None, 1, 50), None);
        assert!(v.is_empty());
        for (value, shown) in [
            (Int::Exact(u64::MAX.into()), "18446744073709551615"),
            (Int::Exact(i64::MIN.into()), "-9223372036854775808"),
            (Int::TooLarge, "an integer too large to represent"),
            (
                Int::TooNegative,
                "a negative integer too large to represent",
            ),
        ] {
            let mut v = Vec::new();
            assert_eq!(range(&mut v, "topK", Some(value), 1, 50), None);
            assert_eq!(v[0].issue, format!("must be between 1 and 50, got {shown}"));
        }
    }

    #[test]
    fn json_numbers_as_integers() {
        let number = |text: &str| serde_json::from_str::<serde_json::Number>(text).unwrap();
        assert_eq!(Int::from_json(&number("-3")), Some(Int::Exact(-3)));
        assert_eq!(
            Int::from_json(&number("18446744073709551615")),
            Some(Int::Exact(u64::MAX.into()))
        );
        assert_eq!(
            Int::from_json(&number("12345678901234567890123")),
            Some(Int::TooLarge)
        );
        assert_eq!(Int::from_json(&number("-1e300")), Some(Int::TooNegative));
        assert_eq!(Int::from_json(&number("2.5")), None);
        assert_eq!(
            Int::from_json(&number("1e3")),
            None,
            "fits 64 bits: a float"
        );
    }

    #[test]
    fn defaults_and_dedup() {
        let raw = RawSearch {
            query: Some("send an email".into()),
            integrations: Some(vec!["gmail".into(), "gmail".into(), "outlook".into()]),
            ..Default::default()
        };
        let req = raw.validate("p".into()).unwrap();
        assert_eq!(req.integrations, ["gmail", "outlook"]);
        assert!(req.rerank);
        assert_eq!(req.mode, RetrievalMode::Hybrid);
    }

    #[test]
    fn connected_only_is_carried() {
        let raw = RawSearch {
            query: Some("x".into()),
            connected_only: Some(true),
            ..Default::default()
        };
        assert!(raw.validate("p".into()).unwrap().connected_only);
    }

    #[test]
    fn query_length_counts_characters() {
        let raw = RawSearch {
            query: Some("é".repeat(1024)),
            ..Default::default()
        };
        assert!(raw.validate("p".into()).is_ok());
        let raw = RawSearch {
            query: Some("é".repeat(1025)),
            ..Default::default()
        };
        assert_eq!(fields(raw.validate("p".into()).unwrap_err()), ["query"]);
    }
}
