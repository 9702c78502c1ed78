//! Tool search bodies, parsed by hand from JSON values so that every problem (unknown property,
//! wrong type, out of range) is reported as `REQUEST_INVALID` naming the field.

use agentsearch_common::ids::truncate;
use agentsearch_common::{Error, FieldViolation};
use serde_json::Value;

use crate::http::body::{kind, parse_object, reject_unknown, strings};
use crate::json::{MAX_ECHOED_NAME, suggestion};
use crate::tools::api::{Int, RawQueryEmbedding, RawSearch};

pub(crate) const SEARCH_FIELDS: &[&str] = &[
    "query",
    "topK",
    "maxToolTokens",
    "integrations",
    "categories",
    "maxSideEffect",
    "connectedOnly",
    "rerank",
    "mode",
    "queryEmbedding",
];

/// A tool search body.
pub(crate) fn parse_search(body: &[u8]) -> Result<RawSearch, Error> {
    let mut object = parse_object(body)?;
    reject_unknown(&object, SEARCH_FIELDS)?;
    let mut violations = Vec::new();
    let mut take = |key: &str| object.remove(key).filter(|v| !v.is_null());
    let mut raw = RawSearch::default();
    let query = take("query");
    let top_k = take("topK");
    let max_tool_tokens = take("maxToolTokens");
    let integrations = take("integrations");
    let categories = take("categories");
    let max_side_effect = take("maxSideEffect");
    let connected_only = take("connectedOnly");
    let rerank = take("rerank");
    let mode = take("mode");
    let embedding = take("queryEmbedding");
    let v = &mut violations;
    match query {
        Some(document) if agentsearch_query::parse::is_document(&document) => {
            raw.query_document = Some(document);
        }
        query => raw.query = typed(v, "query", query, "a string", string),
    }
    raw.top_k = typed(v, "topK", top_k, "an integer", integer);
    raw.max_tool_tokens = typed(v, "maxToolTokens", max_tool_tokens, "an integer", integer);
    raw.integrations = typed(
        v,
        "integrations",
        integrations,
        "an array of strings",
        strings,
    );
    raw.categories = typed(v, "categories", categories, "an array of strings", strings);
    raw.max_side_effect = typed(v, "maxSideEffect", max_side_effect, "a string", string);
    raw.connected_only = typed(
        v,
        "connectedOnly",
        connected_only,
        "a boolean",
        Value::as_bool,
    );
    raw.rerank = typed(v, "rerank", rerank, "a boolean", Value::as_bool);
    raw.mode = typed(v, "mode", mode, "a string", string);
    raw.query_embedding = embedding.and_then(|e| raw_query_embedding(v, "queryEmbedding", e));
    if violations.is_empty() {
        Ok(raw)
    } else {
        Err(Error::invalid_many(violations))
    }
}

/// A `queryEmbedding` object as sent: `model` (a string) and `vector` (an array of numbers).
pub(crate) fn raw_query_embedding(
    violations: &mut Vec<FieldViolation>,
    field: &str,
    value: Value,
) -> Option<RawQueryEmbedding> {
    let Value::Object(mut object) = value else {
        violations.push(FieldViolation::new(
            field,
            format!(
                "must be an object with `model` and `vector`, got {}",
                kind(&value)
            ),
        ));
        return None;
    };
    let before = violations.len();
    for key in object.keys() {
        if key != "model" && key != "vector" {
            let issue = match suggestion(key, &["model", "vector"]) {
                Some(name) => format!("unknown property; did you mean `{name}`?"),
                None => "unknown property".to_string(),
            };
            violations.push(FieldViolation::new(
                format!("{field}.{}", truncate(key, MAX_ECHOED_NAME)),
                issue,
            ));
        }
    }
    let model = object.remove("model").filter(|v| !v.is_null());
    let vector = object.remove("vector").filter(|v| !v.is_null());
    let model = typed(
        violations,
        &format!("{field}.model"),
        model,
        "a string",
        string,
    );
    let vector = typed(
        violations,
        &format!("{field}.vector"),
        vector,
        "an array of numbers",
        |v| v.as_array()?.iter().map(Value::as_f64).collect(),
    );
    (violations.len() == before).then_some(RawQueryEmbedding { model, vector })
}

fn typed<T>(
    violations: &mut Vec<FieldViolation>,
    field: &str,
    value: Option<Value>,
    expected: &str,
    convert: impl Fn(&Value) -> Option<T>,
) -> Option<T> {
    let value = value?;
    match convert(&value) {
        Some(v) => Some(v),
        None => {
            violations.push(FieldViolation::new(
                field,
                format!("must be {expected}, got {}", kind(&value)),
            ));
            None
        }
    }
}

fn string(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

/// An integer as sent, exact or known to be beyond 64 bits (then out of every range).
fn integer(value: &Value) -> Option<Int> {
    match value {
        Value::Number(n) => Int::from_json(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Map;

    fn fields(err: Error) -> Vec<(String, String)> {
        match err {
            Error::InvalidArgument { violations, .. } => {
                violations.into_iter().map(|v| (v.field, v.issue)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_properties_are_named_with_a_suggestion() {
        let err = parse_search(br#"{"query": "x", "topk": 3, "colour": 1}"#).unwrap_err();
        let f = fields(err);
        assert_eq!(f.len(), 2);
        assert!(
            f.iter()
                .any(|(k, issue)| k == "topk" && issue.contains("`topK`"))
        );
        assert!(
            f.iter()
                .any(|(k, issue)| k == "colour" && issue == "unknown property")
        );
    }

    #[test]
    fn a_huge_unknown_key_is_named_once_truncated() {
        let key = "x".repeat(5_000_000);
        let body = format!(r#"{{"query": "x", "{key}": 1}}"#);
        let f = fields(parse_search(body.as_bytes()).unwrap_err());
        assert_eq!(
            f,
            [(
                format!("{}…", "x".repeat(MAX_ECHOED_NAME)),
                "unknown property".to_string()
            )]
        );
    }

    #[test]
    fn wrong_types_are_named() {
        let f = fields(
            parse_search(br#"{"query": 3, "topK": 2.5, "integrations": ["a", 1], "rerank": "no"}"#)
                .unwrap_err(),
        );
        let names: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["query", "topK", "integrations", "rerank"]);
        assert_eq!(f[1].1, "must be an integer, got a fractional number");
    }

    #[test]
    fn integers_beyond_64_bits_are_integers_out_of_range() {
        let raw = parse_search(br#"{"query": "x", "topK": 12345678901234567890123}"#).unwrap();
        assert_eq!(raw.top_k, Some(Int::TooLarge));
        let raw = parse_search(br#"{"query": "x", "topK": -12345678901234567890123}"#).unwrap();
        assert_eq!(raw.top_k, Some(Int::TooNegative));
        let raw =
            parse_search(br#"{"query": "x", "maxToolTokens": 18446744073709551615}"#).unwrap();
        assert_eq!(raw.max_tool_tokens, Some(Int::Exact(u64::MAX.into())));
        let f = fields(parse_search(br#"{"query": 12345678901234567890123}"#).unwrap_err());
        assert_eq!(f[0].1, "must be a string, got an integer");
    }

    #[test]
    fn bodies_that_are_not_objects() {
        assert_eq!(fields(parse_search(b"").unwrap_err())[0].0, "body");
        assert_eq!(fields(parse_search(b"[1]").unwrap_err())[0].0, "body");
        assert_eq!(
            fields(parse_search(b"{\"query\":").unwrap_err())[0].0,
            "body"
        );
    }

    #[test]
    fn nulls_are_absent() {
        let raw = parse_search(br#"{"query": "x", "topK": null}"#).unwrap();
        assert_eq!(raw.top_k, None);
    }

    proptest! {
        #[test]
        fn echoed_keys_are_bounded(key in "\\PC{1,400}") {
            prop_assume!(!SEARCH_FIELDS.contains(&key.as_str()));
            let mut object = Map::new();
            object.insert(key.clone(), Value::Bool(true));
            let body = Value::Object(object).to_string();
            let f = fields(parse_search(body.as_bytes()).unwrap_err());
            prop_assert_eq!(f.len(), 1);
            prop_assert!(f[0].0.chars().count() <= MAX_ECHOED_NAME + 1);
            prop_assert_eq!(&f[0].0, &truncate(&key, MAX_ECHOED_NAME));
            prop_assert!(f[0].1.len() < 64, "{}", f[0].1);
        }
    }
}
