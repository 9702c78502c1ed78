//! What is asked of a provider and what it answers, and the cache key of a request.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Prefix of every cache key; bump the version when [`crate::CachedValue`]'s encoding changes.
const KEY_PREFIX: &str = "agentsearch:hydrated:v1";

/// One tool of one user to hydrate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HydrationRequest {
    pub project_id: String,
    pub user_id: String,
    /// Integration slug (`salesforce`).
    pub integration: String,
    /// Tool name (`SALESFORCE_CREATE_OPPORTUNITY`).
    pub tool: String,
    /// Version of the catalog the static schema comes from; a new version is a new cache key.
    pub catalog_version: u64,
    /// The tool's static description.
    pub description: String,
    /// The tool's static JSON Schema (a JSON object).
    pub parameters_json: String,
}

impl HydrationRequest {
    /// `agentsearch:hydrated:v1:{project}:{user}:{integration}:{tool}:{catalog_version}`, each
    /// component with `%` and `:` percent-encoded so no two requests share a key.
    pub fn cache_key(&self) -> String {
        format!(
            "{KEY_PREFIX}:{}:{}:{}:{}:{}",
            escape(&self.project_id),
            escape(&self.user_id),
            escape(&self.integration),
            escape(&self.tool),
            self.catalog_version
        )
    }
}

fn escape(component: &str) -> Cow<'_, str> {
    if !component.contains(['%', ':']) {
        return Cow::Borrowed(component);
    }
    let mut escaped = String::with_capacity(component.len() + 4);
    for c in component.chars() {
        match c {
            '%' => escaped.push_str("%25"),
            ':' => escaped.push_str("%3A"),
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}

/// A user's schema of one tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HydratedSchema {
    /// The hydrated JSON Schema of the parameters (compact JSON, a `"type": "object"` schema).
    pub parameters_json: String,
    /// A description replacing the static one, if the provider gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl HydratedSchema {
    /// Checks that `parameters` is an object schema and encodes it; an empty description is none.
    pub fn from_value(parameters: &Value, description: Option<String>) -> Result<Self, String> {
        check_object_schema(parameters)?;
        Ok(Self {
            parameters_json: parameters.to_string(),
            description: description.filter(|d| !d.trim().is_empty()),
        })
    }
}

/// `Ok` when `schema` is a JSON Schema of an object: a JSON object whose `type` is `"object"` and
/// whose `properties`, if present, is an object. The error says what is wrong.
pub fn check_object_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err(format!("expected a JSON object, got {}", kind(schema)));
    };
    match object.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(format!("`type` must be \"object\", got {other}")),
        None => return Err("`type` is missing (must be \"object\")".to_string()),
    }
    if let Some(properties) = object.get("properties")
        && !properties.is_object()
    {
        return Err(format!(
            "`properties` must be an object, got {}",
            kind(properties)
        ));
    }
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(project: &str, user: &str) -> HydrationRequest {
        HydrationRequest {
            project_id: project.to_string(),
            user_id: user.to_string(),
            integration: "salesforce".to_string(),
            tool: "SALESFORCE_CREATE_LEAD".to_string(),
            catalog_version: 7,
            description: String::new(),
            parameters_json: "{}".to_string(),
        }
    }

    #[test]
    fn cache_key_escapes_separators() {
        assert_eq!(
            request("p1", "alice@example.com").cache_key(),
            "agentsearch:hydrated:v1:p1:alice@example.com:salesforce:SALESFORCE_CREATE_LEAD:7"
        );
        let a = request("p", "u:1").cache_key();
        let b = request("p:u", "1").cache_key();
        assert_ne!(a, b);
        assert_eq!(
            a,
            "agentsearch:hydrated:v1:p:u%3A1:salesforce:SALESFORCE_CREATE_LEAD:7"
        );
        // `%` is escaped too, so an id that looks escaped cannot collide with one that is.
        assert_ne!(request("p", "u%3A1").cache_key(), a);
    }

    #[test]
    fn object_schemas_are_checked() {
        check_object_schema(&json!({"type": "object", "properties": {"a": {}}})).unwrap();
        check_object_schema(&json!({"type": "object"})).unwrap();
        let err = check_object_schema(&json!("x")).unwrap_err();
        assert_eq!(err, "expected a JSON object, got a string");
        let err = check_object_schema(&json!({"type": "string"})).unwrap_err();
        assert_eq!(err, "`type` must be \"object\", got \"string\"");
        assert!(check_object_schema(&json!({"properties": {}})).is_err());
        assert!(check_object_schema(&json!({"type": "object", "properties": []})).is_err());
    }

    #[test]
    fn empty_descriptions_are_none() {
        let schema =
            HydratedSchema::from_value(&json!({"type": "object"}), Some(" ".into())).unwrap();
        assert_eq!(schema.description, None);
        assert_eq!(schema.parameters_json, r#"{"type":"object"}"#);
    }
}
