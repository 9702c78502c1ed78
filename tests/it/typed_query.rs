//! Typed tool search over REST and gRPC on a two-shard cluster: a query JSON document's `query`
//! and `filter` nodes decide which tools can be returned (checked against the fixture catalog,
//! read independently), `q` ranks as a string query does, `limit`/`offset` page, the side-effect
//! ceiling still applies, and a misspelt document is refused naming the path and the nearest name.

use std::collections::BTreeSet;

use agentsearch_proto::v1 as pb;
use agentsearch_tests::*;
use serde_json::{Value, json};
use tonic_types::StatusExt;

async fn rest_search(cluster: &Cluster, body: Value) -> (u16, Value) {
    let (status, _, text) = http(
        cluster.http.addr,
        "POST",
        &format!("/api/tools/projects/{PROJECT}/tools/search"),
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn returned(response: &Value) -> Vec<String> {
    response["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["intentName"].as_str().unwrap().to_string())
        .collect()
}

/// Fixture tools for which `keep` holds, by name.
fn fixture_where(
    keep: impl Fn(&agentsearch_common::tool::ToolDefinition) -> bool,
) -> BTreeSet<String> {
    fixture_catalog()
        .into_iter()
        .filter(|t| keep(t))
        .map(|t| t.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_queries_select_exactly_the_matching_tools() {
    let cluster = Cluster::start(2).await;
    load_catalog(cluster.grpc, PROJECT, &fixture_catalog(), 50).await;

    // No words: every tool whose description holds the phrase "chat room(s)", and no other.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "query": {"type": "phrase", "field": "description",
                                           "terms": ["chat", "room"]}},
               "topK": 50}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let phrase = fixture_where(|t| {
        let d = t.description.to_lowercase();
        d.contains("chat room")
    });
    assert!(!phrase.is_empty());
    assert_eq!(returned(&body).into_iter().collect::<BTreeSet<_>>(), phrase);

    // Words ranked within a boolean restriction: read tools of one integration, none of another.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "q": "find records",
                          "query": {"type": "boolean",
                                    "must": [{"type": "term", "field": "sideEffect", "value": "read"}],
                                    "mustNot": [{"type": "prefix", "field": "name", "value": "ACME_"}]},
                          "filter": {"type": "regex", "field": "integration", "pattern": "crm.*|ticket.*"},
                          "limit": 50}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let expected = fixture_where(|t| {
        t.side_effect.map(|s| s.as_str()) == Some("read")
            && !t.name.starts_with("ACME_")
            && (t.integration.starts_with("crm") || t.integration.starts_with("ticket"))
    });
    assert!(!expected.is_empty());
    let got: BTreeSet<String> = returned(&body).into_iter().collect();
    assert_eq!(got, expected, "{body}");

    // A filter alone lists every tool it allows; a query naming a tool outside it does not
    // bring that tool back.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "filter": {"type": "term", "field": "integration", "value": "codebox"},
                          "limit": 50}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        returned(&body).into_iter().collect::<BTreeSet<_>>(),
        fixture_where(|t| t.integration == "codebox")
    );
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "q": "ACME_CHAT_POST_MESSAGE",
                          "filter": {"type": "term", "field": "integration", "value": "crmly"}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let names = returned(&body);
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("CRMLY_")),
        "{body}"
    );

    // An exact count of what the nodes allow (not only of what is returned), under the ceiling.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "q": "records",
                          "filter": {"type": "exists", "field": "category"},
                          "countExactly": true, "limit": 2},
               "maxSideEffect": "write"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let under_write = fixture_where(|t| {
        t.side_effect
            .is_some_and(|s| s.allowed_under(Some(agentsearch_common::tool::SideEffect::Write)))
    });
    assert_eq!(body["usage"]["matched"], json!(under_write.len()), "{body}");
    assert_eq!(returned(&body).len(), 2);
    let (_, plain) = rest_search(&cluster, json!({"query": "records"})).await;
    assert!(
        plain["usage"].get("matched").is_none(),
        "counted only on request"
    );

    // Highlights mark the matched words of each description.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "q": "rename",
                          "query": {"type": "prefix", "field": "description", "value": "roo"},
                          "highlight": true}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let tools = body["tools"].as_array().unwrap();
    assert!(!tools.is_empty(), "{body}");
    for tool in tools {
        let fragments = tool["highlights"].as_array().expect("highlights");
        let text = fragments
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect::<String>();
        assert!(text.to_lowercase().contains("<em>roo"), "{tool}");
    }

    // The side-effect ceiling applies on top: a query for delete tools under `read` returns none.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "query": {"type": "term", "field": "sideEffect", "value": "delete"}},
               "maxSideEffect": "read"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(returned(&body).is_empty(), "{body}");
    assert!(
        body["usage"]["omittedForSideEffect"].as_u64().unwrap() > 0,
        "{body}"
    );

    // Pages: limit 3 at offset 3 is the second half of limit 6.
    let page = |limit: u32, offset: u32| json!({"query": {"v": 1, "q": "send a message", "limit": limit, "offset": offset}});
    let (_, six) = rest_search(&cluster, page(6, 0)).await;
    let (_, second) = rest_search(&cluster, page(3, 3)).await;
    assert_eq!(
        returned(&six)[3..].to_vec(),
        returned(&second),
        "{six}\n{second}"
    );

    // A document with only `q` ranks as the same string query does.
    let (_, typed) = rest_search(&cluster, json!({"query": {"v": 1, "q": "send a message"}})).await;
    let (_, plain) = rest_search(&cluster, json!({"query": "send a message"})).await;
    assert_eq!(returned(&typed), returned(&plain));

    // A function score reorders within what its query matches.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "query": {"type": "functionScore",
            "query": {"type": "multiFieldTerm", "fields": ["description", "parameters"], "value": "message"},
            "functions": [{"type": "weight", "weight": 3}], "boostMode": "multiply"}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let messages = fixture_where(|t| {
        let text = format!(
            "{} {}",
            t.description,
            serde_json::to_string(&t.parameters).unwrap()
        )
        .to_lowercase();
        text.contains("messag")
    });
    for name in returned(&body) {
        assert!(messages.contains(&name), "{name} does not mention messages");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelt_document_is_refused_with_its_path_and_the_nearest_name() {
    let cluster = Cluster::start(1).await;
    load_catalog(cluster.grpc, PROJECT, &fixture_catalog(), 50).await;
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "query": {"type": "boolean", "must": [
            {"type": "term", "field": "integration", "value": "crmly"},
            {"type": "range", "field": "categry", "gte": "a"}]}}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "REQUEST_INVALID", "{body}");
    let violation = &body["error"]["details"][0];
    assert_eq!(
        violation["field"], "query.query.boolean.must[1].range.field",
        "{body}"
    );
    assert!(
        violation["issue"]
            .as_str()
            .unwrap()
            .contains("did you mean `category`"),
        "{body}"
    );
    // `topK` and the document's `limit` say the same thing: only one may be given.
    let (status, body) = rest_search(
        &cluster,
        json!({"query": {"v": 1, "q": "x", "limit": 3}, "topK": 3}),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // Over gRPC: `query_json`, the same path.
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(cluster.grpc).await);
    let status = client
        .search_tools(pb::SearchToolsRequest {
            project_id: PROJECT.into(),
            query_json: Some(
                json!({"v": 1, "query": {"type": "trem", "field": "name", "value": "x"}})
                    .to_string(),
            ),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let violation = &status.get_details_bad_request().unwrap().field_violations[0];
    assert_eq!(violation.field, "query.query.type");
    assert!(
        violation.description.contains("did you mean `term`"),
        "{violation:?}"
    );
    let status = client
        .search_tools(pb::SearchToolsRequest {
            project_id: PROJECT.into(),
            query: "x".into(),
            query_json: Some(json!({"v": 1, "q": "x"}).to_string()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.get_details_bad_request().unwrap().field_violations[0].field,
        "query"
    );
    // And a valid one answers.
    let response = client
        .search_tools(pb::SearchToolsRequest {
            project_id: PROJECT.into(),
            query_json: Some(
                json!({"v": 1, "q": "open a ticket",
                "filter": {"type": "term", "field": "integration", "value": "ticketeer"}})
                .to_string(),
            ),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!response.tools.is_empty());
    assert!(response.tools.iter().all(|t| t.integration == "ticketeer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_endpoints_serve_the_generated_schema() {
    let cluster = Cluster::start(1).await;
    let (status, _, text) = http(
        cluster.http.addr,
        "GET",
        &format!("/api/tools/projects/{PROJECT}/tools/schema"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let schema: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["required"], json!(["v"]));
    assert!(
        schema["$defs"]["phrase"]["properties"]["field"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("description"))
    );
    let mut client = pb::tool_search_client::ToolSearchClient::new(channel(cluster.grpc).await);
    let grpc = client
        .get_tool_query_schema(pb::GetQuerySchemaRequest {
            project_id: PROJECT.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serde_json::from_str::<Value>(&grpc.schema_json).unwrap(),
        schema
    );

    // The meta-tools embed it: search_tools' `query` is a string or such a document.
    for (format, schema_key) in [("anthropic", "input_schema"), ("openai", "parameters")] {
        let (status, _, text) = http(
            cluster.http.addr,
            "GET",
            &format!("/api/projects/{PROJECT}/meta-tools?format={format}"),
            &[],
            "",
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        let tools = body["tools"].as_array().unwrap();
        let names: Vec<&str> = tools
            .iter()
            .map(|t| {
                t["name"]
                    .as_str()
                    .or(t["function"]["name"].as_str())
                    .unwrap()
            })
            .collect();
        assert_eq!(
            names,
            ["search_tools", "search_context", "read_context", "get_tool"]
        );
        let search = if format == "openai" {
            &tools[0]["function"]
        } else {
            &tools[0]
        };
        let input = &search[schema_key];
        assert_eq!(
            input["$defs"]["queryDocument"]["required"],
            json!(["v"]),
            "{input}"
        );
        assert!(
            search["description"]
                .as_str()
                .unwrap()
                .contains("sideEffect (keyword)")
        );
    }
    let (status, _, text) = http(
        cluster.http.addr,
        "GET",
        &format!("/api/projects/{PROJECT}/meta-tools?format=gemini"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("\"format\""), "{text}");
}
