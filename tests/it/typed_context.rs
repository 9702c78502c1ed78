//! Typed context search over REST and gRPC on a two-shard cluster: syncs declare metadata fields,
//! records carry them (checked on ingest, by name), and a query JSON document's nodes over record
//! and metadata fields decide exactly which records come back, always within what the identity
//! may read; the schema lists each project's fields; `countExactly`, `highlight` and
//! `limit`/`offset` do what they promise; a misspelt field is refused naming the nearest one.

use std::collections::BTreeSet;

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_tests::*;
use serde_json::{Value, json};
use tonic_types::StatusExt;

fn context() -> String {
    format!("/api/context/projects/{PROJECT}")
}

async fn rest(cluster: &Cluster, method: &str, path: &str, body: Value) -> (u16, Value) {
    rest_json(
        cluster.http.addr,
        method,
        &format!("{}{path}", context()),
        None,
        &body.to_string(),
    )
    .await
}

/// A record of `sync`: path, author, month of modification, team, size and who may read it.
struct Doc {
    id: &'static str,
    path: &'static str,
    author: &'static str,
    modified: &'static str,
    team: &'static str,
    size: f64,
    readers: &'static [&'static str],
    text: &'static str,
}

const DOCS: &[Doc] = &[
    Doc {
        id: "budget-2026",
        path: "/Finance/2026",
        author: "carol@example.com",
        modified: "2026-03-02T10:00:00Z",
        team: "finance",
        size: 120.0,
        readers: &["alice@example.com", "bob@example.com"],
        text: "The quarterly budget review covers travel spending and the hiring plan.",
    },
    Doc {
        id: "budget-2025",
        path: "/Finance/2025",
        author: "carol@example.com",
        modified: "2025-11-20T09:00:00Z",
        team: "finance",
        size: 80.0,
        readers: &["alice@example.com"],
        text: "Last year's budget: travel spending rose while hiring slowed.",
    },
    Doc {
        id: "salaries",
        path: "/Finance/2026",
        author: "dave@example.com",
        modified: "2026-04-10T08:00:00Z",
        team: "finance",
        size: 300.0,
        readers: &["bob@example.com"],
        text: "Salary bands for the hiring plan, budget by grade.",
    },
    Doc {
        id: "roadmap",
        path: "/Product",
        author: "erin@example.com",
        modified: "2026-02-14T12:00:00Z",
        team: "product",
        size: 45.0,
        readers: &["alice@example.com"],
        text: "The product roadmap: search quality, budget for the launch, travel to customers.",
    },
    Doc {
        id: "offsite",
        path: "/Product/Events",
        author: "erin@example.com",
        modified: "2026-05-01T12:00:00Z",
        team: "product",
        size: 10.0,
        readers: &["alice@example.com"],
        text: "Offsite agenda: travel booking, hotel and the team dinner.",
    },
];

fn record(doc: &Doc) -> Value {
    json!({
        "id": doc.id,
        "displayName": format!("{} notes", doc.id),
        "text": doc.text,
        "mime": "text/plain",
        "modifiedAt": doc.modified,
        "createdAt": "2025-01-01T00:00:00Z",
        "author": doc.author,
        "path": doc.path,
        "url": format!("https://drive.example.com/{}", doc.id),
        "metadata": {"team": doc.team, "size": doc.size, "reviewed": doc.size > 100.0},
        "acl": {"users": doc.readers},
    })
}

/// Record ids of a search answer, as returned.
fn ids(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| {
            let id = r["id"].as_str().unwrap();
            id.split_once('.').unwrap().1.to_string()
        })
        .collect()
}

/// Record ids of the fixture for which `keep` holds and that `reader` may read.
fn expected(reader: &str, keep: impl Fn(&Doc) -> bool) -> BTreeSet<String> {
    DOCS.iter()
        .filter(|d| d.readers.contains(&reader) && keep(d))
        .map(|d| d.id.to_string())
        .collect()
}

async fn search(cluster: &Cluster, identity: &str, query: Value) -> (u16, Value) {
    rest(
        cluster,
        "POST",
        "/search",
        json!({"query": query, "identity": identity}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_context_search_selects_exactly_what_the_nodes_and_the_acl_allow() {
    let cluster = Cluster::start(2).await;
    let (status, drive) = rest(
        &cluster,
        "POST",
        "/syncs",
        json!({"source": "googledrive", "owner": "admin@example.com",
               "fields": [{"name": "team", "kind": "keyword"},
                          {"name": "size", "kind": "numeric"},
                          {"name": "reviewed", "kind": "bool"}]}),
    )
    .await;
    assert_eq!(status, 200, "{drive}");
    assert_eq!(
        drive["fields"][1],
        json!({"name": "size", "kind": "numeric"})
    );
    let drive = drive["id"].as_str().unwrap().to_string();
    let (status, other) = rest(
        &cluster,
        "POST",
        "/syncs",
        json!({"source": "box", "owner": "admin@example.com",
               "fields": [{"name": "team", "kind": "keyword"}]}),
    )
    .await;
    assert_eq!(status, 200, "{other}");
    let other = other["id"].as_str().unwrap().to_string();

    // A field name has one kind per project.
    let (status, body) = rest(
        &cluster,
        "POST",
        "/syncs",
        json!({"source": "box", "owner": "admin@example.com",
               "fields": [{"name": "size", "kind": "keyword"}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["details"][0]["field"], "fields[0].kind",
        "{body}"
    );

    // Ingest checks metadata against the declarations, by name; nothing is written on refusal.
    let mut bad = record(&DOCS[0]);
    bad["metadata"] = json!({"team": "finance", "sise": 3});
    let mut wrong_kind = record(&DOCS[1]);
    wrong_kind["metadata"] = json!({"size": "big"});
    // Dates an index cannot hold are refused on ingest, not wrapped.
    let mut far = record(&DOCS[2]);
    far["modifiedAt"] = json!("9999-12-31T00:00:00Z");
    let (status, body) = rest(
        &cluster,
        "PUT",
        &format!("/syncs/{drive}/records"),
        json!({"records": [bad, wrong_kind, far]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let fields: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "records[0].metadata.sise",
            "records[1].metadata.size",
            "records[2].modifiedAt"
        ]
    );

    let (status, body) = rest(
        &cluster,
        "PUT",
        &format!("/syncs/{drive}/records"),
        json!({"records": DOCS.iter().map(record).collect::<Vec<_>>()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["upserted"], DOCS.len());
    let (status, body) = rest(
        &cluster,
        "PUT",
        &format!("/syncs/{other}/records"),
        json!({"records": [{"id": "box-budget", "text": "Budget travel notes kept in Box.",
                            "path": "/Finance/2026", "metadata": {"team": "finance"},
                            "modifiedAt": "2026-06-01T00:00:00Z",
                            "acl": {"anyone": true}}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The schema lists record fields and every sync's metadata; `syncIds` narrows the metadata.
    let (status, schema) = rest(&cluster, "GET", "/schema", Value::Null).await;
    assert_eq!(status, 200, "{schema}");
    let text = schema.to_string();
    for field in [
        "\"path\"",
        "\"modifiedAt\"",
        "\"team\"",
        "\"size\"",
        "\"reviewed\"",
    ] {
        assert!(text.contains(field), "{field} missing from {text}");
    }
    let (status, narrowed) = rest(
        &cluster,
        "GET",
        &format!("/schema?syncIds={other}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{narrowed}");
    assert!(!narrowed.to_string().contains("\"size\""));
    assert!(narrowed.to_string().contains("\"team\""));

    // A filter alone: records under /Finance modified in 2026, as alice may read them.
    let (status, body) = search(
        &cluster,
        "alice@example.com",
        json!({"v": 1, "filter": {"type": "boolean", "must": [
            {"type": "prefix", "field": "path", "value": "/Finance"},
            {"type": "range", "field": "modifiedAt", "gte": "2026-01-01"}]},
            "countExactly": true, "limit": 50}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut want = expected("alice@example.com", |d| {
        d.path.starts_with("/Finance") && d.modified >= "2026"
    });
    want.insert("box-budget".into());
    assert_eq!(ids(&body).into_iter().collect::<BTreeSet<_>>(), want);
    assert_eq!(body["usage"]["matched"], want.len(), "{body}");
    assert_eq!(body["usage"]["retrievalMode"], "structured");

    // bob sees salaries, alice never does; the count is of what each may read.
    let (_, body) = search(
        &cluster,
        "bob@example.com",
        json!({"v": 1, "filter": {"type": "term", "field": "author", "value": "dave@example.com"},
               "countExactly": true}),
    )
    .await;
    assert_eq!(ids(&body), ["salaries"]);
    let (_, body) = search(
        &cluster,
        "alice@example.com",
        json!({"v": 1, "filter": {"type": "term", "field": "author", "value": "dave@example.com"},
               "countExactly": true}),
    )
    .await;
    assert!(ids(&body).is_empty(), "{body}");
    assert_eq!(body["usage"]["matched"], 0);

    // Metadata of every kind, with words: numeric range, bool term, keyword term on `team`.
    let (status, body) = search(
        &cluster,
        "alice@example.com",
        json!({"v": 1, "q": "travel budget", "filter": {"type": "boolean",
            "must": [{"type": "range", "field": "size", "gt": 40, "lte": 120}],
            "mustNot": [{"type": "term", "field": "team", "value": "product"},
                        {"type": "term", "field": "reviewed", "value": true}]},
            "highlight": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let want = expected("alice@example.com", |d| {
        d.size > 40.0 && d.size <= 120.0 && d.team != "product" && d.size <= 100.0
    });
    assert_eq!(ids(&body).into_iter().collect::<BTreeSet<_>>(), want);
    let highlights = &body["results"][0]["segments"][0]["highlights"];
    assert!(
        highlights[0].as_str().is_some_and(|h| h.contains("<em>")),
        "{body}"
    );

    // Source and sync id are fields too; a phrase needs its words in order.
    let (_, body) = search(
        &cluster,
        "alice@example.com",
        json!({"v": 1, "filter": {"type": "boolean", "must": [
            {"type": "term", "field": "source", "value": "googledrive"},
            {"type": "phrase", "field": "text", "terms": ["travel", "spending"]}]}}),
    )
    .await;
    assert_eq!(
        ids(&body).into_iter().collect::<BTreeSet<_>>(),
        expected("alice@example.com", |d| d.text.contains("travel spending"))
    );

    // Pages: two pages of two are the first page of four, in order, without repeats.
    let page = |offset: u32, limit: u32| json!({"v": 1, "q": "budget travel hiring", "limit": limit, "offset": offset});
    let (_, first) = search(&cluster, "alice@example.com", page(0, 2)).await;
    let (_, second) = search(&cluster, "alice@example.com", page(2, 2)).await;
    let (_, whole) = search(&cluster, "alice@example.com", page(0, 4)).await;
    let mut paged = ids(&first);
    paged.extend(ids(&second));
    assert_eq!(paged, ids(&whole));
    assert_eq!(paged.len(), 4, "{whole}");

    // A misspelt field: refused with the path and the nearest valid name.
    let (status, body) = search(
        &cluster,
        "alice@example.com",
        json!({"v": 1, "filter": {"type": "boolean", "must": [
            {"type": "prefix", "field": "paht", "value": "/Finance"}]}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let violation = &body["error"]["details"][0];
    assert_eq!(body["error"]["code"], "REQUEST_INVALID");
    assert_eq!(
        violation["field"],
        "query.filter.boolean.must[0].prefix.field"
    );
    assert!(
        violation["issue"]
            .as_str()
            .unwrap()
            .contains("did you mean `path`"),
        "{body}"
    );
    // A metadata field of no searched sync is unknown to the query.
    let (status, body) = rest(
        &cluster,
        "POST",
        "/search",
        json!({"query": {"v": 1, "filter": {"type": "term", "field": "reviewed", "value": true}},
               "syncIds": [other], "identity": "alice@example.com"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // gRPC: the same document as `query_json`, and the schema.
    let mut client = ContextSearchClient::new(channel(cluster.grpc).await);
    let response = client
        .search(pb::ContextSearchRequest {
            project_id: PROJECT.into(),
            query_json: Some(
                json!({"v": 1, "filter": {"type": "term", "field": "team", "value": "product"},
                       "countExactly": true})
                .to_string(),
            ),
            identity: Some("alice@example.com".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let got: BTreeSet<String> = response
        .results
        .iter()
        .map(|r| r.id.split_once('.').unwrap().1.to_string())
        .collect();
    assert_eq!(got, expected("alice@example.com", |d| d.team == "product"));
    assert_eq!(response.usage.unwrap().matched, Some(got.len() as u64));
    let err = client
        .search(pb::ContextSearchRequest {
            project_id: PROJECT.into(),
            query: "budget".into(),
            query_json: Some(json!({"v": 1}).to_string()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let violations = err.get_details_bad_request().unwrap().field_violations;
    assert_eq!(violations[0].field, "query");
    let schema = client
        .get_context_query_schema(pb::GetContextQuerySchemaRequest {
            project_id: PROJECT.into(),
            sync_ids: vec![drive.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    let schema: Value = serde_json::from_str(&schema.schema_json).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(schema.to_string().contains("\"reviewed\""));
}
