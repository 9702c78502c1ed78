//! The embedded metadata store of `serve`: one SQLite file in the data dir.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use crate::{
    CatalogEntry, ConnectionInput, ConnectionRow, IntegrationInfo, LostReplica, MIGRATIONS,
    MetadataStore, Placement, PlanOutcome, PlanRow, RANKING_MODEL_VERSIONS_KEPT, RankingModelRow,
    RecordEntry, ReplicaMove, ReplicaSet, Result, ShardDrain, StaleReplica, StoreError, SyncRow,
    ToolRouterSession, attach_principals, connection_inputs, connection_integrations,
    elect_defaults, group_placements, group_rows, join_list, now_ms, record_rows, session_taken,
    sort_connections, sort_integration_infos, sort_syncs, split_list, sync_taken, to_u64, unique,
    unknown_sync,
};

#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating and migrating) the database at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("{}: {e}", dir.display())))?;
        }
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Unavailable(format!("{}: {e}", path.display())))?;
        Self::init(conn)
    }

    /// An in-memory database (tests).
    pub fn in_memory() -> Result<Self> {
        Self::init(Connection::open_in_memory().map_err(backend)?)
    }

    fn init(mut conn: Connection) -> Result<Self> {
        // Another handle on the file (a process stopping, a second one starting) may hold the
        // write lock for a moment: wait for it rather than fail.
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(backend)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
        )
        .map_err(backend)?;
        let tx = conn.transaction().map_err(backend)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)",
        )
        .map_err(backend)?;
        for (version, sql) in MIGRATIONS {
            let done: Option<i64> = tx
                .query_row(
                    "SELECT version FROM schema_migrations WHERE version = ?1",
                    [version],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            if done.is_none() {
                tx.execute_batch(sql).map_err(backend)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version) VALUES (?1)",
                    [version],
                )
                .map_err(backend)?;
            }
        }
        tx.commit().map_err(backend)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&mut conn.lock()))
            .await
            .map_err(|e| StoreError::Backend(e.to_string()))?
            .map_err(backend)
    }
}

/// A list bound as one parameter (a JSON array), read in SQL with `IN (SELECT value FROM
/// json_each(?))`: any length, no SQL built from the items.
fn json_list(items: &[String]) -> String {
    serde_json::Value::from(items).to_string()
}

fn sync_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SyncRow> {
    Ok(SyncRow {
        id: r.get(0)?,
        project_id: r.get(1)?,
        source: r.get(2)?,
        owner: r.get(3)?,
        shard_ids: split_list(&r.get::<_, String>(4)?),
        generation: to_u64(r.get(5)?),
        records: to_u64(r.get(6)?),
        segments: to_u64(r.get(7)?),
        created_at_ms: r.get(8)?,
        last_ingest_at_ms: r.get(9)?,
        fields: crate::fields_of(&r.get::<_, String>(10)?),
    })
}

/// The columns of a plan, in [`plan_row`]'s order.
const PLAN_COLUMNS: &str =
    "id, use_case, embedding, steps, notes, pitfalls, successes, failures, created_at, updated_at";

fn plan_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PlanRow> {
    Ok(PlanRow {
        id: r.get(0)?,
        use_case: r.get(1)?,
        embedding: crate::embedding_of(&r.get::<_, Vec<u8>>(2)?),
        steps: crate::list_of(&r.get::<_, String>(3)?),
        notes: r.get(4)?,
        pitfalls: crate::list_of(&r.get::<_, String>(5)?),
        successes: to_u64(r.get(6)?),
        failures: to_u64(r.get(7)?),
        created_at_ms: r.get(8)?,
        updated_at_ms: r.get(9)?,
    })
}

/// The generation of the sync, if it exists in the project.
fn sync_generation(
    c: &Connection,
    project_id: &str,
    sync_id: &str,
) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached("SELECT generation FROM syncs WHERE id = ?1 AND project_id = ?2")?
        .query_row(params![sync_id, project_id], |r| r.get(0))
        .optional()
}

/// Recomputes the sync's totals from its records, bumps its generation and stamps the ingest;
/// returns the new generation.
fn bump_sync(c: &Connection, sync_id: &str) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "UPDATE syncs SET
           records = (SELECT COUNT(*) FROM sync_records r WHERE r.sync_id = ?1 AND r.generation > 0),
           segments = (SELECT CAST(COALESCE(SUM(r.segments), 0) AS BIGINT) FROM sync_records r WHERE r.sync_id = ?1),
           generation = generation + 1, last_ingest_at = ?2
         WHERE id = ?1 RETURNING generation",
    )?
    .query_row(params![sync_id, now_ms()], |r| r.get(0))
}

/// Integration replica sets from rows (project, integration, shard) ordered by project,
/// integration and replica.
fn integration_sets(rows: Vec<(String, String, String)>) -> Vec<ReplicaSet> {
    let mut out: Vec<ReplicaSet> = Vec::new();
    for (project_id, integration, id) in rows {
        match out.last_mut() {
            Some(last) if last.project_id == project_id && last.key == integration => {
                last.shard_ids.push(id)
            }
            _ => out.push(ReplicaSet {
                project_id,
                kind: crate::STALE_INTEGRATION.into(),
                key: integration,
                shard_ids: vec![id],
            }),
        }
    }
    out
}

/// The placements selected by `sql` (columns: project, integration, shard; ordered by project,
/// integration and replica) as replica sets.
fn select_integration_sets(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<ReplicaSet>> {
    let rows = c
        .prepare_cached(sql)?
        .query_map(params, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(integration_sets(rows))
}

/// The syncs selected by `sql` (columns: project, id, shard ids) as replica sets.
fn select_sync_sets(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<ReplicaSet>> {
    c.prepare_cached(sql)?
        .query_map(params, |r| {
            Ok(ReplicaSet {
                project_id: r.get(0)?,
                kind: crate::STALE_SYNC.into(),
                key: r.get(1)?,
                shard_ids: split_list(&r.get::<_, String>(2)?),
            })
        })?
        .collect()
}

/// Edits the shard list of a sync in one transaction: `edit` changes the list and returns
/// whether it did, and only then is the list written back. An unknown sync, or one of another
/// project, is left alone; returns whether the list changed.
fn edit_sync_shards(
    c: &mut Connection,
    project_id: &str,
    sync_id: &str,
    edit: impl FnOnce(&mut Vec<String>) -> bool,
) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let list: Option<String> = tx
        .query_row(
            "SELECT shard_ids FROM syncs WHERE project_id = ?1 AND id = ?2",
            params![project_id, sync_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(mut ids) = list.map(|l| split_list(&l)) else {
        return Ok(false);
    };
    if !edit(&mut ids) {
        return Ok(false);
    }
    tx.execute(
        "UPDATE syncs SET shard_ids = ?3 WHERE project_id = ?1 AND id = ?2",
        params![project_id, sync_id, join_list(&ids)],
    )?;
    tx.commit()?;
    Ok(true)
}

fn connection_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConnectionRow> {
    Ok(ConnectionRow {
        integration: r.get(0)?,
        account_id: r.get(1)?,
        alias: r.get(2)?,
        status: r.get(3)?,
        account_type: r.get(4)?,
        is_default: r.get(5)?,
        user_info: r.get(6)?,
        created_at_ms: r.get(7)?,
        updated_at_ms: r.get(8)?,
    })
}

/// The user's connections of the integrations in `integrations` (a [`json_list`]; all when it
/// is empty), any order.
fn select_connections(
    c: &Connection,
    project_id: &str,
    user_id: &str,
    integrations: &str,
) -> rusqlite::Result<Vec<ConnectionRow>> {
    c.prepare_cached(
        "SELECT integration, account_id, alias, status, account_type, is_default, user_info,
           created_at_ms, updated_at_ms
         FROM connections
         WHERE project_id = ?1 AND user_id = ?2
           AND (json_array_length(?3) = 0 OR integration IN (SELECT value FROM json_each(?3)))",
    )?
    .query_map(params![project_id, user_id, integrations], connection_row)?
    .collect()
}

/// Gives a default to each integration of `rows` (every row of the user there) that has none,
/// updated at `now`, and returns the rows in list order.
fn elect_and_store_defaults(
    c: &Connection,
    project_id: &str,
    user_id: &str,
    mut rows: Vec<ConnectionRow>,
    now: i64,
) -> rusqlite::Result<Vec<ConnectionRow>> {
    let elected = elect_defaults(&mut rows, now);
    let mut stmt = c.prepare_cached(
        "UPDATE connections SET is_default = TRUE, updated_at_ms = ?5
         WHERE project_id = ?1 AND user_id = ?2 AND integration = ?3 AND account_id = ?4",
    )?;
    for (integration, account_id) in &elected {
        stmt.execute(params![project_id, user_id, integration, account_id, now])?;
    }
    Ok(rows)
}

#[async_trait::async_trait]
impl MetadataStore for SqliteStore {
    async fn ensure_project(&self, project_id: &str) -> Result<()> {
        let p = project_id.to_string();
        self.with(move |c| {
            c.execute(
                "INSERT INTO projects (id, created_at) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
                params![p, now_ms()],
            )
            .map(|_| ())
        })
        .await
    }

    async fn replica_sets(&self) -> Result<Vec<Vec<String>>> {
        let lists = self
            .with(|c| {
                let mut stmt = c.prepare_cached(
                    "SELECT group_concat(shard_id, ',') FROM placements GROUP BY project_id, integration
                     UNION SELECT shard_ids FROM syncs",
                )?;
                let rows = stmt
                    .query_map([], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>();
                rows
            })
            .await?;
        Ok(crate::distinct_sets(lists))
    }

    async fn placements(&self, project_id: &str) -> Result<Vec<Placement>> {
        let p = project_id.to_string();
        let rows = self
            .with(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT integration, shard_id FROM placements WHERE project_id = ?1 ORDER BY integration, replica",
                )?;
                let rows = stmt.query_map([p], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>();
                rows
            })
            .await?;
        Ok(group_placements(rows))
    }

    async fn place(
        &self,
        project_id: &str,
        integration: &str,
        shard_ids: &[String],
    ) -> Result<Vec<String>> {
        let (p, i, ids) = (
            project_id.to_string(),
            integration.to_string(),
            shard_ids.to_vec(),
        );
        self.with(move |c| {
            let tx = c.transaction()?;
            let existing: Vec<String> = {
                let mut stmt = tx.prepare_cached(
                    "SELECT shard_id FROM placements WHERE project_id = ?1 AND integration = ?2 ORDER BY replica",
                )?;
                stmt.query_map(params![p, i], |r| r.get(0))?.collect::<rusqlite::Result<Vec<_>>>()?
            };
            if !existing.is_empty() {
                return Ok(existing);
            }
            for (replica, shard) in ids.iter().enumerate() {
                tx.execute(
                    "INSERT INTO placements (project_id, integration, shard_id, replica) VALUES (?1, ?2, ?3, ?4)",
                    params![p, i, shard, replica as i64],
                )?;
            }
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    async fn catalog_entries(
        &self,
        project_id: &str,
        names: &[String],
    ) -> Result<Vec<CatalogEntry>> {
        let (p, names) = (project_id.to_string(), names.to_vec());
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT name, integration, content_hash, stale_integrations FROM tools WHERE project_id = ?1 AND name = ?2",
            )?;
            let mut out = Vec::new();
            for name in &names {
                let row = stmt
                    .query_row(params![p, name], |r| {
                        Ok(CatalogEntry {
                            name: r.get(0)?,
                            integration: r.get(1)?,
                            content_hash: r.get(2)?,
                            stale: split_list(&r.get::<_, String>(3)?),
                        })
                    })
                    .optional()?;
                out.extend(row);
            }
            Ok(out)
        })
        .await
    }

    async fn put_catalog_entries(&self, project_id: &str, entries: &[CatalogEntry]) -> Result<()> {
        let (p, entries) = (project_id.to_string(), entries.to_vec());
        self.with(move |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO tools (project_id, name, integration, content_hash, stale_integrations, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (project_id, name) DO UPDATE SET integration = excluded.integration,
                       content_hash = excluded.content_hash, stale_integrations = excluded.stale_integrations,
                       updated_at = excluded.updated_at",
                )?;
                let now = now_ms();
                for e in &entries {
                    stmt.execute(params![p, e.name, e.integration, e.content_hash, join_list(&e.stale), now])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn delete_catalog_entries(&self, project_id: &str, names: &[String]) -> Result<u64> {
        let (p, names) = (project_id.to_string(), names.to_vec());
        self.with(move |c| {
            let tx = c.transaction()?;
            let mut deleted = 0u64;
            {
                let mut stmt =
                    tx.prepare_cached("DELETE FROM tools WHERE project_id = ?1 AND name = ?2")?;
                for name in &names {
                    deleted += stmt.execute(params![p, name])? as u64;
                }
            }
            tx.commit()?;
            Ok(deleted)
        })
        .await
    }

    async fn catalog_size(&self, project_id: &str) -> Result<u64> {
        let p = project_id.to_string();
        self.with(move |c| {
            c.query_row(
                "SELECT COUNT(*) FROM tools WHERE project_id = ?1",
                [p],
                |r| r.get::<_, i64>(0),
            )
        })
        .await
        .map(|n| n as u64)
    }

    async fn create_sync(&self, sync: &SyncRow) -> Result<SyncRow> {
        let sync = sync.clone();
        let (id, project_id) = (sync.id.clone(), sync.project_id.clone());
        let row = self
            .with(move |c| {
                let tx = c.transaction()?;
                let now = now_ms();
                tx.execute(
                    "INSERT INTO projects (id, created_at) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
                    params![sync.project_id, now],
                )?;
                tx.execute(
                    "INSERT INTO syncs (id, project_id, source, owner, shard_ids, created_at, fields)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING",
                    params![
                        sync.id,
                        sync.project_id,
                        sync.source,
                        sync.owner,
                        join_list(&sync.shard_ids),
                        now,
                        crate::fields_json(&sync.fields)
                    ],
                )?;
                let row = tx.query_row(
                    "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                     FROM syncs WHERE id = ?1",
                    [&sync.id],
                    sync_row,
                )?;
                tx.commit()?;
                Ok(row)
            })
            .await?;
        if row.project_id != project_id {
            return Err(sync_taken(&id));
        }
        Ok(row)
    }

    async fn get_sync(&self, project_id: &str, sync_id: &str) -> Result<Option<SyncRow>> {
        let (p, s) = (project_id.to_string(), sync_id.to_string());
        self.with(move |c| {
            c.prepare_cached(
                "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                 FROM syncs WHERE id = ?1 AND project_id = ?2",
            )?
            .query_row(params![s, p], sync_row)
            .optional()
        })
        .await
    }

    async fn list_syncs(&self, project_id: &str) -> Result<Vec<SyncRow>> {
        let p = project_id.to_string();
        let mut syncs = self
            .with(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT id, project_id, source, owner, shard_ids, generation, records, segments, created_at, last_ingest_at, fields
                     FROM syncs WHERE project_id = ?1",
                )?;
                let rows = stmt.query_map([p], sync_row)?.collect::<rusqlite::Result<Vec<_>>>();
                rows
            })
            .await?;
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
        let (p, s, ids) = (
            project_id.to_string(),
            sync_id.to_string(),
            json_list(record_ids),
        );
        let (entries, principals) = self
            .with(move |c| {
                if sync_generation(c, &p, &s)?.is_none() {
                    return Ok((Vec::new(), Vec::new()));
                }
                let entries = c
                    .prepare_cached(
                        "SELECT record_id, generation, content_hash, segments FROM sync_records
                         WHERE sync_id = ?1 AND record_id IN (SELECT value FROM json_each(?2))",
                    )?
                    .query_map(params![s, ids], |r| {
                        Ok(RecordEntry {
                            record_id: r.get(0)?,
                            generation: to_u64(r.get(1)?),
                            content_hash: r.get(2)?,
                            segments: to_u64(r.get(3)?),
                            principals: Vec::new(),
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                let principals = c
                    .prepare_cached(
                        "SELECT record_id, principal FROM record_principals
                         WHERE sync_id = ?1 AND record_id IN (SELECT value FROM json_each(?2))",
                    )?
                    .query_map(params![s, ids], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok((entries, principals))
            })
            .await?;
        Ok(attach_principals(entries, principals))
    }

    async fn mark_records_pending(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<()> {
        let (p, s, ids) = (
            project_id.to_string(),
            sync_id.to_string(),
            json_list(&unique(record_ids)),
        );
        let found = self
            .with(move |c| {
                let tx = c.transaction()?;
                if sync_generation(&tx, &p, &s)?.is_none() {
                    return Ok(false);
                }
                tx.execute(
                    "INSERT INTO sync_records (sync_id, record_id, generation, content_hash, segments, updated_at)
                     SELECT ?1, value, 0, '', 0, ?3 FROM json_each(?2) WHERE true
                     ON CONFLICT (sync_id, record_id) DO UPDATE SET content_hash = '',
                       updated_at = excluded.updated_at",
                    params![s, ids, now_ms()],
                )?;
                tx.commit()?;
                Ok(true)
            })
            .await?;
        if found {
            Ok(())
        } else {
            Err(unknown_sync(sync_id))
        }
    }

    async fn put_records(
        &self,
        project_id: &str,
        sync_id: &str,
        entries: &[RecordEntry],
    ) -> Result<u64> {
        let rows = record_rows(entries)?;
        let (p, s) = (project_id.to_string(), sync_id.to_string());
        let generation = self
            .with(move |c| {
                let tx = c.transaction()?;
                let Some(current) = sync_generation(&tx, &p, &s)? else {
                    return Ok(None);
                };
                if rows.is_empty() {
                    return Ok(Some(current));
                }
                {
                    let mut upsert = tx.prepare_cached(
                        "INSERT INTO sync_records (sync_id, record_id, generation, content_hash, segments, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                         ON CONFLICT (sync_id, record_id) DO UPDATE SET generation = excluded.generation,
                           content_hash = excluded.content_hash, segments = excluded.segments,
                           updated_at = excluded.updated_at",
                    )?;
                    let mut revoke = tx.prepare_cached(
                        "DELETE FROM record_principals WHERE sync_id = ?1 AND record_id = ?2",
                    )?;
                    let mut grant = tx.prepare_cached(
                        "INSERT INTO record_principals (sync_id, record_id, principal) VALUES (?1, ?2, ?3)",
                    )?;
                    let now = now_ms();
                    for row in &rows {
                        upsert.execute(params![s, row.record_id, row.generation, row.content_hash, row.segments, now])?;
                        revoke.execute(params![s, row.record_id])?;
                        for principal in &row.principals {
                            grant.execute(params![s, row.record_id, principal])?;
                        }
                    }
                }
                let generation = bump_sync(&tx, &s)?;
                tx.commit()?;
                Ok(Some(generation))
            })
            .await?;
        generation.map(to_u64).ok_or_else(|| unknown_sync(sync_id))
    }

    async fn delete_records(
        &self,
        project_id: &str,
        sync_id: &str,
        record_ids: &[String],
    ) -> Result<(u64, u64)> {
        let (p, s, ids) = (
            project_id.to_string(),
            sync_id.to_string(),
            json_list(record_ids),
        );
        let outcome = self
            .with(move |c| {
                let tx = c.transaction()?;
                let Some(current) = sync_generation(&tx, &p, &s)? else {
                    return Ok(None);
                };
                let deleted = tx.execute(
                    "DELETE FROM sync_records WHERE sync_id = ?1 AND record_id IN (SELECT value FROM json_each(?2))",
                    params![s, ids],
                )?;
                if deleted == 0 {
                    return Ok(Some((0, current)));
                }
                tx.execute(
                    "DELETE FROM record_principals WHERE sync_id = ?1 AND record_id IN (SELECT value FROM json_each(?2))",
                    params![s, ids],
                )?;
                let generation = bump_sync(&tx, &s)?;
                tx.commit()?;
                Ok(Some((deleted as u64, generation)))
            })
            .await?;
        outcome
            .map(|(deleted, generation)| (deleted, to_u64(generation)))
            .ok_or_else(|| unknown_sync(sync_id))
    }

    async fn put_group_members(
        &self,
        project_id: &str,
        sync_id: &str,
        groups: &[(String, Vec<String>)],
    ) -> Result<()> {
        let groups = group_rows(groups);
        let (p, s) = (project_id.to_string(), sync_id.to_string());
        let found = self
            .with(move |c| {
                let tx = c.transaction()?;
                if sync_generation(&tx, &p, &s)?.is_none() {
                    return Ok(false);
                }
                {
                    let mut clear = tx.prepare_cached(
                        "DELETE FROM sync_group_members WHERE sync_id = ?1 AND group_id = ?2",
                    )?;
                    let mut add = tx.prepare_cached(
                        "INSERT INTO sync_group_members (sync_id, group_id, member) VALUES (?1, ?2, ?3)",
                    )?;
                    for (group, members) in &groups {
                        clear.execute(params![s, group])?;
                        for member in members {
                            add.execute(params![s, group, member])?;
                        }
                    }
                }
                tx.commit()?;
                Ok(true)
            })
            .await?;
        if found {
            Ok(())
        } else {
            Err(unknown_sync(sync_id))
        }
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
        let (p, s, members) = (
            project_id.to_string(),
            sync_id.to_string(),
            json_list(members),
        );
        let mut groups = self
            .with(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT DISTINCT group_id FROM sync_group_members
                     WHERE sync_id = ?1 AND EXISTS (SELECT 1 FROM syncs WHERE id = ?1 AND project_id = ?2)
                       AND member IN (SELECT value FROM json_each(?3))",
                )?;
                let rows = stmt.query_map(params![s, p, members], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>();
                rows
            })
            .await?;
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
        let (p, syncs, members) = (
            project_id.to_string(),
            json_list(sync_ids),
            json_list(members),
        );
        let mut rows = self
            .with(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT m.sync_id, m.group_id, m.member
                     FROM sync_group_members m INDEXED BY sync_group_members_by_member
                     JOIN syncs s ON s.id = m.sync_id AND s.project_id = ?1
                     WHERE m.sync_id IN (SELECT value FROM json_each(?2))
                       AND m.member IN (SELECT value FROM json_each(?3))",
                )?;
                stmt.query_map(params![p, syncs, members], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<rusqlite::Result<Vec<(String, String, String)>>>()
            })
            .await?;
        rows.sort_unstable();
        Ok(rows)
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
        let (p, s, principals) = (
            project_id.to_string(),
            sync_id.to_string(),
            json_list(principals),
        );
        self.with(move |c| {
            c.prepare_cached(
                "SELECT CAST(COALESCE(SUM(r.segments), 0) AS BIGINT) FROM sync_records r
                 WHERE r.sync_id = ?1 AND EXISTS (SELECT 1 FROM syncs WHERE id = ?1 AND project_id = ?2)
                   AND r.record_id IN (SELECT a.record_id FROM record_principals a
                     WHERE a.sync_id = ?1 AND a.principal IN (SELECT value FROM json_each(?3)))",
            )?
            .query_row(params![s, p, principals], |r| r.get::<_, i64>(0))
        })
        .await
        .map(to_u64)
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
        let touched = json_list(&connection_integrations(&inputs));
        let (p, u) = (project_id.to_string(), user_id.to_string());
        self.with(move |c| {
            let tx = c.transaction()?;
            let now = now_ms();
            tx.execute(
                "INSERT INTO projects (id, created_at) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
                params![p, now],
            )?;
            {
                // A new default first takes the default from the other accounts, so the upsert
                // never holds two defaults of one integration.
                let mut undefault = tx.prepare_cached(
                    "UPDATE connections SET is_default = FALSE, updated_at_ms = ?5
                     WHERE project_id = ?1 AND user_id = ?2 AND integration = ?3
                       AND account_id <> ?4 AND is_default",
                )?;
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO connections (project_id, user_id, integration, account_id, alias,
                       status, account_type, is_default, user_info, created_at_ms, updated_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
                     ON CONFLICT (project_id, user_id, integration, account_id) DO UPDATE SET
                       alias = excluded.alias, status = excluded.status,
                       account_type = excluded.account_type, is_default = excluded.is_default,
                       user_info = excluded.user_info, updated_at_ms = excluded.updated_at_ms",
                )?;
                for i in inputs.iter().filter(|i| i.is_default) {
                    undefault.execute(params![p, u, i.integration, i.account_id, now])?;
                }
                for i in &inputs {
                    upsert.execute(params![
                        p,
                        u,
                        i.integration,
                        i.account_id,
                        i.alias,
                        i.status,
                        i.account_type,
                        i.is_default,
                        i.user_info,
                        now
                    ])?;
                }
            }
            let rows = select_connections(&tx, &p, &u, &touched)?;
            let rows = elect_and_store_defaults(&tx, &p, &u, rows, now)?;
            tx.commit()?;
            Ok(rows)
        })
        .await
    }

    async fn list_connections(
        &self,
        project_id: &str,
        user_id: &str,
        integrations: &[String],
    ) -> Result<Vec<ConnectionRow>> {
        let (p, u, integrations) = (
            project_id.to_string(),
            user_id.to_string(),
            json_list(integrations),
        );
        let mut rows = self
            .with(move |c| select_connections(c, &p, &u, &integrations))
            .await?;
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
        let (p, u, i, a) = (
            project_id.to_string(),
            user_id.to_string(),
            integration.to_string(),
            account_id.to_string(),
        );
        self.with(move |c| {
            let tx = c.transaction()?;
            let deleted: Option<bool> = tx
                .query_row(
                    "DELETE FROM connections
                     WHERE project_id = ?1 AND user_id = ?2 AND integration = ?3 AND account_id = ?4
                     RETURNING is_default",
                    params![p, u, i, a],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(was_default) = deleted else {
                return Ok(false);
            };
            if was_default {
                let rest = select_connections(&tx, &p, &u, &json_list(&[i]))?;
                elect_and_store_defaults(&tx, &p, &u, rest, now_ms())?;
            }
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    async fn put_feedback(
        &self,
        project_id: &str,
        kind: &str,
        request_id: &str,
        example: &str,
        keep: u32,
    ) -> Result<u64> {
        let (p, k, r, e) = (
            project_id.to_string(),
            kind.to_string(),
            request_id.to_string(),
            example.to_string(),
        );
        self.with(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO feedback (project_id, kind, request_id, example, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (project_id, kind, request_id)
                 DO UPDATE SET example = excluded.example, created_at_ms = excluded.created_at_ms",
                params![p, k, r, e, now_ms()],
            )?;
            tx.execute(
                "DELETE FROM feedback WHERE project_id = ?1 AND kind = ?2 AND request_id IN (
                     SELECT request_id FROM feedback WHERE project_id = ?1 AND kind = ?2
                     ORDER BY created_at_ms DESC, request_id DESC LIMIT -1 OFFSET ?3)",
                params![p, k, i64::from(keep)],
            )?;
            let kept: i64 = tx.query_row(
                "SELECT count(*) FROM feedback WHERE project_id = ?1 AND kind = ?2",
                params![p, k],
                |row| row.get(0),
            )?;
            tx.commit()?;
            Ok(to_u64(kept))
        })
        .await
    }

    async fn feedback(&self, project_id: &str, kind: &str, limit: u32) -> Result<Vec<String>> {
        let (p, k) = (project_id.to_string(), kind.to_string());
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT example FROM feedback WHERE project_id = ?1 AND kind = ?2
                 ORDER BY created_at_ms DESC, request_id DESC LIMIT ?3",
            )?;
            stmt.query_map(params![p, k, i64::from(limit)], |row| row.get(0))?
                .collect()
        })
        .await
    }

    async fn put_ranking_model(
        &self,
        project_id: &str,
        kind: &str,
        params: &str,
        examples: u64,
    ) -> Result<RankingModelRow> {
        let (p, k, m) = (project_id.to_string(), kind.to_string(), params.to_string());
        let examples_i64 = crate::to_i64(examples)?;
        self.with(move |c| {
            let tx = c.transaction()?;
            let version: i64 = tx.query_row(
                "SELECT coalesce(max(version), 0) + 1 FROM ranking_models
                 WHERE project_id = ?1 AND kind = ?2",
                params![p, k],
                |row| row.get(0),
            )?;
            let created_at_ms = now_ms();
            tx.execute(
                "INSERT INTO ranking_models
                     (project_id, kind, version, params, examples, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![p, k, version, m, examples_i64, created_at_ms],
            )?;
            tx.execute(
                "DELETE FROM ranking_models WHERE project_id = ?1 AND kind = ?2 AND version < ?3",
                params![p, k, version - RANKING_MODEL_VERSIONS_KEPT as i64],
            )?;
            tx.commit()?;
            Ok(RankingModelRow {
                project_id: p,
                kind: k,
                version: to_u64(version),
                params: m,
                examples,
                created_at_ms,
            })
        })
        .await
    }

    async fn ranking_model(&self, project_id: &str, kind: &str) -> Result<Option<RankingModelRow>> {
        let (p, k) = (project_id.to_string(), kind.to_string());
        self.with(move |c| {
            c.prepare_cached(
                "SELECT version, params, examples, created_at_ms FROM ranking_models
                 WHERE project_id = ?1 AND kind = ?2 ORDER BY version DESC LIMIT 1",
            )?
            .query_row(params![p, k], |row| {
                Ok(RankingModelRow {
                    project_id: p.clone(),
                    kind: k.clone(),
                    version: to_u64(row.get(0)?),
                    params: row.get(1)?,
                    examples: to_u64(row.get(2)?),
                    created_at_ms: row.get(3)?,
                })
            })
            .optional()
        })
        .await
    }

    async fn mark_stale(&self, marks: &[StaleReplica]) -> Result<()> {
        let marks = marks.to_vec();
        self.with(move |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO stale_replicas (project_id, kind, key, shard_id, epoch, marked_at)
                     VALUES (?1, ?2, ?3, ?4, ?6, ?5)
                     ON CONFLICT (project_id, kind, key, shard_id)
                     DO UPDATE SET epoch = MAX(stale_replicas.epoch + 1, excluded.epoch),
                                   marked_at = excluded.marked_at",
                )?;
                let (now, epoch) = (now_ms(), crate::epoch_now());
                for m in &marks {
                    stmt.execute(params![m.project_id, m.kind, m.key, m.shard_id, now, epoch])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn stale_replicas(&self, project_id: Option<&str>) -> Result<Vec<StaleReplica>> {
        let p = project_id.map(str::to_string);
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT project_id, kind, key, shard_id, epoch, marked_at FROM stale_replicas
                 WHERE ?1 IS NULL OR project_id = ?1
                 ORDER BY project_id, kind, key, shard_id",
            )?;
            let rows = stmt.query_map(params![p], |r| {
                Ok(StaleReplica {
                    project_id: r.get(0)?,
                    kind: r.get(1)?,
                    key: r.get(2)?,
                    shard_id: r.get(3)?,
                    epoch: to_u64(r.get(4)?),
                    marked_at: r.get(5)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn clear_stale(&self, mark: &StaleReplica) -> Result<bool> {
        let m = mark.clone();
        let epoch = crate::to_i64(m.epoch)?;
        self.with(move |c| {
            let n = c.execute(
                "DELETE FROM stale_replicas
                 WHERE project_id = ?1 AND kind = ?2 AND key = ?3 AND shard_id = ?4 AND epoch = ?5",
                params![m.project_id, m.kind, m.key, m.shard_id, epoch],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn write_fence(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        since_ms: i64,
    ) -> Result<Option<String>> {
        let (p, kind, key) = (project_id.to_string(), kind.to_string(), key.to_string());
        self.with(move |c| {
            if kind == crate::STALE_SYNC {
                let generation: Option<i64> = c
                    .query_row(
                        "SELECT generation FROM syncs WHERE project_id = ?1 AND id = ?2",
                        params![p, key],
                        |r| r.get(0),
                    )
                    .optional()?;
                let pending: i64 = c.query_row(
                    "SELECT count(*) FROM sync_records
                     WHERE sync_id = ?1 AND content_hash = '' AND updated_at >= ?2",
                    params![key, since_ms],
                    |r| r.get(0),
                )?;
                return Ok((pending == 0).then(|| format!("{generation:?}")));
            }
            let mut stmt = c.prepare_cached(
                "SELECT name, content_hash, stale_integrations, updated_at FROM tools
                 WHERE project_id = ?1
                   AND (integration = ?2 OR ',' || stale_integrations || ',' LIKE '%,' || ?2 || ',%')",
            )?;
            let rows = stmt
                .query_map(params![p, key], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(crate::tool_fence(&key, rows, since_ms))
        })
        .await
    }

    async fn replicas_on(&self, shard_id: &str) -> Result<Vec<ReplicaSet>> {
        let shard = shard_id.to_string();
        self.with(move |c| {
            let mut out = select_integration_sets(
                c,
                "SELECT project_id, integration, shard_id FROM placements
                 WHERE (project_id, integration) IN
                       (SELECT project_id, integration FROM placements WHERE shard_id = ?1)
                 ORDER BY project_id, integration, replica",
                params![shard],
            )?;
            let syncs = select_sync_sets(
                c,
                "SELECT project_id, id, shard_ids FROM syncs
                 WHERE ',' || shard_ids || ',' LIKE '%,' || ?1 || ',%' ORDER BY project_id, id",
                params![shard],
            )?;
            out.extend(syncs.into_iter().filter(|s| s.shard_ids.contains(&shard)));
            crate::sort_replica_sets(&mut out);
            Ok(out)
        })
        .await
    }

    async fn move_replica(
        &self,
        project_id: &str,
        kind: &str,
        key: &str,
        from: &str,
        to: &str,
    ) -> Result<bool> {
        let (p, kind, key, from, to) = (
            project_id.to_string(),
            kind.to_string(),
            key.to_string(),
            from.to_string(),
            to.to_string(),
        );
        self.with(move |c| {
            if kind == crate::STALE_INTEGRATION {
                let n = c.execute(
                    "UPDATE placements SET shard_id = ?4
                     WHERE project_id = ?1 AND integration = ?2 AND shard_id = ?3
                       AND NOT EXISTS (SELECT 1 FROM placements
                                       WHERE project_id = ?1 AND integration = ?2 AND shard_id = ?4)",
                    params![p, key, from, to],
                )?;
                return Ok(n > 0);
            }
            edit_sync_shards(c, &p, &key, |ids| {
                if ids.contains(&to) {
                    return false;
                }
                let Some(slot) = ids.iter_mut().find(|id| **id == from) else {
                    return false;
                };
                *slot = to;
                true
            })
        })
        .await
    }

    async fn add_replica(&self, project_id: &str, kind: &str, key: &str, to: &str) -> Result<bool> {
        let (p, kind, key, to) = (
            project_id.to_string(),
            kind.to_string(),
            key.to_string(),
            to.to_string(),
        );
        self.with(move |c| {
            if kind == crate::STALE_INTEGRATION {
                let n = c.execute(
                    "INSERT INTO placements (project_id, integration, shard_id, replica)
                     SELECT ?1, ?2, ?3, MAX(replica) + 1 FROM placements
                     WHERE project_id = ?1 AND integration = ?2
                     HAVING COUNT(*) > 0
                        AND NOT EXISTS (SELECT 1 FROM placements
                                        WHERE project_id = ?1 AND integration = ?2 AND shard_id = ?3)",
                    params![p, key, to],
                )?;
                return Ok(n > 0);
            }
            if kind != crate::STALE_SYNC {
                return Ok(false);
            }
            edit_sync_shards(c, &p, &key, |ids| crate::join_shard_list(ids, &to))
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
        let (p, kind, key, from) = (
            project_id.to_string(),
            kind.to_string(),
            key.to_string(),
            from.to_string(),
        );
        self.with(move |c| {
            if kind == crate::STALE_INTEGRATION {
                let n = c.execute(
                    "DELETE FROM placements
                     WHERE project_id = ?1 AND integration = ?2 AND shard_id = ?3
                       AND EXISTS (SELECT 1 FROM placements
                                   WHERE project_id = ?1 AND integration = ?2 AND shard_id <> ?3)",
                    params![p, key, from],
                )?;
                return Ok(n > 0);
            }
            if kind != crate::STALE_SYNC {
                return Ok(false);
            }
            edit_sync_shards(c, &p, &key, |ids| crate::leave_shard_list(ids, &from))
        })
        .await
    }

    async fn all_replicas(&self) -> Result<Vec<ReplicaSet>> {
        self.with(move |c| {
            let mut out = select_integration_sets(
                c,
                "SELECT project_id, integration, shard_id FROM placements
                 ORDER BY project_id, integration, replica",
                [],
            )?;
            out.extend(select_sync_sets(
                c,
                "SELECT project_id, id, shard_ids FROM syncs ORDER BY project_id, id",
                [],
            )?);
            crate::sort_replica_sets(&mut out);
            Ok(out)
        })
        .await
    }

    async fn forget_content(&self, project_id: &str, kind: &str, key: &str) -> Result<()> {
        let (p, kind, key) = (project_id.to_string(), kind.to_string(), key.to_string());
        self.with(move |c| {
            if kind == crate::STALE_INTEGRATION {
                c.execute(
                    "DELETE FROM tools WHERE project_id = ?1 AND integration = ?2",
                    params![p, key],
                )?;
                return Ok(());
            }
            if kind != crate::STALE_SYNC {
                return Ok(());
            }
            let tx = c.transaction()?;
            if sync_generation(&tx, &p, &key)?.is_none() {
                return Ok(());
            }
            tx.execute(
                "DELETE FROM record_principals WHERE sync_id = ?1",
                params![key],
            )?;
            tx.execute("DELETE FROM sync_records WHERE sync_id = ?1", params![key])?;
            tx.execute(
                "UPDATE syncs SET records = 0, segments = 0 WHERE project_id = ?1 AND id = ?2",
                params![p, key],
            )?;
            tx.commit()
        })
        .await
    }

    async fn put_move(&self, movement: &ReplicaMove) -> Result<bool> {
        let m = movement.clone();
        self.with(move |c| {
            let n = c.execute(
                "INSERT INTO replica_moves
                   (project_id, kind, key, from_shard, to_shard, reason, created_at, added_at, removed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (project_id, kind, key) DO NOTHING",
                params![
                    m.project_id,
                    m.kind,
                    m.key,
                    m.from_shard,
                    m.to_shard,
                    m.reason,
                    m.created_at,
                    m.added_at,
                    m.removed_at
                ],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn replica_moves(&self) -> Result<Vec<ReplicaMove>> {
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT project_id, kind, key, from_shard, to_shard, reason, created_at, added_at,
                   removed_at
                 FROM replica_moves ORDER BY project_id, kind, key",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(ReplicaMove {
                    project_id: r.get(0)?,
                    kind: r.get(1)?,
                    key: r.get(2)?,
                    from_shard: r.get(3)?,
                    to_shard: r.get(4)?,
                    reason: r.get(5)?,
                    created_at: r.get(6)?,
                    added_at: r.get(7)?,
                    removed_at: r.get(8)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn update_move(&self, movement: &ReplicaMove) -> Result<bool> {
        let m = movement.clone();
        self.with(move |c| {
            let n = c.execute(
                "UPDATE replica_moves SET added_at = ?4, removed_at = ?5
                 WHERE project_id = ?1 AND kind = ?2 AND key = ?3",
                params![m.project_id, m.kind, m.key, m.added_at, m.removed_at],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn delete_move(&self, project_id: &str, kind: &str, key: &str) -> Result<()> {
        let (p, kind, key) = (project_id.to_string(), kind.to_string(), key.to_string());
        self.with(move |c| {
            c.execute(
                "DELETE FROM replica_moves WHERE project_id = ?1 AND kind = ?2 AND key = ?3",
                params![p, kind, key],
            )
            .map(|_| ())
        })
        .await
    }

    async fn put_drain(&self, drain: &ShardDrain) -> Result<()> {
        let d = drain.clone();
        self.with(move |c| {
            c.execute(
                "INSERT INTO shard_drains (shard_id, lost, requested_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (shard_id)
                 DO UPDATE SET lost = excluded.lost, requested_at = excluded.requested_at",
                params![d.shard_id, i64::from(d.lost), d.requested_at],
            )
            .map(|_| ())
        })
        .await
    }

    async fn drains(&self) -> Result<Vec<ShardDrain>> {
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT shard_id, lost, requested_at FROM shard_drains ORDER BY shard_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(ShardDrain {
                    shard_id: r.get(0)?,
                    lost: r.get::<_, i64>(1)? != 0,
                    requested_at: r.get(2)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn delete_drain(&self, shard_id: &str) -> Result<bool> {
        let shard = shard_id.to_string();
        self.with(move |c| {
            let n = c.execute(
                "DELETE FROM shard_drains WHERE shard_id = ?1",
                params![shard],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn record_lost(&self, lost: &[LostReplica]) -> Result<()> {
        let lost = lost.to_vec();
        self.with(move |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO lost_replicas (project_id, kind, key, shard_id, lost_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (project_id, kind, key)
                     DO UPDATE SET shard_id = excluded.shard_id, lost_at = excluded.lost_at",
                )?;
                for l in &lost {
                    stmt.execute(params![l.project_id, l.kind, l.key, l.shard_id, l.lost_at])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn lost_replicas(&self) -> Result<Vec<LostReplica>> {
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT project_id, kind, key, shard_id, lost_at FROM lost_replicas
                 ORDER BY project_id, kind, key",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(LostReplica {
                    project_id: r.get(0)?,
                    kind: r.get(1)?,
                    key: r.get(2)?,
                    shard_id: r.get(3)?,
                    lost_at: r.get(4)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn clear_lost(&self) -> Result<u64> {
        self.with(move |c| {
            let n = c.execute("DELETE FROM lost_replicas", [])?;
            Ok(n as u64)
        })
        .await
    }

    async fn create_session(&self, session: &ToolRouterSession) -> Result<()> {
        let s = session.clone();
        let id = session.id.clone();
        let inserted = self
            .with(move |c| {
                let n = c.execute(
                    "INSERT INTO tool_router_sessions (id, project_id, user_id, created_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO NOTHING",
                    params![s.id, s.project_id, s.user_id, s.created_at, s.expires_at],
                )?;
                Ok(n > 0)
            })
            .await?;
        if !inserted {
            return Err(session_taken(&id));
        }
        Ok(())
    }

    async fn session(&self, id: &str) -> Result<Option<ToolRouterSession>> {
        let id = id.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "SELECT id, project_id, user_id, created_at, expires_at FROM tool_router_sessions
                 WHERE id = ?1",
            )?
            .query_row(params![id], |r| {
                Ok(ToolRouterSession {
                    id: r.get(0)?,
                    project_id: r.get(1)?,
                    user_id: r.get(2)?,
                    created_at: r.get(3)?,
                    expires_at: r.get(4)?,
                })
            })
            .optional()
        })
        .await
    }

    async fn delete_expired_sessions(&self, now_ms: i64) -> Result<u64> {
        self.with(move |c| {
            let n = c.execute(
                "DELETE FROM tool_router_sessions WHERE expires_at <= ?1",
                params![now_ms],
            )?;
            Ok(n as u64)
        })
        .await
    }

    async fn put_integration_info(
        &self,
        project_id: &str,
        infos: &[IntegrationInfo],
    ) -> Result<()> {
        if infos.is_empty() {
            return Ok(());
        }
        let (p, infos) = (project_id.to_string(), infos.to_vec());
        self.with(move |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO integration_info
                         (project_id, integration, description, guidance, pitfalls)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (project_id, integration)
                     DO UPDATE SET description = excluded.description, guidance = excluded.guidance,
                                   pitfalls = excluded.pitfalls",
                )?;
                for info in &infos {
                    stmt.execute(params![
                        p,
                        info.integration,
                        info.description,
                        info.guidance,
                        crate::pitfalls_text(&info.pitfalls)
                    ])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn integration_info(
        &self,
        project_id: &str,
        integrations: &[String],
    ) -> Result<Vec<IntegrationInfo>> {
        if integrations.is_empty() {
            return Ok(Vec::new());
        }
        let (p, integrations) = (project_id.to_string(), json_list(integrations));
        let mut infos = self
            .with(move |c| {
                c.prepare_cached(
                    "SELECT integration, description, guidance, pitfalls FROM integration_info
                     WHERE project_id = ?1 AND integration IN (SELECT value FROM json_each(?2))",
                )?
                .query_map(params![p, integrations], |r| {
                    Ok(IntegrationInfo {
                        integration: r.get(0)?,
                        description: r.get(1)?,
                        guidance: r.get(2)?,
                        pitfalls: crate::pitfalls_of(&r.get::<_, String>(3)?),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        sort_integration_infos(&mut infos);
        Ok(infos)
    }

    async fn delete_integration_info(&self, project_id: &str, integration: &str) -> Result<bool> {
        let (p, i) = (project_id.to_string(), integration.to_string());
        self.with(move |c| {
            let n = c.execute(
                "DELETE FROM integration_info WHERE project_id = ?1 AND integration = ?2",
                params![p, i],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn record_plan(
        &self,
        project_id: &str,
        outcome: &PlanOutcome,
        max_plans: u64,
    ) -> Result<Option<PlanRow>> {
        let p = project_id.to_string();
        let outcome = outcome.clone();
        self.with(move |c| {
            let tx = c.transaction()?;
            let (successes, failures): (i64, i64) = if outcome.success { (1, 0) } else { (0, 1) };
            let embedding = crate::embedding_bytes(&outcome.embedding);
            let pitfalls = outcome.pitfalls.as_deref().map(crate::list_text);
            let updated = tx
                .prepare_cached(&format!(
                    "UPDATE plans SET use_case = ?3, embedding = ?4, notes = COALESCE(?5, notes),
                            pitfalls = COALESCE(?6, pitfalls), successes = successes + ?7,
                            failures = failures + ?8, updated_at = ?9
                     WHERE project_id = ?1 AND id = ?2
                     RETURNING {PLAN_COLUMNS}"
                ))?
                .query_row(
                    params![
                        p,
                        outcome.id,
                        outcome.use_case,
                        embedding,
                        outcome.notes,
                        pitfalls,
                        successes,
                        failures,
                        outcome.at_ms
                    ],
                    plan_row,
                )
                .optional()?;
            if let Some(plan) = updated {
                tx.commit()?;
                return Ok(Some(plan));
            }
            let count: i64 = tx.query_row(
                "SELECT COUNT(*) FROM plans WHERE project_id = ?1",
                params![p],
                |r| r.get(0),
            )?;
            if to_u64(count) >= max_plans {
                return Ok(None);
            }
            let plan = tx
                .prepare_cached(&format!(
                    "INSERT INTO plans (project_id, id, use_case, embedding, steps, notes, pitfalls,
                                        successes, failures, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, COALESCE(?6, ''), COALESCE(?7, '[]'), ?8, ?9,
                             ?10, ?10)
                     RETURNING {PLAN_COLUMNS}"
                ))?
                .query_row(
                    params![
                        p,
                        outcome.id,
                        outcome.use_case,
                        embedding,
                        crate::list_text(&outcome.steps),
                        outcome.notes,
                        pitfalls,
                        successes,
                        failures,
                        outcome.at_ms
                    ],
                    plan_row,
                )?;
            tx.commit()?;
            Ok(Some(plan))
        })
        .await
    }

    async fn plans(&self, project_id: &str) -> Result<Vec<PlanRow>> {
        let p = project_id.to_string();
        let mut plans = self
            .with(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {PLAN_COLUMNS} FROM plans WHERE project_id = ?1"
                ))?
                .query_map(params![p], plan_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        crate::sort_plans(&mut plans);
        Ok(plans)
    }

    async fn delete_plan(&self, project_id: &str, plan_id: &str) -> Result<bool> {
        let (p, id) = (project_id.to_string(), plan_id.to_string());
        self.with(move |c| {
            let n = c.execute(
                "DELETE FROM plans WHERE project_id = ?1 AND id = ?2",
                params![p, id],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn delete_plans_naming(
        &self,
        project_id: &str,
        tool_names: &[String],
    ) -> Result<Vec<String>> {
        if tool_names.is_empty() {
            return Ok(Vec::new());
        }
        let (p, names) = (project_id.to_string(), json_list(tool_names));
        let mut ids = self
            .with(move |c| {
                c.prepare_cached(
                    "DELETE FROM plans WHERE project_id = ?1 AND EXISTS (
                         SELECT 1 FROM json_each(plans.steps) AS step
                         WHERE step.value IN (SELECT value FROM json_each(?2)))
                     RETURNING id",
                )?
                .query_map(params![p, names], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance_in_memory() {
        crate::conformance::run(&super::SqliteStore::in_memory().unwrap()).await;
    }

    #[tokio::test]
    async fn conformance_on_disk_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.sqlite");
        crate::conformance::run(&super::SqliteStore::open(&path).unwrap()).await;
        let store = super::SqliteStore::open(&path).unwrap();
        use crate::MetadataStore;
        assert_eq!(
            store
                .catalog_size("00000000-0000-4000-8000-0000000000aa")
                .await
                .unwrap(),
            4
        );
    }

    /// A database created before connections existed gains them on open, keeping its data.
    #[tokio::test]
    async fn migrates_a_database_without_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.sqlite");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY);
                 INSERT INTO schema_migrations (version) VALUES (1), (2), (3);",
            )
            .unwrap();
            for (version, sql) in &crate::MIGRATIONS[..3] {
                assert!(*version <= 3);
                conn.execute_batch(sql).unwrap();
            }
            conn.execute("INSERT INTO projects (id, created_at) VALUES ('p', 1)", [])
                .unwrap();
        }
        use crate::MetadataStore;
        let store = super::SqliteStore::open(&path).unwrap();
        let rows = store
            .upsert_connections(
                "p",
                "alice",
                &[crate::ConnectionInput {
                    integration: "gmail".into(),
                    account_id: "a@x.com".into(),
                    alias: None,
                    status: "active".into(),
                    account_type: "private".into(),
                    is_default: false,
                    user_info: None,
                }],
            )
            .await
            .unwrap();
        assert!(rows[0].is_default);
        drop(store);
        let store = super::SqliteStore::open(&path).unwrap();
        assert_eq!(
            store.list_connections("p", "alice", &[]).await.unwrap(),
            rows
        );
    }
}
