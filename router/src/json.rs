//! JSON request bodies: [`from_json`] parses a body into a request type and reports any problem as
//! `REQUEST_INVALID` naming the field. What the caller sent is echoed only in bounded pieces
//! (names up to [`MAX_ECHOED_NAME`] characters, values up to [`MAX_ECHOED_VALUE`]), and
//! nearest-name suggestions are computed for short names only, so a huge key costs neither a
//! huge error nor a long computation.

use agentsearch_common::ids::truncate;
use agentsearch_common::{Error, FieldViolation};
use serde::de::DeserializeOwned;

/// Characters of a caller's name (an unknown property) echoed in an error.
pub const MAX_ECHOED_NAME: usize = 64;
/// Characters of a caller's value echoed in an error message.
pub const MAX_ECHOED_VALUE: usize = 128;
/// Longest error message built from a parser's text.
const MAX_MESSAGE: usize = 512;

/// Parses a JSON body into `T`; a problem is `REQUEST_INVALID` naming the field's path
/// (`records[2].acl.users`), an unknown property included.
pub fn from_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    if body.is_empty() {
        return Err(Error::invalid("body", "a JSON object is required"));
    }
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Error::invalid("body", "must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let value = parsed.map_err(|err| {
        let path = err.path().to_string();
        Error::invalid_many(vec![violation(&path, &err.inner().to_string())])
    })?;
    de.end()
        .map_err(|e| Error::invalid("body", format!("trailing characters: {e}")))?;
    Ok(value)
}

/// The violation of a deserialization error at `path` (`.` for the top level) with the parser's
/// `message`.
pub(crate) fn violation(path: &str, message: &str) -> FieldViolation {
    let message = without_position(message);
    if let Some((key, expected)) = unknown_field(message) {
        // The path of an unknown property is its parent's, or already ends with its name.
        let parent = path
            .strip_suffix(key)
            .filter(|p| p.is_empty() || p.ends_with('.'))
            .map(|p| p.trim_end_matches('.'))
            .unwrap_or(path);
        let name = truncate(key, MAX_ECHOED_NAME);
        let field = match parent {
            "" | "." => name,
            parent => format!("{}.{name}", bounded_path(parent)),
        };
        return FieldViolation::new(field, unknown_property(key, &expected));
    }
    let field = match path {
        "." => "body".to_string(),
        p => bounded_path(p),
    };
    FieldViolation::new(field, bounded_message(message))
}

/// The issue of an unknown property: a suggestion when `key` is close to a known name, otherwise
/// the known names (if any are given).
pub(crate) fn unknown_property(key: &str, known: &[&str]) -> String {
    match suggestion(key, known) {
        Some(name) => format!("unknown property; did you mean `{name}`?"),
        None if known.is_empty() => "unknown property".to_string(),
        None => format!(
            "unknown property; expected one of {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The known name within two edits of `key` (case-insensitive), for keys of at most
/// [`MAX_ECHOED_NAME`] characters; longer keys are never close to a field name.
pub(crate) fn suggestion<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    if key.chars().count() > MAX_ECHOED_NAME {
        return None;
    }
    let key = key.to_lowercase();
    known
        .iter()
        .map(|name| (strsim::levenshtein(&key, &name.to_lowercase()), *name))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, name)| name)
}

/// The message without serde_json's ` at line L column C` suffix.
fn without_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(at) if message[at + " at line ".len()..].contains(" column ") => &message[..at],
        _ => message,
    }
}

/// serde's `unknown field `NAME`, expected ...` (or `..., there are no fields`): the name and the
/// expected names. The name may contain anything; the expected part, which serde writes last,
/// does not.
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    if let Some(end) = rest.rfind("`, expected ") {
        let expected = rest[end + "`, expected ".len()..]
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        return Some((&rest[..end], expected));
    }
    let end = rest.rfind("`, there are no fields")?;
    Some((&rest[..end], Vec::new()))
}

/// A field path with every segment bounded (map keys can come from the caller).
fn bounded_path(path: &str) -> String {
    if path.chars().count() <= MAX_ECHOED_NAME * 4 {
        return path.to_string();
    }
    path.split('.')
        .map(|segment| truncate(segment, MAX_ECHOED_NAME))
        .collect::<Vec<_>>()
        .join(".")
}

/// A parser's message with the caller's strings cut to [`MAX_ECHOED_VALUE`] characters
/// (`invalid type: string "...", expected ...`, `unknown variant `...`, expected ...`).
pub(crate) fn bounded_message(message: &str) -> String {
    let mut out = message.to_string();
    for (open, close) in [
        ("string \"", "\", expected "),
        ("variant `", "`, expected "),
    ] {
        if let Some(start) = out.find(open).map(|at| at + open.len())
            && let Some(end) = out.rfind(close).filter(|end| *end >= start)
            && out[start..end].chars().count() > MAX_ECHOED_VALUE
        {
            out = format!(
                "{}{}{}",
                &out[..start],
                truncate(&out[start..end], MAX_ECHOED_VALUE),
                &out[end..]
            );
        }
    }
    truncate(&out, MAX_MESSAGE)
}

/// An integer field of a request as sent. JSON parsers read integers beyond 64 bits as floating
/// point, so of those only the sign is known; they are outside every range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int {
    Exact(i128),
    TooLarge,
    TooNegative,
}

impl Int {
    /// A JSON number as an integer; `None` for a fractional one (or an integral one written with a
    /// fraction or exponent that fits 64 bits: JSON parsers do not tell those apart).
    pub fn from_json(number: &serde_json::Number) -> Option<Int> {
        if let Some(n) = number.as_i64() {
            return Some(Int::Exact(n.into()));
        }
        if let Some(n) = number.as_u64() {
            return Some(Int::Exact(n.into()));
        }
        number.as_f64().and_then(Int::beyond_64_bits)
    }

    /// An integral float outside the 64-bit range, as an integer too large to represent.
    pub(crate) fn beyond_64_bits(value: f64) -> Option<Int> {
        const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
        if !value.is_finite() || value.fract() != 0.0 || (-LIMIT..LIMIT).contains(&value) {
            return None;
        }
        Some(if value > 0.0 {
            Int::TooLarge
        } else {
            Int::TooNegative
        })
    }

    /// The value when it is between `min` and `max`.
    pub fn within(self, min: i64, max: i64) -> Option<i64> {
        match self {
            Int::Exact(n) if (i128::from(min)..=i128::from(max)).contains(&n) => Some(n as i64),
            _ => None,
        }
    }
}

impl From<u32> for Int {
    fn from(value: u32) -> Self {
        Int::Exact(value.into())
    }
}

impl From<i32> for Int {
    fn from(value: i32) -> Self {
        Int::Exact(value.into())
    }
}

impl From<i64> for Int {
    fn from(value: i64) -> Self {
        Int::Exact(value.into())
    }
}

/// The value as sent, or what is known of it.
impl std::fmt::Display for Int {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Int::Exact(n) => write!(f, "{n}"),
            Int::TooLarge => f.write_str("an integer too large to represent"),
            Int::TooNegative => f.write_str("a negative integer too large to represent"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Request {
        query: Option<String>,
        top_k: Option<i64>,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        name: Option<String>,
    }

    fn one(err: Error) -> FieldViolation {
        match err {
            Error::InvalidArgument { mut violations, .. } => {
                assert_eq!(violations.len(), 1);
                violations.remove(0)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_properties_are_named_once_with_a_suggestion() {
        let v = one(from_json::<Request>(br#"{"query": "x", "topk": 3}"#).unwrap_err());
        assert_eq!(v.field, "topk");
        assert_eq!(v.issue, "unknown property; did you mean `topK`?");
        let v = one(from_json::<Request>(br#"{"inner": {"colour": 1}}"#).unwrap_err());
        assert_eq!(v.field, "inner.colour");
        assert_eq!(v.issue, "unknown property; expected one of `name`");
    }

    #[test]
    fn a_huge_unknown_key_is_truncated_and_not_repeated() {
        let key = "k".repeat(5_000_000);
        let body = format!(r#"{{"query": "x", "inner": {{"{key}": 1}}}}"#);
        let v = one(from_json::<Request>(body.as_bytes()).unwrap_err());
        assert_eq!(v.field, format!("inner.{}…", "k".repeat(MAX_ECHOED_NAME)));
        assert!(!v.issue.contains("kkk"), "{}", v.issue);
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let value = "v".repeat(10_000);
        let body = format!(r#"{{"topK": "{value}"}}"#);
        let v = one(from_json::<Request>(body.as_bytes()).unwrap_err());
        assert_eq!(v.field, "topK");
        assert_eq!(
            v.issue,
            format!(
                "invalid type: string \"{}…\", expected i64",
                "v".repeat(MAX_ECHOED_VALUE)
            )
        );
        // Short ones are unchanged.
        let v = one(from_json::<Request>(br#"{"topK": "3"}"#).unwrap_err());
        assert_eq!(v.issue, "invalid type: string \"3\", expected i64");
    }

    #[test]
    fn suggestions_are_only_for_short_keys() {
        assert_eq!(suggestion("TOPK", &["topK", "query"]), Some("topK"));
        assert_eq!(suggestion(&"a".repeat(65), &["topK"]), None);
        assert_eq!(suggestion("colour", &["topK"]), None);
    }

    proptest! {
        #[test]
        fn echoed_unknown_keys_are_bounded(key in "\\PC{0,300}") {
            prop_assume!(!["query", "topK", "inner"].contains(&key.as_str()));
            let mut object = serde_json::Map::new();
            object.insert(key.clone(), 1.into());
            let body = serde_json::Value::Object(object).to_string();
            let v = one(from_json::<Request>(body.as_bytes()).unwrap_err());
            prop_assert!(v.field.chars().count() <= MAX_ECHOED_NAME + 1, "{}", v.field);
            prop_assert_eq!(&v.field, &truncate(&key, MAX_ECHOED_NAME));
            prop_assert!(v.issue.starts_with("unknown property"));
            if key.chars().count() > 8 {
                prop_assert!(!v.issue.contains(&key), "{}", v.issue);
            }
        }
    }
}
