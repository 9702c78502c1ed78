//! The embedded default: the demo catalog and documents load on first start, answer the README's
//! queries, and a restart on the same data dir serves the same catalog without re-ingesting it.

use agentsearch::demo;
use agentsearch_common::config::Config;
use agentsearch_common::ids::DEMO_PROJECT_ID;
use agentsearch_proto::v1 as pb;
use agentsearch_router::auth::Auth;
use agentsearch_tests::*;

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
        let router = agentsearch::node::embedded_router(&config, embedder())
            .await
            .unwrap();
        demo::load(&router).await.unwrap();
        demo::load_documents(&router).await.unwrap();
        assert_eq!(
            router.store().catalog_size(DEMO_PROJECT_ID).await.unwrap(),
            catalog_size
        );
        let (served, grpc) = start_router(router, Auth::default()).await;
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
    assert_eq!(shards_total, catalog_size, "the indexes persisted");
    demo::load(&router).await.unwrap();
    demo::load_documents(&router).await.unwrap();
    let (_served, grpc) = start_router(router, Auth::default()).await;
    let response = search(grpc, request("create a contact in the crm"))
        .await
        .unwrap();
    assert_eq!(names(&response), first);
}
