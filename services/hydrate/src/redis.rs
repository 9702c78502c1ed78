//! [`RedisCache`]: hydrated schemas in Redis, shared by every router of a deployment.
//!
//! One multiplexed [`ConnectionManager`] (connected lazily, reconnecting by itself); values are
//! [`CachedValue`] JSON written with `SET key value EX ttl`. Every call is bounded by a short
//! timeout, so a Redis that is down or slow costs at most that much per call.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::{CacheError, CachedValue, SchemaCache};

/// Default bound on each Redis call.
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(50);

/// Bound on establishing a connection (runs in the background of the calls that wait for it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A Redis-backed [`SchemaCache`].
#[derive(Clone)]
pub struct RedisCache {
    manager: ConnectionManager,
    timeout: Duration,
}

impl RedisCache {
    /// A cache at `url` (`redis://host:port[/db]`, or `rediss://` over TLS) whose calls each take at most `timeout`. It
    /// does not connect yet (a Redis that is down does not fail startup), but it must be created
    /// within a Tokio runtime.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, CacheError> {
        Self::with_roots(url, timeout, None)
    }

    /// [`RedisCache::new`]; a `rediss://` URL connects over TLS, checking the server's
    /// certificate against the authorities of `ca_pem` (PEM), else the system's roots.
    pub fn with_roots(
        url: &str,
        timeout: Duration,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, CacheError> {
        let client = if url.starts_with("rediss://") {
            redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: ca_pem.map(<[u8]>::to_vec),
                },
            )
        } else {
            redis::Client::open(url)
        }
        .map_err(|e| CacheError::Unavailable(format!("invalid Redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT.max(timeout)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(0)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        let manager = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| CacheError::Unavailable(e.to_string()))?;
        Ok(Self { manager, timeout })
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `PING`, bounded by the cache's timeout; for readiness checks.
    pub async fn ping(&self) -> Result<(), CacheError> {
        self.run::<String>(redis::cmd("PING")).await.map(|_| ())
    }

    async fn run<T: redis::FromRedisValue>(&self, cmd: redis::Cmd) -> Result<T, CacheError> {
        let mut connection = self.manager.clone();
        match tokio::time::timeout(self.timeout, cmd.query_async::<T>(&mut connection)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_timeout() => Err(CacheError::Timeout(self.timeout)),
            Ok(Err(e)) => Err(CacheError::Unavailable(e.to_string())),
            Err(_) => Err(CacheError::Timeout(self.timeout)),
        }
    }
}

#[async_trait]
impl SchemaCache for RedisCache {
    async fn get(&self, key: &str) -> Result<Option<CachedValue>, CacheError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        let Some(json) = self.run::<Option<Vec<u8>>>(cmd).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&json)
            .map(Some)
            .map_err(|e| CacheError::Codec(e.to_string()))
    }

    async fn put(&self, key: &str, value: &CachedValue, ttl: Duration) -> Result<(), CacheError> {
        let json = serde_json::to_vec(value).map_err(|e| CacheError::Codec(e.to_string()))?;
        // EX takes whole seconds and rejects 0: round up.
        let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(json).arg("EX").arg(seconds.max(1));
        self.run::<()>(cmd).await
    }
}
