//! Ranking metrics, as BEIR reports them (trec_eval conventions):
//! - nDCG@k: DCG = sum over the top k of `gain / log2(rank + 1)` with the relevance grade as gain
//!   (linear gains; equal to `2^g - 1` gains for binary relevance), divided by the DCG of the ideal
//!   ranking of all judged-relevant documents;
//! - Recall@k: relevant documents in the top k / all relevant documents of the query;
//! - MRR@k: 1 / rank of the first relevant document in the top k, 0 if none.
//!
//! A document is relevant when its grade is > 0. The ranking is taken in the order given (ties
//! were already broken by the system); a repeated document counts at its first position only. A query without any relevant document has no defined
//! score: [`evaluate`] skips it and counts it in [`Summary::skipped`].

use std::collections::HashMap;

/// Relevance grades of one query's judged documents.
pub type Judgments = HashMap<String, u32>;

/// Scores of one query.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueryScores {
    pub ndcg_at_10: f64,
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub mrr_at_10: f64,
}

/// Means over the scored queries.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub queries: usize,
    /// Queries without a relevant document, left out of the means.
    pub skipped: usize,
    pub mean: QueryScores,
}

/// The ranking without repeated documents (a repeat keeps its first position).
fn distinct(ranking: &[String]) -> Vec<&String> {
    let mut seen = std::collections::HashSet::new();
    ranking.iter().filter(|d| seen.insert(*d)).collect()
}

pub fn ndcg_at(k: usize, ranking: &[String], judgments: &Judgments) -> Option<f64> {
    let mut ideal: Vec<u32> = judgments.values().copied().filter(|g| *g > 0).collect();
    if ideal.is_empty() {
        return None;
    }
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let discount = |rank: usize| 1.0 / ((rank + 1) as f64).log2();
    let dcg: f64 = distinct(ranking)
        .into_iter()
        .take(k)
        .enumerate()
        .map(|(i, doc)| f64::from(judgments.get(doc).copied().unwrap_or(0)) * discount(i + 1))
        .sum();
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(*g) * discount(i + 1))
        .sum();
    Some(dcg / idcg)
}

pub fn recall_at(k: usize, ranking: &[String], judgments: &Judgments) -> Option<f64> {
    let relevant = judgments.values().filter(|g| **g > 0).count();
    if relevant == 0 {
        return None;
    }
    let found = distinct(ranking)
        .into_iter()
        .take(k)
        .filter(|doc| judgments.get(*doc).is_some_and(|g| *g > 0))
        .count();
    Some(found as f64 / relevant as f64)
}

pub fn mrr_at(k: usize, ranking: &[String], judgments: &Judgments) -> Option<f64> {
    if !judgments.values().any(|g| *g > 0) {
        return None;
    }
    Some(
        distinct(ranking)
            .into_iter()
            .take(k)
            .position(|doc| judgments.get(doc).is_some_and(|g| *g > 0))
            .map_or(0.0, |i| 1.0 / (i + 1) as f64),
    )
}

/// All metrics of one query; `None` when it has no relevant document.
pub fn score(ranking: &[String], judgments: &Judgments) -> Option<QueryScores> {
    Some(QueryScores {
        ndcg_at_10: ndcg_at(10, ranking, judgments)?,
        recall_at_1: recall_at(1, ranking, judgments)?,
        recall_at_5: recall_at(5, ranking, judgments)?,
        recall_at_10: recall_at(10, ranking, judgments)?,
        mrr_at_10: mrr_at(10, ranking, judgments)?,
    })
}

/// Means over queries: `(ranking, judgments)` per query.
pub fn evaluate<'a>(runs: impl IntoIterator<Item = (&'a [String], &'a Judgments)>) -> Summary {
    let mut summary = Summary::default();
    let mut sum = QueryScores::default();
    for (ranking, judgments) in runs {
        match score(ranking, judgments) {
            Some(s) => {
                summary.queries += 1;
                sum.ndcg_at_10 += s.ndcg_at_10;
                sum.recall_at_1 += s.recall_at_1;
                sum.recall_at_5 += s.recall_at_5;
                sum.recall_at_10 += s.recall_at_10;
                sum.mrr_at_10 += s.mrr_at_10;
            }
            None => summary.skipped += 1,
        }
    }
    if summary.queries > 0 {
        let n = summary.queries as f64;
        summary.mean = QueryScores {
            ndcg_at_10: sum.ndcg_at_10 / n,
            recall_at_1: sum.recall_at_1 / n,
            recall_at_5: sum.recall_at_5 / n,
            recall_at_10: sum.recall_at_10 / n,
            mrr_at_10: sum.mrr_at_10 / n,
        };
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn judged(pairs: &[(&str, u32)]) -> Judgments {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn binary_relevance_by_hand() {
        // Relevant: b (rank 2) and d (rank 4); e is relevant but not retrieved.
        let r = ranking(&["a", "b", "c", "d"]);
        let j = judged(&[("b", 1), ("d", 1), ("e", 1), ("a", 0)]);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        close(ndcg_at(10, &r, &j).unwrap(), dcg / idcg);
        close(recall_at(1, &r, &j).unwrap(), 0.0);
        close(recall_at(5, &r, &j).unwrap(), 2.0 / 3.0);
        close(mrr_at(10, &r, &j).unwrap(), 0.5);
    }

    #[test]
    fn graded_relevance_uses_linear_gains_and_the_ideal_order() {
        let r = ranking(&["x", "y", "z"]);
        let j = judged(&[("x", 1), ("y", 3), ("z", 0)]);
        let dcg = 1.0 + 3.0 / 3f64.log2();
        let idcg = 3.0 + 1.0 / 3f64.log2();
        close(ndcg_at(10, &r, &j).unwrap(), dcg / idcg);
        close(mrr_at(10, &r, &j).unwrap(), 1.0);
    }

    #[test]
    fn a_perfect_ranking_scores_one_and_cutoffs_apply() {
        let r = ranking(&["a", "b"]);
        let j = judged(&[("a", 2), ("b", 1)]);
        close(ndcg_at(10, &r, &j).unwrap(), 1.0);
        // The relevant document at rank 11 does not count at 10.
        let mut long = ranking(&["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"]);
        long.push("a".into());
        let j = judged(&[("a", 1)]);
        close(ndcg_at(10, &long, &j).unwrap(), 0.0);
        close(recall_at(10, &long, &j).unwrap(), 0.0);
        close(mrr_at(10, &long, &j).unwrap(), 0.0);
    }

    #[test]
    fn duplicates_in_judgments_are_per_document_and_order_is_as_given() {
        // Ties in score are the system's business: the same documents in another order score
        // differently.
        let j = judged(&[("a", 1)]);
        close(mrr_at(10, &ranking(&["a", "b"]), &j).unwrap(), 1.0);
        close(mrr_at(10, &ranking(&["b", "a"]), &j).unwrap(), 0.5);
    }

    #[test]
    fn queries_without_relevant_documents_are_skipped() {
        let none = judged(&[("a", 0)]);
        assert!(score(&ranking(&["a"]), &none).is_none());
        let some = judged(&[("a", 1)]);
        let r1 = ranking(&["a"]);
        let r2 = ranking(&["b"]);
        let summary = evaluate([(&r1[..], &some), (&r2[..], &some), (&r1[..], &none)]);
        assert_eq!(summary.queries, 2);
        assert_eq!(summary.skipped, 1);
        close(summary.mean.ndcg_at_10, 0.5);
        close(summary.mean.recall_at_1, 0.5);
        close(summary.mean.mrr_at_10, 0.5);
    }

    #[test]
    fn empty_ranking_scores_zero() {
        let j = judged(&[("a", 1)]);
        let s = score(&[], &j).unwrap();
        assert_eq!(s, QueryScores::default());
    }

    proptest::proptest! {
        #[test]
        fn metrics_are_bounded_and_recall_grows_with_k(
            ranked in proptest::collection::vec(0u8..20, 0..15),
            relevant in proptest::collection::hash_map(0u8..20, 1u32..4, 1..6),
        ) {
            let r: Vec<String> = ranked.iter().map(|d| d.to_string()).collect();
            let j: Judgments = relevant.iter().map(|(d, g)| (d.to_string(), *g)).collect();
            let s = score(&r, &j).unwrap();
            for v in [s.ndcg_at_10, s.recall_at_1, s.recall_at_5, s.recall_at_10, s.mrr_at_10] {
                proptest::prop_assert!((0.0..=1.0 + 1e-12).contains(&v));
            }
            proptest::prop_assert!(s.recall_at_1 <= s.recall_at_5 && s.recall_at_5 <= s.recall_at_10);
        }
    }
}
