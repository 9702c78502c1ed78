//! The public context-search API: requests as received ([`RawContextSearch`] and friends, parsed
//! from camelCase JSON by REST and built from messages by gRPC), their validation into domain
//! form, and the responses. Both adapters go through the same `validate` functions, so the rules
//! and the field names in errors are the same on both.

use std::collections::{BTreeMap, HashSet};

use agentsearch_common::context::{Acl, SOURCES};
use agentsearch_common::ids::truncate;
use agentsearch_common::principal;
use agentsearch_common::shard::{FieldData, FieldDecl, FieldValue, RetrievalMode};
use agentsearch_common::{Error, FieldViolation};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::tools::api::{Explain, Int, Trace, range};

pub use crate::tools::api::MAX_QUERY_CHARS;
pub const MAX_TOP_K: i64 = 50;
pub const DEFAULT_TOP_K: u32 = 10;
pub const MAX_SEGMENTS_PER_RECORD: i64 = 5;
pub const MAX_SOURCES: usize = 6;
pub const MAX_SYNC_IDS: usize = 50;
pub const MAX_IDENTITIES: usize = 20;
pub const MAX_PRINCIPAL_CHARS: usize = principal::MAX_PRINCIPAL_CHARS;
/// Segments read on each side of an anchor, at most.
pub const MAX_READ_AROUND: i64 = 10;
/// Records per upsert batch.
pub const MAX_RECORDS: usize = 1000;
pub const MAX_RECORD_ID_CHARS: usize = 512;
pub const MAX_DISPLAY_NAME_CHARS: usize = 1024;
/// Bytes of text per record.
pub const MAX_TEXT_BYTES: usize = 4 * 1024 * 1024;
/// Entries per ACL list, and members per group.
pub const MAX_ACL_ENTRIES: usize = 10_000;
/// Precomputed segments per record.
pub const MAX_SEGMENTS_PER_INPUT: usize = 10_000;
pub const MAX_GROUPS: usize = 1000;

pub use crate::json::from_json;

// ---- Identities ----

/// `identity`: one account for every source, or one per source.
#[derive(Clone, Debug)]
pub enum RawIdentity {
    One(String),
    Many(Vec<RawIdentityEntry>),
}

const IDENTITY_SHAPE: &str =
    "must be a string (one principal) or an array of {principal, source} objects";
const IDENTITY_ENTRY_SHAPE: &str = "must be a {principal, source} object";

/// The visitor methods of the JSON forms a visitor refuses, each with the message `$shape`.
macro_rules! refuse_forms {
    ($shape:expr; $($method:ident($($arg:ty)?)),*) => {
        $(fn $method<E: de::Error>(self $(, _: $arg)?) -> Result<Self::Value, E> {
            Err(E::custom($shape))
        })*
    };
}

impl schemars::JsonSchema for RawIdentity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Identity".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let entry = generator.subschema_for::<RawIdentityEntry>();
        schemars::json_schema!({
            "description": "One principal for every source, or one per source.",
            "oneOf": [
                {"type": "string"},
                {"type": "array", "items": entry},
            ],
        })
    }
}

/// A string or an array of entries; anything else is refused saying what is expected, where an
/// untagged enum would only say that no variant matched.
impl<'de> Deserialize<'de> for RawIdentity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdentityVisitor)
    }
}

struct IdentityVisitor;

impl<'de> Visitor<'de> for IdentityVisitor {
    type Value = RawIdentity;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(IDENTITY_SHAPE)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<RawIdentity, E> {
        Ok(RawIdentity::One(value.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawIdentity, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = seq.next_element_seed(EntrySeed)? {
            entries.push(entry);
        }
        Ok(RawIdentity::Many(entries))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<RawIdentity, A::Error> {
        Err(de::Error::custom(IDENTITY_SHAPE))
    }

    refuse_forms!(IDENTITY_SHAPE; visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64), visit_unit());
}

/// One item of `identity`: an object, named `identity[i]` when it is not one.
struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = RawIdentityEntry;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = RawIdentityEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(IDENTITY_ENTRY_SHAPE)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawIdentityEntry, A::Error> {
        RawIdentityEntry::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<RawIdentityEntry, A::Error> {
        Err(de::Error::custom(IDENTITY_ENTRY_SHAPE))
    }

    refuse_forms!(IDENTITY_ENTRY_SHAPE; visit_str(&str), visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64), visit_unit());
}

#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIdentityEntry {
    pub principal: String,
    #[serde(default)]
    pub source: Option<String>,
}

/// One account whose access applies; `source: None` applies to every source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct IdentityEntry {
    pub principal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Binds a search or read to the caller's token: a user token (`sub`) searches as that user. With
/// no `identity` the user's `sub` is the identity; an `identity` naming anyone else (compared as
/// every principal is, [`principal::same`]) is refused. Service and anonymous callers may pass any identity.
pub fn bind_identity(identity: &mut Vec<IdentityEntry>, user: Option<&str>) -> Result<(), Error> {
    let Some(user) = user else {
        return Ok(());
    };
    if identity.is_empty() {
        identity.push(IdentityEntry {
            principal: user.to_string(),
            source: None,
        });
        return Ok(());
    }
    if identity
        .iter()
        .any(|e| !principal::same(&e.principal, user))
    {
        return Err(Error::PermissionDenied(
            "identity: a user token may only search as its own user (`sub`); omit identity or \
             use a service token"
                .into(),
        ));
    }
    Ok(())
}

/// Validates `identity` (or the deprecated `email`); no identity is an empty list.
fn identities(
    v: &mut Vec<FieldViolation>,
    identity: Option<RawIdentity>,
    email: Option<String>,
) -> Vec<IdentityEntry> {
    let (field, raw) = match (identity, email) {
        (Some(_), Some(_)) => {
            v.push(FieldViolation::new(
                "email",
                "is deprecated and cannot be combined with identity; send identity only",
            ));
            return Vec::new();
        }
        (Some(identity), None) => ("identity", identity),
        (None, Some(email)) => ("email", RawIdentity::One(email)),
        (None, None) => return Vec::new(),
    };
    let entries: Vec<(String, RawIdentityEntry)> = match raw {
        RawIdentity::One(principal) => vec![(
            field.to_string(),
            RawIdentityEntry {
                principal,
                source: None,
            },
        )],
        RawIdentity::Many(list) => {
            if list.is_empty() || list.len() > MAX_IDENTITIES {
                v.push(FieldViolation::new(
                    field,
                    format!(
                        "must list 1 to {MAX_IDENTITIES} accounts, got {}",
                        list.len()
                    ),
                ));
                return Vec::new();
            }
            list.into_iter()
                .enumerate()
                .map(|(i, e)| (format!("{field}[{i}]"), e))
                .collect()
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (path, entry) in entries {
        let principal = entry.principal.trim().to_string();
        let principal_field = if path.ends_with(']') {
            format!("{path}.principal")
        } else {
            path.clone()
        };
        if principal.is_empty() {
            v.push(FieldViolation::new(principal_field, "must not be empty"));
            continue;
        }
        if principal.chars().count() > MAX_PRINCIPAL_CHARS
            || principal.chars().any(char::is_control)
        {
            v.push(FieldViolation::new(
                principal_field,
                format!("must be at most {MAX_PRINCIPAL_CHARS} printable characters"),
            ));
            continue;
        }
        if let Some(source) = &entry.source
            && !SOURCES.contains(&source.as_str())
        {
            v.push(FieldViolation::new(
                format!("{path}.source"),
                format!(
                    "`{}` is not a source; expected one of {}",
                    truncate(source, 32),
                    SOURCES.join(", ")
                ),
            ));
            continue;
        }
        let entry = IdentityEntry {
            principal,
            source: entry.source,
        };
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

// ---- Search ----

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawContextSearch {
    /// A string, or a query JSON document.
    pub query: Option<serde_json::Value>,
    pub sources: Option<Vec<String>>,
    pub sync_ids: Option<Vec<String>>,
    pub top_k: Option<Int>,
    pub segments_per_record: Option<Int>,
    pub rerank: Option<bool>,
    pub identity: Option<RawIdentity>,
    /// Deprecated alias of a single `identity`.
    pub email: Option<String>,
    /// Retrievers: hybrid (default), lexical or dense; for evaluation.
    pub mode: Option<String>,
    #[serde(skip)]
    pub diagnostics: bool,
    /// The caller's query embedding (see the tool search's).
    pub query_embedding: Option<crate::tools::api::RawQueryEmbedding>,
}

/// A validated context search.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextSearch {
    pub project_id: String,
    /// The free text (a document's `q`, possibly empty).
    pub query: String,
    /// `query` sent as a query JSON document: parsed once the searched syncs (and so the
    /// metadata fields a query may name) are known.
    pub document: Option<serde_json::Value>,
    /// Empty: every source.
    pub sources: Vec<String>,
    /// Empty: every sync.
    pub sync_ids: Vec<String>,
    pub top_k: u32,
    pub segments_per_record: u32,
    pub rerank: Option<bool>,
    pub identity: Vec<IdentityEntry>,
    pub mode: RetrievalMode,
    pub diagnostics: bool,
    pub query_embedding: Option<crate::tools::api::QueryEmbedding>,
}

impl RawContextSearch {
    /// Checks every field; all violations are reported at once.
    pub fn validate(self, project_id: String) -> Result<ContextSearch, Error> {
        let mut v = Vec::new();
        let (query, document) = match self.query {
            Some(document) if agentsearch_query::parse::is_document(&document) => {
                (String::new(), Some(document))
            }
            Some(serde_json::Value::String(text)) => (
                crate::tools::api::query_text(&mut v, Some(text), "must not be empty"),
                None,
            ),
            None => (
                crate::tools::api::query_text(&mut v, None, "must not be empty"),
                None,
            ),
            Some(_) => {
                v.push(FieldViolation::new(
                    "query",
                    "must be a string or a query JSON document (an object with \"v\": 1)",
                ));
                (String::new(), None)
            }
        };
        let sources = sources(&mut v, self.sources);
        let sync_ids = match self.sync_ids {
            None => Vec::new(),
            Some(ids) if ids.len() > MAX_SYNC_IDS => {
                v.push(FieldViolation::new(
                    "syncIds",
                    format!("must have at most {MAX_SYNC_IDS} items, got {}", ids.len()),
                ));
                Vec::new()
            }
            Some(ids) => {
                let mut out = Vec::new();
                for (i, id) in ids.into_iter().enumerate() {
                    match parse_sync_id(&format!("syncIds[{i}]"), &id) {
                        Ok(id) if !out.contains(&id) => out.push(id),
                        Ok(_) => {}
                        Err(e) => v.push(e),
                    }
                }
                out
            }
        };
        if document.as_ref().is_some_and(|d| d.get("limit").is_some()) && self.top_k.is_some() {
            v.push(FieldViolation::new(
                "topK",
                "give `topK` or the query document's `limit`, not both",
            ));
        }
        let top_k = range(&mut v, "topK", self.top_k, 1, MAX_TOP_K).unwrap_or(DEFAULT_TOP_K);
        let segments_per_record = range(
            &mut v,
            "segmentsPerRecord",
            self.segments_per_record,
            1,
            MAX_SEGMENTS_PER_RECORD,
        )
        .unwrap_or(1);
        let identity = identities(&mut v, self.identity, self.email);
        let mode = crate::tools::api::retrieval_mode(&mut v, self.mode.as_deref());
        let query_embedding =
            crate::tools::api::query_embedding(&mut v, "queryEmbedding", self.query_embedding);
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(ContextSearch {
            project_id,
            query,
            document,
            sources,
            sync_ids,
            top_k,
            segments_per_record,
            rerank: self.rerank,
            identity,
            mode,
            diagnostics: self.diagnostics,
            query_embedding,
        })
    }
}

fn sources(v: &mut Vec<FieldViolation>, sources: Option<Vec<String>>) -> Vec<String> {
    let Some(sources) = sources else {
        return Vec::new();
    };
    if sources.is_empty() || sources.len() > MAX_SOURCES {
        v.push(FieldViolation::new(
            "sources",
            format!(
                "must list 1 to {MAX_SOURCES} sources when present (omit it to search all), got {}",
                sources.len()
            ),
        ));
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for (i, s) in sources.into_iter().enumerate() {
        if !SOURCES.contains(&s.as_str()) {
            v.push(FieldViolation::new(
                format!("sources[{i}]"),
                format!(
                    "`{}` is not a source; expected one of {}",
                    truncate(&s, 32),
                    SOURCES.join(", ")
                ),
            ));
        } else if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A sync id: a UUID, returned in its lowercase hyphenated form.
pub fn parse_sync_id(field: &str, value: &str) -> Result<String, FieldViolation> {
    uuid::Uuid::try_parse(value)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| {
            FieldViolation::new(
                field,
                format!("must be a UUID, got `{}`", truncate(value, 64)),
            )
        })
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextSearchResponse {
    pub results: Vec<ContextResult>,
    pub usage: ContextUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextResult {
    /// `{syncId}.{recordId}`.
    pub id: String,
    pub sync_id: String,
    pub source: String,
    pub relevancy: f64,
    /// Always present; null when the record was not reranked.
    pub rerank_score: Option<f64>,
    pub generation: u64,
    pub display_name: Option<String>,
    pub segments: Vec<ResultSegment>,
    /// Where each retriever ranked the record (by its best passage); only with diagnostics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explain>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultSegment {
    pub pointer: String,
    /// Deprecated alias of `pointer`.
    pub chunk_id: String,
    pub text: String,
    pub relevancy: f64,
    pub rerank_score: Option<f64>,
    /// With a query document's `highlight`: fragments of `text` holding matched words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub highlights: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    pub returned: u32,
    pub segments_returned: u32,
    pub generation: u64,
    pub retrieval_mode: &'static str,
    pub rerank_outcome: &'static str,
    pub dropped: Drops,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<&'static str>,
    pub underfilled: bool,
    pub permission_filtered: bool,
    pub identities: AppliedIdentities,
    /// The version of the project's context ranking model, learned from its feedback, that
    /// fused the retrievers' lists; 0: the deployment's weights.
    pub ranking_model: u64,
    /// With a query document's `countExactly`: readable records its `query` and `filter` allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drops {
    pub segments_beyond_pool_cap: u64,
    pub segments_unjoinable: u64,
    pub segments_not_searchable: u64,
    pub records_beyond_top_k: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AppliedIdentities {
    /// Principals applied, by searched source.
    pub applied: BTreeMap<String, Vec<String>>,
    /// Accounts that matched no searched source.
    pub unused: Vec<UnusedIdentity>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UnusedIdentity {
    pub source: Option<String>,
    pub principal: String,
}

// ---- Read around a segment ----

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawReadContext {
    pub pointer: Option<String>,
    pub before: Option<Int>,
    pub after: Option<Int>,
    pub identity: Option<RawIdentity>,
    pub email: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReadContext {
    pub project_id: String,
    pub pointer: String,
    pub before: u32,
    pub after: u32,
    pub identity: Vec<IdentityEntry>,
}

impl RawReadContext {
    pub fn validate(self, project_id: String) -> Result<ReadContext, Error> {
        let mut v = Vec::new();
        let pointer = match self.pointer {
            Some(p) if !p.is_empty() && p.len() <= 4096 => p,
            Some(_) => {
                v.push(FieldViolation::new(
                    "pointer",
                    "must be a pointer from a search result",
                ));
                String::new()
            }
            None => {
                v.push(FieldViolation::new("pointer", "is required"));
                String::new()
            }
        };
        let before = range(&mut v, "before", self.before, 0, MAX_READ_AROUND).unwrap_or(1);
        let after = range(&mut v, "after", self.after, 0, MAX_READ_AROUND).unwrap_or(1);
        let identity = identities(&mut v, self.identity, self.email);
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(ReadContext {
            project_id,
            pointer,
            before,
            after,
            identity,
        })
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadContextResponse {
    /// `{syncId}.{recordId}`.
    pub id: String,
    pub sync_id: String,
    pub source: String,
    pub display_name: Option<String>,
    pub generation: u64,
    /// Segments of the whole record.
    pub total_segments: u32,
    pub segments: Vec<ContextSegment>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextSegment {
    pub pointer: String,
    pub text: String,
    pub ordinal: u32,
    pub anchor: bool,
}

// ---- Syncs ----

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCreateSync {
    pub id: Option<String>,
    pub source: Option<String>,
    pub owner: Option<String>,
    /// Metadata fields the sync's records carry (in `metadata`), each with a kind.
    pub fields: Option<Vec<RawFieldDecl>>,
}

/// A metadata field declaration as received.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFieldDecl {
    pub name: Option<String>,
    pub kind: Option<String>,
}

/// Most metadata fields a sync may declare.
pub const MAX_DECLARED_FIELDS: usize = 32;

/// Checks a sync's metadata declarations: names of 1 to 64 letters, digits and `_` starting with a
/// letter, distinct, none a field every record has; kinds keyword, text, numeric, date or bool.
fn declared_fields(v: &mut Vec<FieldViolation>, raw: Option<Vec<RawFieldDecl>>) -> Vec<FieldDecl> {
    let Some(raw) = raw else {
        return Vec::new();
    };
    if raw.len() > MAX_DECLARED_FIELDS {
        v.push(FieldViolation::new(
            "fields",
            format!(
                "must have at most {MAX_DECLARED_FIELDS} items, got {}",
                raw.len()
            ),
        ));
        return Vec::new();
    }
    let mut out: Vec<FieldDecl> = Vec::new();
    for (i, d) in raw.into_iter().enumerate() {
        let name = match d.name {
            None => {
                v.push(FieldViolation::new(
                    format!("fields[{i}].name"),
                    "is required",
                ));
                continue;
            }
            Some(name) => name,
        };
        let shaped = name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !shaped {
            v.push(FieldViolation::new(
                format!("fields[{i}].name"),
                "must be 1 to 64 letters, digits or `_`, starting with a letter",
            ));
            continue;
        }
        if agentsearch_query::Catalog::is_content_field(&name) {
            v.push(FieldViolation::new(
                format!("fields[{i}].name"),
                format!("`{name}` is a field every record has; choose another name"),
            ));
            continue;
        }
        if out.iter().any(|f| f.name == name) {
            v.push(FieldViolation::new(
                format!("fields[{i}].name"),
                format!("`{name}` is declared more than once"),
            ));
            continue;
        }
        match d.kind.as_deref() {
            Some(kind) if agentsearch_query::FieldKind::from_declared(kind).is_some() => {
                out.push(FieldDecl {
                    name,
                    kind: kind.to_string(),
                });
            }
            other => v.push(FieldViolation::new(
                format!("fields[{i}].kind"),
                format!(
                    "must be one of keyword, text, numeric, date, bool; got {}",
                    other.map_or("nothing".to_string(), |k| format!("`{}`", truncate(k, 32)))
                ),
            )),
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateSync {
    pub project_id: String,
    pub id: String,
    pub source: String,
    pub owner: String,
    pub fields: Vec<FieldDecl>,
}

impl RawCreateSync {
    pub fn validate(self, project_id: String) -> Result<CreateSync, Error> {
        let mut v = Vec::new();
        let id = match self.id {
            None => uuid::Uuid::new_v4().hyphenated().to_string(),
            Some(id) => parse_sync_id("id", &id).unwrap_or_else(|e| {
                v.push(e);
                String::new()
            }),
        };
        let source = match self.source {
            None => {
                v.push(FieldViolation::new("source", "is required"));
                String::new()
            }
            Some(s) if SOURCES.contains(&s.as_str()) => s,
            Some(s) => {
                v.push(FieldViolation::new(
                    "source",
                    format!(
                        "`{}` is not a source; expected one of {}",
                        truncate(&s, 32),
                        SOURCES.join(", ")
                    ),
                ));
                String::new()
            }
        };
        let owner = match self.owner.map(|o| o.trim().to_string()) {
            Some(o)
                if !o.is_empty()
                    && o.chars().count() <= MAX_PRINCIPAL_CHARS
                    && !o.chars().any(char::is_control) =>
            {
                o
            }
            Some(_) => {
                v.push(FieldViolation::new(
                    "owner",
                    format!("must be 1 to {MAX_PRINCIPAL_CHARS} printable characters"),
                ));
                String::new()
            }
            None => {
                v.push(FieldViolation::new("owner", "is required"));
                String::new()
            }
        };
        let fields = declared_fields(&mut v, self.fields);
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(CreateSync {
            project_id,
            id,
            source,
            owner,
            fields,
        })
    }
}

/// A sync's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    pub id: String,
    pub source: String,
    pub owner: String,
    pub generation: u64,
    pub records: u64,
    pub segments: u64,
    pub created_at_ms: i64,
    pub last_ingest_at_ms: Option<i64>,
    /// Metadata fields its records carry.
    pub fields: Vec<FieldDecl>,
}

// ---- Records ----

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawUpsertRecords {
    #[serde(default)]
    pub records: Vec<RawRecord>,
    pub embedding: Option<EmbeddingSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRecord {
    pub id: Option<String>,
    pub display_name: Option<String>,
    pub text: Option<String>,
    pub mime: Option<String>,
    pub modified_at: Option<String>,
    pub created_at: Option<String>,
    pub author: Option<String>,
    pub url: Option<String>,
    pub path: Option<String>,
    /// Values of the metadata fields the sync declares.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    pub acl: Option<Acl>,
    pub segments: Option<Vec<SegmentInput>>,
}

/// A precomputed passage (bring your own embeddings).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegmentInput {
    pub text: String,
    pub vector: Vec<f32>,
}

/// The model and dimension precomputed vectors were made with.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSpec {
    pub model: String,
    #[serde(deserialize_with = "crate::tools::api::u32_field")]
    pub dimension: u32,
}

/// A validated record.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordInput {
    pub id: String,
    pub display_name: Option<String>,
    pub text: String,
    pub mime: String,
    pub modified_at: Option<String>,
    pub acl: Acl,
    /// Precomputed segments, if the caller brought its own embeddings.
    pub segments: Option<Vec<SegmentInput>>,
    /// Its typed field values as indexed: mime, author, url, path, dates, declared metadata.
    pub fields: Vec<FieldValue>,
}

/// Validates a batch of records. `model` is the deployment's model id and dimension, against
/// which precomputed vectors are checked.
pub fn validate_records(
    raw: RawUpsertRecords,
    model: (&str, usize),
    declared: &[FieldDecl],
) -> Result<Vec<RecordInput>, Error> {
    let mut v = Vec::new();
    if raw.records.len() > MAX_RECORDS {
        return Err(Error::invalid(
            "records",
            format!(
                "at most {MAX_RECORDS} records per batch, got {}",
                raw.records.len()
            ),
        ));
    }
    if let Some(spec) = &raw.embedding {
        let model_matches = spec.model == model.0
            || spec
                .model
                .strip_prefix("sentence-transformers/")
                .is_some_and(|m| m == model.0);
        if !model_matches {
            v.push(FieldViolation::new(
                "embedding.model",
                format!(
                    "vectors must come from this deployment's model `{}`, got `{}`",
                    model.0,
                    truncate(&spec.model, 64)
                ),
            ));
        }
        if spec.dimension as usize != model.1 {
            v.push(FieldViolation::new(
                "embedding.dimension",
                format!(
                    "this deployment's model has {} dimensions, got {}",
                    model.1, spec.dimension
                ),
            ));
        }
    }
    let byo = raw.embedding.is_some();
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(raw.records.len());
    for (i, r) in raw.records.into_iter().enumerate() {
        let at = |f: &str| format!("records[{i}].{f}");
        let id = match r.id {
            None => {
                v.push(FieldViolation::new(at("id"), "is required"));
                continue;
            }
            Some(id) => match record_id_problem(&id) {
                Some(issue) => {
                    v.push(FieldViolation::new(at("id"), issue));
                    continue;
                }
                None => id,
            },
        };
        if !seen.insert(id.clone()) {
            v.push(FieldViolation::new(
                at("id"),
                format!(
                    "`{}` appears more than once in the batch",
                    truncate(&id, 64)
                ),
            ));
            continue;
        }
        let display_name = match r.display_name {
            Some(name) if name.chars().count() > MAX_DISPLAY_NAME_CHARS => {
                v.push(FieldViolation::new(
                    at("displayName"),
                    format!("must be at most {MAX_DISPLAY_NAME_CHARS} characters"),
                ));
                None
            }
            Some(name) if name.trim().is_empty() => None,
            other => other,
        };
        let Some(acl) = r.acl else {
            v.push(FieldViolation::new(
                at("acl"),
                "is required: list who may read the record (users, groups, domains, or anyone: true)",
            ));
            continue;
        };
        for (list, values) in [
            ("users", &acl.users),
            ("groups", &acl.groups),
            ("domains", &acl.domains),
        ] {
            if values.len() > MAX_ACL_ENTRIES {
                v.push(FieldViolation::new(
                    at(&format!("acl.{list}")),
                    format!("must have at most {MAX_ACL_ENTRIES} entries"),
                ));
            }
            for (j, value) in values.iter().enumerate() {
                if value.trim().is_empty()
                    || value.chars().count() > MAX_PRINCIPAL_CHARS
                    || value.chars().any(char::is_control)
                {
                    v.push(FieldViolation::new(
                        at(&format!("acl.{list}[{j}]")),
                        format!("must be 1 to {MAX_PRINCIPAL_CHARS} printable characters"),
                    ));
                }
            }
        }
        // Empty is absent, as over gRPC.
        let mime = r
            .mime
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "text/plain".to_string());
        if mime.len() > 255 || mime.chars().any(char::is_control) {
            v.push(FieldViolation::new(
                at("mime"),
                "must be a media type of at most 255 characters",
            ));
        }
        let mut fields = vec![FieldValue {
            name: "mime".into(),
            value: FieldData::Keyword(mime.clone()),
        }];
        for (name, value) in [("modifiedAt", &r.modified_at), ("createdAt", &r.created_at)] {
            let Some(t) = value else { continue };
            match rfc3339_ms(t) {
                Some(ms) => fields.push(FieldValue {
                    name: name.into(),
                    value: FieldData::Date(ms),
                }),
                None => v.push(FieldViolation::new(
                    at(name),
                    format!(
                        "must be an RFC 3339 timestamp such as 2026-04-01T12:00:00Z in the years \
                         1678 to 2261, got `{}`",
                        truncate(t, 40)
                    ),
                )),
            }
        }
        for (name, value) in [("author", &r.author), ("url", &r.url), ("path", &r.path)] {
            let Some(value) = value else { continue };
            if value.is_empty()
                || value.len() > MAX_KEYWORD_BYTES
                || value.chars().any(char::is_control)
            {
                v.push(FieldViolation::new(
                    at(name),
                    format!("must be 1 to {MAX_KEYWORD_BYTES} bytes without control characters"),
                ));
            } else {
                fields.push(FieldValue {
                    name: name.into(),
                    value: FieldData::Keyword(value.clone()),
                });
            }
        }
        if let Some(metadata) = &r.metadata {
            metadata_values(&mut v, &at("metadata"), metadata, declared, &mut fields);
        }
        let segments = match (r.segments, byo) {
            (Some(_), false) => {
                v.push(FieldViolation::new(
                    at("segments"),
                    "precomputed segments need `embedding` (model and dimension) on the request",
                ));
                None
            }
            (None, true) => {
                v.push(FieldViolation::new(
                    at("segments"),
                    "is required when the request carries `embedding`",
                ));
                None
            }
            (Some(segments), true) => {
                if r.text.is_some() {
                    v.push(FieldViolation::new(
                        at("text"),
                        "send either text or precomputed segments, not both",
                    ));
                }
                if segments.len() > MAX_SEGMENTS_PER_INPUT {
                    v.push(FieldViolation::new(
                        at("segments"),
                        format!("must have at most {MAX_SEGMENTS_PER_INPUT} segments"),
                    ));
                }
                for (j, s) in segments.iter().enumerate() {
                    if s.text.trim().is_empty() {
                        v.push(FieldViolation::new(
                            at(&format!("segments[{j}].text")),
                            "must not be empty",
                        ));
                    }
                    if s.vector.len() != model.1 {
                        v.push(FieldViolation::new(
                            at(&format!("segments[{j}].vector")),
                            format!("must have {} dimensions, got {}", model.1, s.vector.len()),
                        ));
                    } else if s.vector.iter().any(|x| !x.is_finite())
                        || s.vector.iter().all(|x| *x == 0.0)
                    {
                        v.push(FieldViolation::new(
                            at(&format!("segments[{j}].vector")),
                            "must be finite and not all zeros",
                        ));
                    }
                }
                Some(segments)
            }
            (None, false) => None,
        };
        let text = r.text.unwrap_or_default();
        if text.len() > MAX_TEXT_BYTES {
            v.push(FieldViolation::new(
                at("text"),
                format!("must be at most {MAX_TEXT_BYTES} bytes"),
            ));
        }
        out.push(RecordInput {
            id,
            display_name,
            text,
            mime,
            modified_at: r.modified_at,
            acl,
            segments,
            fields,
        });
    }
    if !v.is_empty() {
        return Err(Error::invalid_many(v));
    }
    Ok(out)
}

/// Longest keyword value of a record (author, url, path, keyword metadata), in bytes.
pub const MAX_KEYWORD_BYTES: usize = 2048;

/// Checks a record's `metadata` against the sync's declarations and adds the typed values: each
/// key a declared field, each value of its kind (keyword and text: strings; numeric: finite
/// numbers; date: ISO 8601 dates or date-times; bool: booleans), `null` as absent.
fn metadata_values(
    v: &mut Vec<FieldViolation>,
    at: &str,
    metadata: &serde_json::Map<String, serde_json::Value>,
    declared: &[FieldDecl],
    out: &mut Vec<FieldValue>,
) {
    use serde_json::Value;
    for (name, value) in metadata {
        let path = format!("{at}.{}", truncate(name, 64));
        let Some(decl) = declared.iter().find(|d| &d.name == name) else {
            let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
            v.push(FieldViolation::new(
                path,
                match names.is_empty() {
                    true => "this sync declares no metadata fields".to_string(),
                    false => format!(
                        "is not declared by this sync; it declares {}",
                        names.join(", ")
                    ),
                },
            ));
            continue;
        };
        let data = match (decl.kind.as_str(), value) {
            (_, Value::Null) => continue,
            ("keyword", Value::String(s)) if !s.is_empty() && s.len() <= MAX_KEYWORD_BYTES => {
                Some(FieldData::Keyword(s.clone()))
            }
            ("text", Value::String(s)) if s.len() <= MAX_TEXT_BYTES => {
                Some(FieldData::Text(s.clone()))
            }
            ("numeric", Value::Number(n)) => {
                n.as_f64().filter(|x| x.is_finite()).map(FieldData::Number)
            }
            ("date", Value::String(s)) => agentsearch_query::parse::parse_date(s)
                .ok()
                .and_then(indexable_date)
                .map(FieldData::Date),
            ("bool", Value::Bool(b)) => Some(FieldData::Flag(*b)),
            _ => None,
        };
        match data {
            Some(value) => out.push(FieldValue {
                name: name.clone(),
                value,
            }),
            None => v.push(FieldViolation::new(
                path,
                match decl.kind.as_str() {
                    "keyword" => {
                        format!("must be a string of 1 to {MAX_KEYWORD_BYTES} bytes (a keyword)")
                    }
                    "text" => format!("must be a string of at most {MAX_TEXT_BYTES} bytes"),
                    "numeric" => "must be a number".to_string(),
                    "date" => "must be a date such as 2026-03-01 or 2026-03-01T09:30:00Z, in the \
                         years 1678 to 2261"
                        .to_string(),
                    _ => "must be true or false".to_string(),
                },
            )),
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 timestamp in the years an index holds, if it is
/// one.
fn rfc3339_ms(t: &str) -> Option<i64> {
    if !is_rfc3339(t) {
        return None;
    }
    indexable_date(agentsearch_query::parse::parse_date(t).ok()?)
}

/// `ms` if an index can hold it (the years 1678 to 2261).
fn indexable_date(ms: i64) -> Option<i64> {
    agentsearch_common::shard::DATE_MS_RANGE
        .contains(&ms)
        .then_some(ms)
}

/// Why a record id is not acceptable, if it is not.
pub fn record_id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        Some("must not be empty".into())
    } else if id.chars().count() > MAX_RECORD_ID_CHARS {
        Some(format!("must be at most {MAX_RECORD_ID_CHARS} characters"))
    } else if id.chars().any(char::is_control) {
        Some("must not contain control characters".into())
    } else {
        None
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`, with field ranges checked.
fn is_rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .filter(|s| s.iter().all(u8::is_ascii_digit))
            .map(|s| s.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let (Some(_y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
    ) else {
        return false;
    };
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' {
        return false;
    }
    if b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 {
        return false;
    }
    if s > 60 {
        return false;
    }
    let mut rest = &t[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        "Z" | "z" => true,
        offset if offset.len() == 6 => {
            let o = offset.as_bytes();
            matches!(o[0], b'+' | b'-')
                && o[3] == b':'
                && offset[1..3].parse::<u32>().is_ok_and(|h| h <= 23)
                && offset[4..6].parse::<u32>().is_ok_and(|m| m <= 59)
        }
        _ => false,
    }
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawDeleteRecords {
    #[serde(default)]
    pub ids: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPutGroups {
    #[serde(default)]
    pub groups: Vec<RawGroup>,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawGroup {
    pub id: String,
    #[serde(default)]
    pub members: Vec<String>,
}

/// Validated groups: id and normalised (lowercased) members.
pub fn validate_groups(raw: RawPutGroups) -> Result<Vec<(String, Vec<String>)>, Error> {
    let mut v = Vec::new();
    if raw.groups.len() > MAX_GROUPS {
        return Err(Error::invalid(
            "groups",
            format!("at most {MAX_GROUPS} groups per call"),
        ));
    }
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (i, g) in raw.groups.into_iter().enumerate() {
        let id = g.id.trim().to_string();
        if id.is_empty()
            || id.chars().count() > MAX_PRINCIPAL_CHARS
            || id.chars().any(char::is_control)
        {
            v.push(FieldViolation::new(
                format!("groups[{i}].id"),
                format!("must be 1 to {MAX_PRINCIPAL_CHARS} printable characters"),
            ));
            continue;
        }
        if out.iter().any(|(existing, _)| *existing == id) {
            v.push(FieldViolation::new(
                format!("groups[{i}].id"),
                "appears more than once",
            ));
            continue;
        }
        if g.members.len() > MAX_ACL_ENTRIES {
            v.push(FieldViolation::new(
                format!("groups[{i}].members"),
                format!("must have at most {MAX_ACL_ENTRIES} members"),
            ));
            continue;
        }
        let mut members = Vec::with_capacity(g.members.len());
        for (j, m) in g.members.iter().enumerate() {
            match principal::checked(m) {
                Ok(m) => members.push(m),
                Err(_) => v.push(FieldViolation::new(
                    format!("groups[{i}].members[{j}]"),
                    format!("must be 1 to {MAX_PRINCIPAL_CHARS} printable characters"),
                )),
            }
        }
        members.sort();
        members.dedup();
        out.push((id, members));
    }
    if !v.is_empty() {
        return Err(Error::invalid_many(v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(err: Error) -> Vec<String> {
        match err {
            Error::InvalidArgument { violations, .. } => {
                violations.into_iter().map(|v| v.field).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn search_defaults() {
        let raw: RawContextSearch = from_json(br#"{"query": "q2 roadmap"}"#).unwrap();
        let req = raw.validate("p".into()).unwrap();
        assert_eq!((req.top_k, req.segments_per_record), (10, 1));
        assert!(req.identity.is_empty() && req.sources.is_empty());
        assert_eq!(req.rerank, None);
    }

    #[test]
    fn every_bad_search_field_is_named() {
        let raw: RawContextSearch = from_json(
            br#"{"query": " ", "sources": ["gdrive"], "syncIds": ["nope"], "topK": 51,
                 "segmentsPerRecord": 0, "identity": [{"principal": "", "source": "box"}], "mode": "x"}"#,
        )
        .unwrap();
        assert_eq!(
            fields(raw.validate("p".into()).unwrap_err()),
            [
                "query",
                "sources[0]",
                "syncIds[0]",
                "topK",
                "segmentsPerRecord",
                "identity[0].principal",
                "mode"
            ]
        );
    }

    #[test]
    fn unknown_and_mistyped_properties_are_named() {
        let err = from_json::<RawContextSearch>(br#"{"query": "x", "topk": 3}"#).unwrap_err();
        assert_eq!(fields(err), ["topk"]);
        let raw = from_json::<RawContextSearch>(br#"{"query": 3}"#).unwrap();
        assert_eq!(fields(raw.validate("p".into()).unwrap_err()), ["query"]);
        let err = from_json::<RawUpsertRecords>(
            br#"{"records": [{"id": "a", "acl": {"users": [], "everyone": true}}]}"#,
        )
        .unwrap_err();
        assert_eq!(fields(err), ["records[0].acl.everyone"]);
        let err = from_json::<RawContextSearch>(b"[1]").unwrap_err();
        assert_eq!(fields(err), ["body"]);
    }

    #[test]
    fn identities_per_source_and_the_deprecated_email() {
        let raw: RawContextSearch = from_json(
            br#"{"query": "x", "identity": [{"principal": "a@x.com", "source": "box"}, {"principal": "U1"}]}"#,
        )
        .unwrap();
        let req = raw.validate("p".into()).unwrap();
        assert_eq!(req.identity.len(), 2);
        assert_eq!(req.identity[0].source.as_deref(), Some("box"));
        let raw: RawContextSearch = from_json(br#"{"query": "x", "email": "a@x.com"}"#).unwrap();
        assert_eq!(
            raw.validate("p".into()).unwrap().identity[0].principal,
            "a@x.com"
        );
        let raw: RawContextSearch =
            from_json(br#"{"query": "x", "email": "a@x.com", "identity": "b@x.com"}"#).unwrap();
        assert_eq!(fields(raw.validate("p".into()).unwrap_err()), ["email"]);
        let raw: RawContextSearch = from_json(br#"{"query": "x", "identity": []}"#).unwrap();
        assert_eq!(fields(raw.validate("p".into()).unwrap_err()), ["identity"]);
    }

    fn issues(err: Error) -> Vec<(String, String)> {
        match err {
            Error::InvalidArgument { violations, .. } => {
                violations.into_iter().map(|v| (v.field, v.issue)).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn identities_of_the_wrong_shape_say_what_is_expected() {
        let whole = "must be a string (one principal) or an array of {principal, source} objects";
        for identity in ["5", "true", r#"{"a": 1}"#, "1.5"] {
            let body = format!(r#"{{"query": "x", "identity": {identity}}}"#);
            let err = from_json::<RawContextSearch>(body.as_bytes()).unwrap_err();
            assert_eq!(
                issues(err),
                [("identity".to_string(), whole.to_string())],
                "{identity}"
            );
        }
        let item = "must be a {principal, source} object";
        for (identity, field) in [
            ("[5]", "identity[0]"),
            (r#"[{"principal": "a@x.com"}, "b@x.com"]"#, "identity[1]"),
            (r#"[[{"principal": "a@x.com"}]]"#, "identity[0]"),
        ] {
            let body = format!(r#"{{"pointer": "p", "identity": {identity}}}"#);
            let err = from_json::<RawReadContext>(body.as_bytes()).unwrap_err();
            assert_eq!(
                issues(err),
                [(field.to_string(), item.to_string())],
                "{identity}"
            );
        }
        let err =
            from_json::<RawContextSearch>(br#"{"query": "x", "identity": [{"principal": 5}]}"#)
                .unwrap_err();
        assert_eq!(fields(err), ["identity[0].principal"]);
        let raw: RawContextSearch = from_json(br#"{"query": "x", "identity": "a@x.com"}"#).unwrap();
        assert!(matches!(raw.identity, Some(RawIdentity::One(p)) if p == "a@x.com"));
    }

    #[test]
    fn integers_beyond_64_bits_are_out_of_range() {
        for (top_k, shown) in [
            (
                "12345678901234567890123",
                "an integer too large to represent",
            ),
            ("18446744073709551615", "18446744073709551615"),
            (
                "-99999999999999999999999",
                "a negative integer too large to represent",
            ),
        ] {
            let body = format!(r#"{{"query": "x", "topK": {top_k}}}"#);
            let raw: RawContextSearch = from_json(body.as_bytes()).unwrap();
            assert_eq!(
                issues(raw.validate("p".into()).unwrap_err()),
                [(
                    "topK".to_string(),
                    format!("must be between 1 and 50, got {shown}")
                )]
            );
        }
        // Other mistakes keep their messages.
        let err = from_json::<RawContextSearch>(br#"{"query": "x", "topK": 2.5}"#).unwrap_err();
        assert_eq!(
            issues(err)[0].1,
            "invalid type: floating point `2.5`, expected i64"
        );
        let err = from_json::<RawContextSearch>(br#"{"query": "x", "topK": "3"}"#).unwrap_err();
        assert_eq!(issues(err)[0].1, "invalid type: string \"3\", expected i64");
        let body = br#"{"embedding": {"model": "m", "dimension": 12345678901234567890123}}"#;
        let err = from_json::<RawUpsertRecords>(body).unwrap_err();
        assert_eq!(
            issues(err),
            [(
                "embedding.dimension".to_string(),
                "invalid value: an integer too large to represent, expected u32".to_string()
            )]
        );
        let body = br#"{"embedding": {"model": "m", "dimension": -1}}"#;
        let err = from_json::<RawUpsertRecords>(body).unwrap_err();
        assert_eq!(
            issues(err)[0].1,
            "invalid value: integer `-1`, expected u32"
        );
    }

    #[test]
    fn records_are_checked_field_by_field() {
        let raw: RawUpsertRecords = from_json(
            br#"{"records": [
                {"id": "a", "text": "x", "acl": {"anyone": true}},
                {"id": "a", "text": "x", "acl": {"anyone": true}},
                {"text": "x", "acl": {"anyone": true}},
                {"id": "b", "text": "x"},
                {"id": "c", "text": "x", "modifiedAt": "yesterday", "acl": {"users": [""]}},
                {"id": "d", "acl": {"anyone": true}, "segments": [{"text": "t", "vector": [1.0]}]}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            fields(validate_records(raw, ("m", 2), &[]).unwrap_err()),
            [
                "records[1].id",
                "records[2].id",
                "records[3].acl",
                "records[4].acl.users[0]",
                "records[4].modifiedAt",
                "records[5].segments"
            ]
        );
    }

    #[test]
    fn precomputed_vectors_must_match_the_model() {
        let body = br#"{"embedding": {"model": "other", "dimension": 3},
            "records": [{"id": "a", "acl": {"anyone": true}, "segments": [{"text": "t", "vector": [1.0, 0.0]}]}]}"#;
        let raw: RawUpsertRecords = from_json(body).unwrap();
        assert_eq!(
            fields(validate_records(raw, ("m", 2), &[]).unwrap_err()),
            ["embedding.model", "embedding.dimension"]
        );
        let body = br#"{"embedding": {"model": "sentence-transformers/m", "dimension": 2},
            "records": [{"id": "a", "acl": {"anyone": true}, "segments": [{"text": "t", "vector": [1.0, 0.0, 0.0]}]}]}"#;
        let raw: RawUpsertRecords = from_json(body).unwrap();
        assert_eq!(
            fields(validate_records(raw, ("m", 2), &[]).unwrap_err()),
            ["records[0].segments[0].vector"]
        );
        let body = br#"{"embedding": {"model": "m", "dimension": 2},
            "records": [{"id": "a", "acl": {"anyone": true}, "segments": [{"text": "t", "vector": [0.6, 0.8]}]}]}"#;
        let raw: RawUpsertRecords = from_json(body).unwrap();
        assert_eq!(validate_records(raw, ("m", 2), &[]).unwrap().len(), 1);
    }

    #[test]
    fn timestamps() {
        for ok in [
            "2026-04-01T12:00:00Z",
            "2026-04-01T12:00:00.123+02:00",
            "2026-12-31t23:59:60z",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2026-04-01",
            "2026-13-01T12:00:00Z",
            "2026-04-01T12:00:00",
            "2026-04-01T12:00:00.Z",
            "2026-04-01T12:00:00+2:00",
            "2026-04-01T25:00:00Z",
            "",
            "2026-04-01T12:00:00Zjunk",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    #[test]
    fn groups_are_normalised() {
        let raw: RawPutGroups = from_json(
            br#"{"groups": [{"id": "eng", "members": ["Bob@Example.com", "bob@example.com"]}, {"id": "eng"}]}"#,
        )
        .unwrap();
        assert_eq!(fields(validate_groups(raw).unwrap_err()), ["groups[1].id"]);
        let raw: RawPutGroups =
            from_json(br#"{"groups": [{"id": "eng", "members": ["Bob@Example.com"]}]}"#).unwrap();
        assert_eq!(
            validate_groups(raw).unwrap(),
            [("eng".to_string(), vec!["bob@example.com".to_string()])]
        );
    }
}
