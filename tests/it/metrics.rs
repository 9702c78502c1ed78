//! Prometheus metrics of a router and its shards over real gRPC: the series an operator needs
//! exist, move after a search, and never carry a query, a project or a user.

use agentsearch_tests::*;
use std::time::Duration;
use tokio::net::TcpListener;

/// The value of the series `name` whose labels include every `key="value"` of `labels`, or 0.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let (status, headers, body) = http(addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let content_type = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_and_shard_metrics_move_with_traffic() {
    let cluster = Cluster::start(2).await;
    // Tools on both shards, so that a search calls each.
    load_catalog(cluster.grpc, PROJECT, &spread_catalog(), 50).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shard_metrics = listener.local_addr().unwrap();
    let (drain, draining) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(agentsearch_shard::serve_metrics(
        cluster.local[0].clone(),
        listener,
        async move {
            let _ = draining.await;
        },
        std::future::pending(),
    ));
    // Liveness and readiness for probes that cannot reach the gRPC port.
    assert_eq!(http(shard_metrics, "GET", "/livez", &[], "").await.0, 200);
    assert_eq!(http(shard_metrics, "GET", "/readyz", &[], "").await.0, 200);

    let query = "send a message to a slack channel";
    search(cluster.grpc, search_request(query)).await.unwrap();
    let before = scrape(cluster.http.addr).await;
    let grpc_ok = [
        ("service", "agentsearch.v1.ToolSearch"),
        ("method", "SearchTools"),
        ("code", "OK"),
    ];
    let searches = value(&before, "agentsearch_grpc_requests_total", &grpc_ok);
    assert!(searches >= 1.0, "{before}");
    let fanout = [("rpc", "search_tools")];
    let fanout_before = value(
        &before,
        "agentsearch_shard_call_duration_seconds_count",
        &fanout,
    );
    assert!(fanout_before >= 2.0, "one call per shard at least");

    // One more search over gRPC, one over REST, one refused over REST, one cached query.
    search(cluster.grpc, search_request(query)).await.unwrap();
    let path = format!("/api/tools/projects/{PROJECT}/tools/search");
    let (status, _) = rest_json(
        cluster.http.addr,
        "POST",
        &path,
        None,
        r#"{"query": "create an invoice"}"#,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = rest_json(
        cluster.http.addr,
        "POST",
        &path,
        None,
        r#"{"query": "x", "topK": 0}"#,
    )
    .await;
    assert_eq!(status, 400);
    let after = scrape(cluster.http.addr).await;

    assert_eq!(
        value(&after, "agentsearch_grpc_requests_total", &grpc_ok),
        searches + 1.0
    );
    let grpc_latency = [
        ("service", "agentsearch.v1.ToolSearch"),
        ("method", "SearchTools"),
    ];
    assert_eq!(
        value(
            &after,
            "agentsearch_grpc_request_duration_seconds_count",
            &grpc_latency
        ),
        searches + 1.0
    );
    assert!(
        value(
            &after,
            "agentsearch_shard_call_duration_seconds_count",
            &fanout
        ) >= fanout_before + 4.0,
        "two more searches over two shards"
    );
    let route = "/api/tools/projects/{project_id}/tools/search";
    let rest_ok = [
        ("route", route),
        ("method", "POST"),
        ("status", "200"),
        ("code", "OK"),
    ];
    assert_eq!(
        value(&after, "agentsearch_http_requests_total", &rest_ok),
        1.0
    );
    let rest_bad = [
        ("route", route),
        ("status", "400"),
        ("code", "REQUEST_INVALID"),
    ];
    assert_eq!(
        value(&after, "agentsearch_http_requests_total", &rest_bad),
        1.0
    );
    assert!(
        value(
            &after,
            "agentsearch_http_request_duration_seconds_bucket",
            &[("route", route), ("le", "+Inf")]
        ) >= 2.0
    );
    // The repeated query came from the embedding cache; the catalog was embedded in batches.
    assert!(
        value(
            &after,
            "agentsearch_embedding_cache_lookups_total",
            &[("result", "hit")]
        ) >= 1.0
    );
    assert!(
        value(
            &after,
            "agentsearch_embedded_texts_total",
            &[("kind", "batch")]
        ) >= fixture_catalog().len() as f64
    );
    assert!(
        value(&after, "agentsearch_ingested_total", &[("kind", "tools")])
            >= fixture_catalog().len() as f64
    );
    assert_eq!(value(&after, "agentsearch_shards_configured", &[]), 2.0);

    // The shard's own endpoint: its gRPC calls and what it holds.
    let shard = scrape(shard_metrics).await;
    let shard_search = [
        ("service", "agentsearch.shard.v1.Shard"),
        ("method", "SearchTools"),
        ("code", "OK"),
    ];
    assert!(
        value(&shard, "agentsearch_grpc_requests_total", &shard_search) >= 2.0,
        "{shard}"
    );
    assert!(
        value(&shard, "agentsearch_shard_tools", &[]) > 0.0,
        "{shard}"
    );
    assert!(value(&shard, "agentsearch_shard_indexes", &[]) > 0.0);
    assert!(value(&shard, "agentsearch_shard_index_generations", &[]) > 0.0);
    assert!(shard.contains("agentsearch_shard_segments"), "{shard}");
    // Draining: not ready, still alive, still scraped.
    drain.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(http(shard_metrics, "GET", "/readyz", &[], "").await.0, 503);
    assert_eq!(http(shard_metrics, "GET", "/livez", &[], "").await.0, 200);
    assert_eq!(http(shard_metrics, "GET", "/metrics", &[], "").await.0, 200);

    // Bounded labels: no query, project or path a client sent.
    for text in [&after, &shard] {
        assert!(!text.contains("slack channel"));
        assert!(!text.contains(PROJECT));
        assert!(!text.contains("create an invoice"));
    }
    // A path that exists on no route is labelled as such, whatever the client sent.
    let (status, _, _) = http(cluster.http.addr, "GET", "/no/such/route-12345", &[], "").await;
    assert_eq!(status, 404);
    let last = scrape(cluster.http.addr).await;
    assert!(!last.contains("route-12345"));
    assert!(
        value(
            &last,
            "agentsearch_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ) >= 1.0
    );
}
