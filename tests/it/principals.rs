//! Who a caller is, compared one way everywhere: a JWT `sub`, an `identity`, an ACL entry, a group
//! member and a connection's user id all go through one normalisation (trim, ASCII case), so two
//! subjects that differ in anything else never share a document or a connection; what a search
//! reports of the index's version (`usage.generation`) moves only with what the caller may read;
//! and an `Authorization` header that cannot be read is refused, never taken as absent. Over real
//! gRPC and REST on loopback, with PostgreSQL metadata.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use agentsearch_common::auth::{SigningKey, TokenClaims};
use agentsearch_common::config::{AuthConfig, ProjectAuthConfig, Secret};
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::connections_client::ConnectionsClient;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_router::auth::Auth;
use agentsearch_tests::*;
use tonic::Request;

const SECRET: &str = "principals-test-hs256-secret-0123456789abcdef";
const SERVICE: &str = "principals-test-service-token-0123";
/// `K` as a Kelvin sign (U+212A): Unicode lowercasing turns it into an ASCII `k`.
const KELVIN_KIM: &str = "\u{212a}im@example.com";

fn auth(allow_anonymous: bool) -> Auth {
    let mut projects = BTreeMap::new();
    projects.insert(
        PROJECT.to_string(),
        ProjectAuthConfig {
            hs256_secret: Some(Secret::new(SECRET)),
            allow_anonymous,
            ..ProjectAuthConfig::default()
        },
    );
    Auth::from_config(&AuthConfig {
        token: Some(Secret::new(SERVICE)),
        internal_token: None,
        projects,
    })
    .unwrap()
}

fn token(sub: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    SigningKey::hs256(&Secret::new(SECRET))
        .unwrap()
        .sign(&TokenClaims {
            sub: sub.to_string(),
            project: PROJECT.to_string(),
            aud: "agentsearch".to_string(),
            iat: now,
            exp: now + 3600,
            iss: None,
        })
        .unwrap()
}

fn with_bearer<T>(message: T, bearer: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {bearer}").parse().unwrap());
    request
}

struct Node {
    cluster_http: Served,
    grpc: std::net::SocketAddr,
    _shard: Served,
    _dir: tempfile::TempDir,
}

async fn node(allow_anonymous: bool) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let (shard, _) = start_shard(dir.path()).await;
    let (store, _schema) = pg_store().await;
    let router = grpc_router(store, &[shard.addr], settings()).await;
    let (http, grpc) = start_router(router, auth(allow_anonymous)).await;
    Node {
        cluster_http: http,
        grpc,
        _shard: shard,
        _dir: dir,
    }
}

async fn create_sync(grpc: std::net::SocketAddr) -> String {
    ContextSyncClient::new(channel(grpc).await)
        .create_sync(with_bearer(
            pb::CreateSyncRequest {
                project_id: PROJECT.into(),
                source: "googledrive".into(),
                owner: "owner@example.com".into(),
                sync_id: None,
                fields: Vec::new(),
            },
            SERVICE,
        ))
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn upsert(grpc: std::net::SocketAddr, sync_id: &str, records: Vec<pb::RecordInput>) {
    let batch = pb::UpsertRecordsRequest {
        project_id: PROJECT.into(),
        sync_id: sync_id.into(),
        records,
        embedding: None,
    };
    let mut acks = ContextSyncClient::new(channel(grpc).await)
        .upsert_records(with_bearer(tokio_stream::iter(vec![batch]), SERVICE))
        .await
        .unwrap()
        .into_inner();
    while acks.message().await.unwrap().is_some() {}
}

fn record(id: &str, text: &str, acl: pb::Acl) -> pb::RecordInput {
    pb::RecordInput {
        id: id.into(),
        display_name: Some(id.into()),
        text: Some(text.into()),
        mime: "text/plain".into(),
        modified_at: None,
        acl: Some(acl),
        segments: Vec::new(),
        created_at: None,
        author: None,
        url: None,
        path: None,
        metadata_json: None,
    }
}

/// Searches as `bearer` (a user token or the service token), optionally naming an identity;
/// returns the record ids found and `usage.generation`.
async fn search(
    grpc: std::net::SocketAddr,
    bearer: &str,
    identity: Option<&str>,
) -> Result<(Vec<String>, u64), tonic::Status> {
    let response = ContextSearchClient::new(channel(grpc).await)
        .search(with_bearer(
            pb::ContextSearchRequest {
                project_id: PROJECT.into(),
                query: "zephyrine budget".into(),
                identity: identity.map(str::to_string),
                ..Default::default()
            },
            bearer,
        ))
        .await?
        .into_inner();
    let mut ids: Vec<String> = response
        .results
        .iter()
        .map(|r| r.id.rsplit('.').next().unwrap().to_string())
        .collect();
    ids.sort();
    Ok((ids, response.usage.unwrap().generation))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_differing_beyond_ascii_case_never_share_access() {
    let node = node(false).await;
    let grpc = node.grpc;
    let sync_id = create_sync(grpc).await;
    upsert(
        grpc,
        &sync_id,
        vec![
            record(
                "kim-notes",
                "Zephyrine budget notes for Kim only.",
                pb::Acl {
                    users: vec!["kim@example.com".into()],
                    ..Default::default()
                },
            ),
            record(
                "finance-plan",
                "Zephyrine budget plan of the finance group.",
                pb::Acl {
                    groups: vec!["Finance".into()],
                    ..Default::default()
                },
            ),
        ],
    )
    .await;
    ContextSyncClient::new(channel(grpc).await)
        .put_groups(with_bearer(
            pb::PutGroupsRequest {
                project_id: PROJECT.into(),
                sync_id: sync_id.clone(),
                groups: vec![pb::Group {
                    id: "Finance".into(),
                    members: vec!["Kim@Example.COM".into()],
                }],
            },
            SERVICE,
        ))
        .await
        .unwrap();

    // ASCII case does not matter: Kim is Kim, as a sub, an identity or a group member.
    let kim = token("KIM@example.com");
    let both = vec!["finance-plan".to_string(), "kim-notes".to_string()];
    assert_eq!(search(grpc, &kim, None).await.unwrap().0, both);
    assert_eq!(
        search(grpc, &kim, Some("kim@EXAMPLE.com")).await.unwrap().0,
        both
    );
    assert_eq!(
        search(grpc, SERVICE, Some(" kim@example.com "))
            .await
            .unwrap()
            .0,
        both
    );

    // A subject that only Unicode folding would merge with Kim reads nothing of Kim's.
    let kelvin = token(KELVIN_KIM);
    assert!(search(grpc, &kelvin, None).await.unwrap().0.is_empty());
    assert!(
        search(grpc, SERVICE, Some(KELVIN_KIM))
            .await
            .unwrap()
            .0
            .is_empty()
    );
    let refused = search(grpc, &kelvin, Some("kim@example.com"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let refused = search(grpc, &kim, Some(KELVIN_KIM)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);

    // Connections: written for `Alice@Example.com`, they are the connections of the token whose
    // sub is `alice@example.com`, and of no subject that differs beyond ASCII case.
    let mut connections = ConnectionsClient::new(channel(grpc).await);
    connections
        .upsert_connections(with_bearer(
            pb::UpsertConnectionsRequest {
                project_id: PROJECT.into(),
                user_id: "Alice@Example.com".into(),
                connections: vec![pb::ConnectionInput {
                    integration: "gmail".into(),
                    account_id: "alice@example.com".into(),
                    ..Default::default()
                }],
            },
            SERVICE,
        ))
        .await
        .unwrap();
    let listed = |bearer: String, user: &'static str| {
        let mut connections = connections.clone();
        async move {
            connections
                .list_connections(with_bearer(
                    pb::ListConnectionsRequest {
                        project_id: PROJECT.into(),
                        user_id: user.into(),
                        integrations: Vec::new(),
                    },
                    &bearer,
                ))
                .await
                .map(|r| r.into_inner().toolkits.len())
        }
    };
    assert_eq!(
        listed(token("alice@example.com"), "alice@example.com")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        listed(token("alice@example.com"), "ALICE@example.com")
            .await
            .unwrap(),
        1
    );
    let alt = "\u{c4}lice@example.com";
    assert_eq!(listed(token(alt), alt).await.unwrap(), 0);
    let refused = listed(token(alt), "alice@example.com").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_generation_moves_only_with_what_the_caller_may_read() {
    let node = node(false).await;
    let grpc = node.grpc;
    let sync_id = create_sync(grpc).await;
    let only = |user: &str| pb::Acl {
        users: vec![user.into()],
        ..Default::default()
    };
    upsert(
        grpc,
        &sync_id,
        vec![record(
            "alice-plan",
            "Zephyrine budget of Alice.",
            only("alice@example.com"),
        )],
    )
    .await;
    let (alice, bob) = (token("alice@example.com"), token("bob@example.com"));
    let (found, first) = search(grpc, &alice, None).await.unwrap();
    assert_eq!(found, ["alice-plan"]);
    let (_, bob_first) = search(grpc, &bob, None).await.unwrap();

    // Writes Alice cannot read leave her generation as it was; Bob's moves.
    for round in 0..3 {
        upsert(
            grpc,
            &sync_id,
            vec![record(
                "bob-plan",
                &format!("Zephyrine budget of Bob, version {round}."),
                only("bob@example.com"),
            )],
        )
        .await;
        assert_eq!(search(grpc, &alice, None).await.unwrap().1, first);
    }
    let (found, bob_after) = search(grpc, &bob, None).await.unwrap();
    assert_eq!(found, ["bob-plan"]);
    assert!(bob_after > bob_first);
    ContextSyncClient::new(channel(grpc).await)
        .delete_records(with_bearer(
            pb::DeleteRecordsRequest {
                project_id: PROJECT.into(),
                sync_id: sync_id.clone(),
                ids: vec!["bob-plan".into()],
            },
            SERVICE,
        ))
        .await
        .unwrap();
    assert_eq!(search(grpc, &alice, None).await.unwrap().1, first);

    // A write she can read moves it.
    upsert(
        grpc,
        &sync_id,
        vec![record(
            "alice-plan",
            "Zephyrine budget of Alice, revised.",
            only("alice@example.com"),
        )],
    )
    .await;
    assert!(search(grpc, &alice, None).await.unwrap().1 > first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_authorization_header_is_refused_not_anonymous() {
    // Anonymous callers are allowed here, so a header taken as absent would be let in.
    let node = node(true).await;
    let path = format!("/api/tools/projects/{PROJECT}/tools/search");
    let body = r#"{"query": "send an email"}"#;
    let headers = [("content-type", "application/json")];
    let (status, _, _) = http(node.cluster_http.addr, "POST", &path, &headers, body).await;
    assert_eq!(status, 200);
    let (status, _, answer) = http(
        node.cluster_http.addr,
        "POST",
        &path,
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer \u{e9}t\u{e9}"),
        ],
        body,
    )
    .await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("UNAUTHENTICATED"), "{answer}");

    // gRPC: the same header as raw bytes.
    let mut request = Request::new(pb::SearchToolsRequest {
        project_id: PROJECT.into(),
        query: "send an email".into(),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "authorization",
        tonic::metadata::MetadataValue::try_from(&b"Bearer \xc3\xa9t\xc3\xa9"[..]).unwrap(),
    );
    let refused = pb::tool_search_client::ToolSearchClient::new(channel(node.grpc).await)
        .search_tools(request)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
}
