//! Fusion of two ranked lists (lexical and dense) with the deployment's configured fusion
//! (`search.fusion` and its weights), shared by tool search ([`crate::tools::search`]), feedback's
//! ranking models ([`crate::tools::feedback`]) and plan recommendation.

use agentsearch_common::config::{Fusion, SearchConfig};
use agentsearch_fusion::{
    AdaptiveParams, FusedItem, QueryTerms, RankedList, ScoredList, adaptive_weights,
    reciprocal_rank_fusion, score_fusion,
};

/// The query's terms when the configured fusion reads how much of the query the lists' best
/// candidates contain (adaptive fusion with a coverage gain), else `None`: the coverage pair is
/// then `[0, 0]` and need not be measured (see [`agentsearch_fusion::coverage_pair`]).
pub(crate) fn coverage_terms(search: &SearchConfig, query: &str) -> Option<QueryTerms> {
    if search.fusion != Fusion::Adaptive || search.coverage_gain == 0.0 {
        return None;
    }
    Some(QueryTerms::new(query)).filter(|terms| !terms.is_empty())
}

/// Fuses two ranked `(key, score)` lists, best first (BM25 and cosine similarity), with the
/// configured fusion and base `weights`; `coverage` is how much of the query each list's best
/// candidates contain (see [`coverage_terms`]; adaptive fusion reads it). See
/// [`crate::tools::search`].
pub(crate) fn fuse_keyed<'a>(
    search: &SearchConfig,
    weights: [f64; 2],
    lexical: &[(&'a str, f64)],
    dense: &[(&'a str, f64)],
    coverage: [f64; 2],
) -> (Vec<FusedItem<&'a str>>, f64) {
    let weights = match search.fusion {
        Fusion::Adaptive => {
            let params = AdaptiveParams {
                base: weights,
                cosine_reference: search.cosine_reference,
                cosine_exponent: search.cosine_exponent,
                margin_exponent: search.margin_exponent,
                coverage_gain: search.coverage_gain,
                coverage_margin: search.coverage_margin,
            };
            adaptive_weights(&params, lexical, dense, coverage)
        }
        Fusion::Score | Fusion::Rrf => weights,
    };
    match search.fusion {
        Fusion::Rrf => {
            let lexical_keys: Vec<&str> = lexical.iter().map(|h| h.0).collect();
            let dense_keys: Vec<&str> = dense.iter().map(|h| h.0).collect();
            let lists = [
                RankedList {
                    weight: weights[0],
                    keys: &lexical_keys[..],
                },
                RankedList {
                    weight: weights[1],
                    keys: &dense_keys[..],
                },
            ];
            (reciprocal_rank_fusion(&lists, search.rrf_k), 0.0)
        }
        Fusion::Score | Fusion::Adaptive => {
            let lists = [
                ScoredList {
                    weight: weights[0],
                    hits: lexical,
                },
                ScoredList {
                    weight: weights[1],
                    hits: dense,
                },
            ];
            let fused = score_fusion(&lists);
            (fused.items, fused.floor)
        }
    }
}
