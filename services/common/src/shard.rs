//! The internal shard API as a Rust trait, so the router can call a shard in the same process
//! (embedded default) or over gRPC (distributed) through one type. No tonic or prost here: the
//! proto crate converts these types to and from the wire.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::tool::{SideEffect, ToolRecord};

/// What a shard does for the router.
#[async_trait::async_trait]
pub trait ShardApi: Send + Sync + 'static {
    /// Identity and size of the shard.
    async fn info(&self) -> Result<ShardInfo>;
    /// BM25 statistics of the query's terms over the named indexes, so that scores from
    /// different indexes and shards are computed against the same global statistics; with the
    /// stamp of the indexes counted (see [`ScopeStats`]).
    async fn term_stats(&self, request: TermStatsRequest) -> Result<ScopeStats>;
    /// Ranked lexical and dense candidates over the named indexes, filters applied inside.
    async fn search_tools(&self, request: ShardSearchRequest) -> Result<ShardSearchResponse>;
    /// Ranks tools carried in the request exactly as catalog tools are ranked (same analysis,
    /// scoring and filters), from an index built for this call only: nothing is persisted.
    async fn search_inline(&self, request: InlineSearchRequest) -> Result<ShardSearchResponse>;
    /// Inserts or replaces tools (by name), each in its integration's index.
    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Result<ShardWriteResponse>;
    /// Deletes tools (by name) of one integration; unknown names are ignored.
    async fn delete_tools(&self, request: ShardDeleteRequest) -> Result<ShardWriteResponse>;
    /// Stored tools of one integration by name; unknown names are left out.
    async fn get_tools(&self, request: GetToolsRequest) -> Result<GetToolsResponse>;

    /// BM25 statistics of the query's terms over the named syncs' segment indexes.
    async fn context_term_stats(&self, request: ContextStatsRequest) -> Result<TermStats>;
    /// Ranked lexical and dense segments of the named syncs that the caller's principals may
    /// read; nothing else leaves the shard.
    async fn search_segments(&self, request: ContextSearchRequest)
    -> Result<ContextSearchResponse>;
    /// Inserts or replaces records (all of their segments) in the sync's segment index.
    async fn upsert_segments(&self, request: SegmentUpsertRequest) -> Result<ShardWriteResponse>;
    /// Deletes records (every segment) from the sync's index; unknown ids are ignored.
    async fn delete_records(&self, request: RecordDeleteRequest) -> Result<ShardWriteResponse>;
    /// The texts of segments named by record and ordinal, each only if its record exists and the
    /// caller's principals in its sync may read it.
    async fn fetch_segments(&self, request: SegmentFetchRequest) -> Result<SegmentFetchResponse>;
    /// A segment and its neighbours, if the principals may read its record.
    async fn read_segments(
        &self,
        request: ReadSegmentsRequest,
    ) -> Result<Option<ReadSegmentsResponse>>;

    // Replica repair: what a shard holds of one index, to copy it to another replica.
    /// Every tool of one integration's index, with its vector.
    async fn export_tools(&self, request: ExportToolsRequest) -> Result<Vec<IndexedTool>>;
    /// Records of one sync's index and their generations, in id order, after a cursor.
    async fn list_records(&self, request: ListRecordsRequest) -> Result<Vec<RecordVersion>>;
    /// Records of one sync's index as they were written; unknown ids are left out.
    async fn export_records(&self, request: ExportRecordsRequest) -> Result<Vec<IndexedRecord>>;
}

/// Every tool of one integration's index on a shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportToolsRequest {
    pub project_id: String,
    pub integration: String,
}

/// The first `limit` records of a sync's index whose ids sort after `after`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRecordsRequest {
    pub project_id: String,
    pub sync_id: String,
    pub after: String,
    pub limit: u32,
}

/// A record a shard holds and the generation it was written with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordVersion {
    pub record_id: String,
    pub generation: u64,
}

/// Records of a sync's index by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportRecordsRequest {
    pub project_id: String,
    pub sync_id: String,
    pub record_ids: Vec<String>,
}

/// Most records one list call returns.
pub const MAX_LIST_RECORDS: u32 = 10_000;
/// Most segments one fetch call names.
pub const MAX_FETCH_SEGMENTS: usize = 4096;
/// Most records one export call returns.
pub const MAX_EXPORT_RECORDS: usize = 256;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// Stable id, kept in the shard's data dir; placement records refer to it.
    pub shard_id: String,
    pub indexes: u64,
    pub tools: u64,
    /// Resident set size of the shard's process, in bytes (0 where unknown).
    pub resident_bytes: u64,
    /// Content indexes (per project and sync) and their segments.
    pub sync_indexes: u64,
    pub segments: u64,
    /// Sum of every index's generation: grows with every write applied.
    pub generations: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TermStatsRequest {
    pub project_id: String,
    pub integrations: Vec<String>,
    pub query: String,
}

/// BM25 statistics, summable across indexes and shards.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermStats {
    pub total_docs: u64,
    /// Total tokens per field name.
    pub field_tokens: BTreeMap<String, u64>,
    /// Document frequency per (field name, term text).
    pub doc_freqs: BTreeMap<(String, String), u64>,
}

impl TermStats {
    /// Adds another part's statistics to these.
    pub fn merge(&mut self, other: &TermStats) {
        self.total_docs += other.total_docs;
        for (field, tokens) in &other.field_tokens {
            *self.field_tokens.entry(field.clone()).or_default() += tokens;
        }
        for (key, df) in &other.doc_freqs {
            *self.doc_freqs.entry(key.clone()).or_default() += df;
        }
    }
}

/// A shard's BM25 statistics of a query over the named indexes, and the stamp of the index states
/// they were counted from.
///
/// A stamp is the wrapping sum over the indexes of a fingerprint of the integration and of every
/// statistic BM25 reads from the index (documents, tokens per field, each term's document frequency
/// per field), so the stamps of disjoint scopes add up to the stamp of their union whichever
/// replicas answered (replicas with the same statistics stamp alike, whatever their generations),
/// and a search that reports the same stamp ran on index states with exactly these statistics. The
/// router keeps statistics it has seen confirmed this way and skips the statistics round while the
/// searches keep confirming them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeStats {
    pub stats: TermStats,
    /// `None` from a shard that does not stamp.
    pub stamp: Option<u64>,
}

/// Which retrievers run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    #[default]
    Hybrid,
    Lexical,
    Dense,
}

impl RetrievalMode {
    pub fn lexical(self) -> bool {
        self != RetrievalMode::Dense
    }
    pub fn dense(self) -> bool {
        self != RetrievalMode::Lexical
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Dense => "dense",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardSearchRequest {
    pub project_id: String,
    /// The indexes to search; the router names them explicitly (one replica per integration).
    pub integrations: Vec<String>,
    pub query: String,
    /// The query embedding; `None` skips the dense retriever.
    pub vector: Option<Vec<f32>>,
    /// Only tools of these categories (empty: all).
    pub categories: Vec<String>,
    pub max_side_effect: Option<SideEffect>,
    /// Candidates per retriever.
    pub limit: u32,
    pub lexical: bool,
    /// Global statistics; `None` uses the statistics of the searched indexes.
    pub stats: Option<TermStats>,
    /// The structured part of a query JSON document (`{"v": 1, "query": ..., "filter": ...}`):
    /// both retrievers rank only the tools it allows.
    pub structured: Option<String>,
    /// A shard behind gRPC sends records only for the eligible hits ranked within the first
    /// `records` of either list (the router reads the others if it reaches them); `None`: every
    /// eligible hit's. An in-process shard shares its records without copying them and sends all.
    pub records: Option<u32>,
}

/// Tools of one integration, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetToolsRequest {
    pub project_id: String,
    pub integration: String,
    pub names: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct GetToolsResponse {
    /// The stored records of the names found, in request order.
    pub tools: Vec<ToolRecord>,
    /// The generation of the index they were read from (0 when the index does not exist).
    pub generation: u64,
}

/// A search of tools carried in the request instead of a catalog's indexes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InlineSearchRequest {
    pub project_id: String,
    /// The tools with their embeddings (at most 500); each names the integration its hits report.
    pub tools: Vec<IndexedTool>,
    pub query: String,
    /// The query embedding; `None` skips the dense retriever.
    pub vector: Option<Vec<f32>>,
    /// Only tools of these categories (empty: all).
    pub categories: Vec<String>,
    pub max_side_effect: Option<SideEffect>,
    /// Candidates per retriever.
    pub limit: u32,
    pub lexical: bool,
    /// The catalog's global statistics, to which the inline tools' own are added (so their scores
    /// are on the catalog's scale); `None` uses the inline tools' own only.
    pub stats: Option<TermStats>,
}

/// One ranked candidate of one retriever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub name: String,
    pub integration: String,
    pub score: f32,
}

/// Order of hits in every ranked list: score descending, then name ascending (deterministic ties).
/// Scores are compared with `-0.0` equal to `0.0` (adding `0.0` turns one into the other), so a
/// zero's sign, which depends on summation order, never decides a tie.
pub fn hit_order(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    (b.score + 0.0)
        .total_cmp(&(a.score + 0.0))
        .then_with(|| a.name.cmp(&b.name))
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardSearchResponse {
    /// Eligible lexical candidates, best first, at most `limit`.
    pub lexical: Vec<Hit>,
    /// Eligible dense candidates, best first, at most `limit`.
    pub dense: Vec<Hit>,
    /// Best candidates removed by the side-effect ceiling, per retriever (at most `limit` each);
    /// empty when no ceiling is set.
    pub excluded_lexical: Vec<Hit>,
    pub excluded_dense: Vec<Hit>,
    /// The stored tool of every eligible hit (shared with the index that holds it: an in-process
    /// shard answers without copying records); over gRPC, only those the request's `records`
    /// asks for.
    pub tools: Vec<std::sync::Arc<ToolRecord>>,
    /// Parts that failed; the rest of the answer is still valid.
    pub failures: Vec<PartFailure>,
    /// Time spent in each retriever over all indexes, and assembling the answer (diagnostics).
    pub timings: ShardTimings,
    /// The generation of each index that gave a hit (by integration): the version of the catalog
    /// its hits were ranked from. Indexes without a hit and indexes the shard does not hold are
    /// absent; empty for inline tools.
    pub generations: BTreeMap<String, u64>,
    /// With a structured query that asks for an exact count: the tools of each searched index
    /// (by integration) that satisfy it, the categories and the side-effect ceiling.
    pub matched: BTreeMap<String, u64>,
    /// With a structured query that asks for highlights: the matched fragments of the description
    /// of each tool in `tools` that has any, by name.
    pub highlights: BTreeMap<String, Vec<String>>,
    /// The request's structured query was applied (a shard that predates structured queries
    /// leaves it false, and the router does not use its answer).
    pub structured: bool,
    /// The stamp of the index states searched ([`ScopeStats::stamp`]); `None` for inline tools
    /// and from a shard that does not stamp.
    pub stamp: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShardTimings {
    /// Query analysis and BM25 statistics of the searched indexes (for a tool search a shard
    /// process hands to its worker pool, also the wait for the pool).
    pub prepare_ms: f64,
    pub lexical_ms: f64,
    pub dense_ms: f64,
    pub assemble_ms: f64,
}

/// A failure of one index or retriever on a shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartFailure {
    pub integration: String,
    /// `lexical`, `dense`, or empty for the whole index.
    pub retriever: String,
    pub message: String,
}

/// A tool with everything a shard indexes: the record and its embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedTool {
    pub record: ToolRecord,
    pub vector: Vec<f32>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardUpsertRequest {
    pub project_id: String,
    /// Tools of any integrations (each record names its own); the shard writes one index at a time.
    pub tools: Vec<IndexedTool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardDeleteRequest {
    pub project_id: String,
    pub integration: String,
    pub names: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardWriteResponse {
    /// Tools written or deleted.
    pub affected: u64,
    /// The index generation after the write (deletes; 0 for multi-index upserts).
    pub generation: u64,
    /// A segment upsert indexed the records' field values (a shard that predates record fields
    /// leaves it false, and the router does not take its acknowledgement).
    pub fields_indexed: bool,
}

/// The instants a date field holds, in milliseconds since the epoch: years 1678 to 2261 (the
/// index keeps dates in nanoseconds of an `i64`).
pub const DATE_MS_RANGE: std::ops::RangeInclusive<i64> = -9_200_000_000_000..=9_200_000_000_000;

// ---- Context search: segment indexes, one per (project, sync). ----

/// One segment (passage) of a record as a shard indexes it.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedSegment {
    /// Position in the record, from 0.
    pub ordinal: u32,
    pub text: String,
    /// Its embedding (unit length, the index's dimension).
    pub vector: Vec<f32>,
}

/// A record with everything a shard indexes: metadata, who may read it, and its segments.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexedRecord {
    pub record_id: String,
    pub display_name: Option<String>,
    /// How many times the record has been (re)ingested.
    pub generation: u64,
    /// Principal tokens of its ACL ([`crate::context::Acl::tokens`]); empty = nobody.
    pub principals: Vec<String>,
    /// Every segment of the record, in order; they replace whatever the index held for it.
    pub segments: Vec<IndexedSegment>,
    /// The record's field values: mime, author, url, path, its dates, and the metadata its sync
    /// declares ([`FieldDecl`]), at most one value per name.
    pub fields: Vec<FieldValue>,
}

/// A metadata field a sync declares for its records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldDecl {
    pub name: String,
    /// keyword, text, numeric, date or bool.
    pub kind: String,
}

/// One field value of a record.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldValue {
    pub name: String,
    pub value: FieldData,
}

/// A typed field value.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldData {
    /// Matched whole.
    Keyword(String),
    /// Analyzed.
    Text(String),
    Number(f64),
    /// Milliseconds since the Unix epoch.
    Date(i64),
    Flag(bool),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SegmentUpsertRequest {
    pub project_id: String,
    pub sync_id: String,
    pub records: Vec<IndexedRecord>,
    /// The metadata fields the sync declares.
    pub fields: Vec<FieldDecl>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordDeleteRequest {
    pub project_id: String,
    pub sync_id: String,
    pub record_ids: Vec<String>,
}

/// Statistics of a query's terms over the named syncs' segment indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextStatsRequest {
    pub project_id: String,
    pub sync_ids: Vec<String>,
    pub query: String,
}

/// One sync to search and the caller's principal tokens there: a segment is visible only if its
/// record's tokens share one with these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncScope {
    pub sync_id: String,
    pub principals: Vec<String>,
    /// The sync's source (the `source` field of typed queries).
    pub source: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextSearchRequest {
    pub project_id: String,
    pub syncs: Vec<SyncScope>,
    pub query: String,
    /// The query embedding; `None` skips the dense retriever.
    pub vector: Option<Vec<f32>>,
    /// Candidates per retriever.
    pub limit: u32,
    pub lexical: bool,
    /// Global statistics; `None` uses the searched indexes' own.
    pub stats: Option<TermStats>,
    /// The structured part of a query JSON document, as JSON (see the tool search's).
    pub structured: Option<String>,
    /// Metadata fields the searched syncs declare, for parsing `structured`.
    pub fields: Vec<FieldDecl>,
    /// Leave the hits' texts out of the answer (`segments` empty but for `texts_head`): the caller
    /// fetches the texts of the passages it returns with [`ShardApi::fetch_segments`]. Ignored
    /// with a structured query's `highlight` (the fragments are made where the query is parsed).
    pub defer_texts: bool,
    /// With `defer_texts`: the texts of the first this many hits of each list are in the answer
    /// all the same (adaptive fusion measures how much of the query they contain).
    pub texts_head: u32,
}

/// One ranked segment of one retriever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentHit {
    pub sync_id: String,
    pub record_id: String,
    pub ordinal: u32,
    pub score: f32,
}

impl SegmentHit {
    /// A key naming the segment uniquely within a project.
    pub fn key(&self) -> String {
        segment_key(&self.sync_id, &self.record_id, self.ordinal)
    }
}

/// The key of a segment within a project (sync and record ids cannot hold a newline).
pub fn segment_key(sync_id: &str, record_id: &str, ordinal: u32) -> String {
    format!("{sync_id}\n{record_id}\n{ordinal}")
}

/// Order of segment hits: score descending (`-0.0` equal to `0.0`, as in [`hit_order`]), then
/// sync, record and ordinal ascending.
pub fn segment_hit_order(a: &SegmentHit, b: &SegmentHit) -> std::cmp::Ordering {
    (b.score + 0.0)
        .total_cmp(&(a.score + 0.0))
        .then_with(|| a.sync_id.cmp(&b.sync_id))
        .then_with(|| a.record_id.cmp(&b.record_id))
        .then_with(|| a.ordinal.cmp(&b.ordinal))
}

/// A stored segment as a shard returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentData {
    pub sync_id: String,
    pub record_id: String,
    pub ordinal: u32,
    pub text: String,
    /// With `highlight`: fragments of `text` holding matched words, marked with `<em>`.
    pub highlights: Vec<String>,
}

/// A record's metadata as a shard returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub sync_id: String,
    pub record_id: String,
    pub display_name: Option<String>,
    pub generation: u64,
    /// Segments the record has.
    pub segments: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextSearchResponse {
    /// Visible lexical candidates, best first ([`segment_hit_order`]), at most `limit`.
    pub lexical: Vec<SegmentHit>,
    /// Visible dense candidates, best first, at most `limit`.
    pub dense: Vec<SegmentHit>,
    /// Visible segments holding at least one query term, over all searched syncs (the lexical
    /// candidates are the best `limit` of these).
    pub lexical_matched: u64,
    /// The text of every segment in `lexical` or `dense` (if the request deferred them: only of
    /// the first `texts_head` of each list).
    pub segments: Vec<SegmentData>,
    /// The record of every segment in `lexical` or `dense`.
    pub records: Vec<RecordInfo>,
    /// Syncs (in `integration`) or retrievers that failed; the rest of the answer is valid.
    pub failures: Vec<PartFailure>,
    /// Sum of the generations of the records the caller may read in the searched syncs: it
    /// changes when such a record is added, rewritten or deleted, and only then.
    pub visible_generation: u64,
    pub timings: ShardTimings,
    /// Whether the request's structured query was applied.
    pub structured: bool,
    /// With `countExactly`: visible records having a segment the structured query allows.
    pub matched: Option<u64>,
}

/// One segment of a sync, by record and ordinal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentRef {
    pub sync_id: String,
    pub record_id: String,
    pub ordinal: u32,
    /// The record's generation the segment must be of (0: whichever the shard holds).
    pub generation: u64,
}

/// The texts of some segments, for a caller holding each scope's principals in its sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentFetchRequest {
    pub project_id: String,
    /// The syncs of `segments` and the caller's principals there (`source` is not read).
    pub syncs: Vec<SyncScope>,
    pub segments: Vec<SegmentRef>,
}

/// The requested segments that exist (of the generation asked for) and the caller may read (in
/// request order; the others are left out, without saying why), and the syncs that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentFetchResponse {
    pub segments: Vec<SegmentData>,
    pub failures: Vec<PartFailure>,
}

/// Read around one segment, for a caller holding `principals` in the segment's sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadSegmentsRequest {
    pub project_id: String,
    pub sync_id: String,
    pub record_id: String,
    pub ordinal: u32,
    /// Segments before and after the anchor.
    pub before: u32,
    pub after: u32,
    pub principals: Vec<String>,
}

/// The anchor's record and the segments read, in order. `None` from the shard when the record,
/// the segment or the permission is missing: the three are not told apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadSegmentsResponse {
    pub record: RecordInfo,
    pub segments: Vec<SegmentData>,
}

/// Size of one sync's segment index on a shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentIndexInfo {
    pub records: u64,
    pub segments: u64,
    pub generation: u64,
}
