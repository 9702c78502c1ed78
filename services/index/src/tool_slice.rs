//! The search form of one tool index's committed generation: its tools' vectors in one contiguous
//! matrix, and its postings (every analyzed term of the text fields, with frequencies and field
//! lengths) in one in-memory map, read once from the tantivy segments when a generation is
//! published.
//!
//! A query over hundreds of small per-integration indexes then costs a few hash lookups and dot
//! products per index, instead of opening postings, decoding blocks and calling into FAISS once per
//! index and retriever. The scores are the ones tantivy's data gives: the same BM25F arithmetic
//! ([`LexicalQuery::score_postings`]), the same statistics (documents and lengths counted as
//! tantivy counts them, deleted documents included until merged away), and plain inner products.

use std::collections::HashMap;
use std::sync::Arc;

use agentsearch_common::shard::TermStats;
use agentsearch_common::tool::{SideEffect, ToolRecord};
use tantivy::postings::Postings;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, TERMINATED};

use crate::codes::{self, RowCode};
use crate::error::{IndexError, Result};
use crate::lexical::{LexicalQuery, ScoreBuffers};
use crate::tool_index::{IdMapOf, Scored, ToolFilter};

/// One document holding a term in one field.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Posting {
    pub(crate) row: u32,
    /// Position of the field in the query's field order.
    pub(crate) field: u8,
    pub(crate) term_freq: u32,
    /// The field's length as tantivy's field norm records it.
    pub(crate) length: u32,
}

/// A term's postings, by field then row, and its document frequency per field.
#[derive(Debug, Default)]
struct TermEntry {
    doc_freq: Vec<u64>,
    postings: Vec<Posting>,
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Slice {
    ids: Vec<u64>,
    records: Vec<Arc<ToolRecord>>,
    /// `records[row].side_effect`, kept beside the rows so that filtering reads no record.
    effects: Vec<SideEffect>,
    dim: usize,
    /// `ids.len() x dim`, row-major.
    vectors: Vec<f32>,
    /// The vectors as 8-bit codes (`ids.len() x dim`) and each row's scale and bounds
    /// ([`crate::codes`]), what the shard's search view scans.
    codes: Vec<i8>,
    code_rows: Vec<RowCode>,
    /// A query looks each of its terms up in every index of its scope: a fast keyed hash (seeded
    /// per process) rather than SipHash.
    terms: HashMap<String, TermEntry, foldhash::fast::RandomState>,
    /// Documents counted by the statistics (tantivy's `max_doc`, summed over segments).
    total_docs: u64,
    /// Tokens per field, in field order.
    field_tokens: Vec<u64>,
    /// The row of each id.
    row_of: IdMapOf<u32>,
    /// See [`Slice::fingerprint`]; computed on first use (never for inline tools).
    fingerprint: std::sync::OnceLock<u64>,
}

impl Slice {
    /// Reads `searcher`'s segments over `fields` (in query order). Every live document must have an
    /// id (its `ids` column), a record in `records` and a vector from `vector`, all of `dim`
    /// dimensions (`dim` 0: the first vector's).
    pub(crate) fn build<'v>(
        searcher: &Searcher,
        fields: &[Field],
        records: &IdMapOf<Arc<ToolRecord>>,
        vector: impl Fn(u64) -> Option<&'v [f32]>,
        mut dim: usize,
    ) -> Result<Self> {
        let mut slice = Slice {
            field_tokens: vec![0; fields.len()],
            ..Slice::default()
        };
        let mut row_of: IdMapOf<u32> = IdMapOf::default();
        for segment in searcher.segment_readers() {
            slice.total_docs += u64::from(segment.max_doc());
            let ids = segment.fast_fields().u64("id")?;
            let alive = segment.alive_bitset();
            // Rows of this segment's live documents, by doc id.
            let mut rows: Vec<Option<u32>> = vec![None; segment.max_doc() as usize];
            for doc in segment.doc_ids_alive() {
                let id = ids
                    .first(doc)
                    .ok_or_else(|| corrupt("a document without an id"))?;
                let record = records
                    .get(&id)
                    .ok_or_else(|| corrupt("a document without a record"))?;
                let v = vector(id).ok_or_else(|| corrupt("a document without a vector"))?;
                if dim == 0 {
                    dim = v.len();
                }
                if v.len() != dim {
                    return Err(corrupt("vectors of different dimensions"));
                }
                let row = u32::try_from(slice.ids.len()).map_err(|_| corrupt("too many tools"))?;
                if row_of.insert(id, row).is_some() {
                    return Err(corrupt("two live documents with one id"));
                }
                slice.ids.push(id);
                slice.records.push(record.clone());
                slice.effects.push(record.side_effect);
                slice.vectors.extend_from_slice(v);
                rows[doc as usize] = Some(row);
            }
            for (f, &field) in fields.iter().enumerate() {
                let inverted = segment.inverted_index(field)?;
                let norms = segment.get_fieldnorms_reader(field)?;
                slice.field_tokens[f] += inverted.total_num_tokens();
                let mut stream = inverted.terms().stream()?;
                while stream.advance() {
                    let Ok(text) = std::str::from_utf8(stream.key()) else {
                        continue;
                    };
                    let info = stream.value();
                    let entry = slice
                        .terms
                        .entry(text.to_string())
                        .or_insert_with(|| TermEntry {
                            doc_freq: vec![0; fields.len()],
                            postings: Vec::new(),
                        });
                    entry.doc_freq[f] += u64::from(info.doc_freq);
                    let mut postings =
                        inverted.read_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
                    let mut doc = postings.doc();
                    while doc != TERMINATED {
                        if alive.is_none_or(|a| a.is_alive(doc))
                            && let Some(row) = rows[doc as usize]
                        {
                            entry.postings.push(Posting {
                                row,
                                field: f as u8,
                                term_freq: postings.term_freq(),
                                length: norms.fieldnorm(doc),
                            });
                        }
                        doc = postings.advance();
                    }
                }
            }
        }
        for entry in slice.terms.values_mut() {
            entry.postings.sort_by_key(|p| (p.field, p.row));
        }
        slice.dim = dim;
        slice.row_of = row_of;
        if dim > 0 {
            slice.codes.reserve_exact(slice.vectors.len());
            slice.code_rows.reserve_exact(slice.ids.len());
            for row in slice.vectors.chunks_exact(dim) {
                slice.code_rows.push(codes::encode(row, &mut slice.codes));
            }
        }
        Ok(slice)
    }

    pub(crate) fn dim(&self) -> usize {
        self.dim
    }

    /// Number of documents (rows).
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The records, by row.
    pub(crate) fn records(&self) -> &[Arc<ToolRecord>] {
        &self.records
    }

    /// The side effects, by row.
    pub(crate) fn effects(&self) -> &[SideEffect] {
        &self.effects
    }

    /// The vectors as codes, with each row's [`RowCode`].
    pub(crate) fn codes(&self) -> (&[i8], &[RowCode]) {
        (&self.codes, &self.code_rows)
    }

    /// Every vector, row after row.
    pub(crate) fn matrix(&self) -> &[f32] {
        &self.vectors
    }

    /// Documents counted by the statistics, and tokens per field.
    pub(crate) fn totals(&self) -> (u64, &[u64]) {
        (self.total_docs, &self.field_tokens)
    }

    /// A fingerprint of every statistic BM25 reads from this slice: the documents counted, the
    /// tokens per field and each term's document frequency per field (summed over the terms, so
    /// independent of their order), and the version of the analysis that made the terms. Two
    /// replicas holding the same statistics have the same fingerprint whatever their history of
    /// writes and merges; any change to a statistic changes it (but for a 64-bit collision).
    pub(crate) fn fingerprint(&self) -> u64 {
        *self
            .fingerprint
            .get_or_init(|| self.statistics_fingerprint())
    }

    fn statistics_fingerprint(&self) -> u64 {
        use agentsearch_common::hash::fnv1a;
        use agentsearch_common::splitmix::mix;
        let mut hash = mix(fnv1a(env!("CARGO_PKG_VERSION").bytes()));
        for value in std::iter::once(self.total_docs).chain(self.field_tokens.iter().copied()) {
            hash = mix(hash ^ mix(value));
        }
        let terms = self.terms.iter().fold(0u64, |sum, (text, entry)| {
            let term = entry
                .doc_freq
                .iter()
                .fold(mix(fnv1a(text.bytes())), |h, &df| mix(h ^ mix(df)));
            sum.wrapping_add(term)
        });
        mix(hash ^ terms)
    }

    /// Every term with its document frequency per field and its postings (by field, then row).
    pub(crate) fn terms(&self) -> impl Iterator<Item = (&str, &[u64], &[Posting])> {
        self.terms.iter().map(|(text, entry)| {
            (
                text.as_str(),
                entry.doc_freq.as_slice(),
                entry.postings.as_slice(),
            )
        })
    }

    /// The vector of a tool, if this generation holds it.
    pub(crate) fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dim..(row + 1) * self.dim]
    }

    pub(crate) fn rows(&self) -> impl Iterator<Item = (u64, &[f32])> {
        self.ids
            .iter()
            .enumerate()
            .map(|(row, &id)| (id, self.vector(row)))
    }

    /// Adds the statistics of `terms` over the fields named `names` (query order) to `stats`.
    pub(crate) fn add_term_stats(&self, names: &[&str], terms: &[String], stats: &mut TermStats) {
        let mut counts = TermCounts::new(names.len(), terms.len());
        self.count(terms, &mut counts);
        counts.add_to(names, terms, stats);
    }

    /// Adds this generation's counts for `terms` to `counts` (no allocation: many slices are
    /// counted into one [`TermCounts`], turned into [`TermStats`] once).
    pub(crate) fn count(&self, terms: &[String], counts: &mut TermCounts) {
        counts.total_docs += self.total_docs;
        for (total, tokens) in counts.field_tokens.iter_mut().zip(&self.field_tokens) {
            *total += tokens;
        }
        for (t, term) in terms.iter().enumerate() {
            if let Some(entry) = self.terms.get(term) {
                for (f, df) in entry.doc_freq.iter().enumerate() {
                    if let Some(total) = counts.doc_freqs.get_mut(f * terms.len() + t) {
                        *total += df;
                    }
                }
            }
        }
    }

    /// BM25F of `query` over the postings, filtered; `(score, id)` best first, at most `limit` in
    /// each list.
    pub(crate) fn search_lexical(
        &self,
        query: &LexicalQuery,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Scored {
        if query.is_empty() || limit == 0 || self.ids.is_empty() {
            return Scored::default();
        }
        let mut out = Scored {
            eligible: buffers.list(),
            excluded: buffers.list(),
        };
        query.score_postings(
            |term| self.terms.get(term).map(|e| e.postings.as_slice()),
            self.ids.len(),
            buffers,
        );
        for &row in &buffers.matched {
            let row = row as usize;
            self.classify(row, buffers.scores[row], filter, &mut out);
        }
        finish(&mut out, limit);
        out
    }

    /// Inner products of `query` with every vector, filtered; `(score, id)` best first, at most
    /// `limit` in each list.
    pub(crate) fn search_dense(
        &self,
        query: &[f32],
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        if self.ids.is_empty() || limit == 0 {
            return Ok(Scored::default());
        }
        self.check_dim(query)?;
        let mut out = Scored {
            eligible: buffers.list(),
            excluded: buffers.list(),
        };
        let scores = &mut buffers.dense;
        inner_products(query, &self.vectors, scores);
        for (row, &score) in scores.iter().enumerate() {
            self.classify(row, score, filter, &mut out);
        }
        finish(&mut out, limit);
        Ok(out)
    }

    /// [`Slice::search_lexical`] over the documents a structured query allows: each scores its
    /// structured score (`Some`) plus its BM25F for `query`. When `query` has words, a document
    /// with neither (no structured score, no word) is left out; without words, none is.
    pub(crate) fn search_lexical_allowed(
        &self,
        query: &LexicalQuery,
        allowed: &IdMapOf<Option<f32>>,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Scored {
        let mut out = Scored {
            eligible: buffers.list(),
            excluded: buffers.list(),
        };
        if limit == 0 || self.ids.is_empty() || allowed.is_empty() {
            return out;
        }
        let by_words = !query.is_empty();
        if by_words {
            query.score_postings(
                |term| self.terms.get(term).map(|e| e.postings.as_slice()),
                self.ids.len(),
                buffers,
            );
        }
        for (id, structured) in allowed {
            let Some(&row) = self.row_of.get(id) else {
                continue;
            };
            let row = row as usize;
            let words = if by_words { buffers.scores[row] } else { 0.0 };
            // With words, a document only the filter allows must hold one of them; without
            // words, every allowed document is a candidate.
            if by_words && words == 0.0 && structured.is_none() {
                continue;
            }
            self.classify(row, words + structured.unwrap_or(0.0), filter, &mut out);
        }
        finish(&mut out, limit);
        out
    }

    /// [`Slice::search_dense`] over the documents a structured query allows.
    pub(crate) fn search_dense_allowed(
        &self,
        query: &[f32],
        allowed: &IdMapOf<Option<f32>>,
        filter: &ToolFilter,
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<Scored> {
        if self.ids.is_empty() || limit == 0 || allowed.is_empty() {
            return Ok(Scored::default());
        }
        self.check_dim(query)?;
        let mut out = Scored {
            eligible: buffers.list(),
            excluded: buffers.list(),
        };
        let mut score = std::mem::take(&mut buffers.dense);
        for id in allowed.keys() {
            let Some(&row) = self.row_of.get(id) else {
                continue;
            };
            let row = row as usize;
            inner_products(query, self.vector(row), &mut score);
            self.classify(row, score[0], filter, &mut out);
        }
        buffers.dense = score;
        finish(&mut out, limit);
        Ok(out)
    }

    /// How many of the documents a structured query allows are eligible under `filter`.
    pub(crate) fn count_allowed(&self, allowed: &IdMapOf<Option<f32>>, filter: &ToolFilter) -> u64 {
        allowed
            .keys()
            .filter_map(|id| self.row_of.get(id))
            .filter(|&&row| {
                let row = row as usize;
                (filter.categories.is_none() || filter.in_scope(&self.records[row]))
                    && self.effects[row].allowed_under(filter.max_side_effect)
            })
            .count() as u64
    }

    /// A query vector of another dimension than the index's is refused.
    pub(crate) fn check_dim(&self, query: &[f32]) -> Result<()> {
        check_query_dim(query, self.dim)
    }

    /// The ids of this generation's documents.
    pub(crate) fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// Puts a scored row in the eligible or excluded list, or drops it when out of scope.
    #[inline]
    fn classify(&self, row: usize, score: f32, filter: &ToolFilter, out: &mut Scored) {
        let list = match filter.admits(|| &self.records[row], self.effects[row]) {
            Some(true) => &mut out.eligible,
            Some(false) => &mut out.excluded,
            None => return,
        };
        list.push((score, self.ids[row]));
    }
}

/// BM25 statistics of a query's terms over any number of slices, by position: field-major
/// document frequencies (`fields x terms`).
pub(crate) struct TermCounts {
    total_docs: u64,
    field_tokens: Vec<u64>,
    doc_freqs: Vec<u64>,
}

impl TermCounts {
    pub(crate) fn new(fields: usize, terms: usize) -> Self {
        Self {
            total_docs: 0,
            field_tokens: vec![0; fields],
            doc_freqs: vec![0; fields * terms],
        }
    }

    /// Adds a collection's document count and tokens per field.
    pub(crate) fn add_totals(&mut self, total_docs: u64, field_tokens: &[u64]) {
        self.total_docs += total_docs;
        for (total, tokens) in self.field_tokens.iter_mut().zip(field_tokens) {
            *total += tokens;
        }
    }

    /// Adds the document frequencies per field of the query's `term`-th term.
    pub(crate) fn add_doc_freqs(&mut self, term: usize, doc_freqs: &[u64]) {
        let terms = self.doc_freqs.len() / self.field_tokens.len().max(1);
        for (f, df) in doc_freqs.iter().enumerate() {
            if let Some(total) = self.doc_freqs.get_mut(f * terms + term) {
                *total += df;
            }
        }
    }

    /// Adds the counts to `stats` under the fields' `names`, as tantivy's statistics are summed.
    pub(crate) fn add_to(&self, names: &[&str], terms: &[String], stats: &mut TermStats) {
        stats.total_docs += self.total_docs;
        for (f, name) in names.iter().enumerate() {
            *stats.field_tokens.entry(name.to_string()).or_default() +=
                self.field_tokens.get(f).copied().unwrap_or(0);
            for (t, term) in terms.iter().enumerate() {
                *stats
                    .doc_freqs
                    .entry((name.to_string(), term.clone()))
                    .or_default() += self
                    .doc_freqs
                    .get(f * terms.len() + t)
                    .copied()
                    .unwrap_or(0);
            }
        }
    }
}

/// Keeps the best `limit` of each list and every candidate tied with the last of them (the names
/// of the tools decide among ties once the lists of all indexes are pooled, so that where a list
/// is cut does not depend on how the tools are spread over indexes), in no particular order
/// ([`Scored::ordered`] sorts them).
fn finish(out: &mut Scored, limit: usize) {
    for list in [&mut out.eligible, &mut out.excluded] {
        keep_best(list, limit, |c| c.0);
    }
}

/// Refuses a query vector of another dimension than an index's `dim`.
pub(crate) fn check_query_dim(query: &[f32], dim: usize) -> Result<()> {
    if query.len() != dim {
        return Err(IndexError::invalid(
            "vector",
            format!(
                "query vector has {} dimensions, the index holds {dim}-d vectors",
                query.len()
            ),
        ));
    }
    Ok(())
}

/// Keeps the best `limit` candidates of `list` by `score` and every one tied with the last of
/// them (`>=` on floats, so `-0.0` ties with `0.0`), in no particular order.
pub(crate) fn keep_best<T>(list: &mut Vec<T>, limit: usize, score: impl Fn(&T) -> f32) {
    if limit == 0 {
        list.clear();
    } else if list.len() > limit {
        list.select_nth_unstable_by(limit - 1, |a, b| score(b).total_cmp(&score(a)));
        let cut = score(&list[limit - 1]);
        list.retain(|c| score(c) >= cut);
    }
}

/// Candidates of one list while rows are scored: once they are many, only the best `limit` (and
/// their ties) are kept, and rows scoring below the last of them are not kept at all (the cut only
/// rises, so none of them could make the final list).
pub(crate) struct Bounded<T> {
    items: Vec<(f32, T)>,
    floor: f32,
    /// Candidates held when the next compaction is due.
    compact_at: usize,
}

impl<T> Default for Bounded<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            floor: f32::NEG_INFINITY,
            compact_at: 0,
        }
    }
}

impl<T> Bounded<T> {
    /// Whether a row scoring `score` would be kept (checked before a costly admission test).
    #[inline]
    pub(crate) fn takes(&self, score: f32) -> bool {
        score >= self.floor
    }

    #[inline]
    pub(crate) fn offer(&mut self, score: f32, item: T, limit: usize) {
        if score < self.floor {
            return;
        }
        self.items.push((score, item));
        if self.items.len() >= self.compact_at.max(4 * limit.max(16)) {
            keep_best(&mut self.items, limit, |c| c.0);
            let floor = self.items.iter().map(|c| c.0).fold(f32::INFINITY, f32::min);
            // (Only a query vector that is not finite gives no finite floor.)
            self.floor = if floor.is_finite() {
                floor
            } else {
                f32::NEG_INFINITY
            };
            // Ties can keep many: compact again only once as many more have come.
            self.compact_at = 2 * self.items.len();
        }
    }

    /// The lowest score still kept (every score below it is refused).
    pub(crate) fn floor(&self) -> f32 {
        self.floor
    }
}

/// Higher score first, then lower id.
pub(crate) fn best_first(a: &(f32, u64), b: &(f32, u64)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// `out[r] = query . matrix[r]` for every row of `matrix` (rows of `query.len()`), on 512-bit or
/// 256-bit fused multiply-adds where the CPU has them (the process's
/// [`agentsearch_common::simd::build`]), else on the baseline's.
pub(crate) fn inner_products(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    out.clear();
    if query.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    match agentsearch_common::simd::build() {
        #[allow(unsafe_code)]
        // SAFETY: `build` gives `Avx512` only where the CPU has AVX-512F, the only feature
        // `inner_products_avx512` is compiled with.
        agentsearch_common::simd::Build::Avx512 => unsafe {
            inner_products_avx512(query, matrix, out)
        },
        #[allow(unsafe_code)]
        // SAFETY: `build` gives `Fma256` only where the CPU has AVX and FMA, the only features
        // `inner_products_fma` is compiled with.
        agentsearch_common::simd::Build::Fma256 => unsafe {
            inner_products_fma(query, matrix, out)
        },
        agentsearch_common::simd::Build::Portable => inner_products_plain(query, matrix, out),
    }
    #[cfg(not(target_arch = "x86_64"))]
    inner_products_plain(query, matrix, out)
}

/// [`inner_products`] on 256-bit registers: four independent accumulators of eight lanes per row
/// (so that the multiply-adds of a row do not wait on each other), summed as a tree.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,fma")]
fn inner_products_fma(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    use std::arch::x86_64::{
        __m256, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps,
        _mm256_add_ps, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm256_fmadd_ps,
        _mm256_loadu_ps, _mm256_setzero_ps,
    };
    const STEP: usize = 32;
    let dim = query.len();
    let split = dim - dim % STEP;
    let load = |values: &[f32], at: usize| -> __m256 {
        let lanes: &[f32; 8] = values[at..at + 8].try_into().unwrap_or(&[0.0; 8]);
        #[allow(unsafe_code)]
        // SAFETY: `lanes` is eight readable f32s; the load has no alignment requirement.
        unsafe {
            _mm256_loadu_ps(lanes.as_ptr())
        }
    };
    for row in matrix.chunks_exact(dim) {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut at = 0;
        while at < split {
            for (k, acc) in acc.iter_mut().enumerate() {
                let offset = at + 8 * k;
                *acc = _mm256_fmadd_ps(load(query, offset), load(row, offset), *acc);
            }
            at += STEP;
        }
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
        let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
        let total = _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps::<1>(quarter, quarter)));
        let rest: f32 = query[split..]
            .iter()
            .zip(&row[split..])
            .map(|(a, b)| a * b)
            .sum();
        out.push(total + rest);
    }
}

/// [`inner_products`] on 512-bit registers: four independent accumulators of sixteen lanes per
/// row (a 384-d row is six steps), summed as a tree.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn inner_products_avx512(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    use std::arch::x86_64::{
        __m512, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_reduce_add_ps,
        _mm512_setzero_ps,
    };
    const STEP: usize = 64;
    let dim = query.len();
    let split = dim - dim % STEP;
    let load = |values: &[f32], at: usize| -> __m512 {
        let lanes: &[f32; 16] = values[at..at + 16].try_into().unwrap_or(&[0.0; 16]);
        #[allow(unsafe_code)]
        // SAFETY: `lanes` is sixteen readable f32s; the load has no alignment requirement.
        unsafe {
            _mm512_loadu_ps(lanes.as_ptr())
        }
    };
    out.reserve(matrix.len() / dim);
    for row in matrix.chunks_exact(dim) {
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut at = 0;
        while at < split {
            for (k, acc) in acc.iter_mut().enumerate() {
                let offset = at + 16 * k;
                *acc = _mm512_fmadd_ps(load(query, offset), load(row, offset), *acc);
            }
            at += STEP;
        }
        let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        let rest: f32 = query[split..]
            .iter()
            .zip(&row[split..])
            .map(|(a, b)| a * b)
            .sum();
        out.push(_mm512_reduce_add_ps(sum) + rest);
    }
}

/// The portable [`inner_products`]: eight independent lanes per row.
fn inner_products_plain(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    const LANES: usize = 8;
    let dim = query.len();
    let split = dim - dim % LANES;
    for row in matrix.chunks_exact(dim) {
        let mut acc = [0.0f32; LANES];
        for (q, r) in query[..split]
            .chunks_exact(LANES)
            .zip(row[..split].chunks_exact(LANES))
        {
            for l in 0..LANES {
                acc[l] += q[l] * r[l];
            }
        }
        let rest: f32 = query[split..]
            .iter()
            .zip(&row[split..])
            .map(|(a, b)| a * b)
            .sum();
        out.push(acc.iter().sum::<f32>() + rest);
    }
}

fn corrupt(what: &str) -> IndexError {
    IndexError::Corrupt(format!("tool index: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact-enough reference: f64 sums.
    fn reference(query: &[f32], matrix: &[f32]) -> Vec<f32> {
        matrix
            .chunks_exact(query.len())
            .map(|row| {
                row.iter()
                    .zip(query)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum::<f64>() as f32
            })
            .collect()
    }

    #[test]
    fn inner_products_agree_with_a_reference_for_any_dimension() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for dim in [1, 5, 8, 31, 32, 33, 63, 64, 65, 100, 128, 384] {
            let query: Vec<f32> = (0..dim).map(|_| next()).collect();
            let matrix: Vec<f32> = (0..dim * 7).map(|_| next()).collect();
            let expected = reference(&query, &matrix);
            // The dispatched build, then every build this CPU can run.
            let mut builds = vec![("dispatched", Vec::new()), ("plain", Vec::new())];
            inner_products(&query, &matrix, &mut builds[0].1);
            inner_products_plain(&query, &matrix, &mut builds[1].1);
            #[cfg(target_arch = "x86_64")]
            {
                use agentsearch_common::simd::Build;
                if Build::Fma256.supported() {
                    let mut out = Vec::new();
                    #[allow(unsafe_code)]
                    // SAFETY: the CPU has AVX and FMA, checked just above.
                    unsafe {
                        inner_products_fma(&query, &matrix, &mut out)
                    };
                    builds.push(("fma", out));
                }
                if Build::Avx512.supported() {
                    let mut out = Vec::new();
                    #[allow(unsafe_code)]
                    // SAFETY: the CPU runs the 512-bit build (AVX-512F among others), checked just above.
                    unsafe {
                        inner_products_avx512(&query, &matrix, &mut out)
                    };
                    builds.push(("avx512", out));
                }
            }
            for (build, got) in &builds {
                assert_eq!(got.len(), 7, "{build}");
                for (g, e) in got.iter().zip(&expected) {
                    assert!(
                        (g - e).abs() <= 1e-5 * dim as f32,
                        "{build} dim {dim}: {g} vs {e}"
                    );
                }
            }
        }
    }
}
