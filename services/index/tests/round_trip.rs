//! A tool index written, reopened from disk, and searched: lexical and dense retrieval, filters,
//! replacement and deletion survive a restart; a torn write (vector file older than the lexical
//! index) is repaired on open.

use std::collections::HashSet;

use agentsearch_common::config::LexicalConfig;
use agentsearch_common::shard::{IndexedTool, ShardSearchRequest, TermStatsRequest};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_index::ToolIndexes;

const PROJECT: &str = "00000000-0000-4000-8000-000000000001";

fn tool(
    name: &str,
    integration: &str,
    side_effect: SideEffect,
    description: &str,
    axis: usize,
) -> IndexedTool {
    let mut vector = vec![0.0f32; 8];
    vector[axis] = 1.0;
    IndexedTool {
        record: ToolRecord {
            name: name.into(),
            integration: integration.into(),
            category: if integration == "slack" { "messaging".into() } else { "crm".into() },
            side_effect,
            description: description.into(),
            parameters: r#"{"type":"object","properties":{"channel":{"type":"string","description":"channel id"}}}"#.into(),
            tokens: 42,
        },
        vector,
    }
}

fn search(
    indexes: &ToolIndexes,
    query: &str,
    axis: usize,
    max: Option<SideEffect>,
) -> (Vec<String>, Vec<String>) {
    let mut vector = vec![0.0f32; 8];
    vector[axis] = 1.0;
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: vec!["slack".into(), "hubspot".into()],
        query: query.into(),
        vector: Some(vector),
        categories: vec![],
        max_side_effect: max,
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    });
    assert!(response.failures.is_empty(), "{:?}", response.failures);
    (
        response.lexical.into_iter().map(|h| h.name).collect(),
        response.dense.into_iter().map(|h| h.name).collect(),
    )
}

#[test]
fn write_reopen_search() {
    let dir = tempfile::tempdir().unwrap();
    {
        let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
        let slack = indexes.get_or_create(PROJECT, "slack").unwrap();
        slack
            .upsert(vec![
                tool(
                    "SLACK_POST_MESSAGE",
                    "slack",
                    SideEffect::Send,
                    "Post a message to a channel.",
                    0,
                ),
                tool(
                    "SLACK_LIST_CHANNELS",
                    "slack",
                    SideEffect::Read,
                    "List the channels of a workspace.",
                    1,
                ),
                tool(
                    "SLACK_DELETE_MESSAGE",
                    "slack",
                    SideEffect::Delete,
                    "Delete a message.",
                    2,
                ),
            ])
            .unwrap();
        let hubspot = indexes.get_or_create(PROJECT, "hubspot").unwrap();
        hubspot
            .upsert(vec![tool(
                "HUBSPOT_CREATE_CONTACT",
                "hubspot",
                SideEffect::Write,
                "Create a contact.",
                3,
            )])
            .unwrap();
        // Replace one tool (new description and vector) and delete another.
        slack
            .upsert(vec![tool(
                "SLACK_LIST_CHANNELS",
                "slack",
                SideEffect::Read,
                "Enumerate conversations.",
                4,
            )])
            .unwrap();
        assert_eq!(
            slack
                .delete(&["SLACK_DELETE_MESSAGE".into(), "NOPE".into()])
                .unwrap()
                .0,
            1
        );
        assert_eq!(slack.generation(), 3);
    }
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    assert_eq!(indexes.counts(), (2, 3));
    assert_eq!(indexes.get(PROJECT, "slack").unwrap().generation(), 3);

    let (lexical, dense) = search(&indexes, "post message", 0, None);
    assert_eq!(lexical, ["SLACK_POST_MESSAGE"]);
    assert_eq!(dense[0], "SLACK_POST_MESSAGE");
    assert_eq!(dense.len(), 3);

    let (lexical, dense) = search(&indexes, "conversations", 4, None);
    assert_eq!(lexical, ["SLACK_LIST_CHANNELS"]);
    assert_eq!(dense[0], "SLACK_LIST_CHANNELS");
    let (lexical, _) = search(&indexes, "delete", 2, None);
    assert!(lexical.is_empty());

    // The ceiling: `send` is above `write`; it is reported as excluded, not returned.
    let request = ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: vec!["slack".into(), "hubspot".into()],
        query: "message channel contact".into(),
        vector: Some({
            let mut v = vec![0.0; 8];
            v[0] = 1.0;
            v
        }),
        categories: vec![],
        max_side_effect: Some(SideEffect::Write),
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    };
    let response = indexes.search(&request);
    let eligible: HashSet<String> = response
        .lexical
        .iter()
        .chain(&response.dense)
        .map(|h| h.name.clone())
        .collect();
    assert!(!eligible.contains("SLACK_POST_MESSAGE"));
    assert!(
        response
            .excluded_lexical
            .iter()
            .any(|h| h.name == "SLACK_POST_MESSAGE")
    );
    assert!(
        response
            .excluded_dense
            .iter()
            .any(|h| h.name == "SLACK_POST_MESSAGE")
    );
    let returned: HashSet<String> = response.tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(returned, eligible);

    // Categories scope both retrievers.
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        categories: vec!["crm".into()],
        max_side_effect: None,
        ..request
    });
    assert!(
        response
            .dense
            .iter()
            .all(|h| h.name == "HUBSPOT_CREATE_CONTACT")
    );
    assert_eq!(response.lexical.len(), 1);
}

#[test]
fn vectors_come_from_the_commit_and_an_old_snapshot_is_removed() {
    // Earlier releases kept a FAISS snapshot beside the index; it could be older than the commit.
    // The commit alone decides now: a stale or garbled snapshot is ignored and removed on open.
    let dir = tempfile::tempdir().unwrap();
    {
        let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
        let slack = indexes.get_or_create(PROJECT, "slack").unwrap();
        slack
            .upsert(vec![tool(
                "SLACK_POST_MESSAGE",
                "slack",
                SideEffect::Send,
                "Post a message.",
                0,
            )])
            .unwrap();
        slack
            .upsert(vec![tool(
                "SLACK_LIST_CHANNELS",
                "slack",
                SideEffect::Read,
                "List channels.",
                1,
            )])
            .unwrap();
    }
    let index_dir = dir.path().join("tools").join(PROJECT).join("slack");
    std::fs::write(index_dir.join("vectors.faiss"), b"not a faiss index").unwrap();
    std::fs::write(
        index_dir.join("vectors.json"),
        br#"{"generation": 1, "dim": 8}"#,
    )
    .unwrap();
    let indexes = ToolIndexes::open(dir.path(), LexicalConfig::default()).unwrap();
    let (_, dense) = search(&indexes, "channels", 1, None);
    assert_eq!(dense, ["SLACK_LIST_CHANNELS", "SLACK_POST_MESSAGE"]);
    assert!(!index_dir.join("vectors.faiss").exists());
    assert!(!index_dir.join("vectors.json").exists());
}

#[test]
fn global_statistics_make_scores_independent_of_partitioning() {
    // The same tools in one index, or spread over two, score the same under the combined statistics.
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let tools = [
        tool(
            "A_SEND_MESSAGE",
            "slack",
            SideEffect::Send,
            "send a message to a channel",
            0,
        ),
        tool(
            "A_READ_MESSAGE",
            "slack",
            SideEffect::Read,
            "read one message",
            1,
        ),
        tool(
            "B_SEND_EMAIL",
            "hubspot",
            SideEffect::Send,
            "send an email message to a contact",
            2,
        ),
        tool(
            "B_LIST_CONTACTS",
            "hubspot",
            SideEffect::Read,
            "list contacts",
            3,
        ),
    ];
    let single = ToolIndexes::open(one.path(), LexicalConfig::default()).unwrap();
    let split = ToolIndexes::open(two.path(), LexicalConfig::default()).unwrap();
    for t in &tools {
        let mut renamed = t.clone();
        renamed.record.integration = "combined".into();
        single
            .get_or_create(PROJECT, "combined")
            .unwrap()
            .upsert(vec![renamed])
            .unwrap();
        split
            .get_or_create(PROJECT, &t.record.integration)
            .unwrap()
            .upsert(vec![t.clone()])
            .unwrap();
    }
    let query = "send message";
    let stats_single = single
        .term_stats(&TermStatsRequest {
            project_id: PROJECT.into(),
            integrations: vec!["combined".into()],
            query: query.into(),
        })
        .unwrap();
    let stats_split = split
        .term_stats(&TermStatsRequest {
            project_id: PROJECT.into(),
            integrations: vec!["slack".into(), "hubspot".into()],
            query: query.into(),
        })
        .unwrap();
    assert_eq!(stats_single, stats_split);
    let run = |indexes: &ToolIndexes, integrations: Vec<String>| {
        indexes
            .search(&ShardSearchRequest {
                records: None,
                project_id: PROJECT.into(),
                integrations,
                query: query.into(),
                vector: None,
                categories: vec![],
                max_side_effect: None,
                limit: 10,
                lexical: true,
                stats: Some(stats_single.clone()),
                structured: None,
            })
            .lexical
            .into_iter()
            .map(|h| (h.name, h.score))
            .collect::<Vec<_>>()
    };
    let a = run(&single, vec!["combined".into()]);
    let b = run(&split, vec!["slack".into(), "hubspot".into()]);
    assert_eq!(a.len(), 3);
    for ((na, sa), (nb, sb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        assert!((sa - sb).abs() < 1e-5, "{na}: {sa} vs {sb}");
    }
}

#[test]
fn bm25f_saturates_a_term_once_over_all_fields() {
    // b = 0: no length normalisation, so the expected score is easy to write down.
    let dir = tempfile::tempdir().unwrap();
    let lexical = LexicalConfig {
        b: 0.0,
        ..LexicalConfig::default()
    };
    let indexes = ToolIndexes::open(dir.path(), lexical).unwrap();
    let index = indexes.get_or_create(PROJECT, "alpha").unwrap();
    index
        .upsert(vec![
            tool(
                "ALPHA_FORECAST",
                "alpha",
                SideEffect::Read,
                "forecast forecast",
                0,
            ),
            tool(
                "ALPHA_OTHER",
                "alpha",
                SideEffect::Read,
                "something else",
                1,
            ),
        ])
        .unwrap();
    let response = indexes.search(&ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: vec!["alpha".into()],
        query: "forecasts".into(),
        vector: None,
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    });
    assert_eq!(response.lexical.len(), 1);
    // Weighted frequency: name 2.0 x 1 + description 1.0 x 2 = 4, saturated once with k1 = 1.2;
    // idf with N = 2, df = 1: ln(1 + 1.5 / 1.5) = ln 2.
    let x = 2.0f32 * 1.0 + 1.0 * 2.0;
    let expected = 2f32.ln() * x * 2.2 / (1.2 + x);
    let got = response.lexical[0].score;
    assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
    // A sum of per-field BM25 scores would give more: the repetition across fields is saturated.
    let per_field = 2f32.ln() * (2.0 * 2.2 / 2.2 + 2.0 * 2.2 / 3.2);
    assert!(got < per_field);
}
