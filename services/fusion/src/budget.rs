//! Budget packing: which of the fused candidates are returned.
//!
//! Candidates are visited in relevance order. A candidate is returned when fewer than `limit`
//! tools were returned so far and its tokens fit in what is left of `max_tokens`; a candidate that
//! does not fit is skipped (counted in `omitted_for_budget`) and the next, possibly smaller, one is
//! tried. Once `limit` tools are returned, every remaining candidate counts in `omitted_for_top_k`.
//! So `returned + omitted_for_budget + omitted_for_top_k == candidates`, always.

/// The outcome of packing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packing {
    /// Positions (into the candidate list) of the returned candidates, in relevance order.
    pub selected: Vec<usize>,
    pub tokens: u64,
    pub omitted_for_budget: usize,
    pub omitted_for_top_k: usize,
}

/// Packs candidates with the given token counts (in relevance order) under `limit` and `max_tokens`.
pub fn pack(candidate_tokens: &[u32], limit: usize, max_tokens: Option<u64>) -> Packing {
    let mut packing = Packing::default();
    for (pos, &tokens) in candidate_tokens.iter().enumerate() {
        if packing.selected.len() >= limit {
            packing.omitted_for_top_k = candidate_tokens.len() - pos;
            break;
        }
        let fits = max_tokens.is_none_or(|max| packing.tokens + u64::from(tokens) <= max);
        if fits {
            packing.selected.push(pos);
            packing.tokens += u64::from(tokens);
        } else {
            packing.omitted_for_budget += 1;
        }
    }
    packing
}

/// The number of tools a request may return: `topK`, else 50 when only a token budget is given,
/// else the deployment's default.
pub fn result_limit(top_k: Option<u32>, max_tokens: Option<u64>, default_top_k: u32) -> usize {
    match (top_k, max_tokens) {
        (Some(k), _) => k as usize,
        (None, Some(_)) => 50,
        (None, None) => default_top_k as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn skips_what_does_not_fit_and_keeps_going() {
        let p = pack(&[100, 500, 50, 400, 10], 10, Some(200));
        assert_eq!(p.selected, [0, 2, 4]);
        assert_eq!(p.tokens, 160);
        assert_eq!(p.omitted_for_budget, 2);
        assert_eq!(p.omitted_for_top_k, 0);
    }

    #[test]
    fn limit_cuts_after_budget_skips() {
        let p = pack(&[100, 500, 50, 400, 10], 2, Some(200));
        assert_eq!(p.selected, [0, 2]);
        assert_eq!(p.omitted_for_budget, 1);
        assert_eq!(p.omitted_for_top_k, 2);
    }

    #[test]
    fn no_budget_is_top_k() {
        let p = pack(&[1, 2, 3], 2, None);
        assert_eq!(p.selected, [0, 1]);
        assert_eq!(p.omitted_for_top_k, 1);
        assert_eq!(pack(&[], 5, Some(1)), Packing::default());
    }

    #[test]
    fn limits_follow_the_contract() {
        assert_eq!(result_limit(Some(3), Some(100), 8), 3);
        assert_eq!(result_limit(None, Some(100), 8), 50);
        assert_eq!(result_limit(None, None, 8), 8);
    }

    proptest! {
        #[test]
        fn counts_add_up_and_budget_holds(
            tokens in proptest::collection::vec(0u32..2000, 0..80),
            limit in 1usize..51,
            max in proptest::option::of(1u64..10_000),
        ) {
            let p = pack(&tokens, limit, max);
            prop_assert_eq!(p.selected.len() + p.omitted_for_budget + p.omitted_for_top_k, tokens.len());
            prop_assert!(p.selected.len() <= limit);
            let sum: u64 = p.selected.iter().map(|&i| u64::from(tokens[i])).sum();
            prop_assert_eq!(sum, p.tokens);
            if let Some(max) = max {
                prop_assert!(p.tokens <= max);
            }
            prop_assert!(p.selected.windows(2).all(|w| w[0] < w[1]));
            // Every skipped candidate before the cut really did not fit at its turn.
            let mut used = 0u64;
            let mut chosen = 0usize;
            for (i, &t) in tokens.iter().enumerate() {
                if chosen == limit { break; }
                if p.selected.contains(&i) { used += u64::from(t); chosen += 1; }
                else { prop_assert!(max.is_some_and(|m| used + u64::from(t) > m)); }
            }
        }
    }
}
