//! Request bodies of the REST API: read only after the caller is authenticated, up to a limit per
//! route, and parsed (and validated) on a blocking thread when large. Tool search bodies are
//! parsed by hand from JSON values so that every problem (unknown property, wrong type, out of
//! range) is reported as `REQUEST_INVALID` naming the field.

use agentsearch_common::ids::truncate;
use agentsearch_common::{Error, FieldViolation};
use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use bytes::BytesMut;
use futures::StreamExt;
use serde_json::{Map, Value};

use crate::api::{Int, RawQueryEmbedding, RawSearch};
use crate::json::{MAX_ECHOED_NAME, suggestion};

/// Body limit of a search or read (tool search, context search, segments:read, sync creation).
pub const SEARCH_BODY_LIMIT: usize = 256 * 1024;
/// Body limit of a batch search: up to 200 inline custom tools with their schemas.
pub const BATCH_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// Body limit of a user's connections (at most 100, each with a few KiB of user info).
pub const CONNECTIONS_BODY_LIMIT: usize = 1024 * 1024;
/// Body limit of tool feedback (a request id and up to 50 tool names).
pub const FEEDBACK_BODY_LIMIT: usize = 64 * 1024;
/// Body limit of a recorded plan (a use case, up to 32 tool names, notes and 16 pitfalls).
pub const PLAN_BODY_LIMIT: usize = 64 * 1024;
/// Body limit of catalog and record ingest (a batch of 1000 tools with large schemas fits).
pub const INGEST_BODY_LIMIT: usize = 32 * 1024 * 1024;
/// Bodies larger than this are parsed and validated off the async runtime.
pub const PARSE_INLINE_BYTES: usize = 64 * 1024;

/// Reads `body`, refusing it with 413 as soon as it is known to exceed `limit` bytes (from its
/// `Content-Length`, before reading anything, or while reading).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, Error> {
    let too_large = || {
        Error::PayloadTooLarge(format!(
            "the body is larger than {limit} bytes ({}), the limit of this route",
            human(limit)
        ))
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut stream = body.into_data_stream();
    let mut out = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::invalid("body", format!("could not be read: {e}")))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

fn human(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// Runs `parse` over `body`, on a blocking thread when the body is larger than
/// [`PARSE_INLINE_BYTES`], so that parsing and validating a large body never stalls the runtime.
pub(crate) async fn parse_off_runtime<T, F>(body: Bytes, parse: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce(&[u8]) -> Result<T, Error> + Send + 'static,
{
    if body.len() <= PARSE_INLINE_BYTES {
        return parse(&body);
    }
    tokio::task::spawn_blocking(move || parse(&body))
        .await
        .map_err(Error::internal)?
}

pub(crate) fn parse_object(body: &[u8]) -> Result<Map<String, Value>, Error> {
    if body.is_empty() {
        return Err(Error::invalid("body", "a JSON object is required"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::invalid("body", "must be a JSON object")),
        Err(e) => Err(Error::invalid("body", format!("is not valid JSON: {e}"))),
    }
}

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

/// Refuses the keys of `object` not in `known`, each named (at most [`MAX_ECHOED_NAME`]
/// characters of it) once, with a suggestion when it is close to a known one.
pub(crate) fn reject_unknown(object: &Map<String, Value>, known: &[&str]) -> Result<(), Error> {
    let unknown: Vec<FieldViolation> = object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            let issue = match suggestion(k, known) {
                Some(name) => format!("unknown property; did you mean `{name}`?"),
                None => "unknown property".to_string(),
            };
            FieldViolation::new(truncate(k, MAX_ECHOED_NAME), issue)
        })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid_many(unknown))
    }
}

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

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// A feedback body: `{"requestId": "...", LIST: ["...", ...]}`; fields are validated after.
pub(crate) fn feedback_body(body: &[u8], list: &str) -> Result<(String, Vec<String>), Error> {
    let mut object = parse_object(body)?;
    reject_unknown(&object, &["requestId", list])?;
    let request_id = match object.remove("requestId") {
        Some(Value::String(id)) => id,
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(Error::invalid("requestId", "must be a string")),
    };
    let items = string_list(&mut object, list)?.unwrap_or_default();
    Ok((request_id, items))
}

pub(crate) fn string_list(
    object: &mut Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<String>>, Error> {
    match object.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => strings(&v).map(Some).ok_or_else(|| {
            Error::invalid(
                field,
                format!("must be an array of strings, got {}", kind(&v)),
            )
        }),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if Int::from_json(n).is_some() => "an integer",
        Value::Number(_) => "a fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused() {
        let mut headers = HeaderMap::new();
        let ok = read_body(&headers, Body::from(vec![b'x'; 1024]), 1024)
            .await
            .unwrap();
        assert_eq!(ok.len(), 1024);
        let err = read_body(&headers, Body::from(vec![b'x'; 1025]), 1024)
            .await
            .unwrap_err();
        assert!(matches!(&err, Error::PayloadTooLarge(m) if m.contains("1024 bytes (1 KiB)")));
        // A declared length over the limit is refused without reading.
        headers.insert(CONTENT_LENGTH, "1000000000".parse().unwrap());
        let err = read_body(&headers, Body::empty(), SEARCH_BODY_LIMIT)
            .await
            .unwrap_err();
        assert!(matches!(&err, Error::PayloadTooLarge(m) if m.contains("(256 KiB)")));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn large_bodies_parse_on_a_blocking_thread() {
        let runtime = std::thread::current().id();
        let parsed_on = |body: Bytes| parse_off_runtime(body, |_| Ok(std::thread::current().id()));
        let small = parsed_on(Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(small, runtime);
        let large = Bytes::from(vec![b' '; PARSE_INLINE_BYTES + 1]);
        assert_ne!(parsed_on(large).await.unwrap(), runtime);
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
