//! The REST API over HTTP: exact snapshots of every error envelope, auth, and a successful search.

use std::sync::Arc;

use agentsearch_common::config::{Config, Secret};
use agentsearch_router::auth::Auth;
use agentsearch_tests::*;

struct Rest {
    http: Served,
    _grpc: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

async fn start(auth: Auth) -> Rest {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: agentsearch_common::config::ShardsConfig {
            local: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    let router = agentsearch::node::embedded_router(&config, embedder())
        .await
        .unwrap();
    router
        .upsert_tools(PROJECT, fixture_catalog(), "setup")
        .await
        .unwrap();
    let (http, grpc) = start_router(Arc::clone(&router), auth).await;
    Rest {
        http,
        _grpc: grpc,
        _dir: dir,
    }
}

const SEARCH: &str = "/api/tools/projects/00000000-0000-4000-8000-0000000000f1/tools/search";

async fn post(rest: &Rest, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, headers, body) = http(
        rest.http.addr,
        "POST",
        path,
        &[
            ("content-type", "application/json"),
            ("x-request-id", "req_snapshot"),
        ],
        body,
    )
    .await;
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "x-request-id" && v == "req_snapshot")
    );
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_envelopes() {
    let rest = start(Auth::default()).await;
    let long_query = format!(r#"{{"query": "{}"}}"#, "a".repeat(1025));
    let cases: Vec<(&str, String, String)> = vec![
        ("empty_query", SEARCH.into(), r#"{"query": ""}"#.into()),
        ("missing_query", SEARCH.into(), r#"{"topK": 3}"#.into()),
        ("long_query", SEARCH.into(), long_query),
        (
            "top_k_zero",
            SEARCH.into(),
            r#"{"query": "x", "topK": 0}"#.into(),
        ),
        (
            "top_k_51",
            SEARCH.into(),
            r#"{"query": "x", "topK": 51}"#.into(),
        ),
        (
            "top_k_fraction",
            SEARCH.into(),
            r#"{"query": "x", "topK": 2.5}"#.into(),
        ),
        (
            "max_tool_tokens_zero",
            SEARCH.into(),
            r#"{"query": "x", "maxToolTokens": 0}"#.into(),
        ),
        (
            "unknown_side_effect",
            SEARCH.into(),
            r#"{"query": "x", "maxSideEffect": "admin"}"#.into(),
        ),
        (
            "unknown_as_ceiling",
            SEARCH.into(),
            r#"{"query": "x", "maxSideEffect": "unknown"}"#.into(),
        ),
        (
            "unknown_property",
            SEARCH.into(),
            r#"{"query": "x", "topk": 3}"#.into(),
        ),
        (
            "wrong_types",
            SEARCH.into(),
            r#"{"query": ["x"], "integrations": "slack", "rerank": 1}"#.into(),
        ),
        (
            "empty_filter",
            SEARCH.into(),
            r#"{"query": "x", "integrations": []}"#.into(),
        ),
        (
            "bad_slug",
            SEARCH.into(),
            r#"{"query": "x", "categories": ["CRM"]}"#.into(),
        ),
        ("invalid_json", SEARCH.into(), r#"{"query": "#.into()),
        ("not_an_object", SEARCH.into(), r#"["query"]"#.into()),
        (
            "connected_only",
            SEARCH.into(),
            r#"{"query": "x", "connectedOnly": true}"#.into(),
        ),
        (
            "bad_project",
            "/api/tools/projects/demo/tools/search".into(),
            r#"{"query": "x"}"#.into(),
        ),
        (
            "bad_diagnostics",
            format!("{SEARCH}?diagnostics=yes"),
            r#"{"query": "x"}"#.into(),
        ),
        (
            "unknown_route",
            "/api/tools/projects/x/nope".into(),
            "{}".into(),
        ),
    ];
    for (name, path, body) in cases {
        let (status, json) = post(&rest, &path, &body).await;
        insta::assert_json_snapshot!(name, serde_json::json!({"status": status, "body": json}));
    }
    let (status, _, body) = http(
        rest.http.addr,
        "GET",
        SEARCH,
        &[("x-request-id", "req_snapshot")],
        "",
    )
    .await;
    insta::assert_json_snapshot!(
        "method_not_allowed",
        serde_json::json!({"status": status, "body": serde_json::from_str::<serde_json::Value>(&body).unwrap()})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_enforced() {
    let rest = start(Auth::new(Some(Secret::new("test-token-0123456789")))).await;
    let (status, body) = post(&rest, SEARCH, r#"{"query": "x"}"#).await;
    insta::assert_json_snapshot!(
        "missing_token",
        serde_json::json!({"status": status, "body": body})
    );
    let (status, _, body) = http(
        rest.http.addr,
        "POST",
        SEARCH,
        &[
            ("authorization", "Bearer wrong-token-0123456789"),
            ("content-type", "application/json"),
            ("x-request-id", "req_snapshot"),
        ],
        r#"{"query": "x"}"#,
    )
    .await;
    insta::assert_json_snapshot!(
        "wrong_token",
        serde_json::json!({"status": status, "body": serde_json::from_str::<serde_json::Value>(&body).unwrap()})
    );
    let (status, _, _) = http(
        rest.http.addr,
        "POST",
        SEARCH,
        &[
            ("authorization", "Bearer test-token-0123456789"),
            ("content-type", "application/json"),
        ],
        r#"{"query": "close a ticket"}"#,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = http(rest.http.addr, "GET", "/healthz", &[], "").await;
    assert_eq!(status, 200, "health stays open for probes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_response_shape() {
    let rest = start(Auth::default()).await;
    let (status, json) = post(
        &rest,
        &format!("{SEARCH}?diagnostics=1"),
        r#"{"query": "close a solved ticket", "topK": 2, "maxSideEffect": "write", "integrations": ["ticketeer"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{json}");
    let tool = &json["tools"][0];
    assert_eq!(tool["intentName"], "TICKETEER_CLOSE_TICKET");
    assert_eq!(tool["tool"]["type"], "function");
    assert_eq!(tool["tool"]["function"]["name"], "TICKETEER_CLOSE_TICKET");
    assert_eq!(
        tool["tool"]["function"]["parameters"]["required"][0],
        "ticket_id"
    );
    assert_eq!(tool["approvalRequired"], true);
    assert_eq!(tool["schemaSource"], "static");
    assert_eq!(tool["relevancy"], 1.0);
    assert_eq!(json["searchQuery"], "close a solved ticket");
    assert_eq!(json["errors"], serde_json::json!([]));
    let usage = &json["usage"];
    assert_eq!(usage["returned"], 2);
    assert_eq!(usage["degraded"], serde_json::Value::Null);
    assert_eq!(usage["visibility"]["mode"], "filtered");
    let labels: Vec<&str> = json["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    for label in ["placement", "embed", "fanout", "fuse", "budget"] {
        assert!(labels.contains(&label), "{labels:?}");
    }
    // Each result explains its place in each retriever: 1-based ranks, raw scores.
    let explain = &tool["explain"];
    assert!(
        explain["lexical"]["rank"].as_u64().unwrap() >= 1,
        "{explain}"
    );
    assert!(
        explain["lexical"]["score"].as_f64().unwrap() > 0.0,
        "{explain}"
    );
    let cosine = explain["dense"]["score"].as_f64().unwrap();
    assert!((-1.0..=1.0).contains(&cosine), "{explain}");
    // Without diagnostics there is no trace and no explanation.
    let (_, json) = post(&rest, SEARCH, r#"{"query": "close a solved ticket"}"#).await;
    assert!(json.get("trace").is_none());
    assert!(json["tools"][0].get("explain").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_over_rest() {
    let rest = start(Auth::default()).await;
    let tools = "/api/tools/projects/00000000-0000-4000-8000-0000000000f1/tools";
    let body = r#"{"tools": [
        {"name": "WIDGETS_POLISH_WIDGET", "integration": "widgets", "category": "general", "sideEffect": "write",
         "description": "Polish a widget until it shines.", "parameters": {"type": "object", "properties": {"widget_id": {"type": "string"}}}},
        {"name": "WIDGETS_COUNT", "integration": "widgets", "sideEffect": "sometimes", "description": "Count widgets."}
    ]}"#;
    let (status, _, response) = http(
        rest.http.addr,
        "PUT",
        tools,
        &[
            ("content-type", "application/json"),
            ("x-request-id", "req_snapshot"),
        ],
        body,
    )
    .await;
    assert_eq!(status, 400);
    let json: serde_json::Value = serde_json::from_str(&response).unwrap();
    assert_eq!(
        json["error"]["details"][0]["field"], "tools[1].sideEffect",
        "{json}"
    );

    let body = body.replace("sometimes", "read");
    let (status, _, response) = http(
        rest.http.addr,
        "PUT",
        tools,
        &[("content-type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&response).unwrap(),
        serde_json::json!({"upserted": 2, "unchanged": 0})
    );

    let (_, json) = post(
        &rest,
        SEARCH,
        r#"{"query": "polish a widget", "integrations": ["widgets", "nosuchapp"]}"#,
    )
    .await;
    assert_eq!(json["tools"][0]["intentName"], "WIDGETS_POLISH_WIDGET");
    assert_eq!(json["errors"][0]["integration"], "nosuchapp");
    assert_eq!(json["errors"][0]["code"], "UNKNOWN_INTEGRATION");

    let (status, _, response) = http(
        rest.http.addr,
        "POST",
        &format!("{tools}:delete"),
        &[("content-type", "application/json")],
        r#"{"names": ["WIDGETS_COUNT", "NOPE"]}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&response).unwrap(),
        serde_json::json!({"deleted": 1, "notFound": 1, "plansDeleted": 0})
    );
    let (_, json) = post(
        &rest,
        SEARCH,
        r#"{"query": "count widgets", "integrations": ["widgets"]}"#,
    )
    .await;
    let names: Vec<&str> = json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["intentName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["WIDGETS_POLISH_WIDGET"]);
}
