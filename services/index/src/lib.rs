//! The indexes of one agentsearch shard: per project and integration, a tantivy (BM25) index and a
//! FAISS (dense) index ([`IntegrationIndex`]), persisted under the shard's data dir, and
//! [`ToolIndexes`], which routes writes to them and searches many of them as one; the tools a
//! request carries inline, indexed in memory for that request and ranked the same way
//! ([`InlineIndex`]); and for context search, per project and sync, a segment index
//! ([`SegmentIndex`], [`SegmentIndexes`]).
//!
//! It owns on-disk layout, generations, analysis and filtering inside the index. It does not own
//! fusion across retrievers, placement or embedding: those are the router's.

pub mod analyzer;
mod codes;
pub mod error;
pub mod inline_index;
pub mod lexical;
pub mod schema;
pub mod segment_index;
mod segment_vectors;
mod structured;
pub mod tool_index;
mod tool_slice;
mod tool_view;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::{
    Hit, IndexedTool, InlineSearchRequest, PartFailure, ScopeStats, ShardSearchRequest,
    ShardSearchResponse, ShardTimings, TermStats, TermStatsRequest, hit_order,
};
use agentsearch_common::tool::{MAX_SLUG_CHARS, ToolRecord};
use parking_lot::RwLock;

pub use error::{IndexError, Result};
pub use inline_index::{InlineIndex, MAX_INLINE_TOOLS};
pub use lexical::{LexicalQuery, ScoreBuffers};
pub use segment_index::{Candidate, SegmentIndex, SegmentIndexes};
pub use segment_vectors::DenseConfig;
pub use tool_index::{
    IndexAnswer, IntegrationIndex, Scored, Structured, ToolFilter, ToolQuery, ToolSource,
};

/// A project's tool indexes by integration (a search looks up every integration of its scope:
/// a fast keyed hash, seeded per process).
type ProjectIndexes = HashMap<String, Arc<IntegrationIndex>, foldhash::fast::RandomState>;

/// A project's indexes on the shard and its search view.
#[derive(Default)]
struct Project {
    indexes: ProjectIndexes,
    views: Arc<Views>,
}

/// A project's search view ([`tool_view`]) and what keeps it current.
#[derive(Default)]
struct Views {
    /// Publications of the project's indexes (and indexes created), counted by the indexes.
    published: Arc<AtomicU64>,
    current: RwLock<Option<Arc<tool_view::ToolView>>>,
    /// A build is running.
    building: AtomicBool,
}

impl Views {
    /// The view, if it is as current as the indexes.
    fn current(&self) -> Option<Arc<tool_view::ToolView>> {
        let published = self.published.load(Ordering::Acquire);
        self.current
            .read()
            .as_ref()
            .filter(|view| view.published() == published)
            .cloned()
    }

    /// Builds the view of `indexes` and publishes it; `published` was read before `indexes`
    /// were listed.
    fn build(&self, published: u64, indexes: Vec<Arc<IntegrationIndex>>) {
        let started = Instant::now();
        let view = tool_view::ToolView::build(published, indexes, schema::TEXT_FIELDS.len());
        tracing::debug!(
            rows = view.rows(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "tool search view built"
        );
        let mut current = self.current.write();
        // A slower build of an older count never replaces a newer view.
        if current.as_ref().is_none_or(|v| v.published() <= published) {
            *current = Some(Arc::new(view));
        }
    }
}

/// Every tool index of a shard, by project then integration (so that a search looks its scope up
/// by name, without building keys), and per project a search view over all of them.
pub struct ToolIndexes {
    root: PathBuf,
    lexical: LexicalConfig,
    indexes: RwLock<HashMap<String, Project>>,
    /// Held while an index is created, so that two writers never open the same new directory,
    /// while searches read `indexes` meanwhile.
    creating: parking_lot::Mutex<()>,
}

impl ToolIndexes {
    /// Opens every index under `root/tools/<project>/<integration>`, and builds each project's
    /// search view.
    pub fn open(root: &Path, lexical: LexicalConfig) -> Result<Self> {
        let tools_dir = root.join("tools");
        fs::create_dir_all(&tools_dir)?;
        let mut indexes: HashMap<String, Project> = HashMap::new();
        for project in fs::read_dir(&tools_dir)? {
            let project = project?;
            if !project.file_type()?.is_dir() {
                continue;
            }
            let project_id = project.file_name().to_string_lossy().to_string();
            for integration in fs::read_dir(project.path())? {
                let integration = integration?;
                if !integration.file_type()?.is_dir() {
                    continue;
                }
                let name = integration.file_name().to_string_lossy().to_string();
                let entry = indexes.entry(project_id.clone()).or_default();
                let index = IntegrationIndex::open_counted(
                    &integration.path(),
                    &name,
                    entry.views.published.clone(),
                )?;
                entry.indexes.insert(name, Arc::new(index));
            }
        }
        let indexes = Self {
            root: root.to_path_buf(),
            lexical,
            indexes: RwLock::new(indexes),
            creating: parking_lot::Mutex::new(()),
        };
        indexes.build_views();
        Ok(indexes)
    }

    /// Number of indexes and of tools held.
    pub fn counts(&self) -> (u64, u64) {
        let indexes = self.indexes.read();
        let all = || {
            indexes
                .values()
                .flat_map(|project| project.indexes.values())
        };
        (all().count() as u64, all().map(|i| i.len() as u64).sum())
    }

    /// Sum of the generations of every index (grows with every write).
    pub fn generations(&self) -> u64 {
        let indexes = self.indexes.read();
        indexes
            .values()
            .flat_map(|project| project.indexes.values())
            .map(|i| i.generation())
            .sum()
    }

    pub fn get(&self, project: &str, integration: &str) -> Option<Arc<IntegrationIndex>> {
        self.indexes
            .read()
            .get(project)
            .and_then(|p| p.indexes.get(integration))
            .cloned()
    }

    /// Builds the search view of every project whose view is not current, now, on this thread.
    /// (A search that finds its project's view out of date builds it in the background and
    /// searches the indexes one by one meanwhile.)
    pub fn build_views(&self) {
        let projects: Vec<String> = self.indexes.read().keys().cloned().collect();
        for project in projects {
            if let Some((views, published, indexes)) = self.stale_view(&project) {
                views.build(published, indexes);
            }
        }
    }

    /// Whether the project's search view is as current as its indexes (searches then use it).
    pub fn has_current_view(&self, project: &str) -> bool {
        let views = self.indexes.read().get(project).map(|p| p.views.clone());
        views.is_some_and(|views| views.current().is_some())
    }

    /// The project's view, if it is current; otherwise starts a build of it in the background
    /// (unless one is running).
    fn view(&self, project: &str) -> Option<Arc<tool_view::ToolView>> {
        let views = self.indexes.read().get(project)?.views.clone();
        if let Some(view) = views.current() {
            return Some(view);
        }
        if views.building.swap(true, Ordering::AcqRel) {
            return None;
        }
        let Some((views, published, indexes)) = self.stale_view(project) else {
            views.building.store(false, Ordering::Release);
            return None;
        };
        rayon::spawn(move || {
            // A panic here must not reach the pool (it would abort the process): the searches
            // go on one index at a time and the next one tries again.
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                views.build(published, indexes)
            }));
            if built.is_err() {
                tracing::error!("building a tool search view panicked");
            }
            views.building.store(false, Ordering::Release);
        });
        None
    }

    /// What a build of the project's view needs, if its view is not current: the publication
    /// count, read before the indexes are listed.
    #[allow(clippy::type_complexity)]
    fn stale_view(&self, project: &str) -> Option<(Arc<Views>, u64, Vec<Arc<IntegrationIndex>>)> {
        let views = self.indexes.read().get(project)?.views.clone();
        if views.current().is_some() {
            return None;
        }
        let published = views.published.load(Ordering::Acquire);
        let indexes = self
            .indexes
            .read()
            .get(project)?
            .indexes
            .values()
            .cloned()
            .collect();
        Some((views, published, indexes))
    }

    /// The index of `integration` in `project`, created empty if it does not exist.
    pub fn get_or_create(&self, project: &str, integration: &str) -> Result<Arc<IntegrationIndex>> {
        check_path_component("projectId", project)?;
        check_path_component("integration", integration)?;
        if let Some(index) = self.get(project, integration) {
            return Ok(index);
        }
        let _creating = self.creating.lock();
        if let Some(index) = self.get(project, integration) {
            return Ok(index);
        }
        let published = (self.indexes.write())
            .entry(project.to_string())
            .or_default()
            .views
            .published
            .clone();
        // Opened (files created) with no lock a search takes.
        let dir = self.root.join("tools").join(project).join(integration);
        let index = Arc::new(IntegrationIndex::open_counted(
            &dir,
            integration,
            published.clone(),
        )?);
        (self.indexes.write())
            .entry(project.to_string())
            .or_default()
            .indexes
            .insert(integration.to_string(), index.clone());
        // The project's view does not hold the new index.
        published.fetch_add(1, Ordering::Release);
        Ok(index)
    }

    fn scoped(&self, project: &str, integrations: &[String]) -> Vec<Arc<IntegrationIndex>> {
        let indexes = self.indexes.read();
        let Some(project) = indexes.get(project).map(|p| &p.indexes) else {
            return Vec::new();
        };
        let mut seen = HashSet::with_capacity_and_hasher(
            integrations.len(),
            foldhash::fast::RandomState::default(),
        );
        integrations
            .iter()
            .filter(|i| seen.insert(i.as_str()))
            .filter_map(|i| project.get(i.as_str()).cloned())
            .collect()
    }

    /// Upserts tools of any integrations of a project, one index at a time.
    pub fn upsert(&self, project_id: &str, tools: Vec<IndexedTool>) -> Result<u64> {
        let mut by_integration: std::collections::BTreeMap<String, Vec<IndexedTool>> =
            Default::default();
        for tool in tools {
            by_integration
                .entry(tool.record.integration.clone())
                .or_default()
                .push(tool);
        }
        let mut written = 0;
        for (integration, tools) in by_integration {
            written += tools.len() as u64;
            self.get_or_create(project_id, &integration)?
                .upsert(tools)?;
        }
        Ok(written)
    }

    /// BM25 statistics of the query over the named indexes.
    pub fn term_stats(&self, request: &TermStatsRequest) -> Result<TermStats> {
        self.scope_stats(request).map(|counted| counted.stats)
    }

    /// [`ToolIndexes::term_stats`] with the stamp of the index states counted: a search of the
    /// same indexes that reports this stamp ranked on exactly these statistics.
    pub fn scope_stats(&self, request: &TermStatsRequest) -> Result<ScopeStats> {
        if let Some(stats) = self.view_stats(request) {
            return Ok(stats);
        }
        let terms = analyzer::analyze(&request.query);
        let (stats, stamp) = scoped_stats(
            &self.scoped(&request.project_id, &request.integrations),
            &terms,
        );
        Ok(ScopeStats {
            stats,
            stamp: Some(stamp),
        })
    }

    /// [`ToolIndexes::scope_stats`] when the project's search view is current: counted from its
    /// merged postings, microseconds of work. `None` otherwise (the indexes are then counted one
    /// by one, which can take a while).
    pub fn view_stats(&self, request: &TermStatsRequest) -> Option<ScopeStats> {
        let view = self.view(&request.project_id)?;
        let terms = analyzer::analyze(&request.query);
        let scope = view.scope(&request.integrations);
        Some(ScopeStats {
            stats: view.stats_of(&scope, &schema::TEXT_FIELDS, &terms),
            stamp: Some(view.stamp_of(&scope)),
        })
    }

    /// Searches the named indexes with both retrievers; an index that fails is reported in
    /// `failures` and the others still answer. Only the best `limit` candidates per list become
    /// named hits. A string query runs on the project's search view when it is current
    /// ([`tool_view`]); a structured one, or any while the view is rebuilt, searches the indexes
    /// one by one ([`ToolIndexes::search_each`]), which answers the same.
    pub fn search(&self, request: &ShardSearchRequest) -> ShardSearchResponse {
        self.run(request, self.prepare(request))
    }

    /// The first step of [`ToolIndexes::search`]: finds the view and the scope the search will
    /// run on, so that its caller can tell where to run it ([`PreparedSearch::runs_alone`]).
    pub fn prepare(&self, request: &ShardSearchRequest) -> PreparedSearch {
        let started = Instant::now();
        let on_view = request
            .structured
            .is_none()
            .then(|| self.view(&request.project_id))
            .flatten()
            .map(|view| {
                let scope = view.scope(&request.integrations);
                (view, scope)
            })
            .filter(|(view, scope)| view.suits(scope));
        PreparedSearch { started, on_view }
    }

    /// Ranks a search [`ToolIndexes::prepare`] prepared for this `request`.
    pub fn run(
        &self,
        request: &ShardSearchRequest,
        prepared: PreparedSearch,
    ) -> ShardSearchResponse {
        let Some((view, scope)) = prepared.on_view else {
            return self.search_each(request);
        };
        let _span = tracing::info_span!(
            "index_search",
            integrations = request.integrations.len(),
            view = true
        )
        .entered();
        let terms = if request.lexical {
            analyzer::analyze(&request.query)
        } else {
            Vec::new()
        };
        let lexical = self.lexical_under(&terms, request.stats.as_ref(), || {
            view.stats_of(&scope, &schema::TEXT_FIELDS, &terms)
        });
        view.search(request, &scope, &lexical, prepared.started)
    }

    /// [`ToolIndexes::search`] of each named index in turn, candidates of all indexes pooled as
    /// `(score, index, vector id)`.
    pub fn search_each(&self, request: &ShardSearchRequest) -> ShardSearchResponse {
        let _span = tracing::info_span!("index_search", integrations = request.integrations.len())
            .entered();
        let prepare_started = Instant::now();
        let filter = ToolFilter::new(&request.categories, request.max_side_effect);
        let terms = if request.lexical {
            analyzer::analyze(&request.query)
        } else {
            Vec::new()
        };
        let structured = match request.structured.as_deref().map(parse_structured) {
            None => None,
            Some(Ok(structured)) => Some(structured),
            Some(Err(err)) => {
                return ShardSearchResponse {
                    failures: request
                        .integrations
                        .iter()
                        .map(|integration| failure(integration, "structured", &err))
                        .collect(),
                    ..ShardSearchResponse::default()
                };
            }
        };
        let scoped = self.scoped(&request.project_id, &request.integrations);
        let lexical = self.lexical_under(&terms, request.stats.as_ref(), || {
            scoped_stats(&scoped, &terms).0
        });
        let query = ToolQuery {
            lexical: request.lexical.then_some(&lexical),
            vector: request.vector.as_deref(),
            filter: &filter,
            limit: request.limit as usize,
            structured: structured.as_ref(),
        };
        let mut response = search_sources(&scoped, &query, prepare_started);
        response.structured = structured.is_some();
        if let Some(structured) = structured.as_ref().filter(|s| s.highlight) {
            let nodes: Vec<&agentsearch_query::Node> =
                structured.query.iter().chain(&structured.filter).collect();
            let highlighter = structured::Highlighter::new(&terms, &nodes, &["description"]);
            for tool in &response.tools {
                let fragments = highlighter.fragments(&tool.description);
                if !fragments.is_empty() {
                    response.highlights.insert(tool.name.clone(), fragments);
                }
            }
        }
        response
    }

    /// Ranks the tools a request carries ([`InlineIndex`]) as [`ToolIndexes::search`] ranks
    /// catalog tools: same analysis, BM25F parameters and filters. The BM25 statistics are the
    /// request's (the catalog's, from the router) plus the inline tools' own, so their scores sit on
    /// the catalog's scale. Nothing is persisted; `generations` is empty.
    pub fn search_inline(&self, request: InlineSearchRequest) -> Result<ShardSearchResponse> {
        let prepare_started = Instant::now();
        let index = InlineIndex::build(request.tools)?;
        let filter = ToolFilter::new(&request.categories, request.max_side_effect);
        let terms = if request.lexical {
            analyzer::analyze(&request.query)
        } else {
            Vec::new()
        };
        let lexical = if terms.is_empty() {
            LexicalQuery::default()
        } else {
            let mut stats = request.stats.unwrap_or_default();
            index.add_term_stats(&terms, &mut stats)?;
            self.lexical_query(&terms, &stats)
        };
        let query = ToolQuery {
            lexical: request.lexical.then_some(&lexical),
            vector: request.vector.as_deref(),
            filter: &filter,
            limit: request.limit as usize,
            structured: None,
        };
        let mut response = search_sources(&[index], &query, prepare_started);
        response.generations.clear();
        response.stamp = None;
        Ok(response)
    }

    /// The BM25F query of analyzed `terms` under the router's global statistics, else under
    /// `own()` (those of every index searched here), so that the scores of different indexes are
    /// comparable.
    fn lexical_under(
        &self,
        terms: &[String],
        global: Option<&TermStats>,
        own: impl FnOnce() -> TermStats,
    ) -> LexicalQuery {
        if terms.is_empty() {
            return LexicalQuery::default();
        }
        match global {
            Some(stats) => self.lexical_query(terms, stats),
            None => self.lexical_query(terms, &own()),
        }
    }

    /// The BM25F query of analyzed `terms` under `stats`, with the shard's field weights.
    fn lexical_query(&self, terms: &[String], stats: &TermStats) -> LexicalQuery {
        LexicalQuery::new(
            terms,
            stats,
            &schema::weighted_fields(&self.lexical),
            self.lexical.k1,
            self.lexical.b,
        )
    }
}

/// A tool search with its view and scope found ([`ToolIndexes::prepare`]).
pub struct PreparedSearch {
    started: Instant,
    /// The project's current view and the request's scope in it, when the view serves it.
    on_view: Option<(Arc<tool_view::ToolView>, tool_view::Scope)>,
}

impl PreparedSearch {
    /// Whether the search is small and runs on one thread from start to end: on the view, with
    /// fewer rows in scope than two workers would share (on any number of cores). Handing such
    /// a search to a worker pool adds two thread wake-ups to its time and saves nothing.
    pub fn runs_alone(&self) -> bool {
        self.on_view
            .as_ref()
            .is_some_and(|(view, scope)| view.fits_one_worker(scope))
    }
}

/// Searches `sources` with both retrievers of `query`; a source that fails is reported in
/// `failures` and the others still answer. Candidates of all sources are pooled as
/// `(score, source, vector id)` and only the best `limit` per list become named hits.
fn search_sources<S: ToolSource>(
    sources: &[S],
    query: &ToolQuery,
    prepare_started: Instant,
) -> ShardSearchResponse {
    let limit = query.limit;
    // Many indexes: split them over the cores (queries of one client then use the machine).
    let started = Instant::now();
    let workers = if sources.len() >= PARALLEL_FROM {
        parallelism().min(sources.len())
    } else {
        1
    };
    let chunk = sources.len().div_ceil(workers.max(1)).max(1);
    let run = |offset: usize, part: &[S]| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            search_part(offset, part, query)
        }))
        .unwrap_or_else(|_| Part {
            failures: part
                .iter()
                .map(|source| PartFailure {
                    integration: source.integration().to_string(),
                    retriever: String::new(),
                    message: "index search panicked".into(),
                })
                .collect(),
            // Keeps the positions of the later parts' generations.
            generations: vec![0; part.len()],
            ..Part::default()
        })
    };
    // On the process's worker pool (threads that live on), not threads started per request.
    let parts: Vec<Part> = if workers > 1 {
        use rayon::prelude::*;
        sources
            .par_chunks(chunk)
            .enumerate()
            .map(|(n, part)| run(n * chunk, part))
            .collect()
    } else {
        vec![run(0, sources)]
    };
    let mut pools: [Vec<(f32, (usize, u64))>; 4] = Default::default();
    let mut failures = Vec::new();
    let mut matched = std::collections::BTreeMap::new();
    let mut stamp = 0u64;
    // The generation each source was searched at, by position in `sources`.
    let mut searched_at = Vec::with_capacity(sources.len());
    let mut timings = ShardTimings {
        prepare_ms: (started - prepare_started).as_secs_f64() * 1e3,
        ..Default::default()
    };
    for part in parts {
        for (pool, more) in pools.iter_mut().zip(part.pools) {
            pool.extend(more);
        }
        failures.extend(part.failures);
        searched_at.extend(part.generations);
        stamp = stamp.wrapping_add(part.stamp);
        for (integration, n) in part.matched {
            *matched.entry(integration).or_insert(0) += n;
        }
        timings.lexical_ms = timings.lexical_ms.max(part.lexical_ms);
        timings.dense_ms = timings.dense_ms.max(part.dense_ms);
    }
    let dense_done = Instant::now();
    tracing::trace!(
        workers,
        ms = (dense_done - started).as_secs_f64() * 1e3,
        "indexes searched"
    );
    let resolve = |(source, id): (usize, u64)| Some((sources[source].tool(id)?, source));
    let lists = pools.map(|p| best_hits(p, limit, resolve));
    let generation_of =
        |source: usize| Some((sources[source].integration(), *searched_at.get(source)?));
    let timings = ShardTimings {
        assemble_ms: dense_done.elapsed().as_secs_f64() * 1e3,
        ..timings
    };
    ShardSearchResponse {
        matched,
        stamp: Some(stamp),
        ..answer(lists, generation_of, failures, timings)
    }
}

/// A shard's answer from its four lists of named hits (lexical, excluded lexical, dense,
/// excluded dense), each hit with its record and the index it came from: the records of the
/// eligible hits (once per name) and the generation of each index that gave a hit (what the hits
/// were ranked from), by `generation_of` the index.
pub(crate) fn answer<'a, P: Copy>(
    lists: [Vec<(Hit, Arc<ToolRecord>, P)>; 4],
    generation_of: impl Fn(P) -> Option<(&'a str, u64)>,
    failures: Vec<PartFailure>,
    timings: ShardTimings,
) -> ShardSearchResponse {
    let [lexical, excluded_lexical, dense, excluded_dense] = lists;
    let mut seen = HashSet::new();
    let tools = lexical
        .iter()
        .chain(dense.iter())
        .filter(|(hit, ..)| seen.insert(hit.name.clone()))
        .map(|(_, record, _)| record.clone())
        .collect();
    let mut generations = std::collections::BTreeMap::new();
    for &(_, _, source) in [&lexical, &excluded_lexical, &dense, &excluded_dense]
        .into_iter()
        .flatten()
    {
        if let Some((integration, generation)) = generation_of(source)
            && !generations.contains_key(integration)
        {
            generations.insert(integration.to_string(), generation);
        }
    }
    let strip = |v: Vec<(Hit, Arc<ToolRecord>, P)>| v.into_iter().map(|(h, ..)| h).collect();
    ShardSearchResponse {
        lexical: strip(lexical),
        dense: strip(dense),
        excluded_lexical: strip(excluded_lexical),
        excluded_dense: strip(excluded_dense),
        tools,
        failures,
        timings,
        generations,
        matched: Default::default(),
        highlights: Default::default(),
        structured: false,
        stamp: None,
    }
}

/// The structured part of a query JSON document, as the router sent it.
fn parse_structured(json: &str) -> Result<Structured> {
    Structured::parse(json, agentsearch_query::Catalog::tools())
}

/// Statistics of the query's terms over `indexes`: counted in place over every index's slice,
/// then named once; with the stamp of the states counted.
fn scoped_stats(indexes: &[Arc<IntegrationIndex>], terms: &[String]) -> (TermStats, u64) {
    let names = schema::TEXT_FIELDS;
    let mut counts = tool_slice::TermCounts::new(names.len(), terms.len());
    let mut stamp = 0u64;
    for index in indexes {
        stamp = stamp.wrapping_add(index.count_terms(terms, &mut counts));
    }
    let mut stats = TermStats::default();
    counts.add_to(&names, terms, &mut stats);
    (stats, stamp)
}

/// Scopes of at least this many indexes are searched on several threads.
const PARALLEL_FROM: usize = 32;

/// The machine's cores (read once: on Linux, asking reads the cgroup's files).
pub(crate) fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The candidates of a run of indexes (positions from `offset` in the scope).
#[derive(Default)]
struct Part {
    pools: [Vec<(f32, (usize, u64))>; 4],
    failures: Vec<PartFailure>,
    /// The generation each index was searched at, in order.
    generations: Vec<u64>,
    /// The stamp of the states searched (a panicked part counts nothing, so its stamp is off).
    stamp: u64,
    /// Exact counts of the structured query's matches, by integration.
    matched: Vec<(String, u64)>,
    lexical_ms: f64,
    dense_ms: f64,
}

fn search_part<S: ToolSource>(offset: usize, sources: &[S], query: &ToolQuery) -> Part {
    let mut part = Part::default();
    let mut buffers = ScoreBuffers::default();
    for (i, source) in sources.iter().enumerate() {
        let answer = source.search(query, &mut buffers);
        part.generations.push(answer.generation);
        part.stamp = part.stamp.wrapping_add(answer.stamp);
        if let Some(matched) = answer.matched {
            part.matched
                .push((source.integration().to_string(), matched));
        }
        part.lexical_ms += answer.lexical_ms;
        part.dense_ms += answer.dense_ms;
        for (at, retriever, scored) in [(0, "lexical", answer.lexical), (2, "dense", answer.dense)]
        {
            match scored {
                Some(Ok(scored)) => pool(&mut part.pools, at, offset + i, scored, &mut buffers),
                Some(Err(err)) => {
                    part.failures
                        .push(failure(source.integration(), retriever, &err))
                }
                None => {}
            }
        }
    }
    part
}

/// Adds one index's eligible and excluded candidates to the pools at `at` and `at + 1`; the
/// emptied lists go back to `buffers`.
fn pool(
    pools: &mut [Vec<(f32, (usize, u64))>; 4],
    at: usize,
    index: usize,
    scored: Scored,
    buffers: &mut ScoreBuffers,
) {
    pools[at].extend(scored.eligible.iter().map(|&(s, id)| (s, (index, id))));
    pools[at + 1].extend(scored.excluded.iter().map(|&(s, id)| (s, (index, id))));
    buffers.recycle(scored.eligible);
    buffers.recycle(scored.excluded);
}

/// The best `limit` candidates of a pool as named hits in [`hit_order`] (ties broken by name,
/// including at the cut), each with its record and source as `resolve` gives them (a candidate
/// it does not resolve is left out).
pub(crate) fn best_hits<C, P>(
    mut pool: Vec<(f32, C)>,
    limit: usize,
    resolve: impl Fn(C) -> Option<(Arc<ToolRecord>, P)>,
) -> Vec<(Hit, Arc<ToolRecord>, P)> {
    // Everything tied with the cut stays, so that names decide among them.
    tool_slice::keep_best(&mut pool, limit, |c| c.0);
    let mut hits: Vec<(Hit, Arc<ToolRecord>, P)> = pool
        .into_iter()
        .filter_map(|(score, candidate)| {
            let (record, source) = resolve(candidate)?;
            Some((
                Hit {
                    name: record.name.clone(),
                    integration: record.integration.clone(),
                    score,
                },
                record,
                source,
            ))
        })
        .collect();
    hits.sort_by(|a, b| hit_order(&a.0, &b.0));
    hits.truncate(limit);
    hits
}

pub(crate) fn failure(integration: &str, retriever: &str, err: &IndexError) -> PartFailure {
    tracing::warn!(integration, retriever, error = %err, "index search failed");
    PartFailure {
        integration: integration.to_string(),
        retriever: retriever.to_string(),
        message: err.to_string(),
    }
}

/// Project ids and integration slugs become directory names: allow only safe characters.
fn check_path_component(field: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_SLUG_CHARS
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !value.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(IndexError::invalid(
            field,
            format!("`{value}` is not a valid identifier"),
        ))
    }
}
