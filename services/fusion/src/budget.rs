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
    let list: Vec<(usize, Option<u32>)> = candidate_tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| (i, Some(t)))
        .collect();
    pack_queries(&[list], &[limit], max_tokens, BudgetScope::Union)
        .ok()
        .and_then(|m| m.queries.into_iter().next())
        .unwrap_or_default()
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

/// How a budget applies to several queries packed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetScope {
    /// One budget for the deduplicated union of every query's tools: a tool two queries return
    /// costs once.
    Union,
    /// Each query has the whole budget to itself.
    PerQuery,
}

/// The outcome of packing several queries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MultiPacking {
    /// Per query, in query order: `selected` positions into that query's list, `tokens` the sum of
    /// its selected tools, and the omissions; `returned + omitted_for_budget + omitted_for_top_k ==
    /// candidates` holds for each query.
    pub queries: Vec<Packing>,
    /// Distinct selected keys over all queries, and their tokens counted once each.
    pub distinct: usize,
    pub tokens: u64,
}

/// Packs the ranked candidate lists of several queries. Each candidate is `(key, tokens)`; a key
/// may appear in several lists (it must have the same tokens in each). `tokens` may be `None`
/// while a candidate's size is not known yet: packing then stops and returns, as `Err`, the keys it
/// needs, in the order it reached them; call again once they are known. Candidates are visited
/// round-robin (every query's first, then every query's second, ...), so with a union budget each
/// query's best tools are packed before any query's second-best. A candidate another query already
/// selected is returned again at no cost.
pub fn pack_queries<K: Eq + std::hash::Hash + Clone>(
    lists: &[Vec<(K, Option<u32>)>],
    limits: &[usize],
    max_tokens: Option<u64>,
    scope: BudgetScope,
) -> Result<MultiPacking, Vec<K>> {
    use std::collections::HashMap;
    let n = lists.len();
    let mut out = MultiPacking {
        queries: vec![Packing::default(); n],
        ..Default::default()
    };
    let mut chosen: HashMap<&K, u32> = HashMap::new();
    let mut per_query_keys: Vec<HashMap<&K, ()>> = vec![HashMap::new(); n];
    let mut cursor = vec![0usize; n];
    let mut done = vec![false; n];
    let mut needed: Vec<K> = Vec::new();
    loop {
        let mut progressed = false;
        for q in 0..n {
            if done[q] {
                continue;
            }
            let list = &lists[q];
            let pos = cursor[q];
            let limit = limits.get(q).copied().unwrap_or(0);
            let packing = &mut out.queries[q];
            if pos >= list.len() {
                done[q] = true;
                continue;
            }
            if packing.selected.len() >= limit {
                packing.omitted_for_top_k = list.len() - pos;
                done[q] = true;
                continue;
            }
            let (key, tokens) = &list[pos];
            let Some(tokens) = *tokens else {
                // Wait for this query's next size; other queries may still advance this round, but
                // a union budget depends on the visiting order, so stop everything here.
                needed.push(key.clone());
                done[q] = true;
                continue;
            };
            progressed = true;
            cursor[q] += 1;
            if per_query_keys[q].contains_key(key) {
                // The same key twice in one list: count it as not fitting to keep the sums exact.
                packing.omitted_for_budget += 1;
                continue;
            }
            let shared = scope == BudgetScope::Union && chosen.contains_key(key);
            let fits = shared
                || match (max_tokens, scope) {
                    (None, _) => true,
                    (Some(max), BudgetScope::Union) => out.tokens + u64::from(tokens) <= max,
                    (Some(max), BudgetScope::PerQuery) => packing.tokens + u64::from(tokens) <= max,
                };
            if fits {
                packing.selected.push(pos);
                packing.tokens += u64::from(tokens);
                per_query_keys[q].insert(key, ());
                if !chosen.contains_key(key) {
                    chosen.insert(key, tokens);
                    out.tokens += u64::from(tokens);
                }
            } else {
                packing.omitted_for_budget += 1;
            }
        }
        if !needed.is_empty() {
            return Err(needed);
        }
        if !progressed && done.iter().all(|d| *d) {
            break;
        }
    }
    out.distinct = chosen.len();
    Ok(out)
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

    #[test]
    fn a_shared_tool_costs_once_under_a_union_budget() {
        let a = vec![("x".to_string(), Some(100)), ("y".to_string(), Some(100))];
        let b = vec![("x".to_string(), Some(100)), ("z".to_string(), Some(100))];
        let m = pack_queries(
            &[a.clone(), b.clone()],
            &[2, 2],
            Some(250),
            BudgetScope::Union,
        )
        .unwrap();
        // Round 1: a takes x (100), b gets x free. Round 2: a takes y (200), b cannot fit z.
        assert_eq!(m.queries[0].selected, [0, 1]);
        assert_eq!(m.queries[1].selected, [0]);
        assert_eq!(m.queries[1].omitted_for_budget, 1);
        assert_eq!((m.distinct, m.tokens), (2, 200));
        let per = pack_queries(&[a, b], &[2, 2], Some(250), BudgetScope::PerQuery).unwrap();
        assert_eq!(per.queries[1].selected, [0, 1]);
        assert_eq!((per.distinct, per.tokens), (3, 300));
    }

    #[test]
    fn unknown_sizes_are_asked_for_in_order() {
        let a = vec![("x".to_string(), Some(1)), ("y".to_string(), None)];
        let b = vec![("z".to_string(), None)];
        let err = pack_queries(&[a, b], &[5, 5], None, BudgetScope::Union).unwrap_err();
        assert_eq!(err, ["z".to_string()]);
    }

    proptest! {
        #[test]
        fn multi_query_counts_add_up(
            lists in proptest::collection::vec(
                proptest::collection::vec((0u8..30, 0u32..500), 0..30), 1..6),
            limit in 1usize..12,
            max in proptest::option::of(1u64..3000),
            union in any::<bool>(),
        ) {
            // Sizes are a function of the key, as in real catalogs.
            let lists: Vec<Vec<(u8, Option<u32>)>> = lists
                .into_iter()
                .map(|l| l.into_iter().map(|(k, _)| (k, Some(u32::from(k) * 37 % 500))).collect())
                .collect();
            let scope = if union { BudgetScope::Union } else { BudgetScope::PerQuery };
            let limits = vec![limit; lists.len()];
            let m = pack_queries(&lists, &limits, max, scope).unwrap();
            let mut distinct = std::collections::HashMap::new();
            for (q, p) in m.queries.iter().enumerate() {
                prop_assert_eq!(p.selected.len() + p.omitted_for_budget + p.omitted_for_top_k, lists[q].len());
                prop_assert!(p.selected.len() <= limit);
                let sum: u64 = p.selected.iter().map(|&i| u64::from(lists[q][i].1.unwrap())).sum();
                prop_assert_eq!(sum, p.tokens);
                if let (Some(max), BudgetScope::PerQuery) = (max, scope) {
                    prop_assert!(p.tokens <= max);
                }
                for &i in &p.selected {
                    distinct.insert(lists[q][i].0, lists[q][i].1.unwrap());
                }
            }
            prop_assert_eq!(m.distinct, distinct.len());
            prop_assert_eq!(m.tokens, distinct.values().map(|&t| u64::from(t)).sum::<u64>());
            if let (Some(max), BudgetScope::Union) = (max, scope) {
                prop_assert!(m.tokens <= max);
            }
        }

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
