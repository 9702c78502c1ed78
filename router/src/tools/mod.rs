//! Tool search: the request types and their validation ([`api`], [`batch_request`]), search
//! ([`search`]) and batch search ([`batch`]), tool lookup ([`lookup`]), the catalog and its writes
//! ([`catalog`]), integrations' descriptions ([`toolkits`]), users' connections ([`connections`]),
//! feedback and ranking models ([`feedback`]) and recorded plans ([`plans`]). Its adapters are
//! [`rest`] (with `plans::rest`) and [`grpc`].

pub mod api;
pub mod batch;
pub mod batch_request;
pub mod catalog;
pub(crate) mod catalog_write;
pub mod connections;
pub mod feedback;
pub(crate) mod fusion;
pub mod grpc;
pub mod lookup;
pub mod plans;
pub(crate) mod proto;
pub mod rest;
pub(crate) mod rest_body;
pub mod rest_types;
pub mod search;
pub(crate) mod stats_cache;
pub mod toolkits;
