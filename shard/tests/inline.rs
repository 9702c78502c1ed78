//! A shard served over gRPC on loopback: inline tools are ranked over the wire exactly as in
//! process, on the catalog's statistics, and are never written (a later catalog search, the shard's
//! info and its data dir know nothing of them); catalog searches report index generations.

use std::sync::Arc;

use agentsearch_common::Error;
use agentsearch_common::auth::Auth;
use agentsearch_common::config::Secret;
use agentsearch_common::shard::{
    IndexedTool, InlineSearchRequest, ShardApi, ShardSearchRequest, ShardSearchResponse,
    ShardUpsertRequest, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_proto::error_from_status;
use agentsearch_proto::shard_v1 as pb;
use agentsearch_proto::shard_v1::shard_client::ShardClient;
use agentsearch_shard::LocalShard;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::{Channel, Endpoint};

const PROJECT: &str = "00000000-0000-4000-8000-000000000003";
const TOKEN: &str = "shard-test-token";

fn tool(
    name: &str,
    integration: &str,
    side_effect: SideEffect,
    description: &str,
    axis: usize,
) -> IndexedTool {
    let mut vector = vec![0.1f32; 8];
    vector[axis] = 1.0;
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|x| *x /= norm);
    IndexedTool {
        record: ToolRecord {
            name: name.into(),
            integration: integration.into(),
            category: if side_effect == SideEffect::Read {
                "lookup".into()
            } else {
                "action".into()
            },
            side_effect,
            description: description.into(),
            parameters: r#"{"type":"object","properties":{"order_id":{"type":"string","description":"the order"}}}"#.into(),
            tokens: 30,
        },
        vector,
    }
}

fn catalog() -> Vec<IndexedTool> {
    vec![
        tool(
            "SHOP_GET_ORDER",
            "shop",
            SideEffect::Read,
            "Get an order by id.",
            0,
        ),
        tool(
            "SHOP_CANCEL_ORDER",
            "shop",
            SideEffect::Write,
            "Cancel an order that has not shipped.",
            1,
        ),
        tool(
            "SHOP_EMAIL_CUSTOMER",
            "shop",
            SideEffect::Send,
            "Email the customer of an order.",
            2,
        ),
    ]
}

fn inline_tools() -> Vec<IndexedTool> {
    vec![
        tool(
            "MY_REFUND_ORDER",
            "custom",
            SideEffect::Write,
            "Refund an order in our own billing system.",
            3,
        ),
        tool(
            "MY_ORDER_STATUS",
            "custom",
            SideEffect::Read,
            "Look up the delivery status of an order.",
            4,
        ),
        tool(
            "MY_NOTIFY_ORDER",
            "custom",
            SideEffect::Send,
            "Notify the team about an order on chat.",
            5,
        ),
    ]
}

fn query_vector(axis: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; 8];
    v[axis] = 1.0;
    v
}

fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    request
}

fn without_timings(mut response: ShardSearchResponse) -> ShardSearchResponse {
    response.timings = Default::default();
    response
}

fn names(hits: &[agentsearch_common::shard::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

fn violated_field(status: tonic::Status) -> String {
    match error_from_status(&status) {
        Error::InvalidArgument { violations, .. } => violations[0].field.clone(),
        other => panic!("expected an invalid argument, got {other:?}"),
    }
}

async fn search_catalog(
    client: &mut ShardClient<Channel>,
    integrations: &[&str],
) -> ShardSearchResponse {
    let request = ShardSearchRequest {
        records: None,
        project_id: PROJECT.into(),
        integrations: integrations.iter().map(|i| i.to_string()).collect(),
        query: "refund order status".into(),
        vector: Some(query_vector(3)),
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats: None,
        structured: None,
    };
    client
        .search_tools(authed(pb::SearchToolsRequest::from(request)))
        .await
        .unwrap()
        .into_inner()
        .try_into()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_search_round_trips_over_grpc_and_is_never_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let shard =
        Arc::new(LocalShard::open(dir.path(), Default::default(), Default::default()).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(agentsearch_shard::serve_on(
        shard.clone(),
        Auth::new(Some(Secret::new(TOKEN))),
        listener,
        async {
            let _ = stopped.await;
        },
    ));
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ShardClient::new(channel);

    // The catalog: one integration, written twice (generation 2).
    for tools in [catalog()[..1].to_vec(), catalog()[1..].to_vec()] {
        let request = ShardUpsertRequest {
            project_id: PROJECT.into(),
            tools,
        };
        client
            .upsert_tools(authed(pb::UpsertToolsRequest::from(request)))
            .await
            .unwrap();
    }
    let before = search_catalog(&mut client, &["shop", "missing"]).await;
    assert_eq!(
        before.generations,
        [("shop".to_string(), 2)].into_iter().collect()
    );
    assert_eq!(before.tools.len(), 3);

    // Inline tools ranked on the catalog's statistics, over the wire and in process alike.
    let query = "refund order status";
    let stats: TermStats = client
        .term_stats(authed(pb::TermStatsRequest::from(TermStatsRequest {
            project_id: PROJECT.into(),
            integrations: vec!["shop".into()],
            query: query.into(),
        })))
        .await
        .unwrap()
        .into_inner()
        .into();
    assert_eq!(stats.total_docs, 3);
    let request = InlineSearchRequest {
        project_id: PROJECT.into(),
        tools: inline_tools(),
        query: query.into(),
        vector: Some(query_vector(3)),
        categories: vec![],
        max_side_effect: None,
        limit: 10,
        lexical: true,
        stats: Some(stats.clone()),
    };
    let remote: ShardSearchResponse = client
        .search_inline(authed(pb::SearchInlineRequest::from(request.clone())))
        .await
        .unwrap()
        .into_inner()
        .try_into()
        .unwrap();
    let local = shard.search_inline(request.clone()).await.unwrap();
    assert_eq!(without_timings(remote.clone()), without_timings(local));
    assert!(remote.failures.is_empty());
    assert!(remote.generations.is_empty());
    // Two query terms each (one of them rare), then only `order`.
    let mut lexical = names(&remote.lexical);
    assert_eq!(lexical.pop(), Some("MY_NOTIFY_ORDER"));
    lexical.sort();
    assert_eq!(lexical, ["MY_ORDER_STATUS", "MY_REFUND_ORDER"]);
    assert_eq!(names(&remote.dense)[0], "MY_REFUND_ORDER");
    assert!(
        remote
            .lexical
            .iter()
            .chain(&remote.dense)
            .all(|h| h.integration == "custom")
    );
    let mut returned: Vec<&str> = remote.tools.iter().map(|t| t.name.as_str()).collect();
    returned.sort();
    assert_eq!(
        returned,
        ["MY_NOTIFY_ORDER", "MY_ORDER_STATUS", "MY_REFUND_ORDER"]
    );
    // The catalog's statistics count: without them the same tools score differently.
    let alone = shard
        .search_inline(InlineSearchRequest {
            stats: None,
            ..request.clone()
        })
        .await
        .unwrap();
    assert_ne!(alone.lexical[0].score, remote.lexical[0].score);

    // Filters as in a catalog search: categories, and the side-effect ceiling with exclusions.
    let filtered: ShardSearchResponse = client
        .search_inline(authed(pb::SearchInlineRequest::from(InlineSearchRequest {
            categories: vec!["action".into()],
            max_side_effect: Some(SideEffect::Write),
            ..request.clone()
        })))
        .await
        .unwrap()
        .into_inner()
        .try_into()
        .unwrap();
    assert_eq!(names(&filtered.lexical), ["MY_REFUND_ORDER"]);
    assert_eq!(names(&filtered.excluded_lexical), ["MY_NOTIFY_ORDER"]);
    assert_eq!(names(&filtered.dense), ["MY_REFUND_ORDER"]);
    assert_eq!(names(&filtered.excluded_dense), ["MY_NOTIFY_ORDER"]);
    assert_eq!(filtered.tools.len(), 1);

    // Bad requests name their field; calls without the token are refused.
    let too_many: Vec<IndexedTool> = (0..501)
        .map(|i| tool(&format!("T_{i}"), "custom", SideEffect::Read, "x", i % 8))
        .collect();
    let status = client
        .search_inline(authed(pb::SearchInlineRequest::from(InlineSearchRequest {
            tools: too_many,
            ..request.clone()
        })))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(violated_field(status), "tools");
    let status = client
        .search_inline(authed(pb::SearchInlineRequest::from(InlineSearchRequest {
            limit: 0,
            ..request.clone()
        })))
        .await
        .unwrap_err();
    assert_eq!(violated_field(status), "limit");
    let status = client
        .search_inline(tonic::Request::new(pb::SearchInlineRequest::from(
            request.clone(),
        )))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);

    // Nothing of the inline tools was kept.
    let after = search_catalog(&mut client, &["shop", "custom"]).await;
    assert_eq!(without_timings(after), without_timings(before));
    let info = client
        .info(authed(pb::InfoRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((info.indexes, info.tools), (1, 3));
    let projects: Vec<_> = std::fs::read_dir(dir.path().join("tools").join(PROJECT))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(projects, ["shop"]);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
