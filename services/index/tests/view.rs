//! A project's search view answers exactly what the same search of its indexes one by one
//! answers (hits, scores, excluded hits, tools, generations, failures, statistics), over random
//! catalogs written in several commits with deletions, random scopes, filters, limits and
//! statistics; and a write makes the view out of date until it is rebuilt, without ever being
//! missing from an answer.

use std::time::{Duration, Instant};

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::{
    IndexedTool, ShardSearchRequest, ShardSearchResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_index::ToolIndexes;
use agentsearch_index::analyzer::analyze;
use proptest::prelude::*;

const PROJECT: &str = "00000000-0000-4000-8000-000000000003";
const WORDS: [&str; 10] = [
    "ticket", "message", "channel", "invoice", "report", "send", "close", "list", "customer",
    "weekly",
];
const CATEGORIES: [&str; 3] = ["support", "messaging", "billing"];

mod common;

use common::unit_vector;

/// One tool drawn from a few words, categories and vectors, so that lexical and dense scores
/// often tie.
fn tool(integration: &str, n: usize, seed: u64, dim: usize) -> IndexedTool {
    let word = |k: u64| WORDS[((seed >> (4 * k)) % WORDS.len() as u64) as usize];
    IndexedTool {
        record: ToolRecord {
            name: format!(
                "{}_{}_{n}",
                integration.to_uppercase(),
                word(0).to_uppercase()
            ),
            integration: integration.into(),
            category: CATEGORIES[(seed % 3) as usize].into(),
            side_effect: SideEffect::ALL[(seed % 5) as usize],
            description: format!("{} the {} of a {}.", word(1), word(2), word(3)),
            parameters: format!(
                r#"{{"type":"object","properties":{{"{}_id":{{"type":"string","description":"the {}"}}}}}}"#,
                word(4),
                word(5)
            ),
            tokens: 30,
        },
        vector: unit_vector(seed % 7, dim),
    }
}

/// A catalog: per integration, tools written in batches, some deleted afterwards.
#[derive(Clone, Debug)]
struct Catalog {
    /// Per integration: batches of tool seeds, then the tool numbers deleted.
    integrations: Vec<(Vec<Vec<u64>>, Vec<usize>)>,
    /// The integrations whose vectors have another dimension (their part of every dense search
    /// fails).
    odd_dimension: Vec<usize>,
}

fn catalog() -> impl Strategy<Value = Catalog> {
    let integration = (
        prop::collection::vec(prop::collection::vec(any::<u64>(), 0..12), 1..4),
        prop::collection::vec(0usize..30, 0..4),
    );
    (
        prop::collection::vec(integration, 1..9),
        prop::collection::vec(0usize..8, 0..3),
    )
        .prop_map(|(integrations, odd_dimension)| Catalog {
            integrations,
            odd_dimension,
        })
}

const DIM: usize = 12;

fn integration_name(i: usize) -> String {
    format!("app{i}")
}

fn load(indexes: &ToolIndexes, catalog: &Catalog) {
    for (i, (batches, deleted)) in catalog.integrations.iter().enumerate() {
        let name = integration_name(i);
        let dim = if catalog.odd_dimension.contains(&i) {
            5
        } else {
            DIM
        };
        let index = indexes.get_or_create(PROJECT, &name).unwrap();
        let mut n = 0;
        let mut names = Vec::new();
        for batch in batches {
            let tools: Vec<IndexedTool> = batch
                .iter()
                .map(|&seed| {
                    n += 1;
                    let tool = tool(&name, n, seed, dim);
                    names.push(tool.record.name.clone());
                    tool
                })
                .collect();
            if !tools.is_empty() {
                index.upsert(tools).unwrap();
            }
        }
        let deleted: Vec<String> = deleted
            .iter()
            .filter_map(|&k| names.get(k).cloned())
            .collect();
        if !deleted.is_empty() {
            index.delete(&deleted).unwrap();
        }
    }
}

#[derive(Clone, Debug)]
struct Search {
    words: Vec<usize>,
    /// Integrations named (some twice, some unknown); `None`: every one, last first (failures
    /// come in the order of the request).
    scope: Option<Vec<usize>>,
    categories: Vec<usize>,
    ceiling: Option<usize>,
    limit: u32,
    lexical: bool,
    vector: Option<u64>,
    global_stats: bool,
}

fn search() -> impl Strategy<Value = Search> {
    (
        prop::collection::vec(0usize..WORDS.len() + 2, 0..4),
        prop::option::of(prop::collection::vec(0usize..11, 0..10)),
        prop::collection::vec(0usize..3, 0..2),
        prop::option::of(0usize..5),
        prop::sample::select(vec![0u32, 1, 2, 3, 8, 50]),
        any::<bool>(),
        prop::option::of(0u64..9),
        any::<bool>(),
    )
        .prop_map(
            |(words, scope, categories, ceiling, limit, lexical, vector, global_stats)| Search {
                words,
                scope,
                categories,
                ceiling,
                limit,
                lexical,
                vector,
                global_stats,
            },
        )
}

fn request(indexes: &ToolIndexes, catalog: &Catalog, search: &Search) -> ShardSearchRequest {
    let query = search
        .words
        .iter()
        .map(|&w| WORDS.get(w).copied().unwrap_or("zzzz"))
        .collect::<Vec<_>>()
        .join(" ");
    let integrations: Vec<String> = match &search.scope {
        None => (0..catalog.integrations.len())
            .rev()
            .map(integration_name)
            .collect(),
        Some(scope) => scope.iter().map(|&i| integration_name(i)).collect(),
    };
    let stats = search.global_stats.then(|| {
        // Statistics of a larger collection, as the router sums them over shards.
        let mut stats = indexes
            .term_stats(&TermStatsRequest {
                project_id: PROJECT.into(),
                integrations: integrations.clone(),
                query: query.clone(),
            })
            .unwrap();
        stats.total_docs += 500;
        stats
    });
    ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations,
        query,
        vector: search.vector.map(|seed| unit_vector(seed, DIM)),
        categories: search
            .categories
            .iter()
            .map(|&c| CATEGORIES[c].to_string())
            .collect(),
        max_side_effect: search.ceiling.map(|c| SideEffect::ALL[c]),
        limit: search.limit,
        lexical: search.lexical,
        stats,
        structured: None,
    }
}

/// Statistics without their zero counts (a scope of no index counts nothing at all).
fn nonzero(mut stats: TermStats) -> TermStats {
    stats.doc_freqs.retain(|_, n| *n > 0);
    stats.field_tokens.retain(|_, n| *n > 0);
    stats
}

fn strip_timings(mut response: ShardSearchResponse) -> ShardSearchResponse {
    response.timings = Default::default();
    response
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_view_answers_exactly_as_the_indexes_one_by_one(
        catalog in catalog(),
        searches in prop::collection::vec(search(), 12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
        load(&indexes, &catalog);
        indexes.build_views();
        prop_assert!(indexes.has_current_view(PROJECT));
        for search in &searches {
            let request = request(&indexes, &catalog, search);
            let each = strip_timings(indexes.search_each(&request));
            let viewed = strip_timings(indexes.search(&request));
            prop_assert_eq!(&viewed, &each, "{:?}", search);
            // Both paths stamp the states they searched, as the statistics round does.
            prop_assert!(each.stamp.is_some());
            prop_assert_eq!(stamp_of(&indexes, &request), each.stamp, "{:?}", search);
            // Statistics through the view, and counted index by index.
            let viewed = indexes
                .term_stats(&TermStatsRequest {
                    project_id: PROJECT.into(),
                    integrations: request.integrations.clone(),
                    query: request.query.clone(),
                })
                .unwrap();
            let terms = analyze(&request.query);
            let mut counted = TermStats::default();
            let mut seen = std::collections::HashSet::new();
            for integration in &request.integrations {
                if seen.insert(integration)
                    && let Some(index) = indexes.get(PROJECT, integration)
                {
                    index.add_term_stats(&terms, &mut counted).unwrap();
                }
            }
            prop_assert_eq!(nonzero(viewed), nonzero(counted), "{:?}", search);
            prop_assert!(indexes.has_current_view(PROJECT));
        }
    }
}

/// A lexical search of `query` over `integrations`, 5 candidates, no filter.
fn lexical_request(integrations: &[&str], query: &str) -> ShardSearchRequest {
    ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: integrations.iter().map(|i| i.to_string()).collect(),
        query: query.into(),
        vector: None,
        categories: vec![],
        max_side_effect: None,
        limit: 5,
        lexical: true,
        stats: None,
        structured: None,
    }
}

/// The stamp of the statistics round over the request's scope.
fn stamp_of(indexes: &ToolIndexes, request: &ShardSearchRequest) -> Option<u64> {
    indexes
        .scope_stats(&TermStatsRequest {
            project_id: PROJECT.into(),
            integrations: request.integrations.clone(),
            query: request.query.clone(),
        })
        .unwrap()
        .stamp
}

/// Waits until a search has rebuilt the project's view in the background.
fn wait_for_view(indexes: &ToolIndexes, request: &ShardSearchRequest) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !indexes.has_current_view(PROJECT) {
        assert!(Instant::now() < deadline, "the view was not rebuilt");
        indexes.search(request);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_write_is_in_every_answer_before_and_after_the_view_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let catalog = Catalog {
        integrations: vec![(vec![vec![1, 2, 3, 4]], vec![]), (vec![vec![5, 6]], vec![])],
        odd_dimension: vec![],
    };
    load(&indexes, &catalog);
    assert!(!indexes.has_current_view(PROJECT));
    indexes.build_views();
    assert!(indexes.has_current_view(PROJECT));
    let mut new = tool("app1", 99, 3, DIM);
    new.record.name = "APP1_ZEPHYR_99".into();
    new.record.description = "zephyr webhook".into();
    let request = lexical_request(&["app0", "app1", "app2"], "zephyr");
    assert!(indexes.search(&request).lexical.is_empty());
    // Stamps: the round's and the search's agree; disjoint scopes add up.
    let before = stamp_of(&indexes, &request);
    assert_eq!(indexes.search(&request).stamp, before);
    let alone = |integration: &str| {
        stamp_of(
            &indexes,
            &ShardSearchRequest {
                records: None,
                integrations: vec![integration.into()],
                ..request.clone()
            },
        )
        .unwrap()
    };
    assert_eq!(
        Some(alone("app0").wrapping_add(alone("app1"))),
        before,
        "app2 has no index yet"
    );
    indexes
        .get_or_create(PROJECT, "app1")
        .unwrap()
        .upsert(vec![new])
        .unwrap();
    assert!(
        !indexes.has_current_view(PROJECT),
        "a write makes the view out of date"
    );
    // The write changes the stamp, on both paths (a search starts the view's rebuild, which may
    // or may not be done by the next call).
    let after = stamp_of(&indexes, &request);
    assert_ne!(after, before);
    assert_eq!(indexes.search(&request).stamp, after);
    let names = |r: ShardSearchResponse| r.lexical.into_iter().map(|h| h.name).collect::<Vec<_>>();
    assert_eq!(names(indexes.search(&request)), ["APP1_ZEPHYR_99"]);
    wait_for_view(&indexes, &request);
    assert_eq!(names(indexes.search(&request)), ["APP1_ZEPHYR_99"]);
    assert_eq!(indexes.search(&request).stamp, after);
    assert_eq!(stamp_of(&indexes, &request), after);
    // A new integration's index makes it out of date too, and is searched at once.
    let mut third = tool("app2", 1, 4, DIM);
    third.record.name = "APP2_ZEPHYR_1".into();
    third.record.description = "zephyr zephyr".into();
    indexes.get_or_create(PROJECT, "app2").unwrap();
    assert!(!indexes.has_current_view(PROJECT));
    indexes
        .get_or_create(PROJECT, "app2")
        .unwrap()
        .upsert(vec![third])
        .unwrap();
    let both = names(indexes.search(&request));
    assert_eq!(both.len(), 2);
    wait_for_view(&indexes, &request);
    assert_eq!(names(indexes.search(&request)), both);
    // Deleting is a write like any other.
    indexes
        .get(PROJECT, "app1")
        .unwrap()
        .delete(&["APP1_ZEPHYR_99".into()])
        .unwrap();
    assert_eq!(names(indexes.search(&request)), ["APP2_ZEPHYR_1"]);
    wait_for_view(&indexes, &request);
    assert_eq!(names(indexes.search(&request)), ["APP2_ZEPHYR_1"]);
}

/// 110 integrations of 50 tools (5,500 rows, many ties), `odd_dimension` with vectors of another
/// dimension, loaded and with a current view.
fn large_project(dir: &std::path::Path, odd_dimension: Vec<usize>) -> (ToolIndexes, Catalog) {
    let indexes = ToolIndexes::open(dir, LexicalConfig::default()).unwrap();
    let catalog = Catalog {
        integrations: (0..110u64)
            .map(|i| (vec![(0..50).map(|j| i * 7 + j).collect()], vec![]))
            .collect(),
        odd_dimension,
    };
    load(&indexes, &catalog);
    indexes.build_views();
    assert!(indexes.has_current_view(PROJECT));
    (indexes, catalog)
}

/// A project large enough for the dense retriever to split its rows over threads (when the machine
/// has two cores or more), with many ties and two indexes of another dimension: the view still
/// answers exactly as the indexes one by one.
#[test]
fn a_large_project_split_over_threads_answers_as_its_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let (indexes, catalog) = large_project(dir.path(), vec![3, 70]);
    for (words, limit, ceiling, vector) in [
        (vec![0, 5], 8, None, Some(1)),
        (vec![2], 50, Some(2), Some(4)),
        (vec![], 3, None, Some(6)),
        (vec![1, 3, 8], 50, Some(0), None),
    ] {
        let search = Search {
            words,
            scope: None,
            categories: vec![],
            ceiling,
            limit,
            lexical: true,
            vector,
            global_stats: false,
        };
        let request = request(&indexes, &catalog, &search);
        let each = strip_timings(indexes.search_each(&request));
        assert_eq!(each.failures.len(), if vector.is_some() { 2 } else { 0 });
        assert_eq!(strip_timings(indexes.search(&request)), each, "{search:?}");
    }
}

/// A search of the view with fewer rows in scope than two workers would share runs alone (its
/// caller may run it on its own thread); one searched index by index, or over more rows, does
/// not (even on one core). Prepared, then run, each answers as the indexes one by one.
#[test]
fn only_a_search_of_the_view_on_one_worker_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (indexes, catalog) = large_project(dir.path(), vec![]);
    for (scope, alone) in [
        (None, false),
        (Some((0..60).collect::<Vec<_>>()), true),
        (Some((0..10).collect()), false),
    ] {
        let search = Search {
            words: vec![0, 5],
            scope,
            categories: vec![],
            ceiling: Some(2),
            limit: 8,
            lexical: true,
            vector: Some(3),
            global_stats: false,
        };
        let request = request(&indexes, &catalog, &search);
        let prepared = indexes.prepare(&request);
        assert_eq!(prepared.runs_alone(), alone, "{search:?}");
        let each = strip_timings(indexes.search_each(&request));
        assert!(!each.lexical.is_empty() && !each.dense.is_empty());
        assert_eq!(strip_timings(indexes.run(&request, prepared)), each);
    }
}

/// Stamps identify statistics, not histories: replicas that wrote the same tools in different
/// batches (so at different generations) stamp alike, with and without their views; one more
/// tool on one of them tells them apart.
#[test]
fn replicas_with_the_same_statistics_stamp_alike() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = ToolIndexes::open(a_dir.path(), LexicalConfig::default()).unwrap();
    let b = ToolIndexes::open(b_dir.path(), LexicalConfig::default()).unwrap();
    let tools: Vec<IndexedTool> = (0..6)
        .map(|n| tool("app0", n, n as u64 * 7919, DIM))
        .collect();
    a.get_or_create(PROJECT, "app0")
        .unwrap()
        .upsert(tools.clone())
        .unwrap();
    let b_index = b.get_or_create(PROJECT, "app0").unwrap();
    for tool in &tools {
        b_index.upsert(vec![tool.clone()]).unwrap();
    }
    assert_ne!(
        a.get(PROJECT, "app0").unwrap().generation(),
        b_index.generation()
    );
    let request = lexical_request(&["app0"], &format!("{} {}", WORDS[1], WORDS[2]));
    let stamp = stamp_of(&a, &request);
    assert!(stamp.is_some());
    assert_eq!(stamp_of(&b, &request), stamp);
    assert_eq!(b.search(&request).stamp, stamp);
    a.build_views();
    b.build_views();
    assert_eq!(a.search(&request).stamp, stamp);
    assert_eq!(stamp_of(&b, &request), stamp);
    b_index.upsert(vec![tool("app0", 6, 12345, DIM)]).unwrap();
    assert_ne!(stamp_of(&b, &request), stamp);
    assert_eq!(b.search(&request).stamp, stamp_of(&b, &request));
}
