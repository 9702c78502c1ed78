//! The embedded default: the demo catalog and documents load on first start, answer the README's
//! queries, and a restart on the same data dir serves the same catalog without re-ingesting it.
//! The demo's hydration file applies to the demo project only, and only when the demo is loaded.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use agentsearch::demo;
use agentsearch_common::config::{AuthConfig, Config, ProjectAuthConfig, Secret, ShardsConfig};
use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_common::tool::ToolDefinition;
use agentsearch_proto::v1 as pb;
use agentsearch_router::auth::Auth;
use agentsearch_tests::*;

/// The demo tools whose schemas `demo/hydration.json` describes.
const HYDRATED: [&str; 3] = [
    "SALESFORCE_CREATE_OPPORTUNITY",
    "SALESFORCE_CREATE_ACCOUNT",
    "SALESFORCE_CREATE_LEAD",
];
const DEMO_SECRET: &str = "embedded-test-secret-of-the-demo-project-0123";

/// Verifies user tokens of the demo project and of the test project (each with [`DEMO_SECRET`]);
/// callers without a token are anonymous.
fn user_auth() -> Auth {
    let keyed = || ProjectAuthConfig {
        hs256_secret: Some(Secret::new(DEMO_SECRET)),
        allow_anonymous: true,
        ..ProjectAuthConfig::default()
    };
    let projects = BTreeMap::from([
        (DEMO_PROJECT_ID.to_string(), keyed()),
        (PROJECT.to_string(), keyed()),
    ]);
    Auth::from_config(&AuthConfig {
        token: None,
        internal_token: None,
        projects,
    })
    .unwrap()
}

/// The demo catalog's Salesforce tools.
fn salesforce_tools() -> Vec<ToolDefinition> {
    demo::parse_catalog(demo::CATALOG)
        .unwrap()
        .into_iter()
        .filter(|t| t.integration == "salesforce")
        .collect()
}

/// `name` of `project` looked up over gRPC as the demo user: its schema source.
async fn schema_source(grpc: SocketAddr, project: &str, name: &str) -> String {
    let token = signed_token(DEMO_SECRET, project, demo::DEMO_USER);
    pb::tool_search_client::ToolSearchClient::new(channel(grpc).await)
        .get_tool(bearer(
            pb::GetToolRequest {
                project_id: project.into(),
                name: name.into(),
            },
            Some(&token),
        ))
        .await
        .unwrap_or_else(|e| panic!("{project} {name}: {e:?}"))
        .into_inner()
        .tool
        .unwrap()
        .schema_source
}

/// A search of `project` as the demo user: (tool, schema source) of every result, and the
/// hydrated integrations.
async fn search_as_demo_user(
    grpc: SocketAddr,
    project: &str,
    query: &str,
) -> (Vec<(String, String)>, Vec<String>) {
    let token = signed_token(DEMO_SECRET, project, demo::DEMO_USER);
    let response = pb::tool_search_client::ToolSearchClient::new(channel(grpc).await)
        .search_tools(bearer(
            pb::SearchToolsRequest {
                project_id: project.into(),
                query: query.into(),
                top_k: Some(10),
                integrations: vec!["salesforce".into()],
                ..Default::default()
            },
            Some(&token),
        ))
        .await
        .unwrap()
        .into_inner();
    (
        response
            .tools
            .iter()
            .map(|t| (t.intent_name.clone(), t.schema_source.clone()))
            .collect(),
        response.usage.unwrap().hydrated_integrations,
    )
}

fn request(query: &str) -> pb::SearchToolsRequest {
    pb::SearchToolsRequest {
        project_id: DEMO_PROJECT_ID.into(),
        query: query.into(),
        top_k: Some(5),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_catalog_answers_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    let catalog_size = demo::parse_catalog(demo::CATALOG).unwrap().len() as u64;
    assert!(catalog_size >= 600);

    let first = {
        // As `serve` starts with the demo.
        let router = agentsearch::node::embedded_node(&config, embedder(), true)
            .await
            .unwrap();
        assert_eq!(
            router.store().catalog_size(DEMO_PROJECT_ID).await.unwrap(),
            catalog_size
        );
        // Another project with tools named like the demo's Salesforce tools.
        router
            .upsert_tools(PROJECT, salesforce_tools(), "setup")
            .await
            .unwrap();
        let (served, grpc) = start_router(router, user_auth()).await;

        // The demo file hydrates the demo project's tools for the demo user, and no other
        // project's, by lookup or by search.
        for name in HYDRATED {
            assert_eq!(schema_source(grpc, DEMO_PROJECT_ID, name).await, "hydrated");
            assert_eq!(schema_source(grpc, PROJECT, name).await, "static", "{name}");
        }
        let query = "create a salesforce opportunity";
        let (tools, hydrated) = search_as_demo_user(grpc, DEMO_PROJECT_ID, query).await;
        assert!(
            tools.iter().any(|(_, source)| source == "hydrated"),
            "{tools:?}"
        );
        assert_eq!(hydrated, ["salesforce"]);
        let (tools, hydrated) = search_as_demo_user(grpc, PROJECT, query).await;
        assert!(
            tools
                .iter()
                .any(|(name, _)| HYDRATED.contains(&name.as_str())),
            "{tools:?}"
        );
        assert!(
            tools.iter().all(|(_, source)| source == "static"),
            "{tools:?}"
        );
        assert!(hydrated.is_empty(), "{hydrated:?}");

        // The README's context search: alice finds the Q2 roadmap; an outside contractor does not.
        let mut client = pb::context_search_client::ContextSearchClient::new(channel(grpc).await);
        let as_user = |identity: &str| pb::ContextSearchRequest {
            project_id: DEMO_PROJECT_ID.into(),
            query: "q2 roadmap".into(),
            identity: Some(identity.into()),
            top_k: Some(3),
            ..Default::default()
        };
        let alice = client
            .search(as_user("alice@example.com"))
            .await
            .unwrap()
            .into_inner();
        let titles: Vec<String> = alice
            .results
            .iter()
            .map(|r| r.display_name.clone().unwrap_or_default())
            .collect();
        assert!(titles[..2].iter().any(|t| t == "Q2 roadmap"), "{titles:?}");
        let erin = client
            .search(as_user("erin@partner.io"))
            .await
            .unwrap()
            .into_inner();
        assert!(
            erin.results.iter().all(|r| !r
                .display_name
                .clone()
                .unwrap_or_default()
                .contains("roadmap")),
            "{:?}",
            erin.results
        );
        let response = search(grpc, request("post a message to a slack channel"))
            .await
            .unwrap();
        assert_eq!(
            names(&response)[0],
            "SLACK_POST_MESSAGE",
            "{:?}",
            names(&response)
        );
        let integrations: std::collections::HashSet<String> = demo::parse_catalog(demo::CATALOG)
            .unwrap()
            .into_iter()
            .map(|t| t.integration)
            .collect();
        assert!(integrations.len() >= 30);
        let response = search(grpc, request("create a contact in the crm"))
            .await
            .unwrap();
        served.stop().await;
        names(&response)
    };

    // Restart on the same data dir: nothing to load, same answers.
    let router = agentsearch::node::embedded_router(&config, embedder())
        .await
        .unwrap();
    let shards_total: u64 = {
        let mut total = 0;
        for id in router.shards().ids() {
            total += router
                .shards()
                .get(&id)
                .unwrap()
                .info("t", std::time::Duration::from_secs(5))
                .await
                .unwrap()
                .tools;
        }
        total
    };
    assert_eq!(
        shards_total,
        catalog_size + salesforce_tools().len() as u64,
        "the indexes persisted (the demo project's and the other project's tools)"
    );
    demo::load(&router).await.unwrap();
    demo::load_documents(&router).await.unwrap();
    let (_served, grpc) = start_router(router, Auth::default()).await;
    let response = search(grpc, request("create a contact in the crm"))
        .await
        .unwrap();
    assert_eq!(names(&response), first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_demo_installs_no_demo_hydration() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: ShardsConfig {
            local: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    // As `serve --no-demo` starts: nothing of the demo is loaded.
    let router = agentsearch::node::embedded_node(&config, embedder(), false)
        .await
        .unwrap();
    assert_eq!(
        router.store().catalog_size(DEMO_PROJECT_ID).await.unwrap(),
        0
    );
    // Even the demo project's own Salesforce tools, loaded by hand, keep their static schemas.
    router
        .upsert_tools(DEMO_PROJECT_ID, salesforce_tools(), "setup")
        .await
        .unwrap();
    let (_served, grpc) = start_router(router, user_auth()).await;
    for name in HYDRATED {
        assert_eq!(
            schema_source(grpc, DEMO_PROJECT_ID, name).await,
            "static",
            "{name}"
        );
    }
    let (tools, hydrated) =
        search_as_demo_user(grpc, DEMO_PROJECT_ID, "create a salesforce opportunity").await;
    assert!(
        tools
            .iter()
            .any(|(name, _)| HYDRATED.contains(&name.as_str())),
        "{tools:?}"
    );
    assert!(
        tools.iter().all(|(_, source)| source == "static"),
        "{tools:?}"
    );
    assert!(hydrated.is_empty(), "{hydrated:?}");
    assert!(!dir.path().join("demo-hydration.json").exists());
}
