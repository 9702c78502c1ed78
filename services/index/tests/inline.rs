//! Inline tools (indexed in memory for one request) score exactly as the same tools in a catalog
//! index on disk, given the same statistics: per index, and through a whole shard search with its
//! filters; and searches report the generation of each catalog index they ranked from.

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::{
    IndexedTool, InlineSearchRequest, ShardSearchRequest, ShardSearchResponse, TermStats,
    TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_index::analyzer::analyze;
use agentsearch_index::schema::weighted_fields;
use agentsearch_index::{
    InlineIndex, IntegrationIndex, LexicalQuery, MAX_INLINE_TOOLS, Scored, ToolFilter, ToolIndexes,
};

const PROJECT: &str = "00000000-0000-4000-8000-000000000002";
const DIM: usize = 16;

mod common;

/// A unit vector from a seed, so that no two tools tie on a query.
fn unit_vector(seed: u64) -> Vec<f32> {
    common::unit_vector(seed, DIM)
}

fn tool(
    name: &str,
    category: &str,
    side_effect: SideEffect,
    description: &str,
    seed: u64,
) -> IndexedTool {
    IndexedTool {
        record: ToolRecord {
            name: name.into(),
            integration: "acme".into(),
            category: category.into(),
            side_effect,
            description: description.into(),
            parameters: format!(
                r#"{{"type":"object","properties":{{"ticket_id":{{"type":"string","description":"the ticket of {name}"}},"channel":{{"type":"string","description":"channel or queue"}}}}}}"#
            ),
            tokens: 40 + seed as u32,
        },
        vector: unit_vector(seed),
    }
}

fn tools() -> Vec<IndexedTool> {
    vec![
        tool(
            "ACME_CREATE_TICKET",
            "support",
            SideEffect::Write,
            "Create a support ticket in a queue.",
            1,
        ),
        tool(
            "ACME_CLOSE_TICKET",
            "support",
            SideEffect::Write,
            "Close a ticket once it is solved; closing a ticket notifies its requester.",
            2,
        ),
        tool(
            "ACME_DELETE_TICKET",
            "support",
            SideEffect::Delete,
            "Delete a ticket permanently.",
            3,
        ),
        tool(
            "ACME_LIST_TICKETS",
            "support",
            SideEffect::Read,
            "List the tickets of a queue, newest first.",
            4,
        ),
        tool(
            "ACME_SEND_MESSAGE",
            "messaging",
            SideEffect::Send,
            "Send a message to a channel.",
            5,
        ),
        tool(
            "ACME_READ_MESSAGES",
            "messaging",
            SideEffect::Read,
            "Read the latest messages of a channel.",
            6,
        ),
        tool(
            "ACME_POST_TICKET_UPDATE",
            "messaging",
            SideEffect::Send,
            "Post an update about a ticket to its channel.",
            7,
        ),
        tool(
            "ACME_EXPORT_REPORT",
            "analytics",
            SideEffect::Read,
            "Export a weekly report of solved tickets and messages.",
            8,
        ),
    ]
}

const QUERIES: [&str; 5] = [
    "close ticket",
    "send a message to the support channel",
    "ticket",
    "weekly report of tickets",
    "nothing matches zzzz",
];

fn filters() -> Vec<ToolFilter> {
    vec![
        ToolFilter::default(),
        ToolFilter::new(&["support".into()], None),
        ToolFilter::new(&[], Some(SideEffect::Read)),
        ToolFilter::new(
            &["support".into(), "messaging".into()],
            Some(SideEffect::Write),
        ),
    ]
}

/// A catalog index on disk holding `tools()`, written in several commits (one tool replaced on the
/// way), and the same tools indexed inline.
fn both(dir: &std::path::Path) -> (IntegrationIndex, InlineIndex) {
    let catalog = IntegrationIndex::open(&dir.join("acme"), "acme").unwrap();
    let all = tools();
    let mut stale = all[1].clone();
    stale.record.description = "An older description.".into();
    stale.vector = unit_vector(99);
    catalog.upsert(all[..3].to_vec()).unwrap();
    catalog.upsert(vec![stale]).unwrap();
    catalog.upsert(all[3..].to_vec()).unwrap();
    catalog.upsert(vec![all[1].clone()]).unwrap();
    assert_eq!(catalog.len(), all.len());
    let inline = InlineIndex::build(all).unwrap();
    assert_eq!(inline.len(), catalog.len());
    (catalog, inline)
}

fn assert_same(what: &str, a: &Scored, b: &Scored) {
    assert_eq!(a.eligible, b.eligible, "{what}: eligible");
    assert_eq!(a.excluded, b.excluded, "{what}: excluded");
}

#[test]
fn inline_tools_score_exactly_as_in_a_catalog_index() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, inline) = both(dir.path());
    let config = LexicalConfig::default();
    let fields = weighted_fields(&config);
    let mut matched = 0;
    for query in QUERIES {
        let terms = analyze(query);
        // Each index's own statistics describe the same tools.
        let mut from_catalog = TermStats::default();
        catalog.add_term_stats(&terms, &mut from_catalog).unwrap();
        let mut from_inline = TermStats::default();
        inline.add_term_stats(&terms, &mut from_inline).unwrap();
        assert_eq!(
            from_catalog.doc_freqs, from_inline.doc_freqs,
            "{query}: document frequencies"
        );
        // Global statistics of a larger collection, given to both.
        let mut global = from_catalog.clone();
        global.merge(&from_inline);
        global.total_docs += 1000;
        for (label, stats) in [("own", &from_inline), ("global", &global)] {
            let lexical = LexicalQuery::new(&terms, stats, &fields, config.k1, config.b);
            for (f, filter) in filters().iter().enumerate() {
                let what = format!("{query} / {label} / filter {f}");
                let a = catalog.search_lexical(&lexical, filter, 5).unwrap();
                let b = inline.search_lexical(&lexical, filter, 5).unwrap();
                assert_same(&what, &a, &b);
                matched += a.eligible.len() + a.excluded.len();
            }
        }
    }
    assert!(matched > 20, "the queries must match something");
    for seed in [1, 5, 42, 1000] {
        let vector = unit_vector(seed);
        for (f, filter) in filters().iter().enumerate() {
            for limit in [1, 3, 20] {
                let what = format!("vector {seed} / filter {f} / limit {limit}");
                let a = catalog.search_dense(&vector, filter, limit).unwrap();
                let b = inline.search_dense(&vector, filter, limit).unwrap();
                assert!(!a.eligible.is_empty(), "{what}");
                assert_same(&what, &a, &b);
            }
        }
    }
    // A tool's own vector is its nearest neighbour, with a cosine of 1.
    let a = inline
        .search_dense(&unit_vector(3), &ToolFilter::default(), 1)
        .unwrap();
    let record = inline.tool(a.eligible[0].1).unwrap();
    assert_eq!(record.name, "ACME_DELETE_TICKET");
    assert!((a.eligible[0].0 - 1.0).abs() < 1e-5);
    // A query vector of the wrong dimension fails as in a catalog index.
    assert!(
        inline
            .search_dense(&[1.0; 3], &ToolFilter::default(), 5)
            .is_err()
    );
    assert!(
        catalog
            .search_dense(&[1.0; 3], &ToolFilter::default(), 5)
            .is_err()
    );
}

fn strip_timings(mut response: ShardSearchResponse) -> ShardSearchResponse {
    response.timings = Default::default();
    response
}

#[test]
fn inline_search_ranks_like_a_catalog_search() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let catalog = indexes.get_or_create(PROJECT, "acme").unwrap();
    catalog.upsert(tools()[..4].to_vec()).unwrap();
    let generation = catalog.upsert(tools()[4..].to_vec()).unwrap();
    assert_eq!(generation, 2);
    let own_stats = |query: &str| {
        let mut stats = TermStats::default();
        InlineIndex::build(tools())
            .unwrap()
            .add_term_stats(&analyze(query), &mut stats)
            .unwrap();
        stats
    };
    for query in QUERIES {
        let catalog_stats = indexes
            .term_stats(&TermStatsRequest {
                project_id: PROJECT.into(),
                integrations: vec!["acme".into()],
                query: query.into(),
            })
            .unwrap();
        // The inline search adds its tools' statistics to the catalog's: give the catalog search
        // the same sum.
        let mut merged = catalog_stats.clone();
        merged.merge(&own_stats(query));
        for (categories, max_side_effect) in [
            (vec![], None),
            (vec!["support".to_string()], None),
            (vec![], Some(SideEffect::Read)),
            (vec!["messaging".to_string()], Some(SideEffect::Write)),
        ] {
            for (vector, limit) in [
                (None, 3),
                (Some(unit_vector(7)), 3),
                (Some(unit_vector(2)), 50),
            ] {
                let what = format!("{query} / {categories:?} / {max_side_effect:?} / {limit}");
                let catalog_answer = indexes.search(&ShardSearchRequest {
                    records: None,
                    project_id: PROJECT.into(),
                    integrations: vec!["acme".into()],
                    query: query.into(),
                    vector: vector.clone(),
                    categories: categories.clone(),
                    max_side_effect,
                    limit,
                    lexical: true,
                    stats: Some(merged.clone()),
                    structured: None,
                });
                let inline_answer = indexes
                    .search_inline(InlineSearchRequest {
                        project_id: PROJECT.into(),
                        tools: tools(),
                        query: query.into(),
                        vector,
                        categories: categories.clone(),
                        max_side_effect,
                        limit,
                        lexical: true,
                        stats: Some(catalog_stats.clone()),
                    })
                    .unwrap();
                assert!(catalog_answer.failures.is_empty(), "{what}");
                // The generation of the index that gave the hits (none without a hit).
                let hits = [
                    &catalog_answer.lexical,
                    &catalog_answer.dense,
                    &catalog_answer.excluded_lexical,
                    &catalog_answer.excluded_dense,
                ]
                .iter()
                .map(|list| list.len())
                .sum::<usize>();
                let expected_generations: std::collections::BTreeMap<String, u64> = if hits > 0 {
                    [("acme".to_string(), generation)].into_iter().collect()
                } else {
                    Default::default()
                };
                assert_eq!(catalog_answer.generations, expected_generations, "{what}");
                assert!(inline_answer.generations.is_empty(), "{what}");
                // Only catalog states are stamped (inline tools change with every request).
                assert!(catalog_answer.stamp.is_some() && inline_answer.stamp.is_none());
                let mut expected = strip_timings(catalog_answer);
                expected.generations.clear();
                expected.stamp = None;
                assert_eq!(strip_timings(inline_answer), expected, "{what}");
            }
        }
    }
}

#[test]
fn inline_search_uses_its_own_statistics_without_the_catalogs() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let request = |stats: Option<TermStats>| InlineSearchRequest {
        project_id: PROJECT.into(),
        tools: tools(),
        query: "close ticket".into(),
        vector: None,
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats,
    };
    let alone = indexes.search_inline(request(None)).unwrap();
    let with_empty = indexes
        .search_inline(request(Some(TermStats::default())))
        .unwrap();
    assert_eq!(alone.lexical, with_empty.lexical);
    assert_eq!(alone.lexical[0].name, "ACME_CLOSE_TICKET");
    assert_eq!(alone.lexical[0].integration, "acme");
    assert!(alone.dense.is_empty());
    // A catalog where "ticket" is rare makes it weigh more: scores move to the catalog's scale.
    let mut rare = TermStats {
        total_docs: 10_000,
        ..Default::default()
    };
    for field in ["name", "description", "params"] {
        rare.field_tokens.insert(field.into(), 80_000);
    }
    let scaled = indexes.search_inline(request(Some(rare))).unwrap();
    assert_eq!(scaled.lexical[0].name, "ACME_CLOSE_TICKET");
    assert!(scaled.lexical[0].score > alone.lexical[0].score);
    // Nothing was written under the shard's data dir.
    assert_eq!(indexes.counts(), (0, 0));
    assert!(
        std::fs::read_dir(dir.path().join("tools"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn inline_index_checks_its_tools() {
    let too_many: Vec<IndexedTool> = (0..=MAX_INLINE_TOOLS)
        .map(|i| {
            tool(
                &format!("T_{i}"),
                "support",
                SideEffect::Read,
                "x",
                i as u64,
            )
        })
        .collect();
    let err = InlineIndex::build(too_many).err().unwrap();
    assert!(err.to_string().starts_with("tools:"), "{err}");

    let mut bad = tools();
    bad[2].vector = vec![1.0; DIM + 1];
    let err = InlineIndex::build(bad).err().unwrap();
    assert!(err.to_string().starts_with("vector:"), "{err}");

    let mut bad = tools();
    bad[0].vector[0] = f32::NAN;
    assert!(InlineIndex::build(bad).is_err());

    // Duplicate names: the last wins, as in an upsert.
    let mut twice = tools();
    let mut again = twice[0].clone();
    again.record.description = "Open a brand new case.".into();
    twice.push(again);
    let index = InlineIndex::build(twice).unwrap();
    assert_eq!(index.len(), tools().len());
    assert_eq!(index.integration(), "acme");

    // Tools of several integrations, and none at all.
    let mut mixed = tools();
    mixed[0].record.integration = "other".into();
    assert_eq!(InlineIndex::build(mixed).unwrap().integration(), "");
    let empty = InlineIndex::build(Vec::new()).unwrap();
    assert!(empty.is_empty());
    let lexical = LexicalQuery::new(
        &analyze("ticket"),
        &TermStats {
            total_docs: 1,
            ..Default::default()
        },
        &weighted_fields(&LexicalConfig::default()),
        1.2,
        0.75,
    );
    let none = empty
        .search_lexical(&lexical, &ToolFilter::default(), 5)
        .unwrap();
    assert!(none.eligible.is_empty());
    let none = empty
        .search_dense(&unit_vector(1), &ToolFilter::default(), 5)
        .unwrap();
    assert!(none.eligible.is_empty());
}

#[test]
fn searches_report_the_generation_of_each_index_with_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let acme = indexes.get_or_create(PROJECT, "acme").unwrap();
    acme.upsert(tools()[..2].to_vec()).unwrap();
    acme.upsert(tools()[2..].to_vec()).unwrap();
    acme.delete(&["ACME_DELETE_TICKET".into()]).unwrap();
    let mut other = tools()[0].clone();
    other.record.integration = "other".into();
    other.record.name = "OTHER_CREATE_TICKET".into();
    indexes
        .get_or_create(PROJECT, "other")
        .unwrap()
        .upsert(vec![other])
        .unwrap();
    // An empty index that was never written.
    indexes.get_or_create(PROJECT, "empty").unwrap();
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: vec![
            "acme".into(),
            "other".into(),
            "empty".into(),
            "missing".into(),
            "acme".into(),
        ],
        query: "ticket".into(),
        vector: Some(unit_vector(1)),
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    });
    // The indexes that gave a hit, at the generation they were searched at; the empty one gave
    // none.
    assert_eq!(
        response.generations,
        [("acme".to_string(), 3), ("other".to_string(), 1)]
            .into_iter()
            .collect()
    );
    assert_eq!(acme.generation(), 3);
    // Neither retriever: no hit, no generation.
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: vec!["other".into()],
        query: String::new(),
        vector: None,
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: false,
        stats: None,
        structured: None,
    });
    assert!(response.generations.is_empty());
}

#[test]
fn many_indexes_searched_in_parallel_report_their_generations() {
    // Enough indexes for the search to split them over threads (where there are several cores).
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let integrations: Vec<String> = (0..32).map(|i| format!("int{i:02}")).collect();
    for (i, integration) in integrations.iter().enumerate() {
        let index = indexes.get_or_create(PROJECT, integration).unwrap();
        for round in 0..=(i % 2) {
            let mut t = tools()[i % 8].clone();
            t.record.integration = integration.clone();
            t.record.name = format!("{}_{round}", integration.to_uppercase());
            t.vector = unit_vector(i as u64 * 10 + round as u64);
            index.upsert(vec![t]).unwrap();
        }
    }
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: integrations.clone(),
        query: "ticket message report".into(),
        vector: Some(unit_vector(123)),
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    });
    assert!(response.failures.is_empty());
    assert_eq!(response.lexical.len(), 10);
    assert_eq!(response.dense.len(), 10);
    let expected: std::collections::BTreeMap<String, u64> = integrations
        .iter()
        .enumerate()
        .map(|(i, integration)| (integration.clone(), (i % 2) as u64 + 1))
        .collect();
    // Exactly the indexes that gave a hit report a generation, each its own (whichever part of
    // the split searched it).
    let hit: std::collections::BTreeSet<&str> = response
        .lexical
        .iter()
        .chain(&response.dense)
        .map(|h| h.integration.as_str())
        .collect();
    let reported: std::collections::BTreeSet<&str> =
        response.generations.keys().map(String::as_str).collect();
    assert_eq!(reported, hit);
    for (integration, generation) in &response.generations {
        assert_eq!(*generation, expected[integration], "{integration}");
    }
    let first_half = |i: &&str| i < &"int16";
    assert!(
        reported.iter().any(first_half) && !reported.iter().all(first_half),
        "{reported:?}"
    );
    assert!(response.generations.values().any(|g| *g == 1));
    assert!(response.generations.values().any(|g| *g == 2));
}
