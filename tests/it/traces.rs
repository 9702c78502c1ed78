//! One search, one trace: a router and two shard processes (the real binary) export their spans
//! over OTLP/gRPC to a trace collector served by this test; the spans of all three processes
//! share the caller's trace id, each shard's server span is the child of the router's client span
//! for that call, and the router's log lines name the trace.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsearch_proto::v1 as pb;
use agentsearch_tests::procs::{free_addr, spawn, wait_listening};
use agentsearch_tests::*;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

/// A span as the collector received it, with the resource of the process that sent it.
#[derive(Clone, Debug)]
struct Received {
    service: String,
    instance: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let attribute = |key: &str| {
                resource_spans
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|a| a.key == key))
                    .and_then(|a| a.value.as_ref())
                    .and_then(|v| match &v.value {
                        Some(Value::StringValue(s)) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_default()
            };
            let (service, instance) = (attribute("service.name"), attribute("service.instance.id"));
            for scope_spans in &resource_spans.scope_spans {
                for span in &scope_spans.spans {
                    received.push(Received {
                        service: service.clone(),
                        instance: instance.clone(),
                        name: span.name.clone(),
                        kind: span.kind,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                    });
                }
            }
        }
        self.spans.lock().unwrap().extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_search_is_one_trace_across_the_router_and_its_shards() {
    // The collector.
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let dir = tempfile::tempdir().unwrap();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let common = |service_log: &str| -> (Vec<(&'static str, String)>, std::fs::File) {
        (
            vec![
                ("AGENTSEARCH_AUTH__TOKEN", SERVICE_TOKEN.to_string()),
                (
                    "AGENTSEARCH_TELEMETRY__OTLP_ENDPOINT",
                    format!("http://{otlp}"),
                ),
                // Export every 100 ms so the test does not wait for the default 5 s.
                ("OTEL_BSP_SCHEDULE_DELAY", "100".to_string()),
            ],
            std::fs::File::create(dir.path().join(service_log)).unwrap(),
        )
    };

    let mut shards = Vec::new();
    let mut processes = Vec::new();
    for i in 0..2 {
        let addr = free_addr().await;
        let (env, log) = common(&format!("shard{i}.log"));
        let args = vec![
            "shard".to_string(),
            "--grpc".to_string(),
            addr.to_string(),
            "--data-dir".to_string(),
            dir.path().join(format!("shard{i}")).display().to_string(),
        ];
        processes.push(spawn(&args, &env, log));
        shards.push(addr);
    }
    for addr in &shards {
        wait_listening(*addr).await;
    }
    let (grpc, http_addr) = (free_addr().await, free_addr().await);
    let (mut env, log) = common("router.log");
    env.push(("AGENTSEARCH_POSTGRES__SCHEMA", schema.clone()));
    env.push((
        "AGENTSEARCH_EMBED__MODEL_DIR",
        model_dir().display().to_string(),
    ));
    let args = vec![
        "router".to_string(),
        "--grpc".to_string(),
        grpc.to_string(),
        "--http".to_string(),
        http_addr.to_string(),
        "--shards".to_string(),
        shards
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        "--postgres".to_string(),
        postgres_url(),
    ];
    processes.push(spawn(&args, &env, log));
    wait_listening(grpc).await;
    // Placement uses the shards the router has reached: wait for both, or the whole catalog may
    // land on the one it reached first.
    let started = Instant::now();
    loop {
        let (_, _, body) = http(http_addr, "GET", "/readyz", &[], "").await;
        let readiness: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let reached = readiness["shards"]
            .as_array()
            .map_or(0, |s| s.iter().filter(|s| s["reachable"] == true).count());
        if reached == 2 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the router never reached both shards: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A catalog whose integrations land on both shards.
    let catalog = spread_catalog();
    let channel = channel(grpc).await;
    load_catalog_over(channel.clone(), PROJECT, &catalog, 10, Some(SERVICE_TOKEN)).await;

    // The search, as part of a trace the caller started.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let mut request = bearer(search_request("send an email"), Some(SERVICE_TOKEN));
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{caller_span}-01").parse().unwrap(),
    );
    let response = pb::tool_search_client::ToolSearchClient::new(channel)
        .search_tools(request)
        .await
        .unwrap();
    let request_id = response
        .metadata()
        .get("x-request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(!response.into_inner().tools.is_empty());

    // A REST search, in a second trace the caller started.
    let rest_trace = "0af7651916cd43dd8448eb211c80319c";
    let rest_caller = "b7ad6b7169203331";
    let traceparent = format!("00-{rest_trace}-{rest_caller}-01");
    let authorization = format!("Bearer {SERVICE_TOKEN}");
    let (status, _, body) = http(
        http_addr,
        "POST",
        &format!("/api/tools/projects/{PROJECT}/tools/search"),
        &[
            ("content-type", "application/json"),
            ("authorization", &authorization),
            ("traceparent", &traceparent),
        ],
        r#"{"query": "send an email"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Every process exports its spans of the trace within a few batches.
    let started = Instant::now();
    let spans = loop {
        let spans = of_trace(&collector, trace_id);
        let shard_servers: HashSet<&str> = spans
            .iter()
            .filter(|s| s.service == "agentsearch-shard" && s.kind == SpanKind::Server as i32)
            .map(|s| s.instance.as_str())
            .collect();
        let router_server = spans
            .iter()
            .any(|s| s.service == "agentsearch-router" && s.kind == SpanKind::Server as i32);
        if shard_servers.len() == 2 && router_server {
            // One more export interval, for spans that closed last.
            tokio::time::sleep(Duration::from_millis(500)).await;
            break of_trace(&collector, trace_id);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "spans of the trace never arrived from all three processes: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let by_id: HashMap<&str, &Received> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    // The router's server span is the child of the caller's span.
    let root = spans
        .iter()
        .find(|s| s.service == "agentsearch-router" && s.kind == SpanKind::Server as i32)
        .unwrap();
    assert_eq!(root.name, "agentsearch.v1.ToolSearch/SearchTools");
    assert_eq!(root.parent_span_id, caller_span);
    // Every other span of the trace descends from it, within its own process or across a call.
    for span in &spans {
        let mut current = span;
        let mut hops = 0;
        while current.span_id != root.span_id {
            current = by_id
                .get(current.parent_span_id.as_str())
                .unwrap_or_else(|| {
                    panic!("{span:?} does not descend from the router's span: {spans:#?}")
                });
            hops += 1;
            assert!(hops < 32, "a cycle of parents: {spans:#?}");
        }
    }
    // Each shard's server span is the child of one of the router's client spans for that call.
    let shard_servers: Vec<&Received> = spans
        .iter()
        .filter(|s| s.service == "agentsearch-shard" && s.kind == SpanKind::Server as i32)
        .collect();
    assert!(
        shard_servers
            .iter()
            .any(|s| s.name == "agentsearch.shard.v1.Shard/SearchTools")
    );
    for server in &shard_servers {
        let parent = by_id[server.parent_span_id.as_str()];
        assert_eq!(parent.service, "agentsearch-router", "{server:?}");
        assert_eq!(parent.kind, SpanKind::Client as i32, "{server:?}");
        assert!(
            server.name.ends_with(&format!("/{}", pascal(&parent.name))),
            "{server:?} under {parent:?}"
        );
    }
    // The index search runs under the shard's server span, in the same process.
    for span in spans.iter().filter(|s| s.name == "index_search") {
        let parent = by_id[span.parent_span_id.as_str()];
        assert_eq!(parent.kind, SpanKind::Server as i32);
        assert_eq!(parent.instance, span.instance);
    }
    assert_eq!(
        spans.iter().filter(|s| s.name == "index_search").count(),
        2,
        "{spans:#?}"
    );
    let router_steps: HashSet<&str> = spans
        .iter()
        .filter(|s| s.service == "agentsearch-router")
        .map(|s| s.name.as_str())
        .collect();
    for step in ["embed", "term_stats", "fanout", "search_tools"] {
        assert!(
            router_steps.contains(step),
            "no `{step}` span: {router_steps:?}"
        );
    }

    // The REST search is one trace too: its server span is named after the route template (never
    // the path the client sent) and is the caller's child; the shards' spans join it.
    let started = Instant::now();
    let rest_spans = loop {
        let spans = of_trace(&collector, rest_trace);
        if spans.iter().any(|s| s.service == "agentsearch-shard") {
            tokio::time::sleep(Duration::from_millis(500)).await;
            break of_trace(&collector, rest_trace);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the REST search's spans never arrived: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let rest_root = rest_spans
        .iter()
        .find(|s| s.service == "agentsearch-router" && s.kind == SpanKind::Server as i32)
        .unwrap_or_else(|| panic!("no router server span: {rest_spans:#?}"));
    assert_eq!(rest_root.parent_span_id, rest_caller);
    assert!(
        rest_root.name.starts_with("POST /api/tools/projects/")
            && rest_root.name.ends_with("/tools/search")
            && !rest_root.name.contains(PROJECT),
        "{rest_root:?}"
    );
    // Probes and scrapes make no traces.
    assert!(
        collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .all(|s| !s.name.contains("Health/") && !s.name.ends_with("/Info")),
        "a probe made a trace"
    );

    // The router's access log line for the search names the trace and the request, and never
    // the query or the token.
    drop(processes);
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    let access: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("agentsearch::access") && l.contains("SearchTools"))
        .collect();
    assert_eq!(access.len(), 1, "{log}");
    assert!(access[0].contains(&format!("trace_id={trace_id}")), "{log}");
    assert!(
        access[0].contains(&format!("request_id={request_id}")),
        "{log}"
    );
    assert!(access[0].contains("code=\"OK\""), "{log}");
    assert!(
        !log.contains("send an email") && !log.contains(SERVICE_TOKEN),
        "{log}"
    );
}

/// The spans of `trace_id` the collector has received so far.
fn of_trace(collector: &Collector, trace_id: &str) -> Vec<Received> {
    collector
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.trace_id == trace_id)
        .cloned()
        .collect()
}

/// `search_tools` as the gRPC method name `SearchTools`.
fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}
