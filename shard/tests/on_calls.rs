//! A shard that runs small tool searches on the task of their call (as the `shard` command opens
//! it) answers exactly as one that hands every search to the worker pool: before its search view
//! exists, on the view, for scopes large enough to go to the pool anyway, and after a write.

use agentsearch_common::shard::{
    IndexedTool, ShardApi, ShardSearchRequest, ShardSearchResponse, ShardUpsertRequest,
    TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_shard::LocalShard;

const PROJECT: &str = "00000000-0000-4000-8000-000000000007";
const DIM: usize = 16;
const WORDS: [&str; 8] = [
    "order", "refund", "invoice", "customer", "ticket", "calendar", "message", "file",
];

/// Tool `i` of `integration`: a description of three of the words, a vector between two axes.
fn tool(integration: usize, i: usize) -> IndexedTool {
    let n = integration * 31 + i;
    let mut vector = vec![0.05f32; DIM];
    vector[n % DIM] = 1.0;
    vector[(n * 7 + 3) % DIM] += 0.5;
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|x| *x /= norm);
    IndexedTool {
        record: ToolRecord {
            name: format!("APP{integration}_TOOL_{i}"),
            integration: format!("app{integration}"),
            category: "misc".into(),
            side_effect: [SideEffect::Read, SideEffect::Write, SideEffect::Send][n % 3],
            description: format!(
                "{} the {} of a {}",
                WORDS[n % 8],
                WORDS[(n / 3) % 8],
                WORDS[(n / 7) % 8]
            ),
            parameters: r#"{"type":"object","properties":{}}"#.into(),
            tokens: 20,
        },
        vector,
    }
}

fn request(integrations: std::ops::Range<usize>, q: usize) -> ShardSearchRequest {
    let mut vector = vec![0.0f32; DIM];
    vector[q % DIM] = 1.0;
    ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: integrations.map(|i| format!("app{i}")).collect(),
        query: format!("{} {}", WORDS[q % 8], WORDS[(q + 3) % 8]),
        vector: Some(vector),
        categories: vec![],
        max_side_effect: if q % 2 == 0 {
            Some(SideEffect::Write)
        } else {
            None
        },
        limit: 8,
        lexical: true,
        stats: None,
        structured: None,
    }
}

fn without_timings(mut response: ShardSearchResponse) -> ShardSearchResponse {
    response.timings = Default::default();
    response
}

async fn load(shard: &LocalShard, integrations: std::ops::Range<usize>, per: usize) {
    let tools = integrations
        .flat_map(|integration| (0..per).map(move |i| tool(integration, i)))
        .collect();
    shard
        .upsert_tools(ShardUpsertRequest {
            project_id: PROJECT.into(),
            tools,
        })
        .await
        .unwrap();
}

/// Both shards' answers to the same searches and statistics requests, compared.
async fn same_answers(pooled: &LocalShard, on_calls: &LocalShard, integrations: usize) {
    // Scopes searched index by index (a few integrations, one with a name no shard holds) and
    // on the view: on one worker (half the project) and on two (all of it, on two cores).
    let scopes = [
        0..3,
        0..integrations / 2,
        0..integrations,
        integrations - 2..integrations + 1,
    ];
    for (s, scope) in scopes.into_iter().enumerate() {
        for q in 0..6 {
            let request = request(scope.clone(), q + s);
            let stats = TermStatsRequest {
                project_id: PROJECT.into(),
                integrations: request.integrations.clone(),
                query: request.query.clone(),
            };
            assert_eq!(
                pooled.term_stats(stats.clone()).await.unwrap(),
                on_calls.term_stats(stats).await.unwrap(),
                "statistics of {:?}",
                request.query
            );
            let expected = without_timings(pooled.search_tools(request.clone()).await.unwrap());
            let got = without_timings(on_calls.search_tools(request).await.unwrap());
            assert!(!expected.lexical.is_empty() && !expected.dense.is_empty());
            assert_eq!(expected, got, "scope {s}, query {q}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_on_calls_answer_as_the_pooled_ones() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pooled = LocalShard::open(a.path(), Default::default(), Default::default()).unwrap();
    let on_calls = LocalShard::open(b.path(), Default::default(), Default::default())
        .unwrap()
        .searching_on_calls();
    // 40 integrations of 120 tools: 4,800 rows, enough for two workers over the whole project
    // (on a machine with two cores or more), one over half of it.
    let integrations = 40;
    for shard in [&pooled, &on_calls] {
        load(shard, 0..integrations, 120).await;
    }
    // The first searches run before the views are built (one index at a time); later ones on
    // the views, built in the background.
    for _ in 0..3 {
        same_answers(&pooled, &on_calls, integrations).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // A write makes the views stale: searched one by one again, then on the new views.
    for shard in [&pooled, &on_calls] {
        load(shard, 5..7, 130).await;
    }
    for _ in 0..3 {
        same_answers(&pooled, &on_calls, integrations).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A small search on a current view runs on its call's task: it is answered, statistics too,
/// while every thread of the worker pool is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_search_needs_no_thread_of_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    {
        let shard = LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap();
        load(&shard, 0..10, 20).await;
    }
    // Opening a data dir builds its views.
    let shard = LocalShard::open(dir.path(), Default::default(), Default::default())
        .unwrap()
        .searching_on_calls();
    let threads = rayon::current_num_threads();
    let (held, release) = std::sync::mpsc::channel::<()>();
    let release = std::sync::Arc::new(std::sync::Mutex::new(release));
    let (started, all_held) = std::sync::mpsc::channel::<()>();
    for _ in 0..threads {
        let (release, started) = (release.clone(), started.clone());
        rayon::spawn(move || {
            started.send(()).unwrap();
            let _ = release.lock().unwrap().recv();
        });
    }
    for _ in 0..threads {
        all_held.recv().unwrap();
    }
    let request = request(0..10, 1);
    let stats = TermStatsRequest {
        project_id: PROJECT.into(),
        integrations: request.integrations.clone(),
        query: request.query.clone(),
    };
    let answered = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        (
            shard.term_stats(stats).await.unwrap(),
            shard.search_tools(request).await.unwrap(),
        )
    })
    .await;
    // Let the pool go before asserting, so that a failure does not hang the test.
    drop(held);
    let (stats, answer) = answered.expect("the search waited for the pool");
    assert!(stats.stamp.is_some());
    assert!(!answer.lexical.is_empty() && !answer.dense.is_empty());
}
