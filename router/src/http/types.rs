//! Small response bodies shared by the REST routes, typed so that the handlers write exactly what
//! [`crate::openapi`] documents. The bodies of one domain live with its routes
//! ([`crate::tools::rest_types`], [`crate::context::rest_types`]).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A JSON Schema document (draft 2020-12).
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct JsonSchemaDocument(pub serde_json::Map<String, Value>);

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
pub struct Status {
    /// `ok` or `live`.
    pub status: &'static str,
}

/// Helpers of the tests that hold each hand-parsed body's description to its parser's fields.
#[cfg(test)]
pub(crate) mod tests {
    use schemars::JsonSchema;
    use serde_json::Value;

    pub(crate) fn properties<T: JsonSchema>() -> Vec<String> {
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

    pub(crate) fn sorted(names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        names.sort();
        names
    }
}
