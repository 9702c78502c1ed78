//! Authentication with project keys over gRPC (and read-around over REST): a user token searches
//! and reads context as its own `sub` only, and may not write groups, records or the catalog; the
//! service token may. Every refused write is checked to have changed nothing.

use std::net::SocketAddr;

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_proto::v1::tool_catalog_client::ToolCatalogClient;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use agentsearch_tests::*;
use serde_json::json;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

fn acl_users(users: &[&str]) -> pb::Acl {
    pb::Acl {
        users: users.iter().map(|u| u.to_string()).collect(),
        ..Default::default()
    }
}

fn record(id: &str, text: &str, acl: pb::Acl) -> pb::RecordInput {
    pb::RecordInput {
        id: id.into(),
        display_name: Some(format!("Note {id}")),
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

/// Streams one batch of records as `token`; the first acknowledgement or the refusal.
async fn upsert_records(
    grpc: SocketAddr,
    token: &str,
    sync_id: &str,
    records: Vec<pb::RecordInput>,
) -> Result<pb::UpsertRecordsResponse, tonic::Status> {
    let mut client = ContextSyncClient::new(channel(grpc).await);
    let batch = pb::UpsertRecordsRequest {
        project_id: PROJECT.into(),
        sync_id: sync_id.into(),
        records,
        embedding: None,
    };
    let mut acks = client
        .upsert_records(bearer(tokio_stream::iter(vec![batch]), Some(token)))
        .await?
        .into_inner();
    Ok(acks.message().await?.expect("one acknowledgement"))
}

/// Streams one batch of tools as `token`; the first acknowledgement or the refusal.
async fn upsert_tools(
    grpc: SocketAddr,
    token: &str,
    tools: Vec<pb::ToolDefinition>,
) -> Result<pb::UpsertToolsResponse, tonic::Status> {
    let mut client = ToolCatalogClient::new(channel(grpc).await);
    let batch = pb::UpsertToolsRequest {
        project_id: PROJECT.into(),
        tools,
    };
    let mut acks = client
        .upsert_tools(bearer(tokio_stream::iter(vec![batch]), Some(token)))
        .await?
        .into_inner();
    Ok(acks.message().await?.expect("one acknowledgement"))
}

fn search_request(identity: Option<&str>) -> pb::ContextSearchRequest {
    pb::ContextSearchRequest {
        project_id: PROJECT.into(),
        query: "zorblat forecast".into(),
        identity: identity.map(str::to_string),
        top_k: Some(10),
        ..Default::default()
    }
}

async fn csearch(
    grpc: SocketAddr,
    token: Option<&str>,
    request: pb::ContextSearchRequest,
) -> Result<pb::ContextSearchResponse, tonic::Status> {
    let mut client = ContextSearchClient::new(channel(grpc).await);
    client
        .search(bearer(request, token))
        .await
        .map(|r| r.into_inner())
}

async fn read(
    grpc: SocketAddr,
    token: Option<&str>,
    pointer: &str,
    identity: Option<&str>,
) -> Result<pb::ReadSegmentContextResponse, tonic::Status> {
    let mut client = ContextSearchClient::new(channel(grpc).await);
    let request = pb::ReadSegmentContextRequest {
        project_id: PROJECT.into(),
        pointer: pointer.into(),
        before: Some(1),
        after: Some(1),
        identity: identity.map(str::to_string),
        identities: Vec::new(),
    };
    client
        .read_segment_context(bearer(request, token))
        .await
        .map(|r| r.into_inner())
}

/// Record ids (without the sync id) of a response, sorted.
fn ids(response: &pb::ContextSearchResponse) -> Vec<String> {
    let mut ids: Vec<String> = response
        .results
        .iter()
        .map(|r| r.id.split_once('.').unwrap().1.to_string())
        .collect();
    ids.sort();
    ids
}

/// The pointer of `record`'s first passage in `response`.
fn pointer_of(response: &pb::ContextSearchResponse, record: &str) -> String {
    response
        .results
        .iter()
        .find(|r| r.id.ends_with(&format!(".{record}")))
        .unwrap_or_else(|| panic!("{record} not in {:?}", ids(response)))
        .segments[0]
        .pointer
        .clone()
}

fn assert_denied<T: std::fmt::Debug>(result: Result<T, tonic::Status>, what: &str) {
    let status = result.expect_err(what);
    assert_eq!(
        status.code(),
        tonic::Code::PermissionDenied,
        "{what}: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_tokens_over_grpc_search_as_their_user_and_cannot_write() {
    let cluster =
        Cluster::start_custom(2, settings(), StoreKind::Postgres, keyed_auth(false)).await;
    let grpc = cluster.grpc;
    let service = Some(SERVICE_TOKEN);
    let alice_token = project_token(ALICE);
    let alice = Some(alice_token.as_str());

    // The service token sets up a sync, its groups and records.
    let mut syncs = ContextSyncClient::new(channel(grpc).await);
    let sync = syncs
        .create_sync(bearer(
            pb::CreateSyncRequest {
                project_id: PROJECT.into(),
                source: "googledrive".into(),
                owner: "owner@example.com".into(),
                sync_id: None,
                fields: Vec::new(),
            },
            service,
        ))
        .await
        .unwrap()
        .into_inner()
        .id;
    let put_groups = |members: Vec<String>| pb::PutGroupsRequest {
        project_id: PROJECT.into(),
        sync_id: sync.clone(),
        groups: vec![pb::Group {
            id: "eng".into(),
            members,
        }],
    };
    syncs
        .put_groups(bearer(put_groups(vec![BOB.into()]), service))
        .await
        .unwrap();
    let ack = upsert_records(
        grpc,
        SERVICE_TOKEN,
        &sync,
        vec![
            record(
                "alice-only",
                "The zorblat forecast of alice's team.",
                acl_users(&[ALICE]),
            ),
            record(
                "bob-only",
                "The zorblat forecast of bob's team.",
                acl_users(&[BOB]),
            ),
            record(
                "eng-only",
                "The zorblat forecast of the engineering group.",
                pb::Acl {
                    groups: vec!["eng".into()],
                    ..Default::default()
                },
            ),
        ],
    )
    .await
    .unwrap();
    assert_eq!(ack.upserted, 3);

    // No token: this project requires one.
    let status = csearch(grpc, None, search_request(None)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);

    // A user token without an identity searches as its `sub`: alice's record, not bob's nor the
    // eng group's.
    let mine = csearch(grpc, alice, search_request(None)).await.unwrap();
    assert_eq!(ids(&mine), ["alice-only"]);
    let applied = &mine.usage.as_ref().unwrap().identities_applied;
    assert_eq!(applied["googledrive"].principals, [ALICE]);
    // Its own identity, in any ASCII case, is the same search.
    let spelled = csearch(grpc, alice, search_request(Some("Alice@Example.COM")))
        .await
        .unwrap();
    assert_eq!(ids(&spelled), ["alice-only"]);
    // Another identity, alone or among per-source entries, is refused.
    assert_denied(
        csearch(grpc, alice, search_request(Some(BOB))).await,
        "search as bob",
    );
    let mut mixed = search_request(None);
    mixed.identities = vec![
        pb::IdentityEntry {
            principal: ALICE.into(),
            source: Some("googledrive".into()),
        },
        pb::IdentityEntry {
            principal: BOB.into(),
            source: Some("confluence".into()),
        },
    ];
    assert_denied(csearch(grpc, alice, mixed).await, "search as alice and bob");
    // The service token may search as anyone.
    let as_bob = csearch(grpc, service, search_request(Some(BOB)))
        .await
        .unwrap();
    assert_eq!(ids(&as_bob), ["bob-only", "eng-only"]);

    // Read-around: alice reads her passage as herself; naming bob is refused; bob's passage is
    // not found for her.
    let own = pointer_of(&mine, "alice-only");
    let bobs = pointer_of(&as_bob, "bob-only");
    let around = read(grpc, alice, &own, None).await.unwrap();
    assert_eq!(around.id, format!("{sync}.alice-only"));
    read(grpc, alice, &own, Some(ALICE)).await.unwrap();
    assert_denied(read(grpc, alice, &own, Some(BOB)).await, "read as bob");
    assert_denied(
        read(grpc, alice, &bobs, Some(BOB)).await,
        "read bob's as bob",
    );
    let status = read(grpc, alice, &bobs, None).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    read(grpc, service, &bobs, Some(BOB)).await.unwrap();

    // Group, record and sync writes with a user token are refused and change nothing.
    assert_denied(
        syncs
            .put_groups(bearer(put_groups(vec![ALICE.into()]), alice))
            .await,
        "put groups",
    );
    assert_denied(
        upsert_records(
            grpc,
            &alice_token,
            &sync,
            vec![record(
                "forged",
                "A zorblat forecast anyone may read.",
                pb::Acl {
                    anyone: true,
                    ..Default::default()
                },
            )],
        )
        .await,
        "upsert records",
    );
    let delete = pb::DeleteRecordsRequest {
        project_id: PROJECT.into(),
        sync_id: sync.clone(),
        ids: vec!["bob-only".into()],
    };
    assert_denied(
        syncs.delete_records(bearer(delete.clone(), alice)).await,
        "delete records",
    );
    assert_denied(
        syncs
            .create_sync(bearer(
                pb::CreateSyncRequest {
                    project_id: PROJECT.into(),
                    source: "confluence".into(),
                    owner: ALICE.into(),
                    sync_id: None,
                    fields: Vec::new(),
                },
                alice,
            ))
            .await,
        "create sync",
    );
    assert_eq!(
        ids(&csearch(grpc, alice, search_request(None)).await.unwrap()),
        ["alice-only"],
        "the refused group and record writes changed nothing"
    );
    assert_eq!(
        ids(&csearch(grpc, service, search_request(Some(BOB)))
            .await
            .unwrap()),
        ["bob-only", "eng-only"],
        "the refused delete changed nothing"
    );
    let status = syncs
        .get_sync(bearer(
            pb::GetSyncRequest {
                project_id: PROJECT.into(),
                sync_id: sync.clone(),
            },
            service,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.records, 3);

    // The service token may do them all.
    syncs
        .put_groups(bearer(put_groups(vec![ALICE.into(), BOB.into()]), service))
        .await
        .unwrap();
    assert_eq!(
        ids(&csearch(grpc, alice, search_request(None)).await.unwrap()),
        ["alice-only", "eng-only"]
    );
    let deleted = syncs
        .delete_records(bearer(delete, service))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.deleted, 1);
    assert_eq!(
        ids(&csearch(grpc, service, search_request(Some(BOB)))
            .await
            .unwrap()),
        ["eng-only"]
    );

    // Catalog writes: refused to the user, changing nothing; allowed to the service.
    let tool = |name: &str| pb::ToolDefinition {
        name: name.into(),
        integration: "acme_notes".into(),
        category: "notes".into(),
        side_effect: "write".into(),
        description: "Write a note into the team notebook.".into(),
        parameters_json: String::new(),
    };
    let get_tool = |name: &str, token: Option<&str>| {
        let name = name.to_string();
        let token = token.map(str::to_string);
        async move {
            ToolSearchClient::new(channel(grpc).await)
                .get_tool(bearer(
                    pb::GetToolRequest {
                        project_id: PROJECT.into(),
                        name,
                    },
                    token.as_deref(),
                ))
                .await
        }
    };
    let ack = upsert_tools(grpc, SERVICE_TOKEN, vec![tool("ACME_NOTES_WRITE")])
        .await
        .unwrap();
    assert_eq!(ack.upserted, 1);
    assert_denied(
        upsert_tools(grpc, &alice_token, vec![tool("ACME_NOTES_FORGE")]).await,
        "upsert tools",
    );
    let mut catalog = ToolCatalogClient::new(channel(grpc).await);
    let delete_tools = pb::DeleteToolsRequest {
        project_id: PROJECT.into(),
        names: vec!["ACME_NOTES_WRITE".into()],
    };
    assert_denied(
        catalog
            .delete_tools(bearer(delete_tools.clone(), alice))
            .await,
        "delete tools",
    );
    // The user may read the catalog: the written tool is there, the forged one is not.
    get_tool("ACME_NOTES_WRITE", alice).await.unwrap();
    assert_eq!(
        get_tool("ACME_NOTES_FORGE", alice)
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
    let outcome = catalog
        .delete_tools(bearer(delete_tools, service))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((outcome.deleted, outcome.not_found), (1, 0));
    assert_eq!(
        get_tool("ACME_NOTES_WRITE", service)
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_tokens_read_around_over_rest_as_their_user() {
    let cluster =
        Cluster::start_custom(1, settings(), StoreKind::Postgres, keyed_auth(false)).await;
    let (grpc, addr) = (cluster.grpc, cluster.http.addr);
    let service = Some(SERVICE_TOKEN);
    let sync = ContextSyncClient::new(channel(grpc).await)
        .create_sync(bearer(
            pb::CreateSyncRequest {
                project_id: PROJECT.into(),
                source: "confluence".into(),
                owner: "owner@example.com".into(),
                sync_id: None,
                fields: Vec::new(),
            },
            service,
        ))
        .await
        .unwrap()
        .into_inner()
        .id;
    upsert_records(
        grpc,
        SERVICE_TOKEN,
        &sync,
        vec![
            record(
                "alice-only",
                "The zorblat forecast of alice's team.",
                acl_users(&[ALICE]),
            ),
            record(
                "bob-only",
                "The zorblat forecast of bob's team.",
                acl_users(&[BOB]),
            ),
        ],
    )
    .await
    .unwrap();
    let own = pointer_of(
        &csearch(grpc, service, search_request(Some(ALICE)))
            .await
            .unwrap(),
        "alice-only",
    );
    let bobs = pointer_of(
        &csearch(grpc, service, search_request(Some(BOB)))
            .await
            .unwrap(),
        "bob-only",
    );

    let path = format!("/api/context/projects/{PROJECT}/segments:read");
    let alice = project_token(ALICE);
    let read = |pointer: &str, identity: Option<&str>| {
        let mut body = json!({"pointer": pointer, "before": 1, "after": 1});
        if let Some(identity) = identity {
            body["identity"] = json!(identity);
        }
        body.to_string()
    };
    // Its own identity, in any ASCII case, and no identity at all: the passage.
    for identity in [Some(ALICE), Some("ALICE@example.com"), None] {
        let (status, body) =
            rest_json(addr, "POST", &path, Some(&alice), &read(&own, identity)).await;
        assert_eq!(status, 200, "{identity:?}: {body}");
        assert_eq!(body["id"], format!("{sync}.alice-only"), "{body}");
        assert_eq!(body["segments"][0]["anchor"], true, "{body}");
    }
    // Another identity is refused, whoever's passage it names.
    for pointer in [&own, &bobs] {
        let (status, body) =
            rest_json(addr, "POST", &path, Some(&alice), &read(pointer, Some(BOB))).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "PERMISSION_DENIED", "{body}");
    }
    // Without an identity the token's user applies: bob's passage is not found for alice.
    let (status, body) = rest_json(addr, "POST", &path, Some(&alice), &read(&bobs, None)).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "NOT_FOUND", "{body}");
    let (status, body) = rest_json(addr, "POST", &path, service, &read(&bobs, Some(BOB))).await;
    assert_eq!(status, 200, "{body}");
}
