//! Errors of providers and caches. Both are absorbed by [`crate::HydrationService`]: a provider
//! error becomes [`crate::Outcome::Failed`], a cache error a miss.

use std::time::Duration;

/// Why a provider could not hydrate a schema.
#[derive(Debug, thiserror::Error)]
pub enum HydrateError {
    /// The request cannot be sent (its static schema is not a JSON object).
    #[error("invalid hydration request: {0}")]
    InvalidRequest(String),
    #[error("provider timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The provider could not be reached (connection refused, reset, DNS).
    #[error("provider unreachable: {0}")]
    Unavailable(String),
    /// The provider answered a status other than 200, 204 or 404.
    #[error("provider answered HTTP {0}")]
    Status(u16),
    #[error("provider answered invalid JSON: {0}")]
    InvalidJson(String),
    /// The provider's `parameters` is not a JSON Schema object.
    #[error("provider's parameters are not an object schema: {0}")]
    InvalidSchema(String),
    /// The provider is misconfigured (bad URL, unreadable file).
    #[error("{0}")]
    Config(String),
}

/// Why a cache call failed; the caller treats it as a miss.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("cache unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be decoded (written by an incompatible version).
    #[error("cached value undecodable: {0}")]
    Codec(String),
}
