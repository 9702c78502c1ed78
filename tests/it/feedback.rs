//! Learning from use: tool feedback over gRPC and REST refits the project's ranking model in
//! PostgreSQL, later searches of that project rank with it, and other projects never see it.

use std::time::{Duration, Instant};

use agentsearch_proto::v1 as pb;
use agentsearch_tests::*;
use tonic_types::StatusExt;

const OTHER: &str = "00000000-0000-4000-8000-0000000000f2";

fn with_request_id<T>(message: T, request_id: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-request-id", request_id.parse().unwrap());
    request
}

async fn search_as(
    grpc: std::net::SocketAddr,
    project: &str,
    query: &str,
    request_id: &str,
) -> pb::SearchToolsResponse {
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(grpc).await);
    let request = pb::SearchToolsRequest {
        project_id: project.into(),
        query: query.into(),
        top_k: Some(10),
        diagnostics: true,
        ..Default::default()
    };
    client
        .search_tools(with_request_id(request, request_id))
        .await
        .unwrap()
        .into_inner()
}

async fn feedback(
    grpc: std::net::SocketAddr,
    project: &str,
    request_id: &str,
    called: &[&str],
) -> Result<pb::ToolFeedbackResponse, tonic::Status> {
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(grpc).await);
    client
        .record_tool_feedback(pb::ToolFeedbackRequest {
            project_id: project.into(),
            request_id: request_id.into(),
            called_tools: called.iter().map(|s| s.to_string()).collect(),
        })
        .await
        .map(|r| r.into_inner())
}

fn model_version(response: &pb::SearchToolsResponse) -> u64 {
    response.usage.as_ref().unwrap().ranking_model
}

/// The field an INVALID_ARGUMENT status names.
fn violation_field(status: &tonic::Status) -> String {
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    status.get_details_bad_request().unwrap().field_violations[0]
        .field
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_teaches_one_project_and_no_other() {
    let mut settings = settings();
    settings.search.feedback_refit_secs = 0;
    let cluster = Cluster::start_with(2, settings).await;
    let grpc = cluster.grpc;
    let catalog = fixture_catalog();
    load_catalog(grpc, PROJECT, &catalog, 50).await;
    load_catalog(grpc, OTHER, &catalog, 50).await;

    // A query where some tool is lexical's first choice but not the hybrid's: feedback that the
    // agent called it, again and again, should teach the project to trust lexical more.
    let queries = [
        "send a message to a channel",
        "create an issue in the repository",
        "schedule a meeting with the team",
        "upload a file",
        "find a contact by email",
        "list open pull requests",
        "post a reply in a thread",
        "create a calendar event",
    ];
    let mut chosen = None;
    for (i, query) in queries.iter().enumerate() {
        let response = search_as(grpc, PROJECT, query, &format!("probe-{i}")).await;
        assert_eq!(model_version(&response), 0, "no feedback yet: the default");
        let position = response.tools.iter().position(|t| {
            t.explain
                .as_ref()
                .and_then(|e| e.lexical)
                .is_some_and(|h| h.rank == 1)
        });
        if let Some(p) = position.filter(|p| *p > 0) {
            chosen = Some((query.to_string(), response.tools[p].intent_name.clone(), p));
            break;
        }
    }
    let (query, tool, before) = chosen.expect("a query whose lexical first is not hybrid's first");

    // Refused: an unknown request id, a tool outside the catalog, a search of another project.
    let status = feedback(grpc, PROJECT, "never-searched", &[&tool])
        .await
        .unwrap_err();
    assert_eq!(violation_field(&status), "requestId");
    search_as(grpc, PROJECT, &query, "fb-0").await;
    let status = feedback(grpc, PROJECT, "fb-0", &["NO_SUCH_TOOL"])
        .await
        .unwrap_err();
    assert_eq!(violation_field(&status), "calledTools[0]");
    let status = feedback(grpc, OTHER, "fb-0", &[&tool]).await.unwrap_err();
    assert_eq!(violation_field(&status), "requestId");
    // Nothing was stored for the refused calls.
    let stored = |project: &'static str| {
        let schema = cluster.schema.clone();
        async move {
            pg_rows(
                &schema,
                &format!("SELECT count(*)::text FROM feedback WHERE project_id = '{project}'"),
            )
            .await[0][0]
                .clone()
        }
    };
    assert_eq!(stored(PROJECT).await, "0");

    // Twenty-five searches, each followed by its feedback (REST for one, gRPC for the rest).
    let n = 25;
    for i in 0..n {
        let id = format!("fb-{i}");
        search_as(grpc, PROJECT, &query, &id).await;
        if i == 0 {
            let body = serde_json::json!({"requestId": id, "calledTools": [tool]}).to_string();
            let path = format!("/api/tools/projects/{PROJECT}/tools/feedback");
            let (status, json) = rest_json(cluster.http.addr, "POST", &path, None, &body).await;
            assert_eq!(status, 200, "{json}");
            assert_eq!(json["examples"], 1);
        } else {
            let ack = feedback(grpc, PROJECT, &id, &[&tool]).await.unwrap();
            assert_eq!(ack.examples, i + 1);
        }
    }
    assert_eq!(stored(PROJECT).await, n.to_string());

    // The refit runs in the background: wait for a model that ranks the called tool first.
    let deadline = Instant::now() + Duration::from_secs(60);
    let learned = loop {
        let response = search_as(grpc, PROJECT, &query, "after").await;
        let position = response.tools.iter().position(|t| t.intent_name == tool);
        if model_version(&response) > 0 && position.is_some_and(|p| p < before) {
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "no model ranked {tool} above {before}: {:?}",
            names(&response)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let version = model_version(&learned);
    let rows = pg_rows(
        &cluster.schema,
        &format!(
            "SELECT max(version)::text, max(examples)::text FROM ranking_models WHERE project_id = '{PROJECT}' AND kind = 'tools'"
        ),
    )
    .await;
    // A refit that started before the last feedback may still store a later version.
    assert!(rows[0][0].parse::<u64>().unwrap() >= version, "{rows:?}");
    assert!(rows[0][1].parse::<u64>().unwrap() >= 20, "{rows:?}");

    // The other project still ranks with the deployment's weights.
    let other = search_as(grpc, OTHER, &query, "other").await;
    assert_eq!(model_version(&other), 0);
    assert_eq!(
        other.tools.iter().position(|t| t.intent_name == tool),
        Some(before),
        "{:?}",
        names(&other)
    );
    assert_eq!(stored(OTHER).await, "0");

    // REST refuses bad bodies naming the field.
    let path = format!("/api/tools/projects/{PROJECT}/tools/feedback");
    for (body, field) in [
        (r#"{"calledTools": ["A"]}"#, "requestId"),
        (r#"{"requestId": "x"}"#, "calledTools"),
        (
            r#"{"requestId": "x", "calledTools": ["A", "A"]}"#,
            "calledTools[1]",
        ),
        (r#"{"requestId": "x", "calledTool": ["A"]}"#, "calledTool"),
    ] {
        let (status, json) = rest_json(cluster.http.addr, "POST", &path, None, body).await;
        assert_eq!(status, 400, "{body}: {json}");
        assert_eq!(json["error"]["code"], "REQUEST_INVALID", "{json}");
        assert_eq!(
            json["error"]["details"][0]["field"], field,
            "{body}: {json}"
        );
    }
}

/// Feedback belongs to whoever searched: a user's search takes feedback from that user's token
/// only, never from another user's or from the service token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_searching_caller_gives_feedback() {
    let cluster =
        Cluster::start_custom(1, settings(), StoreKind::Postgres, keyed_auth(false)).await;
    let grpc = cluster.grpc;
    load_catalog_over(
        channel(grpc).await,
        PROJECT,
        &fixture_catalog(),
        50,
        Some(SERVICE_TOKEN),
    )
    .await;
    let alice = project_token("alice");
    let bob = project_token("bob");
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(grpc).await);
    let mut request = bearer(search_request("send a message to a channel"), Some(&alice));
    request
        .metadata_mut()
        .insert("x-request-id", "alice-1".parse().unwrap());
    let found = client.search_tools(request).await.unwrap().into_inner();
    let tool = found.tools[0].intent_name.clone();
    let give = |token: &str| {
        bearer(
            pb::ToolFeedbackRequest {
                project_id: PROJECT.into(),
                request_id: "alice-1".into(),
                called_tools: vec![tool.clone()],
            },
            Some(token),
        )
    };
    for token in [bob.as_str(), SERVICE_TOKEN] {
        let refused = client.record_tool_feedback(give(token)).await.unwrap_err();
        assert_eq!(violation_field(&refused), "requestId");
    }
    let ack = client
        .record_tool_feedback(give(&alice))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ack.examples, 1);
}
