//! Metadata of agentsearch: projects, the placement of integrations on shards, and the catalog
//! ledger (tool name -> integration and content hash, which makes ingest idempotent and lets a
//! tool move between integrations), and the metadata of context search (syncs, what each knows
//! of its records and their ACLs, and the source's group memberships), and the connections of
//! users (their accounts on each integration, one of them the default), and what the tool router
//! keeps (its sessions, and the description and guidance of each integration), and the plans
//! recorded for use cases (per project, deleted with their tools). Two
//! implementations behind [`MetadataStore`]: PostgreSQL ([`PgStore`], distributed mode) and
//! embedded SQLite ([`SqliteStore`], `serve`), with the same schema and migrations, checked by
//! one conformance suite.
//!
//! It does not hold indexes or tool bodies: shards do.

mod pg_tls;
mod postgres;
mod sqlite;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

pub use pg_tls::PgTls;
pub use postgres::{PgOptions, PgStore};
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
    /// The named object does not exist (or belongs to another project).
    #[error("{0}")]
    NotFound(String),
    /// A sync id the caller chose is already used by another project's sync.
    #[error("sync id `{0}` is taken")]
    SyncIdTaken(String),
    /// A tool-router session id is already used (the session in force is kept).
    #[error("tool router session id `{0}` is taken")]
    SessionIdTaken(String),
}

impl From<StoreError> for agentsearch_common::Error {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(m) => {
                tracing::error!(error = %m, "metadata store unavailable");
                agentsearch_common::Error::Unavailable("the metadata store is unavailable".into())
            }
            StoreError::Backend(m) => agentsearch_common::Error::Internal(m),
            StoreError::NotFound(m) => agentsearch_common::Error::NotFound(m),
            StoreError::SyncIdTaken(_) => agentsearch_common::Error::invalid(
                "id",
                "this sync id is already in use; choose another UUID or omit it",
            ),
            // The router generates session ids: a collision is not the client's to fix.
            err @ StoreError::SessionIdTaken(_) => {
                agentsearch_common::Error::Internal(err.to_string())
            }
        }
    }
}

/// Migrations, in order; each runs once per database (schema).
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_catalog.sql")),
    (2, include_str!("../migrations/0002_stale_integrations.sql")),
    (3, include_str!("../migrations/0003_context.sql")),
    (4, include_str!("../migrations/0004_connections.sql")),
    (5, include_str!("../migrations/0005_feedback.sql")),
    (6, include_str!("../migrations/0006_sync_fields.sql")),
    (7, include_str!("../migrations/0007_stale_replicas.sql")),
    (8, include_str!("../migrations/0008_membership.sql")),
    (9, include_str!("../migrations/0009_tool_router.sql")),
    (10, include_str!("../migrations/0010_plans.sql")),
];

/// A replica that missed a write of one integration (`kind` "integration", `key` its name) or one
/// sync (`kind` "sync", `key` its id): not read from until repaired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleReplica {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub shard_id: String,
    /// Grows with every write the replica misses and never repeats; a repair clears the epoch it
    /// saw.
    pub epoch: u64,
    /// When it was last marked, in milliseconds since the epoch.
    pub marked_at: i64,
}

/// The epoch of a new stale mark: microseconds since the Unix epoch, so a mark recorded after an
/// earlier one of the same replica was cleared never repeats that one's epoch (a clear that read
/// the old mark cannot remove the new one).
pub(crate) fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The fence of [`MetadataStore::write_fence`] over an integration's ledger rows
/// `(name, content_hash, stale_integrations, updated_at)`.
pub(crate) fn tool_fence(
    integration: &str,
    rows: impl IntoIterator<Item = (String, String, String, i64)>,
    since_ms: i64,
) -> Option<String> {
    use std::hash::{Hash, Hasher};
    let mut rows: Vec<(String, String, String, i64)> = rows.into_iter().collect();
    rows.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (name, hash, stale, updated_at) in &rows {
        let pending = hash.is_empty() || stale.split(',').any(|s| s == integration);
        if pending && *updated_at >= since_ms {
            return None;
        }
        (name, hash, stale, updated_at).hash(&mut hasher);
    }
    Some(format!("{}:{:016x}", rows.len(), hasher.finish()))
}

/// The replicas of one integration (`kind` [`STALE_INTEGRATION`], `key` its name) or one sync
/// ([`STALE_SYNC`], its id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSet {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub shard_ids: Vec<String>,
}

/// Orders replica sets by project, kind and key.
pub(crate) fn sort_replica_sets(sets: &mut [ReplicaSet]) {
    sets.sort_by(|a, b| (&a.project_id, &a.kind, &a.key).cmp(&(&b.project_id, &b.kind, &b.key)));
}

/// Adds `to` to a sync's shard list unless it holds it already; returns whether it changed.
pub(crate) fn join_shard_list(ids: &mut Vec<String>, to: &str) -> bool {
    if ids.iter().any(|id| id == to) {
        return false;
    }
    ids.push(to.to_string());
    true
}

/// Takes `from` out of a sync's shard list if another shard stays; returns whether it changed.
pub(crate) fn leave_shard_list(ids: &mut Vec<String>, from: &str) -> bool {
    if !ids.iter().any(|id| id == from) || ids.len() < 2 {
        return false;
    }
    ids.retain(|id| id != from);
    true
}

/// A replica on its way from one shard to another: `to` joins the replicas (stale until the
/// repair has filled it), then, once it is healthy and every router has seen it, `from` leaves
/// them, and its copy is deleted once no router can still read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaMove {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub from_shard: String,
    pub to_shard: String,
    /// `drain` or `rebalance`.
    pub reason: String,
    pub created_at: i64,
    /// When `to` joined the replicas (ms since the epoch).
    pub added_at: Option<i64>,
    /// When `from` left them.
    pub removed_at: Option<i64>,
}

/// A shard being emptied (`admin drain`): new placements avoid it and its replicas move away.
/// With `lost`, its data is declared gone: keys it held alone are placed elsewhere, empty, and
/// reported lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardDrain {
    pub shard_id: String,
    pub lost: bool,
    pub requested_at: i64,
}

/// A key whose only replica was lost with its shard's data: its content must be written again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostReplica {
    pub project_id: String,
    pub kind: String,
    pub key: String,
    pub shard_id: String,
    pub lost_at: i64,
}

/// A tool-router session: which project and user a `trs_...` id searches for, until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRouterSession {
    /// `trs_` and 32 hex digits, generated by the router.
    pub id: String,
    pub project_id: String,
    /// `None`: a service caller's session (no user's connections).
    pub user_id: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub expires_at: i64,
}

/// What a project's catalog says of one integration beside its tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationInfo {
    pub integration: String,
    /// May be empty.
    pub description: String,
    /// How agents should use the integration; may be empty.
    pub guidance: String,
    /// Known pitfalls of its tools, by tool name.
    pub pitfalls: BTreeMap<String, Vec<String>>,
}

/// One outcome of a plan, to record ([`MetadataStore::record_plan`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOutcome {
    /// `pln_` and a hash of the plan's identity (project, normalised use case, steps), chosen by
    /// the router.
    pub id: String,
    /// The use case as sent (kept as last recorded).
    pub use_case: String,
    /// The use case's embedding under the router's model.
    pub embedding: Vec<f32>,
    /// Tool names, in order.
    pub steps: Vec<String>,
    /// `None`: the plan keeps the notes recorded before (none for a new plan).
    pub notes: Option<String>,
    /// `None`: the plan keeps the pitfalls recorded before (none for a new plan).
    pub pitfalls: Option<Vec<String>>,
    /// The outcome: a success (else a failure).
    pub success: bool,
    /// When it was recorded, in milliseconds since the epoch.
    pub at_ms: i64,
}

/// A recorded plan with its outcomes so far.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRow {
    pub id: String,
    pub use_case: String,
    pub embedding: Vec<f32>,
    pub steps: Vec<String>,
    /// May be empty.
    pub notes: String,
    pub pitfalls: Vec<String>,
    pub successes: u64,
    pub failures: u64,
    /// Milliseconds since the epoch.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// An embedding as the store keeps it: little-endian f32s.
pub(crate) fn embedding_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An embedding from the store's bytes (a trailing partial value is ignored).
pub(crate) fn embedding_of(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A list of texts as the store keeps it (a JSON array).
pub(crate) fn list_text(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_string())
}

/// A list of texts from the store's JSON array (an unreadable one reads as empty).
pub(crate) fn list_of(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// Plans ordered by id (byte order, the same in both stores).
pub(crate) fn sort_plans(plans: &mut [PlanRow]) {
    plans.sort_by(|a, b| a.id.cmp(&b.id));
}

/// Pitfalls as the store keeps them (a JSON object).
pub(crate) fn pitfalls_text(pitfalls: &BTreeMap<String, Vec<String>>) -> String {
    serde_json::to_string(pitfalls).unwrap_or_else(|_| "{}".to_string())
}

/// Pitfalls from the store's text (an unreadable one reads as none).
pub(crate) fn pitfalls_of(text: &str) -> BTreeMap<String, Vec<String>> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The `kind` of a [`StaleReplica`] of an integration's index.
pub const STALE_INTEGRATION: &str = "integration";
/// The `kind` of a [`StaleReplica`] of a sync's index.
pub const STALE_SYNC: &str = "sync";

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

/// A sync: one connected source of one owner, delivering records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncRow {
    pub id: String,
    pub project_id: String,
    pub source: String,
    pub owner: String,
    /// Shard ids, primary first.
    pub shard_ids: Vec<String>,
    pub generation: u64,
    pub records: u64,
    pub segments: u64,
    pub created_at_ms: i64,
    pub last_ingest_at_ms: Option<i64>,
    /// Metadata fields its records carry, fixed at creation.
    pub fields: Vec<agentsearch_common::shard::FieldDecl>,
}

/// The stored form of a sync's declared fields.
pub(crate) fn fields_json(fields: &[agentsearch_common::shard::FieldDecl]) -> String {
    serde_json::to_string(fields).unwrap_or_else(|_| "[]".into())
}

/// A sync's declared fields from their stored form (none if unreadable).
pub(crate) fn fields_of(json: &str) -> Vec<agentsearch_common::shard::FieldDecl> {
    serde_json::from_str(json).unwrap_or_default()
}

/// What the store knows of one record of a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub record_id: String,
    /// 0 for a record whose first write has not completed (see
    /// [`MetadataStore::mark_records_pending`]).
    pub generation: u64,
    /// Empty while a write of the record is pending.
    pub content_hash: String,
    pub segments: u64,
    /// Principal tokens of the record's ACL, sorted.
    pub principals: Vec<String>,
}

/// A connection to write: one account of a user on an integration. `status` and `account_type`
/// are validated by the caller and stored as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionInput {
    /// Integration slug, e.g. `gmail`.
    pub integration: String,
    /// The account on the integration, e.g. an email address.
    pub account_id: String,
    pub alias: Option<String>,
    /// `active`, `inactive`, `expired`, `revoked` or `error`.
    pub status: String,
    /// `private` or `shared`.
    pub account_type: String,
    /// Whether this account becomes the user's default on the integration.
    pub is_default: bool,
    /// What the integration says of the account, as JSON text.
    pub user_info: Option<String>,
}

/// A stored connection of a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionRow {
    pub integration: String,
    pub account_id: String,
    pub alias: Option<String>,
    pub status: String,
    pub account_type: String,
    /// Exactly one account of each integration of a user is the default.
    pub is_default: bool,
    pub user_info: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// One version of a project's ranking model for one kind of search (`tools`, `context`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankingModelRow {
    pub project_id: String,
    pub kind: String,
    /// 1 for the first model of the project and kind, then one more each refit.
    pub version: u64,
    /// The model's parameters as JSON (the router defines them).
    pub params: String,
    /// How many feedback examples it was fitted on.
    pub examples: u64,
    pub created_at_ms: i64,
}

/// Old versions of a ranking model the store keeps besides the newest.
pub const RANKING_MODEL_VERSIONS_KEPT: u64 = 10;

/// A comma separated list (stale integrations, shard ids) as stored.
pub(crate) fn join_list(items: &[String]) -> String {
    items.join(",")
}

/// Distinct sorted shard sets from comma separated lists.
pub(crate) fn distinct_sets(lists: impl IntoIterator<Item = String>) -> Vec<Vec<String>> {
    let sets: std::collections::BTreeSet<Vec<String>> = lists
        .into_iter()
        .map(|list| {
            let mut ids = split_list(&list);
            ids.sort();
            ids.dedup();
            ids
        })
        .filter(|ids| !ids.is_empty())
        .collect();
    sets.into_iter().collect()
}

pub(crate) fn split_list(text: &str) -> Vec<String> {
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
    /// The distinct sets of shards that hold something (an integration of any project, or a
    /// sync), each sorted: readiness asks whether every set has a reachable member. Also the
    /// store's health check.
    async fn replica_sets(&self) -> Result<Vec<Vec<String>>>;
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

    // Context search. Every method sees only the syncs of `project_id`: a sync of another project
    // reads as absent (None, empty, 0) and writes to it fail with [`StoreError::NotFound`].

    /// Creates the sync (counters start at 0, `created_at` now; the project row is created if
    /// missing) unless one with this id exists; returns the row in force (the existing one wins;
    /// the caller compares it). An id taken by another project's sync is an error.
    async fn create_sync(&self, sync: &SyncRow) -> Result<SyncRow>;
    async fn get_sync(&self, project_id: &str, sync_id: &str) -> Result<Option<SyncRow>>;
    /// Ordered by created_at then id.
    async fn list_syncs(&self, project_id: &str) -> Result<Vec<SyncRow>>;
    /// Entries of the named records that exist (any order), principals sorted.
    async fn record_entries(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<Vec<RecordEntry>>;
    /// Records that a write of the named records is in flight, before any shard is written: an
    /// existing entry's content hash is cleared, and a record without an entry gets a pending one
    /// (generation 0, no content hash, no segments, no principals). Whatever the moment a write is
    /// interrupted, every record a shard may hold is then known here, so a delete finds it and a
    /// retry rewrites it. Entries of generation 0 never count in the sync's totals.
    async fn mark_records_pending(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<()>;
    /// In one transaction: inserts or replaces the entries (and replaces each one's principals;
    /// of entries naming the same record the last wins), recomputes the sync's `records` and
    /// `segments` totals from its records, bumps its generation by one and sets `last_ingest_at`
    /// to now. Returns the new sync generation. An empty slice changes nothing and returns the
    /// current generation.
    async fn put_records(
        &self,
        project_id: &str,
        sync_id: &str,
        entries: &[RecordEntry],
    ) -> Result<u64>;
    /// In one transaction: removes the named records and their principals, recomputes totals, and
    /// if any existed bumps the generation and sets `last_ingest_at` to now. Returns (how many
    /// existed, generation after).
    async fn delete_records(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<(u64, u64)>;
    /// Replaces the members of each named group (an empty member list removes the group; of
    /// entries naming the same group the last wins), in one transaction.
    async fn put_group_members(
        &self,
        project_id: &str,
        sync_id: &str,
        groups: &[(String, Vec<String>)],
    ) -> Result<()>;
    /// Distinct group ids of the sync having any of `members` as a member, sorted.
    async fn member_groups(
        &self,
        project_id: &str,
        sync_id: &str,
        members: &[String],
    ) -> Result<Vec<String>>;
    /// Memberships of `members` in groups of the named syncs of the project, as
    /// `(sync id, group id, member)`, sorted: one query for every sync a search covers.
    async fn group_memberships(
        &self,
        project_id: &str,
        sync_ids: &[String],
        members: &[String],
    ) -> Result<Vec<(String, String, String)>>;
    /// Sum of `segments` over the sync's records whose principals share at least one with
    /// `principals` (any content hash).
    async fn readable_segments(
        &self,
        project_id: &str,
        sync_id: &str,
        principals: &[String],
    ) -> Result<u64>;

    // Connections. Every method sees only the connections of `user_id` (compared exactly) in
    // `project_id`; those of other users and projects read as absent and are never written.

    /// In one transaction (the project row is created if missing): inserts each input, or updates
    /// the account's row if it exists (every field as given; `created_at` is kept, `updated_at`
    /// set to now; of inputs naming the same account the last wins). An input with `is_default`
    /// takes the default from every other account of the user on its integration (of several
    /// such inputs of one integration the last wins); an input without it stores the account as
    /// not default. Then each integration of the inputs that has accounts but no default gets
    /// one: the earliest created, ties broken by the smallest account id. Rows whose
    /// `is_default` changes this way get `updated_at` now too. Returns the user's connections of
    /// the integrations of the inputs, in the order of [`MetadataStore::list_connections`]. An
    /// empty slice writes nothing and returns nothing.
    async fn upsert_connections(
        &self,
        project_id: &str,
        user_id: &str,
        inputs: &[ConnectionInput],
    ) -> Result<Vec<ConnectionRow>>;
    /// The user's connections of the named integrations (all when `integrations` is empty),
    /// ordered by integration, then the default first, then by `created_at`, then by account id
    /// (strings in byte order, the same in both stores).
    async fn list_connections(
        &self,
        project_id: &str,
        user_id: &str,
        integrations: &[String],
    ) -> Result<Vec<ConnectionRow>>;
    /// Removes one connection; returns whether it existed. If it was the default of its
    /// integration and the user has other accounts there, the earliest created (then the
    /// smallest account id) becomes the default, in the same transaction.
    async fn delete_connection(
        &self,
        project_id: &str,
        user_id: &str,
        integration: &str,
        account_id: &str,
    ) -> Result<bool>;

    /// Records the feedback on one search (replacing an earlier one for the same request id),
    /// then keeps only the newest `keep` of the project's `kind`. Returns how many are kept.
    async fn put_feedback(
        &self,
        project_id: &str,
        kind: &str,
        request_id: &str,
        example: &str,
        keep: u32,
    ) -> Result<u64>;

    /// The newest `limit` feedback examples of the project's `kind`, newest first.
    async fn feedback(&self, project_id: &str, kind: &str, limit: u32) -> Result<Vec<String>>;

    /// Stores the next version of the project's ranking model for `kind` (the newest + 1, or 1)
    /// and drops versions older than [`RANKING_MODEL_VERSIONS_KEPT`] before it.
    async fn put_ranking_model(
        &self,
        project_id: &str,
        kind: &str,
        params: &str,
        examples: u64,
    ) -> Result<RankingModelRow>;

    /// The newest version of the project's ranking model for `kind`, if it has one.
    async fn ranking_model(&self, project_id: &str, kind: &str) -> Result<Option<RankingModelRow>>;

    // Replica health.

    /// Marks replicas stale (one transaction): a new mark's epoch is the time in microseconds, an
    /// existing one's grows (by one at least), so no two marks of a replica share an epoch, also
    /// across a clear; `marked_at` is now. `epoch` and `marked_at` of `marks` are ignored.
    async fn mark_stale(&self, marks: &[StaleReplica]) -> Result<()>;
    /// Stale replicas of a project, or of every project (`None`), ordered by project, kind, key
    /// and shard.
    async fn stale_replicas(&self, project_id: Option<&str>) -> Result<Vec<StaleReplica>>;
    /// Clears a mark if its epoch is still `mark.epoch` (no write was missed since it was read);
    /// returns whether it did.
    async fn clear_stale(&self, mark: &StaleReplica) -> Result<bool>;
    /// Integrations and syncs with a replica on `shard_id`, ordered by project, kind and key.
    async fn replicas_on(&self, shard_id: &str) -> Result<Vec<ReplicaSet>>;
    /// Moves the replica of an integration or sync on shard `from` to shard `to`, keeping its
    /// rank; returns whether it did (not if `from` holds none or `to` holds one already).
    async fn move_replica(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        from: &str,
        to: &str,
    ) -> Result<bool>;
    /// Adds shard `to` as the last replica of an integration or sync; returns whether it did (not
    /// if the key does not exist or `to` holds it already).
    async fn add_replica(&self, project_id: &str, kind: &str, key: &str, to: &str) -> Result<bool>;
    /// Removes shard `from` from the replicas of an integration or sync, the others keeping
    /// their order; returns whether it did (not if `from` holds none, or is the only replica).
    async fn remove_replica(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        from: &str,
    ) -> Result<bool>;
    /// Every integration and sync of every project with its replicas, ordered by project, kind
    /// and key.
    async fn all_replicas(&self) -> Result<Vec<ReplicaSet>>;
    /// Forgets what the ledger knows of the content of an integration (its tools' entries) or a
    /// sync (its records, their ACL tokens, its counts; the sync itself stays), whose data was
    /// lost: writes of the same content are no longer skipped as unchanged.
    async fn forget_content(&self, project_id: &str, kind: &str, key: &str) -> Result<()>;

    // Membership changes.

    /// Records a move unless the key has one already; returns whether it did.
    async fn put_move(&self, movement: &ReplicaMove) -> Result<bool>;
    /// Every move in progress, ordered by project, kind and key.
    async fn replica_moves(&self) -> Result<Vec<ReplicaMove>>;
    /// Records the progress of a move (`added_at`, `removed_at`); returns whether it exists.
    async fn update_move(&self, movement: &ReplicaMove) -> Result<bool>;
    /// Deletes the move of a key (done or cancelled).
    async fn delete_move(&self, project_id: &str, kind: &str, key: &str) -> Result<()>;
    /// Records (or updates) the drain of a shard.
    async fn put_drain(&self, drain: &ShardDrain) -> Result<()>;
    /// Every shard being drained or drained, by shard id.
    async fn drains(&self) -> Result<Vec<ShardDrain>>;
    /// Forgets the drain of a shard; returns whether it had one.
    async fn delete_drain(&self, shard_id: &str) -> Result<bool>;
    /// Records keys whose only replica was lost (a newer report of a key replaces the older).
    async fn record_lost(&self, lost: &[LostReplica]) -> Result<()>;
    /// Every key reported lost, ordered by project, kind and key.
    async fn lost_replicas(&self) -> Result<Vec<LostReplica>>;
    /// Forgets every lost report; returns how many there were.
    async fn clear_lost(&self) -> Result<u64>;

    // Tool router.

    /// Records a new session. An id in use is [`StoreError::SessionIdTaken`], and the session in
    /// force stays as it was.
    async fn create_session(&self, session: &ToolRouterSession) -> Result<()>;
    /// The session with this id, whatever its expiry (the caller compares `expires_at`).
    async fn session(&self, id: &str) -> Result<Option<ToolRouterSession>>;
    /// Deletes the sessions with `expires_at <= now_ms`; returns how many.
    async fn delete_expired_sessions(&self, now_ms: i64) -> Result<u64>;
    /// Inserts or replaces what the project's catalog says of each integration (of infos naming
    /// the same integration the last wins), in one transaction.
    async fn put_integration_info(&self, project_id: &str, infos: &[IntegrationInfo])
    -> Result<()>;
    /// The info of those of the named integrations of the project that have one, ordered by
    /// integration (byte order, the same in both stores).
    async fn integration_info(
        &self,
        project_id: &str,
        integrations: &[String],
    ) -> Result<Vec<IntegrationInfo>>;
    /// Forgets the info of one integration of the project; returns whether it had one.
    async fn delete_integration_info(&self, project_id: &str, integration: &str) -> Result<bool>;

    // Plans.

    /// Records one outcome of a plan of the project, in one transaction: a plan with this id
    /// counts one more success or failure and takes the use case text, embedding and the notes
    /// and pitfalls that are given; a new plan is created, unless the project already has
    /// `max_plans` plans, which answers `None` and writes nothing. Returns the plan as stored.
    async fn record_plan(
        &self,
        project_id: &str,
        outcome: &PlanOutcome,
        max_plans: u64,
    ) -> Result<Option<PlanRow>>;
    /// Every plan of the project, ordered by id.
    async fn plans(&self, project_id: &str) -> Result<Vec<PlanRow>>;
    /// Deletes one plan of the project; returns whether it existed.
    async fn delete_plan(&self, project_id: &str, plan_id: &str) -> Result<bool>;
    /// Deletes the plans of the project whose steps name any of `tool_names` (their tools are
    /// leaving the catalog); returns the ids deleted, sorted.
    async fn delete_plans_naming(
        &self,
        project_id: &str,
        tool_names: &[String],
    ) -> Result<Vec<String>>;

    /// What the ledger says of the writes of one integration (`kind` [`STALE_INTEGRATION`]) or
    /// sync ([`STALE_SYNC`]): `None` while a write of it may be in flight (an entry it touches
    /// was marked pending at or after `since_ms`), else a fingerprint that changes whenever a
    /// write of it completes. A repair reads it before and after copying: equal fingerprints mean
    /// no write overlapped the copy.
    async fn write_fence(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        since_ms: i64,
    ) -> Result<Option<String>>;
}

/// The distinct items of `items`, sorted.
pub(crate) fn unique(items: &[String]) -> Vec<String> {
    let mut out = items.to_vec();
    out.sort();
    out.dedup();
    out
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn unknown_sync(sync_id: &str) -> StoreError {
    StoreError::NotFound(format!("sync `{sync_id}` not found"))
}

pub(crate) fn sync_taken(sync_id: &str) -> StoreError {
    StoreError::SyncIdTaken(sync_id.to_string())
}

pub(crate) fn session_taken(id: &str) -> StoreError {
    StoreError::SessionIdTaken(id.to_string())
}

/// Integration infos ordered by integration (byte order, the same in both stores).
pub(crate) fn sort_integration_infos(infos: &mut [IntegrationInfo]) {
    infos.sort_by(|a, b| a.integration.cmp(&b.integration));
}

/// A count or generation as stored (BIGINT).
pub(crate) fn to_i64(value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| StoreError::Backend(format!("{value} is out of range")))
}

/// A stored count or generation (never negative).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A record entry ready to bind: generation and segments as stored, principals deduplicated.
pub(crate) struct RecordRow {
    pub record_id: String,
    pub generation: i64,
    pub content_hash: String,
    pub segments: i64,
    pub principals: Vec<String>,
}

/// The entries to write, one per record (the last of several naming the same record wins).
pub(crate) fn record_rows(entries: &[RecordEntry]) -> Result<Vec<RecordRow>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for e in entries.iter().rev() {
        if !seen.insert(e.record_id.as_str()) {
            continue;
        }
        let mut principals = e.principals.clone();
        principals.sort_unstable();
        principals.dedup();
        out.push(RecordRow {
            record_id: e.record_id.clone(),
            generation: to_i64(e.generation)?,
            content_hash: e.content_hash.clone(),
            segments: to_i64(e.segments)?,
            principals,
        });
    }
    out.reverse();
    Ok(out)
}

/// The groups to write, one per group id (the last wins), members deduplicated.
pub(crate) fn group_rows(groups: &[(String, Vec<String>)]) -> Vec<(String, Vec<String>)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(groups.len());
    for (group, members) in groups.iter().rev() {
        if !seen.insert(group.as_str()) {
            continue;
        }
        let mut members = members.clone();
        members.sort_unstable();
        members.dedup();
        out.push((group.clone(), members));
    }
    out.reverse();
    out
}

/// Attaches (record id, principal) rows to their entries and sorts each one's principals.
pub(crate) fn attach_principals(
    mut entries: Vec<RecordEntry>,
    rows: Vec<(String, String)>,
) -> Vec<RecordEntry> {
    let mut by_record: std::collections::HashMap<String, Vec<String>> =
        std::collections::HashMap::new();
    for (record_id, principal) in rows {
        by_record.entry(record_id).or_default().push(principal);
    }
    for e in &mut entries {
        let mut principals = by_record.remove(&e.record_id).unwrap_or_default();
        principals.sort_unstable();
        e.principals = principals;
    }
    entries
}

/// Syncs ordered by created_at then id (byte order, the same in both stores).
pub(crate) fn sort_syncs(syncs: &mut [SyncRow]) {
    syncs.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
}

/// The connections to write, one per account (the last input naming an account wins, at the
/// position of that last input), with at most one default per integration: the last input of
/// the integration asking for it.
pub(crate) fn connection_inputs(inputs: &[ConnectionInput]) -> Vec<ConnectionInput> {
    let mut seen = std::collections::HashSet::new();
    let mut defaulted = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs.iter().rev() {
        if !seen.insert((input.integration.as_str(), input.account_id.as_str())) {
            continue;
        }
        let keeps_default = input.is_default && defaulted.insert(input.integration.as_str());
        out.push(ConnectionInput {
            is_default: keeps_default,
            ..input.clone()
        });
    }
    out.reverse();
    out
}

/// Distinct integrations of the inputs, sorted.
pub(crate) fn connection_integrations(inputs: &[ConnectionInput]) -> Vec<String> {
    let mut integrations: Vec<String> = inputs.iter().map(|i| i.integration.clone()).collect();
    integrations.sort_unstable();
    integrations.dedup();
    integrations
}

/// Connections in list order: integration, the default first, `created_at`, account id (byte
/// order, the same in both stores).
pub(crate) fn sort_connections(rows: &mut [ConnectionRow]) {
    rows.sort_by(|a, b| {
        (
            &a.integration,
            !a.is_default,
            a.created_at_ms,
            &a.account_id,
        )
            .cmp(&(
                &b.integration,
                !b.is_default,
                b.created_at_ms,
                &b.account_id,
            ))
    });
}

/// Sorts one user's `rows` (every row of each integration present) and makes the earliest
/// created account (then the smallest account id) the default of each integration that has
/// none, updated at `now`. Returns the `(integration, account id)` made default, for the store
/// to write.
pub(crate) fn elect_defaults(rows: &mut [ConnectionRow], now: i64) -> Vec<(String, String)> {
    sort_connections(rows);
    let mut elected = Vec::new();
    for group in rows.chunk_by_mut(|a, b| a.integration == b.integration) {
        // Sorted: a default would come first, and without one the first is the earliest.
        let first = &mut group[0];
        if !first.is_default {
            first.is_default = true;
            first.updated_at_ms = now;
            elected.push((first.integration.clone(), first.account_id.clone()));
        }
    }
    elected
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
        // Replica sets: distinct, each sorted, across projects.
        assert_eq!(
            store.replica_sets().await.unwrap(),
            [strings(&["s1"]), strings(&["s1", "s2"]), strings(&["s9"])]
        );
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

        context(store, p, q).await;
        connections(store).await;
        feedback(store, p, q).await;
        stale_replicas(store, p, q).await;
        membership(store, p, q).await;
        tool_router_sessions(store, p, q).await;
        integration_infos(store, p, q).await;
        plans(store, p, q).await;
    }

    /// Plans: a first outcome creates one, later ones count and replace what they give; a
    /// project's cap refuses new plans only; projects never see each other's; deletes by id and
    /// by tool name say what they deleted.
    async fn plans(store: &dyn MetadataStore, p: &str, q: &str) {
        let outcome = |id: &str, steps: &[&str], success: bool, at_ms: i64| PlanOutcome {
            id: id.into(),
            use_case: format!("use case of {id}"),
            embedding: vec![0.25, -1.5, f32::MIN_POSITIVE, 3.0e-8],
            steps: strings(steps),
            notes: None,
            pitfalls: None,
            success,
            at_ms,
        };
        assert!(store.plans(p).await.unwrap().is_empty());

        // A first outcome: counted, no notes or pitfalls, steps in order, vector exact.
        let first = store
            .record_plan(
                p,
                &outcome("pln_b", &["GMAIL_SEARCH", "GMAIL_SEND"], true, 10),
                3,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            first,
            PlanRow {
                id: "pln_b".into(),
                use_case: "use case of pln_b".into(),
                embedding: vec![0.25, -1.5, f32::MIN_POSITIVE, 3.0e-8],
                steps: strings(&["GMAIL_SEARCH", "GMAIL_SEND"]),
                notes: String::new(),
                pitfalls: Vec::new(),
                successes: 1,
                failures: 0,
                created_at_ms: 10,
                updated_at_ms: 10,
            }
        );

        // Another outcome of the same plan counts and replaces what it gives; the rest stays.
        let failed = PlanOutcome {
            use_case: "Use  case of pln_b".into(),
            notes: Some("the search needs a date \"range\"".into()),
            pitfalls: Some(strings(&["naïve ✓", "x'); DROP TABLE plans; --"])),
            ..outcome("pln_b", &["GMAIL_SEARCH", "GMAIL_SEND"], false, 20)
        };
        let second = store.record_plan(p, &failed, 3).await.unwrap().unwrap();
        assert_eq!((second.successes, second.failures), (1, 1));
        assert_eq!(second.use_case, "Use  case of pln_b");
        assert_eq!(second.notes, "the search needs a date \"range\"");
        assert_eq!(
            second.pitfalls,
            strings(&["naïve ✓", "x'); DROP TABLE plans; --"])
        );
        assert_eq!((second.created_at_ms, second.updated_at_ms), (10, 20));
        let third = store
            .record_plan(
                p,
                &outcome("pln_b", &["GMAIL_SEARCH", "GMAIL_SEND"], true, 30),
                3,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((third.successes, third.failures), (2, 1));
        assert_eq!(third.notes, second.notes);
        assert_eq!(third.pitfalls, second.pitfalls);
        let cleared = PlanOutcome {
            notes: Some(String::new()),
            pitfalls: Some(Vec::new()),
            ..outcome("pln_b", &["GMAIL_SEARCH", "GMAIL_SEND"], true, 40)
        };
        let cleared = store.record_plan(p, &cleared, 3).await.unwrap().unwrap();
        assert_eq!((cleared.notes.as_str(), cleared.pitfalls.len()), ("", 0));
        assert_eq!(cleared.successes, 3);

        // The cap: new plans are refused once the project has `max_plans`, outcomes of existing
        // ones are still counted; other projects have their own.
        store
            .record_plan(p, &outcome("pln_a", &["SLACK_POST"], true, 50), 3)
            .await
            .unwrap()
            .unwrap();
        store
            .record_plan(
                p,
                &outcome("pln_c", &["GMAIL_SEND", "SLACK_POST"], false, 60),
                3,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            store
                .record_plan(p, &outcome("pln_d", &["SLACK_POST"], true, 70), 3)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .record_plan(p, &outcome("pln_a", &["SLACK_POST"], true, 80), 3)
                .await
                .unwrap()
                .map(|plan| plan.successes),
            Some(2)
        );
        assert_eq!(
            store
                .record_plan(q, &outcome("pln_a", &["SLACK_POST"], false, 90), 0)
                .await
                .unwrap(),
            None
        );
        store
            .record_plan(q, &outcome("pln_a", &["SLACK_POST"], false, 90), 3)
            .await
            .unwrap()
            .unwrap();
        let ids = |plans: Vec<PlanRow>| -> Vec<(String, u64, u64)> {
            plans
                .into_iter()
                .map(|plan| (plan.id, plan.successes, plan.failures))
                .collect()
        };
        assert_eq!(
            ids(store.plans(p).await.unwrap()),
            [
                ("pln_a".to_string(), 2, 0),
                ("pln_b".to_string(), 3, 1),
                ("pln_c".to_string(), 0, 1)
            ]
        );
        assert_eq!(
            ids(store.plans(q).await.unwrap()),
            [("pln_a".to_string(), 0, 1)]
        );

        // Deletes by tool name: the plans of that project naming any of the names.
        assert!(store.delete_plans_naming(p, &[]).await.unwrap().is_empty());
        assert!(
            store
                .delete_plans_naming(p, &strings(&["NOPE", "GMAIL"]))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .delete_plans_naming(p, &strings(&["GMAIL_SEND", "OTHER"]))
                .await
                .unwrap(),
            ["pln_b", "pln_c"]
        );
        assert_eq!(
            ids(store.plans(p).await.unwrap()),
            [("pln_a".to_string(), 2, 0)]
        );
        assert_eq!(ids(store.plans(q).await.unwrap()).len(), 1);

        // Deletes by id: once, never another project's.
        assert!(!store.delete_plan(p, "pln_b").await.unwrap());
        assert!(store.delete_plan(p, "pln_a").await.unwrap());
        assert!(!store.delete_plan(p, "pln_a").await.unwrap());
        assert!(store.plans(p).await.unwrap().is_empty());
        assert_eq!(
            store
                .delete_plans_naming(q, &strings(&["SLACK_POST"]))
                .await
                .unwrap(),
            ["pln_a"]
        );
        assert!(store.plans(q).await.unwrap().is_empty());
    }

    /// Tool-router sessions: read back whatever their expiry, an id in use refused (the first
    /// kept), expired ones deleted and counted exactly.
    async fn tool_router_sessions(store: &dyn MetadataStore, p: &str, q: &str) {
        let session =
            |id: &str, project: &str, user: Option<&str>, expires_at: i64| ToolRouterSession {
                id: id.into(),
                project_id: project.into(),
                user_id: user.map(str::to_string),
                created_at: 1_000,
                expires_at,
            };
        let a = session(
            "trs_0000000000000000000000000000000a",
            p,
            Some("alice"),
            3_000,
        );
        let b = session("trs_0000000000000000000000000000000b", q, None, 5_000);
        let c = session(
            "trs_0000000000000000000000000000000c",
            p,
            Some("bob"),
            5_000,
        );
        let d = session("trs_0000000000000000000000000000000d", p, None, 9_000);
        let odd = session(
            "x'); DROP TABLE tool_router_sessions; --",
            p,
            Some("naïve ✓"),
            9_000,
        );
        assert_eq!(store.session(&a.id).await.unwrap(), None);
        for s in [&a, &b, &c, &d, &odd] {
            store.create_session(s).await.unwrap();
        }
        // Every expiry lies in the past: the store returns them all the same.
        for s in [&a, &b, &c, &d, &odd] {
            assert_eq!(store.session(&s.id).await.unwrap().as_ref(), Some(s));
        }
        assert_eq!(store.session("trs_unknown").await.unwrap(), None);
        assert_eq!(store.session("").await.unwrap(), None);

        // An id in use is refused, also by another project or user; the first stays.
        for taken in [
            ToolRouterSession {
                expires_at: 99_000,
                ..a.clone()
            },
            session(&a.id, q, None, 99_000),
            session(&b.id, p, Some("alice"), 1),
        ] {
            let result = store.create_session(&taken).await;
            assert!(
                matches!(&result, Err(StoreError::SessionIdTaken(id)) if *id == taken.id),
                "{result:?}"
            );
        }
        assert_eq!(store.session(&a.id).await.unwrap(), Some(a.clone()));
        assert_eq!(store.session(&b.id).await.unwrap(), Some(b.clone()));

        // Expiry: `expires_at <= now_ms` goes, counted exactly; the others stay.
        assert_eq!(store.delete_expired_sessions(0).await.unwrap(), 0);
        assert_eq!(store.delete_expired_sessions(2_999).await.unwrap(), 0);
        assert_eq!(store.delete_expired_sessions(3_000).await.unwrap(), 1);
        assert_eq!(store.session(&a.id).await.unwrap(), None);
        assert_eq!(store.session(&b.id).await.unwrap(), Some(b.clone()));
        assert_eq!(store.delete_expired_sessions(5_001).await.unwrap(), 2);
        assert_eq!(store.delete_expired_sessions(5_001).await.unwrap(), 0);
        for gone in [&a, &b, &c] {
            assert_eq!(store.session(&gone.id).await.unwrap(), None);
        }
        for kept in [&d, &odd] {
            assert_eq!(store.session(&kept.id).await.unwrap().as_ref(), Some(kept));
        }
        // A deleted session's id can be used again.
        let again = session(&a.id, q, Some("carol"), 7_000);
        store.create_session(&again).await.unwrap();
        assert_eq!(store.session(&a.id).await.unwrap(), Some(again));
        assert_eq!(store.delete_expired_sessions(i64::MAX).await.unwrap(), 3);
        assert_eq!(store.session(&d.id).await.unwrap(), None);
    }

    /// Integration info: upserts replace, lookups return the named integrations that have info
    /// in byte order, never another project's; deletes say whether there was one.
    async fn integration_infos(store: &dyn MetadataStore, p: &str, q: &str) {
        let info = |integration: &str, description: &str, guidance: &str| IntegrationInfo {
            integration: integration.into(),
            description: description.into(),
            guidance: guidance.into(),
            pitfalls: if guidance.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(
                    format!("{}_TOOL", integration.to_uppercase()),
                    vec![
                        format!("{guidance} (pitfall)"),
                        "a second \"one\"".to_string(),
                    ],
                )])
            },
        };
        // Empty input is a no-op.
        store.put_integration_info(p, &[]).await.unwrap();
        assert!(infos_of(store, p, &[]).await.is_empty());
        assert!(infos_of(store, p, &["gmail"]).await.is_empty());

        store
            .put_integration_info(
                p,
                &[
                    info("gmail", "Email.", "Search before sending."),
                    info("googledocs", "Documents.", ""),
                    info("google_drive", "", ""),
                    info("github", "Code.", "Prefer issues over PRs."),
                ],
            )
            .await
            .unwrap();
        store
            .put_integration_info(
                q,
                &[info("gmail", "q's email", "q"), info("slack", "q", "")],
            )
            .await
            .unwrap();

        // A subset, ordered by integration in byte order (`_` before `d`), unknown names skipped,
        // duplicates named once.
        assert_eq!(
            infos_of(
                store,
                p,
                &["googledocs", "gmail", "nope", "google_drive", "gmail"]
            )
            .await,
            [
                info("gmail", "Email.", "Search before sending."),
                info("google_drive", "", ""),
                info("googledocs", "Documents.", ""),
            ]
        );

        // An upsert replaces both texts (with empty ones too); of infos naming the same
        // integration the last wins; the others stay.
        store
            .put_integration_info(
                p,
                &[
                    info("gmail", "", ""),
                    info("google_drive", "Files.", "Cite the link."),
                    info("gmail", "Mail.", "Ask first."),
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            infos_of(store, p, &["github", "gmail", "google_drive"]).await,
            [
                info("github", "Code.", "Prefer issues over PRs."),
                info("gmail", "Mail.", "Ask first."),
                info("google_drive", "Files.", "Cite the link."),
            ]
        );

        // Another project's info is never returned nor changed.
        assert!(infos_of(store, p, &["slack"]).await.is_empty());
        assert_eq!(
            infos_of(store, q, &["gmail", "github", "slack"]).await,
            [info("gmail", "q's email", "q"), info("slack", "q", "")]
        );

        // Delete: true once, then false; another project's is not deleted from p.
        assert!(store.delete_integration_info(p, "github").await.unwrap());
        assert!(!store.delete_integration_info(p, "github").await.unwrap());
        assert!(!store.delete_integration_info(p, "slack").await.unwrap());
        assert!(!store.delete_integration_info(p, "nope").await.unwrap());
        assert!(infos_of(store, p, &["github"]).await.is_empty());
        assert_eq!(
            infos_of(store, q, &["slack"]).await,
            [info("slack", "q", "")]
        );
        assert_eq!(
            infos_of(store, p, &["github", "gmail"]).await,
            [info("gmail", "Mail.", "Ask first.")]
        );

        // Names and texts with quotes and unicode are data, not SQL.
        let odd = info(
            "x'); DROP TABLE integration_info; --",
            "naïve ✓",
            "\"quoted\"\nline",
        );
        store
            .put_integration_info(p, std::slice::from_ref(&odd))
            .await
            .unwrap();
        assert_eq!(
            infos_of(store, p, &[odd.integration.as_str()]).await,
            std::slice::from_ref(&odd)
        );
        assert!(
            store
                .delete_integration_info(p, &odd.integration)
                .await
                .unwrap()
        );
    }

    /// Stale marks: epochs grow per missed write, a clear needs the epoch it read, projects are
    /// listed apart.
    async fn stale_replicas(store: &dyn MetadataStore, p: &str, q: &str) {
        let mark = |project: &str, kind: &str, key: &str, shard: &str| StaleReplica {
            project_id: project.into(),
            kind: kind.into(),
            key: key.into(),
            shard_id: shard.into(),
            epoch: 0,
            marked_at: 0,
        };
        assert!(store.stale_replicas(Some(p)).await.unwrap().is_empty());
        store.mark_stale(&[]).await.unwrap();
        store
            .mark_stale(&[
                mark(p, STALE_INTEGRATION, "slack", "s2"),
                mark(p, STALE_SYNC, "sync-1", "s1"),
                mark(q, STALE_INTEGRATION, "slack", "s9"),
            ])
            .await
            .unwrap();
        let first_slack = store.stale_replicas(Some(p)).await.unwrap()[0].clone();
        store
            .mark_stale(&[mark(p, STALE_INTEGRATION, "slack", "s2")])
            .await
            .unwrap();
        let marks = store.stale_replicas(Some(p)).await.unwrap();
        let shape: Vec<(&str, &str, &str)> = marks
            .iter()
            .map(|m| (m.kind.as_str(), m.key.as_str(), m.shard_id.as_str()))
            .collect();
        assert_eq!(
            shape,
            [("integration", "slack", "s2"), ("sync", "sync-1", "s1")]
        );
        assert!(marks.iter().all(|m| m.marked_at > 0 && m.project_id == p));
        assert_eq!(store.stale_replicas(None).await.unwrap().len(), 3);
        // A second miss grew the epoch: a clear with the first one keeps the mark; the current
        // epoch clears it once.
        let slack = marks[0].clone();
        assert!(slack.epoch > first_slack.epoch, "{slack:?} {first_slack:?}");
        assert!(!store.clear_stale(&first_slack).await.unwrap());
        assert!(store.clear_stale(&slack).await.unwrap());
        assert!(!store.clear_stale(&slack).await.unwrap());
        // A mark cleared and missed again gets an epoch of its own: the old clear cannot take it.
        store
            .mark_stale(&[mark(p, STALE_INTEGRATION, "slack", "s2")])
            .await
            .unwrap();
        let again = store.stale_replicas(Some(p)).await.unwrap();
        assert!(again[0].epoch > slack.epoch);
        assert!(!store.clear_stale(&slack).await.unwrap());
        for m in store.stale_replicas(None).await.unwrap() {
            assert!(store.clear_stale(&m).await.unwrap());
        }
        assert!(store.stale_replicas(None).await.unwrap().is_empty());

        // Replicas on a shard, and one moved to another shard.
        store
            .place(p, "moving", &strings(&["m1", "m2"]))
            .await
            .unwrap();
        store
            .create_sync(&SyncRow {
                id: "sync-moving".into(),
                project_id: p.into(),
                source: "gdrive".into(),
                owner: "o".into(),
                shard_ids: strings(&["m2", "m3"]),
                generation: 0,
                records: 0,
                segments: 0,
                created_at_ms: 0,
                last_ingest_at_ms: None,
                fields: Vec::new(),
            })
            .await
            .unwrap();
        let on_m2 = store.replicas_on("m2").await.unwrap();
        let shape: Vec<(&str, &str, Vec<String>)> = on_m2
            .iter()
            .map(|r| (r.kind.as_str(), r.key.as_str(), r.shard_ids.clone()))
            .collect();
        assert_eq!(
            shape,
            [
                ("integration", "moving", strings(&["m1", "m2"])),
                ("sync", "sync-moving", strings(&["m2", "m3"])),
            ]
        );
        assert!(on_m2.iter().all(|r| r.project_id == p));
        assert!(store.replicas_on("m9").await.unwrap().is_empty());
        assert!(
            store
                .move_replica(p, STALE_INTEGRATION, "moving", "m2", "m4")
                .await
                .unwrap()
        );
        assert!(
            store
                .move_replica(p, STALE_SYNC, "sync-moving", "m2", "m4")
                .await
                .unwrap()
        );
        assert!(
            !store
                .move_replica(p, STALE_SYNC, "sync-moving", "m2", "m4")
                .await
                .unwrap()
        );
        // Never onto a shard that holds the key already.
        assert!(
            !store
                .move_replica(p, STALE_INTEGRATION, "moving", "m1", "m4")
                .await
                .unwrap()
        );
        assert!(
            !store
                .move_replica(p, STALE_SYNC, "sync-moving", "m3", "m4")
                .await
                .unwrap()
        );
        let moved = store.placements(p).await.unwrap();
        let moving = moved.iter().find(|m| m.integration == "moving").unwrap();
        assert_eq!(moving.shard_ids, strings(&["m1", "m4"]));
        let sync = store.get_sync(p, "sync-moving").await.unwrap().unwrap();
        assert_eq!(sync.shard_ids, strings(&["m4", "m3"]));
        assert!(store.replicas_on("m2").await.unwrap().is_empty());

        // Write fences: a completed write changes them, a recent pending entry withholds them, an
        // old one (an abandoned write) does not; a tool moving out counts for the integration it
        // leaves.
        let fence = |kind: &'static str, key: &'static str, since: i64| async move {
            store.write_fence(p, kind, key, since).await.unwrap()
        };
        let tool = |name: &str, integration: &str, hash: &str, stale: &[&str]| CatalogEntry {
            name: name.into(),
            integration: integration.into(),
            content_hash: hash.into(),
            stale: strings(stale),
        };
        let empty = fence(STALE_INTEGRATION, "fence", 0).await.unwrap();
        store
            .put_catalog_entries(p, &[tool("F1", "fence", "h1", &[])])
            .await
            .unwrap();
        let one = fence(STALE_INTEGRATION, "fence", 0).await.unwrap();
        assert_ne!(one, empty);
        assert_eq!(fence(STALE_INTEGRATION, "fence", 0).await.unwrap(), one);
        store
            .put_catalog_entries(p, &[tool("F1", "fenced", "", &["fence"])])
            .await
            .unwrap();
        assert_eq!(fence(STALE_INTEGRATION, "fence", 0).await, None);
        assert_eq!(fence(STALE_INTEGRATION, "fenced", 0).await, None);
        let later = i64::MAX / 2;
        assert!(fence(STALE_INTEGRATION, "fence", later).await.is_some());
        store
            .put_catalog_entries(p, &[tool("F1", "fenced", "h2", &[])])
            .await
            .unwrap();
        assert_eq!(fence(STALE_INTEGRATION, "fence", 0).await.unwrap(), empty);
        assert!(fence(STALE_INTEGRATION, "fenced", 0).await.is_some());
        store
            .delete_catalog_entries(p, &strings(&["F1"]))
            .await
            .unwrap();

        store
            .create_sync(&SyncRow {
                id: "sync-fence".into(),
                project_id: p.into(),
                source: "gdrive".into(),
                owner: "o".into(),
                shard_ids: strings(&["s1"]),
                generation: 0,
                records: 0,
                segments: 0,
                created_at_ms: 0,
                last_ingest_at_ms: None,
                fields: Vec::new(),
            })
            .await
            .unwrap();
        let before = fence(STALE_SYNC, "sync-fence", 0).await.unwrap();
        store
            .put_records(p, "sync-fence", &[rec("r1", 1, "h1", 1, &[])])
            .await
            .unwrap();
        let after = fence(STALE_SYNC, "sync-fence", 0).await.unwrap();
        assert_ne!(after, before);
        store
            .mark_records_pending(p, "sync-fence", &strings(&["r1"]))
            .await
            .unwrap();
        assert_eq!(fence(STALE_SYNC, "sync-fence", 0).await, None);
        assert!(fence(STALE_SYNC, "sync-fence", later).await.is_some());
    }

    /// Adds a replica; whether it did.
    async fn add(
        store: &dyn MetadataStore,
        project: &str,
        kind: &str,
        key: &str,
        to: &str,
    ) -> bool {
        store.add_replica(project, kind, key, to).await.unwrap()
    }

    /// The replicas of an integration or sync as the placements and syncs report them.
    async fn replicas_of(
        store: &dyn MetadataStore,
        project: &str,
        kind: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        if kind == STALE_SYNC {
            return store
                .get_sync(project, key)
                .await
                .unwrap()
                .map(|s| s.shard_ids);
        }
        store
            .placements(project)
            .await
            .unwrap()
            .into_iter()
            .find(|pl| pl.integration == key)
            .map(|pl| pl.shard_ids)
    }

    /// Membership changes: replicas added and removed (never the last one), every replica set
    /// listed, the content of lost keys forgotten, moves, drains and lost reports.
    async fn membership(store: &dyn MetadataStore, p: &str, q: &str) {
        let tools_before = store.catalog_size(p).await.unwrap();
        let q_placements = store.placements(q).await.unwrap();

        // Integrations: a new replica goes last; never a second copy on one shard; a missing key
        // (here or only in another project) gets none.
        store
            .place(p, "member", &strings(&["a1", "a2"]))
            .await
            .unwrap();
        assert!(add(store, p, STALE_INTEGRATION, "member", "a3").await);
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a1", "a2", "a3"]))
        );
        assert!(!add(store, p, STALE_INTEGRATION, "member", "a3").await);
        assert!(!add(store, p, STALE_INTEGRATION, "member", "a1").await);
        assert!(!add(store, p, STALE_INTEGRATION, "nope", "a4").await);
        assert_eq!(replicas_of(store, p, STALE_INTEGRATION, "nope").await, None);
        assert!(!add(store, q, STALE_INTEGRATION, "member", "a4").await);
        assert_eq!(store.placements(q).await.unwrap(), q_placements);
        // Another kind changes nothing.
        assert!(!add(store, p, "other", "member", "a4").await);
        assert!(
            !store
                .remove_replica(p, "other", "member", "a1")
                .await
                .unwrap()
        );
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a1", "a2", "a3"]))
        );
        // A removal keeps the order of the others; a replica added after one was removed still
        // goes last.
        assert!(
            store
                .remove_replica(p, STALE_INTEGRATION, "member", "a2")
                .await
                .unwrap()
        );
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a1", "a3"]))
        );
        assert!(add(store, p, STALE_INTEGRATION, "member", "a2").await);
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a1", "a3", "a2"]))
        );
        assert!(add(store, p, STALE_INTEGRATION, "member", "a0").await);
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a1", "a3", "a2", "a0"]))
        );
        // Not from a shard that holds none, nor from a missing key, nor the last replica.
        for (key, from) in [("member", "a9"), ("nope", "a1")] {
            assert!(
                !store
                    .remove_replica(p, STALE_INTEGRATION, key, from)
                    .await
                    .unwrap()
            );
        }
        for from in ["a1", "a0", "a3"] {
            assert!(
                store
                    .remove_replica(p, STALE_INTEGRATION, "member", from)
                    .await
                    .unwrap()
            );
        }
        assert!(
            !store
                .remove_replica(p, STALE_INTEGRATION, "member", "a2")
                .await
                .unwrap()
        );
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a2"]))
        );
        assert!(
            !store
                .remove_replica(q, STALE_INTEGRATION, "slack", "s9")
                .await
                .unwrap()
        );
        // The project must match: p's replicas of slack are not q's.
        assert!(
            !store
                .remove_replica(q, STALE_INTEGRATION, "slack", "s2")
                .await
                .unwrap()
        );
        assert_eq!(store.placements(q).await.unwrap(), q_placements);

        // Syncs: the same rules over their shard lists.
        let member_sync = store
            .create_sync(&SyncRow {
                id: "sync-member".into(),
                project_id: p.into(),
                source: "gdrive".into(),
                owner: "o".into(),
                shard_ids: strings(&["b1", "b2"]),
                generation: 0,
                records: 0,
                segments: 0,
                created_at_ms: 0,
                last_ingest_at_ms: None,
                fields: Vec::new(),
            })
            .await
            .unwrap();
        let sync_q = store.get_sync(q, "sync-q").await.unwrap().unwrap();
        assert!(add(store, p, STALE_SYNC, "sync-member", "b3").await);
        assert_eq!(
            replicas_of(store, p, STALE_SYNC, "sync-member").await,
            Some(strings(&["b1", "b2", "b3"]))
        );
        assert!(!add(store, p, STALE_SYNC, "sync-member", "b3").await);
        assert!(!add(store, p, STALE_SYNC, "sync-member", "b1").await);
        assert!(!add(store, p, STALE_SYNC, "nope", "b3").await);
        assert!(!add(store, p, STALE_SYNC, "sync-q", "b3").await);
        assert!(!add(store, q, STALE_SYNC, "sync-member", "b4").await);
        assert!(!add(store, p, "other", "sync-member", "b4").await);
        assert!(
            !store
                .remove_replica(p, "other", "sync-member", "b1")
                .await
                .unwrap()
        );
        assert_eq!(
            replicas_of(store, p, STALE_SYNC, "sync-member").await,
            Some(strings(&["b1", "b2", "b3"]))
        );
        assert!(
            store
                .remove_replica(p, STALE_SYNC, "sync-member", "b2")
                .await
                .unwrap()
        );
        assert_eq!(
            replicas_of(store, p, STALE_SYNC, "sync-member").await,
            Some(strings(&["b1", "b3"]))
        );
        for (project, key, from) in [
            (p, "sync-member", "b9"),
            (p, "nope", "b1"),
            (p, "sync-q", "s1"),
            (q, "sync-member", "b1"),
        ] {
            assert!(
                !store
                    .remove_replica(project, STALE_SYNC, key, from)
                    .await
                    .unwrap()
            );
        }
        assert!(
            store
                .remove_replica(p, STALE_SYNC, "sync-member", "b1")
                .await
                .unwrap()
        );
        assert!(
            !store
                .remove_replica(p, STALE_SYNC, "sync-member", "b3")
                .await
                .unwrap()
        );
        assert_eq!(
            store.get_sync(p, "sync-member").await.unwrap(),
            Some(SyncRow {
                shard_ids: strings(&["b3"]),
                ..member_sync.clone()
            })
        );
        assert_eq!(store.get_sync(q, "sync-q").await.unwrap(), Some(sync_q));

        // Every replica set: integrations in replica order, then syncs, by project, kind, key.
        let all = store.all_replicas().await.unwrap();
        let order: Vec<(&str, &str, &str)> = all
            .iter()
            .map(|r| (r.project_id.as_str(), r.kind.as_str(), r.key.as_str()))
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(order, sorted);
        for project in [p, q] {
            let mut expected: Vec<ReplicaSet> = store
                .placements(project)
                .await
                .unwrap()
                .into_iter()
                .map(|pl| ReplicaSet {
                    project_id: project.into(),
                    kind: STALE_INTEGRATION.into(),
                    key: pl.integration,
                    shard_ids: pl.shard_ids,
                })
                .collect();
            expected.extend(
                store
                    .list_syncs(project)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|s| ReplicaSet {
                        project_id: project.into(),
                        kind: STALE_SYNC.into(),
                        key: s.id,
                        shard_ids: s.shard_ids,
                    }),
            );
            expected.sort_by(|a, b| a.key.cmp(&b.key));
            expected.sort_by(|a, b| a.kind.cmp(&b.kind));
            let got: Vec<ReplicaSet> = all
                .iter()
                .filter(|r| r.project_id == project)
                .cloned()
                .collect();
            assert_eq!(got, expected, "{project}");
        }
        let set = |project: &str, kind: &str, key: &str, ids: &[&str]| ReplicaSet {
            project_id: project.into(),
            kind: kind.into(),
            key: key.into(),
            shard_ids: strings(ids),
        };
        for expected in [
            set(p, STALE_INTEGRATION, "member", &["a2"]),
            set(p, STALE_INTEGRATION, "slack", &["s2", "s1"]),
            set(p, STALE_SYNC, "sync-member", &["b3"]),
            set(q, STALE_INTEGRATION, "slack", &["s9"]),
            // A project with a sync and no placement.
            set(
                "00000000-0000-4000-8000-0000000000ee",
                STALE_SYNC,
                "sync-lone",
                &["s7"],
            ),
        ] {
            assert!(all.contains(&expected), "{expected:?} in {all:?}");
        }

        // Forgetting an integration's content drops its ledger entries in that project only.
        let tool = |name: &str, integration: &str| CatalogEntry {
            name: name.into(),
            integration: integration.into(),
            content_hash: format!("h-{name}"),
            stale: Vec::new(),
        };
        store
            .put_catalog_entries(
                p,
                &[
                    tool("L1", "lostint"),
                    tool("L2", "lostint"),
                    tool("K1", "keepint"),
                ],
            )
            .await
            .unwrap();
        store
            .put_catalog_entries(q, &[tool("L1", "lostint")])
            .await
            .unwrap();
        let q_tools = store.catalog_size(q).await.unwrap();
        store.forget_content(p, "other", "lostint").await.unwrap();
        assert_eq!(store.catalog_size(p).await.unwrap(), tools_before + 3);
        store
            .forget_content(p, STALE_INTEGRATION, "lostint")
            .await
            .unwrap();
        assert_eq!(
            store
                .catalog_entries(p, &strings(&["L1", "L2", "K1"]))
                .await
                .unwrap(),
            vec![tool("K1", "keepint")]
        );
        assert_eq!(store.catalog_size(p).await.unwrap(), tools_before + 1);
        assert_eq!(
            store.catalog_entries(q, &strings(&["L1"])).await.unwrap(),
            vec![tool("L1", "lostint")]
        );
        assert_eq!(store.catalog_size(q).await.unwrap(), q_tools);
        store
            .forget_content(p, STALE_INTEGRATION, "nope")
            .await
            .unwrap();
        // Its placement stays.
        assert_eq!(
            replicas_of(store, p, STALE_INTEGRATION, "member").await,
            Some(strings(&["a2"]))
        );

        // Forgetting a sync's content drops its records and their ACLs and zeroes its counts;
        // the sync (generation, shards, last ingest) and its group memberships stay.
        store
            .put_records(
                p,
                "sync-member",
                &[
                    rec("r1", 1, "h1", 3, &["anyone"]),
                    rec("r2", 1, "h2", 4, &["user:a@b.com"]),
                ],
            )
            .await
            .unwrap();
        store
            .mark_records_pending(p, "sync-member", &strings(&["r3"]))
            .await
            .unwrap();
        store
            .put_group_members(p, "sync-member", &[("eng".into(), strings(&["a@b.com"]))])
            .await
            .unwrap();
        let filled = store.get_sync(p, "sync-member").await.unwrap().unwrap();
        assert_eq!((filled.records, filled.segments), (2, 7));
        let sync_b = store.get_sync(p, "sync-b").await.unwrap().unwrap();
        let q_entries = entries(store, q, "sync-q", &["r1"]).await;
        store
            .forget_content(p, "other", "sync-member")
            .await
            .unwrap();
        assert_eq!(
            store.get_sync(p, "sync-member").await.unwrap(),
            Some(filled.clone())
        );
        store
            .forget_content(p, STALE_SYNC, "sync-member")
            .await
            .unwrap();
        assert_eq!(
            store.get_sync(p, "sync-member").await.unwrap(),
            Some(SyncRow {
                records: 0,
                segments: 0,
                ..filled.clone()
            })
        );
        assert!(
            entries(store, p, "sync-member", &["r1", "r2", "r3"])
                .await
                .is_empty()
        );
        assert_eq!(readable(store, p, "sync-member", &["anyone"]).await, 0);
        assert_eq!(
            groups_of(store, p, "sync-member", &["a@b.com"]).await,
            ["eng"]
        );
        // A record marked pending or written again comes back without its old principals.
        store
            .mark_records_pending(p, "sync-member", &strings(&["r2"]))
            .await
            .unwrap();
        assert_eq!(
            entries(store, p, "sync-member", &["r2"]).await,
            vec![rec("r2", 0, "", 0, &[])]
        );
        store
            .put_records(p, "sync-member", &[rec("r1", 2, "h1", 3, &[])])
            .await
            .unwrap();
        assert_eq!(
            entries(store, p, "sync-member", &["r1"]).await,
            vec![rec("r1", 2, "h1", 3, &[])]
        );
        assert_eq!(readable(store, p, "sync-member", &["anyone"]).await, 0);
        assert_eq!(totals(store, p, "sync-member").await.1, 1);
        // Other syncs, another project's sync named from p, and missing syncs are left alone.
        store.forget_content(p, STALE_SYNC, "sync-q").await.unwrap();
        store.forget_content(p, STALE_SYNC, "nope").await.unwrap();
        assert_eq!(
            store.get_sync(p, "sync-b").await.unwrap(),
            Some(sync_b.clone())
        );
        assert_eq!(entries(store, q, "sync-q", &["r1"]).await, q_entries);
        assert_eq!(totals(store, q, "sync-q").await, (1, 1, 7));

        // Moves: one per key; progress recorded; listed by project, kind, key.
        assert!(store.replica_moves().await.unwrap().is_empty());
        let mv = |project: &str, kind: &str, key: &str, from: &str, to: &str| ReplicaMove {
            project_id: project.into(),
            kind: kind.into(),
            key: key.into(),
            from_shard: from.into(),
            to_shard: to.into(),
            reason: "drain".into(),
            created_at: 100,
            added_at: None,
            removed_at: None,
        };
        let odd = "x'); DROP TABLE replica_moves; --";
        let first = mv(p, STALE_INTEGRATION, "member", "a2", "a5");
        assert!(store.put_move(&first).await.unwrap());
        assert!(
            !store
                .put_move(&ReplicaMove {
                    reason: "rebalance".into(),
                    created_at: 200,
                    ..mv(p, STALE_INTEGRATION, "member", "a2", "a6")
                })
                .await
                .unwrap()
        );
        let others = [
            mv(q, STALE_INTEGRATION, "member", "c1", "c2"),
            ReplicaMove {
                reason: "rebalance".into(),
                ..mv(p, STALE_SYNC, "sync-member", "b3", "b4")
            },
            mv(p, STALE_INTEGRATION, "alpha", "a1", "a2"),
            mv(p, STALE_SYNC, "member", "d1", "d2"),
            mv(p, STALE_INTEGRATION, odd, "e1", "e2"),
        ];
        for m in &others {
            assert!(store.put_move(m).await.unwrap());
        }
        let keys = |moves: &[ReplicaMove]| -> Vec<(String, String, String)> {
            moves
                .iter()
                .map(|m| (m.project_id.clone(), m.kind.clone(), m.key.clone()))
                .collect()
        };
        let moves = store.replica_moves().await.unwrap();
        let mut expected = vec![first.clone()];
        expected.extend(others.iter().cloned());
        expected.sort_by(|a, b| {
            (&a.project_id, &a.kind, &a.key).cmp(&(&b.project_id, &b.kind, &b.key))
        });
        assert_eq!(moves, expected);
        assert_eq!(
            keys(&moves)
                .iter()
                .map(|(p, k, key)| (p.as_str(), k.as_str(), key.as_str()))
                .collect::<Vec<_>>(),
            [
                (p, STALE_INTEGRATION, "alpha"),
                (p, STALE_INTEGRATION, "member"),
                (p, STALE_INTEGRATION, odd),
                (p, STALE_SYNC, "member"),
                (p, STALE_SYNC, "sync-member"),
                (q, STALE_INTEGRATION, "member"),
            ]
        );
        // Progress: only the times change.
        let added = ReplicaMove {
            added_at: Some(1_700_000_000_123),
            ..first.clone()
        };
        assert!(store.update_move(&added).await.unwrap());
        let removed = ReplicaMove {
            removed_at: Some(1_700_000_000_456),
            ..added.clone()
        };
        assert!(
            store
                .update_move(&ReplicaMove {
                    from_shard: "zz".into(),
                    to_shard: "zz".into(),
                    reason: "zz".into(),
                    created_at: 1,
                    ..removed.clone()
                })
                .await
                .unwrap()
        );
        let find = |moves: Vec<ReplicaMove>, kind: &str, key: &str| {
            moves
                .into_iter()
                .find(|m| m.project_id == p && m.kind == kind && m.key == key)
        };
        assert_eq!(
            find(
                store.replica_moves().await.unwrap(),
                STALE_INTEGRATION,
                "member"
            ),
            Some(removed.clone())
        );
        assert!(store.update_move(&first).await.unwrap());
        assert_eq!(
            find(
                store.replica_moves().await.unwrap(),
                STALE_INTEGRATION,
                "member"
            ),
            Some(first.clone())
        );
        // A missing move is not updated, nor created.
        let missing = ReplicaMove {
            added_at: Some(5),
            ..mv(p, STALE_INTEGRATION, "missing", "a1", "a2")
        };
        assert!(!store.update_move(&missing).await.unwrap());
        assert_eq!(store.replica_moves().await.unwrap().len(), 6);
        // Deleted (twice is fine); the key can then have a new move. Keys differing by project
        // or kind are other moves.
        store
            .delete_move(p, STALE_INTEGRATION, "member")
            .await
            .unwrap();
        store
            .delete_move(p, STALE_INTEGRATION, "member")
            .await
            .unwrap();
        store
            .delete_move(p, STALE_INTEGRATION, "missing")
            .await
            .unwrap();
        assert_eq!(
            find(
                store.replica_moves().await.unwrap(),
                STALE_INTEGRATION,
                "member"
            ),
            None
        );
        assert_eq!(
            keys(&store.replica_moves().await.unwrap()),
            keys(&expected)
                .into_iter()
                .filter(|(pr, k, key)| !(pr == p && k == STALE_INTEGRATION && key == "member"))
                .collect::<Vec<_>>()
        );
        assert!(
            store
                .put_move(&mv(p, STALE_INTEGRATION, "member", "a2", "a6"))
                .await
                .unwrap()
        );
        for m in store.replica_moves().await.unwrap() {
            store
                .delete_move(&m.project_id, &m.kind, &m.key)
                .await
                .unwrap();
        }
        assert!(store.replica_moves().await.unwrap().is_empty());

        // Drains: by shard id; a second drain of a shard updates it.
        assert!(store.drains().await.unwrap().is_empty());
        let drain = |shard: &str, lost: bool, at: i64| ShardDrain {
            shard_id: shard.into(),
            lost,
            requested_at: at,
        };
        store.put_drain(&drain("d2", false, 10)).await.unwrap();
        store.put_drain(&drain("d1", true, 20)).await.unwrap();
        store.put_drain(&drain("d3", false, 30)).await.unwrap();
        assert_eq!(
            store.drains().await.unwrap(),
            [
                drain("d1", true, 20),
                drain("d2", false, 10),
                drain("d3", false, 30)
            ]
        );
        store.put_drain(&drain("d2", true, 40)).await.unwrap();
        store.put_drain(&drain("d1", false, 50)).await.unwrap();
        assert_eq!(
            store.drains().await.unwrap(),
            [
                drain("d1", false, 50),
                drain("d2", true, 40),
                drain("d3", false, 30)
            ]
        );
        assert!(store.delete_drain("d2").await.unwrap());
        assert!(!store.delete_drain("d2").await.unwrap());
        assert!(!store.delete_drain("nope").await.unwrap());
        assert_eq!(
            store.drains().await.unwrap(),
            [drain("d1", false, 50), drain("d3", false, 30)]
        );
        assert!(store.delete_drain("d1").await.unwrap());
        assert!(store.delete_drain("d3").await.unwrap());
        assert!(store.drains().await.unwrap().is_empty());

        // Lost reports: one per (project, kind, key), the newer replacing the older; a clear
        // counts them.
        assert!(store.lost_replicas().await.unwrap().is_empty());
        assert_eq!(store.clear_lost().await.unwrap(), 0);
        store.record_lost(&[]).await.unwrap();
        let lost = |project: &str, kind: &str, key: &str, shard: &str, at: i64| LostReplica {
            project_id: project.into(),
            kind: kind.into(),
            key: key.into(),
            shard_id: shard.into(),
            lost_at: at,
        };
        store
            .record_lost(&[
                lost(q, STALE_INTEGRATION, "k", "s1", 10),
                lost(p, STALE_SYNC, "k", "s2", 20),
                lost(p, STALE_INTEGRATION, "k", "s3", 30),
                lost(p, STALE_INTEGRATION, "j", "s4", 40),
            ])
            .await
            .unwrap();
        assert_eq!(
            store.lost_replicas().await.unwrap(),
            [
                lost(p, STALE_INTEGRATION, "j", "s4", 40),
                lost(p, STALE_INTEGRATION, "k", "s3", 30),
                lost(p, STALE_SYNC, "k", "s2", 20),
                lost(q, STALE_INTEGRATION, "k", "s1", 10),
            ]
        );
        // A newer report replaces the older, also within one call (the last wins).
        store
            .record_lost(&[
                lost(p, STALE_INTEGRATION, "k", "s5", 50),
                lost(p, STALE_SYNC, "k", "s6", 60),
                lost(p, STALE_SYNC, "k", "s7", 70),
            ])
            .await
            .unwrap();
        assert_eq!(
            store.lost_replicas().await.unwrap(),
            [
                lost(p, STALE_INTEGRATION, "j", "s4", 40),
                lost(p, STALE_INTEGRATION, "k", "s5", 50),
                lost(p, STALE_SYNC, "k", "s7", 70),
                lost(q, STALE_INTEGRATION, "k", "s1", 10),
            ]
        );
        assert_eq!(store.clear_lost().await.unwrap(), 4);
        assert!(store.lost_replicas().await.unwrap().is_empty());
        assert_eq!(store.clear_lost().await.unwrap(), 0);

        // The ledger of p is as it was (the on-disk test counts it after the suite).
        store
            .delete_catalog_entries(p, &strings(&["K1"]))
            .await
            .unwrap();
        assert_eq!(store.catalog_size(p).await.unwrap(), tools_before);
    }

    /// Feedback: a repeat replaces, the newest `keep` stay, projects and kinds are isolated;
    /// ranking models: versions count up per project and kind, old ones are pruned.
    async fn feedback(store: &dyn MetadataStore, p: &str, q: &str) {
        assert!(store.feedback(p, "tools", 10).await.unwrap().is_empty());
        assert_eq!(
            store
                .put_feedback(p, "tools", "r1", "{\"a\":1}", 3)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            store
                .put_feedback(p, "tools", "r1", "{\"a\":2}", 3)
                .await
                .unwrap(),
            1
        );
        for (i, r) in ["r2", "r3", "r4"].iter().enumerate() {
            // Distinct times, so "newest" is well defined.
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            let kept = store
                .put_feedback(p, "tools", r, &format!("{{\"n\":{i}}}"), 3)
                .await
                .unwrap();
            assert_eq!(kept, (i as u64 + 2).min(3));
        }
        assert_eq!(
            store.feedback(p, "tools", 10).await.unwrap(),
            ["{\"n\":2}", "{\"n\":1}", "{\"n\":0}"]
        );
        assert_eq!(store.feedback(p, "tools", 1).await.unwrap(), ["{\"n\":2}"]);
        assert!(store.feedback(q, "tools", 10).await.unwrap().is_empty());
        assert!(store.feedback(p, "context", 10).await.unwrap().is_empty());
        store
            .put_feedback(q, "context", "r1", "{}", 3)
            .await
            .unwrap();
        assert_eq!(store.feedback(p, "tools", 10).await.unwrap().len(), 3);

        let before = now_ms();
        assert_eq!(store.ranking_model(p, "tools").await.unwrap(), None);
        let first = store
            .put_ranking_model(p, "tools", "{\"w\":1}", 3)
            .await
            .unwrap();
        assert_eq!((first.version, first.examples), (1, 3));
        assert!(first.created_at_ms >= before);
        assert_eq!(store.ranking_model(p, "tools").await.unwrap(), Some(first));
        let mut newest = None;
        for i in 0..RANKING_MODEL_VERSIONS_KEPT + 2 {
            newest = Some(
                store
                    .put_ranking_model(p, "tools", &format!("{{\"w\":{i}}}"), 4)
                    .await
                    .unwrap(),
            );
        }
        let newest = newest.unwrap();
        assert_eq!(newest.version, RANKING_MODEL_VERSIONS_KEPT + 3);
        assert_eq!(
            newest.params,
            format!("{{\"w\":{}}}", RANKING_MODEL_VERSIONS_KEPT + 1)
        );
        assert_eq!(store.ranking_model(p, "tools").await.unwrap(), Some(newest));
        assert_eq!(store.ranking_model(p, "context").await.unwrap(), None);
        assert_eq!(store.ranking_model(q, "tools").await.unwrap(), None);
        let other = store.put_ranking_model(q, "tools", "{}", 1).await.unwrap();
        assert_eq!(other.version, 1, "versions count per project");
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn rec(
        id: &str,
        generation: u64,
        hash: &str,
        segments: u64,
        principals: &[&str],
    ) -> RecordEntry {
        RecordEntry {
            record_id: id.into(),
            generation,
            content_hash: hash.into(),
            segments,
            principals: strings(principals),
        }
    }

    async fn entries(
        store: &dyn MetadataStore,
        p: &str,
        s: &str,
        ids: &[&str],
    ) -> Vec<RecordEntry> {
        let mut got = store.record_entries(p, s, &strings(ids)).await.unwrap();
        got.sort_by(|a, b| a.record_id.cmp(&b.record_id));
        got
    }

    async fn totals(store: &dyn MetadataStore, p: &str, s: &str) -> (u64, u64, u64) {
        let sync = store.get_sync(p, s).await.unwrap().unwrap();
        (sync.generation, sync.records, sync.segments)
    }

    async fn readable(store: &dyn MetadataStore, p: &str, s: &str, principals: &[&str]) -> u64 {
        store
            .readable_segments(p, s, &strings(principals))
            .await
            .unwrap()
    }

    async fn groups_of(
        store: &dyn MetadataStore,
        p: &str,
        s: &str,
        members: &[&str],
    ) -> Vec<String> {
        store.member_groups(p, s, &strings(members)).await.unwrap()
    }

    async fn infos_of(
        store: &dyn MetadataStore,
        p: &str,
        integrations: &[&str],
    ) -> Vec<IntegrationInfo> {
        store
            .integration_info(p, &strings(integrations))
            .await
            .unwrap()
    }

    fn is_not_found<T: std::fmt::Debug>(result: Result<T>) -> bool {
        matches!(result, Err(StoreError::NotFound(_)))
    }

    /// Context search: syncs, record entries and ACLs, groups.
    async fn context(store: &dyn MetadataStore, p: &str, q: &str) {
        let sync = |id: &str, project: &str, source: &str| SyncRow {
            id: id.into(),
            project_id: project.into(),
            source: source.into(),
            owner: "owner@b.com".into(),
            shard_ids: strings(&["s2", "s1"]),
            // Ignored by create_sync: counters start at 0.
            generation: 7,
            records: 9,
            segments: 9,
            created_at_ms: 0,
            last_ingest_at_ms: Some(1),
            fields: vec![agentsearch_common::shard::FieldDecl {
                name: "size".into(),
                kind: "numeric".into(),
            }],
        };

        // Create: counters at 0, created now; the first writer wins.
        assert!(store.list_syncs(p).await.unwrap().is_empty());
        let sets_before = store.replica_sets().await.unwrap();
        let b = store
            .create_sync(&sync("sync-b", p, "gdrive"))
            .await
            .unwrap();
        assert_eq!(
            (
                b.id.as_str(),
                b.project_id.as_str(),
                b.source.as_str(),
                b.owner.as_str()
            ),
            ("sync-b", p, "gdrive", "owner@b.com")
        );
        assert_eq!(b.shard_ids, ["s2", "s1"]);
        assert_eq!(b.fields, sync("sync-b", p, "gdrive").fields);
        assert_eq!(
            (b.generation, b.records, b.segments, b.last_ingest_at_ms),
            (0, 0, 0, None)
        );
        assert!(b.created_at_ms > 1_600_000_000_000);
        let again = SyncRow {
            source: "slack".into(),
            owner: "other@b.com".into(),
            shard_ids: strings(&["s3"]),
            fields: Vec::new(),
            ..sync("sync-b", p, "slack")
        };
        assert_eq!(store.create_sync(&again).await.unwrap(), b);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let a = store
            .create_sync(&sync("sync-a", p, "slack"))
            .await
            .unwrap();
        assert!(a.created_at_ms > b.created_at_ms);
        // Ordered by creation, then id.
        assert_eq!(
            store.list_syncs(p).await.unwrap(),
            vec![b.clone(), a.clone()]
        );
        assert_eq!(store.get_sync(p, "sync-b").await.unwrap(), Some(b.clone()));
        assert_eq!(store.get_sync(p, "nope").await.unwrap(), None);

        // create_sync creates a missing project.
        let r = "00000000-0000-4000-8000-0000000000dd";
        let in_r = store
            .create_sync(&sync("sync-r", r, "gdrive"))
            .await
            .unwrap();
        assert_eq!(store.list_syncs(r).await.unwrap(), vec![in_r]);

        // A sync's shards count among the replica sets.
        let lone = SyncRow {
            shard_ids: strings(&["s7"]),
            ..sync(
                "sync-lone",
                "00000000-0000-4000-8000-0000000000ee",
                "gdrive",
            )
        };
        store.create_sync(&lone).await.unwrap();
        let mut expected = sets_before.clone();
        expected.push(strings(&["s1", "s2"]));
        expected.push(strings(&["s7"]));
        expected.sort();
        expected.dedup();
        assert_eq!(store.replica_sets().await.unwrap(), expected);

        // Another project's sync is invisible and untouchable.
        let in_q = store.create_sync(&sync("sync-q", q, "jira")).await.unwrap();
        assert!(matches!(
            store.create_sync(&sync("sync-q", p, "jira")).await,
            Err(StoreError::SyncIdTaken(_))
        ));
        assert_eq!(store.list_syncs(q).await.unwrap(), vec![in_q.clone()]);
        assert_eq!(store.get_sync(p, "sync-q").await.unwrap(), None);
        assert_eq!(store.get_sync(q, "sync-b").await.unwrap(), None);
        assert_eq!(
            store
                .put_records(q, "sync-q", &[rec("r1", 1, "hq", 7, &["anyone"])])
                .await
                .unwrap(),
            1
        );
        store
            .put_group_members(q, "sync-q", &[("eng".into(), strings(&["a@b.com"]))])
            .await
            .unwrap();
        assert!(entries(store, p, "sync-q", &["r1"]).await.is_empty());
        assert_eq!(readable(store, p, "sync-q", &["anyone"]).await, 0);
        assert!(groups_of(store, p, "sync-q", &["a@b.com"]).await.is_empty());
        assert!(is_not_found(
            store
                .put_records(p, "sync-q", &[rec("r1", 1, "hp", 1, &[])])
                .await
        ));
        assert!(is_not_found(store.put_records(p, "sync-q", &[]).await));
        assert!(is_not_found(
            store
                .mark_records_pending(p, "sync-q", &strings(&["r1"]))
                .await
        ));
        assert!(is_not_found(
            store.delete_records(p, "sync-q", &strings(&["r1"])).await
        ));
        assert!(is_not_found(store.delete_records(p, "sync-q", &[]).await));
        assert!(is_not_found(
            store
                .put_group_members(p, "sync-q", &[("eng".into(), Vec::new())])
                .await
        ));
        assert!(is_not_found(store.put_records(p, "nope", &[]).await));
        assert!(matches!(
            agentsearch_common::Error::from(store.put_records(p, "nope", &[]).await.unwrap_err()),
            agentsearch_common::Error::NotFound(_)
        ));
        assert_eq!(
            entries(store, q, "sync-q", &["r1"]).await,
            vec![rec("r1", 1, "hq", 7, &["anyone"])]
        );
        assert_eq!(totals(store, q, "sync-q").await, (1, 1, 7));
        assert_eq!(groups_of(store, q, "sync-q", &["a@b.com"]).await, ["eng"]);

        // Records: an empty write changes nothing; a write bumps the generation and the totals.
        assert_eq!(store.put_records(p, "sync-b", &[]).await.unwrap(), 0);
        assert_eq!(store.get_sync(p, "sync-b").await.unwrap(), Some(b.clone()));
        assert!(entries(store, p, "sync-b", &[]).await.is_empty());
        let g = store
            .put_records(
                p,
                "sync-b",
                &[
                    rec("r1", 1, "h1", 3, &["user:a@b.com", "group:eng"]),
                    rec("r2", 1, "h2", 5, &["domain:b.com"]),
                    rec("r3", 1, "h3", 2, &["anyone"]),
                ],
            )
            .await
            .unwrap();
        assert_eq!(g, 1);
        let after = store.get_sync(p, "sync-b").await.unwrap().unwrap();
        assert_eq!(
            (after.generation, after.records, after.segments),
            (1, 3, 10)
        );
        assert!(
            after
                .last_ingest_at_ms
                .is_some_and(|t| t >= b.created_at_ms)
        );
        assert_eq!(
            entries(store, p, "sync-b", &["r1", "r2", "zz"]).await,
            vec![
                rec("r1", 1, "h1", 3, &["group:eng", "user:a@b.com"]),
                rec("r2", 1, "h2", 5, &["domain:b.com"]),
            ]
        );
        // Same record ids in another sync are other records.
        assert!(entries(store, p, "sync-a", &["r1"]).await.is_empty());

        // Replacing an entry replaces its principals (duplicates collapse).
        let g = store
            .put_records(
                p,
                "sync-b",
                &[rec(
                    "r1",
                    2,
                    "h1b",
                    4,
                    &["user:c@b.com", "group:ops", "user:c@b.com"],
                )],
            )
            .await
            .unwrap();
        assert_eq!(g, 2);
        assert_eq!(
            entries(store, p, "sync-b", &["r1"]).await,
            vec![rec("r1", 2, "h1b", 4, &["group:ops", "user:c@b.com"])]
        );
        assert_eq!(totals(store, p, "sync-b").await, (2, 3, 11));
        // Several entries of one record in a batch: the last wins.
        let g = store
            .put_records(
                p,
                "sync-b",
                &[
                    rec("r4", 3, "x", 1, &["user:z@b.com"]),
                    rec("r4", 3, "y", 2, &["anyone"]),
                ],
            )
            .await
            .unwrap();
        assert_eq!(g, 3);
        assert_eq!(
            entries(store, p, "sync-b", &["r4"]).await,
            vec![rec("r4", 3, "y", 2, &["anyone"])]
        );
        assert_eq!(totals(store, p, "sync-b").await, (3, 4, 13));
        assert_eq!(store.put_records(p, "sync-b", &[]).await.unwrap(), 3);
        // A record with an empty ACL.
        assert_eq!(
            store
                .put_records(p, "sync-b", &[rec("r5", 4, "h5", 6, &[])])
                .await
                .unwrap(),
            4
        );
        assert_eq!(
            entries(store, p, "sync-b", &["r5"]).await,
            vec![rec("r5", 4, "h5", 6, &[])]
        );
        assert_eq!(totals(store, p, "sync-b").await, (4, 5, 19));

        // Pending: an existing entry's hash is cleared, nothing else changes; a record without an
        // entry gets a pending one of generation 0 (known, so deletable, but never counted).
        store
            .mark_records_pending(p, "sync-b", &strings(&["r2", "p1", "p1"]))
            .await
            .unwrap();
        store.mark_records_pending(p, "sync-b", &[]).await.unwrap();
        assert_eq!(
            entries(store, p, "sync-b", &["r1", "r2", "p1"]).await,
            vec![
                rec("p1", 0, "", 0, &[]),
                rec("r1", 2, "h1b", 4, &["group:ops", "user:c@b.com"]),
                rec("r2", 1, "", 5, &["domain:b.com"]),
            ]
        );
        assert_eq!(totals(store, p, "sync-b").await, (4, 5, 19));
        // Marking a pending entry again keeps it pending at generation 0.
        store
            .mark_records_pending(p, "sync-b", &strings(&["p1"]))
            .await
            .unwrap();
        assert_eq!(
            entries(store, p, "sync-b", &["p1"]).await,
            vec![rec("p1", 0, "", 0, &[])]
        );

        // Readable segments: r1 = 4 (group:ops, user:c@b.com), r2 = 5 (domain:b.com, pending),
        // r3 = 2 (anyone), r4 = 2 (anyone), r5 = 6 (nobody).
        assert_eq!(readable(store, p, "sync-b", &["anyone"]).await, 4);
        assert_eq!(
            readable(store, p, "sync-b", &["anyone", "domain:b.com"]).await,
            9
        );
        assert_eq!(
            readable(store, p, "sync-b", &["user:c@b.com", "group:ops", "anyone"]).await,
            8
        );
        assert_eq!(
            readable(store, p, "sync-b", &["user:a@b.com", "group:eng"]).await,
            0
        );
        assert_eq!(
            readable(
                store,
                p,
                "sync-b",
                &["anyone", "domain:b.com", "group:ops", "user:x"]
            )
            .await,
            13
        );
        assert_eq!(readable(store, p, "sync-b", &[]).await, 0);
        assert_eq!(readable(store, p, "sync-a", &["anyone"]).await, 0);
        assert_eq!(readable(store, p, "nope", &["anyone"]).await, 0);

        // Groups: replace, remove, per sync.
        store
            .put_group_members(
                p,
                "sync-b",
                &[
                    ("eng".into(), strings(&["a@b.com", "c@b.com"])),
                    ("ops".into(), strings(&["c@b.com", "c@b.com"])),
                    ("sales".into(), strings(&["d@b.com"])),
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            groups_of(store, p, "sync-b", &["c@b.com"]).await,
            ["eng", "ops"]
        );
        assert_eq!(
            groups_of(
                store,
                p,
                "sync-b",
                &["a@b.com", "c@b.com", "d@b.com", "x@b.com"]
            )
            .await,
            ["eng", "ops", "sales"]
        );
        assert!(groups_of(store, p, "sync-b", &["x@b.com"]).await.is_empty());
        assert!(groups_of(store, p, "sync-b", &[]).await.is_empty());
        store
            .put_group_members(
                p,
                "sync-b",
                &[
                    ("eng".into(), strings(&["d@b.com"])),
                    ("ops".into(), Vec::new()),
                ],
            )
            .await
            .unwrap();
        store.put_group_members(p, "sync-b", &[]).await.unwrap();
        assert!(
            groups_of(store, p, "sync-b", &["c@b.com", "a@b.com"])
                .await
                .is_empty()
        );
        assert_eq!(
            groups_of(store, p, "sync-b", &["d@b.com"]).await,
            ["eng", "sales"]
        );
        store
            .put_group_members(p, "sync-a", &[("eng".into(), strings(&["c@b.com"]))])
            .await
            .unwrap();
        assert!(groups_of(store, p, "sync-b", &["c@b.com"]).await.is_empty());
        assert_eq!(groups_of(store, p, "sync-a", &["c@b.com"]).await, ["eng"]);
        // The last entry of a group wins.
        store
            .put_group_members(
                p,
                "sync-a",
                &[
                    ("eng".into(), strings(&["e@b.com"])),
                    ("eng".into(), strings(&["f@b.com"])),
                ],
            )
            .await
            .unwrap();
        assert!(
            groups_of(store, p, "sync-a", &["c@b.com", "e@b.com"])
                .await
                .is_empty()
        );
        assert_eq!(groups_of(store, p, "sync-a", &["f@b.com"]).await, ["eng"]);
        // Group memberships do not touch the generation.
        assert_eq!(totals(store, p, "sync-b").await, (4, 5, 19));

        // Delete: counts what existed, recomputes totals, bumps only when something went.
        assert_eq!(
            store
                .delete_records(p, "sync-b", &strings(&["r3", "r3", "zz"]))
                .await
                .unwrap(),
            (1, 5)
        );
        assert_eq!(totals(store, p, "sync-b").await, (5, 4, 17));
        assert!(entries(store, p, "sync-b", &["r3"]).await.is_empty());
        assert_eq!(readable(store, p, "sync-b", &["anyone"]).await, 2);
        assert_eq!(
            store
                .delete_records(p, "sync-b", &strings(&["zz"]))
                .await
                .unwrap(),
            (0, 5)
        );
        assert_eq!(
            store.delete_records(p, "sync-b", &[]).await.unwrap(),
            (0, 5)
        );
        // A deleted record comes back without its old principals.
        store
            .put_records(p, "sync-b", &[rec("r3", 6, "h3b", 2, &["user:c@b.com"])])
            .await
            .unwrap();
        assert_eq!(readable(store, p, "sync-b", &["anyone"]).await, 2);
        assert_eq!(
            entries(store, p, "sync-b", &["r3"]).await,
            vec![rec("r3", 6, "h3b", 2, &["user:c@b.com"])]
        );
        assert_eq!(totals(store, p, "sync-b").await, (6, 5, 19));

        // Ids with quotes and unicode are data, not SQL.
        let odd = "x'); DROP TABLE sync_records; --";
        let uni = "naïve ✓ \"q\" 記録";
        let principal = "user:o'brien@b.com";
        assert_eq!(
            store
                .put_records(
                    p,
                    "sync-b",
                    &[
                        rec(odd, 7, "h'", 1, &[principal]),
                        rec(uni, 7, "✓", 2, &["group:g'1 ✓"])
                    ],
                )
                .await
                .unwrap(),
            7
        );
        assert_eq!(
            entries(store, p, "sync-b", &[odd, uni]).await,
            vec![
                rec(uni, 7, "✓", 2, &["group:g'1 ✓"]),
                rec(odd, 7, "h'", 1, &[principal])
            ]
        );
        assert_eq!(
            readable(store, p, "sync-b", &[principal, "group:g'1 ✓"]).await,
            3
        );
        store
            .put_group_members(p, "sync-b", &[("g'1 ✓".into(), strings(&["ü'@b.com"]))])
            .await
            .unwrap();
        assert_eq!(
            groups_of(store, p, "sync-b", &["ü'@b.com"]).await,
            ["g'1 ✓"]
        );
        store
            .mark_records_pending(p, "sync-b", &strings(&[uni]))
            .await
            .unwrap();
        assert_eq!(
            entries(store, p, "sync-b", &[uni]).await[0].content_hash,
            ""
        );
        assert_eq!(
            store
                .delete_records(p, "sync-b", &strings(&[odd, uni]))
                .await
                .unwrap(),
            (2, 8)
        );
        assert_eq!(totals(store, p, "sync-b").await, (8, 5, 19));

        // A large batch: 1,500 records in one write, read, marked, grouped and deleted.
        let batch: Vec<RecordEntry> = (0..1500u64)
            .map(|i| {
                let principal = if i % 2 == 0 {
                    "anyone".to_string()
                } else {
                    format!("user:u{i}@b.com")
                };
                rec(
                    &format!("bulk-{i:04}"),
                    1,
                    &format!("h{i}"),
                    1 + i % 3,
                    &[principal.as_str()],
                )
            })
            .collect();
        let ids: Vec<String> = batch.iter().map(|e| e.record_id.clone()).collect();
        let total: u64 = batch.iter().map(|e| e.segments).sum();
        let even: u64 = batch.iter().step_by(2).map(|e| e.segments).sum();
        assert_eq!(store.put_records(p, "sync-a", &batch).await.unwrap(), 1);
        assert_eq!(totals(store, p, "sync-a").await, (1, 1500, total));
        let mut asked = ids.clone();
        asked.push("missing".into());
        let mut got = store.record_entries(p, "sync-a", &asked).await.unwrap();
        got.sort_by(|a, b| a.record_id.cmp(&b.record_id));
        assert_eq!(got, batch);
        let mut everyone: Vec<String> = (0..1500u64)
            .filter(|i| i % 2 == 1)
            .map(|i| format!("user:u{i}@b.com"))
            .collect();
        assert_eq!(
            store
                .readable_segments(p, "sync-a", &everyone)
                .await
                .unwrap(),
            total - even
        );
        everyone.push("anyone".into());
        assert_eq!(
            store
                .readable_segments(p, "sync-a", &everyone)
                .await
                .unwrap(),
            total
        );
        assert_eq!(readable(store, p, "sync-a", &["anyone"]).await, even);
        store.mark_records_pending(p, "sync-a", &ids).await.unwrap();
        let got = store.record_entries(p, "sync-a", &ids).await.unwrap();
        assert_eq!(got.len(), 1500);
        assert!(got.iter().all(|e| e.content_hash.is_empty()));
        let members: Vec<String> = (0..1500).map(|i| format!("m{i}@b.com")).collect();
        store
            .put_group_members(p, "sync-a", &[("all".into(), members.clone())])
            .await
            .unwrap();
        assert_eq!(
            store.member_groups(p, "sync-a", &members).await.unwrap(),
            ["all"]
        );
        // Memberships across syncs, in one call, agree with the per-sync lookups; syncs of
        // other projects and unknown syncs give nothing.
        let some: Vec<String> = vec!["m3@b.com".into(), "m7@b.com".into(), "nobody".into()];
        let got = store
            .group_memberships(p, &["sync-a".into(), "missing".into()], &some)
            .await
            .unwrap();
        assert_eq!(
            got,
            [
                (
                    "sync-a".to_string(),
                    "all".to_string(),
                    "m3@b.com".to_string()
                ),
                (
                    "sync-a".to_string(),
                    "all".to_string(),
                    "m7@b.com".to_string()
                ),
            ]
        );
        assert!(
            store
                .group_memberships(
                    "00000000-0000-4000-8000-0000000000cc",
                    &["sync-a".into()],
                    &some
                )
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .group_memberships(p, &[], &some)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.delete_records(p, "sync-a", &asked).await.unwrap(),
            (1500, 2)
        );
        assert_eq!(totals(store, p, "sync-a").await, (2, 0, 0));
        assert_eq!(readable(store, p, "sync-a", &["anyone"]).await, 0);

        // The other project's sync saw none of it.
        assert_eq!(totals(store, q, "sync-q").await, (1, 1, 7));
        assert_eq!(store.list_syncs(q).await.unwrap().len(), 1);
        let listed: Vec<String> = store
            .list_syncs(p)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, ["sync-b", "sync-a"]);
    }

    /// Connections: upsert, list, defaults, delete, isolation.
    async fn connections(store: &dyn MetadataStore) {
        let p = "00000000-0000-4000-8000-0000000000e1";
        let q = "00000000-0000-4000-8000-0000000000e2";
        connections_empty_input(store, p).await;
        connections_insert_and_list(store, p).await;
        connections_update_keeps_created_at(store, p).await;
        connections_default_is_unique(store, p).await;
        connections_two_defaults_in_one_call(store, p).await;
        connections_reelect_after_delete(store, p).await;
        connections_elect_among_non_defaults(store, p).await;
        connections_filter_by_integrations(store, p).await;
        connections_isolated_by_project_and_user(store, p, q).await;
        connections_reupsert_is_idempotent(store, p).await;
    }

    fn conn(integration: &str, account_id: &str, is_default: bool) -> ConnectionInput {
        ConnectionInput {
            integration: integration.into(),
            account_id: account_id.into(),
            alias: None,
            status: "active".into(),
            account_type: "private".into(),
            is_default,
            user_info: None,
        }
    }

    /// `integration:account`, with `*` after the default.
    fn shape(rows: &[ConnectionRow]) -> Vec<String> {
        rows.iter()
            .map(|r| {
                let star = if r.is_default { "*" } else { "" };
                format!("{}:{}{star}", r.integration, r.account_id)
            })
            .collect()
    }

    async fn upsert(
        store: &dyn MetadataStore,
        p: &str,
        user: &str,
        inputs: &[ConnectionInput],
    ) -> Vec<ConnectionRow> {
        let rows = store.upsert_connections(p, user, inputs).await.unwrap();
        // Later calls in a test see later timestamps.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        rows
    }

    async fn listed(
        store: &dyn MetadataStore,
        p: &str,
        user: &str,
        integrations: &[&str],
    ) -> Vec<ConnectionRow> {
        store
            .list_connections(p, user, &strings(integrations))
            .await
            .unwrap()
    }

    /// An empty upsert writes nothing, not even the project row.
    async fn connections_empty_input(store: &dyn MetadataStore, p: &str) {
        let fresh = "00000000-0000-4000-8000-0000000000e9";
        assert!(
            store
                .upsert_connections(fresh, "alice", &[])
                .await
                .unwrap()
                .is_empty()
        );
        assert!(listed(store, fresh, "alice", &[]).await.is_empty());
        assert!(
            store
                .upsert_connections(p, "alice", &[])
                .await
                .unwrap()
                .is_empty()
        );
        assert!(listed(store, p, "alice", &[]).await.is_empty());
        assert!(
            !store
                .delete_connection(p, "alice", "gmail", "a@x.com")
                .await
                .unwrap()
        );
    }

    /// Every field is stored as given; the first account of an integration becomes its default;
    /// the returned rows are the listed ones.
    async fn connections_insert_and_list(store: &dyn MetadataStore, p: &str) {
        let info = r#"{"email":"a@x.com","name":"Alice O'Hara ✓"}"#;
        let rows = upsert(
            store,
            p,
            "alice",
            &[
                ConnectionInput {
                    alias: Some("work".into()),
                    status: "expired".into(),
                    account_type: "shared".into(),
                    user_info: Some(info.into()),
                    ..conn("gmail", "a@x.com", false)
                },
                conn("slack", "U1", true),
            ],
        )
        .await;
        assert_eq!(shape(&rows), ["gmail:a@x.com*", "slack:U1*"]);
        let gmail = &rows[0];
        assert_eq!(gmail.alias.as_deref(), Some("work"));
        assert_eq!(
            (gmail.status.as_str(), gmail.account_type.as_str()),
            ("expired", "shared")
        );
        assert_eq!(gmail.user_info.as_deref(), Some(info));
        assert!(gmail.created_at_ms > 1_600_000_000_000);
        assert_eq!(gmail.updated_at_ms, gmail.created_at_ms);
        assert_eq!(
            (rows[1].alias.as_ref(), rows[1].user_info.as_ref()),
            (None, None)
        );
        assert_eq!(listed(store, p, "alice", &[]).await, rows);
    }

    /// An update replaces the fields, keeps `created_at` and moves `updated_at`.
    async fn connections_update_keeps_created_at(store: &dyn MetadataStore, p: &str) {
        let before = listed(store, p, "alice", &["gmail"]).await;
        let rows = upsert(
            store,
            p,
            "alice",
            &[ConnectionInput {
                alias: Some("perso".into()),
                status: "revoked".into(),
                ..conn("gmail", "a@x.com", true)
            }],
        )
        .await;
        assert_eq!(shape(&rows), ["gmail:a@x.com*"]);
        let (old, new) = (&before[0], &rows[0]);
        assert_eq!(new.created_at_ms, old.created_at_ms);
        assert!(new.updated_at_ms > old.updated_at_ms);
        assert_eq!(
            (
                new.alias.as_deref(),
                new.status.as_str(),
                new.account_type.as_str(),
                new.user_info.as_deref()
            ),
            (Some("perso"), "revoked", "private", None)
        );
        // Only the integration written is returned; the other is untouched.
        assert_eq!(
            shape(&listed(store, p, "alice", &[]).await),
            ["gmail:a@x.com*", "slack:U1*"]
        );
    }

    /// A new default takes it from the others; a non-default account leaves it where it is.
    async fn connections_default_is_unique(store: &dyn MetadataStore, p: &str) {
        let rows = upsert(store, p, "alice", &[conn("gmail", "b@x.com", true)]).await;
        assert_eq!(shape(&rows), ["gmail:b@x.com*", "gmail:a@x.com"]);
        let a_before = listed(store, p, "alice", &["gmail"]).await[1].clone();
        let rows = upsert(store, p, "alice", &[conn("gmail", "c@x.com", false)]).await;
        assert_eq!(
            shape(&rows),
            ["gmail:b@x.com*", "gmail:a@x.com", "gmail:c@x.com"]
        );
        // A row that loses nothing keeps its updated_at.
        assert_eq!(rows[1], a_before);
        let rows = upsert(store, p, "alice", &[conn("gmail", "a@x.com", true)]).await;
        assert_eq!(
            shape(&rows),
            ["gmail:a@x.com*", "gmail:b@x.com", "gmail:c@x.com"]
        );
        // The row that lost the default was updated.
        assert_eq!(rows[1].updated_at_ms, rows[0].updated_at_ms);
        assert!(rows[1].updated_at_ms > rows[1].created_at_ms);
        assert_eq!(
            shape(&listed(store, p, "alice", &["slack"]).await),
            ["slack:U1*"]
        );
    }

    /// Of several inputs asking for the default of one integration the last wins; of several
    /// inputs naming one account the last wins.
    async fn connections_two_defaults_in_one_call(store: &dyn MetadataStore, p: &str) {
        let rows = upsert(
            store,
            p,
            "alice",
            &[
                conn("gmail", "b@x.com", true),
                conn("gmail", "c@x.com", true),
            ],
        )
        .await;
        assert_eq!(
            shape(&rows),
            ["gmail:c@x.com*", "gmail:a@x.com", "gmail:b@x.com"]
        );
        let rows = upsert(
            store,
            p,
            "alice",
            &[
                conn("gmail", "c@x.com", true),
                conn("slack", "U2", true),
                conn("gmail", "b@x.com", true),
            ],
        )
        .await;
        assert_eq!(
            shape(&rows),
            [
                "gmail:b@x.com*",
                "gmail:a@x.com",
                "gmail:c@x.com",
                "slack:U2*",
                "slack:U1"
            ]
        );
        let rows = upsert(
            store,
            p,
            "alice",
            &[
                ConnectionInput {
                    alias: Some("one".into()),
                    ..conn("gmail", "c@x.com", true)
                },
                ConnectionInput {
                    alias: Some("two".into()),
                    ..conn("gmail", "c@x.com", false)
                },
            ],
        )
        .await;
        assert_eq!(
            shape(&rows),
            ["gmail:b@x.com*", "gmail:a@x.com", "gmail:c@x.com"]
        );
        assert_eq!(rows[2].alias.as_deref(), Some("two"));
        // Never more than one default per integration.
        let all = listed(store, p, "alice", &[]).await;
        assert_eq!(all.iter().filter(|r| r.is_default).count(), 2);
    }

    /// Deleting the default makes the earliest created remaining account the default.
    async fn connections_reelect_after_delete(store: &dyn MetadataStore, p: &str) {
        assert!(
            store
                .delete_connection(p, "alice", "gmail", "b@x.com")
                .await
                .unwrap()
        );
        let rows = listed(store, p, "alice", &["gmail"]).await;
        assert_eq!(shape(&rows), ["gmail:a@x.com*", "gmail:c@x.com"]);
        assert!(rows[0].updated_at_ms > rows[0].created_at_ms);
        assert!(
            !store
                .delete_connection(p, "alice", "gmail", "b@x.com")
                .await
                .unwrap()
        );
        // Deleting a non-default account leaves the default alone.
        assert!(
            store
                .delete_connection(p, "alice", "gmail", "c@x.com")
                .await
                .unwrap()
        );
        assert_eq!(
            listed(store, p, "alice", &["gmail"]).await,
            rows[..1].to_vec()
        );
        // The last account goes: nothing to elect.
        assert!(
            store
                .delete_connection(p, "alice", "gmail", "a@x.com")
                .await
                .unwrap()
        );
        assert!(listed(store, p, "alice", &["gmail"]).await.is_empty());
        assert_eq!(
            shape(&listed(store, p, "alice", &[]).await),
            ["slack:U2*", "slack:U1"]
        );
        // The integration must match too.
        assert!(
            !store
                .delete_connection(p, "alice", "gmail", "U1")
                .await
                .unwrap()
        );
    }

    /// Accounts written without a default: the earliest created is elected, ties broken by the
    /// smallest account id in byte order.
    async fn connections_elect_among_non_defaults(store: &dyn MetadataStore, p: &str) {
        let rows = upsert(
            store,
            p,
            "alice",
            &[
                conn("outlook", "b@y.com", false),
                conn("outlook", "B@y.com", false),
            ],
        )
        .await;
        assert_eq!(shape(&rows), ["outlook:B@y.com*", "outlook:b@y.com"]);
        assert_eq!(rows[0].created_at_ms, rows[1].created_at_ms);
        let rows = upsert(store, p, "alice", &[conn("outlook", "A@y.com", false)]).await;
        assert_eq!(
            shape(&rows),
            ["outlook:B@y.com*", "outlook:b@y.com", "outlook:A@y.com"]
        );
        // The default written as not default: the integration is left without one, so the
        // earliest created account is elected again.
        let rows = upsert(store, p, "alice", &[conn("outlook", "B@y.com", false)]).await;
        assert_eq!(
            shape(&rows),
            ["outlook:B@y.com*", "outlook:b@y.com", "outlook:A@y.com"]
        );
        let rows = upsert(store, p, "alice", &[conn("outlook", "A@y.com", true)]).await;
        assert_eq!(
            shape(&rows),
            ["outlook:A@y.com*", "outlook:B@y.com", "outlook:b@y.com"]
        );
        assert!(
            store
                .delete_connection(p, "alice", "outlook", "A@y.com")
                .await
                .unwrap()
        );
        assert_eq!(
            shape(&listed(store, p, "alice", &["outlook"]).await),
            ["outlook:B@y.com*", "outlook:b@y.com"]
        );
    }

    /// Listing named integrations only; unknown names match nothing.
    async fn connections_filter_by_integrations(store: &dyn MetadataStore, p: &str) {
        let all = listed(store, p, "alice", &[]).await;
        assert_eq!(
            shape(&all),
            [
                "outlook:B@y.com*",
                "outlook:b@y.com",
                "slack:U2*",
                "slack:U1"
            ]
        );
        assert_eq!(
            listed(store, p, "alice", &["slack"]).await,
            all[2..].to_vec()
        );
        assert_eq!(
            listed(store, p, "alice", &["slack", "nope", "outlook", "slack"]).await,
            all
        );
        assert!(listed(store, p, "alice", &["nope"]).await.is_empty());
        assert!(listed(store, p, "alice", &["Slack"]).await.is_empty());
    }

    /// Other projects and users (user ids compared exactly) neither see nor change the rows.
    async fn connections_isolated_by_project_and_user(store: &dyn MetadataStore, p: &str, q: &str) {
        let before = listed(store, p, "alice", &[]).await;
        let odd = "o'brien ✓ \"x\"); DROP TABLE connections; --";
        let in_q = upsert(store, q, "alice", &[conn("slack", "U1", false)]).await;
        assert_eq!(shape(&in_q), ["slack:U1*"]);
        upsert(store, p, "Alice", &[conn("slack", "U9", true)]).await;
        upsert(store, p, "alice ", &[conn("slack", "U8", true)]).await;
        upsert(
            store,
            p,
            odd,
            &[conn("slack", "U7", true), conn("slack", "U1", false)],
        )
        .await;
        assert_eq!(listed(store, p, "alice", &[]).await, before);
        assert_eq!(listed(store, q, "alice", &[]).await, in_q);
        assert_eq!(shape(&listed(store, p, "Alice", &[]).await), ["slack:U9*"]);
        assert_eq!(shape(&listed(store, p, "alice ", &[]).await), ["slack:U8*"]);
        assert_eq!(
            shape(&listed(store, p, odd, &[]).await),
            ["slack:U7*", "slack:U1"]
        );
        assert!(listed(store, p, "bob", &[]).await.is_empty());
        // Deletes do not reach across projects or users.
        assert!(
            !store
                .delete_connection(p, "bob", "slack", "U2")
                .await
                .unwrap()
        );
        assert!(
            store
                .delete_connection(q, "alice", "slack", "U1")
                .await
                .unwrap()
        );
        assert!(
            store
                .delete_connection(p, odd, "slack", "U7")
                .await
                .unwrap()
        );
        assert_eq!(shape(&listed(store, p, odd, &[]).await), ["slack:U1*"]);
        assert!(listed(store, q, "alice", &[]).await.is_empty());
        assert_eq!(listed(store, p, "alice", &[]).await, before);
        // A default in one project leaves the other's default alone.
        upsert(
            store,
            q,
            "alice",
            &[conn("slack", "U2", false), conn("slack", "U3", true)],
        )
        .await;
        assert_eq!(listed(store, p, "alice", &[]).await, before);
        assert_eq!(
            shape(&listed(store, q, "alice", &[]).await),
            ["slack:U3*", "slack:U2"]
        );
    }

    /// Writing the same connections again changes nothing but `updated_at`.
    async fn connections_reupsert_is_idempotent(store: &dyn MetadataStore, p: &str) {
        let inputs = [
            ConnectionInput {
                alias: Some("home".into()),
                user_info: Some("{}".into()),
                ..conn("drive", "d1", false)
            },
            conn("drive", "d2", true),
            conn("jira", "j1", false),
        ];
        let first = upsert(store, p, "carol", &inputs).await;
        assert_eq!(shape(&first), ["drive:d2*", "drive:d1", "jira:j1*"]);
        let second = upsert(store, p, "carol", &inputs).await;
        let strip = |rows: &[ConnectionRow]| -> Vec<ConnectionRow> {
            rows.iter()
                .map(|r| ConnectionRow {
                    updated_at_ms: 0,
                    ..r.clone()
                })
                .collect()
        };
        assert_eq!(strip(&second), strip(&first));
        assert!(
            second
                .iter()
                .zip(&first)
                .all(|(b, a)| b.updated_at_ms > a.updated_at_ms)
        );
        assert_eq!(listed(store, p, "carol", &[]).await, second);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(
        integration: &str,
        account_id: &str,
        is_default: bool,
        alias: &str,
    ) -> ConnectionInput {
        ConnectionInput {
            integration: integration.into(),
            account_id: account_id.into(),
            alias: Some(alias.into()),
            status: "active".into(),
            account_type: "private".into(),
            is_default,
            user_info: None,
        }
    }

    fn row(
        integration: &str,
        account_id: &str,
        is_default: bool,
        created_at_ms: i64,
    ) -> ConnectionRow {
        ConnectionRow {
            integration: integration.into(),
            account_id: account_id.into(),
            alias: None,
            status: "active".into(),
            account_type: "private".into(),
            is_default,
            user_info: None,
            created_at_ms,
            updated_at_ms: created_at_ms,
        }
    }

    #[test]
    fn connection_inputs_keep_the_last_of_each_account_and_default() {
        let got = connection_inputs(&[
            input("gmail", "a", true, "1"),
            input("gmail", "b", true, "2"),
            input("slack", "u", true, "3"),
            input("gmail", "a", true, "4"),
            input("gmail", "c", false, "5"),
            input("slack", "u", false, "6"),
        ]);
        assert_eq!(
            got,
            vec![
                input("gmail", "b", false, "2"),
                input("gmail", "a", true, "4"),
                input("gmail", "c", false, "5"),
                input("slack", "u", false, "6"),
            ]
        );
        assert!(connection_inputs(&[]).is_empty());
        assert_eq!(connection_integrations(&got), ["gmail", "slack"]);
    }

    #[test]
    fn elect_defaults_picks_the_earliest_then_the_smallest_id() {
        let mut rows = vec![
            row("slack", "u2", false, 5),
            row("gmail", "b", false, 3),
            row("slack", "u1", true, 9),
            row("gmail", "a", false, 4),
            row("gmail", "B", false, 3),
        ];
        let elected = elect_defaults(&mut rows, 42);
        assert_eq!(elected, [("gmail".to_string(), "B".to_string())]);
        let order: Vec<(&str, bool, i64)> = rows
            .iter()
            .map(|r| (r.account_id.as_str(), r.is_default, r.updated_at_ms))
            .collect();
        assert_eq!(
            order,
            [
                ("B", true, 42),
                ("b", false, 3),
                ("a", false, 4),
                ("u1", true, 9),
                ("u2", false, 5)
            ]
        );
        assert!(elect_defaults(&mut [], 1).is_empty());
    }
}
