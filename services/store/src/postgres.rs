//! The PostgreSQL metadata store of distributed mode. Tables live in one schema (default
//! `agentsearch`), created and migrated on connect under an advisory lock, so several routers
//! starting together migrate once.

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::{
    CatalogEntry, MIGRATIONS, MetadataStore, Placement, Result, StoreError, group_placements,
    join_stale, now_ms, split_stale,
};

/// Key of the advisory lock held while migrating.
const MIGRATION_LOCK: i64 = 0x6167_656e_7473_6561; // "agentsea"

#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl PgStore {
    /// Connects to `url`, creates `schema` if needed, migrates it, and keeps a pool of `pool_size`.
    pub async fn connect(url: &str, schema: &str, pool_size: usize) -> Result<Self> {
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
        config.options(format!("-c search_path={schema}"));
        config.connect_timeout(std::time::Duration::from_secs(5));
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
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
                stale: split_stale(r.get(3)),
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
        let stale: Vec<String> = entries.iter().map(|e| join_stale(&e.stale)).collect();
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
}
