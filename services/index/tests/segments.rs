//! Segment indexes of context search: written, replaced, deleted, reopened from disk (a stale
//! vector snapshot repaired), read around a segment, and searched under principal visibility: a
//! property test compares both retrievers with a brute-force ranking over the visible segments.

use std::collections::{BTreeMap, HashSet};

use agentsearch_common::config::ContextConfig;
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, IndexedRecord,
    IndexedSegment, ReadSegmentsRequest, RecordDeleteRequest, SegmentFetchRequest, SegmentHit,
    SegmentRef, SegmentUpsertRequest, SyncScope, TermStats, segment_hit_order,
};
use agentsearch_index::analyzer::{analyze, text_analyzer};
use agentsearch_index::{IndexError, SegmentIndexes};
use proptest::prelude::*;
use tantivy::tokenizer::TokenStream;

const PROJECT: &str = "00000000-0000-4000-8000-000000000001";
const DIM: usize = 8;

/// A unit vector with four components of +-0.5: every inner product is a multiple of 0.25, exact
/// in f32, so ties are real and orders comparable exactly.
fn unit(combination: usize, signs: u8) -> Vec<f32> {
    let mut combos = Vec::new();
    for a in 0..DIM {
        for b in a + 1..DIM {
            for c in b + 1..DIM {
                for d in c + 1..DIM {
                    combos.push([a, b, c, d]);
                }
            }
        }
    }
    let mut v = vec![0.0f32; DIM];
    for (i, &axis) in combos[combination % combos.len()].iter().enumerate() {
        v[axis] = if signs >> i & 1 == 1 { -0.5 } else { 0.5 };
    }
    v
}

/// The vector of segment `ordinal` of record `id` in the hand-written tests (distinct for the
/// records used there).
fn seg_vector(id: &str, ordinal: usize) -> Vec<f32> {
    let offset: usize = id.bytes().map(usize::from).sum();
    unit(3 * offset + ordinal, 0)
}

fn record(id: &str, name: Option<&str>, principals: &[&str], texts: &[&str]) -> IndexedRecord {
    IndexedRecord {
        record_id: id.into(),
        display_name: name.map(str::to_string),
        generation: 1,
        principals: principals.iter().map(|p| p.to_string()).collect(),
        segments: texts
            .iter()
            .enumerate()
            .map(|(i, t)| IndexedSegment {
                ordinal: i as u32,
                text: t.to_string(),
                vector: seg_vector(id, i),
            })
            .collect(),
        fields: Vec::new(),
    }
}

fn upsert(indexes: &SegmentIndexes, sync: &str, records: Vec<IndexedRecord>) -> (u64, u64) {
    indexes
        .upsert(&SegmentUpsertRequest {
            project_id: PROJECT.into(),
            sync_id: sync.into(),
            records,
            fields: Vec::new(),
        })
        .unwrap()
}

fn search(
    indexes: &SegmentIndexes,
    scopes: &[(&str, &[&str])],
    query: &str,
    vector: Option<Vec<f32>>,
    limit: u32,
) -> ContextSearchResponse {
    let response = indexes.search(&ContextSearchRequest {
        project_id: PROJECT.into(),
        syncs: scopes
            .iter()
            .map(|(sync, principals)| SyncScope {
                sync_id: sync.to_string(),
                principals: principals.iter().map(|p| p.to_string()).collect(),
                source: "googledrive".into(),
            })
            .collect(),
        query: query.into(),
        vector,
        limit,
        lexical: true,
        stats: None,
        structured: None,
        fields: Vec::new(),
        defer_texts: false,
        texts_head: 0,
    });
    assert!(response.failures.is_empty(), "{:?}", response.failures);
    response
}

fn keys(hits: &[SegmentHit]) -> Vec<(String, u32)> {
    hits.iter()
        .map(|h| (h.record_id.clone(), h.ordinal))
        .collect()
}

fn k(record: &str, ordinal: u32) -> (String, u32) {
    (record.to_string(), ordinal)
}

#[test]
fn write_replace_delete_reopen_search() {
    let dir = tempfile::tempdir().unwrap();
    {
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        let (written, generation) = upsert(
            &indexes,
            "sync-1",
            vec![
                record(
                    "doc-a",
                    Some("March revenue report"),
                    &["user:alice@example.com"],
                    &[
                        "Revenue grew in March.",
                        "Costs fell sharply.",
                        "The outlook remains strong.",
                    ],
                ),
                record(
                    "doc-b",
                    None,
                    &["anyone"],
                    &["Lunch menu for March.", "Soup and bread."],
                ),
            ],
        );
        assert_eq!((written, generation), (5, 1));
        upsert(
            &indexes,
            "sync-2",
            vec![record(
                "doc-c",
                Some("Revenue plan"),
                &["group:eng"],
                &["Targets."],
            )],
        );
        assert_eq!(indexes.counts(), (2, 6));

        // Alice sees doc-a and doc-b; the title counts for every segment of a record.
        let alice: &[&str] = &["user:alice@example.com", "anyone"];
        let response = search(
            &indexes,
            &[("sync-1", alice), ("sync-2", alice)],
            "revenue march",
            Some(seg_vector("doc-a", 0)),
            10,
        );
        assert_eq!(response.lexical[0].record_id, "doc-a");
        assert_eq!(response.lexical[0].ordinal, 0);
        assert_eq!(response.lexical_matched, 4);
        assert!(response.lexical.iter().all(|h| h.sync_id == "sync-1"));
        assert_eq!(keys(&response.dense)[0], k("doc-a", 0));
        assert_eq!(response.dense[0].score, 1.0);
        assert_eq!(response.dense.len(), 5);
        let text: BTreeMap<(String, u32), String> = response
            .segments
            .iter()
            .map(|s| ((s.record_id.clone(), s.ordinal), s.text.clone()))
            .collect();
        assert_eq!(text[&k("doc-a", 1)], "Costs fell sharply.");
        assert_eq!(text.len(), 5);
        let doc_a = response
            .records
            .iter()
            .find(|r| r.record_id == "doc-a")
            .unwrap();
        assert_eq!(doc_a.display_name.as_deref(), Some("March revenue report"));
        assert_eq!(doc_a.segments, 3);
        assert_eq!(response.records.len(), 2);

        // Bob sees only doc-b; engineers see doc-c in sync-2.
        let response = search(
            &indexes,
            &[
                ("sync-1", &["user:bob@example.com", "anyone"]),
                ("sync-2", &["group:eng"]),
            ],
            "revenue march",
            Some(seg_vector("doc-a", 0)),
            10,
        );
        let mut lexical = keys(&response.lexical);
        lexical.sort();
        assert_eq!(lexical, [k("doc-b", 0), k("doc-c", 0)]);
        assert_eq!(response.dense.len(), 3);
        assert_eq!(response.lexical_matched, 2);
        assert!(
            response
                .dense
                .iter()
                .chain(&response.lexical)
                .all(|h| h.record_id != "doc-a")
        );
        assert!(response.segments.iter().all(|s| s.record_id != "doc-a"));
        assert!(response.records.iter().all(|r| r.record_id != "doc-a"));

        // Nobody without principals sees anything; unknown syncs are skipped.
        let response = search(
            &indexes,
            &[("sync-1", &[]), ("nope", &["anyone"])],
            "march",
            Some(seg_vector("doc-a", 0)),
            10,
        );
        assert!(response.lexical.is_empty() && response.dense.is_empty());
        assert_eq!(response.lexical_matched, 0);

        // Replace doc-a with one segment: the other two are gone.
        let mut replaced = record(
            "doc-a",
            Some("March revenue report"),
            &["user:alice@example.com"],
            &["Everything was restated."],
        );
        replaced.generation = 2;
        assert_eq!(upsert(&indexes, "sync-1", vec![replaced]), (1, 2));
        assert_eq!(
            indexes.info(PROJECT, "sync-1").unwrap(),
            agentsearch_common::shard::SegmentIndexInfo {
                records: 2,
                segments: 3,
                generation: 2
            }
        );
        let response = search(&indexes, &[("sync-1", alice)], "costs outlook", None, 10);
        assert!(response.lexical.is_empty());
        let response = search(
            &indexes,
            &[("sync-1", alice)],
            "",
            Some(seg_vector("doc-a", 0)),
            10,
        );
        assert_eq!(response.dense.len(), 3);

        // Delete doc-b (an unknown id is ignored).
        let deleted = indexes
            .delete(&RecordDeleteRequest {
                project_id: PROJECT.into(),
                sync_id: "sync-1".into(),
                record_ids: vec!["doc-b".into(), "nope".into()],
            })
            .unwrap();
        assert_eq!(deleted, (1, 3));
    }
    let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
    assert_eq!(indexes.counts(), (2, 2));
    let info = indexes.info(PROJECT, "sync-1").unwrap();
    assert_eq!((info.records, info.segments, info.generation), (1, 1, 3));
    let alice: &[&str] = &["user:alice@example.com", "anyone"];
    let response = search(
        &indexes,
        &[("sync-1", alice)],
        "restated",
        Some(seg_vector("doc-a", 0)),
        10,
    );
    assert_eq!(keys(&response.lexical), [k("doc-a", 0)]);
    assert_eq!(keys(&response.dense), [k("doc-a", 0)]);
    assert_eq!(response.records[0].generation, 2);
    assert_eq!(response.segments[0].text, "Everything was restated.");
}

#[test]
fn stale_vector_snapshot_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        upsert(
            &indexes,
            "sync-1",
            vec![record("doc-a", None, &["anyone"], &["first", "second"])],
        );
    }
    let index_dir = dir.path().join("context").join(PROJECT).join("sync-1");
    let stale_vectors = std::fs::read(index_dir.join("vectors.ivf")).unwrap();
    let stale_meta = std::fs::read(index_dir.join("vectors.json")).unwrap();
    {
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        // Replace doc-a with fewer segments and add doc-bb.
        upsert(
            &indexes,
            "sync-1",
            vec![
                record("doc-a", None, &["anyone"], &["only"]),
                record("doc-bb", None, &["anyone"], &["third"]),
            ],
        );
    }
    let fresh_meta = std::fs::read(index_dir.join("vectors.json")).unwrap();
    // A crash after the lexical commit and before the vector snapshot was replaced; then one
    // where only the vectors' file was not replaced (its own generation gives it away).
    for meta in [stale_meta, fresh_meta] {
        std::fs::write(index_dir.join("vectors.ivf"), &stale_vectors).unwrap();
        std::fs::write(index_dir.join("vectors.json"), meta).unwrap();
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        let response = search(
            &indexes,
            &[("sync-1", &["anyone"])],
            "",
            Some(seg_vector("doc-bb", 0)),
            10,
        );
        assert_eq!(keys(&response.dense), [k("doc-bb", 0), k("doc-a", 0)]);
        assert_eq!(response.dense[0].score, 1.0);
        assert_eq!(indexes.counts(), (1, 2));
    }
}

fn invalid_field(err: IndexError) -> String {
    match err {
        IndexError::InvalidArgument { field, .. } => field,
        other => panic!("not an argument error: {other}"),
    }
}

#[test]
fn validation_names_the_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
    let try_upsert = |sync: &str, records: Vec<IndexedRecord>| {
        indexes.upsert(&SegmentUpsertRequest {
            project_id: PROJECT.into(),
            sync_id: sync.into(),
            records,
            fields: Vec::new(),
        })
    };
    let good = record("doc-a", None, &["anyone"], &["one", "two"]);
    let mut empty = record("doc-b", None, &["anyone"], &["one"]);
    empty.segments[0].vector.clear();
    let err = try_upsert("sync-1", vec![good.clone(), empty]).unwrap_err();
    assert_eq!(invalid_field(err), "records[1].segments[0].vector");
    assert_eq!(indexes.counts(), (0, 0));

    let mut nan = good.clone();
    nan.segments[1].vector[0] = f32::NAN;
    let err = try_upsert("sync-1", vec![nan]).unwrap_err();
    assert_eq!(invalid_field(err), "records[0].segments[1].vector");

    let mut gap = good.clone();
    gap.segments[1].ordinal = 5;
    let err = try_upsert("sync-1", vec![gap]).unwrap_err();
    assert_eq!(invalid_field(err), "records[0].segments[1].ordinal");

    let mut bad_id = good.clone();
    bad_id.record_id = "a\nb".into();
    let err = try_upsert("sync-1", vec![bad_id]).unwrap_err();
    assert_eq!(invalid_field(err), "records[0].recordId");

    let err = try_upsert("../up", vec![good.clone()]).unwrap_err();
    assert_eq!(invalid_field(err), "syncId");
    let err = indexes
        .upsert(&SegmentUpsertRequest {
            project_id: "a/b".into(),
            sync_id: "sync-1".into(),
            records: vec![good.clone()],
            fields: Vec::new(),
        })
        .unwrap_err();
    assert_eq!(invalid_field(err), "projectId");
    assert_eq!(indexes.counts(), (0, 0));

    // The index's dimension is fixed by its first vectors; a mismatch later writes nothing.
    try_upsert("sync-1", vec![good.clone()]).unwrap();
    let mut wide = record("doc-c", None, &["anyone"], &["x", "y"]);
    wide.segments[1].vector = vec![0.5; 16];
    let err = try_upsert("sync-1", vec![good.clone(), wide]).unwrap_err();
    assert_eq!(invalid_field(err), "records[1].segments[1].vector");
    assert_eq!(indexes.info(PROJECT, "sync-1").unwrap().generation, 1);
    assert_eq!(indexes.counts(), (1, 2));
}

#[test]
fn read_around_clamps_and_checks_permission() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
    upsert(
        &indexes,
        "sync-1",
        vec![record(
            "doc-a",
            Some("Five parts"),
            &["group:eng", "user:alice@example.com"],
            &["s0", "s1", "s2", "s3", "s4"],
        )],
    );
    let read = |ordinal: u32, before: u32, after: u32, principals: &[&str], record: &str| {
        indexes
            .read(&ReadSegmentsRequest {
                project_id: PROJECT.into(),
                sync_id: "sync-1".into(),
                record_id: record.into(),
                ordinal,
                before,
                after,
                principals: principals.iter().map(|p| p.to_string()).collect(),
            })
            .unwrap()
            .map(|r| {
                assert_eq!(r.record.segments, 5);
                assert_eq!(r.record.display_name.as_deref(), Some("Five parts"));
                r.segments
                    .iter()
                    .map(|s| {
                        assert_eq!(s.text, format!("s{}", s.ordinal));
                        s.ordinal
                    })
                    .collect::<Vec<_>>()
            })
    };
    let eng: &[&str] = &["group:eng"];
    assert_eq!(read(2, 1, 1, eng, "doc-a"), Some(vec![1, 2, 3]));
    assert_eq!(read(0, 3, 1, eng, "doc-a"), Some(vec![0, 1]));
    assert_eq!(read(4, 0, 10, eng, "doc-a"), Some(vec![4]));
    assert_eq!(
        read(3, u32::MAX, u32::MAX, eng, "doc-a"),
        Some(vec![0, 1, 2, 3, 4])
    );
    assert_eq!(read(5, 1, 1, eng, "doc-a"), None);
    assert_eq!(read(2, 1, 1, &["group:sales", "anyone"], "doc-a"), None);
    assert_eq!(read(2, 1, 1, &[], "doc-a"), None);
    assert_eq!(read(0, 0, 0, eng, "doc-b"), None);
}

// ---- Property: search equals brute force over the visible segments. ----

const TOKENS: [&str; 4] = ["anyone", "group:eng", "user:a", "domain:x.com"];
const WORDS: [&str; 8] = [
    "budget", "forecast", "invoice", "launch", "meeting", "policy", "revenue", "travel",
];

#[derive(Clone, Debug)]
struct GenRecord {
    sync: usize,
    number: usize,
    principals: u8,
    name: Option<Vec<usize>>,
    segments: Vec<(Vec<usize>, usize, u8)>,
}

fn gen_record() -> impl Strategy<Value = GenRecord> {
    (
        0..2usize,
        0..6usize,
        0..16u8,
        proptest::option::of(proptest::collection::vec(0..WORDS.len(), 1..3)),
        proptest::collection::vec(
            (
                proptest::collection::vec(0..WORDS.len(), 1..8),
                0..70usize,
                0..16u8,
            ),
            0..4,
        ),
    )
        .prop_map(|(sync, number, principals, name, segments)| GenRecord {
            sync,
            number,
            principals,
            name,
            segments,
        })
}

fn words(ids: &[usize]) -> String {
    ids.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" ")
}

fn tokens_of(mask: u8) -> Vec<String> {
    (0..TOKENS.len())
        .filter(|i| mask >> i & 1 == 1)
        .map(|i| TOKENS[i].to_string())
        .collect()
}

fn to_record(g: &GenRecord, generation: u64) -> IndexedRecord {
    IndexedRecord {
        record_id: format!("rec-{}", g.number),
        display_name: g.name.as_deref().map(words),
        generation,
        principals: tokens_of(g.principals),
        segments: g
            .segments
            .iter()
            .enumerate()
            .map(|(i, (text, combination, signs))| IndexedSegment {
                ordinal: i as u32,
                text: words(text),
                vector: unit(*combination, *signs),
            })
            .collect(),
        fields: Vec::new(),
    }
}

fn sync_name(sync: usize) -> String {
    format!("sync-{sync}")
}

/// Analyzed tokens of `text` (repeats kept) for term frequencies and field lengths.
fn analyzed(text: &str) -> Vec<String> {
    let mut analyzer = text_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// BM25F as documented in `lexical.rs`, in the same floating-point order.
fn bm25f(stats: &TermStats, config: &ContextConfig, terms: &[String], fields: [&str; 2]) -> f32 {
    let n = stats.total_docs as f32;
    if stats.total_docs == 0 {
        return 0.0;
    }
    let names = ["title", "text"];
    let weights = [config.title_weight, config.text_weight];
    let b = config.b;
    let k1 = config.k1;
    let mut score = 0.0f32;
    for term in terms {
        let mut df = 0u64;
        let mut scale = [0.0f32; 2];
        for i in 0..2 {
            let field_df = stats
                .doc_freqs
                .get(&(names[i].to_string(), term.clone()))
                .copied()
                .unwrap_or(0);
            if field_df > 0 && weights[i] > 0.0 {
                df = df.max(field_df);
                scale[i] = weights[i];
            }
        }
        if df == 0 {
            continue;
        }
        let df = (df as f32).min(n);
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let mut x = 0.0f32;
        for i in 0..2 {
            if scale[i] == 0.0 {
                continue;
            }
            let tokens = analyzed(fields[i]);
            let tf = tokens.iter().filter(|t| *t == term).count();
            if tf == 0 {
                continue;
            }
            let average =
                (stats.field_tokens.get(names[i]).copied().unwrap_or(0) as f32 / n).max(1.0);
            let norm = 1.0 - b + b * tokens.len() as f32 / average;
            x += scale[i] * tf as f32 / norm;
        }
        if x > 0.0 {
            score += idf * x * (k1 + 1.0) / (k1 + x);
        }
    }
    score
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn search_equals_brute_force_over_visible_segments(
        first in proptest::collection::vec(gen_record(), 1..10),
        second in proptest::collection::vec(gen_record(), 0..4),
        deletes in proptest::collection::vec((0..2usize, 0..6usize), 0..3),
        queries in proptest::collection::vec(
            (
                [0..16u8, 0..16u8],
                proptest::collection::vec(0..WORDS.len(), 1..4),
                0..70usize,
                0..16u8,
                1..8u32,
            ),
            1..5,
        ),
        probes in prop_oneof![Just(None), Just(Some(1u32)), Just(Some(65_536u32))],
    ) {
        // With `probes`, an index of more than 4 segments is clustered as it is written: read
        // whole (more probes than lists) it still answers exactly; probing one list, it answers
        // only with visible segments.
        let config = match probes {
            None => ContextConfig::default(),
            Some(probes) => ContextConfig {
                dense_approximate_above: 4,
                dense_probes: probes,
                ..ContextConfig::default()
            },
        };
        let exact_dense = probes != Some(1);
        let dir = tempfile::tempdir().unwrap();
        let indexes = SegmentIndexes::open(dir.path(), config.clone()).unwrap();
        // The model: (sync, record id) -> record; later writes replace earlier ones.
        let mut model: BTreeMap<(String, String), IndexedRecord> = BTreeMap::new();
        for (round, batch) in [&first, &second].into_iter().enumerate() {
            for sync in 0..2 {
                let records: Vec<IndexedRecord> = batch
                    .iter()
                    .filter(|g| g.sync == sync)
                    .map(|g| to_record(g, round as u64 + 1))
                    .collect();
                if records.is_empty() {
                    continue;
                }
                upsert(&indexes, &sync_name(sync), records.clone());
                for r in records {
                    let key = (sync_name(sync), r.record_id.clone());
                    if r.segments.is_empty() {
                        model.remove(&key);
                    } else {
                        model.insert(key, r);
                    }
                }
            }
        }
        for (sync, number) in &deletes {
            let record_id = format!("rec-{number}");
            if indexes.get(PROJECT, &sync_name(*sync)).is_some() {
                indexes
                    .delete(&RecordDeleteRequest {
                        project_id: PROJECT.into(),
                        sync_id: sync_name(*sync),
                        record_ids: vec![record_id.clone()],
                    })
                    .unwrap();
            }
            model.remove(&(sync_name(*sync), record_id));
        }
        let segments_held: usize = model.values().map(|r| r.segments.len()).sum();
        prop_assert_eq!(indexes.counts().1, segments_held as u64);

        for (masks, query_words, combination, signs, limit) in queries {
            let scopes: Vec<(String, Vec<String>)> =
                (0..2).map(|s| (sync_name(s), tokens_of(masks[s]))).collect();
            let query = words(&query_words);
            let vector = unit(combination, signs);
            // Half the searches leave the texts to a fetch, as the router asks, but for those of
            // each list's first `texts_head` hits.
            let defer_texts = limit % 2 == 0;
            let texts_head = limit % 3;
            let sync_scopes: Vec<SyncScope> = scopes
                .iter()
                .map(|(sync_id, principals)| SyncScope {
                    sync_id: sync_id.clone(),
                    principals: principals.clone(),
                    source: "googledrive".into(),
                })
                .collect();
            let response = indexes.search(&ContextSearchRequest {
                project_id: PROJECT.into(),
                syncs: sync_scopes.clone(),
                query: query.clone(),
                vector: Some(vector.clone()),
                limit,
                lexical: true,
                stats: None,
                structured: None,
                fields: Vec::new(),
                defer_texts,
                texts_head,
            });
            prop_assert!(response.failures.is_empty(), "{:?}", response.failures);
            let fetch_in = |syncs: &[SyncScope], segments: Vec<SegmentRef>| {
                indexes.fetch(&SegmentFetchRequest {
                    project_id: PROJECT.into(),
                    syncs: syncs.to_vec(),
                    segments,
                })
            };
            let fetch = |segments: Vec<SegmentRef>| fetch_in(&sync_scopes, segments);

            let visible = |sync: &str, record: &IndexedRecord| {
                let caller = &scopes.iter().find(|(s, _)| s == sync).unwrap().1;
                record.principals.iter().any(|p| caller.contains(p))
            };
            let stats = indexes
                .term_stats(&ContextStatsRequest {
                    project_id: PROJECT.into(),
                    sync_ids: scopes.iter().map(|(s, _)| s.clone()).collect(),
                    query: query.clone(),
                })
                .unwrap();
            let terms = analyze(&query);
            let mut lexical = Vec::new();
            let mut dense = Vec::new();
            for ((sync, record_id), record) in &model {
                if !visible(sync, record) {
                    continue;
                }
                for segment in &record.segments {
                    let hit = |score| SegmentHit {
                        sync_id: sync.clone(),
                        record_id: record_id.clone(),
                        ordinal: segment.ordinal,
                        score,
                    };
                    let title = record.display_name.clone().unwrap_or_default();
                    let score = bm25f(&stats, &config, &terms, [&title, &segment.text]);
                    if score > 0.0 {
                        lexical.push(hit(score));
                    }
                    let dot: f32 = segment.vector.iter().zip(&vector).map(|(a, b)| a * b).sum();
                    dense.push(hit(dot));
                }
            }
            let matched = lexical.len() as u64;
            for expected in [&mut lexical, &mut dense] {
                expected.sort_by(segment_hit_order);
                expected.truncate(limit as usize);
            }

            // (a) nothing invisible leaves the index.
            let hits: Vec<&SegmentHit> = response.lexical.iter().chain(&response.dense).collect();
            let is_visible = |sync: &str, record_id: &str| {
                model
                    .get(&(sync.to_string(), record_id.to_string()))
                    .is_some_and(|r| visible(sync, r))
            };
            for hit in &hits {
                prop_assert!(is_visible(&hit.sync_id, &hit.record_id), "{:?}", hit);
            }
            let segments = if defer_texts {
                let head: HashSet<String> = response
                    .lexical
                    .iter()
                    .take(texts_head as usize)
                    .chain(response.dense.iter().take(texts_head as usize))
                    .map(|h| h.key())
                    .collect();
                let sent: HashSet<String> = response
                    .segments
                    .iter()
                    .map(|s| agentsearch_common::shard::segment_key(&s.sync_id, &s.record_id, s.ordinal))
                    .collect();
                prop_assert_eq!(sent.len(), response.segments.len());
                prop_assert_eq!(sent, head);
                let mut seen = HashSet::new();
                let fetched = fetch(
                    hits.iter()
                        .filter(|h| seen.insert(h.key()))
                        .map(|h| SegmentRef {
                            sync_id: h.sync_id.clone(),
                            record_id: h.record_id.clone(),
                            ordinal: h.ordinal,
                            generation: 0,
                        })
                        .collect(),
                );
                prop_assert!(fetched.failures.is_empty(), "{:?}", fetched.failures);
                for sent in &response.segments {
                    prop_assert!(fetched.segments.contains(sent), "{:?}", sent);
                }
                fetched.segments
            } else {
                response.segments.clone()
            };
            // A fetch of every segment held (each also asked of another generation, and one
            // that does not exist per record), of the deleted records and of a sync out of scope
            // returns the readable ones, in request order, with their texts.
            let mut every: Vec<SegmentRef> = Vec::new();
            let mut readable: Vec<(String, String, u32, String)> = Vec::new();
            for (sync, number) in &deletes {
                every.push(SegmentRef {
                    sync_id: sync_name(*sync),
                    record_id: format!("rec-{number}"),
                    ordinal: 0,
                    generation: 0,
                });
            }
            for ((sync, record_id), record) in &model {
                every.push(SegmentRef {
                    sync_id: "sync-out-of-scope".into(),
                    record_id: record_id.clone(),
                    ordinal: 0,
                    generation: 0,
                });
                for segment in &record.segments {
                    every.push(SegmentRef {
                        sync_id: sync.clone(),
                        record_id: record_id.clone(),
                        ordinal: segment.ordinal,
                        generation: record.generation + 1,
                    });
                    every.push(SegmentRef {
                        sync_id: sync.clone(),
                        record_id: record_id.clone(),
                        ordinal: segment.ordinal,
                        generation: record.generation,
                    });
                    if visible(sync, record) {
                        readable.push((
                            sync.clone(),
                            record_id.clone(),
                            segment.ordinal,
                            segment.text.clone(),
                        ));
                    }
                }
                every.push(SegmentRef {
                    sync_id: sync.clone(),
                    record_id: record_id.clone(),
                    ordinal: record.segments.len() as u32,
                    generation: 0,
                });
            }
            let fetched = fetch(every.clone());
            prop_assert!(fetched.failures.is_empty(), "{:?}", fetched.failures);
            let texts = |segments: Vec<agentsearch_common::shard::SegmentData>| {
                segments
                    .into_iter()
                    .map(|s| (s.sync_id, s.record_id, s.ordinal, s.text))
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(texts(fetched.segments), readable.clone());
            // Naming only the first sync's scope, the second's segments are not readable.
            let fetched = fetch_in(&sync_scopes[..1], every);
            prop_assert!(fetched.failures.is_empty(), "{:?}", fetched.failures);
            let first_only: Vec<_> =
                readable.into_iter().filter(|r| r.0 == sync_scopes[0].sync_id).collect();
            prop_assert_eq!(texts(fetched.segments), first_only);
            for segment in &segments {
                prop_assert!(is_visible(&segment.sync_id, &segment.record_id));
                let record = &model[&(segment.sync_id.clone(), segment.record_id.clone())];
                prop_assert_eq!(&segment.text, &record.segments[segment.ordinal as usize].text);
            }
            for info in &response.records {
                prop_assert!(is_visible(&info.sync_id, &info.record_id));
                let record = &model[&(info.sync_id.clone(), info.record_id.clone())];
                prop_assert_eq!(info.segments as usize, record.segments.len());
                prop_assert_eq!(&info.display_name, &record.display_name);
                prop_assert_eq!(info.generation, record.generation);
            }
            let hit_keys: HashSet<String> = hits.iter().map(|h| h.key()).collect();
            let segment_keys: HashSet<String> = segments
                .iter()
                .map(|s| agentsearch_common::shard::segment_key(&s.sync_id, &s.record_id, s.ordinal))
                .collect();
            prop_assert_eq!(&hit_keys, &segment_keys);
            prop_assert_eq!(segments.len(), segment_keys.len());
            let hit_records: HashSet<(String, String)> = hits
                .iter()
                .map(|h| (h.sync_id.clone(), h.record_id.clone()))
                .collect();
            let record_keys: HashSet<(String, String)> = response
                .records
                .iter()
                .map(|r| (r.sync_id.clone(), r.record_id.clone()))
                .collect();
            prop_assert_eq!(&hit_records, &record_keys);
            prop_assert_eq!(response.records.len(), record_keys.len());

            // (b) both lists equal the brute-force ranking; (c) the matched count too.
            let mut compared = vec![(&response.lexical, &lexical)];
            if exact_dense {
                compared.push((&response.dense, &dense));
            } else {
                prop_assert!(response.dense.len() <= dense.len());
            }
            for (got, expected) in compared {
                let got_keys: Vec<String> = got.iter().map(|h| h.key()).collect();
                let expected_keys: Vec<String> = expected.iter().map(|h| h.key()).collect();
                prop_assert_eq!(got_keys, expected_keys, "query `{}`: {:?} vs {:?}", query, got, expected);
                for (g, e) in got.iter().zip(expected.iter()) {
                    prop_assert!((g.score - e.score).abs() < 1e-4, "{:?} vs {:?}", g, e);
                }
            }
            prop_assert_eq!(response.lexical_matched, matched);
            // (d) the generation the caller may know of: its readable records' only.
            let readable_generations: u64 = model
                .iter()
                .filter(|((sync, _), record)| visible(sync, record))
                .map(|(_, record)| record.generation)
                .sum();
            prop_assert_eq!(response.visible_generation, readable_generations);
        }
    }
}

/// A principal set no record uses any more gives its number to the next new set: the vectors of
/// the records that now hold that number are found by the new set's callers only, and the
/// callers of the old set find nothing, by either retriever, clustered or not, and again after
/// a reopen (rows tagged from the snapshot) and after a reopen that rebuilds the vectors.
#[test]
fn a_principal_set_dropped_and_its_number_reused_opens_only_the_new_set() {
    for approximate_above in [1_000_000, 2] {
        let dir = tempfile::tempdir().unwrap();
        let config = ContextConfig {
            dense_approximate_above: approximate_above,
            dense_probes: 65_536,
            ..ContextConfig::default()
        };
        let indexes = SegmentIndexes::open(dir.path(), config).unwrap();
        let sync = "sync-1";
        upsert(
            &indexes,
            sync,
            vec![
                record("doc-a", None, &["user:x"], &["alpha report", "alpha notes"]),
                record("doc-b", None, &["user:y"], &["alpha summary"]),
            ],
        );
        // doc-b moves to another set and doc-a goes: both first sets are unused; doc-c's and
        // doc-d's new sets take their numbers.
        upsert(
            &indexes,
            sync,
            vec![record("doc-b", None, &["user:z"], &["alpha summary"])],
        );
        indexes
            .delete(&RecordDeleteRequest {
                project_id: PROJECT.into(),
                sync_id: sync.into(),
                record_ids: vec!["doc-a".into()],
            })
            .unwrap();
        upsert(
            &indexes,
            sync,
            vec![
                record("doc-c", None, &["user:w"], &["alpha memo"]),
                record("doc-d", None, &["user:v"], &["alpha plan", "alpha budget"]),
            ],
        );
        let found = |indexes: &SegmentIndexes, caller: &[&str]| {
            let response = search(
                indexes,
                &[(sync, caller)],
                "alpha",
                Some(seg_vector("doc-d", 0)),
                10,
            );
            let mut dense: Vec<String> =
                response.dense.iter().map(|h| h.record_id.clone()).collect();
            let mut lexical: Vec<String> = response
                .lexical
                .iter()
                .map(|h| h.record_id.clone())
                .collect();
            for list in [&mut dense, &mut lexical] {
                list.sort();
                list.dedup();
            }
            assert_eq!(dense, lexical, "caller {caller:?}");
            dense
        };
        let check = |indexes: &SegmentIndexes| {
            for gone in [&["user:x"][..], &["user:y"]] {
                assert!(
                    found(indexes, gone).is_empty(),
                    "{gone:?} (above {approximate_above})"
                );
            }
            assert_eq!(found(indexes, &["user:z"]), ["doc-b"]);
            assert_eq!(found(indexes, &["user:w"]), ["doc-c"]);
            assert_eq!(found(indexes, &["user:v"]), ["doc-d"]);
            assert_eq!(
                found(indexes, &["user:w", "user:v", "user:x"]),
                ["doc-c", "doc-d"]
            );
        };
        check(&indexes);
        indexes.flush().unwrap();
        drop(indexes);
        check(&SegmentIndexes::open(dir.path(), config).unwrap());
        let index_dir = dir.path().join("context").join(PROJECT).join(sync);
        std::fs::remove_file(index_dir.join("vectors.json")).unwrap();
        check(&SegmentIndexes::open(dir.path(), config).unwrap());
    }
}

/// A sync past `dense_approximate_above` is clustered when written, its clustered vector index is
/// read back from the snapshot on open, and rebuilt and clustered again from the stored vectors
/// when the snapshot is stale; every probe read, the dense list stays the exact one.
#[test]
fn a_clustered_vector_index_survives_reopen_and_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let config = ContextConfig {
        dense_approximate_above: 200,
        dense_probes: 65_536,
        ..ContextConfig::default()
    };
    let principals = ["anyone", "group:eng", "user:a"];
    let records = |from: usize, to: usize| -> Vec<IndexedRecord> {
        (from..to)
            .map(|n| IndexedRecord {
                record_id: format!("rec-{n}"),
                display_name: None,
                generation: 1,
                principals: vec![principals[n % 3].to_string()],
                segments: (0..3)
                    .map(|o| IndexedSegment {
                        ordinal: o as u32,
                        text: format!("segment {o} of record {n}"),
                        vector: unit(n * 3 + o, (n % 16) as u8),
                    })
                    .collect(),
                fields: Vec::new(),
            })
            .collect()
    };
    let query = unit(17, 5);
    let dense = |indexes: &SegmentIndexes| {
        let response = search(
            indexes,
            &[("sync-1", &["group:eng", "user:a"])],
            "",
            Some(query.clone()),
            25,
        );
        assert!(response.dense.iter().all(|h| {
            let n: usize = h.record_id["rec-".len()..].parse().unwrap();
            n % 3 != 0 && n < 150 && !(40..50).contains(&n)
        }));
        keys(&response.dense)
    };
    let lists = |indexes: &SegmentIndexes| indexes.get(PROJECT, "sync-1").unwrap().dense_lists();
    let before;
    {
        let indexes = SegmentIndexes::open(dir.path(), config.clone()).unwrap();
        for batch in 0..5 {
            upsert(&indexes, "sync-1", records(batch * 30, batch * 30 + 30));
        }
        // 450 segments, clustered at 210 and at 420.
        assert!(lists(&indexes) > 1, "not clustered");
        indexes
            .delete(&RecordDeleteRequest {
                project_id: PROJECT.into(),
                sync_id: "sync-1".into(),
                record_ids: (40..50).map(|n| format!("rec-{n}")).collect(),
            })
            .unwrap();
        before = dense(&indexes);
        assert_eq!(before.len(), 25);
    }
    let index_dir = dir.path().join("context").join(PROJECT).join("sync-1");
    {
        let indexes = SegmentIndexes::open(dir.path(), config.clone()).unwrap();
        assert!(lists(&indexes) > 1);
        assert_eq!(dense(&indexes), before);
    }
    std::fs::remove_file(index_dir.join("vectors.json")).unwrap();
    let indexes = SegmentIndexes::open(dir.path(), config).unwrap();
    assert!(lists(&indexes) > 1, "not clustered again after the rebuild");
    assert_eq!(dense(&indexes), before);
    assert_eq!(indexes.counts(), (1, 420));
}

/// A vector snapshot left from an earlier generation beside a current `vectors.json` (a crash
/// between the two files' renames) is not used, even when it holds the same segment ids: a
/// record replaced with new vectors is searched with them.
#[test]
fn a_vector_snapshot_of_another_generation_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let with_vector = |vector: Vec<f32>| IndexedRecord {
        record_id: "doc-a".into(),
        display_name: None,
        generation: 1,
        principals: vec!["anyone".into()],
        segments: vec![IndexedSegment {
            ordinal: 0,
            text: "text".into(),
            vector,
        }],
        fields: Vec::new(),
    };
    let index_dir = dir.path().join("context").join(PROJECT).join("sync-1");
    {
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        upsert(&indexes, "sync-1", vec![with_vector(unit(1, 0))]);
    }
    let first = std::fs::read(index_dir.join("vectors.ivf")).unwrap();
    {
        let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
        upsert(&indexes, "sync-1", vec![with_vector(unit(2, 0))]);
    }
    std::fs::write(index_dir.join("vectors.ivf"), first).unwrap();
    let indexes = SegmentIndexes::open(dir.path(), ContextConfig::default()).unwrap();
    let response = search(
        &indexes,
        &[("sync-1", &["anyone"])],
        "",
        Some(unit(2, 0)),
        1,
    );
    assert_eq!(keys(&response.dense), [k("doc-a", 0)]);
    assert_eq!(response.dense[0].score, 1.0);
}
