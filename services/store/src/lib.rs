//! Metadata of agentsearch: projects, the placement of integrations on shards, and the catalog
//! ledger (tool name -> integration and content hash, which makes ingest idempotent and lets a
//! tool move between integrations). Two implementations behind [`MetadataStore`]: PostgreSQL
//! ([`PgStore`], distributed mode) and embedded SQLite ([`SqliteStore`], `serve`), with the same
//! schema and migrations, checked by one conformance suite.
//!
//! It does not hold indexes or tool bodies: shards do.

mod postgres;
mod sqlite;

use std::time::{SystemTime, UNIX_EPOCH};

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or refused the connection.
    #[error("metadata store unavailable: {0}")]
    Unavailable(String),
    /// A query failed.
    #[error("metadata store error: {0}")]
    Backend(String),
}

impl From<StoreError> for agentsearch_common::Error {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(m) => {
                tracing::error!(error = %m, "metadata store unavailable");
                agentsearch_common::Error::Unavailable("the metadata store is unavailable".into())
            }
            StoreError::Backend(m) => agentsearch_common::Error::Internal(m),
        }
    }
}

/// Migrations, in order; each runs once per database (schema).
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_catalog.sql")),
    (2, include_str!("../migrations/0002_stale_integrations.sql")),
];

/// Where one integration of a project lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub integration: String,
    /// Shard ids, primary first.
    pub shard_ids: Vec<String>,
}

/// What the ledger knows of one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogEntry {
    pub name: String,
    pub integration: String,
    /// Empty while a write of the tool is pending.
    pub content_hash: String,
    /// Integrations that may still hold an old copy (a move or delete not completed yet).
    pub stale: Vec<String>,
}

pub(crate) fn join_stale(stale: &[String]) -> String {
    stale.join(",")
}

pub(crate) fn split_stale(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[async_trait::async_trait]
pub trait MetadataStore: Send + Sync + 'static {
    /// Creates the project if it does not exist.
    async fn ensure_project(&self, project_id: &str) -> Result<()>;
    /// Every placement of the project's integrations.
    async fn placements(&self, project_id: &str) -> Result<Vec<Placement>>;
    /// Records `shard_ids` for the integration unless a placement exists; returns the placement in
    /// force (the existing one wins, so concurrent routers agree).
    async fn place(
        &self,
        project_id: &str,
        integration: &str,
        shard_ids: &[String],
    ) -> Result<Vec<String>>;
    /// Ledger entries of the named tools that exist.
    async fn catalog_entries(
        &self,
        project_id: &str,
        names: &[String],
    ) -> Result<Vec<CatalogEntry>>;
    /// Inserts or replaces ledger entries, in one transaction.
    async fn put_catalog_entries(&self, project_id: &str, entries: &[CatalogEntry]) -> Result<()>;
    /// Removes ledger entries; returns how many existed.
    async fn delete_catalog_entries(&self, project_id: &str, names: &[String]) -> Result<u64>;
    /// Tools in the project's ledger.
    async fn catalog_size(&self, project_id: &str) -> Result<u64>;
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Groups placement rows (project-ordered by integration, then replica) into [`Placement`]s.
pub(crate) fn group_placements(rows: Vec<(String, String)>) -> Vec<Placement> {
    let mut out: Vec<Placement> = Vec::new();
    for (integration, shard_id) in rows {
        match out.last_mut() {
            Some(last) if last.integration == integration => last.shard_ids.push(shard_id),
            _ => out.push(Placement {
                integration,
                shard_ids: vec![shard_id],
            }),
        }
    }
    out
}

/// The conformance suite every [`MetadataStore`] passes.
#[doc(hidden)]
pub mod conformance {
    use super::*;

    pub async fn run(store: &dyn MetadataStore) {
        let p = "00000000-0000-4000-8000-0000000000aa";
        let q = "00000000-0000-4000-8000-0000000000bb";
        store.ensure_project(p).await.unwrap();
        store.ensure_project(p).await.unwrap();
        store.ensure_project(q).await.unwrap();

        // Placement: first writer wins; replicas keep their order.
        assert!(store.placements(p).await.unwrap().is_empty());
        let placed = store
            .place(p, "slack", &["s2".into(), "s1".into()])
            .await
            .unwrap();
        assert_eq!(placed, ["s2", "s1"]);
        let again = store.place(p, "slack", &["s3".into()]).await.unwrap();
        assert_eq!(again, ["s2", "s1"]);
        store.place(p, "github", &["s1".into()]).await.unwrap();
        store.place(q, "slack", &["s9".into()]).await.unwrap();
        assert_eq!(
            store.placements(p).await.unwrap(),
            vec![
                Placement {
                    integration: "github".into(),
                    shard_ids: vec!["s1".into()]
                },
                Placement {
                    integration: "slack".into(),
                    shard_ids: vec!["s2".into(), "s1".into()]
                },
            ]
        );

        // Ledger: upsert replaces, delete counts, projects are isolated.
        let entry = |name: &str, integration: &str, hash: &str| CatalogEntry {
            name: name.into(),
            integration: integration.into(),
            content_hash: hash.into(),
            stale: Vec::new(),
        };
        store
            .put_catalog_entries(
                p,
                &[
                    entry("A", "slack", "h1"),
                    entry("B", "slack", "h2"),
                    entry("C", "github", "h3"),
                ],
            )
            .await
            .unwrap();
        store
            .put_catalog_entries(p, &[entry("B", "github", "h4")])
            .await
            .unwrap();
        store
            .put_catalog_entries(q, &[entry("A", "slack", "other")])
            .await
            .unwrap();
        let mut got = store
            .catalog_entries(p, &["A".into(), "B".into(), "Z".into()])
            .await
            .unwrap();
        got.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            got,
            vec![entry("A", "slack", "h1"), entry("B", "github", "h4")]
        );
        assert_eq!(store.catalog_size(p).await.unwrap(), 3);
        assert_eq!(
            store
                .delete_catalog_entries(p, &["A".into(), "Z".into()])
                .await
                .unwrap(),
            1
        );
        assert_eq!(store.catalog_size(p).await.unwrap(), 2);
        assert_eq!(store.catalog_size(q).await.unwrap(), 1);
        assert!(store.catalog_entries(p, &[]).await.unwrap().is_empty());
        store.put_catalog_entries(p, &[]).await.unwrap();

        // Pending entries keep the integrations that may hold stale copies.
        let pending = CatalogEntry {
            stale: vec!["github".into(), "slack".into()],
            ..entry("B", "jira", "")
        };
        store
            .put_catalog_entries(p, std::slice::from_ref(&pending))
            .await
            .unwrap();
        assert_eq!(
            store.catalog_entries(p, &["B".into()]).await.unwrap(),
            vec![pending]
        );
        store
            .put_catalog_entries(p, &[entry("B", "github", "h4")])
            .await
            .unwrap();
        assert_eq!(
            store.catalog_entries(p, &["B".into()]).await.unwrap(),
            vec![entry("B", "github", "h4")]
        );

        // Names with quotes and unicode are data, not SQL.
        store
            .put_catalog_entries(p, &[entry("x'); DROP TABLE tools; --", "slack", "h")])
            .await
            .unwrap();
        store
            .put_catalog_entries(p, &[entry("naïve ✓", "slack", "h")])
            .await
            .unwrap();
        assert_eq!(store.catalog_size(p).await.unwrap(), 4);
    }
}
