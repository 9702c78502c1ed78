//! One integration's tools on one shard: a tantivy index (BM25 over name pieces, description and
//! parameters) and a FAISS `IDMap<Flat>` inner-product index over the tools' embeddings, in one
//! directory with a shared generation number.
//!
//! Layout of the directory:
//! - `tantivy/`: the lexical index; it also stores every tool record and its vector, and carries the
//!   generation in its commit payload;
//! - `vectors.faiss` + `vectors.json` (`{"generation": N, "dim": D}`): a snapshot of the dense
//!   index, flushed after writes settle (periodically and when the shard closes). The tantivy commit
//!   alone makes a write durable, since it stores every vector: on open, a snapshot whose generation
//!   differs from tantivy's is rebuilt from the stored vectors, so an acknowledged write is never
//!   lost or half visible after a crash.
//!
//! Writers open lazily: a write opens a tantivy writer with one thread, commits, waits for merges
//! and drops it, so hundreds of idle indexes cost only their readers and in-memory maps.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agentsearch_common::shard::{IndexedTool, TermStats};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use faiss::index::flat::FlatIndexImpl;
use faiss::index::id_map::IdMap;
use faiss::selector::IdSelector;
use faiss::{ConcurrentIndex, Idx, Index as _};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tantivy::schema::Value;
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term, doc};

use crate::analyzer::{ANALYZER, text_analyzer};
use crate::error::{IndexError, Result};
use crate::lexical::{self, LexicalQuery, ScoreBuffers};
use crate::schema::{Fields, build_schema, resolve};

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

    fn in_scope(&self, tool: &ToolRecord) -> bool {
        self.categories
            .as_ref()
            .is_none_or(|c| c.contains(&tool.category))
    }
}

/// One retriever's `(score, vector id)` pairs of one index: eligible, and removed by the
/// side-effect ceiling; each best first.
#[derive(Debug, Default)]
pub struct Scored {
    pub eligible: Vec<(f32, u64)>,
    pub excluded: Vec<(f32, u64)>,
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
}

/// One index's answer to a [`ToolQuery`]: each retriever that ran, both on the same generation.
#[derive(Debug)]
pub struct IndexAnswer {
    /// The generation of the index the retrievers searched.
    pub generation: u64,
    pub lexical: Option<Result<Scored>>,
    pub dense: Option<Result<Scored>>,
    pub lexical_ms: f64,
    pub dense_ms: f64,
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
    /// The searcher of the committed generation `generation`, published with the maps below.
    searcher: Searcher,
    /// The `id` fast-field column of each of the searcher's segments.
    id_columns: Vec<tantivy::columnar::Column<u64>>,
    tools: IdMapOf<Arc<ToolRecord>>,
    ids: HashMap<String, u64>,
    vectors: Option<IdMap<FlatIndexImpl>>,
    dim: usize,
    generation: u64,
}

impl State {
    /// The state of a searcher whose documents are exactly `batch` (from [`prepare_batch`]),
    /// with the dense index built from their vectors.
    pub(crate) fn of_batch(
        searcher: Searcher,
        batch: Vec<(u64, IndexedTool)>,
        generation: u64,
    ) -> Result<Self> {
        let mut tools = IdMapOf::default();
        let mut ids = HashMap::with_capacity(batch.len());
        let mut vectors = Vec::with_capacity(batch.len());
        for (id, tool) in batch {
            ids.insert(tool.record.name.clone(), id);
            tools.insert(id, Arc::new(tool.record));
            vectors.push((id, tool.vector));
        }
        let (vectors, dim) = rebuild(&vectors)?;
        Ok(State {
            id_columns: id_columns(&searcher)?,
            searcher,
            tools,
            ids,
            vectors,
            dim,
            generation,
        })
    }

    pub(crate) fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    pub(crate) fn tools(&self) -> &IdMapOf<Arc<ToolRecord>> {
        &self.tools
    }

    /// See [`IntegrationIndex::search_lexical`].
    pub(crate) fn search_lexical(
        &self,
        fields: &Fields,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        let mut out = Scored::default();
        if query.is_empty() || limit == 0 {
            return Ok(out);
        }
        let fields = fields.text_fields();
        for (segment, ids) in self.searcher.segment_readers().iter().zip(&self.id_columns) {
            query.score_segment(segment, &fields, buffers)?;
            let ScoreBuffers {
                scores, matched, ..
            } = &*buffers;
            if matched.is_empty() {
                continue;
            }
            let alive = segment.alive_bitset();
            for &doc in matched {
                if alive.is_some_and(|a| a.is_deleted(doc)) {
                    continue;
                }
                let Some((id, tool)) = ids
                    .first(doc)
                    .and_then(|id| self.tools.get(&id).map(|t| (id, t)))
                else {
                    continue;
                };
                if !filter.in_scope(tool) {
                    continue;
                }
                let list = if tool.side_effect.allowed_under(filter.max_side_effect) {
                    &mut out.eligible
                } else {
                    &mut out.excluded
                };
                list.push((scores[doc as usize], id));
            }
        }
        for list in [&mut out.eligible, &mut out.excluded] {
            list.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            list.truncate(limit);
        }
        Ok(out)
    }

    /// See [`IntegrationIndex::search_dense`].
    pub(crate) fn search_dense(
        &self,
        query: &[f32],
        filter: &ToolFilter,
        limit: usize,
    ) -> Result<Scored> {
        let mut out = Scored::default();
        let Some(vectors) = &self.vectors else {
            return Ok(out);
        };
        if query.len() != self.dim {
            return Err(IndexError::invalid(
                "vector",
                format!(
                    "query vector has {} dimensions, the index holds {}-d vectors",
                    query.len(),
                    self.dim
                ),
            ));
        }
        let total = vectors.ntotal() as usize;
        let filtered = filter.categories.is_some() || filter.max_side_effect.is_some();
        let k = if filtered { total } else { limit.min(total) };
        if k == 0 {
            return Ok(out);
        }
        let result = vectors.search(query, k)?;
        if !filtered {
            out.eligible = result
                .labels
                .iter()
                .zip(result.distances)
                .filter_map(|(l, s)| Some((s, l.get()?)))
                .collect();
            return Ok(out);
        }
        for (label, score) in result.labels.iter().zip(result.distances) {
            let Some((id, tool)) = label
                .get()
                .and_then(|id| self.tools.get(&id).map(|t| (id, t)))
            else {
                continue;
            };
            if !filter.in_scope(tool) {
                continue;
            }
            let list = if tool.side_effect.allowed_under(filter.max_side_effect) {
                &mut out.eligible
            } else {
                &mut out.excluded
            };
            if list.len() < limit {
                list.push((score, id));
            }
        }
        Ok(out)
    }

    /// Both retrievers of `query` on this state, so that they see the same generation.
    pub(crate) fn search(
        &self,
        fields: &Fields,
        query: &ToolQuery,
        buffers: &mut ScoreBuffers,
    ) -> IndexAnswer {
        let started = Instant::now();
        let lexical = query.lexical.map(|lexical| {
            self.search_lexical(fields, lexical, query.filter, query.limit, buffers)
        });
        let lexical_done = Instant::now();
        let dense = query
            .vector
            .map(|vector| self.search_dense(vector, query.filter, query.limit));
        IndexAnswer {
            generation: self.generation,
            lexical,
            dense,
            lexical_ms: (lexical_done - started).as_secs_f64() * 1e3,
            dense_ms: lexical_done.elapsed().as_secs_f64() * 1e3,
        }
    }
}

pub struct IntegrationIndex {
    dir: PathBuf,
    integration: String,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    state: RwLock<State>,
    write_lock: Mutex<()>,
}

impl IntegrationIndex {
    /// Opens the index in `dir`, creating an empty one if the directory holds none.
    pub fn open(dir: &Path, integration: &str) -> Result<Self> {
        let (schema, _) = build_schema();
        let (index, reader, generation) = open_tantivy(dir, schema)?;
        let fields = resolve(&index.schema())
            .ok_or_else(|| IndexError::Corrupt(format!("{}: unexpected schema", dir.display())))?;
        let state = load_state(reader.searcher(), &fields, generation, Some(dir))?;
        let this = Self {
            dir: dir.to_path_buf(),
            integration: integration.to_string(),
            index,
            reader,
            fields,
            state: RwLock::new(state),
            write_lock: Mutex::new(()),
        };
        this.flush_vectors()?;
        Ok(this)
    }

    /// Makes a durable commit visible: the new searcher and the in-memory state are published
    /// together, under the state lock, so a search never sees one without the other. If the
    /// in-memory update fails, everything is reloaded from the committed index instead: the write
    /// is durable either way.
    fn publish(
        &self,
        generation: u64,
        update: impl FnOnce(&mut State) -> Result<()>,
    ) -> Result<()> {
        let reloaded = self.reader.reload();
        let mut state = self.state.write();
        state.searcher = self.reader.searcher();
        state.generation = generation;
        let columns = id_columns(&state.searcher);
        let applied = reloaded
            .map_err(IndexError::from)
            .and(columns)
            .and_then(|columns| {
                state.id_columns = columns;
                update(&mut state)
            });
        if let Err(err) = applied {
            tracing::error!(integration = %self.integration, error = %err, "in-memory update after a commit failed; reloading");
            self.reader.reload()?;
            *state = load_state(self.reader.searcher(), &self.fields, generation, None)?;
        }
        Ok(())
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
            prepare_batch(tools, Some(&self.integration), state.dim, &state.tools)?
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
        // The first vectors of this index decide its dimension; create the FAISS index before the
        // commit so that nothing can fail for lack of it afterwards.
        let fresh_vectors = if self.state.read().vectors.is_none() {
            Some(IdMap::new(FlatIndexImpl::new_ip(
                batch[0].1.vector.len() as u32
            )?)?)
        } else {
            None
        };
        commit(&self.index, writer, generation)?;
        self.publish(generation, move |state| {
            if let Some(v) = fresh_vectors {
                state.dim = batch[0].1.vector.len();
                state.vectors = Some(v);
            }
            let ids: Vec<u64> = batch.iter().map(|(id, _)| *id).collect();
            let flat: Vec<f32> = batch
                .iter()
                .flat_map(|(_, t)| t.vector.iter().copied())
                .collect();
            let vectors = state
                .vectors
                .as_mut()
                .ok_or_else(|| IndexError::Corrupt("no vector index".into()))?;
            remove_vectors(vectors, &ids)?;
            let labels: Vec<Idx> = ids.iter().map(|&id| Idx::new(id)).collect();
            vectors.add_with_ids(&flat, &labels)?;
            for (id, tool) in batch {
                state.ids.insert(tool.record.name.clone(), id);
                state.tools.insert(id, Arc::new(tool.record));
            }
            Ok(())
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
        self.publish(generation, |state| {
            let ids: Vec<u64> = present.iter().map(|(_, id)| *id).collect();
            if let Some(vectors) = state.vectors.as_mut() {
                remove_vectors(vectors, &ids)?;
            }
            for (name, id) in &present {
                state.ids.remove(name);
                state.tools.remove(id);
            }
            Ok(())
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
        let searcher = self.state.read().searcher.clone();
        lexical::add_term_stats(&searcher, &self.fields.named_text_fields(), terms, stats)
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
            .search_lexical(&self.fields, query, filter, limit, buffers)
    }

    /// Inner-product (cosine, vectors are normalised) nearest neighbours of `query`.
    pub fn search_dense(&self, query: &[f32], filter: &ToolFilter, limit: usize) -> Result<Scored> {
        self.state.read().search_dense(query, filter, limit)
    }

    /// The record behind a vector id.
    pub fn tool(&self, id: u64) -> Option<Arc<ToolRecord>> {
        self.state.read().tools.get(&id).cloned()
    }

    /// Writes the dense index to disk if it is older there than in memory. Writes do not call
    /// this (the tantivy commit is what makes a write durable: it stores every vector); the shard
    /// flushes periodically and on close, and [`IntegrationIndex::open`] rebuilds a stale file.
    pub fn flush_vectors(&self) -> Result<bool> {
        let _write = self.write_lock.lock();
        let generation = self.generation();
        if self.state.read().vectors.is_none() || meta_generation(&self.dir) == Some(generation) {
            return Ok(false);
        }
        self.save_vectors()?;
        Ok(true)
    }

    fn save_vectors(&self) -> Result<()> {
        let state = self.state.read();
        match &state.vectors {
            Some(vectors) => write_snapshot(&self.dir, vectors, state.generation, state.dim),
            None => Ok(()),
        }
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
        self.state.read().search(&self.fields, query, buffers)
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

/// Writes the FAISS snapshot of `generation` to `dir` (`vectors.faiss`, then `vectors.json`), each
/// file replaced atomically.
pub(crate) fn write_snapshot(
    dir: &Path,
    vectors: &IdMap<FlatIndexImpl>,
    generation: u64,
    dim: usize,
) -> Result<()> {
    let tmp = dir.join("vectors.faiss.tmp");
    faiss::write_index(vectors, path_str(&tmp)?)?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, dir.join("vectors.faiss"))?;
    let meta = serde_json::to_vec(&VectorsMeta { generation, dim })
        .map_err(|e| IndexError::Corrupt(e.to_string()))?;
    let tmp = dir.join("vectors.json.tmp");
    fs::write(&tmp, meta)?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, dir.join("vectors.json"))?;
    Ok(())
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

/// Reads every stored tool of the committed index. The vector index comes from the snapshot in
/// `dir` when it matches the generation and the stored ids, otherwise it is rebuilt from the stored
/// vectors.
fn load_state(
    searcher: Searcher,
    fields: &Fields,
    generation: u64,
    dir: Option<&Path>,
) -> Result<State> {
    let mut tools = IdMapOf::default();
    let mut ids = HashMap::new();
    let mut stored_vectors: Vec<(u64, Vec<f32>)> = Vec::new();
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
            stored_vectors.push((id, decode_vector(vector)));
            ids.insert(record.name.clone(), id);
            tools.insert(id, Arc::new(record));
        }
    }
    let snapshot = match dir {
        Some(dir) => read_snapshot(dir, generation)?,
        None => None,
    };
    let (vectors, dim) = match snapshot {
        Some((loaded, dim))
            if loaded.ntotal() as usize == tools.len()
                && loaded
                    .id_map()
                    .iter()
                    .all(|id| id.get().is_some_and(|id| tools.contains_key(&id))) =>
        {
            (Some(loaded), dim)
        }
        _ => rebuild(&stored_vectors)?,
    };
    let id_columns = id_columns(&searcher)?;
    Ok(State {
        searcher,
        id_columns,
        tools,
        ids,
        vectors,
        dim,
        generation,
    })
}

fn id_columns(searcher: &Searcher) -> Result<Vec<tantivy::columnar::Column<u64>>> {
    searcher
        .segment_readers()
        .iter()
        .map(|s| Ok(s.fast_fields().u64("id")?))
        .collect()
}

/// The FAISS snapshot in `dir`, if it was written at `generation`.
pub(crate) fn read_snapshot(
    dir: &Path,
    generation: u64,
) -> Result<Option<(IdMap<FlatIndexImpl>, usize)>> {
    let meta: Option<VectorsMeta> = fs::read(dir.join("vectors.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let faiss_path = dir.join("vectors.faiss");
    match meta {
        Some(meta) if meta.generation == generation && faiss_path.exists() => {
            let loaded = faiss::read_index(path_str(&faiss_path)?)?
                .into_id_map()?
                .try_cast_inner_index::<FlatIndexImpl>()?;
            Ok(Some((loaded, meta.dim)))
        }
        _ => Ok(None),
    }
}

pub(crate) fn rebuild(stored: &[(u64, Vec<f32>)]) -> Result<(Option<IdMap<FlatIndexImpl>>, usize)> {
    let Some((_, first)) = stored.first() else {
        return Ok((None, 0));
    };
    let dim = first.len();
    let mut index = IdMap::new(FlatIndexImpl::new_ip(dim as u32)?)?;
    let flat: Vec<f32> = stored.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let labels: Vec<Idx> = stored.iter().map(|(id, _)| Idx::new(*id)).collect();
    if stored.iter().any(|(_, v)| v.len() != dim) {
        return Err(IndexError::Corrupt(
            "stored vectors of different dimensions".into(),
        ));
    }
    index.add_with_ids(&flat, &labels)?;
    Ok((Some(index), dim))
}

pub(crate) fn remove_vectors(vectors: &mut IdMap<FlatIndexImpl>, ids: &[u64]) -> Result<()> {
    let labels: Vec<Idx> = ids.iter().map(|&id| Idx::new(id)).collect();
    let selector = IdSelector::batch(&labels)?;
    vectors.remove_ids(&selector)?;
    Ok(())
}

pub(crate) fn meta_generation(dir: &Path) -> Option<u64> {
    fs::read(dir.join("vectors.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<VectorsMeta>(&b).ok())
        .map(|m| m.generation)
}

pub(crate) fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| IndexError::Corrupt(format!("non-UTF-8 path {}", path.display())))
}

pub(crate) fn corrupt(what: &str) -> IndexError {
    IndexError::Corrupt(format!("stored document without a valid {what}"))
}

/// The vector id of a tool: FNV-1a of its name, 62 bits (FAISS ids are non-negative i64).
pub fn stable_id(name: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash >> 2
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
