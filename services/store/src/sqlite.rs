//! The embedded metadata store of `serve`: one SQLite file in the data dir.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use crate::{
    CatalogEntry, MIGRATIONS, MetadataStore, Placement, Result, StoreError, group_placements,
    join_stale, now_ms, split_stale,
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
                            stale: split_stale(&r.get::<_, String>(3)?),
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
                    stmt.execute(params![p, e.name, e.integration, e.content_hash, join_stale(&e.stale), now])?;
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
}
