//! Shard-side search over many small per-integration indexes (the shape of a real catalog):
//! 100 integrations x 50 tools, 384-d vectors, with and without a side-effect ceiling, through
//! the project's search view and (`_each`) index by index, plus the BM25 statistics pass the router runs before a multi-shard search; and a search of 500 tools
//! carried inline (indexed in memory for the request); and context search over one sync of 20,000
//! passages, plain and typed (a folder prefix, a date range), each record readable by a tenth of
//! the callers; and the dense retriever of one sync of 100,000 passages clustered around topics
//! (as the load driver's context set is), half of them readable by the caller, exact and probed
//! (with the recall of the probed search against the exact one printed, for the sync as clustered
//! while written and as clustered again when rebuilt).

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::{
    ContextSearchRequest, FieldData, FieldValue, IndexedRecord, IndexedSegment, IndexedTool,
    InlineSearchRequest, SegmentUpsertRequest, ShardSearchRequest, SyncScope, TermStatsRequest,
};
use agentsearch_common::splitmix::SplitMix64;
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_index::{DenseConfig, MAX_INLINE_TOOLS, SegmentIndex, SegmentIndexes, ToolIndexes};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const PROJECT: &str = "00000000-0000-4000-8000-000000000001";
const WORDS: &[&str] = &[
    "invoice", "customer", "message", "channel", "file", "folder", "event", "issue", "order",
    "payment", "report", "task", "project", "comment", "lead", "account", "campaign", "user",
    "team", "document", "record", "quote",
];
const VERBS: &[&str] = &[
    "list", "get", "create", "update", "delete", "send", "search", "archive",
];

fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut v: Vec<f32> = (0..384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter_mut().for_each(|a| *a /= norm);
    v
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let integrations: Vec<String> = (0..100).map(|i| format!("app{i}")).collect();
    let mut seed = 0u64;
    // Five write batches per integration, as a catalog loaded in several calls produces.
    for round in 0..5 {
        for integration in &integrations {
            let index = indexes.get_or_create(PROJECT, integration).unwrap();
            let tools = (0..10)
                .map(|j| {
                    seed += 1;
                    let verb = VERBS[(seed as usize) % VERBS.len()];
                    let word = WORDS[(seed as usize * 7) % WORDS.len()];
                    IndexedTool {
                        record: ToolRecord {
                            name: format!("{}_{verb}_{word}_{round}_{j}", integration.to_uppercase()),
                            integration: integration.clone(),
                            category: "general".into(),
                            side_effect: SideEffect::ALL[(seed as usize) % 5],
                            description: format!("{verb} a {word} in {integration} with its owner and status."),
                            parameters: r#"{"type":"object","properties":{"id":{"type":"string","description":"record id"}}}"#.into(),
                            tokens: 60,
                        },
                        vector: vector(seed),
                    }
                })
                .collect();
            index.upsert(tools).unwrap();
        }
    }
    // The project's search view, as a shard has it once a search found it out of date.
    indexes.build_views();
    assert!(indexes.has_current_view(PROJECT));
    let query = "send the invoice to a customer";
    let stats = indexes
        .term_stats(&TermStatsRequest {
            project_id: PROJECT.into(),
            integrations: integrations.clone(),
            query: query.into(),
        })
        .unwrap();
    let request = ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: integrations.clone(),
        query: query.into(),
        vector: Some(vector(7)),
        categories: vec![],
        max_side_effect: None,
        limit: 50,
        lexical: true,
        stats: Some(stats),
        structured: None,
    };
    c.bench_function("shard_search_100x50_hybrid", |b| {
        b.iter(|| indexes.search(&request))
    });
    let ceiling = ShardSearchRequest {
        records: None,
        max_side_effect: Some(SideEffect::Write),
        ..request.clone()
    };
    c.bench_function("shard_search_100x50_hybrid_ceiling", |b| {
        b.iter(|| indexes.search(&ceiling))
    });
    let lexical = ShardSearchRequest {
        records: None,
        vector: None,
        ..request.clone()
    };
    c.bench_function("shard_search_100x50_lexical", |b| {
        b.iter(|| indexes.search(&lexical))
    });
    let dense = ShardSearchRequest {
        records: None,
        lexical: false,
        ..request.clone()
    };
    c.bench_function("shard_search_100x50_dense", |b| {
        b.iter(|| indexes.search(&dense))
    });
    // The same searches of the indexes one by one (what a search does while the view is rebuilt
    // after a write; typed queries always do).
    for (name, request) in [
        ("hybrid", &request),
        ("hybrid_ceiling", &ceiling),
        ("lexical", &lexical),
        ("dense", &dense),
    ] {
        c.bench_function(&format!("shard_search_100x50_{name}_each"), |b| {
            b.iter(|| indexes.search_each(request))
        });
    }
    // Typed queries: the same words restricted by a filter on the side effect (every index
    // evaluates it on tantivy), and a phrase with no words (ranked by the node alone).
    let filtered = ShardSearchRequest {
        records: None,
        structured: Some(
            r#"{"v":1,"filter":{"type":"term","field":"sideEffect","value":"send"}}"#.into(),
        ),
        ..request.clone()
    };
    c.bench_function("shard_search_100x50_hybrid_typed_filter", |b| {
        b.iter(|| indexes.search(&filtered))
    });
    let phrase = ShardSearchRequest {
        records: None,
        query: String::new(),
        vector: None,
        stats: None,
        structured: Some(
            r#"{"v":1,"query":{"type":"phrase","field":"description","terms":["send","a","invoice"]}}"#
                .into(),
        ),
        ..request.clone()
    };
    c.bench_function("shard_search_100x50_typed_phrase_only", |b| {
        b.iter(|| indexes.search(&phrase))
    });
    c.bench_function("shard_term_stats_100", |b| {
        b.iter(|| {
            indexes.term_stats(&TermStatsRequest {
                project_id: PROJECT.into(),
                integrations: integrations.clone(),
                query: query.into(),
            })
        })
    });
}

fn bench_inline(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let tools: Vec<IndexedTool> = (0..MAX_INLINE_TOOLS as u64)
        .map(|seed| {
            let verb = VERBS[(seed as usize) % VERBS.len()];
            let word = WORDS[(seed as usize * 7) % WORDS.len()];
            IndexedTool {
                record: ToolRecord {
                    name: format!("CUSTOM_{verb}_{word}_{seed}").to_uppercase(),
                    integration: "custom".into(),
                    category: "general".into(),
                    side_effect: SideEffect::ALL[(seed as usize) % 5],
                    description: format!("{verb} a {word} with its owner and status."),
                    parameters: r#"{"type":"object","properties":{"id":{"type":"string","description":"record id"}}}"#.into(),
                    tokens: 60,
                },
                vector: vector(seed),
            }
        })
        .collect();
    let request = InlineSearchRequest {
        project_id: PROJECT.into(),
        tools,
        query: "send the invoice to a customer".into(),
        vector: Some(vector(7)),
        categories: vec![],
        max_side_effect: None,
        limit: 50,
        lexical: true,
        stats: None,
    };
    c.bench_function("shard_search_inline_500_hybrid", |b| {
        b.iter_batched(
            || request.clone(),
            |request| indexes.search_inline(request).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

fn bench_context(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let indexes = SegmentIndexes::open(
        dir.path(),
        agentsearch_common::config::ContextConfig::default(),
    )
    .unwrap();
    let sync = "sync-bench";
    let day = 86_400_000i64;
    // 5,000 records of 4 passages; record r lives in folder r % 20, was modified r % 400 days
    // after 2025-01-01, and is readable by the group r % 10.
    for batch in 0..50 {
        let records: Vec<IndexedRecord> = (0..100)
            .map(|i| {
                let r = batch * 100 + i;
                IndexedRecord {
                    record_id: format!("doc-{r}"),
                    display_name: Some(format!("{} notes {r}", WORDS[r % WORDS.len()])),
                    generation: 1,
                    principals: vec![format!("group:g{}", r % 10)],
                    segments: (0..4)
                        .map(|o| {
                            let seed = (r * 4 + o) as u64;
                            IndexedSegment {
                                ordinal: o as u32,
                                text: format!(
                                    "{} the {} of the {} and the {} for {}.",
                                    VERBS[seed as usize % VERBS.len()],
                                    WORDS[(seed as usize * 7) % WORDS.len()],
                                    WORDS[(seed as usize * 11) % WORDS.len()],
                                    WORDS[(seed as usize * 13) % WORDS.len()],
                                    WORDS[(seed as usize * 17) % WORDS.len()],
                                ),
                                vector: vector(seed + 1_000_000),
                            }
                        })
                        .collect(),
                    fields: vec![
                        FieldValue {
                            name: "path".into(),
                            value: FieldData::Keyword(format!("/team{}/docs", r % 20)),
                        },
                        FieldValue {
                            name: "modifiedAt".into(),
                            value: FieldData::Date(20_089 * day + (r as i64 % 400) * day),
                        },
                    ],
                }
            })
            .collect();
        indexes
            .upsert(&SegmentUpsertRequest {
                project_id: PROJECT.into(),
                sync_id: sync.into(),
                records,
                fields: Vec::new(),
            })
            .unwrap();
    }
    let request = ContextSearchRequest {
        project_id: PROJECT.into(),
        syncs: vec![SyncScope {
            sync_id: sync.into(),
            principals: vec!["group:g3".into(), "anyone".into()],
            source: "googledrive".into(),
        }],
        query: "send the invoice report".into(),
        vector: Some(vector(7)),
        limit: 100,
        lexical: true,
        stats: None,
        structured: None,
        fields: Vec::new(),
        // As the router asks: the texts of the passages it returns are fetched after fusion,
        // but for the first three of each list (adaptive fusion reads them).
        defer_texts: true,
        texts_head: 3,
    };
    c.bench_function("context_search_20k_hybrid", |b| {
        b.iter(|| indexes.search(&request))
    });
    let folder = ContextSearchRequest {
        structured: Some(
            r#"{"v":1,"filter":{"type":"prefix","field":"path","value":"/team3/"}}"#.into(),
        ),
        ..request.clone()
    };
    c.bench_function("context_search_20k_hybrid_typed_folder", |b| {
        b.iter(|| indexes.search(&folder))
    });
    let recent = ContextSearchRequest {
        structured: Some(
            r#"{"v":1,"filter":{"type":"range","field":"modifiedAt","gte":"2026-01-01"},"countExactly":true}"#
                .into(),
        ),
        ..request.clone()
    };
    c.bench_function("context_search_20k_hybrid_typed_date_count", |b| {
        b.iter(|| indexes.search(&recent))
    });
    let nodes_only = ContextSearchRequest {
        query: String::new(),
        vector: None,
        structured: Some(
            r#"{"v":1,"query":{"type":"term","field":"text","value":"invoice"},"filter":{"type":"prefix","field":"path","value":"/team3/"}}"#
                .into(),
        ),
        ..request.clone()
    };
    c.bench_function("context_search_20k_typed_nodes_only", |b| {
        b.iter(|| indexes.search(&nodes_only))
    });
}

fn normalised(v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.into_iter().map(|a| a / norm).collect()
}

/// 100,000 passages of 20,000 records, each vector a random one of 256 topic centroids plus noise
/// (normalised), as `agentsearch-load --scenario context` makes them; every other record readable
/// by the caller; queries in random directions.
fn bench_context_dense(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix64(42);
    let mut gaussian = |sd: f64| -> Vec<f32> {
        (0..384)
            .map(|_| {
                let (u, w) = (rng.unit().max(1e-300), rng.unit());
                (sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * w).cos()) as f32
            })
            .collect()
    };
    let topics: Vec<Vec<f32>> = (0..256).map(|_| normalised(gaussian(1.0))).collect();
    let mut segment = |r: usize| -> Vec<f32> {
        let topic = &topics[(r * 2_654_435_761) % 256];
        let noise = gaussian(0.06);
        normalised(topic.iter().zip(&noise).map(|(t, e)| t + e).collect())
    };
    {
        let index = SegmentIndex::open_with(dir.path(), "s", &[], DenseConfig::default()).unwrap();
        for batch in 0..100 {
            let records: Vec<IndexedRecord> = (0..200)
                .map(|i| {
                    let r = batch * 200 + i;
                    IndexedRecord {
                        record_id: format!("doc-{r}"),
                        display_name: None,
                        generation: 1,
                        principals: vec![format!("group:g{}", r % 2)],
                        segments: (0..5)
                            .map(|o| IndexedSegment {
                                ordinal: o as u32,
                                text: WORDS[(r + o) % WORDS.len()].into(),
                                vector: segment(r),
                            })
                            .collect(),
                        fields: Vec::new(),
                    }
                })
                .collect();
            index.upsert(&records).unwrap();
        }
        index.flush_vectors().unwrap();
    }
    let probed = SegmentIndex::open_with(dir.path(), "s", &[], DenseConfig::default()).unwrap();
    let exact = SegmentIndex::open_with(
        dir.path(),
        "s",
        &[],
        DenseConfig {
            approximate_above: usize::MAX,
            ..DenseConfig::default()
        },
    )
    .unwrap();
    let caller = vec!["group:g1".to_string()];
    let mut rng = SplitMix64(7);
    let queries: Vec<Vec<f32>> = (0..50)
        .map(|_| normalised((0..384).map(|_| rng.unit() as f32 - 0.5).collect()))
        .collect();
    // The ids of an index's best 100 for each query.
    let best_ids = |index: &SegmentIndex| -> Vec<Vec<u64>> {
        queries
            .iter()
            .map(|query| {
                let hits = index.search_dense(query, &caller, 100).unwrap();
                hits.iter().map(|c| c.vector_id).collect()
            })
            .collect()
    };
    let truth = best_ids(&exact);
    // Recall against the exact search and the mean time per query, by lists probed: clustered
    // as written (at 51,000 segments), then as clustered when rebuilt from the stored vectors
    // (at 100,000).
    let sweep = |label: &str| {
        for probes in [32, 48, 64, 80, 96, 112, 128, 160] {
            let index = SegmentIndex::open_with(
                dir.path(),
                "s",
                &[],
                DenseConfig {
                    probes,
                    ..DenseConfig::default()
                },
            )
            .unwrap();
            let started = std::time::Instant::now();
            let found = best_ids(&index);
            let per_query = started.elapsed().as_secs_f64() * 1e3 / queries.len() as f64;
            let recall = |at: usize| {
                let hit: usize = found
                    .iter()
                    .zip(&truth)
                    .map(|(f, t)| f.iter().take(at).filter(|id| t[..at].contains(id)).count())
                    .sum();
                hit as f64 / (at * queries.len()) as f64
            };
            eprintln!(
                "context_dense_100k ({label}): {} lists, {probes} probed: recall@10 {:.3}, recall@100 {:.3}, {per_query:.2} ms per query",
                index.dense_lists(),
                recall(10),
                recall(100),
            );
        }
    };
    sweep("clustered as written");
    let mut next = 0;
    c.bench_function("context_dense_100k_exact", |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            exact.search_dense(&queries[next], &caller, 100).unwrap()
        })
    });
    c.bench_function("context_dense_100k_probed", |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            probed.search_dense(&queries[next], &caller, 100).unwrap()
        })
    });
    drop((probed, exact));
    std::fs::remove_file(dir.path().join("vectors.json")).unwrap();
    drop(SegmentIndex::open_with(dir.path(), "s", &[], DenseConfig::default()).unwrap());
    sweep("clustered when rebuilt");
}

criterion_group!(
    benches,
    bench,
    bench_inline,
    bench_context,
    bench_context_dense
);
criterion_main!(benches);
