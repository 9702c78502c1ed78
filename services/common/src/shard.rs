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
    /// different indexes and shards are computed against the same global statistics.
    async fn term_stats(&self, request: TermStatsRequest) -> Result<TermStats>;
    /// Ranked lexical and dense candidates over the named indexes, filters applied inside.
    async fn search_tools(&self, request: ShardSearchRequest) -> Result<ShardSearchResponse>;
    /// Inserts or replaces tools (by name), each in its integration's index.
    async fn upsert_tools(&self, request: ShardUpsertRequest) -> Result<ShardWriteResponse>;
    /// Deletes tools (by name) of one integration; unknown names are ignored.
    async fn delete_tools(&self, request: ShardDeleteRequest) -> Result<ShardWriteResponse>;
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// Stable id, kept in the shard's data dir; placement records refer to it.
    pub shard_id: String,
    pub indexes: u64,
    pub tools: u64,
    /// Resident set size of the shard's process, in bytes (0 where unknown).
    pub resident_bytes: u64,
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
}

/// One ranked candidate of one retriever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub name: String,
    pub integration: String,
    pub score: f32,
}

/// Order of hits in every ranked list: score descending, then name ascending (deterministic ties).
pub fn hit_order(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
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
    /// The stored tool of every eligible hit.
    pub tools: Vec<ToolRecord>,
    /// Parts that failed; the rest of the answer is still valid.
    pub failures: Vec<PartFailure>,
    /// Time spent in each retriever over all indexes, and assembling the answer (diagnostics).
    pub timings: ShardTimings,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShardTimings {
    /// Query analysis and BM25 statistics of the searched indexes.
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
}
