//! Identifiers: request ids and project ids; and what free text stored beside them may hold.

use crate::error::Error;

/// A fresh request id, `req_` + 32 hex digits.
pub fn new_request_id() -> String {
    format!("req_{}", uuid::Uuid::new_v4().simple())
}

/// The caller's request id when it is a sane token (1-128 printable ASCII characters), otherwise a
/// fresh one. Used by every API (REST header and gRPC metadata `x-request-id`).
pub fn accept_request_id(given: Option<&str>) -> String {
    given
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(new_request_id)
}

/// The request id of `headers` (as [`accept_request_id`] takes it), written back into them so
/// that every layer and handler after this one uses the same id.
pub fn ensure_request_id(headers: &mut http::HeaderMap) -> String {
    let given = headers.get("x-request-id").and_then(|v| v.to_str().ok());
    let id = accept_request_id(given);
    if given != Some(id.as_str())
        && let Ok(value) = http::HeaderValue::from_str(&id)
    {
        headers.insert("x-request-id", value);
    }
    id
}

/// The demo project of the embedded default.
pub const DEMO_PROJECT_ID: &str = "00000000-0000-4000-8000-000000000001";

/// Checks that `value` is a UUID and returns it in canonical lowercase form.
pub fn parse_project_id(field: &str, value: &str) -> Result<String, Error> {
    uuid::Uuid::parse_str(value)
        .map(|id| id.hyphenated().to_string())
        .map_err(|_| {
            Error::invalid(
                field,
                format!("must be a UUID, got `{}`", truncate(value, 64)),
            )
        })
}

/// At most `max` characters of `s`, for echoing user input in messages.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_ids_are_canonical() {
        assert_eq!(
            parse_project_id("projectId", "00000000-0000-4000-8000-00000000000A").unwrap(),
            "00000000-0000-4000-8000-00000000000a"
        );
        assert!(parse_project_id("projectId", "demo").is_err());
    }
}

/// What a free-text field (a description, a note) holding a control character is told.
pub const CONTROL_CHARACTERS: &str =
    "must not contain control characters (tab, line feed and carriage return are allowed)";

/// Whether free text holds a control character other than tab, line feed or carriage return.
/// PostgreSQL refuses NUL in text and JSON, and none of them belongs in what an agent reads: every
/// free-text field the metadata store keeps is checked with this before anything is written.
pub fn has_control(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}
