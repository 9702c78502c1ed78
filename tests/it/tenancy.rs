//! Tool search keeps projects apart: two projects with the same integration slugs and some tools
//! of the same name (described differently) never see each other's tools, through search, lookup
//! by name (gRPC and REST), exact-name promotion or near misses; a delete in one leaves the other.

use std::collections::{BTreeMap, BTreeSet};

use agentsearch_common::tool::ToolDefinition;
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use agentsearch_tests::*;

const OTHER: &str = "00000000-0000-4000-8000-0000000000f2";

/// Names both projects have (each describes them its own way).
const SHARED: [&str; 3] = [
    "ACME_MAIL_SEND_EMAIL",
    "ACME_MAIL_LIST_INBOX",
    "CRMLY_CREATE_CONTACT",
];
/// A tool only the other project has, named like the test project's tools.
const OTHER_ONLY: &str = "ACME_MAIL_SEND_PIGEON";
/// A tool only the test project has.
const MINE_ONLY: &str = "ACME_MAIL_FORWARD_EMAIL";

/// The test project's tools: the fixture's `acme_mail` and `crmly` integrations.
fn mine() -> Vec<ToolDefinition> {
    fixture_catalog()
        .into_iter()
        .filter(|t| t.integration == "acme_mail" || t.integration == "crmly")
        .collect()
}

/// The other project's tools: the same slugs, the shared names described otherwise, one name of
/// its own, and none of the test project's other names.
fn theirs() -> Vec<ToolDefinition> {
    let mut tools: Vec<ToolDefinition> = mine()
        .into_iter()
        .filter(|t| SHARED.contains(&t.name.as_str()))
        .map(|mut t| {
            t.description = format!(
                "Other project's tool: {} by carrier pigeon, logged in the pigeon loft.",
                t.description.trim_end_matches('.')
            );
            t
        })
        .collect();
    let mut pigeon = tools[0].clone();
    pigeon.name = OTHER_ONLY.into();
    pigeon.description = "Other project's tool: send an email by carrier pigeon.".into();
    tools.push(pigeon);
    tools
}

fn descriptions(tools: &[ToolDefinition]) -> BTreeMap<String, String> {
    tools
        .iter()
        .map(|t| (t.name.clone(), t.description.clone()))
        .collect()
}

fn request(project: &str, query: &str) -> pb::SearchToolsRequest {
    pb::SearchToolsRequest {
        project_id: project.into(),
        query: query.into(),
        top_k: Some(50),
        ..Default::default()
    }
}

/// Every tool returned (and every near miss) is one of `catalog`'s, as that project describes it.
fn assert_own(response: &pb::SearchToolsResponse, catalog: &BTreeMap<String, String>, what: &str) {
    for tool in &response.tools {
        assert_eq!(
            catalog.get(&tool.intent_name),
            Some(&description(tool).to_string()),
            "{what}: {} is not this project's",
            tool.intent_name
        );
    }
    for miss in &response.usage.as_ref().unwrap().near_misses {
        assert!(
            catalog.contains_key(&miss.intent_name),
            "{what}: near miss {} is not this project's",
            miss.intent_name
        );
    }
}

/// The description of a returned tool, as returned.
fn description(tool: &pb::ToolResult) -> &str {
    &tool
        .tool
        .as_ref()
        .unwrap()
        .function
        .as_ref()
        .unwrap()
        .description
}

async fn get_tool(
    grpc: std::net::SocketAddr,
    project: &str,
    name: &str,
) -> Result<pb::GetToolResponse, tonic::Status> {
    ToolSearchClient::new(channel(grpc).await)
        .get_tool(pb::GetToolRequest {
            project_id: project.into(),
            name: name.into(),
        })
        .await
        .map(|r| r.into_inner())
}

/// `GET /tools/{name}` of `project` over REST: (status, description or error code).
async fn rest_get_tool(addr: std::net::SocketAddr, project: &str, name: &str) -> (u16, String) {
    let path = format!("/api/tools/projects/{project}/tools/{name}");
    let (status, body) = rest_json(addr, "GET", &path, None, "").await;
    let text = if status == 200 {
        body["tool"]["tool"]["function"]["description"].clone()
    } else {
        body["error"]["code"].clone()
    };
    (status, text.as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_never_see_each_others_tools() {
    let cluster = Cluster::start(2).await;
    let (grpc, addr) = (cluster.grpc, cluster.http.addr);
    load_catalog(grpc, PROJECT, &mine(), 20).await;
    load_catalog(grpc, OTHER, &theirs(), 20).await;
    let (mine, theirs) = (descriptions(&mine()), descriptions(&theirs()));
    assert!(SHARED.iter().all(|n| mine[*n] != theirs[*n]));
    let slugs = |c: &BTreeMap<String, String>| -> BTreeSet<String> {
        c.keys()
            .map(|n| n.split('_').take(2).collect::<Vec<_>>().join("_"))
            .collect()
    };
    assert!(slugs(&theirs).is_subset(&slugs(&mine)));

    // Search: each project's own tools only, as it describes them.
    for query in [
        "send an email",
        "send an email by carrier pigeon",
        "create a contact",
    ] {
        for (project, catalog) in [(PROJECT, &mine), (OTHER, &theirs)] {
            let response = search(grpc, request(project, query)).await.unwrap();
            assert_own(&response, catalog, &format!("{project} {query}"));
            let usage = response.usage.unwrap();
            assert!(
                usage.candidates as usize <= catalog.len(),
                "{project} {query}: {} candidates of {} tools",
                usage.candidates,
                catalog.len()
            );
        }
    }
    let response = search(grpc, request(OTHER, "send an email")).await.unwrap();
    assert_eq!(
        names(&response).into_iter().collect::<BTreeSet<_>>(),
        theirs.keys().cloned().collect(),
        "dense search returns each tool of the small catalog once"
    );

    // A query naming a tool: promoted in its own project, never found in the other.
    for (project, catalog, name) in [
        (PROJECT, &mine, SHARED[0]),
        (OTHER, &theirs, SHARED[0]),
        (OTHER, &theirs, OTHER_ONLY),
        (PROJECT, &mine, MINE_ONLY),
    ] {
        let response = search(grpc, request(project, name)).await.unwrap();
        assert_eq!(names(&response)[0], name, "{project}");
        assert_own(&response, catalog, &format!("{project} {name}"));
    }
    for (project, catalog, name) in [(PROJECT, &mine, OTHER_ONLY), (OTHER, &theirs, MINE_ONLY)] {
        for ceiling in [None, Some("read")] {
            let mut r = request(project, name);
            r.max_side_effect = ceiling.map(str::to_string);
            let response = search(grpc, r).await.unwrap();
            assert!(
                !names(&response).iter().any(|n| n == name),
                "{project} found {name}"
            );
            assert_own(&response, catalog, &format!("{project} {name} {ceiling:?}"));
        }
    }

    // Lookup by name, over gRPC and REST.
    for (project, catalog, foreign) in [(PROJECT, &mine, OTHER_ONLY), (OTHER, &theirs, MINE_ONLY)] {
        for name in SHARED {
            let tool = get_tool(grpc, project, name).await.unwrap().tool.unwrap();
            assert_eq!(description(&tool), catalog[name], "{project}");
            let (status, description) = rest_get_tool(addr, project, name).await;
            assert_eq!(
                (status, description.as_str()),
                (200, catalog[name].as_str())
            );
        }
        let status = get_tool(grpc, project, foreign).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{project} {foreign}");
        assert_eq!(
            rest_get_tool(addr, project, foreign).await,
            (404, "NOT_FOUND".to_string())
        );
    }

    // Deleting a shared name in one project leaves the other's.
    let deleted = pb::tool_catalog_client::ToolCatalogClient::new(channel(grpc).await)
        .delete_tools(pb::DeleteToolsRequest {
            project_id: PROJECT.into(),
            names: vec![SHARED[0].into(), OTHER_ONLY.into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((deleted.deleted, deleted.not_found), (1, 1));
    assert_eq!(
        get_tool(grpc, PROJECT, SHARED[0]).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let kept = get_tool(grpc, OTHER, SHARED[0]).await.unwrap();
    assert_eq!(description(&kept.tool.unwrap()), theirs[SHARED[0]]);
    assert_eq!(
        rest_get_tool(addr, OTHER, SHARED[0]).await,
        (200, theirs[SHARED[0]].clone())
    );
    get_tool(grpc, OTHER, OTHER_ONLY).await.unwrap();
    let response = search(grpc, request(OTHER, SHARED[0])).await.unwrap();
    assert_eq!(names(&response)[0], SHARED[0]);
    assert_own(&response, &theirs, "other after the delete");
    let response = search(grpc, request(PROJECT, SHARED[0])).await.unwrap();
    assert!(!names(&response).iter().any(|n| n == SHARED[0]));
    let mut mine_now = mine.clone();
    mine_now.remove(SHARED[0]);
    assert_own(&response, &mine_now, "project after the delete");
}
