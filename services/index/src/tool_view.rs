//! The search view of one project's tool indexes on a shard: the published slices of all its
//! integration indexes ([`crate::tool_slice::Slice`]) laid end to end as one row space, with the
//! postings of every term merged over them.
//!
//! A string query then costs one lookup per term and one pass over the merged postings, one pass
//! of inner products over the project's vectors (the slices' own matrices, not a copy) and one
//! selection per list, instead of all of that once per integration and a pool of every index's
//! candidates to select from again. Scores are the slices' arithmetic in the same order, so a
//! search through the view answers exactly what the same search of the indexes one by one
//! answers (tested over random catalogs, scopes and filters).
//!
//! A view is built at one count of the project's publications ([`IntegrationIndex`] counts every
//! commit it makes visible); a search uses it only while that count has not moved, and otherwise
//! searches the indexes one by one while a new view is built in the background. A write that has
//! been acknowledged has been counted, so it is never missing from an answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use agentsearch_common::shard::{
    Hit, PartFailure, ShardSearchRequest, ShardSearchResponse, ShardTimings, TermStats,
};
use agentsearch_common::tool::ToolRecord;

use crate::codes::{Candidates, QueryCode};
use crate::lexical::{LexicalQuery, ScoreBuffers};
use crate::tool_index::{IntegrationIndex, ToolFilter};
use crate::tool_slice::{Posting, Slice, TermCounts, inner_products, keep_best};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Rows of one dense worker at least: fewer are not worth a hand-off to another thread.
const ROWS_PER_WORKER: usize = 2048;

/// One integration index as the view holds it.
struct Part {
    index: Arc<IntegrationIndex>,
    slice: Arc<Slice>,
    generation: u64,
    /// The part's fingerprint in a stamp ([`crate::tool_index::state_stamp`]).
    stamp: u64,
    /// The part's first row in the view.
    start: u32,
}

/// A term's postings over the whole view and where its statistics come from.
struct ViewTerm {
    /// By field (query order), then row.
    postings: Vec<Posting>,
    /// The parts holding the term, ascending.
    parts: Vec<u32>,
    /// Their document frequencies per field (`parts.len() x fields`).
    doc_freqs: Vec<u64>,
    /// The sums over every part, per field.
    total: Vec<u64>,
}

/// See the module documentation.
pub(crate) struct ToolView {
    /// The project's publication count the view was read at.
    published: u64,
    parts: Vec<Part>,
    part_of: FastMap<String, u32>,
    /// The part of each row.
    row_part: Vec<u32>,
    terms: FastMap<String, ViewTerm>,
    fields: usize,
    total_docs: u64,
    field_tokens: Vec<u64>,
}

/// The parts a request names, in request order without repeats; `all` when they are every part.
pub(crate) struct Scope {
    parts: Vec<u32>,
    mask: Vec<bool>,
    all: bool,
}

impl Scope {
    #[inline]
    fn has(&self, part: u32) -> bool {
        self.all || self.mask[part as usize]
    }
}

/// Candidates of one retriever: eligible, and removed by the side-effect ceiling, as
/// `(score, row)`.
#[derive(Default)]
struct Lists {
    eligible: Vec<(f32, u32)>,
    excluded: Vec<(f32, u32)>,
}

impl Lists {
    fn keep_best(&mut self, limit: usize) {
        keep_best(&mut self.eligible, limit, |c| c.0);
        keep_best(&mut self.excluded, limit, |c| c.0);
    }

    fn append(&mut self, mut other: Lists) {
        self.eligible.append(&mut other.eligible);
        self.excluded.append(&mut other.excluded);
    }
}

impl ToolView {
    /// Reads the published slices of `indexes` (each with its generation) as they are now;
    /// `published` is the project's publication count read before.
    pub(crate) fn build(
        published: u64,
        mut indexes: Vec<Arc<IntegrationIndex>>,
        fields: usize,
    ) -> Self {
        indexes.sort_by(|a, b| a.integration().cmp(b.integration()));
        let mut view = ToolView {
            published,
            parts: Vec::with_capacity(indexes.len()),
            part_of: FastMap::default(),
            row_part: Vec::new(),
            terms: FastMap::default(),
            fields,
            total_docs: 0,
            field_tokens: vec![0; fields],
        };
        for index in indexes {
            let (slice, generation) = index.snapshot();
            let part = view.parts.len() as u32;
            let start = view.row_part.len() as u32;
            view.row_part
                .resize(view.row_part.len() + slice.len(), part);
            let (docs, tokens) = slice.totals();
            view.total_docs += docs;
            for (total, t) in view.field_tokens.iter_mut().zip(tokens) {
                *total += t;
            }
            view.part_of.insert(index.integration().to_string(), part);
            view.parts.push(Part {
                stamp: crate::tool_index::state_stamp(index.integration(), &slice),
                index,
                slice,
                generation,
                start,
            });
        }
        // Every term's entries, part by part (ascending), then merged field by field so that the
        // postings are ordered by field then row, as one slice's are.
        let mut entries: FastMap<&str, Vec<(u32, &[u64], &[Posting])>> = FastMap::default();
        for (p, part) in view.parts.iter().enumerate() {
            for (text, doc_freq, postings) in part.slice.terms() {
                entries
                    .entry(text)
                    .or_default()
                    .push((p as u32, doc_freq, postings));
            }
        }
        let mut terms = FastMap::default();
        terms.reserve(entries.len());
        for (text, list) in entries {
            let mut term = ViewTerm {
                postings: Vec::with_capacity(list.iter().map(|(_, _, p)| p.len()).sum()),
                parts: Vec::with_capacity(list.len()),
                doc_freqs: Vec::with_capacity(list.len() * fields),
                total: vec![0; fields],
            };
            for &(p, doc_freq, _) in &list {
                term.parts.push(p);
                for f in 0..fields {
                    let df = doc_freq.get(f).copied().unwrap_or(0);
                    term.doc_freqs.push(df);
                    term.total[f] += df;
                }
            }
            for f in 0..fields {
                for &(p, _, postings) in &list {
                    let start = view.parts[p as usize].start;
                    let from = postings.partition_point(|q| usize::from(q.field) < f);
                    let to = postings.partition_point(|q| usize::from(q.field) <= f);
                    term.postings
                        .extend(postings[from..to].iter().map(|q| Posting {
                            row: q.row + start,
                            ..*q
                        }));
                }
            }
            terms.insert(text.to_string(), term);
        }
        view.terms = terms;
        view
    }

    /// The project's publication count the view was read at.
    pub(crate) fn published(&self) -> u64 {
        self.published
    }

    /// Tools in the view.
    pub(crate) fn rows(&self) -> usize {
        self.row_part.len()
    }

    pub(crate) fn scope(&self, integrations: &[String]) -> Scope {
        let mut mask = vec![false; self.parts.len()];
        let mut parts = Vec::with_capacity(integrations.len().min(self.parts.len()));
        for integration in integrations {
            if let Some(&p) = self.part_of.get(integration.as_str())
                && !std::mem::replace(&mut mask[p as usize], true)
            {
                parts.push(p);
            }
        }
        Scope {
            all: parts.len() == self.parts.len(),
            parts,
            mask,
        }
    }

    /// The stamp of the scope's index states (what [`ToolView::search`] reports).
    pub(crate) fn stamp_of(&self, scope: &Scope) -> u64 {
        scope.parts.iter().fold(0u64, |sum, &p| {
            sum.wrapping_add(self.parts[p as usize].stamp)
        })
    }

    /// Statistics of `terms` over the scope, under the fields' `names`.
    pub(crate) fn stats_of(&self, scope: &Scope, names: &[&str], terms: &[String]) -> TermStats {
        let mut counts = TermCounts::new(names.len(), terms.len());
        if scope.all {
            counts.add_totals(self.total_docs, &self.field_tokens);
        } else {
            for &p in &scope.parts {
                let (docs, tokens) = self.parts[p as usize].slice.totals();
                counts.add_totals(docs, tokens);
            }
        }
        for (t, text) in terms.iter().enumerate() {
            let Some(term) = self.terms.get(text.as_str()) else {
                continue;
            };
            if scope.all {
                counts.add_doc_freqs(t, &term.total);
                continue;
            }
            for (i, &p) in term.parts.iter().enumerate() {
                if scope.has(p) {
                    counts
                        .add_doc_freqs(t, &term.doc_freqs[i * self.fields..(i + 1) * self.fields]);
                }
            }
        }
        let mut stats = TermStats::default();
        counts.add_to(names, terms, &mut stats);
        stats
    }

    /// Searches the `scope` of `request` with both retrievers and the prepared `lexical` query,
    /// as the indexes searched one by one would ([`crate::ToolIndexes::search`] without a
    /// structured query).
    pub(crate) fn search(
        &self,
        request: &ShardSearchRequest,
        scope: &Scope,
        lexical: &LexicalQuery,
        prepare_started: Instant,
    ) -> ShardSearchResponse {
        let filter = ToolFilter::new(&request.categories, request.max_side_effect);
        let limit = request.limit as usize;
        let started = Instant::now();
        let run_lexical = || {
            let begun = Instant::now();
            let lists = if request.lexical {
                self.lexical(lexical, scope, &filter, limit)
            } else {
                Lists::default()
            };
            (lists, begun.elapsed().as_secs_f64() * 1e3)
        };
        let run_dense = || {
            let begun = Instant::now();
            let answer = request
                .vector
                .as_deref()
                .map(|vector| self.dense(vector, scope, &filter, limit));
            (answer, begun.elapsed().as_secs_f64() * 1e3)
        };
        let ((lexical, lexical_ms), (dense, dense_ms)) =
            if request.vector.is_some() && self.workers(scope) > 1 {
                rayon::join(run_lexical, run_dense)
            } else {
                (run_lexical(), run_dense())
            };
        let searched = Instant::now();
        let (dense, failures) = dense.unwrap_or_default();
        let hits = |lists: Lists| {
            let Lists { eligible, excluded } = lists;
            [self.hits(eligible, limit), self.hits(excluded, limit)]
        };
        let [lexical, excluded_lexical] = hits(lexical);
        let [dense, excluded_dense] = hits(dense);
        let generation_of = |p: u32| {
            let part = &self.parts[p as usize];
            Some((part.index.integration(), part.generation))
        };
        let timings = ShardTimings {
            prepare_ms: (started - prepare_started).as_secs_f64() * 1e3,
            lexical_ms,
            dense_ms,
            assemble_ms: searched.elapsed().as_secs_f64() * 1e3,
        };
        ShardSearchResponse {
            stamp: Some(self.stamp_of(scope)),
            ..crate::answer(
                [lexical, excluded_lexical, dense, excluded_dense],
                generation_of,
                failures,
                timings,
            )
        }
    }

    /// Whether a search of `integrations` is cheaper here than index by index: the lexical
    /// retriever scores the postings of every row of the view, so a scope of a small share of the
    /// project's tools is searched index by index.
    pub(crate) fn suits(&self, scope: &Scope) -> bool {
        scope.all || self.scoped_rows(scope) * 4 >= self.rows()
    }

    fn scoped_rows(&self, scope: &Scope) -> usize {
        if scope.all {
            return self.rows();
        }
        scope
            .parts
            .iter()
            .map(|&p| self.parts[p as usize].slice.len())
            .sum()
    }

    /// Whether a search of `scope` has too few rows to share among workers on any machine: it
    /// runs on the calling thread ([`ToolView::workers`] is then 1).
    pub(crate) fn fits_one_worker(&self, scope: &Scope) -> bool {
        self.scoped_rows(scope) < 2 * ROWS_PER_WORKER
    }

    /// Threads worth using for the dense retriever over `scope`.
    fn workers(&self, scope: &Scope) -> usize {
        crate::parallelism()
            .min(self.scoped_rows(scope) / ROWS_PER_WORKER)
            .max(1)
    }

    /// BM25F over the merged postings, rows of the scope only.
    fn lexical(
        &self,
        query: &LexicalQuery,
        scope: &Scope,
        filter: &ToolFilter,
        limit: usize,
    ) -> Lists {
        let mut lists = Lists::default();
        if query.is_empty() || limit == 0 {
            return lists;
        }
        BUFFERS.with_borrow_mut(|buffers| {
            query.score_postings(
                |term| self.terms.get(term).map(|t| t.postings.as_slice()),
                self.rows(),
                buffers,
            );
            for &row in &buffers.matched {
                let part = self.row_part[row as usize];
                if scope.has(part) {
                    self.classify(part, row, buffers.scores[row as usize], filter, &mut lists);
                }
            }
        });
        lists.keep_best(limit);
        lists
    }

    /// Inner products over the scope's vectors, split over threads by parts; a part whose
    /// vectors have another dimension than the query fails alone, as its index would.
    fn dense(
        &self,
        query: &[f32],
        scope: &Scope,
        filter: &ToolFilter,
        limit: usize,
    ) -> (Lists, Vec<PartFailure>) {
        let mut lists = Lists::default();
        let mut failures = Vec::new();
        if limit == 0 {
            return (lists, failures);
        }
        // In request order, as the indexes one by one report their failures.
        let parts = &scope.parts;
        let workers = self.workers(scope);
        // The slices' codes are scanned (a quarter of the bytes of their vectors): a row is a
        // candidate of its list if its upper bound reaches the `limit`-th best lower bound there,
        // and only candidates are scored with their vectors, so each list is exactly what the
        // vectors' scores make it. (A query that is not finite has no codes: every row scored.)
        let coded = query
            .iter()
            .all(|x| x.is_finite())
            .then(|| QueryCode::new(query));
        let run = |parts: &[u32]| {
            let (mut eligible, mut excluded) = (Candidates::default(), Candidates::default());
            let mut failures = Vec::new();
            let mut products = Vec::new();
            let mut scores = Vec::new();
            let mut lists = Lists::default();
            for &p in parts {
                let part = &self.parts[p as usize];
                let slice = &part.slice;
                if slice.len() == 0 {
                    continue;
                }
                if let Err(err) = slice.check_dim(query) {
                    failures.push(crate::failure(part.index.integration(), "dense", &err));
                    continue;
                }
                let (records, effects) = (slice.records(), slice.effects());
                let Some(coded) = &coded else {
                    inner_products(query, slice.matrix(), &mut scores);
                    for (local, &score) in scores.iter().enumerate() {
                        self.classify(p, part.start + local as u32, score, filter, &mut lists);
                    }
                    continue;
                };
                let (codes, rows) = slice.codes();
                coded.products(codes, rows, &mut products);
                for (local, (&product, row)) in products.iter().zip(rows).enumerate() {
                    let list = match filter.admits(|| &records[local], effects[local]) {
                        Some(true) => &mut eligible,
                        Some(false) => &mut excluded,
                        None => continue,
                    };
                    list.offer(coded.bounds(product, row), part.start + local as u32, limit);
                }
            }
            let mut rescore = |candidates: Candidates<u32>, out: &mut Vec<(f32, u32)>| {
                for row in candidates.into_items() {
                    let part = &self.parts[self.row_part[row as usize] as usize];
                    let vector = part.slice.vector((row - part.start) as usize);
                    inner_products(query, vector, &mut scores);
                    out.push((scores[0], row));
                }
            };
            rescore(eligible, &mut lists.eligible);
            rescore(excluded, &mut lists.excluded);
            lists.keep_best(limit);
            (lists, failures)
        };
        if workers > 1 {
            use rayon::prelude::*;
            // Chunks of about equal rows, in scope order.
            let total: usize = parts
                .iter()
                .map(|&p| self.parts[p as usize].slice.len())
                .sum();
            let per = total.div_ceil(workers);
            let mut chunks = Vec::with_capacity(workers);
            let (mut from, mut rows) = (0, 0);
            for (i, &p) in parts.iter().enumerate() {
                rows += self.parts[p as usize].slice.len();
                if rows >= per {
                    chunks.push(&parts[from..=i]);
                    (from, rows) = (i + 1, 0);
                }
            }
            if from < parts.len() {
                chunks.push(&parts[from..]);
            }
            let answers: Vec<_> = chunks.par_iter().map(|chunk| run(chunk)).collect();
            for (more, failed) in answers {
                lists.append(more);
                failures.extend(failed);
            }
            lists.keep_best(limit);
        } else {
            (lists, failures) = run(parts);
        }
        (lists, failures)
    }

    /// Puts a scored row in the eligible or excluded list, or drops it when out of the filter's
    /// categories.
    #[inline]
    fn classify(&self, part: u32, row: u32, score: f32, filter: &ToolFilter, lists: &mut Lists) {
        let part = &self.parts[part as usize];
        let local = (row - part.start) as usize;
        let (records, effects) = (part.slice.records(), part.slice.effects());
        let list = match filter.admits(|| &records[local], effects[local]) {
            Some(true) => &mut lists.eligible,
            Some(false) => &mut lists.excluded,
            None => return,
        };
        list.push((score, row));
    }

    /// The best `limit` candidates as named hits ([`crate::best_hits`]), each with its record and
    /// part.
    fn hits(&self, list: Vec<(f32, u32)>, limit: usize) -> Vec<(Hit, Arc<ToolRecord>, u32)> {
        crate::best_hits(list, limit, |row| {
            let p = self.row_part[row as usize];
            let part = &self.parts[p as usize];
            Some((part.slice.records()[(row - part.start) as usize].clone(), p))
        })
    }
}

thread_local! {
    /// Scratch space of the lexical retriever, kept per thread across searches.
    static BUFFERS: std::cell::RefCell<ScoreBuffers> = std::cell::RefCell::default();
}
