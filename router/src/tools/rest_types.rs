//! Small request and response bodies of the tool search routes, typed so that the handlers write
//! exactly what [`crate::openapi`] documents. Bodies that are parsed by hand (tool search,
//! feedback, tool deletes) are described here by the fields their parser accepts; a test holds
//! each description to its parser's list of fields.

use agentsearch_common::tool::ToolDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::api::ToolkitConnectionStatus;

/// A tool search: `query` is free text or a query JSON document (see `GET .../tools/schema`).
/// Absent and `null` fields take their defaults.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSearchBody {
    /// What the agent wants to do, or a query JSON document.
    pub query: QueryText,
    /// How many tools (default from the deployment's `search.default_top_k`).
    #[schemars(range(min = 1, max = 50))]
    pub top_k: Option<i64>,
    /// The token budget of the returned schemas.
    #[schemars(range(min = 1, max = 100_000))]
    pub max_tool_tokens: Option<i64>,
    /// Only tools of these integrations.
    pub integrations: Option<Vec<String>>,
    /// Only tools of these categories.
    pub categories: Option<Vec<String>>,
    /// The highest side effect returned.
    #[schemars(extend("enum" = ["read", "write", "delete", "send", null]))]
    pub max_side_effect: Option<String>,
    /// Only integrations the caller has an active connection to.
    pub connected_only: Option<bool>,
    /// `false` to skip the reranker.
    pub rerank: Option<bool>,
    /// Which retrievers run (default `hybrid`).
    #[schemars(extend("enum" = ["hybrid", "lexical", "dense", null]))]
    pub mode: Option<String>,
    /// The caller's own embedding of the query, made with the deployment's model.
    pub query_embedding: Option<crate::tools::api::RawQueryEmbedding>,
}

/// Free text, or a query JSON document (an object).
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum QueryText {
    Text(#[schemars(length(min = 1, max = 1024))] String),
    Document(serde_json::Map<String, Value>),
}

/// `POST .../tools/feedback`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolFeedbackBody {
    /// The `x-request-id` of the search the tools were found by.
    pub request_id: Option<String>,
    /// The tools the agent called, by name.
    pub called_tools: Option<Vec<String>>,
}

/// `PUT .../tools`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertToolsBody {
    pub tools: Vec<ToolDefinition>,
}

#[derive(Serialize, JsonSchema)]
pub struct UpsertedTools {
    /// Tools written (new or changed).
    pub upserted: u32,
    /// Tools sent exactly as stored (nothing written).
    pub unchanged: u32,
}

/// `POST .../tools:delete`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteToolsBody {
    /// Names of the tools to remove.
    pub names: Option<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedTools {
    /// Tools removed.
    pub deleted: u32,
    /// Names that were not in the catalog.
    pub not_found: u32,
    /// Recorded plans removed because they named a removed tool.
    pub plans_deleted: u32,
}

#[derive(Serialize, JsonSchema)]
pub struct Toolkits {
    pub toolkits: Vec<ToolkitConnectionStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::types::tests::{properties, sorted};

    #[test]
    fn the_tool_search_schema_names_what_the_parser_accepts() {
        assert_eq!(
            properties::<ToolSearchBody>(),
            sorted(crate::tools::rest_body::SEARCH_FIELDS)
        );
    }

    #[test]
    fn the_tool_feedback_schema_names_what_the_parser_accepts() {
        assert_eq!(
            properties::<ToolFeedbackBody>(),
            sorted(&[
                "requestId",
                crate::tools::feedback::used_field(crate::tools::feedback::TOOLS)
            ])
        );
    }
}
