//! Query-adaptive weights for score fusion of a lexical (BM25) and a dense (cosine) list.
//!
//! Fixed weights assume one retriever is as reliable as the other on every query and in every
//! catalog. They are not: a query whose words appear in the right tool's description is a BM25
//! query, a paraphrase is a dense one, and a catalog may be mostly one kind. The weights here are
//! decided per query from what the two candidate lists show:
//!
//! - **dense**: its base weight times `(best cosine / reference) ^ cosine_exponent`. Cosine
//!   similarity of unit vectors is on the same scale for every query, so a best candidate far
//!   from the query (nothing in the catalog is about it, or the model does not understand it)
//!   weighs less, and a near-paraphrase weighs more;
//! - **lexical**: its base weight times `exp(margin_exponent x (z1_lexical - z1_dense))`, where
//!   `z1` is how many standard deviations a list's best candidate stands above that list's
//!   candidates: a list that singles out one candidate counts more than one whose head is flat;
//! - **lexical, by coverage**: its weight times `exp(coverage_gain x max(0, c_lexical - c_dense -
//!   coverage_margin))`, where `c` is the largest fraction of the query's terms found in one of a
//!   list's first [`crate::coverage::COVERAGE_DEPTH`] candidates ([`crate::coverage`]). BM25's
//!   best candidates always contain some of the query's words; when the dense list's best ones
//!   contain far fewer, the two retrievers are not about the same thing, and the one whose best
//!   candidates contain what the user wrote is the likelier to be right. This is the signal that
//!   separates a dense retriever gone wrong (its best candidates share no words with the query)
//!   from a paraphrase (the dense list's best candidates still share some); see EVALUATION.md.
//!
//! BM25 scores have no such absolute scale (they grow with the number and rarity of query terms),
//! so only the dense list's raw level is used. The exponents are chosen out of sample
//! (leave-one-dataset-out, `load/fusion_lodo.py`); see EVALUATION.md.
//!
//! The weights are the same for every item of a query, so the fusion stays monotone: an item at
//! least as high as another in both lists is at least as high fused.

/// Parameters of the per-query weights; [`AdaptiveParams::FIXED`] gives the base weights
/// unchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveParams {
    /// The lexical and dense base weights.
    pub base: [f64; 2],
    /// The cosine at which the dense weight is its base weight.
    pub cosine_reference: f64,
    /// How strongly the dense weight follows the best cosine (0 = not at all).
    pub cosine_exponent: f64,
    /// How strongly the lexical weight follows the difference of the lists' top z-scores.
    pub margin_exponent: f64,
    /// How strongly the lexical weight follows how much more of the query the lexical list's
    /// best candidates contain than the dense list's (0 = not at all).
    pub coverage_gain: f64,
    /// The coverage difference below which the lexical weight is not raised.
    pub coverage_margin: f64,
}

impl AdaptiveParams {
    pub const FIXED: Self = Self {
        base: [1.0, 1.0],
        cosine_reference: 0.5,
        cosine_exponent: 0.0,
        margin_exponent: 0.0,
        coverage_gain: 0.0,
        coverage_margin: 0.0,
    };
}

/// The smallest best cosine the dense weight is computed from (a list whose best candidate is
/// orthogonal or opposite to the query keeps a small positive weight).
const MIN_COSINE: f64 = 1e-3;
/// Bound on the exponent of the lexical factor (`exp(+-8)`), far beyond any observed margin.
const MAX_EXPONENT: f64 = 8.0;

/// The lexical and dense weights for one query. `lexical` and `dense` are the lists' `(key, raw
/// score)` candidates (BM25 and cosine similarity of unit vectors); `coverage` is the best
/// fraction of the query's terms among each list's first candidates (see [`crate::coverage`]).
/// An empty list gets weight 0; every weight is finite and non-negative. No allocation: it runs
/// on every search.
pub fn adaptive_weights<K>(
    params: &AdaptiveParams,
    lexical: &[(K, f64)],
    dense: &[(K, f64)],
    coverage: [f64; 2],
) -> [f64; 2] {
    let [base_lexical, base_dense] = params.base;
    let mut weights = [
        if lexical.is_empty() {
            0.0
        } else {
            base_lexical
        },
        if dense.is_empty() { 0.0 } else { base_dense },
    ];
    if lexical.is_empty() || dense.is_empty() {
        return weights.map(sanitize);
    }
    if params.cosine_exponent != 0.0 {
        let best = dense.iter().map(|h| h.1).fold(f64::NEG_INFINITY, f64::max);
        let ratio = best.max(MIN_COSINE) / params.cosine_reference.max(MIN_COSINE);
        weights[1] *= ratio.powf(params.cosine_exponent);
    }
    if params.margin_exponent != 0.0 {
        let margin = top_z(lexical) - top_z(dense);
        let x = (params.margin_exponent * margin).clamp(-MAX_EXPONENT, MAX_EXPONENT);
        weights[0] *= x.exp();
    }
    if params.coverage_gain != 0.0 {
        let [lexical_coverage, dense_coverage] = coverage.map(|c| c.clamp(0.0, 1.0));
        let excess = lexical_coverage - dense_coverage - params.coverage_margin;
        if excess > 0.0 {
            weights[0] *= (params.coverage_gain * excess).min(MAX_EXPONENT).exp();
        }
    }
    weights.map(sanitize)
}

fn sanitize(w: f64) -> f64 {
    if w.is_finite() && w > 0.0 { w } else { 0.0 }
}

/// How many standard deviations the best score stands above the list's mean (0 for fewer than
/// two scores or no spread).
fn top_z<K>(hits: &[(K, f64)]) -> f64 {
    if hits.len() < 2 {
        return 0.0;
    }
    let n = hits.len() as f64;
    let mean = hits.iter().map(|h| h.1).sum::<f64>() / n;
    let sd = (hits
        .iter()
        .map(|h| (h.1 - mean) * (h.1 - mean))
        .sum::<f64>()
        / n)
        .sqrt();
    let best = hits.iter().map(|h| h.1).fold(f64::NEG_INFINITY, f64::max);
    if sd.is_finite() && sd > 1e-12 {
        (best - mean) / sd
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Scores as unkeyed candidates.
    fn c(scores: &[f64]) -> Vec<((), f64)> {
        scores.iter().map(|&s| ((), s)).collect()
    }

    fn weights(p: &AdaptiveParams, lexical: &[f64], dense: &[f64]) -> [f64; 2] {
        adaptive_weights(p, &c(lexical), &c(dense), [0.0, 0.0])
    }

    const PARAMS: AdaptiveParams = AdaptiveParams {
        base: [1.0, 2.0],
        cosine_reference: 0.5,
        cosine_exponent: 1.0,
        margin_exponent: 0.0,
        coverage_gain: 0.0,
        coverage_margin: 0.0,
    };

    #[test]
    fn the_lexical_weight_rises_when_its_best_candidates_contain_more_of_the_query() {
        let p = AdaptiveParams {
            cosine_exponent: 0.0,
            coverage_gain: 2.0,
            coverage_margin: 0.1,
            ..PARAMS
        };
        let (lexical, dense) = (c(&[9.0, 3.0]), c(&[0.6, 0.5]));
        let w = |coverage| adaptive_weights(&p, &lexical, &dense, coverage);
        // At or below the margin: the base weights.
        assert_eq!(w([0.5, 0.5]), [1.0, 2.0]);
        assert_eq!(w([0.6, 0.5]), [1.0, 2.0]);
        assert_eq!(w([0.0, 1.0]), [1.0, 2.0]);
        let raised = w([1.0, 0.25]);
        assert!(
            (raised[0] - (2.0f64 * 0.65).exp()).abs() < 1e-12,
            "{raised:?}"
        );
        assert_eq!(raised[1], 2.0);
        // Out-of-range coverage is clamped, not trusted.
        assert_eq!(w([7.0, -3.0]), w([1.0, 0.0]));
        assert_eq!(w([f64::NAN, 0.0]), [1.0, 2.0]);
    }

    #[test]
    fn the_dense_weight_follows_the_best_cosine() {
        let lexical = [12.0, 8.0, 3.0];
        assert_eq!(weights(&PARAMS, &lexical, &[0.5, 0.4]), [1.0, 2.0]);
        let w = weights(&PARAMS, &lexical, &[0.25, 0.2]);
        assert!((w[1] - 1.0).abs() < 1e-12, "{w:?}");
        let w = weights(&PARAMS, &lexical, &[0.75, 0.2]);
        assert!((w[1] - 3.0).abs() < 1e-12, "{w:?}");
        // A best candidate opposite to the query keeps a small positive weight.
        let w = weights(&PARAMS, &lexical, &[-0.2, -0.3]);
        assert!(w[1] > 0.0 && w[1] < 0.01, "{w:?}");
    }

    #[test]
    fn fixed_params_keep_the_base_weights_and_empty_lists_weigh_nothing() {
        let p = AdaptiveParams {
            base: [1.0, 1.5],
            ..AdaptiveParams::FIXED
        };
        assert_eq!(weights(&p, &[3.0, 1.0], &[0.9, 0.1]), [1.0, 1.5]);
        assert_eq!(weights(&PARAMS, &[], &[0.9, 0.1]), [0.0, 2.0]);
        assert_eq!(weights(&PARAMS, &[3.0], &[]), [1.0, 0.0]);
        assert_eq!(weights(&PARAMS, &[], &[]), [0.0, 0.0]);
    }

    #[test]
    fn the_lexical_weight_follows_the_margin_of_the_top_z_scores() {
        let p = AdaptiveParams {
            margin_exponent: 0.5,
            cosine_exponent: 0.0,
            ..PARAMS
        };
        // Lexical singles out one candidate (z1 = sqrt 3); dense is flat at the top (z1 = 1).
        let lexical = [10.0, 0.0, 0.0, 0.0];
        let dense = [0.5, 0.5, 0.4, 0.4];
        let (zl, zd) = (top_z(&c(&lexical)), top_z(&c(&dense)));
        assert!((zl - 3f64.sqrt()).abs() < 1e-12);
        assert!((zd - 1.0).abs() < 1e-12);
        let w = weights(&p, &lexical, &dense);
        assert!((w[0] - (0.5 * (zl - zd)).exp()).abs() < 1e-12, "{w:?}");
        assert_eq!(w[1], 2.0);
    }

    proptest! {
        #[test]
        fn weights_are_finite_non_negative_and_deterministic(
            lexical in proptest::collection::vec(0.0f64..1e4, 0..60),
            dense in proptest::collection::vec(-1.0f64..1.0, 0..60),
            cosine_exponent in 0.0f64..6.0,
            margin_exponent in 0.0f64..3.0,
            reference in 0.0f64..1.0,
            coverage_gain in 0.0f64..8.0,
            coverage_margin in 0.0f64..1.0,
            coverage in proptest::array::uniform2(-0.5f64..1.5),
        ) {
            let p = AdaptiveParams { base: [1.0, 1.5], cosine_reference: reference, cosine_exponent, margin_exponent, coverage_gain, coverage_margin };
            let w = adaptive_weights(&p, &c(&lexical), &c(&dense), coverage);
            prop_assert!(w.iter().all(|x| x.is_finite() && *x >= 0.0), "{:?}", w);
            prop_assert_eq!(w, adaptive_weights(&p, &c(&lexical), &c(&dense), coverage));
            prop_assert_eq!(w[0] > 0.0, !lexical.is_empty());
            prop_assert_eq!(w[1] > 0.0, !dense.is_empty());
        }

        #[test]
        fn a_better_best_cosine_never_lowers_the_dense_share(
            dense in proptest::collection::vec(0.0f64..0.9, 1..30),
            lift in 0.0f64..0.1,
            cosine_exponent in 0.0f64..6.0,
        ) {
            let p = AdaptiveParams { cosine_exponent, ..PARAMS };
            let lexical = [9.0, 4.0, 1.0];
            let mut sorted = dense.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let mut lifted = sorted.clone();
            lifted[0] += lift;
            let share = |w: [f64; 2]| w[1] / (w[0] + w[1]);
            prop_assert!(share(weights(&p, &lexical, &lifted)) >= share(weights(&p, &lexical, &sorted)) - 1e-12);
        }

        #[test]
        fn more_lexical_coverage_never_lowers_the_lexical_share_and_more_dense_never_raises_it(
            coverage in proptest::array::uniform2(0.0f64..1.0),
            lift in 0.0f64..0.5,
            coverage_gain in 0.0f64..8.0,
            coverage_margin in 0.0f64..0.5,
        ) {
            let p = AdaptiveParams { coverage_gain, coverage_margin, ..PARAMS };
            let (lexical, dense) = (c(&[9.0, 4.0, 1.0]), c(&[0.7, 0.5, 0.2]));
            let share = |coverage: [f64; 2]| {
                let w = adaptive_weights(&p, &lexical, &dense, coverage);
                w[0] / (w[0] + w[1])
            };
            let base = share(coverage);
            prop_assert!(share([coverage[0] + lift, coverage[1]]) >= base - 1e-12);
            prop_assert!(share([coverage[0], coverage[1] + lift]) <= base + 1e-12);
        }
    }
}
