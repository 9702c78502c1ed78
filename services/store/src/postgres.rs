//! The PostgreSQL metadata store of distributed mode. Tables live in one schema (default
//! `agentsearch`), created and migrated on connect under an advisory lock, so several routers
//! starting together migrate once.

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::PgTls;

use crate::{
    CatalogEntry, ConnectionInput, ConnectionRow, IntegrationInfo, LostReplica, MIGRATIONS,
    MetadataStore, Placement, PlanOutcome, PlanRow, RANKING_MODEL_VERSIONS_KEPT, RankingModelRow,
    RecordEntry, ReplicaMove, ReplicaSet, Result, ShardDrain, StaleReplica, StoreError, SyncRow,
    ToolRouterSession, attach_principals, connection_inputs, connection_integrations,
    elect_defaults, group_placements, group_rows, join_list, now_ms, record_rows, session_taken,
    sort_connections, sort_integration_infos, sort_syncs, split_list, sync_taken, to_u64, unique,
    unknown_sync,
};

/// Key of the advisory lock held while migrating.
const MIGRATION_LOCK: i64 = 0x6167_656e_7473_6561; // "agentsea"

#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
}

/// A failed call's error. The connection lost (closed, reset, or ended by a server shutting
/// down) or a server refusing connections is [`StoreError::Unavailable`], which callers may retry
/// once the store is back (a transaction whose connection was lost during its COMMIT may or may
/// not have been applied); anything else is a backend error.
fn backend<E: std::error::Error + 'static>(e: E) -> StoreError {
    if connection_lost(&e) {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Backend(e.to_string())
    }
}

/// Whether `e`, or an error it wraps, says the connection to the server is gone or cannot be
/// had: a closed connection, an I/O error of a lost connection (not one of encoding or parsing a
/// message, which the driver also reports as I/O), SQLSTATE class 08 (connection exception) but
/// 08P01 (a protocol violation), 57P01-57P03 (the server shutting down, crashed, or starting) or
/// 53300 (too many connections).
fn connection_lost(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(pg) = err.downcast_ref::<tokio_postgres::Error>() {
            if pg.is_closed() {
                return true;
            }
            if let Some(state) = pg.code() {
                let code = state.code();
                if (code.starts_with("08") && code != "08P01")
                    || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
                {
                    return true;
                }
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset
                    | ConnectionAborted
                    | ConnectionRefused
                    | NotConnected
                    | BrokenPipe
                    | UnexpectedEof
                    | TimedOut
            ) {
                return true;
            }
        }
        next = err.source();
    }
    false
}

/// How a [`PgStore`] connects.
#[derive(Clone, Debug)]
pub struct PgOptions {
    pub pool_size: usize,
    pub tls: PgTls,
    /// How long a call waits for a pooled connection before failing as unavailable.
    pub pool_wait_timeout: std::time::Duration,
    /// The server cancels a statement running longer (`statement_timeout`).
    pub statement_timeout: std::time::Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            tls: PgTls::Disable,
            pool_wait_timeout: std::time::Duration::from_secs(5),
            statement_timeout: std::time::Duration::from_secs(30),
        }
    }
}

impl PgStore {
    /// Connects to `url` without TLS, creates `schema` if needed, migrates it, and keeps a pool of
    /// `pool_size`.
    pub async fn connect(url: &str, schema: &str, pool_size: usize) -> Result<Self> {
        let options = PgOptions {
            pool_size,
            ..PgOptions::default()
        };
        Self::connect_with(url, schema, &options).await
    }

    /// [`PgStore::connect`] with `options`: TLS (then required of every connection, whatever
    /// `sslmode` the URL names) and the timeouts that keep a slow or saturated server from holding
    /// requests without bound.
    pub async fn connect_with(url: &str, schema: &str, options: &PgOptions) -> Result<Self> {
        let (pool_size, tls) = (options.pool_size, &options.tls);
        let valid_schema = schema
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_schema {
            return Err(StoreError::Backend(format!(
                "invalid schema name `{schema}`"
            )));
        }
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        config.options(format!(
            "-c search_path={schema} -c statement_timeout={}",
            options.statement_timeout.as_millis()
        ));
        config.connect_timeout(std::time::Duration::from_secs(5));
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match crate::pg_tls::connector(tls)? {
            None => Manager::from_config(config, NoTls, manager_config),
            Some(connector) => {
                config.ssl_mode(tokio_postgres::config::SslMode::Require);
                Manager::from_config(config, connector, manager_config)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(options.pool_wait_timeout))
            .create_timeout(Some(std::time::Duration::from_secs(5)))
            .recycle_timeout(Some(std::time::Duration::from_secs(5)))
            .build()
            .map_err(backend)?;
        let store = Self { pool };
        store.migrate(schema).await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    async fn migrate(&self, schema: &str) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Migrations (and waiting for another router's) are not bounded by the statement timeout
        // meant for requests.
        tx.batch_execute("SET LOCAL statement_timeout = 0")
            .await
            .map_err(backend)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(backend)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (version BIGINT PRIMARY KEY);"
        ))
        .await
        .map_err(backend)?;
        for (version, sql) in MIGRATIONS {
            let done = tx
                .query_opt(
                    "SELECT version FROM schema_migrations WHERE version = $1",
                    &[version],
                )
                .await
                .map_err(backend)?;
            if done.is_none() {
                tx.batch_execute(sql).await.map_err(backend)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version) VALUES ($1)",
                    &[version],
                )
                .await
                .map_err(backend)?;
                tracing::info!(schema, version, "metadata migration applied");
            }
        }
        tx.commit().await.map_err(backend)
    }
}

fn sync_row(r: &tokio_postgres::Row) -> SyncRow {
    SyncRow {
        id: r.get(0),
        project_id: r.get(1),
        source: r.get(2),
        owner: r.get(3),
        shard_ids: split_list(r.get(4)),
        generation: to_u64(r.get(5)),
        records: to_u64(r.get(6)),
        segments: to_u64(r.get(7)),
        created_at_ms: r.get(8),
        last_ingest_at_ms: r.get(9),
        fields: crate::fields_of(r.get(10)),
    }
}

/// Locks the sync's row for the rest of the transaction (writes of one sync run one at a time)
/// and returns its generation; an unknown sync, or one of another project, is not found.
async fn lock_sync(
    tx: &deadpool_postgres::Transaction<'_>,
    project_id: &str,
    sync_id: &str,
) -> Result<i64> {
    tx.query_opt(
        "SELECT generation FROM syncs WHERE id = $1 AND project_id = $2 FOR UPDATE",
        &[&sync_id, &project_id],
    )
    .await
    .map_err(backend)?
    .map(|r| r.get(0))
    .ok_or_else(|| unknown_sync(sync_id))
}

/// Recomputes the sync's totals from its records, bumps its generation and stamps the ingest;
/// returns the new generation.
async fn bump_sync(tx: &deadpool_postgres::Transaction<'_>, sync_id: &str) -> Result<i64> {
    let row = tx
        .query_one(
            "UPDATE syncs SET
               records = (SELECT COUNT(*) FROM sync_records r WHERE r.sync_id = $1 AND r.generation > 0),
               segments = (SELECT CAST(COALESCE(SUM(r.segments), 0) AS BIGINT) FROM sync_records r WHERE r.sync_id = $1),
               generation = generation + 1, last_ingest_at = $2
             WHERE id = $1 RETURNING generation",
            &[&sync_id, &now_ms()],
        )
        .await
        .map_err(backend)?;
    Ok(row.get(0))
}

/// A replica set of `kind` from a row (project, key, comma separated shard ids).
fn replica_set(kind: &str, r: &tokio_postgres::Row) -> ReplicaSet {
    ReplicaSet {
        project_id: r.get(0),
        kind: kind.into(),
        key: r.get(1),
        shard_ids: split_list(r.get(2)),
    }
}

/// Runs `sql` (parameters: project, integration, shard) on the integration's placements with
/// their rows locked for the transaction, so changes of one integration's replicas run one at a
/// time; returns whether it changed a row.
async fn change_placements(
    client: &mut deadpool_postgres::Client,
    project_id: &str,
    integration: &str,
    shard_id: &str,
    sql: &str,
) -> Result<bool> {
    let tx = client.transaction().await.map_err(backend)?;
    tx.query(
        "SELECT shard_id FROM placements WHERE project_id = $1 AND integration = $2 FOR UPDATE",
        &[&project_id, &integration],
    )
    .await
    .map_err(backend)?;
    let n = tx
        .execute(sql, &[&project_id, &integration, &shard_id])
        .await
        .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(n > 0)
}

/// Edits the shard list of a sync with its row locked for the transaction: `edit` changes the
/// list and returns whether it did, and only then is the list written back. An unknown sync, or
/// one of another project, is left alone; returns whether the list changed.
async fn edit_sync_shards(
    client: &mut deadpool_postgres::Client,
    project_id: &str,
    sync_id: &str,
    edit: impl FnOnce(&mut Vec<String>) -> bool,
) -> Result<bool> {
    let tx = client.transaction().await.map_err(backend)?;
    let Some(row) = tx
        .query_opt(
            "SELECT shard_ids FROM syncs WHERE project_id = $1 AND id = $2 FOR UPDATE",
            &[&project_id, &sync_id],
        )
        .await
        .map_err(backend)?
    else {
        return Ok(false);
    };
    let mut ids = split_list(row.get(0));
    if !edit(&mut ids) {
        return Ok(false);
    }
    tx.execute(
        "UPDATE syncs SET shard_ids = $3 WHERE project_id = $1 AND id = $2",
        &[&project_id, &sync_id, &join_list(&ids)],
    )
    .await
    .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(true)
}

const CONNECTION_COLUMNS: &str = "integration, account_id, alias, status, account_type, \
    is_default, user_info, created_at_ms, updated_at_ms";

fn connection_row(r: &tokio_postgres::Row) -> ConnectionRow {
    ConnectionRow {
        integration: r.get(0),
        account_id: r.get(1),
        alias: r.get(2),
        status: r.get(3),
        account_type: r.get(4),
        is_default: r.get(5),
        user_info: r.get(6),
        created_at_ms: r.get(7),
        updated_at_ms: r.get(8),
    }
}

/// Serializes the connection writes of one user for the rest of the transaction, so the
/// default of each integration stays unique under concurrent writers.
async fn lock_user_connections(
    tx: &deadpool_postgres::Transaction<'_>,
    project_id: &str,
    user_id: &str,
) -> Result<()> {
    let key = format!("connections/{project_id}/{user_id}");
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&key],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// The user's connections of the named integrations, any order.
async fn select_connections(
    client: &impl deadpool_postgres::GenericClient,
    project_id: &str,
    user_id: &str,
    integrations: &[String],
) -> Result<Vec<ConnectionRow>> {
    let rows = client
        .query(
            &format!(
                "SELECT {CONNECTION_COLUMNS} FROM connections
                 WHERE project_id = $1 AND user_id = $2
                   AND (cardinality($3::text[]) = 0 OR integration = ANY($3))"
            ),
            &[&project_id, &user_id, &integrations],
        )
        .await
        .map_err(backend)?;
    Ok(rows.iter().map(connection_row).collect())
}

/// Gives a default to each integration of `rows` (every row of the user there) that has none,
/// updated at `now`, and returns the rows in list order.
async fn elect_and_store_defaults(
    tx: &deadpool_postgres::Transaction<'_>,
    project_id: &str,
    user_id: &str,
    mut rows: Vec<ConnectionRow>,
    now: i64,
) -> Result<Vec<ConnectionRow>> {
    let elected = elect_defaults(&mut rows, now);
    if !elected.is_empty() {
        let (integrations, accounts): (Vec<&str>, Vec<&str>) = elected
            .iter()
            .map(|(i, a)| (i.as_str(), a.as_str()))
            .unzip();
        tx.execute(
            "UPDATE connections c SET is_default = TRUE, updated_at_ms = $5
             FROM UNNEST($3::text[], $4::text[]) AS e(i, a)
             WHERE c.project_id = $1 AND c.user_id = $2 AND c.integration = e.i AND c.account_id = e.a",
            &[&project_id, &user_id, &integrations, &accounts, &now],
        )
        .await
        .map_err(backend)?;
    }
    Ok(rows)
}

#[async_trait::async_trait]
impl MetadataStore for PgStore {
    async fn ensure_project(&self, project_id: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO projects (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&project_id, &now_ms()],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn replica_sets(&self) -> Result<Vec<Vec<String>>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT DISTINCT string_agg(shard_id, ',' ORDER BY shard_id) FROM placements
                 GROUP BY project_id, integration
                 UNION SELECT DISTINCT shard_ids FROM syncs",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[]).await.map_err(backend)?;
        Ok(crate::distinct_sets(
            rows.into_iter().map(|r| r.get::<_, String>(0)),
        ))
    }

    async fn placements(&self, project_id: &str) -> Result<Vec<Placement>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT integration, shard_id FROM placements WHERE project_id = $1 ORDER BY integration, replica",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[&project_id]).await.map_err(backend)?;
        Ok(group_placements(
            rows.into_iter().map(|r| (r.get(0), r.get(1))).collect(),
        ))
    }

    async fn place(
        &self,
        project_id: &str,
        integration: &str,
        shard_ids: &[String],
    ) -> Result<Vec<String>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let key = format!("{project_id}/{integration}");
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await
        .map_err(backend)?;
        let existing: Vec<String> = tx
            .query(
                "SELECT shard_id FROM placements WHERE project_id = $1 AND integration = $2 ORDER BY replica",
                &[&project_id, &integration],
            )
            .await
            .map_err(backend)?
            .into_iter()
            .map(|r| r.get(0))
            .collect();
        if !existing.is_empty() {
            return Ok(existing);
        }
        for (replica, shard) in shard_ids.iter().enumerate() {
            tx.execute(
                "INSERT INTO placements (project_id, integration, shard_id, replica) VALUES ($1, $2, $3, $4)",
                &[&project_id, &integration, shard, &(replica as i32)],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(shard_ids.to_vec())
    }

    async fn catalog_entries(
        &self,
        project_id: &str,
        names: &[String],
    ) -> Result<Vec<CatalogEntry>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, integration, content_hash, stale_integrations FROM tools
                 WHERE project_id = $1 AND name = ANY($2)",
                &[&project_id, &names],
            )
            .await
            .map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|r| CatalogEntry {
                name: r.get(0),
                integration: r.get(1),
                content_hash: r.get(2),
                stale: split_list(r.get(3)),
            })
            .collect())
    }

    async fn put_catalog_entries(&self, project_id: &str, entries: &[CatalogEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let integrations: Vec<&str> = entries.iter().map(|e| e.integration.as_str()).collect();
        let hashes: Vec<&str> = entries.iter().map(|e| e.content_hash.as_str()).collect();
        let stale: Vec<String> = entries.iter().map(|e| join_list(&e.stale)).collect();
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO tools (project_id, name, integration, content_hash, stale_integrations, updated_at)
                 SELECT $1, n, i, h, s, $6 FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) AS t(n, i, h, s)
                 ON CONFLICT (project_id, name) DO UPDATE SET integration = EXCLUDED.integration,
                   content_hash = EXCLUDED.content_hash, stale_integrations = EXCLUDED.stale_integrations,
                   updated_at = EXCLUDED.updated_at",
                &[&project_id, &names, &integrations, &hashes, &stale, &now_ms()],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_catalog_entries(&self, project_id: &str, names: &[String]) -> Result<u64> {
        if names.is_empty() {
            return Ok(0);
        }
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM tools WHERE project_id = $1 AND name = ANY($2)",
                &[&project_id, &names],
            )
            .await
            .map_err(backend)
    }

    async fn catalog_size(&self, project_id: &str) -> Result<u64> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT COUNT(*) FROM tools WHERE project_id = $1",
                &[&project_id],
            )
            .await
            .map_err(backend)?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    async fn create_sync(&self, sync: &SyncRow) -> Result<SyncRow> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO projects (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
            &[&sync.project_id, &now],
        )
        .await
        .map_err(backend)?;
        tx.execute(
            "INSERT INTO syncs (id, project_id, source, owner, shard_ids, created_at, fields)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
            &[
                &sync.id,
                &sync.project_id,
                &sync.source,
                &sync.owner,
                &join_list(&sync.shard_ids),
                &now,
                &crate::fields_json(&sync.fields),
            ],
        )
        .await
        .map_err(backend)?;
        let row = tx
            .query_one(
                "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                 FROM syncs WHERE id = $1",
                &[&sync.id],
            )
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        let row = sync_row(&row);
        if row.project_id != sync.project_id {
            return Err(sync_taken(&sync.id));
        }
        Ok(row)
    }

    async fn get_sync(&self, project_id: &str, sync_id: &str) -> Result<Option<SyncRow>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                 FROM syncs WHERE id = $1 AND project_id = $2",
                &[&sync_id, &project_id],
            )
            .await
            .map_err(backend)?;
        Ok(row.as_ref().map(sync_row))
    }

    async fn list_syncs(&self, project_id: &str) -> Result<Vec<SyncRow>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                 FROM syncs WHERE project_id = $1",
                &[&project_id],
            )
            .await
            .map_err(backend)?;
        let mut syncs: Vec<SyncRow> = rows.iter().map(sync_row).collect();
        sort_syncs(&mut syncs);
        Ok(syncs)
    }

    async fn record_entries(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<Vec<RecordEntry>> {
        if record_ids.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let entries = client
            .query(
                "SELECT record_id, generation, content_hash, segments FROM sync_records
                 WHERE sync_id = $1 AND EXISTS (SELECT 1 FROM syncs WHERE id = $1 AND project_id = $2)
                   AND record_id = ANY($3)",
                &[&sync_id, &project_id, &record_ids],
            )
            .await
            .map_err(backend)?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let principals = client
            .query(
                "SELECT record_id, principal FROM record_principals
                 WHERE sync_id = $1 AND EXISTS (SELECT 1 FROM syncs WHERE id = $1 AND project_id = $2)
                   AND record_id = ANY($3)",
                &[&sync_id, &project_id, &record_ids],
            )
            .await
            .map_err(backend)?;
        Ok(attach_principals(
            entries
                .into_iter()
                .map(|r| RecordEntry {
                    record_id: r.get(0),
                    generation: to_u64(r.get(1)),
                    content_hash: r.get(2),
                    segments: to_u64(r.get(3)),
                    principals: Vec::new(),
                })
                .collect(),
            principals
                .into_iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect(),
        ))
    }

    async fn mark_records_pending(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        lock_sync(&tx, project_id, sync_id).await?;
        if record_ids.is_empty() {
            return Ok(());
        }
        let record_ids = unique(record_ids);
        tx.execute(
            "INSERT INTO sync_records (sync_id, record_id, generation, content_hash, segments, updated_at)
             SELECT $1, r, 0, '', 0, $3 FROM UNNEST($2::text[]) AS t(r)
             ON CONFLICT (sync_id, record_id) DO UPDATE SET content_hash = '',
               updated_at = EXCLUDED.updated_at",
            &[&sync_id, &record_ids, &now_ms()],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn put_records(
        &self,
        project_id: &str,
        sync_id: &str,
        entries: &[RecordEntry],
    ) -> Result<u64> {
        let rows = record_rows(entries)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let current = lock_sync(&tx, project_id, sync_id).await?;
        if rows.is_empty() {
            return Ok(to_u64(current));
        }
        let ids: Vec<&str> = rows.iter().map(|r| r.record_id.as_str()).collect();
        let generations: Vec<i64> = rows.iter().map(|r| r.generation).collect();
        let hashes: Vec<&str> = rows.iter().map(|r| r.content_hash.as_str()).collect();
        let segments: Vec<i64> = rows.iter().map(|r| r.segments).collect();
        tx.execute(
            "INSERT INTO sync_records (sync_id, record_id, generation, content_hash, segments, updated_at)
             SELECT $1, r, g, h, n, $6 FROM UNNEST($2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS t(r, g, h, n)
             ON CONFLICT (sync_id, record_id) DO UPDATE SET generation = EXCLUDED.generation,
               content_hash = EXCLUDED.content_hash, segments = EXCLUDED.segments,
               updated_at = EXCLUDED.updated_at",
            &[&sync_id, &ids, &generations, &hashes, &segments, &now_ms()],
        )
        .await
        .map_err(backend)?;
        tx.execute(
            "DELETE FROM record_principals WHERE sync_id = $1 AND record_id = ANY($2)",
            &[&sync_id, &ids],
        )
        .await
        .map_err(backend)?;
        let (granted_ids, granted): (Vec<&str>, Vec<&str>) = rows
            .iter()
            .flat_map(|r| {
                r.principals
                    .iter()
                    .map(|p| (r.record_id.as_str(), p.as_str()))
            })
            .unzip();
        if !granted.is_empty() {
            tx.execute(
                "INSERT INTO record_principals (sync_id, record_id, principal)
                 SELECT $1, r, p FROM UNNEST($2::text[], $3::text[]) AS t(r, p)",
                &[&sync_id, &granted_ids, &granted],
            )
            .await
            .map_err(backend)?;
        }
        let generation = bump_sync(&tx, sync_id).await?;
        tx.commit().await.map_err(backend)?;
        Ok(to_u64(generation))
    }

    async fn delete_records(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<(u64, u64)> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let current = lock_sync(&tx, project_id, sync_id).await?;
        if record_ids.is_empty() {
            return Ok((0, to_u64(current)));
        }
        let deleted = tx
            .execute(
                "DELETE FROM sync_records WHERE sync_id = $1 AND record_id = ANY($2)",
                &[&sync_id, &record_ids],
            )
            .await
            .map_err(backend)?;
        if deleted == 0 {
            return Ok((0, to_u64(current)));
        }
        tx.execute(
            "DELETE FROM record_principals WHERE sync_id = $1 AND record_id = ANY($2)",
            &[&sync_id, &record_ids],
        )
        .await
        .map_err(backend)?;
        let generation = bump_sync(&tx, sync_id).await?;
        tx.commit().await.map_err(backend)?;
        Ok((deleted, to_u64(generation)))
    }

    async fn put_group_members(
        &self,
        project_id: &str,
        sync_id: &str,
        groups: &[(String, Vec<String>)],
    ) -> Result<()> {
        let groups = group_rows(groups);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        lock_sync(&tx, project_id, sync_id).await?;
        if groups.is_empty() {
            return Ok(());
        }
        let group_ids: Vec<&str> = groups.iter().map(|(g, _)| g.as_str()).collect();
        tx.execute(
            "DELETE FROM sync_group_members WHERE sync_id = $1 AND group_id = ANY($2)",
            &[&sync_id, &group_ids],
        )
        .await
        .map_err(backend)?;
        let (member_groups, members): (Vec<&str>, Vec<&str>) = groups
            .iter()
            .flat_map(|(g, members)| members.iter().map(|m| (g.as_str(), m.as_str())))
            .unzip();
        if !members.is_empty() {
            tx.execute(
                "INSERT INTO sync_group_members (sync_id, group_id, member)
                 SELECT $1, g, m FROM UNNEST($2::text[], $3::text[]) AS t(g, m)",
                &[&sync_id, &member_groups, &members],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn member_groups(
        &self,
        project_id: &str,
        sync_id: &str,
        members: &[String],
    ) -> Result<Vec<String>> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT DISTINCT group_id FROM sync_group_members
                 WHERE sync_id = $1 AND EXISTS (SELECT 1 FROM syncs WHERE id = $1 AND project_id = $2)
                   AND member = ANY($3)",
                &[&sync_id, &project_id, &members],
            )
            .await
            .map_err(backend)?;
        let mut groups: Vec<String> = rows.into_iter().map(|r| r.get(0)).collect();
        groups.sort_unstable();
        Ok(groups)
    }

    async fn group_memberships(
        &self,
        project_id: &str,
        sync_ids: &[String],
        members: &[String],
    ) -> Result<Vec<(String, String, String)>> {
        if sync_ids.is_empty() || members.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT m.sync_id, m.group_id, m.member FROM sync_group_members m
                 JOIN syncs s ON s.id = m.sync_id AND s.project_id = $1
                 WHERE m.sync_id = ANY($2) AND m.member = ANY($3)",
                &[&project_id, &sync_ids, &members],
            )
            .await
            .map_err(backend)?;
        let mut out: Vec<(String, String, String)> = rows
            .into_iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    async fn readable_segments(
        &self,
        project_id: &str,
        sync_id: &str,
        principals: &[String],
    ) -> Result<u64> {
        if principals.is_empty() {
            return Ok(0);
        }
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT CAST(COALESCE(SUM(r.segments), 0) AS BIGINT) FROM sync_records r
                 WHERE r.sync_id = $1 AND EXISTS (SELECT 1 FROM syncs WHERE id = $1 AND project_id = $2)
                   AND r.record_id IN (SELECT a.record_id FROM record_principals a
                     WHERE a.sync_id = $1 AND a.principal = ANY($3))",
                &[&sync_id, &project_id, &principals],
            )
            .await
            .map_err(backend)?;
        Ok(to_u64(row.get(0)))
    }

    async fn upsert_connections(
        &self,
        project_id: &str,
        user_id: &str,
        inputs: &[ConnectionInput],
    ) -> Result<Vec<ConnectionRow>> {
        let inputs = connection_inputs(inputs);
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let touched = connection_integrations(&inputs);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        lock_user_connections(&tx, project_id, user_id).await?;
        // Read after the lock, so the writes of one user carry increasing times.
        let now = now_ms();
        tx.execute(
            "INSERT INTO projects (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
            &[&project_id, &now],
        )
        .await
        .map_err(backend)?;
        // The new defaults first take the default from the other accounts, so the upsert never
        // holds two defaults of one integration.
        let (default_integrations, default_accounts): (Vec<&str>, Vec<&str>) = inputs
            .iter()
            .filter(|i| i.is_default)
            .map(|i| (i.integration.as_str(), i.account_id.as_str()))
            .unzip();
        if !default_accounts.is_empty() {
            tx.execute(
                "UPDATE connections c SET is_default = FALSE, updated_at_ms = $5
                 FROM UNNEST($3::text[], $4::text[]) AS d(i, a)
                 WHERE c.project_id = $1 AND c.user_id = $2 AND c.integration = d.i
                   AND c.account_id <> d.a AND c.is_default",
                &[
                    &project_id,
                    &user_id,
                    &default_integrations,
                    &default_accounts,
                    &now,
                ],
            )
            .await
            .map_err(backend)?;
        }
        let integrations: Vec<&str> = inputs.iter().map(|i| i.integration.as_str()).collect();
        let accounts: Vec<&str> = inputs.iter().map(|i| i.account_id.as_str()).collect();
        let aliases: Vec<Option<&str>> = inputs.iter().map(|i| i.alias.as_deref()).collect();
        let statuses: Vec<&str> = inputs.iter().map(|i| i.status.as_str()).collect();
        let types: Vec<&str> = inputs.iter().map(|i| i.account_type.as_str()).collect();
        let defaults: Vec<bool> = inputs.iter().map(|i| i.is_default).collect();
        let infos: Vec<Option<&str>> = inputs.iter().map(|i| i.user_info.as_deref()).collect();
        tx.execute(
            "INSERT INTO connections (project_id, user_id, integration, account_id, alias, status,
               account_type, is_default, user_info, created_at_ms, updated_at_ms)
             SELECT $1, $2, i, a, l, s, t, d, u, $10, $10
             FROM UNNEST($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bool[], $9::text[])
               AS x(i, a, l, s, t, d, u)
             ON CONFLICT (project_id, user_id, integration, account_id) DO UPDATE SET
               alias = EXCLUDED.alias, status = EXCLUDED.status,
               account_type = EXCLUDED.account_type, is_default = EXCLUDED.is_default,
               user_info = EXCLUDED.user_info, updated_at_ms = EXCLUDED.updated_at_ms",
            &[
                &project_id,
                &user_id,
                &integrations,
                &accounts,
                &aliases,
                &statuses,
                &types,
                &defaults,
                &infos,
                &now,
            ],
        )
        .await
        .map_err(backend)?;
        let rows = select_connections(&tx, project_id, user_id, &touched).await?;
        let rows = elect_and_store_defaults(&tx, project_id, user_id, rows, now).await?;
        tx.commit().await.map_err(backend)?;
        Ok(rows)
    }

    async fn list_connections(
        &self,
        project_id: &str,
        user_id: &str,
        integrations: &[String],
    ) -> Result<Vec<ConnectionRow>> {
        let client = self.client().await?;
        let mut rows = select_connections(&client, project_id, user_id, integrations).await?;
        sort_connections(&mut rows);
        Ok(rows)
    }

    async fn delete_connection(
        &self,
        project_id: &str,
        user_id: &str,
        integration: &str,
        account_id: &str,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        lock_user_connections(&tx, project_id, user_id).await?;
        let deleted = tx
            .query_opt(
                "DELETE FROM connections
                 WHERE project_id = $1 AND user_id = $2 AND integration = $3 AND account_id = $4
                 RETURNING is_default",
                &[&project_id, &user_id, &integration, &account_id],
            )
            .await
            .map_err(backend)?;
        let Some(deleted) = deleted else {
            return Ok(false);
        };
        if deleted.get::<_, bool>(0) {
            let rest =
                select_connections(&tx, project_id, user_id, &[integration.to_string()]).await?;
            elect_and_store_defaults(&tx, project_id, user_id, rest, now_ms()).await?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(true)
    }

    async fn put_feedback(
        &self,
        project_id: &str,
        kind: &str,
        request_id: &str,
        example: &str,
        keep: u32,
    ) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let key = format!("feedback/{project_id}/{kind}");
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await
        .map_err(backend)?;
        tx.execute(
            "INSERT INTO feedback (project_id, kind, request_id, example, created_at_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (project_id, kind, request_id)
             DO UPDATE SET example = EXCLUDED.example, created_at_ms = EXCLUDED.created_at_ms",
            &[&project_id, &kind, &request_id, &example, &now_ms()],
        )
        .await
        .map_err(backend)?;
        tx.execute(
            "DELETE FROM feedback WHERE project_id = $1 AND kind = $2 AND request_id IN (
                 SELECT request_id FROM feedback WHERE project_id = $1 AND kind = $2
                 ORDER BY created_at_ms DESC, request_id DESC OFFSET $3)",
            &[&project_id, &kind, &i64::from(keep)],
        )
        .await
        .map_err(backend)?;
        let kept: i64 = tx
            .query_one(
                "SELECT count(*) FROM feedback WHERE project_id = $1 AND kind = $2",
                &[&project_id, &kind],
            )
            .await
            .map_err(backend)?
            .get(0);
        tx.commit().await.map_err(backend)?;
        Ok(to_u64(kept))
    }

    async fn feedback(&self, project_id: &str, kind: &str, limit: u32) -> Result<Vec<String>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT example FROM feedback WHERE project_id = $1 AND kind = $2
                 ORDER BY created_at_ms DESC, request_id DESC LIMIT $3",
                &[&project_id, &kind, &i64::from(limit)],
            )
            .await
            .map_err(backend)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn put_ranking_model(
        &self,
        project_id: &str,
        kind: &str,
        params: &str,
        examples: u64,
    ) -> Result<RankingModelRow> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Two routers refitting the same project at once take turns for the next version.
        let key = format!("ranking_models/{project_id}/{kind}");
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await
        .map_err(backend)?;
        let version: i64 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) + 1 FROM ranking_models
                 WHERE project_id = $1 AND kind = $2",
                &[&project_id, &kind],
            )
            .await
            .map_err(backend)?
            .get(0);
        let created_at_ms = now_ms();
        let examples_i64 = crate::to_i64(examples)?;
        tx.execute(
            "INSERT INTO ranking_models (project_id, kind, version, params, examples, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&project_id, &kind, &version, &params, &examples_i64, &created_at_ms],
        )
        .await
        .map_err(backend)?;
        tx.execute(
            "DELETE FROM ranking_models WHERE project_id = $1 AND kind = $2 AND version < $3",
            &[
                &project_id,
                &kind,
                &(version - RANKING_MODEL_VERSIONS_KEPT as i64),
            ],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(RankingModelRow {
            project_id: project_id.to_string(),
            kind: kind.to_string(),
            version: to_u64(version),
            params: params.to_string(),
            examples,
            created_at_ms,
        })
    }

    async fn ranking_model(&self, project_id: &str, kind: &str) -> Result<Option<RankingModelRow>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT version, params, examples, created_at_ms FROM ranking_models
                 WHERE project_id = $1 AND kind = $2 ORDER BY version DESC LIMIT 1",
                &[&project_id, &kind],
            )
            .await
            .map_err(backend)?;
        Ok(row.map(|r| RankingModelRow {
            project_id: project_id.to_string(),
            kind: kind.to_string(),
            version: to_u64(r.get(0)),
            params: r.get(1),
            examples: to_u64(r.get(2)),
            created_at_ms: r.get(3),
        }))
    }

    async fn mark_stale(&self, marks: &[StaleReplica]) -> Result<()> {
        if marks.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO stale_replicas (project_id, kind, key, shard_id, epoch, marked_at)
                 VALUES ($1, $2, $3, $4, $6, $5)
                 ON CONFLICT (project_id, kind, key, shard_id)
                 DO UPDATE SET epoch = GREATEST(stale_replicas.epoch + 1, excluded.epoch),
                               marked_at = excluded.marked_at",
            )
            .await
            .map_err(backend)?;
        let (now, epoch) = (now_ms(), crate::epoch_now());
        for m in marks {
            tx.execute(
                &stmt,
                &[&m.project_id, &m.kind, &m.key, &m.shard_id, &now, &epoch],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn stale_replicas(&self, project_id: Option<&str>) -> Result<Vec<StaleReplica>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT project_id, kind, key, shard_id, epoch, marked_at FROM stale_replicas
                 WHERE $1::TEXT IS NULL OR project_id = $1
                 ORDER BY project_id, kind, key, shard_id",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[&project_id]).await.map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|r| StaleReplica {
                project_id: r.get(0),
                kind: r.get(1),
                key: r.get(2),
                shard_id: r.get(3),
                epoch: to_u64(r.get(4)),
                marked_at: r.get(5),
            })
            .collect())
    }

    async fn clear_stale(&self, mark: &StaleReplica) -> Result<bool> {
        let epoch = crate::to_i64(mark.epoch)?;
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM stale_replicas
                 WHERE project_id = $1 AND kind = $2 AND key = $3 AND shard_id = $4 AND epoch = $5",
                &[
                    &mark.project_id,
                    &mark.kind,
                    &mark.key,
                    &mark.shard_id,
                    &epoch,
                ],
            )
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn write_fence(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        since_ms: i64,
    ) -> Result<Option<String>> {
        let client = self.client().await?;
        if kind == crate::STALE_SYNC {
            let generation: Option<i64> = client
                .query_opt(
                    "SELECT generation FROM syncs WHERE project_id = $1 AND id = $2",
                    &[&project_id, &key],
                )
                .await
                .map_err(backend)?
                .map(|r| r.get(0));
            let pending: i64 = client
                .query_one(
                    "SELECT count(*) FROM sync_records
                     WHERE sync_id = $1 AND content_hash = '' AND updated_at >= $2",
                    &[&key, &since_ms],
                )
                .await
                .map_err(backend)?
                .get(0);
            return Ok((pending == 0).then(|| format!("{generation:?}")));
        }
        let rows = client
            .query(
                "SELECT name, content_hash, stale_integrations, updated_at FROM tools
                 WHERE project_id = $1
                   AND (integration = $2 OR ',' || stale_integrations || ',' LIKE '%,' || $2 || ',%')",
                &[&project_id, &key],
            )
            .await
            .map_err(backend)?;
        Ok(crate::tool_fence(
            key,
            rows.into_iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))),
            since_ms,
        ))
    }

    async fn replicas_on(&self, shard_id: &str) -> Result<Vec<ReplicaSet>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT project_id, integration, string_agg(shard_id, ',' ORDER BY replica)
                 FROM placements
                 WHERE (project_id, integration) IN
                       (SELECT project_id, integration FROM placements WHERE shard_id = $1)
                 GROUP BY project_id, integration",
                &[&shard_id],
            )
            .await
            .map_err(backend)?;
        let mut out: Vec<ReplicaSet> = rows
            .iter()
            .map(|r| replica_set(crate::STALE_INTEGRATION, r))
            .collect();
        let rows = client
            .query(
                "SELECT project_id, id, shard_ids FROM syncs
                 WHERE ',' || shard_ids || ',' LIKE '%,' || $1 || ',%'",
                &[&shard_id],
            )
            .await
            .map_err(backend)?;
        out.extend(
            rows.iter()
                .map(|r| replica_set(crate::STALE_SYNC, r))
                .filter(|s| s.shard_ids.iter().any(|id| id == shard_id)),
        );
        crate::sort_replica_sets(&mut out);
        Ok(out)
    }

    async fn move_replica(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        from: &str,
        to: &str,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        if kind == crate::STALE_INTEGRATION {
            let n = client
                .execute(
                    "UPDATE placements SET shard_id = $4
                     WHERE project_id = $1 AND integration = $2 AND shard_id = $3
                       AND NOT EXISTS (SELECT 1 FROM placements
                                       WHERE project_id = $1 AND integration = $2 AND shard_id = $4)",
                    &[&project_id, &key, &from, &to],
                )
                .await
                .map_err(backend)?;
            return Ok(n > 0);
        }
        edit_sync_shards(&mut client, project_id, key, |ids| {
            if ids.iter().any(|id| id == to) {
                return false;
            }
            let Some(slot) = ids.iter_mut().find(|id| *id == from) else {
                return false;
            };
            *slot = to.to_string();
            true
        })
        .await
    }

    async fn add_replica(&self, project_id: &str, kind: &str, key: &str, to: &str) -> Result<bool> {
        let mut client = self.client().await?;
        if kind == crate::STALE_INTEGRATION {
            // Changes of one integration's replicas run one at a time: the next rank is read
            // after the previous change committed.
            return change_placements(
                &mut client,
                project_id,
                key,
                to,
                "INSERT INTO placements (project_id, integration, shard_id, replica)
                 SELECT $1, $2, $3, MAX(replica) + 1 FROM placements
                 WHERE project_id = $1 AND integration = $2
                 HAVING COUNT(*) > 0
                    AND NOT EXISTS (SELECT 1 FROM placements
                                    WHERE project_id = $1 AND integration = $2 AND shard_id = $3)
                 ON CONFLICT DO NOTHING",
            )
            .await;
        }
        if kind != crate::STALE_SYNC {
            return Ok(false);
        }
        edit_sync_shards(&mut client, project_id, key, |ids| {
            crate::join_shard_list(ids, to)
        })
        .await
    }

    async fn remove_replica(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        from: &str,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        if kind == crate::STALE_INTEGRATION {
            // Two removals at once must not both count the other's replica as the one left.
            return change_placements(
                &mut client,
                project_id,
                key,
                from,
                "DELETE FROM placements
                 WHERE project_id = $1 AND integration = $2 AND shard_id = $3
                   AND EXISTS (SELECT 1 FROM placements
                               WHERE project_id = $1 AND integration = $2 AND shard_id <> $3)",
            )
            .await;
        }
        if kind != crate::STALE_SYNC {
            return Ok(false);
        }
        edit_sync_shards(&mut client, project_id, key, |ids| {
            crate::leave_shard_list(ids, from)
        })
        .await
    }

    async fn all_replicas(&self) -> Result<Vec<ReplicaSet>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT project_id, integration, string_agg(shard_id, ',' ORDER BY replica)
                 FROM placements
                 GROUP BY project_id, integration",
                &[],
            )
            .await
            .map_err(backend)?;
        let mut out: Vec<ReplicaSet> = rows
            .iter()
            .map(|r| replica_set(crate::STALE_INTEGRATION, r))
            .collect();
        let rows = client
            .query("SELECT project_id, id, shard_ids FROM syncs", &[])
            .await
            .map_err(backend)?;
        out.extend(rows.iter().map(|r| replica_set(crate::STALE_SYNC, r)));
        crate::sort_replica_sets(&mut out);
        Ok(out)
    }

    async fn forget_content(&self, project_id: &str, kind: &str, key: &str) -> Result<()> {
        let mut client = self.client().await?;
        if kind == crate::STALE_INTEGRATION {
            client
                .execute(
                    "DELETE FROM tools WHERE project_id = $1 AND integration = $2",
                    &[&project_id, &key],
                )
                .await
                .map_err(backend)?;
            return Ok(());
        }
        if kind != crate::STALE_SYNC {
            return Ok(());
        }
        let tx = client.transaction().await.map_err(backend)?;
        // Locks the sync as its writes do, so none runs between the deletes and the counts.
        match lock_sync(&tx, project_id, key).await {
            Ok(_) => {}
            Err(StoreError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
        tx.execute("DELETE FROM record_principals WHERE sync_id = $1", &[&key])
            .await
            .map_err(backend)?;
        tx.execute("DELETE FROM sync_records WHERE sync_id = $1", &[&key])
            .await
            .map_err(backend)?;
        tx.execute(
            "UPDATE syncs SET records = 0, segments = 0 WHERE project_id = $1 AND id = $2",
            &[&project_id, &key],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn put_move(&self, movement: &ReplicaMove) -> Result<bool> {
        let m = movement;
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO replica_moves
                   (project_id, kind, key, from_shard, to_shard, reason, created_at, added_at, removed_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (project_id, kind, key) DO NOTHING",
                &[
                    &m.project_id,
                    &m.kind,
                    &m.key,
                    &m.from_shard,
                    &m.to_shard,
                    &m.reason,
                    &m.created_at,
                    &m.added_at,
                    &m.removed_at,
                ],
            )
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn replica_moves(&self) -> Result<Vec<ReplicaMove>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT project_id, kind, key, from_shard, to_shard, reason, created_at, added_at,
                   removed_at
                 FROM replica_moves ORDER BY project_id, kind, key",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[]).await.map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|r| ReplicaMove {
                project_id: r.get(0),
                kind: r.get(1),
                key: r.get(2),
                from_shard: r.get(3),
                to_shard: r.get(4),
                reason: r.get(5),
                created_at: r.get(6),
                added_at: r.get(7),
                removed_at: r.get(8),
            })
            .collect())
    }

    async fn update_move(&self, movement: &ReplicaMove) -> Result<bool> {
        let m = movement;
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE replica_moves SET added_at = $4, removed_at = $5
                 WHERE project_id = $1 AND kind = $2 AND key = $3",
                &[&m.project_id, &m.kind, &m.key, &m.added_at, &m.removed_at],
            )
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn delete_move(&self, project_id: &str, kind: &str, key: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM replica_moves WHERE project_id = $1 AND kind = $2 AND key = $3",
                &[&project_id, &kind, &key],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn put_drain(&self, drain: &ShardDrain) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO shard_drains (shard_id, lost, requested_at) VALUES ($1, $2, $3)
                 ON CONFLICT (shard_id)
                 DO UPDATE SET lost = excluded.lost, requested_at = excluded.requested_at",
                &[&drain.shard_id, &i64::from(drain.lost), &drain.requested_at],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn drains(&self) -> Result<Vec<ShardDrain>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT shard_id, lost, requested_at FROM shard_drains ORDER BY shard_id",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[]).await.map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|r| ShardDrain {
                shard_id: r.get(0),
                lost: r.get::<_, i64>(1) != 0,
                requested_at: r.get(2),
            })
            .collect())
    }

    async fn delete_drain(&self, shard_id: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute("DELETE FROM shard_drains WHERE shard_id = $1", &[&shard_id])
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn record_lost(&self, lost: &[LostReplica]) -> Result<()> {
        if lost.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO lost_replicas (project_id, kind, key, shard_id, lost_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (project_id, kind, key)
                 DO UPDATE SET shard_id = excluded.shard_id, lost_at = excluded.lost_at",
            )
            .await
            .map_err(backend)?;
        for l in lost {
            tx.execute(
                &stmt,
                &[&l.project_id, &l.kind, &l.key, &l.shard_id, &l.lost_at],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn lost_replicas(&self) -> Result<Vec<LostReplica>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT project_id, kind, key, shard_id, lost_at FROM lost_replicas
                 ORDER BY project_id, kind, key",
            )
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[]).await.map_err(backend)?;
        Ok(rows
            .into_iter()
            .map(|r| LostReplica {
                project_id: r.get(0),
                kind: r.get(1),
                key: r.get(2),
                shard_id: r.get(3),
                lost_at: r.get(4),
            })
            .collect())
    }

    async fn clear_lost(&self) -> Result<u64> {
        let client = self.client().await?;
        client
            .execute("DELETE FROM lost_replicas", &[])
            .await
            .map_err(backend)
    }

    async fn create_session(&self, session: &ToolRouterSession) -> Result<()> {
        let s = session;
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO tool_router_sessions (id, project_id, user_id, created_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                &[
                    &s.id,
                    &s.project_id,
                    &s.user_id,
                    &s.created_at,
                    &s.expires_at,
                ],
            )
            .await
            .map_err(backend)?;
        if n == 0 {
            return Err(session_taken(&s.id));
        }
        Ok(())
    }

    async fn session(&self, id: &str) -> Result<Option<ToolRouterSession>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT id, project_id, user_id, created_at, expires_at FROM tool_router_sessions
                 WHERE id = $1",
            )
            .await
            .map_err(backend)?;
        let row = client.query_opt(&stmt, &[&id]).await.map_err(backend)?;
        Ok(row.map(|r| ToolRouterSession {
            id: r.get(0),
            project_id: r.get(1),
            user_id: r.get(2),
            created_at: r.get(3),
            expires_at: r.get(4),
        }))
    }

    async fn delete_expired_sessions(&self, now_ms: i64) -> Result<u64> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM tool_router_sessions WHERE expires_at <= $1",
                &[&now_ms],
            )
            .await
            .map_err(backend)
    }

    async fn put_integration_info(
        &self,
        project_id: &str,
        infos: &[IntegrationInfo],
    ) -> Result<()> {
        if infos.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO integration_info
                     (project_id, integration, description, guidance, pitfalls)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (project_id, integration)
                 DO UPDATE SET description = excluded.description, guidance = excluded.guidance,
                               pitfalls = excluded.pitfalls",
            )
            .await
            .map_err(backend)?;
        for info in infos {
            tx.execute(
                &stmt,
                &[
                    &project_id,
                    &info.integration,
                    &info.description,
                    &info.guidance,
                    &crate::pitfalls_text(&info.pitfalls),
                ],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn integration_info(
        &self,
        project_id: &str,
        integrations: &[String],
    ) -> Result<Vec<IntegrationInfo>> {
        if integrations.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT integration, description, guidance, pitfalls FROM integration_info
                 WHERE project_id = $1 AND integration = ANY($2)",
            )
            .await
            .map_err(backend)?;
        let rows = client
            .query(&stmt, &[&project_id, &integrations])
            .await
            .map_err(backend)?;
        let mut infos: Vec<IntegrationInfo> = rows
            .into_iter()
            .map(|r| IntegrationInfo {
                integration: r.get(0),
                description: r.get(1),
                guidance: r.get(2),
                pitfalls: crate::pitfalls_of(r.get(3)),
            })
            .collect();
        sort_integration_infos(&mut infos);
        Ok(infos)
    }

    async fn delete_integration_info(&self, project_id: &str, integration: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM integration_info WHERE project_id = $1 AND integration = $2",
                &[&project_id, &integration],
            )
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn record_plan(
        &self,
        project_id: &str,
        outcome: &PlanOutcome,
        max_plans: u64,
    ) -> Result<Option<PlanRow>> {
        self.record_plan_tx(project_id, outcome, max_plans).await
    }

    async fn plans(&self, project_id: &str) -> Result<Vec<PlanRow>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!(
                "SELECT {PLAN_COLUMNS} FROM plans WHERE project_id = $1"
            ))
            .await
            .map_err(backend)?;
        let rows = client.query(&stmt, &[&project_id]).await.map_err(backend)?;
        let mut plans: Vec<PlanRow> = rows.iter().map(plan_row).collect();
        crate::sort_plans(&mut plans);
        Ok(plans)
    }

    async fn delete_plan(&self, project_id: &str, plan_id: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM plans WHERE project_id = $1 AND id = $2",
                &[&project_id, &plan_id],
            )
            .await
            .map_err(backend)?;
        Ok(n > 0)
    }

    async fn delete_plans_naming(
        &self,
        project_id: &str,
        tool_names: &[String],
    ) -> Result<Vec<String>> {
        if tool_names.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let rows = client
            .query(
                "DELETE FROM plans WHERE project_id = $1 AND steps::jsonb ?| $2 RETURNING id",
                &[&project_id, &tool_names],
            )
            .await
            .map_err(backend)?;
        let mut ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort();
        Ok(ids)
    }
}

/// The columns of a plan, in [`plan_row`]'s order.
const PLAN_COLUMNS: &str =
    "id, use_case, embedding, steps, notes, pitfalls, successes, failures, created_at, updated_at";

fn plan_row(r: &tokio_postgres::Row) -> PlanRow {
    PlanRow {
        id: r.get(0),
        use_case: r.get(1),
        embedding: crate::embedding_of(r.get(2)),
        steps: crate::list_of(r.get(3)),
        notes: r.get(4),
        pitfalls: crate::list_of(r.get(5)),
        successes: to_u64(r.get(6)),
        failures: to_u64(r.get(7)),
        created_at_ms: r.get(8),
        updated_at_ms: r.get(9),
    }
}

impl PgStore {
    /// [`MetadataStore::record_plan`]: serialised per project (an advisory lock held by the
    /// transaction), so concurrent recordings cannot take a project past `max_plans`.
    async fn record_plan_tx(
        &self,
        project_id: &str,
        outcome: &PlanOutcome,
        max_plans: u64,
    ) -> Result<Option<PlanRow>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('plans/' || $1, 0))",
            &[&project_id],
        )
        .await
        .map_err(backend)?;
        let (successes, failures): (i64, i64) = if outcome.success { (1, 0) } else { (0, 1) };
        let embedding = crate::embedding_bytes(&outcome.embedding);
        let pitfalls = outcome.pitfalls.as_deref().map(crate::list_text);
        let updated = tx
            .query_opt(
                &format!(
                    "UPDATE plans SET use_case = $3, embedding = $4, notes = COALESCE($5, notes),
                            pitfalls = COALESCE($6, pitfalls), successes = successes + $7,
                            failures = failures + $8, updated_at = $9
                     WHERE project_id = $1 AND id = $2
                     RETURNING {PLAN_COLUMNS}"
                ),
                &[
                    &project_id,
                    &outcome.id,
                    &outcome.use_case,
                    &embedding,
                    &outcome.notes,
                    &pitfalls,
                    &successes,
                    &failures,
                    &outcome.at_ms,
                ],
            )
            .await
            .map_err(backend)?;
        if let Some(row) = updated {
            let plan = plan_row(&row);
            tx.commit().await.map_err(backend)?;
            return Ok(Some(plan));
        }
        let count: i64 = tx
            .query_one(
                "SELECT COUNT(*) FROM plans WHERE project_id = $1",
                &[&project_id],
            )
            .await
            .map_err(backend)?
            .get(0);
        if to_u64(count) >= max_plans {
            return Ok(None);
        }
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO plans (project_id, id, use_case, embedding, steps, notes, pitfalls,
                                        successes, failures, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, COALESCE($6, ''), COALESCE($7, '[]'), $8, $9,
                             $10, $10)
                     RETURNING {PLAN_COLUMNS}"
                ),
                &[
                    &project_id,
                    &outcome.id,
                    &outcome.use_case,
                    &embedding,
                    &crate::list_text(&outcome.steps),
                    &outcome.notes,
                    &pitfalls,
                    &successes,
                    &failures,
                    &outcome.at_ms,
                ],
            )
            .await
            .map_err(backend)?;
        let plan = plan_row(&row);
        tx.commit().await.map_err(backend)?;
        Ok(Some(plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test database: `AGENTSEARCH_TEST_POSTGRES`, default the local trust-auth server.
    fn url() -> String {
        std::env::var("AGENTSEARCH_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    #[tokio::test]
    async fn conformance_on_postgres() {
        let schema = format!("t_store_{}", uuid::Uuid::new_v4().simple());
        let store = PgStore::connect(&url(), &schema, 4)
            .await
            .expect("PostgreSQL must be running for the tests");
        crate::conformance::run(&store).await;
        // Migrating an existing schema again is a no-op.
        PgStore::connect(&url(), &schema, 1).await.unwrap();
        let client = store.client().await.unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    fn tls_options(tls: PgTls) -> PgOptions {
        PgOptions {
            pool_size: 1,
            tls,
            ..PgOptions::default()
        }
    }

    /// Whether the session of `store`'s pooled client is encrypted.
    async fn encrypted(store: &PgStore) -> bool {
        let client = store.client().await.unwrap();
        client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// TLS against the test server, which serves the certificate its `ssl_cert_file` names
    /// (Debian's default: a self-signed certificate for `localhost`).
    #[tokio::test]
    async fn tls_modes_encrypt_and_verify_for_real() {
        let plain = PgStore::connect(&url(), "t_tls_probe", 1).await.unwrap();
        let client = plain.client().await.unwrap();
        let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        assert_eq!(ssl, "on", "the test PostgreSQL must have ssl = on");
        let cert: String = client
            .query_one("SHOW ssl_cert_file", &[])
            .await
            .unwrap()
            .get(0);
        drop(client);
        assert!(
            !encrypted(&plain).await,
            "tls_mode = disable stays in clear"
        );

        let require = PgStore::connect_with(&url(), "t_tls_probe", &tls_options(PgTls::Require))
            .await
            .unwrap();
        assert!(encrypted(&require).await);

        // verify-full: the server's own certificate as the authority, under the name it carries.
        let ca = PgTls::VerifyFull {
            ca_file: Some(cert.clone().into()),
        };
        let by_name = url().replace("127.0.0.1", "localhost");
        let verified = PgStore::connect_with(&by_name, "t_tls_probe", &tls_options(ca.clone()))
            .await
            .unwrap_or_else(|e| panic!("verify-full with {cert} as the CA, as localhost: {e}"));
        assert!(encrypted(&verified).await);
        // ... refused under a name the certificate does not carry,
        let err = PgStore::connect_with(&url(), "t_tls_probe", &tls_options(ca))
            .await
            .err()
            .expect("127.0.0.1 is not a name of the certificate");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        // ... and refused when the authorities trusted did not sign it (the public CAs' bundle).
        let bundle = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
        if bundle.exists() {
            let public = PgTls::VerifyFull {
                ca_file: Some(bundle.into()),
            };
            assert!(
                PgStore::connect_with(&by_name, "t_tls_probe", &tls_options(public))
                    .await
                    .is_err()
            );
        }
        // An unreadable authority file is named.
        let missing = PgTls::VerifyFull {
            ca_file: Some("/nonexistent/ca.pem".into()),
        };
        let err = PgStore::connect_with(&by_name, "t_tls_probe", &tls_options(missing))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("postgres.ca_file"), "{err}");
    }

    /// A statement running past the statement timeout is cancelled by the server; a call waiting
    /// for a pooled connection past the wait timeout fails as unavailable.
    #[tokio::test]
    async fn slow_statements_and_pool_waits_are_bounded() {
        let options = PgOptions {
            pool_size: 1,
            pool_wait_timeout: std::time::Duration::from_millis(200),
            statement_timeout: std::time::Duration::from_millis(300),
            ..PgOptions::default()
        };
        let store = PgStore::connect_with(&url(), "t_timeouts", &options)
            .await
            .unwrap();
        let client = store.client().await.unwrap();
        let err = client
            .batch_execute("SELECT pg_sleep(5)")
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
            "{err:?}"
        );
        // The only connection is held: the next call gives up after the wait timeout.
        let waited = store
            .client()
            .await
            .err()
            .expect("the pool has no free connection");
        assert!(matches!(waited, StoreError::Unavailable(_)), "{waited}");
        drop(client);
        assert!(store.client().await.is_ok());
    }

    /// A connection the server ends (as it does to every session when it shuts down) fails the
    /// statement as unavailable, and so does the next statement on that connection; a statement
    /// the server rejects stays a backend error.
    #[tokio::test]
    async fn a_lost_connection_is_unavailable_and_a_bad_statement_is_not() {
        let store = PgStore::connect(&url(), "t_lost", 2).await.unwrap();
        let client = store.client().await.unwrap();
        let fails = async |sql: &str| {
            client
                .batch_execute(sql)
                .await
                .map_err(backend)
                .unwrap_err()
        };
        let rejected = fails("SELECT no_such_column FROM no_such_table").await;
        assert!(matches!(rejected, StoreError::Backend(_)), "{rejected}");
        // Ends this session the way a shutdown does (SQLSTATE 57P01).
        let ended = fails("SELECT pg_terminate_backend(pg_backend_pid())").await;
        assert!(matches!(ended, StoreError::Unavailable(_)), "{ended}");
        let closed = fails("SELECT 1").await;
        assert!(matches!(closed, StoreError::Unavailable(_)), "{closed}");
        drop(client);
        // The pool replaces the lost connection.
        assert!(
            store
                .client()
                .await
                .unwrap()
                .batch_execute("SELECT 1")
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn concurrent_placement_agrees() {
        let schema = format!("t_place_{}", uuid::Uuid::new_v4().simple());
        let store = PgStore::connect(&url(), &schema, 8).await.unwrap();
        let p = "00000000-0000-4000-8000-0000000000cc";
        store.ensure_project(p).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(
                    async move { store.place(p, "slack", &[format!("s{i}")]).await.unwrap() },
                )
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
        assert_eq!(store.placements(p).await.unwrap()[0].shard_ids, results[0]);
        store
            .client()
            .await
            .unwrap()
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    /// Replicas added and removed at once: every add lands with a rank of its own, and
    /// removals never take the last replica, of an integration or a sync.
    #[tokio::test]
    async fn concurrent_replica_changes_keep_one() {
        let schema = format!("t_members_{}", uuid::Uuid::new_v4().simple());
        let store = PgStore::connect(&url(), &schema, 8).await.unwrap();
        let p = "00000000-0000-4000-8000-0000000000ce";
        store.ensure_project(p).await.unwrap();
        store.place(p, "grow", &["g".into()]).await.unwrap();
        let all: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
        store.place(p, "shrink", &all).await.unwrap();
        let sync = |id: &str, shard_ids: Vec<String>| SyncRow {
            id: id.into(),
            project_id: p.into(),
            source: "gdrive".into(),
            owner: "o".into(),
            shard_ids,
            generation: 0,
            records: 0,
            segments: 0,
            created_at_ms: 0,
            last_ingest_at_ms: None,
            fields: Vec::new(),
        };
        store
            .create_sync(&sync("sync-grow", vec!["g".into()]))
            .await
            .unwrap();
        store
            .create_sync(&sync("sync-shrink", all.clone()))
            .await
            .unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let (add, remove) = (format!("t{i}"), format!("s{i}"));
                    let mut done = Vec::new();
                    for kind in [crate::STALE_INTEGRATION, crate::STALE_SYNC] {
                        let key = |k: &str| {
                            if kind == crate::STALE_SYNC {
                                format!("sync-{k}")
                            } else {
                                k.to_string()
                            }
                        };
                        let (grow, shrink) = (key("grow"), key("shrink"));
                        let added = store.add_replica(p, kind, &grow, &add);
                        let removed = store.remove_replica(p, kind, &shrink, &remove);
                        let (added, removed) = tokio::join!(added, removed);
                        done.push((added.unwrap(), removed.unwrap()));
                    }
                    done
                })
            })
            .collect();
        let mut removed = [0, 0];
        for t in tasks {
            for (k, (added, gone)) in t.await.unwrap().into_iter().enumerate() {
                assert!(added);
                removed[k] += usize::from(gone);
            }
        }
        assert_eq!(removed, [7, 7]);
        let placements = store.placements(p).await.unwrap();
        let grow = &placements
            .iter()
            .find(|x| x.integration == "grow")
            .unwrap()
            .shard_ids;
        let shrink = &placements
            .iter()
            .find(|x| x.integration == "shrink")
            .unwrap()
            .shard_ids;
        assert_eq!((grow.len(), grow[0].as_str(), shrink.len()), (9, "g", 1));
        let ranks: i64 = store
            .client()
            .await
            .unwrap()
            .query_one(
                "SELECT count(DISTINCT replica) FROM placements WHERE project_id = $1 AND integration = 'grow'",
                &[&p],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(ranks, 9);
        let grown = store.get_sync(p, "sync-grow").await.unwrap().unwrap();
        assert_eq!(
            (grown.shard_ids.len(), grown.shard_ids[0].as_str()),
            (9, "g")
        );
        let shrunk = store.get_sync(p, "sync-shrink").await.unwrap().unwrap();
        assert_eq!(shrunk.shard_ids.len(), 1);
        store
            .client()
            .await
            .unwrap()
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn concurrent_connection_defaults_stay_unique() {
        let schema = format!("t_conn_{}", uuid::Uuid::new_v4().simple());
        let store = PgStore::connect(&url(), &schema, 8).await.unwrap();
        let p = "00000000-0000-4000-8000-0000000000cd";
        let account = |i: usize, is_default: bool| crate::ConnectionInput {
            integration: "gmail".into(),
            account_id: format!("a{i}@x.com"),
            alias: None,
            status: "active".into(),
            account_type: "private".into(),
            is_default,
            user_info: None,
        };
        // Writers racing on one user: each adds an account, half of them asking for the default,
        // while others delete accounts.
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .upsert_connections(p, "alice", &[account(i, i % 2 == 0)])
                        .await
                        .unwrap();
                    if i % 4 == 3 {
                        store
                            .delete_connection(p, "alice", "gmail", &format!("a{}@x.com", i - 1))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let rows = store.list_connections(p, "alice", &[]).await.unwrap();
        assert_eq!(rows.len(), 12);
        assert_eq!(rows.iter().filter(|r| r.is_default).count(), 1);
        assert!(rows[0].is_default);
        store
            .client()
            .await
            .unwrap()
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }
}
