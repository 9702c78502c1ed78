//! Per-user tool schema hydration. Some integrations declare that their tools' parameters depend on
//! the user (a CRM whose "create record" tool carries the user's custom fields); for each returned
//! tool of such an integration the router asks this crate for the user's schema.
//!
//! It owns: the [`Hydrator`] trait and its providers ([`HttpHydrator`] posts to a service,
//! [`FileHydrator`] reads a JSON file), the [`SchemaCache`] trait with a Redis ([`RedisCache`]) and
//! an in-process ([`MemoryCache`]) implementation, and [`HydrationService`], a read-through cache in
//! front of the providers with one provider call in flight per key. Its HTTP provider's client,
//! [`outbound`], is public: the rerank crate's HTTP reranker uses it too.
//!
//! It does not own: which integrations are hydrated in a response, nor how a failure is shown to
//! the client (the router uses the static schema and flags the tool degraded), nor the catalog.

mod cache;
mod error;
mod file;
mod http;
pub mod outbound;
mod redis;
mod request;
mod service;

pub use cache::{CachedValue, DEFAULT_MEMORY_CACHE_BYTES, MemoryCache, SchemaCache};
pub use error::{CacheError, HydrateError};
pub use file::FileHydrator;
pub use http::HttpHydrator;
pub use redis::{DEFAULT_REDIS_TIMEOUT, RedisCache};
pub use request::{HydratedSchema, HydrationRequest, check_object_schema};
pub use service::{
    DEFAULT_TTL, HydrationService, HydrationServiceBuilder, HydrationStats, Outcome,
};

use async_trait::async_trait;

/// A source of per-user tool schemas.
#[async_trait]
pub trait Hydrator: Send + Sync {
    /// The user's schema of `req.tool`, or `Ok(None)` when the provider has nothing special for
    /// this user and tool (the static schema stands; not a failure). A returned schema must be a
    /// JSON Schema object (`"type": "object"`).
    async fn hydrate(&self, req: &HydrationRequest)
    -> Result<Option<HydratedSchema>, HydrateError>;
}
