//! Context search over synced content: the request and response types and their validation
//! ([`api`]), search and read-around ([`search`]), syncs, records and groups and the protocol of
//! their writes ([`write`]). Its adapters are [`rest`] and [`grpc`].

pub mod api;
pub mod grpc;
pub mod rest;
pub mod rest_types;
pub mod search;
pub(crate) mod write;
