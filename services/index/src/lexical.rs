//! Lexical scoring: BM25 weights of a query's (field, term) pairs computed once from global
//! statistics, and term-at-a-time scoring of one segment's postings with them.
//!
//! The scores equal tantivy's own BM25 (same [`Bm25Weight`], field boosts multiplied in, sums over
//! clauses) for a boolean OR of boosted term queries; computing them directly avoids building a
//! query, weights and scorers per index, which dominated the cost of searching hundreds of small
//! per-integration indexes.

use agentsearch_common::shard::TermStats;
use tantivy::postings::Postings;
use tantivy::query::Bm25Weight;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, SegmentReader, TERMINATED, Term};

use crate::error::Result;
use crate::schema::{Fields, TEXT_FIELDS};
use crate::tool_index::FieldBoosts;

/// One (field, term) of a lexical query and its weight (idf and field boost included).
pub struct LexicalTerm {
    pub field_no: usize,
    pub text: String,
    pub weight: Bm25Weight,
}

/// A lexical query ready to score any index of the collection the statistics describe.
#[derive(Default)]
pub struct LexicalQuery {
    /// Grouped by field, in [`TEXT_FIELDS`] order.
    terms: Vec<LexicalTerm>,
}

impl LexicalQuery {
    /// Weights for the analyzed `terms` from `stats` (summed over every searched index and shard).
    /// Pairs that no document holds are left out.
    pub fn new(terms: &[String], stats: &TermStats, boosts: &FieldBoosts) -> Self {
        let mut query = LexicalQuery::default();
        if stats.total_docs == 0 {
            return query;
        }
        let field_boosts = [boosts.name, boosts.description, boosts.params];
        for (field_no, (field, boost)) in TEXT_FIELDS.iter().zip(field_boosts).enumerate() {
            if boost <= 0.0 {
                continue;
            }
            let tokens = stats.field_tokens.get(*field).copied().unwrap_or(0);
            let average = (tokens as f32 / stats.total_docs as f32).max(1.0);
            for term in terms {
                let df = stats
                    .doc_freqs
                    .get(&(field.to_string(), term.clone()))
                    .copied()
                    .unwrap_or(0);
                if df == 0 {
                    continue;
                }
                let weight =
                    Bm25Weight::for_one_term_without_explain(df, stats.total_docs.max(df), average)
                        .boost_by(boost);
                query.terms.push(LexicalTerm {
                    field_no,
                    text: term.clone(),
                    weight,
                });
            }
        }
        query
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Scores every document of `segment` matching any term: `scores[doc]` (resized to the
    /// segment) holds the sum, `matched` the documents with a non-zero score, in first-match order.
    pub fn score_segment(
        &self,
        segment: &SegmentReader,
        fields: &Fields,
        scores: &mut Vec<f32>,
        matched: &mut Vec<u32>,
    ) -> Result<()> {
        scores.clear();
        scores.resize(segment.max_doc() as usize, 0.0);
        matched.clear();
        let mut start = 0;
        while start < self.terms.len() {
            let field_no = self.terms[start].field_no;
            let end = self.terms[start..]
                .iter()
                .position(|t| t.field_no != field_no)
                .map_or(self.terms.len(), |n| start + n);
            let field = fields
                .text_field(TEXT_FIELDS[field_no])
                .expect("text field");
            let inverted = segment.inverted_index(field)?;
            let mut norms = None;
            for term in &self.terms[start..end] {
                let Some(mut postings) = inverted.read_postings(
                    &Term::from_field_text(field, &term.text),
                    IndexRecordOption::WithFreqs,
                )?
                else {
                    continue;
                };
                let norms = match &mut norms {
                    Some(n) => n,
                    None => norms.insert(segment.get_fieldnorms_reader(field)?),
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let slot = &mut scores[doc as usize];
                    if *slot == 0.0 {
                        matched.push(doc);
                    }
                    *slot += term
                        .weight
                        .score(norms.fieldnorm_id(doc), postings.term_freq());
                    doc = postings.advance();
                }
            }
            start = end;
        }
        Ok(())
    }
}
