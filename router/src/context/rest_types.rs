//! Small request and response bodies of the context search routes, typed so that the handlers
//! write exactly what [`crate::openapi`] documents. The feedback body, parsed by hand, is
//! described by the fields its parser accepts; a test holds it to them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::api::SyncStatus;

/// `POST .../feedback` of context search.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextFeedbackBody {
    /// The `x-request-id` of the search the records were found by.
    pub request_id: Option<String>,
    /// The records the user opened, as `{syncId}.{recordId}`.
    pub opened_records: Option<Vec<String>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::types::tests::{properties, sorted};

    #[test]
    fn the_context_feedback_schema_names_what_the_parser_accepts() {
        assert_eq!(
            properties::<ContextFeedbackBody>(),
            sorted(&[
                "requestId",
                crate::tools::feedback::used_field(crate::tools::feedback::CONTEXT)
            ])
        );
    }
}
