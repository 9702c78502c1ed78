//! A validated batch search request (see [`crate::tools::batch`], which validates it): what the
//! batch runs and what plan recommendation ([`crate::tools::plans::plan_match`]) reads.

use std::collections::BTreeMap;

use agentsearch_common::shard::RetrievalMode;
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_fusion::BudgetScope;

/// One validated query of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchQuery {
    pub use_case: String,
    /// `(key, value)` pairs of `knownFields`.
    pub known_fields: Vec<(String, String)>,
}

impl BatchQuery {
    /// The text ranked: the use case, then the known fields' names (they match parameter names).
    pub fn search_text(&self) -> String {
        let mut text = self.use_case.clone();
        for (key, _) in &self.known_fields {
            text.push(' ');
            text.push_str(key);
        }
        text
    }
}

/// A custom tool, validated: where it came from and the record it is ranked as.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomTool {
    /// `customTools[i]` or `customToolkits[i].tools[j]`, for errors.
    pub path: String,
    pub record: ToolRecord,
    /// A catalog integration whose connection the tool inherits.
    pub extends: Option<String>,
}

/// A custom toolkit, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomToolkit {
    pub path: String,
    pub description: String,
}

/// A validated batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchRequest {
    pub project_id: String,
    pub queries: Vec<BatchQuery>,
    pub top_k: u32,
    pub related_k: u32,
    pub max_tool_tokens: Option<u32>,
    pub scope: BudgetScope,
    pub integrations: Vec<String>,
    pub categories: Vec<String>,
    pub max_side_effect: Option<SideEffect>,
    pub connected_only: bool,
    /// False when the caller opted out of reranking.
    pub rerank: bool,
    pub diagnostics: bool,
    pub mode: RetrievalMode,
    pub custom: Vec<CustomTool>,
    /// Custom toolkits by slug: their description (shown in connection statuses) and where they
    /// are in the request (`customToolkits[i]`, for errors).
    pub toolkits: BTreeMap<String, CustomToolkit>,
}
