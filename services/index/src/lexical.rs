//! Lexical scoring: BM25F (Robertson, Zaragoza and Taylor, CIKM 2004) over the name,
//! description and parameter fields, with weights of the query's terms computed once from global
//! statistics and term-at-a-time scoring of one segment's postings.
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

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::TermStats;
use tantivy::InvertedIndexReader;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::Postings;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, SegmentReader, TERMINATED, Term};

use crate::error::Result;
use crate::schema::{Fields, TEXT_FIELDS};

/// One term of a lexical query: its idf and, per field in [`TEXT_FIELDS`] order, its weight over
/// the field's average length (0 where no document of the collection holds it in that field).
pub struct LexicalTerm {
    pub text: String,
    pub idf: f32,
    field_scale: [f32; 3],
}

/// A lexical query ready to score any index of the collection the statistics describe.
#[derive(Default)]
pub struct LexicalQuery {
    terms: Vec<LexicalTerm>,
    k1: f32,
    b: f32,
    /// Average field lengths, in [`TEXT_FIELDS`] order.
    average: [f32; 3],
}

impl LexicalQuery {
    /// Weights for the analyzed `terms` from `stats` (summed over every searched index and shard).
    /// Terms that no document holds are left out.
    pub fn new(terms: &[String], stats: &TermStats, params: &LexicalConfig) -> Self {
        let mut query = LexicalQuery {
            k1: params.k1.max(0.0),
            b: params.b.clamp(0.0, 1.0),
            ..LexicalQuery::default()
        };
        if stats.total_docs == 0 {
            return query;
        }
        let n = stats.total_docs as f32;
        for (i, field) in TEXT_FIELDS.iter().enumerate() {
            let tokens = stats.field_tokens.get(*field).copied().unwrap_or(0);
            query.average[i] = (tokens as f32 / n).max(1.0);
        }
        let weights = [
            params.name_weight,
            params.description_weight,
            params.params_weight,
        ];
        for term in terms {
            let mut df = 0u64;
            let mut field_scale = [0.0f32; 3];
            for (i, field) in TEXT_FIELDS.iter().enumerate() {
                let field_df = stats
                    .doc_freqs
                    .get(&(field.to_string(), term.clone()))
                    .copied()
                    .unwrap_or(0);
                if field_df > 0 && weights[i] > 0.0 {
                    df = df.max(field_df);
                    field_scale[i] = weights[i];
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

    /// Scores every document of `segment` matching any term: `scores[doc]` (resized to the
    /// segment) holds the sum, `matched` the documents with a non-zero score, in first-match order.
    /// `freqs` is scratch space.
    pub fn score_segment(
        &self,
        segment: &SegmentReader,
        fields: &Fields,
        scores: &mut Vec<f32>,
        matched: &mut Vec<u32>,
        freqs: &mut Vec<f32>,
    ) -> Result<()> {
        let max_doc = segment.max_doc() as usize;
        scores.clear();
        scores.resize(max_doc, 0.0);
        freqs.clear();
        freqs.resize(max_doc, 0.0);
        matched.clear();
        let mut readers: [Option<(Arc<InvertedIndexReader>, FieldNormReader)>; 3] =
            [None, None, None];
        let mut touched: Vec<u32> = Vec::new();
        for term in &self.terms {
            touched.clear();
            for (i, scale) in term.field_scale.iter().enumerate() {
                if *scale == 0.0 {
                    continue;
                }
                let field = fields.text_field(TEXT_FIELDS[i]).expect("text field");
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
            for &doc in &touched {
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
