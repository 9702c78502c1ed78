//! Weighted reciprocal rank fusion.
//!
//! For items ranked by several retrievers, the fused score of an item is
//! `sum over lists containing it of weight_list / (k + rank)`, with `rank` starting at 1
//! (Cormack, Clarke and Buettcher, SIGIR 2009, use k = 60). Scores of the retrievers are ignored:
//! only ranks matter, so BM25 and cosine scores never need to be put on one scale.
//!
//! The output is ordered by fused score descending, then by best (smallest) rank in any list, then
//! by key ascending, so equal inputs always give the same order.

use std::collections::HashMap;
use std::hash::Hash;

/// One retriever's ranked keys, best first, and the weight of its votes.
#[derive(Clone, Debug)]
pub struct RankedList<'a, K> {
    pub weight: f64,
    pub keys: &'a [K],
}

/// One fused item: its key, fused score and its 1-based rank in each input list (`None` where absent).
#[derive(Clone, Debug, PartialEq)]
pub struct FusedItem<K> {
    pub key: K,
    pub score: f64,
    pub ranks: Vec<Option<usize>>,
}

/// Fuses ranked lists; a key repeated inside one list counts at its first (best) position only.
pub fn reciprocal_rank_fusion<K>(lists: &[RankedList<'_, K>], k: f64) -> Vec<FusedItem<K>>
where
    K: Clone + Eq + Hash + Ord,
{
    let mut items: Vec<FusedItem<K>> = Vec::new();
    let mut index: HashMap<&K, usize> = HashMap::new();
    for (list_no, list) in lists.iter().enumerate() {
        for (pos, key) in list.keys.iter().enumerate() {
            let slot = *index.entry(key).or_insert_with(|| {
                items.push(FusedItem {
                    key: key.clone(),
                    score: 0.0,
                    ranks: vec![None; lists.len()],
                });
                items.len() - 1
            });
            let item = &mut items[slot];
            if item.ranks[list_no].is_none() {
                let rank = pos + 1;
                item.ranks[list_no] = Some(rank);
                item.score += list.weight / (k + rank as f64);
            }
        }
    }
    sort_fused(&mut items);
    items
}

/// Orders fused items by score descending, then best (smallest) rank in any list, then key.
pub(crate) fn sort_fused<K: Ord>(items: &mut [FusedItem<K>]) {
    items.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| best_rank(a).cmp(&best_rank(b)))
            .then_with(|| a.key.cmp(&b.key))
    });
}

fn best_rank<K>(item: &FusedItem<K>) -> usize {
    item.ranks
        .iter()
        .flatten()
        .copied()
        .min()
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fuse(lists: &[(f64, Vec<&'static str>)], k: f64) -> Vec<(String, f64)> {
        let lists: Vec<RankedList<'_, &str>> = lists
            .iter()
            .map(|(w, keys)| RankedList {
                weight: *w,
                keys: keys.as_slice(),
            })
            .collect();
        reciprocal_rank_fusion(&lists, k)
            .into_iter()
            .map(|f| (f.key.to_string(), f.score))
            .collect()
    }

    #[test]
    fn exact_scores_for_two_lists() {
        let fused = fuse(&[(1.0, vec!["a", "b", "c"]), (1.0, vec!["c", "a"])], 60.0);
        let expected = [
            ("a", 1.0 / 61.0 + 1.0 / 62.0),
            ("c", 1.0 / 63.0 + 1.0 / 61.0),
            ("b", 1.0 / 62.0),
        ];
        assert_eq!(fused.len(), 3);
        for ((key, score), (ekey, escore)) in fused.iter().zip(expected) {
            assert_eq!(key, ekey);
            assert!((score - escore).abs() < 1e-15, "{key}: {score} vs {escore}");
        }
    }

    #[test]
    fn weights_scale_votes() {
        let fused = fuse(&[(2.0, vec!["x"]), (0.5, vec!["y"])], 0.0);
        assert_eq!(fused, vec![("x".to_string(), 2.0), ("y".to_string(), 0.5)]);
    }

    #[test]
    fn ties_break_by_best_rank_then_key() {
        // b is first in list 2, a first in list 1: equal scores and equal best ranks -> key order.
        let fused = fuse(&[(1.0, vec!["b", "a"]), (1.0, vec!["a", "b"])], 60.0);
        assert_eq!(fused[0].0, "a");
        // same score, different best rank: z ranked 1st somewhere beats y ranked 2nd twice? No: use k=0.
        let fused = fuse(
            &[(1.0, vec!["z", "q", "y"]), (1.0, vec!["w", "y", "v"])],
            0.0,
        );
        assert_eq!(fused[0].0, "w");
        assert_eq!(fused[1].0, "z");
    }

    #[test]
    fn duplicates_inside_a_list_count_once() {
        let fused = fuse(&[(1.0, vec!["a", "a", "b"])], 60.0);
        assert_eq!(fused[0], ("a".to_string(), 1.0 / 61.0));
        assert_eq!(fused[1], ("b".to_string(), 1.0 / 63.0));
    }

    #[test]
    fn empty_input_gives_empty_output() {
        assert!(fuse(&[], 60.0).is_empty());
        assert!(fuse(&[(1.0, vec![])], 60.0).is_empty());
    }

    proptest! {
        #[test]
        fn fused_set_is_the_union_and_scores_are_sorted(
            a in proptest::collection::vec(0u8..30, 0..20),
            b in proptest::collection::vec(0u8..30, 0..20),
            k in 0.0f64..100.0,
        ) {
            let lists = [RankedList { weight: 1.0, keys: &a[..] }, RankedList { weight: 1.0, keys: &b[..] }];
            let fused = reciprocal_rank_fusion(&lists, k);
            let mut union: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
            union.sort();
            union.dedup();
            let mut keys: Vec<u8> = fused.iter().map(|f| f.key).collect();
            keys.sort();
            prop_assert_eq!(keys, union);
            for w in fused.windows(2) {
                prop_assert!(w[0].score >= w[1].score);
            }
        }

        #[test]
        fn an_item_first_in_every_list_is_first(
            rest_a in proptest::collection::vec(1u8..30, 0..10),
            rest_b in proptest::collection::vec(1u8..30, 0..10),
        ) {
            let mut a = vec![0u8];
            a.extend(rest_a);
            let mut b = vec![0u8];
            b.extend(rest_b);
            let lists = [RankedList { weight: 1.0, keys: &a[..] }, RankedList { weight: 1.0, keys: &b[..] }];
            prop_assert_eq!(reciprocal_rank_fusion(&lists, 60.0)[0].key, 0);
        }

        #[test]
        fn fusion_does_not_depend_on_list_order(
            a in proptest::collection::vec(0u8..30, 0..20),
            b in proptest::collection::vec(0u8..30, 0..20),
            wa in 0.0f64..3.0,
            wb in 0.0f64..3.0,
        ) {
            let ab = [RankedList { weight: wa, keys: &a[..] }, RankedList { weight: wb, keys: &b[..] }];
            let ba = [RankedList { weight: wb, keys: &b[..] }, RankedList { weight: wa, keys: &a[..] }];
            let x: Vec<u8> = reciprocal_rank_fusion(&ab, 60.0).into_iter().map(|f| f.key).collect();
            let y: Vec<u8> = reciprocal_rank_fusion(&ba, 60.0).into_iter().map(|f| f.key).collect();
            prop_assert_eq!(x, y);
        }

        #[test]
        fn raising_an_item_in_one_list_never_lowers_its_score(
            keys in proptest::collection::hash_set(0u8..50, 2..20),
            pick in 1usize..19,
        ) {
            let list: Vec<u8> = keys.into_iter().collect();
            let pick = pick % list.len();
            prop_assume!(pick > 0);
            let target = list[pick];
            let mut raised = list.clone();
            raised.swap(pick, pick - 1);
            let before = reciprocal_rank_fusion(&[RankedList { weight: 1.0, keys: &list[..] }], 60.0);
            let after = reciprocal_rank_fusion(&[RankedList { weight: 1.0, keys: &raised[..] }], 60.0);
            let score = |v: &[FusedItem<u8>]| v.iter().find(|f| f.key == target).unwrap().score;
            prop_assert!(score(&after) > score(&before));
        }
    }
}
