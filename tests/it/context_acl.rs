//! Randomized permission filtering of context search, checked against an independent brute force:
//! several deterministic seeds, on PostgreSQL and on the embedded SQLite store, with more matching
//! records per query word than the candidate pool holds, look-alike principals
//! (`x@notalpha.example` next to `x@alpha.example`, `sub.alpha.example`, `alpha.example.evil`),
//! group ids differing only in case, padded and mixed-case entries, identities given by a service
//! token and user tokens searching as their `sub`. Records bring their own (random) vectors so
//! the test spends its time on searches, not on embedding.
//!
//! The principal rule the oracle assumes: users and email domains compare after trimming and ASCII
//! lowercasing; group ids compare exactly after trimming.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::context_search_client::ContextSearchClient;
use agentsearch_proto::v1::context_sync_client::ContextSyncClient;
use agentsearch_tests::*;

/// The candidate pool of each retriever: far fewer than the records matching a frequent word.
const POOL: u32 = 6;
const SEEDS: [u64; 3] = [0x5eed_0004, 0x5eed_0005, 0x5eed_0006];
const OTHER_PROJECT: &str = "00000000-0000-4000-8000-0000000000f2";
const SOURCES: [&str; 2] = ["googledrive", "confluence"];
const RECORDS_PER_SYNC: usize = 60;
const ROUNDS: usize = 30;

/// Words in about half of the records: many more matches than the pool holds.
const FREQUENT: [&str; 2] = ["zorblat", "quenmar"];
/// Words in a few records each: the pool holds all their matches.
const RARE: [&str; 8] = [
    "trivex", "plonder", "yastrel", "morvane", "kelquist", "dranfel", "ospridge", "vantrel",
];
const FILLER: [&str; 4] = [
    "quarterly planning notes",
    "a customer interview summary",
    "the incident review",
    "budget assumptions",
];

/// People, look-alikes side by side: the same local part in another domain, a subdomain, a
/// domain with a suffix, and an id that is not an email.
const PEOPLE: [&str; 10] = [
    "u0@alpha.example",
    "u1@alpha.example",
    "u2@alpha.example",
    "u0@notalpha.example",
    "u1@sub.alpha.example",
    "w0@alpha.example.evil",
    "v0@beta.example",
    "v1@beta.example",
    "u2@alpha.example.evil",
    "U900",
];
const DOMAINS: [&str; 6] = [
    "alpha.example",
    "ALPHA.Example",
    "notalpha.example",
    "sub.alpha.example",
    "alpha.example.evil",
    "beta.example",
];
/// Group ids are compared exactly: these are five different groups.
const GROUP_IDS: [&str; 5] = ["eng", "Eng", "ENG", "ops", "Ops"];

/// A small deterministic generator (splitmix64), so a failure reproduces from its seed.
struct Rng(agentsearch_common::splitmix::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    /// `make(self)` with `percent` chance, else nothing.
    fn some<T>(&mut self, percent: u64, make: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.chance(percent) {
            Some(make(self))
        } else {
            None
        }
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    /// `text` as written by a careless client: sometimes upper case, sometimes padded.
    fn spelled(&mut self, text: &str) -> String {
        let cased = match self.below(4) {
            0 => text.to_ascii_uppercase(),
            1 => {
                let mut c = text.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            }
            _ => text.to_string(),
        };
        if self.chance(15) {
            format!("  {cased} ")
        } else {
            cased
        }
    }
    /// A unit vector of `dim` components.
    fn unit_vector(&mut self, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim)
            .map(|_| (self.next() >> 11) as f32 / (1u64 << 53) as f32 - 0.5)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect()
    }
}

struct Doc {
    sync: usize,
    id: String,
    name: String,
    text: String,
    vector: Vec<f32>,
    users: Vec<String>,
    groups: Vec<String>,
    domains: Vec<String>,
    anyone: bool,
}

/// Who a query runs as: accounts, each for every source or for one.
#[derive(Clone, Debug)]
struct Identity(Vec<(String, Option<&'static str>)>);

/// Users and domains: trimmed, ASCII lowercase.
fn principal(text: &str) -> String {
    text.trim().to_ascii_lowercase()
}

/// The brute-force permission check, independent of the service: may `identity` read `doc`,
/// given each sync's groups (exact group id -> members as sent)?
fn readable(doc: &Doc, identity: &Identity, groups: &[HashMap<String, Vec<String>>]) -> bool {
    if doc.anyone {
        return true;
    }
    identity.0.iter().any(|(account, source)| {
        if source.is_some_and(|s| s != SOURCES[doc.sync]) {
            return false;
        }
        let p = principal(account);
        let domain = p
            .rsplit_once('@')
            .filter(|(local, domain)| !local.is_empty() && !domain.is_empty())
            .map(|(_, domain)| domain.to_string());
        doc.users.iter().any(|u| principal(u) == p)
            || domain.is_some_and(|d| doc.domains.iter().any(|x| principal(x) == d))
            || doc.groups.iter().any(|g| {
                groups[doc.sync]
                    .get(g.trim())
                    .is_some_and(|members| members.iter().any(|m| principal(m) == p))
            })
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Whether `word` is a word of `text` (the codewords appear only as whole words).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|w| w == word)
}

async fn create_sync(grpc: SocketAddr, project: &str, source: &str) -> String {
    ContextSyncClient::new(channel(grpc).await)
        .create_sync(bearer(
            pb::CreateSyncRequest {
                project_id: project.into(),
                source: source.into(),
                owner: "owner@example.com".into(),
                sync_id: None,
                fields: Vec::new(),
            },
            Some(SERVICE_TOKEN),
        ))
        .await
        .unwrap()
        .into_inner()
        .id
}

/// Writes `docs` (with their vectors) to `sync_id`; `anyone` overrides every ACL.
async fn upsert(grpc: SocketAddr, project: &str, sync_id: &str, docs: &[&Doc], anyone: bool) {
    let dim = docs[0].vector.len() as u32;
    let model = embedder().model_id().to_string();
    let batches: Vec<pb::UpsertRecordsRequest> = docs
        .chunks(25)
        .map(|chunk| pb::UpsertRecordsRequest {
            project_id: project.into(),
            sync_id: sync_id.into(),
            records: chunk
                .iter()
                .map(|d| pb::RecordInput {
                    id: d.id.clone(),
                    display_name: Some(d.name.clone()),
                    text: None,
                    mime: "text/plain".into(),
                    modified_at: None,
                    created_at: None,
                    author: None,
                    url: None,
                    path: None,
                    metadata_json: None,
                    acl: Some(if anyone {
                        pb::Acl {
                            anyone: true,
                            ..Default::default()
                        }
                    } else {
                        pb::Acl {
                            users: d.users.clone(),
                            groups: d.groups.clone(),
                            domains: d.domains.clone(),
                            anyone: d.anyone,
                        }
                    }),
                    segments: vec![pb::SegmentInput {
                        text: d.text.clone(),
                        vector: d.vector.clone(),
                    }],
                })
                .collect(),
            embedding: Some(pb::EmbeddingSpec {
                model: model.clone(),
                dimension: dim,
            }),
        })
        .collect();
    let expected = batches.len();
    let mut acks = ContextSyncClient::new(channel(grpc).await)
        .upsert_records(bearer(tokio_stream::iter(batches), Some(SERVICE_TOKEN)))
        .await
        .unwrap()
        .into_inner();
    let mut count = 0;
    while let Some(ack) = acks.message().await.unwrap() {
        assert_eq!(ack.segments, u64::from(ack.upserted));
        count += 1;
    }
    assert_eq!(count, expected);
}

/// How a round authenticates and whom it names.
#[derive(Debug)]
enum Caller {
    /// The service token, naming `identity` (possibly nobody).
    Service,
    /// A user token of `sub`, with the identity field as sent (none, or the user's own accounts).
    User(String),
}

async fn run_seed(store: StoreKind, seed: u64) {
    let mut settings = settings();
    settings.context.candidates = POOL;
    let cluster = Cluster::start_custom(2, settings, store, keyed_auth(false)).await;
    let grpc = cluster.grpc;
    let mut rng = Rng(agentsearch_common::splitmix::SplitMix64(seed));
    let dim = embedder().dim();

    let syncs = [
        create_sync(grpc, PROJECT, SOURCES[0]).await,
        create_sync(grpc, PROJECT, SOURCES[1]).await,
    ];
    // Group id -> members as sent (mixed case, padded), per sync.
    let mut groups: Vec<HashMap<String, Vec<String>>> = Vec::new();
    for sync in &syncs {
        let mut map = HashMap::new();
        for g in GROUP_IDS {
            let members: Vec<String> = PEOPLE
                .iter()
                .filter_map(|p| rng.some(30, |rng| rng.spelled(p)))
                .collect();
            map.insert(g.to_string(), members);
        }
        let request = pb::PutGroupsRequest {
            project_id: PROJECT.into(),
            sync_id: sync.clone(),
            groups: map
                .iter()
                .map(|(id, members)| pb::Group {
                    id: id.clone(),
                    members: members.clone(),
                })
                .collect(),
        };
        ContextSyncClient::new(channel(grpc).await)
            .put_groups(bearer(request, Some(SERVICE_TOKEN)))
            .await
            .unwrap();
        groups.push(map);
    }

    let mut docs: Vec<Doc> = Vec::new();
    for sync in 0..2 {
        for i in 0..RECORDS_PER_SYNC {
            let frequent = *rng.pick(&FREQUENT);
            let mut words = vec![frequent];
            if rng.chance(50) {
                words.push(*FREQUENT.iter().find(|w| **w != frequent).unwrap());
            }
            words.push(*rng.pick(&RARE));
            let filler = *rng.pick(&FILLER);
            docs.push(Doc {
                sync,
                id: format!("r{sync}-{i}"),
                name: format!("Document {sync}-{i}"),
                text: format!("This page covers {} in {filler}.", words.join(" and ")),
                vector: rng.unit_vector(dim),
                users: PEOPLE
                    .iter()
                    .filter_map(|p| rng.some(8, |rng| rng.spelled(p)))
                    .collect(),
                groups: GROUP_IDS
                    .iter()
                    .filter_map(|g| {
                        rng.some(12, |rng| {
                            if rng.chance(15) {
                                format!(" {g} ")
                            } else {
                                g.to_string()
                            }
                        })
                    })
                    .collect(),
                domains: DOMAINS
                    .iter()
                    .filter_map(|d| rng.some(7, |rng| rng.spelled(d)))
                    .collect(),
                anyone: rng.chance(6),
            });
        }
    }
    for (sync, sync_id) in syncs.iter().enumerate() {
        let mine: Vec<&Doc> = docs.iter().filter(|d| d.sync == sync).collect();
        upsert(grpc, PROJECT, sync_id, &mine, false).await;
    }
    // Another project holds copies readable by anyone: they must never show up here.
    let foreign = create_sync(grpc, OTHER_PROJECT, SOURCES[0]).await;
    let copies: Vec<&Doc> = docs.iter().take(30).collect();
    upsert(grpc, OTHER_PROJECT, &foreign, &copies, true).await;

    let by_key: HashMap<(String, String), usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| ((syncs[d.sync].clone(), d.id.clone()), i))
        .collect();
    let model = embedder();
    let mut pointers: Vec<(String, usize)> = Vec::new();
    let (mut beyond_cap_rounds, mut exact_pools, mut user_rounds) = (0, 0, 0);
    for round in 0..ROUNDS {
        let context = format!("{store:?} seed {seed:#x} round {round}");
        let person = |rng: &mut Rng| {
            let p = rng_pick(rng);
            rng.spelled(p)
        };
        // The caller, and the identity the oracle applies (for a user token: its `sub`).
        let (caller, identity, sent_one, sent_many) = match rng.below(6) {
            0 => (Caller::Service, Identity(Vec::new()), None, Vec::new()),
            1 => {
                let p = person(&mut rng);
                (
                    Caller::Service,
                    Identity(vec![(p.clone(), None)]),
                    Some(p),
                    Vec::new(),
                )
            }
            2 => {
                let entries = vec![
                    (person(&mut rng), Some(SOURCES[0])),
                    (person(&mut rng), Some(SOURCES[1])),
                    ("someone@box.example".to_string(), Some("box")),
                ];
                let sent = entries
                    .iter()
                    .map(|(p, s)| pb::IdentityEntry {
                        principal: p.clone(),
                        source: s.map(str::to_string),
                    })
                    .collect();
                (Caller::Service, Identity(entries), None, sent)
            }
            3 => {
                // A user token without an identity: its `sub`.
                let sub = rng_pick(&mut rng).to_string();
                let sub = if rng.chance(30) {
                    sub.to_ascii_uppercase()
                } else {
                    sub
                };
                (
                    Caller::User(sub.clone()),
                    Identity(vec![(sub, None)]),
                    None,
                    Vec::new(),
                )
            }
            4 => {
                // A user token naming itself in another case.
                let sub = rng_pick(&mut rng).to_string();
                let named = sub.to_ascii_uppercase();
                (
                    Caller::User(sub.clone()),
                    Identity(vec![(sub, None)]),
                    Some(named),
                    Vec::new(),
                )
            }
            _ => {
                // A user token naming itself for one source only.
                let sub = rng_pick(&mut rng).to_string();
                let source = *rng.pick(&SOURCES);
                let sent = vec![pb::IdentityEntry {
                    principal: sub.clone(),
                    source: Some(source.to_string()),
                }];
                (
                    Caller::User(sub.clone()),
                    Identity(vec![(sub, Some(source))]),
                    None,
                    sent,
                )
            }
        };
        let token = match &caller {
            Caller::Service => SERVICE_TOKEN.to_string(),
            Caller::User(sub) => {
                user_rounds += 1;
                project_token(sub)
            }
        };
        let codeword = if rng.chance(60) {
            *rng.pick(&FREQUENT)
        } else {
            *rng.pick(&RARE)
        };
        let top_k = if rng.chance(60) { 50 } else { 5 };
        let request = pb::ContextSearchRequest {
            project_id: PROJECT.into(),
            query: codeword.into(),
            top_k: Some(top_k),
            segments_per_record: Some(2),
            identity: sent_one.clone(),
            identities: sent_many.clone(),
            ..Default::default()
        };
        let response = ContextSearchClient::new(channel(grpc).await)
            .search(bearer(request, Some(&token)))
            .await
            .unwrap_or_else(|e| panic!("{context}: {caller:?}: {e:?}"))
            .into_inner();
        let usage = response.usage.clone().unwrap();
        let dropped = usage.dropped.unwrap();

        // 1. Nothing returned is unreadable; every passage is its record's.
        let visible: Vec<usize> = (0..docs.len())
            .filter(|&i| readable(&docs[i], &identity, &groups))
            .collect();
        let mut returned: HashSet<usize> = HashSet::new();
        for r in &response.results {
            let key = (
                r.sync_id.clone(),
                r.id.split_once('.').unwrap().1.to_string(),
            );
            let i = *by_key
                .get(&key)
                .unwrap_or_else(|| panic!("{context}: unknown record {key:?}"));
            assert!(
                readable(&docs[i], &identity, &groups),
                "{context}: {caller:?} as {identity:?} got {key:?}"
            );
            returned.insert(i);
            for s in &r.segments {
                assert_eq!(s.text, docs[i].text, "{context}");
                pointers.push((s.pointer.clone(), i));
            }
        }

        // 2. Counts are over readable records only. Each record is one passage: the lexical
        // matches are the readable records holding the word, and what the pool cannot hold of
        // them is counted, never the hidden ones.
        let matched: HashSet<usize> = visible
            .iter()
            .copied()
            .filter(|&i| has_word(&docs[i].text, codeword))
            .collect();
        let cap = POOL as usize;
        assert_eq!(
            dropped.segments_beyond_pool_cap,
            (matched.len() as u64).saturating_sub(u64::from(POOL)),
            "{context}: {caller:?} as {identity:?}, {codeword}"
        );
        if matched.len() > cap {
            beyond_cap_rounds += 1;
        }
        assert_eq!(dropped.segments_not_searchable, 0, "{context}");
        assert_eq!(dropped.segments_unjoinable, 0, "{context}");

        // 3. The pool: the best `POOL` readable records of each retriever. Dense is brute-forced
        // here; lexical is any `POOL` of the matches (BM25 decides which).
        let query = model.embed(&[codeword]).unwrap().remove(0);
        let mut dense: Vec<(f32, usize)> = visible
            .iter()
            .map(|&i| (dot(&query, &docs[i].vector), i))
            .collect();
        dense.sort_by(|a, b| b.0.total_cmp(&a.0));
        let clear_cut = dense.len() <= cap || dense[cap - 1].0 - dense[cap].0 > 1e-4;
        let total = u64::from(usage.returned) + dropped.records_beyond_top_k;
        assert!(total <= visible.len() as u64, "{context}");
        if clear_cut {
            let top_dense: HashSet<usize> = dense.iter().take(cap).map(|(_, i)| *i).collect();
            let lexical = matched.len().min(cap);
            let shared = top_dense.intersection(&matched).count();
            if matched.len() <= cap {
                assert_eq!(total, top_dense.union(&matched).count() as u64, "{context}");
                exact_pools += 1;
            } else {
                let least = top_dense.len() + lexical - shared.min(lexical);
                assert!(
                    (least as u64..=(top_dense.len() + lexical) as u64).contains(&total),
                    "{context}: pool of {total}"
                );
            }
            if u64::from(top_k) >= total {
                assert!(top_dense.is_subset(&returned), "{context}");
                assert!(
                    returned
                        .iter()
                        .all(|i| top_dense.contains(i) || matched.contains(i)),
                    "{context}"
                );
                assert!(
                    returned.intersection(&matched).count() >= lexical,
                    "{context}"
                );
            }
        }
        assert_eq!(usage.returned, (total as u32).min(top_k), "{context}");
        assert_eq!(usage.underfilled, usage.returned < top_k, "{context}");

        // 4. Reading around any passage seen so far works exactly when this caller may read it.
        for _ in 0..3 {
            if pointers.is_empty() {
                break;
            }
            let (pointer, i) = pointers[rng.below(pointers.len())].clone();
            let request = pb::ReadSegmentContextRequest {
                project_id: PROJECT.into(),
                pointer,
                before: Some(2),
                after: Some(2),
                identity: sent_one.clone(),
                identities: sent_many.clone(),
            };
            let result = ContextSearchClient::new(channel(grpc).await)
                .read_segment_context(bearer(request, Some(&token)))
                .await;
            match (readable(&docs[i], &identity, &groups), result) {
                (true, Ok(r)) => assert_eq!(r.into_inner().segments.len(), 1, "{context}"),
                (false, Err(status)) => {
                    assert_eq!(status.code(), tonic::Code::NotFound, "{context}")
                }
                (expected, got) => {
                    panic!("{context}: {caller:?} readable={expected} but read gave {got:?}")
                }
            }
        }
    }
    assert!(
        beyond_cap_rounds >= 5,
        "{store:?} seed {seed:#x}: only {beyond_cap_rounds} rounds had more matches than the pool"
    );
    assert!(
        exact_pools >= 3,
        "{store:?} seed {seed:#x}: only {exact_pools} rounds checked the pool exactly"
    );
    assert!(user_rounds >= 5, "{store:?} seed {seed:#x}");
}

fn rng_pick(rng: &mut Rng) -> &'static str {
    PEOPLE[rng.below(PEOPLE.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_permissions_never_leak_on_postgres() {
    for seed in SEEDS {
        run_seed(StoreKind::Postgres, seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_permissions_never_leak_on_sqlite() {
    for seed in SEEDS {
        run_seed(StoreKind::Sqlite, seed).await;
    }
}
