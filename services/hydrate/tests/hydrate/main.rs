//! Tests of agentsearch-hydrate against real services: a local HTTP provider (axum on an ephemeral
//! port) and the Redis at `AGENTSEARCH_TEST_REDIS` (default `redis://127.0.0.1:6379`). Each test
//! uses its own random project id, so tests can share one Redis.

mod cache_suite;
mod config;
mod file_provider;
mod http_provider;
mod single_flight;
mod support;
mod tls;
