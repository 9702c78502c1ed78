//! The tools a request carries inline, indexed in memory for that request only: a tantivy index in
//! RAM with the schema and analyzer of a catalog index, and a FAISS `IDMap<Flat>` over their
//! vectors. Nothing is written to disk, and the index is dropped with the request.
//!
//! Searches run through the same code as a catalog index's ([`crate::IntegrationIndex`]): for the same
//! statistics, a tool scores exactly the same inline as in a catalog, so inline and catalog
//! candidates can be ranked together.

use std::sync::Arc;

use agentsearch_common::shard::{IndexedTool, TermStats};
use agentsearch_common::tool::ToolRecord;
use tantivy::directory::RamDirectory;
use tantivy::tokenizer::TokenizerManager;
use tantivy::{Index, ReloadPolicy, TantivyDocument};

use crate::analyzer::{ANALYZER, text_analyzer};
use crate::error::{IndexError, Result};
use crate::lexical::{LexicalQuery, ScoreBuffers};
use crate::schema::{Fields, build_schema};
use crate::tool_index::{
    IndexAnswer, Scored, State, ToolFilter, ToolQuery, ToolSource, prepare_batch, tool_document,
};

/// Most tools one request may carry inline.
pub const MAX_INLINE_TOOLS: usize = 500;

/// Memory of the indexing of inline tools: a few hundred tools need far less, and the term table
/// tantivy allocates up front is sized from it.
const INLINE_WRITER_MEMORY: usize = 2_000_000;

/// The inline tools of one request, searchable like an [`crate::IntegrationIndex`].
pub struct InlineIndex {
    /// The integration its tools share, else empty.
    integration: String,
    fields: Fields,
    state: State,
}

impl InlineIndex {
    /// Indexes `tools` in memory. The checks are an upsert's: the last of duplicate names wins,
    /// and vectors must be finite, non-empty and of one dimension. At most [`MAX_INLINE_TOOLS`].
    pub fn build(tools: Vec<IndexedTool>) -> Result<Self> {
        if tools.len() > MAX_INLINE_TOOLS {
            return Err(IndexError::invalid(
                "tools",
                format!(
                    "at most {MAX_INLINE_TOOLS} inline tools per request, got {}",
                    tools.len()
                ),
            ));
        }
        let batch = prepare_batch(tools, None, 0, &Default::default())?;
        let mut integrations = batch.iter().map(|(_, t)| t.record.integration.as_str());
        let first = integrations.next().unwrap_or_default();
        let integration = if integrations.all(|i| i == first) {
            first.to_string()
        } else {
            String::new()
        };
        let (schema, fields) = build_schema();
        let tokenizers = TokenizerManager::default();
        tokenizers.register(ANALYZER, text_analyzer());
        // One segment, written on this thread: no writer threads for a per-request index.
        let mut writer = Index::builder()
            .schema(schema)
            .tokenizers(tokenizers)
            .single_segment_index_writer::<TantivyDocument>(
                RamDirectory::create(),
                INLINE_WRITER_MEMORY,
            )?;
        for (id, tool) in &batch {
            // Records and vectors stay in memory: the documents hold only what search reads.
            writer.add_document(tool_document(&fields, *id, tool, false)?)?;
        }
        let index = writer.finalize()?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let state = State::of_batch(reader.searcher(), &fields, batch, 0)?;
        Ok(Self {
            integration,
            fields,
            state,
        })
    }

    /// The integration all its tools share; empty when they name several.
    pub fn integration(&self) -> &str {
        &self.integration
    }

    pub fn len(&self) -> usize {
        self.state.tools().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds the BM25 statistics of its tools for `terms` (analyzed query terms) to `stats`, as
    /// [`crate::IntegrationIndex::add_term_stats`] does for a catalog index.
    pub fn add_term_stats(&self, terms: &[String], stats: &mut TermStats) -> Result<()> {
        self.state.add_term_stats(&self.fields, terms, stats);
        Ok(())
    }

    /// [`crate::IntegrationIndex::search_lexical`] over the inline tools.
    pub fn search_lexical(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
    ) -> Result<Scored> {
        self.search_lexical_with(query, filter, limit, &mut ScoreBuffers::default())
    }

    /// [`crate::IntegrationIndex::search_lexical_with`] over the inline tools.
    pub fn search_lexical_with(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        self.state
            .search_lexical(query, filter, limit, buffers)
            .map(|scored| scored.ordered(limit))
    }

    /// [`crate::IntegrationIndex::search_dense`] over the inline tools.
    pub fn search_dense(&self, query: &[f32], filter: &ToolFilter, limit: usize) -> Result<Scored> {
        self.state
            .search_dense(query, filter, limit, &mut ScoreBuffers::default())
            .map(|scored| scored.ordered(limit))
    }

    /// The record behind a vector id.
    pub fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        self.state.tools().get(&id).cloned()
    }
}

impl ToolSource for InlineIndex {
    fn integration(&self) -> &str {
        &self.integration
    }

    fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        InlineIndex::tool(self, id)
    }

    fn search(&self, query: &ToolQuery, buffers: &mut ScoreBuffers) -> IndexAnswer {
        self.state.search(query, buffers)
    }
}
