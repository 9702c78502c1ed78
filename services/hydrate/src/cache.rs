//! The schema cache: the [`SchemaCache`] trait, what it stores ([`CachedValue`]) and the
//! in-process [`MemoryCache`]. The Redis implementation is in `redis.rs`.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use moka::Expiry;
use serde::{Deserialize, Serialize};

use crate::{CacheError, HydratedSchema};

/// What a cache keeps for a key: the provider's schema, or that it had nothing for this user and
/// tool (so it is not asked again until the entry expires). Failures are never cached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CachedValue {
    Hydrated(HydratedSchema),
    /// The provider had nothing special: the static schema stands.
    Static,
}

impl CachedValue {
    /// Approximate bytes held, for the memory cache's capacity.
    fn weight(&self) -> usize {
        match self {
            CachedValue::Hydrated(schema) => {
                64 + schema.parameters_json.len()
                    + schema.description.as_ref().map_or(0, String::len)
            }
            CachedValue::Static => 64,
        }
    }
}

/// A key-value store of hydrated schemas with a time to live per entry.
#[async_trait]
pub trait SchemaCache: Send + Sync {
    async fn get(&self, key: &str) -> Result<Option<CachedValue>, CacheError>;
    async fn put(&self, key: &str, value: &CachedValue, ttl: Duration) -> Result<(), CacheError>;
}

/// Bytes the in-process cache holds by default.
pub const DEFAULT_MEMORY_CACHE_BYTES: u64 = 64 << 20;

/// An in-process cache (moka): never fails, not shared between processes.
#[derive(Clone)]
pub struct MemoryCache {
    entries: moka::future::Cache<String, Entry>,
}

#[derive(Clone)]
struct Entry {
    value: CachedValue,
    ttl: Duration,
}

/// Expires each entry after the time to live it was put with.
struct PerEntryTtl;

impl Expiry<String, Entry> for PerEntryTtl {
    fn expire_after_create(&self, _key: &String, entry: &Entry, _at: Instant) -> Option<Duration> {
        Some(entry.ttl)
    }

    fn expire_after_update(
        &self,
        _key: &String,
        entry: &Entry,
        _at: Instant,
        _remaining: Option<Duration>,
    ) -> Option<Duration> {
        Some(entry.ttl)
    }
}

impl MemoryCache {
    /// A cache holding about `max_bytes` of schemas; the least recently used go first.
    pub fn new(max_bytes: u64) -> Self {
        let entries = moka::future::Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|key: &String, entry: &Entry| {
                u32::try_from(key.len() + entry.value.weight()).unwrap_or(u32::MAX)
            })
            .expire_after(PerEntryTtl)
            .build();
        Self { entries }
    }
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::new(DEFAULT_MEMORY_CACHE_BYTES)
    }
}

#[async_trait]
impl SchemaCache for MemoryCache {
    async fn get(&self, key: &str) -> Result<Option<CachedValue>, CacheError> {
        Ok(self.entries.get(key).await.map(|entry| entry.value))
    }

    async fn put(&self, key: &str, value: &CachedValue, ttl: Duration) -> Result<(), CacheError> {
        let entry = Entry {
            value: value.clone(),
            ttl,
        };
        self.entries.insert(key.to_string(), entry).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_encode_as_tagged_json() {
        let hydrated = CachedValue::Hydrated(HydratedSchema {
            parameters_json: r#"{"type":"object"}"#.to_string(),
            description: None,
        });
        let json = serde_json::to_string(&hydrated).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"hydrated","parametersJson":"{\"type\":\"object\"}"}"#
        );
        assert_eq!(
            serde_json::from_str::<CachedValue>(&json).unwrap(),
            hydrated
        );
        let json = serde_json::to_string(&CachedValue::Static).unwrap();
        assert_eq!(json, r#"{"kind":"static"}"#);
        assert_eq!(
            serde_json::from_str::<CachedValue>(&json).unwrap(),
            CachedValue::Static
        );
    }
}
