//! Request bodies of the REST API: read only after the caller is authenticated, up to a limit per
//! route, and parsed (and validated) on a blocking thread when large. Bodies parsed by hand from
//! JSON values (tool search: `crate::tools::rest_body`) report every problem (unknown property,
//! wrong type, out of range) as `REQUEST_INVALID` naming the field.

use agentsearch_common::ids::truncate;
use agentsearch_common::{Error, FieldViolation};
use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use bytes::BytesMut;
use futures::StreamExt;
use serde_json::{Map, Value};

use crate::json::{Int, MAX_ECHOED_NAME, suggestion};

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

pub(crate) fn strings(value: &Value) -> Option<Vec<String>> {
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

pub(crate) fn kind(value: &Value) -> &'static str {
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
}
