//! Score-aware fusion: a weighted mean of each retriever's standardised scores.
//!
//! Each retriever's candidate scores (BM25, cosine similarity) are standardised over that
//! retriever's candidate list: `z = (score - mean) / standard deviation`. An item a retriever did not
//! return gets the lowest `z` of that list (its score there is at most the last candidate's). The
//! fused score is `sum(weight * z) / sum(weight)` over the lists.
//!
//! Unlike reciprocal rank fusion, the margin between candidates counts: a retriever with one
//! candidate far above the rest (an exact phrase, a near-paraphrase) moves it up more than a
//! retriever whose candidates all score alike, which votes for its first place as strongly under
//! RRF as if it were sure. Standardising per query and per retriever puts BM25 (unbounded, scaled
//! by idf) and cosine similarity on one scale without calibration (Bruch, Gai and Ingber, "An
//! Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023, compare such normalisations with
//! RRF).
//!
//! Ties are broken by the best rank in any list, then by key, so equal inputs always give the same
//! order.

use std::collections::HashMap;
use std::hash::Hash;

use crate::rrf::{FusedItem, sort_fused};

/// One retriever's candidates, best first, with their scores, and the list's weight.
#[derive(Clone, Debug)]
pub struct ScoredList<'a, K> {
    pub weight: f64,
    pub hits: &'a [(K, f64)],
}

/// Fused items, best first, and the lowest fused score any item can get (every list's floor):
/// relevancies are scaled between it and the best item's score.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreFusion<K> {
    pub items: Vec<FusedItem<K>>,
    pub floor: f64,
}

/// Standardised scores of one list, by position, and their minimum.
fn standardise(hits: &[(impl Sized, f64)]) -> (Vec<f64>, f64) {
    let n = hits.len() as f64;
    let mean = hits.iter().map(|(_, s)| s).sum::<f64>() / n;
    let var = hits
        .iter()
        .map(|(_, s)| (s - mean) * (s - mean))
        .sum::<f64>()
        / n;
    let sd = var.sqrt();
    let sd = if sd.is_finite() && sd > 1e-12 {
        sd
    } else {
        1.0
    };
    let z: Vec<f64> = hits.iter().map(|(_, s)| (s - mean) / sd).collect();
    let floor = z.iter().copied().fold(f64::INFINITY, f64::min);
    (z, floor)
}

/// Fuses scored lists. Lists with no hits or a weight of 0 take no part. `FusedItem::ranks` are
/// 1-based positions in each input list; a key repeated inside a list counts at its first position.
pub fn score_fusion<K>(lists: &[ScoredList<'_, K>]) -> ScoreFusion<K>
where
    K: Clone + Eq + Hash + Ord,
{
    let mut items: Vec<FusedItem<K>> = Vec::new();
    let mut index: HashMap<&K, usize> = HashMap::new();
    // Per taking part list: its number, weight, standardised scores by position and floor.
    let mut standardised = Vec::new();
    for (list_no, list) in lists.iter().enumerate() {
        if list.hits.is_empty() || list.weight <= 0.0 {
            continue;
        }
        let (z, floor) = standardise(list.hits);
        standardised.push((list_no, list.weight, z, floor));
        for (pos, (key, _)) in list.hits.iter().enumerate() {
            let slot = *index.entry(key).or_insert_with(|| {
                items.push(FusedItem {
                    key: key.clone(),
                    score: 0.0,
                    ranks: vec![None; lists.len()],
                });
                items.len() - 1
            });
            items[slot].ranks[list_no].get_or_insert(pos + 1);
        }
    }
    let total: f64 = standardised.iter().map(|(_, w, _, _)| w).sum();
    let mean = |z_of: &dyn Fn(usize, &[f64], f64) -> f64| {
        standardised
            .iter()
            .map(|(list_no, w, z, floor)| w * z_of(*list_no, z, *floor))
            .sum::<f64>()
            / total
    };
    if total <= 0.0 {
        return ScoreFusion { items, floor: 0.0 };
    }
    for item in &mut items {
        item.score = mean(&|list_no, z, floor| item.ranks[list_no].map_or(floor, |r| z[r - 1]));
    }
    sort_fused(&mut items);
    ScoreFusion {
        items,
        floor: mean(&|_, _, floor| floor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fuse(lists: &[(f64, Vec<(&'static str, f64)>)]) -> Vec<(String, f64)> {
        let lists: Vec<ScoredList<'_, &str>> = lists
            .iter()
            .map(|(w, hits)| ScoredList {
                weight: *w,
                hits: hits.as_slice(),
            })
            .collect();
        score_fusion(&lists)
            .items
            .into_iter()
            .map(|f| (f.key.to_string(), f.score))
            .collect()
    }

    #[test]
    fn exact_scores_for_two_lists() {
        // list 1: scores 3, 1 -> mean 2, sd 1 -> z = 1, -1 (floor -1)
        // list 2: scores 0.9, 0.5, 0.1 -> mean 0.5, sd sqrt(0.32/3) -> z = 1.2247, 0, -1.2247
        let fused = fuse(&[
            (1.0, vec![("a", 3.0), ("b", 1.0)]),
            (1.0, vec![("c", 0.9), ("a", 0.5), ("d", 0.1)]),
        ]);
        let z = 0.4 / (0.32f64 / 3.0).sqrt();
        let expected = [
            ("a", (1.0 + 0.0) / 2.0),
            ("c", (-1.0 + z) / 2.0),
            ("b", (-1.0 - z) / 2.0),
            ("d", (-1.0 - z) / 2.0),
        ];
        assert_eq!(fused.len(), 4);
        for ((key, score), (ekey, escore)) in fused.iter().zip(expected) {
            assert_eq!(key, ekey);
            assert!((score - escore).abs() < 1e-12, "{key}: {score} vs {escore}");
        }
    }

    #[test]
    fn a_clear_winner_in_one_list_beats_a_flat_first_place_in_the_other() {
        // Lexical is sure about x; dense barely prefers y. RRF would tie them.
        let fused = fuse(&[
            (1.0, vec![("x", 20.0), ("p", 2.0), ("q", 1.9), ("y", 1.8)]),
            (
                1.0,
                vec![("y", 0.61), ("x", 0.60), ("r", 0.59), ("s", 0.58)],
            ),
        ]);
        assert_eq!(fused[0].0, "x");
    }

    #[test]
    fn a_single_list_keeps_its_order_and_empty_lists_are_ignored() {
        let fused = fuse(&[
            (1.0, vec![("a", 5.0), ("b", 4.0), ("c", 4.0)]),
            (1.0, vec![]),
        ]);
        let keys: Vec<&str> = fused.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert!(fuse(&[]).is_empty());
        // One hit: standard deviation 0 -> z 0.
        assert_eq!(
            fuse(&[(1.0, vec![("a", 7.0)])]),
            vec![("a".to_string(), 0.0)]
        );
    }

    #[test]
    fn the_floor_bounds_every_score() {
        let a = [("a", 3.0), ("b", 1.0)];
        let b = [("c", 0.9), ("a", 0.5), ("d", 0.1)];
        let lists = [
            ScoredList {
                weight: 1.0,
                hits: &a[..],
            },
            ScoredList {
                weight: 2.0,
                hits: &b[..],
            },
        ];
        let fused = score_fusion(&lists);
        assert!(fused.items.iter().all(|i| i.score >= fused.floor - 1e-12));
        // Weighted floors: (1 x -1 + 2 x -1.2247) / 3.
        let z = 0.4 / (0.32f64 / 3.0).sqrt();
        assert!((fused.floor - (-1.0 - 2.0 * z) / 3.0).abs() < 1e-12);
    }

    /// Two lists of distinct keys with scores, best first: a BM25-like one and a cosine-like one.
    fn two_lists(min: usize) -> impl Strategy<Value = (Vec<(u8, f64)>, Vec<(u8, f64)>)> {
        use proptest::collection::{hash_set, vec};
        let scored = |keys: std::collections::HashSet<u8>, scores: Vec<f64>| {
            let mut hits: Vec<(u8, f64)> = keys.into_iter().zip(scores).collect();
            hits.sort_by(|a, b| b.1.total_cmp(&a.1));
            hits
        };
        (
            hash_set(0u8..30, min..20),
            hash_set(0u8..30, min..20),
            vec(0.0f64..30.0, 20),
            vec(-1.0f64..1.0, 20),
        )
            .prop_map(move |(ka, kb, sa, sb)| (scored(ka, sa), scored(kb, sb)))
    }

    proptest! {
        #[test]
        fn fused_set_is_the_union_and_scores_are_sorted((a, b) in two_lists(0), wa in 0.1f64..3.0) {
            let lists = [ScoredList { weight: wa, hits: &a[..] }, ScoredList { weight: 1.0, hits: &b[..] }];
            let ScoreFusion { items: fused, floor } = score_fusion(&lists);
            let mut union: Vec<u8> = a.iter().chain(b.iter()).map(|h| h.0).collect();
            union.sort();
            union.dedup();
            let mut keys: Vec<u8> = fused.iter().map(|f| f.key).collect();
            keys.sort();
            prop_assert_eq!(keys, union);
            for w in fused.windows(2) {
                prop_assert!(w[0].score >= w[1].score);
            }
            for f in &fused {
                prop_assert!(f.score >= floor - 1e-9);
            }
        }

        #[test]
        fn an_item_ahead_in_every_list_is_ahead_when_fused((a, b) in two_lists(2)) {
            let lists = [ScoredList { weight: 1.0, hits: &a[..] }, ScoredList { weight: 1.5, hits: &b[..] }];
            let fused = score_fusion(&lists).items;
            let score_in = |hits: &[(u8, f64)], key: u8| {
                hits.iter().find(|h| h.0 == key).map(|h| h.1)
            };
            // x dominates y when x scores at least as high in each list, counting absence as the
            // list's minimum.
            let dominates = |x: u8, y: u8| {
                [&a, &b].iter().all(|hits| {
                    let low = hits.last().map_or(0.0, |h| h.1);
                    score_in(hits, x).unwrap_or(low) >= score_in(hits, y).unwrap_or(low)
                })
            };
            for fx in &fused {
                for fy in &fused {
                    if fx.key != fy.key && dominates(fx.key, fy.key) {
                        prop_assert!(fx.score >= fy.score - 1e-12);
                    }
                }
            }
        }

        #[test]
        fn fusion_does_not_depend_on_list_order((a, b) in two_lists(0)) {
            let ab = [ScoredList { weight: 1.0, hits: &a[..] }, ScoredList { weight: 2.0, hits: &b[..] }];
            let ba = [ScoredList { weight: 2.0, hits: &b[..] }, ScoredList { weight: 1.0, hits: &a[..] }];
            let x: Vec<u8> = score_fusion(&ab).items.into_iter().map(|f| f.key).collect();
            let y: Vec<u8> = score_fusion(&ba).items.into_iter().map(|f| f.key).collect();
            prop_assert_eq!(x, y);
        }
    }
}
