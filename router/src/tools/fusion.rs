//! Fusion of two ranked lists (lexical and dense) with the deployment's configured fusion
//! (`search.fusion` and its weights), shared by tool search ([`crate::tools::search`]), feedback's
//! ranking models ([`crate::tools::feedback`]) and plan recommendation.

use agentsearch_common::config::{Fusion, SearchConfig};
use agentsearch_fusion::{
    AdaptiveParams, FusedItem, RankedList, ScoredList, adaptive_weights, reciprocal_rank_fusion,
    score_fusion,
};

/// Fuses two ranked `(key, score)` lists, best first (BM25 and cosine similarity), with the
/// configured fusion and base `weights`; see [`crate::tools::search`].
pub(crate) fn fuse_keyed<'a>(
    search: &SearchConfig,
    weights: [f64; 2],
    lexical: &[(&'a str, f64)],
    dense: &[(&'a str, f64)],
) -> (Vec<FusedItem<&'a str>>, f64) {
    let weights = match search.fusion {
        Fusion::Adaptive => {
            let params = AdaptiveParams {
                base: weights,
                cosine_reference: search.cosine_reference,
                cosine_exponent: search.cosine_exponent,
                margin_exponent: search.margin_exponent,
            };
            adaptive_weights(&params, lexical, dense)
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
