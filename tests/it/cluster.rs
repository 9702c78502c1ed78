//! Three shards and a router over real gRPC on loopback, with PostgreSQL metadata. Every
//! expectation is computed from the fixture catalog independently of the service's code paths.

use std::collections::{BTreeMap, HashSet};

use agentsearch_common::shard::ShardApi;
use agentsearch_common::tool::{SideEffect, ToolDefinition};
use agentsearch_proto::v1 as pb;
use agentsearch_tests::*;
use tonic_types::StatusExt;

fn catalog() -> Vec<ToolDefinition> {
    fixture_catalog()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Tokens of a tool's LLM definition, counted here with tiktoken directly.
fn tokens_of(tool: &ToolDefinition) -> u64 {
    let definition = serde_json::json!({
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    });
    tiktoken_rs::o200k_base_singleton().count_ordinary(&serde_json::to_string(&definition).unwrap())
        as u64
}

/// Every word (lowercase alphanumeric run) of a tool's searchable text.
fn words_of(tool: &ToolDefinition) -> HashSet<String> {
    let mut text = format!("{} {}", tool.name.replace('_', " "), tool.description);
    if let Some(props) = tool
        .parameters
        .as_ref()
        .and_then(|p| p["properties"].as_object())
    {
        for (name, prop) in props {
            text.push_str(&format!(
                " {} {}",
                name.replace('_', " "),
                prop["description"].as_str().unwrap_or("")
            ));
        }
    }
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

async fn loaded(shards: usize) -> Cluster {
    let cluster = Cluster::start(shards).await;
    load_catalog(cluster.grpc, PROJECT, &catalog(), 10).await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_load_is_idempotent_and_placement_is_recorded() {
    let cluster = Cluster::start(3).await;
    let tools = catalog();
    let acks = load_catalog(cluster.grpc, PROJECT, &tools, 10).await;
    assert_eq!(acks.len(), 5);
    assert_eq!(acks.iter().map(|a| a.upserted).sum::<u32>(), 42);
    assert_eq!(acks.last().unwrap().total, 42);
    // A second load of the same catalog writes nothing.
    let acks = load_catalog(cluster.grpc, PROJECT, &tools, 10).await;
    assert_eq!(acks.iter().map(|a| a.unchanged).sum::<u32>(), 42);
    assert_eq!(acks.iter().map(|a| a.upserted).sum::<u32>(), 0);

    // Every integration is placed on exactly one live shard, and each shard holds exactly the
    // tools of the integrations placed on it.
    let placements = cluster.placements().await;
    let integrations: HashSet<&str> = tools.iter().map(|t| t.integration.as_str()).collect();
    assert_eq!(placements.len(), integrations.len());
    let ids: Vec<String> = cluster.router.shards().ids();
    let mut expected_per_shard: BTreeMap<String, u64> = BTreeMap::new();
    for (integration, shard) in &placements {
        assert!(ids.contains(shard), "{shard} is not a live shard");
        let count = tools
            .iter()
            .filter(|t| &t.integration == integration)
            .count() as u64;
        *expected_per_shard.entry(shard.clone()).or_default() += count;
    }
    for shard in &cluster.local {
        let info = shard.info().await.unwrap();
        assert_eq!(
            info.tools,
            expected_per_shard.get(&info.shard_id).copied().unwrap_or(0),
            "{}",
            info.shard_id
        );
    }

    // A changed tool is rewritten; moving a tool to another integration removes the old copy.
    let mut moved = tools
        .iter()
        .find(|t| t.name == "CRMLY_LOG_CALL")
        .unwrap()
        .clone();
    moved.integration = "ticketeer".into();
    moved.description = "Log a phone call against a ticket.".into();
    let acks = load_catalog(cluster.grpc, PROJECT, std::slice::from_ref(&moved), 10).await;
    assert_eq!(acks[0].upserted, 1);
    let mut request = search_request("log a phone call");
    request.top_k = Some(50);
    request.mode = Some("lexical".into());
    let response = search(cluster.grpc, request).await.unwrap();
    let hits: Vec<&pb::ToolResult> = response
        .tools
        .iter()
        .filter(|t| t.intent_name == "CRMLY_LOG_CALL")
        .collect();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].integration, "ticketeer");
    let total: u64 = futures_sum(&cluster).await;
    assert_eq!(total, 42);
}

async fn futures_sum(cluster: &Cluster) -> u64 {
    let mut total = 0;
    for shard in &cluster.local {
        total += shard.info().await.unwrap().tools;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_ranking_matches_brute_force_cosine() {
    let cluster = loaded(3).await;
    let tools = catalog();
    let model = embedder();
    let texts: Vec<String> = tools
        .iter()
        .map(|t| t.to_record().embedding_text())
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = model.embed(&refs).unwrap();
    for query in [
        "share a document with a colleague",
        "merge the pull request",
        "open a support ticket",
    ] {
        let q = model.embed(&[query]).unwrap().remove(0);
        let score = |name: &str| {
            cosine(
                &q,
                &vectors[tools.iter().position(|t| t.name == name).unwrap()],
            )
        };
        let mut request = search_request(query);
        request.top_k = Some(50);
        request.mode = Some("dense".into());
        let response = search(cluster.grpc, request).await.unwrap();
        let got = names(&response);
        assert_eq!(got.len(), tools.len(), "every tool is a dense candidate");
        for pair in got.windows(2) {
            assert!(
                score(&pair[0]) >= score(&pair[1]) - 1e-4,
                "{query}: {} before {}",
                pair[0],
                pair[1]
            );
        }
        let best = tools
            .iter()
            .map(|t| t.name.as_str())
            .max_by(|a, b| score(a).total_cmp(&score(b)))
            .unwrap();
        assert_eq!(got[0], best, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_matches_are_exactly_the_tools_containing_the_term() {
    let cluster = loaded(3).await;
    let tools = catalog();
    for term in ["zebra", "quokka", "invitees", "squash"] {
        let expected: HashSet<String> = tools
            .iter()
            .filter(|t| words_of(t).contains(term))
            .map(|t| t.name.clone())
            .collect();
        assert!(!expected.is_empty(), "{term} must occur in the fixture");
        let mut request = search_request(term);
        request.top_k = Some(50);
        request.mode = Some("lexical".into());
        let response = search(cluster.grpc, request).await.unwrap();
        let got: HashSet<String> = names(&response).into_iter().collect();
        assert_eq!(got, expected, "{term}");
        assert_eq!(
            response.usage.as_ref().unwrap().candidates as usize,
            expected.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_and_usage_counts_match_the_catalog() {
    let cluster = loaded(3).await;
    let tools = catalog();
    let integrations = ["acme_chat", "acme_mail", "crmly"];
    let categories = ["messaging", "email"];
    let ceiling = SideEffect::Write;
    let in_scope: Vec<&ToolDefinition> = tools
        .iter()
        .filter(|t| integrations.contains(&t.integration.as_str()))
        .filter(|t| categories.contains(&t.category.as_deref().unwrap()))
        .collect();
    let allowed: HashSet<&str> = in_scope
        .iter()
        .filter(|t| matches!(t.side_effect, Some(SideEffect::Read | SideEffect::Write)))
        .map(|t| t.name.as_str())
        .collect();
    let excluded = in_scope.len() - allowed.len();
    assert!(
        in_scope.len() <= 50,
        "the whole scope fits in the candidate window"
    );

    let mut request = search_request("send a message to the team");
    request.top_k = Some(5);
    request.integrations = integrations.iter().map(|s| s.to_string()).collect();
    request.categories = categories.iter().map(|s| s.to_string()).collect();
    request.max_side_effect = Some(ceiling.as_str().into());
    let response = search(cluster.grpc, request).await.unwrap();
    for tool in &response.tools {
        assert!(
            allowed.contains(tool.intent_name.as_str()),
            "{} is not allowed",
            tool.intent_name
        );
        assert_eq!(tool.approval_required, tool.side_effect != "read");
    }
    let usage = response.usage.unwrap();
    let visibility = usage.visibility.unwrap();
    assert_eq!(usage.candidates as usize, allowed.len());
    assert_eq!(usage.returned, 5);
    assert_eq!(usage.omitted_for_top_k as usize, allowed.len() - 5);
    assert_eq!(usage.omitted_for_budget, 0);
    assert_eq!(usage.omitted_for_side_effect as usize, excluded);
    assert_eq!(visibility.entitled_integrations, 3);
    assert_eq!(visibility.candidates_before_filter as usize, in_scope.len());
    assert_eq!(visibility.candidates_after_filter as usize, allowed.len());
    assert_eq!(usage.strategy, "hybrid");
    let expected_tokens: u64 = response
        .tools
        .iter()
        .map(|r| tokens_of(tools.iter().find(|t| t.name == r.intent_name).unwrap()))
        .sum();
    assert_eq!(usage.tool_tokens, expected_tokens);
    for r in &response.tools {
        assert_eq!(
            u64::from(r.tokens),
            tokens_of(tools.iter().find(|t| t.name == r.intent_name).unwrap())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_packing_matches_an_independent_greedy_pass() {
    let cluster = loaded(3).await;
    let tools = catalog();
    let tokens = |name: &str| tokens_of(tools.iter().find(|t| t.name == name).unwrap());
    let mut full = search_request("email a customer about their ticket");
    full.top_k = Some(50);
    let ranked = names(&search(cluster.grpc, full).await.unwrap());
    assert_eq!(ranked.len(), tools.len());
    // A budget one token short of the first three tools.
    let budget = tokens(&ranked[0]) + tokens(&ranked[1]) + tokens(&ranked[2]) - 1;
    let mut expected = Vec::new();
    let mut used = 0;
    let mut skipped = 0;
    for name in &ranked {
        if used + tokens(name) <= budget {
            used += tokens(name);
            expected.push(name.clone());
        } else {
            skipped += 1;
        }
    }
    let mut request = search_request("email a customer about their ticket");
    request.max_tool_tokens = Some(budget as u32);
    let response = search(cluster.grpc, request).await.unwrap();
    let usage = response.usage.clone().unwrap();
    assert_eq!(names(&response), expected);
    assert_eq!(usage.tool_tokens, used);
    assert_eq!(usage.omitted_for_budget, skipped);
    assert_eq!(usage.omitted_for_top_k, 0);
    assert_eq!(
        usage.returned + usage.omitted_for_budget + usage.omitted_for_top_k,
        usage.candidates
    );
}

/// The shards send the records of the hits a page usually reaches (twice the window in each
/// list); a search whose budget makes packing walk further reads the others from the shards and
/// answers exactly as the greedy pass over the whole ranking, each tool as the whole ranking
/// returned it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packing_past_the_records_sent_reads_them_from_the_shards() {
    let cluster = loaded(3).await;
    let tools = catalog();
    let tokens = |name: &str| tokens_of(tools.iter().find(|t| t.name == name).unwrap());
    let query = "email a customer about their ticket";
    let mut full = search_request(query);
    full.top_k = Some(50);
    let full = search(cluster.grpc, full).await.unwrap();
    let ranked = names(&full);
    // topK 1: the shards send the records of their first 2 hits of each list, 12 at most. No
    // tool of the first 12 fits the budget.
    let budget = ranked[..12].iter().map(|n| tokens(n)).min().unwrap() - 1;
    let (mut expected, mut used, mut skipped) = (Vec::new(), 0, 0);
    for name in &ranked {
        if expected.len() == 1 {
            break;
        }
        if used + tokens(name) <= budget {
            used += tokens(name);
            expected.push(name.clone());
        } else {
            skipped += 1;
        }
    }
    assert_eq!(
        expected.len(),
        1,
        "the fixture has a tool under {budget} tokens"
    );
    let mut request = search_request(query);
    request.top_k = Some(1);
    request.max_tool_tokens = Some(budget as u32);
    request.diagnostics = true;
    let response = search(cluster.grpc, request).await.unwrap();
    assert_eq!(names(&response), expected);
    let usage = response.usage.clone().unwrap();
    assert_eq!(usage.tool_tokens, used);
    assert_eq!(usage.omitted_for_budget, skipped);
    assert_eq!(
        usage.returned + usage.omitted_for_budget + usage.omitted_for_top_k,
        usage.candidates
    );
    for result in &response.tools {
        let whole = full
            .tools
            .iter()
            .find(|t| t.intent_name == result.intent_name)
            .unwrap();
        assert_eq!(result.tool, whole.tool, "{}", result.intent_name);
        assert_eq!(
            (&result.category, &result.side_effect, result.tokens),
            (&whole.category, &whole.side_effect, whole.tokens)
        );
        assert_eq!(result.catalog_version, whole.catalog_version);
    }
    let steps: Vec<&str> = response
        .trace
        .as_ref()
        .unwrap()
        .steps
        .iter()
        .map(|s| s.label.as_str())
        .collect();
    assert!(steps.contains(&"records"), "{steps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_rank_exactly_like_one() {
    let three = loaded(3).await;
    let one = loaded(1).await;
    for (query, mode) in [
        ("send an email to a customer", "hybrid"),
        ("delete a file", "hybrid"),
        ("zebra", "lexical"),
        ("list open pull requests", "lexical"),
        ("message", "lexical"),
        ("rename a room", "dense"),
    ] {
        let mut request = search_request(query);
        request.top_k = Some(20);
        request.mode = Some(mode.into());
        let a = search(three.grpc, request.clone()).await.unwrap();
        let b = search(one.grpc, request).await.unwrap();
        assert_eq!(names(&a), names(&b), "{query} ({mode})");
        for (x, y) in a.tools.iter().zip(&b.tools) {
            assert!((x.relevancy - y.relevancy).abs() < 1e-12);
        }
        assert_eq!(a.usage, b.usage, "{query} ({mode})");
    }
}

/// Each result's name and raw BM25 score, and the labels of the trace's steps.
fn lexical_scores(response: &pb::SearchToolsResponse) -> (Vec<(String, f64)>, Vec<String>) {
    let scores = response
        .tools
        .iter()
        .map(|t| {
            let hit = t.explain.as_ref().and_then(|e| e.lexical.as_ref());
            (t.intent_name.clone(), hit.map_or(f64::NAN, |h| h.score))
        })
        .collect();
    let steps = response
        .trace
        .as_ref()
        .map(|t| t.steps.iter().map(|s| s.label.clone()).collect())
        .unwrap_or_default();
    (scores, steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_statistics_skip_their_round_until_a_write_changes_them() {
    // 24 integrations: they are on several of the three shards (all on one: about one run in a
    // hundred billion), so the router needs global statistics.
    let three = Cluster::start(3).await;
    let one = Cluster::start(1).await;
    for cluster in [&three, &one] {
        load_catalog(cluster.grpc, PROJECT, &spread_catalog(), 10).await;
    }
    let query = "send an email message to a customer";
    let ask = |grpc| {
        let mut request = search_request(query);
        request.top_k = Some(20);
        request.mode = Some("lexical".into());
        request.diagnostics = true;
        async move { lexical_scores(&search(grpc, request).await.unwrap()) }
    };
    let has = |steps: &[String], label: &str| steps.iter().any(|s| s == label);
    let assert_cached = |steps: &[String]| {
        assert!(
            has(steps, "term_stats_cached") && !has(steps, "term_stats"),
            "{steps:?}"
        );
    };
    let same = |a: &[(String, f64)], b: &[(String, f64)]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.0 == y.0 && (x.1 - y.1).abs() < 1e-9)
    };

    // Gathered, then confirmed by the search: the next search of the query skips the round.
    let (first, steps) = ask(three.grpc).await;
    assert!(
        has(&steps, "term_stats") && !has(&steps, "term_stats_cached"),
        "{steps:?}"
    );
    let (reference, _) = ask(one.grpc).await;
    assert!(!reference.is_empty());
    assert!(same(&first, &reference), "{first:?}\n{reference:?}");
    let (second, steps) = ask(three.grpc).await;
    assert_cached(&steps);
    assert!(same(&second, &reference), "{second:?}\n{reference:?}");

    // A write to one integration changes the query's statistics (documents and the terms'
    // frequencies): the shard's stamp no longer matches, and the router gathers and searches
    // again. The scores are those of the new catalog, as on one shard.
    let mut added = spread_catalog()[0].clone();
    added.name = format!("{}_NOTIFY", added.name);
    added.description = "Send an email message to a customer, or a message to every customer of \
                         an account"
        .into();
    for cluster in [&three, &one] {
        load_catalog(cluster.grpc, PROJECT, std::slice::from_ref(&added), 1).await;
    }
    let (reference, _) = ask(one.grpc).await;
    assert!(!same(&reference, &second), "the write changed no score");
    let (third, steps) = ask(three.grpc).await;
    assert!(
        has(&steps, "term_stats_stale") && has(&steps, "term_stats"),
        "{steps:?}"
    );
    assert!(same(&third, &reference), "{third:?}\n{reference:?}");
    let (fourth, steps) = ask(three.grpc).await;
    assert_cached(&steps);
    assert!(same(&fourth, &reference), "{fourth:?}\n{reference:?}");

    // Another scope of the same query is another entry: one integration of each of two shards.
    let placements = three.placements().await;
    let (first_integration, first_shard) = placements[0].clone();
    let other = placements
        .iter()
        .find(|(_, shard)| *shard != first_shard)
        .expect("the integrations are on several shards")
        .0
        .clone();
    let mut narrow = search_request(query);
    narrow.integrations = vec![first_integration, other];
    narrow.mode = Some("lexical".into());
    narrow.diagnostics = true;
    let (_, steps) = lexical_scores(&search(three.grpc, narrow).await.unwrap());
    assert!(
        has(&steps, "term_stats") && !has(&steps, "term_stats_cached"),
        "{steps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_shard_is_reported_and_the_rest_answers() {
    let mut cluster = loaded(3).await;
    let placements = cluster.placements().await;
    // Stop the shard that holds the most integrations.
    let mut per_shard: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (integration, shard) in &placements {
        per_shard
            .entry(shard.clone())
            .or_default()
            .push(integration.clone());
    }
    let (victim, lost) = per_shard
        .iter()
        .max_by_key(|(_, v)| v.len())
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    let index = cluster.local.iter().position(|s| s.id() == victim).unwrap();
    cluster.shards.remove(index).stop().await;

    let mut request = search_request("send an email");
    request.top_k = Some(50);
    let response = search(cluster.grpc, request).await.unwrap();
    let failed: HashSet<String> = response
        .errors
        .iter()
        .map(|e| e.integration.clone())
        .collect();
    assert_eq!(failed, lost.iter().cloned().collect::<HashSet<_>>());
    assert!(
        response
            .errors
            .iter()
            .all(|e| e.code == "UNAVAILABLE" || e.code == "TIMEOUT"),
        "{:?}",
        response.errors
    );
    assert!(
        response
            .tools
            .iter()
            .all(|t| !lost.contains(&t.integration))
    );
    let reachable = catalog()
        .iter()
        .filter(|t| !lost.contains(&t.integration))
        .count();
    assert_eq!(response.tools.len(), reachable);
    let usage = response.usage.unwrap();
    assert!(usage.partial);
    let mut lost_sorted = lost.clone();
    lost_sorted.sort();
    assert_eq!(usage.failed_integrations, lost_sorted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_errors_carry_rich_details() {
    let cluster = Cluster::start(1).await;
    let mut request = search_request("x");
    request.top_k = Some(51);
    request.max_side_effect = Some("admin".into());
    let status = search(cluster.grpc, request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let details = status.get_error_details();
    assert_eq!(details.error_info().unwrap().reason, "REQUEST_INVALID");
    let fields: Vec<&str> = details
        .bad_request()
        .unwrap()
        .field_violations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    assert_eq!(fields, ["topK", "maxSideEffect"]);
    assert!(details.request_info().is_some());
    assert!(status.metadata().get_bin("agentsearch-error-bin").is_some());

    let status = search(
        cluster.grpc,
        pb::SearchToolsRequest {
            project_id: "nope".into(),
            query: "x".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(
        status
            .get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "projectId"
    );
}

/// A client that waits for each acknowledgement before sending the next batch gets it: batches
/// are acknowledged as soon as they are indexed, not when the next one arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_arrive_without_the_next_batch() {
    let cluster = Cluster::start(1).await;
    let tools = catalog();
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::UpsertToolsRequest>(1);
    let mut client = pb::tool_catalog_client::ToolCatalogClient::new(channel(cluster.grpc).await);
    let mut acks = client
        .upsert_tools(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    for (i, chunk) in tools.chunks(20).enumerate() {
        tx.send(pb::UpsertToolsRequest {
            project_id: PROJECT.into(),
            tools: chunk.iter().map(to_proto_tool).collect(),
        })
        .await
        .unwrap();
        let ack = tokio::time::timeout(std::time::Duration::from_secs(60), acks.message())
            .await
            .unwrap_or_else(|_| panic!("no acknowledgement for batch {i}"))
            .unwrap()
            .unwrap();
        assert_eq!(ack.upserted as usize, chunk.len());
    }
    drop(tx);
    assert!(acks.message().await.unwrap().is_none());
}

/// The same tool in consecutive batches of one stream ends with the last version, even when the
/// last version equals what the catalog held before the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_version_in_a_stream_wins() {
    let cluster = Cluster::start(1).await;
    let tools = catalog();
    load_catalog(cluster.grpc, PROJECT, &tools, 50).await;
    let original = tools
        .iter()
        .find(|t| t.name == "CODEBOX_QUOKKA_AUDIT")
        .unwrap()
        .clone();
    let mut changed = original.clone();
    changed.description = "Run the wombat audit over a repository's dependency manifest.".into();
    // Batch 1 changes the tool, batch 2 restores it: both are sent before either is written.
    let acks = load_catalog(cluster.grpc, PROJECT, &[changed, original], 1).await;
    assert_eq!(acks.len(), 2);
    let lexical = |term: &str| {
        let mut request = search_request(term);
        request.mode = Some("lexical".into());
        request
    };
    let found = names(&search(cluster.grpc, lexical("quokka")).await.unwrap());
    assert_eq!(found, ["CODEBOX_QUOKKA_AUDIT"]);
    assert!(names(&search(cluster.grpc, lexical("wombat")).await.unwrap()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_batch_and_lookup_over_grpc_with_postgres() {
    use agentsearch_proto::v1::connections_client::ConnectionsClient;
    use agentsearch_proto::v1::tool_search_client::ToolSearchClient;

    let cluster = loaded(3).await;
    let user = "dana@example.com";
    let mut connections = ConnectionsClient::new(channel(cluster.grpc).await);
    let account = |id: &str, default: bool| pb::ConnectionInput {
        integration: "acme_chat".into(),
        account_id: id.into(),
        is_default: default,
        ..Default::default()
    };
    let written = connections
        .upsert_connections(pb::UpsertConnectionsRequest {
            project_id: PROJECT.into(),
            user_id: user.into(),
            connections: vec![account("a1", true), account("a2", false)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(written.toolkits.len(), 1);
    assert_eq!(
        written.toolkits[0].account_selection.as_deref(),
        Some("required")
    );
    // The rows are in PostgreSQL, one default.
    let rows = pg_rows(
        &cluster.schema,
        &format!(
            "SELECT account_id, is_default::text FROM connections WHERE project_id = '{PROJECT}' \
             AND user_id = '{user}' ORDER BY account_id"
        ),
    )
    .await;
    assert_eq!(
        rows,
        [
            vec!["a1".to_string(), "true".to_string()],
            vec!["a2".to_string(), "false".to_string()]
        ]
    );
    let bad = connections
        .upsert_connections(pb::UpsertConnectionsRequest {
            project_id: PROJECT.into(),
            user_id: user.into(),
            connections: vec![pb::ConnectionInput {
                integration: "acme_chat".into(),
                account_id: "a3".into(),
                status: Some("on".into()),
                ..Default::default()
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        bad.get_details_bad_request().unwrap().field_violations[0].field,
        "connections[0].status"
    );

    // A batch over the three shards with an inline tool: ranked by a shard's in-memory index,
    // returned once in toolSchemas, never persisted.
    let mut client = ToolSearchClient::new(channel(cluster.grpc).await);
    let batch = client
        .search_tools_batch(pb::SearchToolsBatchRequest {
            project_id: PROJECT.into(),
            queries: vec![
                pb::BatchQuery {
                    use_case: "post a message to a chat room".into(),
                    known_fields: Some("room:general".into()),
                },
                pb::BatchQuery {
                    use_case: "reserve a desk in the office for tomorrow".into(),
                    known_fields: None,
                },
            ],
            top_k: Some(3),
            custom_tools: vec![pb::CustomTool {
                slug: "book_desk".into(),
                name: "Book a desk".into(),
                description: "Reserves a desk in the office for a day.".into(),
                input_schema_json: r#"{"type":"object","properties":{"date":{"type":"string"}}}"#
                    .into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(batch.success, "{:?}", batch.error);
    assert_eq!(
        batch.results[0].primary_tool_slugs[0],
        "ACME_CHAT_POST_MESSAGE"
    );
    assert_eq!(batch.results[1].primary_tool_slugs[0], "LOCAL_BOOK_DESK");
    let listed: HashSet<&String> = batch
        .results
        .iter()
        .flat_map(|r| r.primary_tool_slugs.iter())
        .collect();
    assert_eq!(listed.len(), batch.tool_schemas.len());
    assert!(listed.iter().all(|n| batch.tool_schemas.contains_key(*n)));
    let later = search(cluster.grpc, search_request("reserve a desk in the office"))
        .await
        .unwrap();
    assert!(names(&later).iter().all(|n| !n.starts_with("LOCAL_")));

    // One tool by name, with the generation of its index and the caller's connection status.
    let tool = client
        .get_tool(pb::GetToolRequest {
            project_id: PROJECT.into(),
            name: "ACME_CHAT_POST_MESSAGE".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let result = tool.tool.unwrap();
    assert_eq!(result.intent_name, "ACME_CHAT_POST_MESSAGE");
    assert!(result.catalog_version >= 1);
    let missing = client
        .get_tool(pb::GetToolRequest {
            project_id: PROJECT.into(),
            name: "NO_SUCH_TOOL".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}
