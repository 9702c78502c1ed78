//! Lexical scoring: BM25F (Robertson, Zaragoza and Taylor, CIKM 2004) over any number of weighted
//! text fields (a tool's name, description and parameters; a segment's title and text), with
//! weights of the query's terms computed once from global statistics and term-at-a-time scoring of
//! one segment's postings.
//!
//! For a query term `t` and a document `d`, each field `f` contributes a length-normalised, weighted
//! frequency `w_f * tf_f / (1 - b + b * len_f / avglen_f)`; the sum over fields `x` is saturated
//! once, `idf(t) * x * (k1 + 1) / (k1 + x)`, and the document's score is the sum over the query's
//! terms. Saturating after summing means a term repeated in the name and the description counts
//! more than once but less than twice, unlike a sum of per-field BM25 scores, which rewards the
//! repetition fully. `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))` with `df` the largest of the
//! term's per-field document frequencies (a lower bound of the number of documents holding it in
//! any field; the statistics are kept per field).

use std::sync::Arc;

use agentsearch_common::shard::TermStats;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::Postings;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, InvertedIndexReader, Searcher, SegmentReader, TERMINATED, Term};

use crate::error::Result;
use crate::tool_slice::Posting;

/// One term of a lexical query: its idf and, per field of the query (in the order its fields were
/// given), its weight (0 where no document of the collection holds it in that field).
pub struct LexicalTerm {
    pub text: String,
    pub idf: f32,
    field_scale: Box<[f32]>,
}

/// A lexical query ready to score any index of the collection the statistics describe, over the
/// fields named when it was built (the same fields, in the same order, are passed to
/// [`LexicalQuery::score_segment`]).
#[derive(Default)]
pub struct LexicalQuery {
    terms: Vec<LexicalTerm>,
    k1: f32,
    b: f32,
    /// Average field lengths, in the query's field order.
    average: Box<[f32]>,
}

/// Scratch space of [`LexicalQuery::score_segment`], reusable across segments, indexes and queries.
#[derive(Default)]
pub struct ScoreBuffers {
    /// `scores[doc]`: the document's score in the last segment scored (0 = no match).
    pub scores: Vec<f32>,
    /// The documents of the last segment scored with a non-zero score, in first-match order.
    pub matched: Vec<u32>,
    freqs: Vec<f32>,
    touched: Vec<u32>,
    /// Inner products of the last dense search of a tool slice.
    pub(crate) dense: Vec<f32>,
    /// Emptied candidate lists, handed out again instead of allocating new ones.
    spare: Vec<Vec<(f32, u64)>>,
}

impl ScoreBuffers {
    /// An empty candidate list (a spare one when there is one).
    pub(crate) fn list(&mut self) -> Vec<(f32, u64)> {
        self.spare.pop().unwrap_or_default()
    }

    /// Keeps `list`'s allocation for [`ScoreBuffers::list`].
    pub(crate) fn recycle(&mut self, mut list: Vec<(f32, u64)>) {
        list.clear();
        self.spare.push(list);
    }
}

impl LexicalQuery {
    /// Weights for the analyzed `terms` from `stats` (summed over every searched index and shard),
    /// over `fields` as `(field name in the statistics, BM25F weight)`, with saturation `k1` and
    /// length normalisation `b`. Terms that no document holds in a field of positive weight are
    /// left out.
    pub fn new(
        terms: &[String],
        stats: &TermStats,
        fields: &[(&str, f32)],
        k1: f32,
        b: f32,
    ) -> Self {
        let mut query = LexicalQuery {
            k1: k1.max(0.0),
            b: b.clamp(0.0, 1.0),
            average: vec![0.0; fields.len()].into(),
            ..LexicalQuery::default()
        };
        if stats.total_docs == 0 {
            return query;
        }
        let n = stats.total_docs as f32;
        for (i, (field, _)) in fields.iter().enumerate() {
            let tokens = stats.field_tokens.get(*field).copied().unwrap_or(0);
            query.average[i] = (tokens as f32 / n).max(1.0);
        }
        for term in terms {
            let mut df = 0u64;
            let mut field_scale = vec![0.0f32; fields.len()].into_boxed_slice();
            for (i, (field, weight)) in fields.iter().enumerate() {
                let field_df = stats
                    .doc_freqs
                    .get(&(field.to_string(), term.clone()))
                    .copied()
                    .unwrap_or(0);
                if field_df > 0 && *weight > 0.0 {
                    df = df.max(field_df);
                    field_scale[i] = *weight;
                }
            }
            if df == 0 {
                continue;
            }
            let df = (df as f32).min(n);
            query.terms.push(LexicalTerm {
                text: term.clone(),
                idf: (1.0 + (n - df + 0.5) / (df + 0.5)).ln(),
                field_scale,
            });
        }
        query
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Scores every document of `segment` matching any term: `buffers.scores[doc]` (resized to the
    /// segment) holds the sum, `buffers.matched` the documents with a non-zero score, in
    /// first-match order. `fields` are the index's fields in the order the query was built with.
    pub fn score_segment(
        &self,
        segment: &SegmentReader,
        fields: &[Field],
        buffers: &mut ScoreBuffers,
    ) -> Result<()> {
        let ScoreBuffers {
            scores,
            matched,
            freqs,
            touched,
            ..
        } = buffers;
        let max_doc = segment.max_doc() as usize;
        scores.clear();
        scores.resize(max_doc, 0.0);
        freqs.clear();
        freqs.resize(max_doc, 0.0);
        matched.clear();
        if self.terms.is_empty() {
            return Ok(());
        }
        debug_assert_eq!(fields.len(), self.average.len(), "fields of the query");
        let mut readers: Vec<Option<(Arc<InvertedIndexReader>, FieldNormReader)>> =
            (0..fields.len()).map(|_| None).collect();
        for term in &self.terms {
            touched.clear();
            for (i, scale) in term.field_scale.iter().enumerate() {
                if *scale == 0.0 {
                    continue;
                }
                let field = fields[i];
                let (inverted, norms) = match &mut readers[i] {
                    Some(r) => r,
                    None => readers[i].insert((
                        segment.inverted_index(field)?,
                        segment.get_fieldnorms_reader(field)?,
                    )),
                };
                let Some(mut postings) = inverted.read_postings(
                    &Term::from_field_text(field, &term.text),
                    IndexRecordOption::WithFreqs,
                )?
                else {
                    continue;
                };
                let average = self.average[i];
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let length = norms.fieldnorm(doc) as f32;
                    let norm = 1.0 - self.b + self.b * length / average;
                    let slot = &mut freqs[doc as usize];
                    if *slot == 0.0 {
                        touched.push(doc);
                    }
                    *slot += scale * postings.term_freq() as f32 / norm;
                    doc = postings.advance();
                }
            }
            for &doc in touched.iter() {
                let x = std::mem::take(&mut freqs[doc as usize]);
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    matched.push(doc);
                }
                *slot += term.idf * x * (self.k1 + 1.0) / (self.k1 + x);
            }
        }
        Ok(())
    }
}

impl LexicalQuery {
    /// [`LexicalQuery::score_segment`] over in-memory postings ([`crate::tool_slice`]): the same
    /// arithmetic in the same order, so a document scores exactly as it does from tantivy's
    /// segment. `postings_of` gives a term's postings sorted by field (in the query's field order)
    /// then row; rows are below `rows`.
    pub(crate) fn score_postings<'a>(
        &self,
        postings_of: impl Fn(&str) -> Option<&'a [Posting]>,
        rows: usize,
        buffers: &mut ScoreBuffers,
    ) {
        let ScoreBuffers {
            scores,
            matched,
            freqs,
            touched,
            ..
        } = buffers;
        scores.clear();
        scores.resize(rows, 0.0);
        freqs.clear();
        freqs.resize(rows, 0.0);
        matched.clear();
        for term in &self.terms {
            let Some(postings) = postings_of(&term.text) else {
                continue;
            };
            touched.clear();
            for p in postings {
                let field = p.field as usize;
                let scale = term.field_scale.get(field).copied().unwrap_or(0.0);
                if scale == 0.0 {
                    continue;
                }
                let norm = 1.0 - self.b + self.b * p.length as f32 / self.average[field];
                let slot = &mut freqs[p.row as usize];
                if *slot == 0.0 {
                    touched.push(p.row);
                }
                *slot += scale * p.term_freq as f32 / norm;
            }
            for &row in touched.iter() {
                let x = std::mem::take(&mut freqs[row as usize]);
                let slot = &mut scores[row as usize];
                if *slot == 0.0 {
                    matched.push(row);
                }
                *slot += term.idf * x * (self.k1 + 1.0) / (self.k1 + x);
            }
        }
    }
}

/// Adds the BM25 statistics of `terms` (analyzed query terms) over `fields` (as
/// `(name in the statistics, field)`) of every segment of `searcher` to `stats`. Like tantivy's own
/// statistics, deleted documents still count until merged away.
pub fn add_term_stats(
    searcher: &Searcher,
    fields: &[(&str, Field)],
    terms: &[String],
    stats: &mut TermStats,
) -> Result<()> {
    for segment in searcher.segment_readers() {
        stats.total_docs += u64::from(segment.max_doc());
        for (field_name, field) in fields {
            let inverted = segment.inverted_index(*field)?;
            *stats
                .field_tokens
                .entry(field_name.to_string())
                .or_default() += inverted.total_num_tokens();
            for term in terms {
                let df = inverted.doc_freq(&Term::from_field_text(*field, term))?;
                *stats
                    .doc_freqs
                    .entry((field_name.to_string(), term.clone()))
                    .or_default() += u64::from(df);
            }
        }
    }
    Ok(())
}
