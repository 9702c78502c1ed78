//! Rendezvous (highest random weight) hashing: which shards hold an integration.
//!
//! Every (key, shard) pair gets a pseudo-random weight; a key lives on the `replicas` shards of
//! highest weight. Adding or removing a shard moves only the keys whose top shards changed, and
//! every router computes the same answer without coordination. The answer is recorded in the
//! metadata store at first write, so later changes to the shard set never move existing data
//! implicitly.

/// The `replicas` shards (at most all of them) of highest weight for `key`, best first.
pub fn rendezvous(key: &str, shard_ids: &[String], replicas: usize) -> Vec<String> {
    let mut weighted: Vec<(u64, &String)> = shard_ids.iter().map(|s| (weight(key, s), s)).collect();
    weighted.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    weighted.dedup_by(|a, b| a.1 == b.1);
    weighted
        .into_iter()
        .take(replicas)
        .map(|(_, s)| s.clone())
        .collect()
}

fn weight(key: &str, shard: &str) -> u64 {
    // FNV-1a over key, a separator and the shard id, then SplitMix64's finaliser so that similar
    // inputs spread evenly.
    use agentsearch_common::{hash::fnv1a, splitmix::mix};
    mix(fnv1a(
        key.bytes()
            .chain(std::iter::once(0xff))
            .chain(shard.bytes()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shards(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("shard-{i}")).collect()
    }

    /// Placement is persisted by where data lives: the weight must stay what it has been (FNV-1a,
    /// then SplitMix64's finaliser, written out here as it was first written).
    #[test]
    fn weights_are_unchanged() {
        fn reference(key: &str, shard: &str) -> u64 {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in key
                .bytes()
                .chain(std::iter::once(0xff))
                .chain(shard.bytes())
            {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            h ^= h >> 30;
            h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 27;
            h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^ (h >> 31)
        }
        for (key, shard) in [("", ""), ("proj/slack", "shard-0"), ("p/ü", "shard-abc")] {
            assert_eq!(weight(key, shard), reference(key, shard));
        }
    }

    #[test]
    fn spreads_keys_evenly() {
        let ids = shards(3);
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            let owner = &rendezvous(&format!("project/integration-{i}"), &ids, 1)[0];
            counts[ids.iter().position(|s| s == owner).unwrap()] += 1;
        }
        for c in counts {
            assert!((800..1200).contains(&c), "{counts:?}");
        }
    }

    proptest! {
        #[test]
        fn replicas_are_distinct_and_bounded(key in "[a-z/]{1,20}", n in 1usize..8, r in 1usize..5) {
            let placed = rendezvous(&key, &shards(n), r);
            prop_assert_eq!(placed.len(), r.min(n));
            let mut unique = placed.clone();
            unique.sort();
            unique.dedup();
            prop_assert_eq!(unique.len(), placed.len());
        }

        #[test]
        fn order_of_the_shard_list_does_not_matter(key in "[a-z]{1,12}", n in 1usize..8, seed in 0usize..100) {
            let ids = shards(n);
            let mut rotated = ids.clone();
            rotated.rotate_left(seed % n);
            prop_assert_eq!(rendezvous(&key, &ids, 2), rendezvous(&key, &rotated, 2));
        }

        #[test]
        fn removing_a_shard_moves_only_its_keys(keys in proptest::collection::vec("[a-z]{1,12}", 1..50), n in 2usize..8, gone in 0usize..8) {
            let ids = shards(n);
            let gone = gone % n;
            let fewer: Vec<String> = ids.iter().enumerate().filter(|(i, _)| *i != gone).map(|(_, s)| s.clone()).collect();
            for key in keys {
                let before = &rendezvous(&key, &ids, 1)[0];
                let after = &rendezvous(&key, &fewer, 1)[0];
                if *before != ids[gone] {
                    prop_assert_eq!(before, after);
                }
            }
        }
    }
}
