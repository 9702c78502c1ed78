//! Small request and response bodies of the REST routes, typed so that the handlers write
//! exactly what [`crate::openapi`] documents. Bodies that are parsed by hand (tool search,
//! feedback, tool deletes) are described here by the fields their parser accepts; a test holds
//! each description to its parser's list of fields.

use agentsearch_common::tool::ToolDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::ToolkitConnectionStatus;
use crate::context_api::SyncStatus;

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
    pub query_embedding: Option<crate::api::RawQueryEmbedding>,
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

/// `POST .../feedback` of context search.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextFeedbackBody {
    /// The `x-request-id` of the search the records were found by.
    pub request_id: Option<String>,
    /// The records the user opened, as `{syncId}.{recordId}`.
    pub opened_records: Option<Vec<String>>,
}

/// A JSON Schema document (draft 2020-12).
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct JsonSchemaDocument(pub serde_json::Map<String, Value>);

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
pub struct UpsertedCount {
    pub upserted: usize,
}

#[derive(Serialize, JsonSchema)]
pub struct Deleted {
    /// Whether something was removed (`false`: there was nothing to remove).
    pub deleted: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Plans {
    pub plans: Vec<crate::plans::PlanDetail>,
}

#[derive(Serialize, JsonSchema)]
pub struct Toolkits {
    pub toolkits: Vec<ToolkitConnectionStatus>,
}

#[derive(Serialize, JsonSchema)]
pub struct Syncs {
    pub syncs: Vec<SyncStatus>,
}

#[derive(Serialize, JsonSchema)]
pub struct UpsertedRecords {
    pub upserted: u32,
    pub unchanged: u32,
    /// Segments written.
    pub segments: u64,
    /// The sync's generation after the write.
    pub generation: u64,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedRecords {
    /// Records removed.
    pub deleted: u32,
    /// Ids that were not in the sync.
    pub not_found: u32,
    /// The sync's generation after the delete.
    pub generation: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct Groups {
    /// Groups written.
    pub groups: u32,
}

#[derive(Serialize, JsonSchema)]
pub struct Status {
    /// `ok` or `live`.
    pub status: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties<T: JsonSchema>() -> Vec<String> {
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>();
        let mut names: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    fn sorted(names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn the_tool_search_schema_names_what_the_parser_accepts() {
        assert_eq!(
            properties::<ToolSearchBody>(),
            sorted(crate::rest_body::SEARCH_FIELDS)
        );
    }

    #[test]
    fn feedback_schemas_name_what_the_parser_accepts() {
        assert_eq!(
            properties::<ToolFeedbackBody>(),
            sorted(&[
                "requestId",
                crate::feedback::used_field(crate::feedback::TOOLS)
            ])
        );
        assert_eq!(
            properties::<ContextFeedbackBody>(),
            sorted(&[
                "requestId",
                crate::feedback::used_field(crate::feedback::CONTEXT)
            ])
        );
    }
}
