//! Context search over real gRPC on loopback, shards in their own servers, PostgreSQL metadata:
//! syncs, records with ACLs, groups, permission-filtered search, read-around, re-ingest, deletes,
//! bring-your-own embeddings. The randomized permission test is in `context_acl.rs`.

use std::collections::{BTreeSet, HashSet};

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_tests::*;
use tonic_types::StatusExt;

const OTHER_PROJECT: &str = "00000000-0000-4000-8000-0000000000f2";

async fn create_sync(grpc: std::net::SocketAddr, project: &str, source: &str) -> String {
    let mut client = ContextSyncClient::new(channel(grpc).await);
    client
        .create_sync(pb::CreateSyncRequest {
            project_id: project.into(),
            source: source.into(),
            owner: "owner@example.com".into(),
            sync_id: None,
            fields: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn upsert(
    grpc: std::net::SocketAddr,
    project: &str,
    sync_id: &str,
    records: Vec<pb::RecordInput>,
) -> Vec<pb::UpsertRecordsResponse> {
    let mut client = ContextSyncClient::new(channel(grpc).await);
    let batches: Vec<pb::UpsertRecordsRequest> = records
        .chunks(25)
        .map(|c| pb::UpsertRecordsRequest {
            project_id: project.into(),
            sync_id: sync_id.into(),
            records: c.to_vec(),
            embedding: None,
        })
        .collect();
    let mut acks = client
        .upsert_records(tokio_stream::iter(batches))
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(ack) = acks.message().await.unwrap() {
        out.push(ack);
    }
    out
}

async fn put_groups(
    grpc: std::net::SocketAddr,
    project: &str,
    sync_id: &str,
    groups: &[(&str, &[&str])],
) {
    let mut client = ContextSyncClient::new(channel(grpc).await);
    client
        .put_groups(pb::PutGroupsRequest {
            project_id: project.into(),
            sync_id: sync_id.into(),
            groups: groups
                .iter()
                .map(|(id, members)| pb::Group {
                    id: id.to_string(),
                    members: members.iter().map(|m| m.to_string()).collect(),
                })
                .collect(),
        })
        .await
        .unwrap();
}

fn record(id: &str, name: &str, text: &str, acl: pb::Acl) -> pb::RecordInput {
    pb::RecordInput {
        id: id.into(),
        display_name: Some(name.into()),
        text: Some(text.into()),
        mime: "text/plain".into(),
        modified_at: Some("2026-05-01T09:00:00Z".into()),
        acl: Some(acl),
        segments: Vec::new(),
        created_at: None,
        author: None,
        url: None,
        path: None,
        metadata_json: None,
    }
}

fn users(list: &[&str]) -> pb::Acl {
    pb::Acl {
        users: list.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn groups(list: &[&str]) -> pb::Acl {
    pb::Acl {
        groups: list.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn search_as(query: &str, identity: Option<&str>) -> pb::ContextSearchRequest {
    pb::ContextSearchRequest {
        project_id: PROJECT.into(),
        query: query.into(),
        identity: identity.map(str::to_string),
        ..Default::default()
    }
}

async fn csearch(
    grpc: std::net::SocketAddr,
    request: pb::ContextSearchRequest,
) -> Result<pb::ContextSearchResponse, tonic::Status> {
    let mut client = ContextSearchClient::new(channel(grpc).await);
    client.search(request).await.map(|r| r.into_inner())
}

async fn read(
    grpc: std::net::SocketAddr,
    project: &str,
    pointer: &str,
    identity: Option<&str>,
) -> Result<pb::ReadSegmentContextResponse, tonic::Status> {
    let mut client = ContextSearchClient::new(channel(grpc).await);
    client
        .read_segment_context(pb::ReadSegmentContextRequest {
            project_id: project.into(),
            pointer: pointer.into(),
            before: Some(1),
            after: Some(1),
            identity: identity.map(str::to_string),
            identities: Vec::new(),
        })
        .await
        .map(|r| r.into_inner())
}

fn record_ids(response: &pb::ContextSearchResponse) -> Vec<String> {
    response
        .results
        .iter()
        .map(|r| r.id.split_once('.').unwrap().1.to_string())
        .collect()
}

/// A roadmap long enough for several segments.
fn roadmap_text() -> String {
    let mut paragraphs = Vec::new();
    for (i, theme) in [
        "search quality",
        "connector coverage",
        "latency",
        "pricing",
        "security reviews",
    ]
    .iter()
    .enumerate()
    {
        let mut p = format!("Theme {} of the Q2 roadmap is {theme}.", i + 1);
        for j in 0..12 {
            p.push_str(&format!(
                " Milestone {j} for {theme} lands in week {} with an owner named in the tracker.",
                j + 2
            ));
        }
        paragraphs.push(p);
    }
    paragraphs.join("\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_search_read_and_lifecycle_over_grpc() {
    let cluster = Cluster::start(3).await;
    let grpc = cluster.grpc;
    let drive = create_sync(grpc, PROJECT, "googledrive").await;
    let wiki = create_sync(grpc, PROJECT, "confluence").await;
    put_groups(
        grpc,
        PROJECT,
        &drive,
        &[("leadership", &["Dave@Example.com"])],
    )
    .await;
    put_groups(grpc, PROJECT, &wiki, &[("eng", &["bob@example.com"])]).await;

    let acks = upsert(
        grpc,
        PROJECT,
        &drive,
        vec![
            record(
                "roadmap",
                "Q2 roadmap",
                &roadmap_text(),
                pb::Acl {
                    domains: vec!["example.com".into()],
                    ..Default::default()
                },
            ),
            record(
                "board",
                "Board notes",
                "The board discussed risks to the Q2 roadmap and the hiring plan.",
                groups(&["leadership"]),
            ),
            record(
                "salary",
                "Salary bands",
                "Salary bands for engineering levels one to six.",
                users(&["carol@example.com"]),
            ),
            record(
                "holidays",
                "Holiday calendar",
                "The office is closed on public holidays; the Q2 roadmap review is after the break.",
                pb::Acl {
                    anyone: true,
                    ..Default::default()
                },
            ),
            record(
                "archived",
                "Old Q2 roadmap",
                "An archived copy of the Q2 roadmap that nobody may read.",
                pb::Acl::default(),
            ),
        ],
    )
    .await;
    assert_eq!(acks.len(), 1);
    assert_eq!((acks[0].upserted, acks[0].unchanged), (5, 0));
    assert!(acks[0].segments >= 7, "{acks:?}");
    upsert(
        grpc,
        PROJECT,
        &wiki,
        vec![record(
            "rfc",
            "RFC: roadmap for the search service",
            "This RFC proposes the Q2 roadmap of the search service.",
            groups(&["eng"]),
        )],
    )
    .await;

    // alice: her domain's roadmap and the public calendar; never the board notes, salaries, the
    // archived copy (empty ACL) or the eng-only RFC.
    let alice = csearch(grpc, search_as("q2 roadmap", Some("alice@example.com")))
        .await
        .unwrap();
    let ids = record_ids(&alice);
    assert_eq!(ids[0], "roadmap", "{ids:?}");
    assert_eq!(
        ids.iter().cloned().collect::<BTreeSet<String>>(),
        BTreeSet::from(["holidays".to_string(), "roadmap".to_string()])
    );
    let top = &alice.results[0];
    assert_eq!(top.id, format!("{drive}.roadmap"));
    assert_eq!((top.source.as_str(), top.generation), ("googledrive", 1));
    assert_eq!(top.display_name.as_deref(), Some("Q2 roadmap"));
    assert_eq!(top.segments.len(), 1);
    assert_eq!(top.rerank_score, None);
    assert_eq!(top.segments[0].pointer, top.segments[0].chunk_id);
    let usage = alice.usage.clone().unwrap();
    assert_eq!((usage.returned, usage.segments_returned), (2, 2));
    assert!(usage.permission_filtered && usage.underfilled);
    assert_eq!(usage.retrieval_mode, "hybrid");
    assert_eq!(usage.rerank_outcome, "disabled_by_deployment");
    assert_eq!(usage.dropped.unwrap().records_beyond_top_k, 0);
    assert_eq!(
        usage.identities_applied.keys().collect::<BTreeSet<_>>(),
        BTreeSet::from([&"confluence".to_string(), &"googledrive".to_string()])
    );
    assert!(usage.identities_unused.is_empty());
    assert!(top.explain.is_none(), "no explanation without diagnostics");

    // With diagnostics, each record says where each retriever ranked it (its best passage): the
    // ranks are 1-based and the same order as the scores, BM25 positive, cosines within [-1, 1].
    let mut explained = search_as("q2 roadmap", Some("alice@example.com"));
    explained.diagnostics = true;
    let explained = csearch(grpc, explained).await.unwrap();
    assert_eq!(record_ids(&explained), ids);
    let hits = |pick: fn(&pb::Explain) -> Option<pb::RetrieverHit>| -> Vec<(u32, f64)> {
        let mut hits: Vec<(u32, f64)> = explained
            .results
            .iter()
            .filter_map(|r| pick(r.explain.as_ref().expect("explained")))
            .map(|h| (h.rank, h.score))
            .collect();
        hits.sort_by_key(|h| h.0);
        hits
    };
    for (name, list) in [
        ("lexical", hits(|e| e.lexical)),
        ("dense", hits(|e| e.dense)),
    ] {
        assert_eq!(
            list.len(),
            2,
            "{name}: both records are among its candidates"
        );
        assert_eq!(list[0].0, 1, "{name}");
        assert!(
            list[0].0 < list[1].0 && list[0].1 >= list[1].1,
            "{name}: {list:?}"
        );
        if name == "dense" {
            assert!(list.iter().all(|h| (-1.0..=1.0).contains(&h.1)), "{list:?}");
        } else {
            assert!(list.iter().all(|h| h.1 > 0.0), "{list:?}");
        }
    }

    // dave: the board notes through his group (membership is case-insensitive).
    let dave = csearch(grpc, search_as("q2 roadmap", Some("dave@example.com")))
        .await
        .unwrap();
    assert!(record_ids(&dave).contains(&"board".to_string()));

    // bob, for confluence only: the RFC through his group there; in Drive only what anyone may
    // read; the box account is unused.
    let mut bob = search_as("q2 roadmap", None);
    bob.identities = vec![
        pb::IdentityEntry {
            principal: "bob@example.com".into(),
            source: Some("confluence".into()),
        },
        pb::IdentityEntry {
            principal: "bob@box.example".into(),
            source: Some("box".into()),
        },
    ];
    let bob = csearch(grpc, bob).await.unwrap();
    assert_eq!(
        record_ids(&bob).into_iter().collect::<BTreeSet<_>>(),
        ["holidays", "rfc"].iter().map(|s| s.to_string()).collect()
    );
    let usage = bob.usage.unwrap();
    assert_eq!(
        usage.identities_applied.keys().collect::<Vec<_>>(),
        ["confluence"]
    );
    assert_eq!(usage.identities_unused.len(), 1);
    assert_eq!(usage.identities_unused[0].source.as_deref(), Some("box"));

    // No identity, or an outsider: what anyone may read, only.
    for identity in [None, Some("erin@partner.io")] {
        let r = csearch(grpc, search_as("q2 roadmap", identity))
            .await
            .unwrap();
        assert_eq!(record_ids(&r), ["holidays"], "{identity:?}");
    }

    // Several passages per record, and sources narrowing the search.
    let mut request = search_as("roadmap milestone week", Some("alice@example.com"));
    request.segments_per_record = Some(3);
    request.sources = vec!["googledrive".into()];
    let r = csearch(grpc, request).await.unwrap();
    let roadmap = r
        .results
        .iter()
        .find(|x| x.id.ends_with(".roadmap"))
        .unwrap();
    assert_eq!(roadmap.segments.len(), 3);
    let pointers: HashSet<&str> = roadmap
        .segments
        .iter()
        .map(|s| s.pointer.as_str())
        .collect();
    assert_eq!(pointers.len(), 3);
    assert!(
        roadmap
            .segments
            .windows(2)
            .all(|w| w[0].relevancy >= w[1].relevancy)
    );
    assert!(r.results.iter().all(|x| x.source == "googledrive"));

    // Read around a passage: permission-checked again; unknown and forbidden look the same.
    let pointer = roadmap.segments[0].pointer.clone();
    let around = read(grpc, PROJECT, &pointer, Some("alice@example.com"))
        .await
        .unwrap();
    assert_eq!(around.id, format!("{drive}.roadmap"));
    assert!(around.total_segments >= 3);
    let anchors: Vec<&pb::ContextSegment> = around.segments.iter().filter(|s| s.anchor).collect();
    assert_eq!(anchors.len(), 1);
    assert_eq!(anchors[0].pointer, pointer);
    let ordinals: Vec<u32> = around.segments.iter().map(|s| s.ordinal).collect();
    assert!(
        ordinals.windows(2).all(|w| w[1] == w[0] + 1),
        "{ordinals:?}"
    );
    assert!(ordinals.len() >= 2 && ordinals.len() <= 3);
    let forbidden = read(grpc, PROJECT, &pointer, Some("erin@partner.io"))
        .await
        .unwrap_err();
    let unknown = read(grpc, PROJECT, "seg_bm9wZQ", Some("alice@example.com"))
        .await
        .unwrap_err();
    let other_project = read(grpc, OTHER_PROJECT, &pointer, Some("alice@example.com"))
        .await
        .unwrap_err();
    for status in [&forbidden, &unknown, &other_project] {
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(status.message(), forbidden.message());
    }

    // Re-ingest: unchanged content is skipped; changed content bumps the record's generation and
    // the old pointer stops resolving if its passage changed.
    let acks = upsert(
        grpc,
        PROJECT,
        &drive,
        vec![record(
            "holidays",
            "Holiday calendar",
            "The office is closed on public holidays; the Q2 roadmap review is after the break.",
            pb::Acl {
                anyone: true,
                ..Default::default()
            },
        )],
    )
    .await;
    assert_eq!((acks[0].upserted, acks[0].unchanged), (0, 1));
    let holidays_pointer = csearch(grpc, search_as("holiday calendar", None))
        .await
        .unwrap()
        .results[0]
        .segments[0]
        .pointer
        .clone();
    upsert(
        grpc,
        PROJECT,
        &drive,
        vec![record(
            "holidays",
            "Holiday calendar",
            "The office is closed on public holidays and on the founders' day.",
            pb::Acl {
                anyone: true,
                ..Default::default()
            },
        )],
    )
    .await;
    let r = csearch(grpc, search_as("holiday calendar founders", None))
        .await
        .unwrap();
    assert_eq!(r.results[0].generation, 2);
    assert!(r.results[0].segments[0].text.contains("founders"));
    assert_eq!(
        read(grpc, PROJECT, &holidays_pointer, None)
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );

    // ACL and group changes apply at once.
    upsert(
        grpc,
        PROJECT,
        &drive,
        vec![record(
            "salary",
            "Salary bands",
            "Salary bands for engineering levels one to six.",
            users(&["carol@example.com", "alice@example.com"]),
        )],
    )
    .await;
    let r = csearch(grpc, search_as("salary bands", Some("alice@example.com")))
        .await
        .unwrap();
    assert_eq!(record_ids(&r)[0], "salary");
    put_groups(
        grpc,
        PROJECT,
        &drive,
        &[("leadership", &["alice@example.com"])],
    )
    .await;
    let board = |r: &pb::ContextSearchResponse| record_ids(r).contains(&"board".to_string());
    assert!(board(
        &csearch(grpc, search_as("board risks", Some("alice@example.com")))
            .await
            .unwrap()
    ));
    assert!(!board(
        &csearch(grpc, search_as("board risks", Some("dave@example.com")))
            .await
            .unwrap()
    ));

    // Status, delete, status.
    let mut sync_client = ContextSyncClient::new(channel(grpc).await);
    let status = sync_client
        .get_sync(pb::GetSyncRequest {
            project_id: PROJECT.into(),
            sync_id: drive.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.records, 5);
    let segments_before = status.segments;
    let deleted = sync_client
        .delete_records(pb::DeleteRecordsRequest {
            project_id: PROJECT.into(),
            sync_id: drive.clone(),
            ids: vec!["roadmap".into(), "missing".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((deleted.deleted, deleted.not_found), (1, 1));
    assert!(deleted.generation > status.generation);
    let after = sync_client
        .get_sync(pb::GetSyncRequest {
            project_id: PROJECT.into(),
            sync_id: drive.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.records, 4);
    assert!(after.segments < segments_before);
    let r = csearch(
        grpc,
        search_as("roadmap milestone week", Some("alice@example.com")),
    )
    .await
    .unwrap();
    assert!(!record_ids(&r).contains(&"roadmap".to_string()));
    assert_eq!(
        read(grpc, PROJECT, &pointer, Some("alice@example.com"))
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );

    // Projects are isolated: another project sees nothing and cannot name these syncs.
    let mut other = search_as("q2 roadmap", Some("alice@example.com"));
    other.project_id = OTHER_PROJECT.into();
    assert!(
        csearch(grpc, other.clone())
            .await
            .unwrap()
            .results
            .is_empty()
    );
    // Words not searched before are embedded while the scope resolves; the scope's error is the
    // answer.
    other.sync_ids = vec![drive.clone()];
    other.query = "quarterly budget owners never searched before".into();
    let refused = csearch(grpc, other).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        refused
            .get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "syncIds[0]"
    );
    let taken = ContextSyncClient::new(channel(grpc).await)
        .create_sync(pb::CreateSyncRequest {
            project_id: OTHER_PROJECT.into(),
            source: "googledrive".into(),
            owner: "owner@example.com".into(),
            sync_id: Some(drive.clone()),
            fields: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(taken.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        taken
            .get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "id"
    );

    // A shard that is down: its syncs' passages that bob may read are counted as not
    // searchable (in Drive only the holiday calendar, in Confluence the RFC: one passage each),
    // and the other syncs still answer.
    let holder = |sync: &str| {
        let sync = sync.to_string();
        let router = cluster.router.clone();
        async move {
            router
                .store()
                .get_sync(PROJECT, &sync)
                .await
                .unwrap()
                .unwrap()
                .shard_ids[0]
                .clone()
        }
    };
    let wiki_shard = holder(&wiki).await;
    let drive_shard = holder(&drive).await;
    let mut cluster = cluster;
    let down = cluster
        .local
        .iter()
        .position(|s| s.id() == wiki_shard)
        .unwrap();
    cluster.shards.remove(down).stop().await;
    let r = csearch(grpc, search_as("q2 roadmap", Some("bob@example.com")))
        .await
        .unwrap();
    let expected = if drive_shard == wiki_shard { 2 } else { 1 };
    let dropped = r.usage.clone().unwrap().dropped.unwrap();
    assert_eq!(dropped.segments_not_searchable, expected);
    assert!(r.results.iter().all(|x| x.sync_id != wiki));
    if drive_shard != wiki_shard {
        assert_eq!(record_ids(&r), ["holidays"]);
    }

    // Bad input names the field.
    let mut bad = search_as("q", None);
    bad.top_k = Some(0);
    let status = csearch(grpc, bad).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let fields: Vec<String> = status
        .get_error_details()
        .bad_request()
        .unwrap()
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    assert_eq!(fields, ["topK"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_may_bring_their_own_embeddings() {
    let cluster = Cluster::start(1).await;
    let grpc = cluster.grpc;
    let sync = create_sync(grpc, PROJECT, "box").await;
    let model = embedder();
    let passages = [
        "The cafeteria opens at eight and serves breakfast until ten.",
        "Expense reports are due on the fifth working day of each month.",
    ];
    let vectors = model.embed(&passages).unwrap();
    let with_vectors = |spec: pb::EmbeddingSpec, vectors: Vec<Vec<f32>>| pb::UpsertRecordsRequest {
        project_id: PROJECT.into(),
        sync_id: sync.clone(),
        records: vec![pb::RecordInput {
            id: "handbook".into(),
            display_name: Some("Handbook".into()),
            text: None,
            mime: "text/plain".into(),
            modified_at: None,
            created_at: None,
            author: None,
            url: None,
            path: None,
            metadata_json: None,
            acl: Some(pb::Acl {
                anyone: true,
                ..Default::default()
            }),
            segments: passages
                .iter()
                .zip(vectors)
                .map(|(text, vector)| pb::SegmentInput {
                    text: text.to_string(),
                    vector,
                })
                .collect(),
        }],
        embedding: Some(spec),
    };
    let spec = |model: &str, dimension: u32| pb::EmbeddingSpec {
        model: model.into(),
        dimension,
    };
    let send = |request: pb::UpsertRecordsRequest| async move {
        let mut client = ContextSyncClient::new(channel(grpc).await);
        let mut acks = client
            .upsert_records(tokio_stream::iter(vec![request]))
            .await?
            .into_inner();
        acks.message().await.map(|m| m.unwrap())
    };
    let fields = |status: tonic::Status| -> Vec<String> {
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        status
            .get_error_details()
            .bad_request()
            .unwrap()
            .field_violations
            .iter()
            .map(|v| v.field.clone())
            .collect()
    };

    // A different model or dimension is refused, naming the field; nothing is written.
    let status = send(with_vectors(
        spec("text-embedding-3-small", 384),
        vectors.clone(),
    ))
    .await
    .unwrap_err();
    assert_eq!(fields(status), ["embedding.model"]);
    let short: Vec<Vec<f32>> = vectors.iter().map(|v| v[..128].to_vec()).collect();
    let status = send(with_vectors(spec(model.model_id(), 128), short))
        .await
        .unwrap_err();
    assert_eq!(
        fields(status),
        [
            "embedding.dimension",
            "records[0].segments[0].vector",
            "records[0].segments[1].vector"
        ]
    );
    assert!(
        csearch(grpc, search_as("expense reports", None))
            .await
            .unwrap()
            .results
            .is_empty()
    );

    // The deployment's model (also by its sentence-transformers name): indexed as given.
    let ack = send(with_vectors(
        spec(&format!("sentence-transformers/{}", model.model_id()), 384),
        vectors,
    ))
    .await
    .unwrap();
    assert_eq!((ack.upserted, ack.segments), (1, 2));
    let mut request = search_as("when are expenses due", None);
    request.mode = Some("dense".into());
    let r = csearch(grpc, request).await.unwrap();
    assert_eq!(r.results[0].segments[0].text, passages[1]);
    assert_eq!(r.usage.unwrap().retrieval_mode, "dense");
}

/// Context feedback: the opened records must be among that search's candidates, the search must
/// be of the same project, and an accepted one is stored in PostgreSQL under `context`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_feedback_is_checked_against_the_search() {
    let cluster = Cluster::start(2).await;
    let grpc = cluster.grpc;
    let sync = create_sync(grpc, PROJECT, "googledrive").await;
    let anyone = || pb::Acl {
        anyone: true,
        ..Default::default()
    };
    upsert(
        grpc,
        PROJECT,
        &sync,
        vec![
            record("roadmap", "Q2 roadmap", &roadmap_text(), anyone()),
            record(
                "holidays",
                "Holidays",
                "The Q2 roadmap review is after the break.",
                anyone(),
            ),
            record(
                "menu",
                "Canteen menu",
                "Soup, bread and salad on Mondays.",
                anyone(),
            ),
        ],
    )
    .await;
    let mut request = tonic::Request::new(search_as("q2 roadmap", None));
    request
        .metadata_mut()
        .insert("x-request-id", "cf-1".parse().unwrap());
    let mut client = ContextSearchClient::new(channel(grpc).await);
    let found = client.search(request).await.unwrap().into_inner();
    assert_eq!(found.usage.as_ref().unwrap().ranking_model, 0);
    let ids: Vec<String> = found.results.iter().map(|r| r.id.clone()).collect();
    assert!(ids.len() >= 2, "{ids:?}");

    let feedback = |project: &str, request_id: &str, opened: Vec<String>| {
        let request = pb::ContextFeedbackRequest {
            project_id: project.into(),
            request_id: request_id.into(),
            opened_records: opened,
        };
        async move {
            ContextSearchClient::new(channel(grpc).await)
                .record_context_feedback(request)
                .await
                .map(|r| r.into_inner())
        }
    };
    let field = |status: tonic::Status| {
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        status.get_details_bad_request().unwrap().field_violations[0]
            .field
            .clone()
    };
    let refused = feedback(PROJECT, "cf-1", vec![format!("{sync}.no-such-record")])
        .await
        .unwrap_err();
    assert_eq!(field(refused), "openedRecords[0]");
    let refused = feedback(PROJECT, "cf-unknown", vec![ids[0].clone()])
        .await
        .unwrap_err();
    assert_eq!(field(refused), "requestId");
    let refused = feedback(OTHER_PROJECT, "cf-1", vec![ids[0].clone()])
        .await
        .unwrap_err();
    assert_eq!(field(refused), "requestId");
    let refused = feedback(PROJECT, "cf-1", vec![]).await.unwrap_err();
    assert_eq!(field(refused), "openedRecords");

    let ack = feedback(PROJECT, "cf-1", vec![ids[1].clone()])
        .await
        .unwrap();
    assert_eq!((ack.examples, ack.ranking_model), (1, 0));
    let rows = pg_rows(
        &cluster.schema,
        "SELECT kind, count(*)::text FROM feedback GROUP BY kind",
    )
    .await;
    assert_eq!(rows, vec![vec!["context".to_string(), "1".to_string()]]);
}
