//! The router's per-query fusion work: merging 3 shards' lists per retriever, RRF of two 50-item
//! lists, and packing 100 candidates under a budget.

use agentsearch_common::shard::Hit;
use agentsearch_fusion::{RankedList, merge_ranked, pack, reciprocal_rank_fusion};
use criterion::{Criterion, criterion_group, criterion_main};

fn lists(offset: usize) -> Vec<Vec<Hit>> {
    (0..3)
        .map(|shard| {
            (0..50)
                .map(|i| Hit {
                    name: format!("TOOL_{}", (i * 7 + shard * 13 + offset) % 400),
                    integration: format!("app{shard}"),
                    score: 100.0 - i as f32 - shard as f32 * 0.1,
                })
                .collect()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let lexical = lists(0);
    let dense = lists(5);
    c.bench_function("merge_3x50", |b| {
        b.iter(|| merge_ranked(lexical.clone(), 50))
    });
    let l = merge_ranked(lexical.clone(), 50);
    let d = merge_ranked(dense.clone(), 50);
    let lk: Vec<&str> = l.iter().map(|h| h.name.as_str()).collect();
    let dk: Vec<&str> = d.iter().map(|h| h.name.as_str()).collect();
    c.bench_function("rrf_2x50", |b| {
        b.iter(|| {
            reciprocal_rank_fusion(
                &[
                    RankedList {
                        weight: 1.0,
                        keys: &lk[..],
                    },
                    RankedList {
                        weight: 1.0,
                        keys: &dk[..],
                    },
                ],
                60.0,
            )
        })
    });
    let tokens: Vec<u32> = (0..100).map(|i| 80 + (i * 37) % 900).collect();
    c.bench_function("pack_100_budget", |b| {
        b.iter(|| pack(&tokens, 50, Some(4000)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
