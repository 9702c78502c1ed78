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
use agentsearch_common::tool::ToolRecord;
use tantivy::postings::Postings;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, TERMINATED};

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
    dim: usize,
    /// `ids.len() x dim`, row-major.
    vectors: Vec<f32>,
    terms: HashMap<String, TermEntry>,
    /// Documents counted by the statistics (tantivy's `max_doc`, summed over segments).
    total_docs: u64,
    /// Tokens per field, in field order.
    field_tokens: Vec<u64>,
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
        Ok(slice)
    }

    pub(crate) fn dim(&self) -> usize {
        self.dim
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
        let mut out = Scored::default();
        if query.is_empty() || limit == 0 || self.ids.is_empty() {
            return out;
        }
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
    ) -> Result<Scored> {
        let mut out = Scored::default();
        if self.ids.is_empty() || limit == 0 {
            return Ok(out);
        }
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
        let mut scores = Vec::with_capacity(self.ids.len());
        inner_products(query, &self.vectors, &mut scores);
        for (row, score) in scores.into_iter().enumerate() {
            self.classify(row, score, filter, &mut out);
        }
        finish(&mut out, limit);
        Ok(out)
    }

    /// Puts a scored row in the eligible or excluded list, or drops it when out of scope.
    #[inline]
    fn classify(&self, row: usize, score: f32, filter: &ToolFilter, out: &mut Scored) {
        let tool = &self.records[row];
        if !filter.in_scope(tool) {
            return;
        }
        let list = if tool.side_effect.allowed_under(filter.max_side_effect) {
            &mut out.eligible
        } else {
            &mut out.excluded
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

/// Keeps the best `limit` of each list, best first (ties: lower id first).
fn finish(out: &mut Scored, limit: usize) {
    let order = |a: &(f32, u64), b: &(f32, u64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    for list in [&mut out.eligible, &mut out.excluded] {
        if list.len() > limit {
            list.select_nth_unstable_by(limit - 1, order);
            list.truncate(limit);
        }
        list.sort_by(order);
    }
}

/// `out[r] = query . matrix[r]` for every row of `matrix` (rows of `query.len()`), on 256-bit
/// fused multiply-adds where the CPU has them (detected at run time), else on the baseline's.
pub(crate) fn inner_products(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    out.clear();
    if query.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx") && std::is_x86_feature_detected!("fma") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has AVX and FMA (checked just above), the only features
        // `inner_products_fma` is compiled with.
        return unsafe { inner_products_fma(query, matrix, out) };
    }
    inner_products_with(query, matrix, out, |a, b, c| a * b + c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,fma")]
fn inner_products_fma(query: &[f32], matrix: &[f32], out: &mut Vec<f32>) {
    inner_products_with(query, matrix, out, f32::mul_add)
}

/// Dot products in eight independent lanes (so that they compile to vector instructions), with
/// `mad(a, b, c) = a * b + c`.
#[inline(always)]
fn inner_products_with(
    query: &[f32],
    matrix: &[f32],
    out: &mut Vec<f32>,
    mad: impl Fn(f32, f32, f32) -> f32 + Copy,
) {
    const LANES: usize = 8;
    let dim = query.len();
    let split = dim - dim % LANES;
    let (head, tail) = query.split_at(split);
    for row in matrix.chunks_exact(dim) {
        let (row_head, row_tail) = row.split_at(split);
        let mut acc = [0.0f32; LANES];
        for (q, r) in head.chunks_exact(LANES).zip(row_head.chunks_exact(LANES)) {
            let q: &[f32; LANES] = q.try_into().unwrap_or(&[0.0; LANES]);
            let r: &[f32; LANES] = r.try_into().unwrap_or(&[0.0; LANES]);
            for l in 0..LANES {
                acc[l] = mad(q[l], r[l], acc[l]);
            }
        }
        let rest: f32 = tail.iter().zip(row_tail).map(|(a, b)| a * b).sum();
        out.push(acc.iter().sum::<f32>() + rest);
    }
}

fn corrupt(what: &str) -> IndexError {
    IndexError::Corrupt(format!("tool index: {what}"))
}
