//! One integration's tools on one shard: a tantivy index in one directory (`tantivy/`) that holds
//! the analyzed text fields (BM25F over name pieces, description and parameters), every tool record
//! and its vector, and the generation in its commit payload. The commit is what makes a write
//! durable; nothing else is written.
//!
//! Searches do not read tantivy: each published generation is also held as a [`Slice`] (the
//! postings and the vectors in memory, read from the commit), so that both retrievers cost a few
//! lookups and dot products per index. Releases before this one kept a FAISS snapshot of the
//! vectors beside the index (`vectors.faiss`, `vectors.json`); it is removed on open.
//!
//! Writers open lazily: a write opens a tantivy writer with one thread, commits, waits for merges
//! and drops it, so hundreds of idle indexes cost only their readers and in-memory maps.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agentsearch_common::shard::{IndexedTool, TermStats};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tantivy::schema::Value;
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term, doc};

use crate::analyzer::{ANALYZER, text_analyzer};
use crate::error::{IndexError, Result};
use crate::lexical::{LexicalQuery, ScoreBuffers};
use crate::schema::{Fields, build_schema, resolve};
use crate::structured::Target;
use crate::tool_slice::Slice;
use agentsearch_query::Node;

/// Indexes with at most this many documents are merged into a single segment after each write
/// (rewriting up to this many small documents per write); larger ones use tantivy's log merge policy.
pub(crate) const MERGE_INTO_ONE_BELOW: u64 = 20_000;

/// Memory of the one-thread tantivy writer (tantivy's minimum is 15 MB).
pub(crate) const WRITER_MEMORY: usize = 15_000_000;

/// Which tools a search may return, and which it reports as excluded by the side-effect ceiling.
#[derive(Clone, Debug, Default)]
pub struct ToolFilter {
    /// Only these categories; `None` = all (out-of-scope tools are neither eligible nor excluded).
    pub categories: Option<HashSet<String>>,
    pub max_side_effect: Option<SideEffect>,
}

impl ToolFilter {
    /// Tools of `categories` (empty: all) under the side-effect ceiling `max_side_effect`.
    pub fn new(categories: &[String], max_side_effect: Option<SideEffect>) -> Self {
        Self {
            categories: (!categories.is_empty()).then(|| categories.iter().cloned().collect()),
            max_side_effect,
        }
    }

    pub(crate) fn in_scope(&self, tool: &ToolRecord) -> bool {
        self.categories
            .as_ref()
            .is_none_or(|c| c.contains(&tool.category))
    }

    /// Whether a tool with side effect `effect` is eligible (`Some(true)`), removed by the
    /// side-effect ceiling (`Some(false)`) or out of the filter's categories (`None`); `record`
    /// is only read when the filter names categories.
    #[inline]
    pub(crate) fn admits<'a>(
        &self,
        record: impl FnOnce() -> &'a ToolRecord,
        effect: SideEffect,
    ) -> Option<bool> {
        if self.categories.is_some() && !self.in_scope(record()) {
            return None;
        }
        Some(effect.allowed_under(self.max_side_effect))
    }
}

/// One retriever's `(score, vector id)` pairs of one index: eligible, and removed by the
/// side-effect ceiling; each best first from the public searches (pooled searches leave them in
/// no order: the pool is ordered once).
#[derive(Debug, Default)]
pub struct Scored {
    pub eligible: Vec<(f32, u64)>,
    pub excluded: Vec<(f32, u64)>,
}

impl Scored {
    /// Both lists best first (ties: lower id first), at most `limit` each.
    pub(crate) fn ordered(mut self, limit: usize) -> Self {
        for list in [&mut self.eligible, &mut self.excluded] {
            list.sort_by(crate::tool_slice::best_first);
            list.truncate(limit);
        }
        self
    }
}

/// One search of tool indexes.
pub struct ToolQuery<'a> {
    /// The prepared lexical query; `None` skips the lexical retriever.
    pub lexical: Option<&'a LexicalQuery>,
    /// The query embedding; `None` skips the dense retriever.
    pub vector: Option<&'a [f32]>,
    pub filter: &'a ToolFilter,
    /// Candidates per retriever.
    pub limit: usize,
    /// Restricts (and adds to the lexical score of) both retrievers.
    pub structured: Option<&'a Structured>,
}

/// One index's answer to a [`ToolQuery`]: each retriever that ran, both on the same generation.
#[derive(Debug)]
pub struct IndexAnswer {
    /// The generation of the index the retrievers searched.
    pub generation: u64,
    /// The state's fingerprint in a stamp (0 for inline tools; see [`state_stamp`]).
    pub stamp: u64,
    pub lexical: Option<Result<Scored>>,
    pub dense: Option<Result<Scored>>,
    pub lexical_ms: f64,
    pub dense_ms: f64,
    /// With [`Structured::count_exactly`]: the tools the structured query allows within the
    /// filter (categories and side-effect ceiling).
    pub matched: Option<u64>,
}

/// A tool index searched for the shard: a catalog index ([`IntegrationIndex`]) or the index of a
/// request's inline tools ([`crate::InlineIndex`]). Both score a tool the same way.
pub trait ToolSource: Send + Sync {
    /// The integration named in failures of this index.
    fn integration(&self) -> &str;
    /// The record behind a vector id.
    fn tool(&self, id: u64) -> Option<Arc<ToolRecord>>;
    /// Runs the retrievers of `query`, with scratch space reused across calls.
    fn search(&self, query: &ToolQuery, buffers: &mut ScoreBuffers) -> IndexAnswer;
}

#[derive(Serialize, Deserialize)]
pub(crate) struct VectorsMeta {
    pub(crate) generation: u64,
    pub(crate) dim: usize,
}

/// Vector ids are already hashes (FNV-1a of the name): use them as their own hash.
#[derive(Clone, Copy, Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }
}

pub(crate) type IdMapOf<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

pub(crate) struct State {
    /// The committed index the slice was read from (what structured queries run on).
    searcher: Searcher,
    fields: Fields,
    tools: IdMapOf<Arc<ToolRecord>>,
    ids: HashMap<String, u64>,
    /// What searches read: this generation's postings and vectors (shared with the project's
    /// search view, [`crate::tool_view`]).
    slice: Arc<Slice>,
    generation: u64,
}

impl State {
    /// The state of a searcher whose documents are exactly `batch` (from [`prepare_batch`]).
    pub(crate) fn of_batch(
        searcher: Searcher,
        fields: &Fields,
        batch: Vec<(u64, IndexedTool)>,
        generation: u64,
    ) -> Result<Self> {
        let mut tools = IdMapOf::default();
        let mut ids = HashMap::with_capacity(batch.len());
        let mut vectors: IdMapOf<Vec<f32>> = IdMapOf::default();
        for (id, tool) in batch {
            ids.insert(tool.record.name.clone(), id);
            tools.insert(id, Arc::new(tool.record));
            vectors.insert(id, tool.vector);
        }
        Self::read(&searcher, fields, tools, ids, &vectors, generation)
    }

    /// The state of `searcher`'s documents, whose records are `tools` (by name in `ids`) and whose
    /// vectors are `vectors`.
    fn read(
        searcher: &Searcher,
        fields: &Fields,
        tools: IdMapOf<Arc<ToolRecord>>,
        ids: HashMap<String, u64>,
        vectors: &IdMapOf<Vec<f32>>,
        generation: u64,
    ) -> Result<Self> {
        let slice = Slice::build(
            searcher,
            &fields.text_fields(),
            &tools,
            |id| vectors.get(&id).map(Vec::as_slice),
            0,
        )?;
        Ok(State {
            searcher: searcher.clone(),
            fields: *fields,
            tools,
            ids,
            slice: Arc::new(slice),
            generation,
        })
    }

    pub(crate) fn tools(&self) -> &IdMapOf<Arc<ToolRecord>> {
        &self.tools
    }

    /// Adds this generation's counts for `terms` to `counts`.
    pub(crate) fn count(&self, terms: &[String], counts: &mut crate::tool_slice::TermCounts) {
        self.slice.count(terms, counts);
    }

    /// Adds this generation's statistics for `terms` over the text fields to `stats`.
    pub(crate) fn add_term_stats(&self, fields: &Fields, terms: &[String], stats: &mut TermStats) {
        let names = fields.named_text_fields().map(|(name, _)| name);
        self.slice.add_term_stats(&names, terms, stats);
    }

    /// See [`IntegrationIndex::search_lexical`].
    pub(crate) fn search_lexical(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        Ok(self.slice.search_lexical(query, filter, limit, buffers))
    }

    /// See [`IntegrationIndex::search_dense`].
    pub(crate) fn search_dense(
        &self,
        query: &[f32],
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        self.slice.search_dense(query, filter, limit, buffers)
    }

    /// Both retrievers of `query` on this state, so that they see the same generation.
    pub(crate) fn search(&self, query: &ToolQuery, buffers: &mut ScoreBuffers) -> IndexAnswer {
        if let Some(structured) = query.structured {
            return self.search_structured(query, structured, buffers);
        }
        let started = Instant::now();
        let lexical = query
            .lexical
            .map(|lexical| self.search_lexical(lexical, query.filter, query.limit, buffers));
        let lexical_done = Instant::now();
        let dense = query
            .vector
            .map(|vector| self.search_dense(vector, query.filter, query.limit, buffers));
        IndexAnswer {
            generation: self.generation,
            stamp: 0,
            lexical,
            dense,
            lexical_ms: (lexical_done - started).as_secs_f64() * 1e3,
            dense_ms: lexical_done.elapsed().as_secs_f64() * 1e3,
            matched: None,
        }
    }

    /// [`State::search`] restricted by a structured query: both retrievers rank only the
    /// documents it allows; the lexical one adds its score to BM25F's (and ranks by it alone
    /// when the query has no words).
    fn search_structured(
        &self,
        query: &ToolQuery,
        structured: &Structured,
        buffers: &mut ScoreBuffers,
    ) -> IndexAnswer {
        let started = Instant::now();
        let allowed =
            crate::structured::allowed(self, structured.query.as_ref(), structured.filter.as_ref());
        let failed = |err: &IndexError| Err(IndexError::invalid("query", err.to_string()));
        // The nodes' evaluation is timed with the lexical retriever.
        let lexical = query.lexical.map(|lexical| match &allowed {
            Ok(allowed) => Ok(self.slice.search_lexical_allowed(
                lexical,
                allowed,
                query.filter,
                query.limit,
                buffers,
            )),
            Err(err) => failed(err),
        });
        let lexical_done = Instant::now();
        let dense = query.vector.map(|vector| match &allowed {
            Ok(allowed) => {
                self.slice
                    .search_dense_allowed(vector, allowed, query.filter, query.limit, buffers)
            }
            Err(err) => failed(err),
        });
        let matched = match (&allowed, structured.count_exactly) {
            (Ok(allowed), true) => Some(self.slice.count_allowed(allowed, query.filter)),
            _ => None,
        };
        IndexAnswer {
            generation: self.generation,
            stamp: 0,
            lexical,
            dense,
            lexical_ms: (lexical_done - started).as_secs_f64() * 1e3,
            dense_ms: lexical_done.elapsed().as_secs_f64() * 1e3,
            matched,
        }
    }
}

impl crate::structured::Source for State {
    fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    fn target(&self, field: &str) -> Option<Target> {
        let f = &self.fields;
        Some(match field {
            "name" => Target::Keyword(f.name_exact),
            "integration" => Target::Constant,
            "category" => Target::Keyword(f.category),
            "sideEffect" => Target::Keyword(f.side_effect),
            "description" => Target::Text(f.description),
            "parameters" => Target::Text(f.params),
            _ => return None,
        })
    }

    /// An index holds one integration's tools.
    fn constant(&self, field: &str) -> Option<&str> {
        match field {
            "integration" => self.tools.values().next().map(|t| t.integration.as_str()),
            _ => None,
        }
    }

    fn ids(&self) -> Vec<u64> {
        self.slice.ids().to_vec()
    }

    fn number(&self, _field: &str, _id: u64) -> Option<f64> {
        None
    }
}

/// The structured part of a query JSON document, parsed against [`agentsearch_query::Catalog::tools`].
#[derive(Clone, Debug, Default)]
pub struct Structured {
    pub query: Option<Node>,
    pub filter: Option<Node>,
    /// Count the tools each index allows ([`IndexAnswer::matched`]).
    pub count_exactly: bool,
    /// Return the matched fragments of the hits' descriptions.
    pub highlight: bool,
}

impl Structured {
    /// The structured part of a query JSON document as the router sent it (`{"v", "query",
    /// "filter", "countExactly", "highlight"}`), parsed against `catalog`.
    pub(crate) fn parse(json: &str, catalog: &agentsearch_query::Catalog) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| IndexError::invalid("structured", format!("is not JSON: {e}")))?;
        let doc = agentsearch_query::parse(catalog, &value, "query")
            .map_err(|e| IndexError::invalid(e.path, e.message))?;
        Ok(Structured {
            query: doc.query,
            filter: doc.filter,
            count_exactly: doc.count_exactly,
            highlight: doc.highlight,
        })
    }
}

pub struct IntegrationIndex {
    integration: String,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    state: RwLock<State>,
    write_lock: Mutex<()>,
    /// Counts the publications of every index of the project (shared by them): a search view of
    /// the project built at another count is out of date.
    published: Arc<AtomicU64>,
}

impl IntegrationIndex {
    /// Opens the index in `dir`, creating an empty one if the directory holds none.
    pub fn open(dir: &Path, integration: &str) -> Result<Self> {
        Self::open_counted(dir, integration, Arc::default())
    }

    /// [`IntegrationIndex::open`], counting its publications in `published`.
    pub(crate) fn open_counted(
        dir: &Path,
        integration: &str,
        published: Arc<AtomicU64>,
    ) -> Result<Self> {
        finish_rebuild(dir)?;
        let (mut index, mut reader, mut generation) = open_tantivy(dir, build_schema().0)?;
        let unexpected = || IndexError::Corrupt(format!("{}: unexpected schema", dir.display()));
        let mut fields = resolve(&index.schema()).ok_or_else(unexpected)?;
        if !crate::schema::has_positions(&index.schema(), &fields) {
            let state = load_state(reader.searcher(), &fields, generation)?;
            drop((index, reader));
            rebuild(dir, &state)?;
            tracing::info!(
                integration,
                tools = state.tools.len(),
                "tool index rebuilt with term positions"
            );
            (index, reader, generation) = open_tantivy(dir, build_schema().0)?;
            fields = resolve(&index.schema()).ok_or_else(unexpected)?;
        }
        let state = load_state(reader.searcher(), &fields, generation)?;
        for obsolete in ["vectors.faiss", "vectors.json"] {
            match fs::remove_file(dir.join(obsolete)) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err.into()),
                _ => {}
            }
        }
        Ok(Self {
            integration: integration.to_string(),
            index,
            reader,
            fields,
            state: RwLock::new(state),
            write_lock: Mutex::new(()),
            published,
        })
    }

    /// Makes a durable commit visible: the new searcher, the records changed by `update` and the
    /// slice read from the commit (vectors from `added`, else the previous slice's) are published
    /// together, under the state lock, so a search never sees one without the other. The slice is
    /// read before the lock is taken, so searches wait only for the swap. If anything fails,
    /// everything is reloaded from the committed index instead: the write is durable either way.
    fn publish(
        &self,
        generation: u64,
        added: &IdMapOf<Vec<f32>>,
        update: impl FnOnce(&mut IdMapOf<Arc<ToolRecord>>, &mut HashMap<String, u64>),
    ) -> Result<()> {
        let prepared = self
            .reader
            .reload()
            .map_err(IndexError::from)
            .and_then(|()| {
                let searcher = self.reader.searcher();
                let state = self.state.read();
                let (mut tools, mut ids) = (state.tools.clone(), state.ids.clone());
                update(&mut tools, &mut ids);
                let previous: IdMapOf<&[f32]> = state.slice.rows().collect();
                let slice = Slice::build(
                    &searcher,
                    &self.fields.text_fields(),
                    &tools,
                    |id| {
                        added
                            .get(&id)
                            .map(Vec::as_slice)
                            .or_else(|| previous.get(&id).copied())
                    },
                    state.slice.dim(),
                )?;
                Ok(State {
                    searcher,
                    fields: self.fields,
                    tools,
                    ids,
                    slice: Arc::new(slice),
                    generation,
                })
            });
        let mut state = self.state.write();
        let published = match prepared {
            Ok(next) => {
                *state = next;
                Ok(())
            }
            Err(err) => {
                tracing::error!(integration = %self.integration, error = %err, "in-memory update after a commit failed; reloading");
                self.reader
                    .reload()
                    .map_err(IndexError::from)
                    .and_then(|()| load_state(self.reader.searcher(), &self.fields, generation))
                    .map(|next| *state = next)
            }
        };
        // After the swap: a view built before it is out of date from here on (and a failed
        // reload may have changed the state too).
        self.published.fetch_add(1, Ordering::Release);
        published
    }

    /// The published slice and its generation, read together.
    pub(crate) fn snapshot(&self) -> (Arc<Slice>, u64) {
        let state = self.state.read();
        (state.slice.clone(), state.generation)
    }

    pub fn integration(&self) -> &str {
        &self.integration
    }

    pub fn len(&self) -> usize {
        self.state.read().tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn generation(&self) -> u64 {
        self.state.read().generation
    }

    /// Inserts or replaces tools by name; the last of duplicate names in one call wins.
    /// Returns the new generation.
    pub fn upsert(&self, tools: Vec<IndexedTool>) -> Result<u64> {
        let _write = self.write_lock.lock();
        let batch = {
            let state = self.state.read();
            prepare_batch(
                tools,
                Some(&self.integration),
                state.slice.dim(),
                &state.tools,
            )?
        };
        if batch.is_empty() {
            return Ok(self.generation());
        }
        let generation = self.generation() + 1;
        let writer = self.writer()?;
        for (id, tool) in &batch {
            writer.delete_term(Term::from_field_text(
                self.fields.name_exact,
                &tool.record.name,
            ));
            writer.add_document(tool_document(&self.fields, *id, tool, true)?)?;
        }
        commit(&self.index, writer, generation)?;
        let mut added = IdMapOf::default();
        let mut records = Vec::with_capacity(batch.len());
        for (id, tool) in batch {
            added.insert(id, tool.vector);
            records.push((id, tool.record));
        }
        self.publish(generation, &added, move |tools, ids| {
            for (id, record) in records {
                ids.insert(record.name.clone(), id);
                tools.insert(id, Arc::new(record));
            }
        })?;
        Ok(generation)
    }

    /// Deletes tools by name; returns how many existed and the new generation.
    pub fn delete(&self, names: &[String]) -> Result<(u64, u64)> {
        let _write = self.write_lock.lock();
        let present: Vec<(String, u64)> = {
            let state = self.state.read();
            names
                .iter()
                .filter_map(|n| state.ids.get(n).map(|&id| (n.clone(), id)))
                .collect::<HashMap<_, _>>()
                .into_iter()
                .collect()
        };
        if present.is_empty() {
            return Ok((0, self.generation()));
        }
        let generation = self.generation() + 1;
        let writer = self.writer()?;
        for (name, _) in &present {
            writer.delete_term(Term::from_field_text(self.fields.name_exact, name));
        }
        commit(&self.index, writer, generation)?;
        self.publish(generation, &IdMapOf::default(), |tools, ids| {
            for (name, id) in &present {
                ids.remove(name);
                tools.remove(id);
            }
        })?;
        Ok((present.len() as u64, generation))
    }

    /// A one-thread writer whose merges are ours ([`commit`]) rather than a background policy's.
    fn writer(&self) -> Result<tantivy::IndexWriter<TantivyDocument>> {
        let writer = self
            .index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
        if self.len() as u64 <= MERGE_INTO_ONE_BELOW {
            writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        }
        Ok(writer)
    }

    /// Adds this index's BM25 statistics for `terms` (analyzed query terms) to `stats`.
    pub fn add_term_stats(&self, terms: &[String], stats: &mut TermStats) -> Result<()> {
        self.state.read().add_term_stats(&self.fields, terms, stats);
        Ok(())
    }

    /// Adds this index's counts for `terms` to `counts` (see [`ToolIndexes::term_stats`]).
    /// Returns the stamp of the state counted.
    pub(crate) fn count_terms(
        &self,
        terms: &[String],
        counts: &mut crate::tool_slice::TermCounts,
    ) -> u64 {
        let state = self.state.read();
        state.count(terms, counts);
        state_stamp(&self.integration, &state.slice)
    }

    /// BM25 over the text fields for a prepared [`LexicalQuery`] (weights from global statistics,
    /// computed once per query). Scores term-at-a-time over the postings (short for a
    /// per-integration index), then filters the matched tools in memory. Returns
    /// `(score, vector id)` pairs, eligible and excluded by the ceiling, each best first.
    pub fn search_lexical(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
    ) -> Result<Scored> {
        self.search_lexical_with(query, filter, limit, &mut ScoreBuffers::default())
    }

    /// [`IntegrationIndex::search_lexical`] with scratch space reused across calls.
    pub fn search_lexical_with(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        self.state
            .read()
            .search_lexical(query, filter, limit, buffers)
            .map(|scored| scored.ordered(limit))
    }

    /// Inner-product (cosine, vectors are normalised) nearest neighbours of `query`.
    pub fn search_dense(&self, query: &[f32], filter: &ToolFilter, limit: usize) -> Result<Scored> {
        self.state
            .read()
            .search_dense(query, filter, limit, &mut ScoreBuffers::default())
            .map(|scored| scored.ordered(limit))
    }

    /// Every tool held with its vector, by name, to copy the index to another replica.
    pub fn export(&self) -> Vec<IndexedTool> {
        let state = self.state.read();
        let vectors: IdMapOf<&[f32]> = state.slice.rows().collect();
        let mut tools: Vec<IndexedTool> = state
            .tools
            .iter()
            .map(|(id, record)| IndexedTool {
                record: (**record).clone(),
                vector: vectors.get(id).map(|v| v.to_vec()).unwrap_or_default(),
            })
            .collect();
        tools.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        tools
    }

    /// The record behind a vector id.
    pub fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        self.state.read().tools.get(&id).cloned()
    }
}

impl<T: ToolSource + ?Sized> ToolSource for Arc<T> {
    fn integration(&self) -> &str {
        (**self).integration()
    }

    fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        (**self).tool(id)
    }

    fn search(&self, query: &ToolQuery, buffers: &mut ScoreBuffers) -> IndexAnswer {
        (**self).search(query, buffers)
    }
}

impl ToolSource for IntegrationIndex {
    fn integration(&self) -> &str {
        &self.integration
    }

    fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        IntegrationIndex::tool(self, id)
    }

    /// Both retrievers under one read of the state: a concurrent write publishes before or after
    /// them, never between.
    fn search(&self, query: &ToolQuery, buffers: &mut ScoreBuffers) -> IndexAnswer {
        let state = self.state.read();
        IndexAnswer {
            stamp: state_stamp(&self.integration, &state.slice),
            ..state.search(query, buffers)
        }
    }
}

/// Checks tools to be indexed and gives each its vector id: the last of duplicate names wins;
/// every tool needs a finite, non-empty vector of one dimension (`dim`, the index's, or the first
/// tool's when 0) and, with `integration`, must belong to it; ids must not collide within the batch
/// or with another name in `existing`. Sorted by id.
pub(crate) fn prepare_batch(
    tools: Vec<IndexedTool>,
    integration: Option<&str>,
    mut dim: usize,
    existing: &IdMapOf<Arc<ToolRecord>>,
) -> Result<Vec<(u64, IndexedTool)>> {
    let mut by_name: HashMap<String, IndexedTool> = HashMap::new();
    for tool in tools {
        by_name.insert(tool.record.name.clone(), tool);
    }
    let mut batch: Vec<(u64, IndexedTool)> = Vec::with_capacity(by_name.len());
    for (name, tool) in by_name {
        if let Some(integration) = integration
            && tool.record.integration != integration
        {
            return Err(IndexError::invalid(
                "integration",
                format!(
                    "tool `{name}` belongs to `{}`, not `{integration}`",
                    tool.record.integration
                ),
            ));
        }
        if tool.vector.is_empty() || tool.vector.iter().any(|x| !x.is_finite()) {
            return Err(IndexError::invalid(
                "vector",
                format!("tool `{name}` needs a finite, non-empty vector"),
            ));
        }
        if dim == 0 {
            dim = tool.vector.len();
        } else if tool.vector.len() != dim {
            return Err(IndexError::invalid(
                "vector",
                format!(
                    "tool `{name}` has a {}-d vector, the index holds {dim}-d vectors",
                    tool.vector.len()
                ),
            ));
        }
        let id = stable_id(&name);
        if let Some(other) = batch.iter().find(|(other, _)| *other == id) {
            return Err(IndexError::Corrupt(format!(
                "vector id collision between `{name}` and `{}`",
                other.1.record.name
            )));
        }
        if let Some(other) = existing.get(&id)
            && other.name != name
        {
            return Err(IndexError::Corrupt(format!(
                "vector id collision between `{name}` and `{}`",
                other.name
            )));
        }
        batch.push((id, tool));
    }
    batch.sort_by_key(|(id, _)| *id);
    Ok(batch)
}

/// The tantivy document of a tool with vector id `id`: every field a search reads, and with
/// `stored`, the record and vector an index reloads from disk.
pub(crate) fn tool_document(
    fields: &Fields,
    id: u64,
    tool: &IndexedTool,
    stored: bool,
) -> Result<TantivyDocument> {
    let record = &tool.record;
    let mut document = doc!(
        fields.name => record.name_text(),
        fields.description => record.description.as_str(),
        fields.params => record.parameter_text(),
        fields.name_exact => record.name.as_str(),
        fields.category => record.category.as_str(),
        fields.side_effect => record.side_effect.as_str(),
        fields.id => id,
    );
    if stored {
        let json = serde_json::to_string(record).map_err(|e| IndexError::Corrupt(e.to_string()))?;
        document.add_text(fields.record, json);
        document.add_bytes(fields.vector, &encode_vector(&tool.vector));
    }
    Ok(document)
}

/// Commits with the generation as payload, then merges the index into one segment while it is
/// small (a per-integration index usually is): a query then pays its per-segment costs once.
pub(crate) fn commit(
    index: &Index,
    mut writer: tantivy::IndexWriter<TantivyDocument>,
    generation: u64,
) -> Result<()> {
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&generation.to_string());
    prepared.commit()?;
    let segments = index.searchable_segment_metas()?;
    let docs: u64 = segments.iter().map(|s| u64::from(s.num_docs())).sum();
    // The commit is durable from here on: a failed merge only costs query time.
    if segments.len() > 1 && docs <= MERGE_INTO_ONE_BELOW {
        let ids: Vec<_> = segments.iter().map(|s| s.id()).collect();
        if let Err(err) = writer.merge(&ids).wait() {
            tracing::warn!(error = %err, "merging segments after a commit failed");
        }
    }
    if let Err(err) = writer.wait_merging_threads() {
        tracing::warn!(error = %err, "closing the index writer after a commit failed");
    }
    Ok(())
}

/// Rewrites the index in `dir` from `state` (its every tool, vector and generation) with the
/// current schema: written and committed in `tantivy.rebuild`, then swapped in by two renames that
/// [`finish_rebuild`] completes if the process stops between them.
fn rebuild(dir: &Path, state: &State) -> Result<()> {
    let next = dir.join("tantivy.rebuild");
    if next.exists() {
        fs::remove_dir_all(&next)?;
    }
    fs::create_dir_all(&next)?;
    let (schema, fields) = build_schema();
    let index = Index::create_in_dir(&next, schema)?;
    index.tokenizers().register(ANALYZER, text_analyzer());
    let writer = index.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
    let vectors: IdMapOf<&[f32]> = state.slice.rows().collect();
    for (id, record) in &state.tools {
        let tool = IndexedTool {
            record: (**record).clone(),
            vector: vectors.get(id).map(|v| v.to_vec()).unwrap_or_default(),
        };
        writer.add_document(tool_document(&fields, *id, &tool, true)?)?;
    }
    commit(&index, writer, state.generation)?;
    drop(index);
    swap_rebuilt(dir)
}

/// Replaces `dir/tantivy` by the committed index in `dir/tantivy.rebuild`, so that a crash at
/// any point leaves one whole index ([`finish_rebuild`] completes or undoes the swap on open).
pub(crate) fn swap_rebuilt(dir: &Path) -> Result<()> {
    let next = dir.join("tantivy.rebuild");
    // Only a rebuild whose commit is durable may replace the index.
    let marker = next.join(REBUILT);
    fs::write(&marker, b"")?;
    fs::File::open(&marker)?.sync_all()?;
    sync_dir(&next)?;
    fs::rename(dir.join("tantivy"), dir.join("tantivy.old"))?;
    sync_dir(dir)?;
    fs::rename(&next, dir.join("tantivy"))?;
    sync_dir(dir)?;
    fs::remove_dir_all(dir.join("tantivy.old"))?;
    Ok(())
}

/// In a rebuilt index directory: its commit was durable before the swap began.
const REBUILT: &str = "rebuilt";

/// Makes the entries of `dir` (renames, new files) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Completes or discards a [`rebuild`] that a stopped process left: a committed `tantivy.rebuild`
/// replaces a missing `tantivy`; otherwise leftovers are removed.
pub(crate) fn finish_rebuild(dir: &Path) -> Result<()> {
    let (current, next, old) = (
        dir.join("tantivy"),
        dir.join("tantivy.rebuild"),
        dir.join("tantivy.old"),
    );
    if !current.exists() && next.join(REBUILT).exists() {
        fs::rename(&next, &current)?;
        sync_dir(dir)?;
    } else if !current.exists() && old.exists() {
        fs::rename(&old, &current)?;
        sync_dir(dir)?;
    }
    for leftover in [next, old] {
        if leftover.exists() && current.exists() {
            fs::remove_dir_all(leftover)?;
        }
    }
    Ok(())
}

/// Opens the tantivy index in `dir/tantivy` (created with `schema` if there is none), with the
/// analyzer registered, a manually reloaded reader, and the generation of its last commit.
pub(crate) fn open_tantivy(
    dir: &Path,
    schema: tantivy::schema::Schema,
) -> Result<(Index, IndexReader, u64)> {
    let tantivy_dir = dir.join("tantivy");
    fs::create_dir_all(&tantivy_dir)?;
    let index = if tantivy_dir.join("meta.json").exists() {
        Index::open_in_dir(&tantivy_dir)?
    } else {
        Index::create_in_dir(&tantivy_dir, schema)?
    };
    index.tokenizers().register(ANALYZER, text_analyzer());
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    let generation = index
        .load_metas()?
        .payload
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0);
    Ok((index, reader, generation))
}

/// Reads every stored tool of the committed index, and its slice.
fn load_state(searcher: Searcher, fields: &Fields, generation: u64) -> Result<State> {
    let mut tools = IdMapOf::default();
    let mut ids = HashMap::new();
    let mut vectors: IdMapOf<Vec<f32>> = IdMapOf::default();
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        for doc_id in segment.doc_ids_alive() {
            let doc: TantivyDocument = searcher.doc(DocAddress::new(segment_ord as u32, doc_id))?;
            let id = doc
                .get_first(fields.id)
                .and_then(|v| v.as_u64())
                .ok_or_else(|| corrupt("id"))?;
            let record = doc
                .get_first(fields.record)
                .and_then(|v| v.as_str())
                .ok_or_else(|| corrupt("record"))?;
            let record: ToolRecord =
                serde_json::from_str(record).map_err(|e| corrupt(&e.to_string()))?;
            let vector = doc
                .get_first(fields.vector)
                .and_then(|v| v.as_bytes())
                .ok_or_else(|| corrupt("vector"))?;
            vectors.insert(id, decode_vector(vector));
            ids.insert(record.name.clone(), id);
            tools.insert(id, Arc::new(record));
        }
    }
    State::read(&searcher, fields, tools, ids, &vectors, generation)
}

pub(crate) fn meta_generation(dir: &Path) -> Option<u64> {
    fs::read(dir.join("vectors.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<VectorsMeta>(&b).ok())
        .map(|m| m.generation)
}

pub(crate) fn corrupt(what: &str) -> IndexError {
    IndexError::Corrupt(format!("stored document without a valid {what}"))
}

/// The vector id of a tool: FNV-1a of its name, 62 bits (FAISS ids are non-negative i64).
pub fn stable_id(name: &str) -> u64 {
    agentsearch_common::hash::fnv1a(name.bytes()) >> 2
}

/// The fingerprint of one index state in a stamp ([`agentsearch_common::shard::ScopeStats`]): its
/// integration's and its statistics' ([`Slice::fingerprint`]), so the same on every process and
/// replica holding the same statistics, whatever generation each is at.
pub(crate) fn state_stamp(integration: &str, slice: &Slice) -> u64 {
    use agentsearch_common::hash::fnv1a;
    use agentsearch_common::splitmix::mix;
    mix(mix(fnv1a(integration.bytes())).wrapping_add(slice.fingerprint()))
}

pub(crate) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structured::{Source, evaluate};
    use tantivy::schema::{IndexRecordOption, TextFieldIndexing, TextOptions};

    fn tool(name: &str, description: &str) -> IndexedTool {
        IndexedTool {
            record: ToolRecord {
                name: name.into(),
                integration: "slack".into(),
                category: "messaging".into(),
                side_effect: SideEffect::Send,
                description: description.into(),
                parameters: r#"{"type":"object","properties":{}}"#.into(),
                tokens: 10,
            },
            vector: vec![1.0, 0.0, 0.0],
        }
    }

    /// The schema of releases whose text fields kept no positions.
    fn schema_without_positions() -> tantivy::schema::Schema {
        let mut builder = tantivy::schema::Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        for name in ["name", "description", "params"] {
            builder.add_text_field(name, text.clone());
        }
        for name in ["name_exact", "category", "side_effect"] {
            builder.add_text_field(name, tantivy::schema::STRING);
        }
        builder.add_u64_field(
            "id",
            tantivy::schema::INDEXED | tantivy::schema::FAST | tantivy::schema::STORED,
        );
        builder.add_text_field("record", tantivy::schema::STORED);
        builder.add_bytes_field("vector", tantivy::schema::STORED);
        builder.build()
    }

    #[test]
    fn an_index_without_positions_is_rebuilt_on_open_and_answers_phrases() {
        let dir = tempfile::tempdir().unwrap();
        let (index, _, _) = open_tantivy(dir.path(), schema_without_positions()).unwrap();
        let fields = resolve(&index.schema()).unwrap();
        assert!(!crate::schema::has_positions(&index.schema(), &fields));
        let writer = index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)
            .unwrap();
        for (i, (name, description)) in [
            ("SLACK_POST", "post a message to a channel"),
            ("SLACK_FIND", "find a channel by message text"),
        ]
        .into_iter()
        .enumerate()
        {
            let t = tool(name, description);
            writer
                .add_document(tool_document(&fields, i as u64 + 1, &t, true).unwrap())
                .unwrap();
        }
        commit(&index, writer, 7).unwrap();
        drop(index);

        let reopened = IntegrationIndex::open(dir.path(), "slack").unwrap();
        assert_eq!((reopened.generation(), reopened.len()), (7, 2));
        assert!(crate::schema::has_positions(
            &reopened.index.schema(),
            &reopened.fields
        ));
        assert!(!dir.path().join("tantivy.rebuild").exists());
        assert!(!dir.path().join("tantivy.old").exists());
        let state = reopened.state.read();
        let phrase = Node::Phrase {
            field: "description".into(),
            terms: vec!["message".into(), "to".into(), "a".into(), "channel".into()],
            slop: 0,
            boost: 1.0,
        };
        let matched = evaluate(&*state, &phrase).unwrap();
        assert_eq!(matched.keys().copied().collect::<Vec<_>>(), vec![1]);
        let loose = Node::Phrase {
            field: "description".into(),
            terms: vec!["channel".into(), "message".into()],
            slop: 3,
            boost: 1.0,
        };
        let near: Vec<u64> = evaluate(&*state, &loose).unwrap().into_keys().collect();
        assert!(near.contains(&2), "{near:?}");
        assert_eq!(state.ids().len(), 2);
        drop(state);
        drop(reopened);

        // A process stopped between the two renames of a rebuild: the durable rebuild is used.
        fs::rename(
            dir.path().join("tantivy"),
            dir.path().join("tantivy.rebuild"),
        )
        .unwrap();
        let recovered = IntegrationIndex::open(dir.path(), "slack").unwrap();
        assert_eq!((recovered.generation(), recovered.len()), (7, 2));
    }
}
