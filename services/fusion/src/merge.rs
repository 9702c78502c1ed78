//! Merging one retriever's ranked lists from several shards into one list.

use std::collections::HashSet;

use agentsearch_common::shard::{Hit, hit_order};

/// Merges per-shard lists of one retriever: all hits ordered by [`hit_order`] (score descending,
/// name ascending), a name seen twice (a replica answered too) kept once at its best position,
/// truncated to `limit`. Scores must be comparable across lists: shards score BM25 against the
/// same global statistics, and cosine similarity is comparable as is.
pub fn merge_ranked(lists: Vec<Vec<Hit>>, limit: usize) -> Vec<Hit> {
    let mut all: Vec<Hit> = lists.into_iter().flatten().collect();
    all.sort_by(hit_order);
    let mut seen = HashSet::with_capacity(all.len());
    all.retain(|hit| seen.insert(hit.name.clone()));
    all.truncate(limit);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hit(name: &str, score: f32) -> Hit {
        Hit {
            name: name.into(),
            integration: "x".into(),
            score,
        }
    }

    #[test]
    fn merges_by_score_then_name_and_truncates() {
        let merged = merge_ranked(
            vec![
                vec![hit("b", 3.0), hit("d", 1.0)],
                vec![hit("a", 3.0), hit("c", 2.0), hit("b", 0.5)],
            ],
            3,
        );
        let names: Vec<&str> = merged.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(merged[1].score, 3.0);
    }

    proptest! {
        #[test]
        fn merging_is_independent_of_how_hits_are_split_across_shards(
            hits in proptest::collection::vec((0u8..40, 0u16..1000), 0..60),
            split in proptest::collection::vec(0usize..3, 60),
            limit in 1usize..70,
        ) {
            let hits: Vec<Hit> = hits.into_iter().map(|(n, s)| hit(&format!("t{n}"), s as f32 / 10.0)).collect();
            let mut parts = vec![Vec::new(), Vec::new(), Vec::new()];
            for (i, h) in hits.iter().enumerate() {
                parts[split[i]].push(h.clone());
            }
            let one = merge_ranked(vec![hits.clone()], limit);
            let many = merge_ranked(parts, limit);
            prop_assert_eq!(&one, &many);
            prop_assert!(one.len() <= limit);
            let names: HashSet<&str> = one.iter().map(|h| h.name.as_str()).collect();
            prop_assert_eq!(names.len(), one.len());
        }
    }
}
