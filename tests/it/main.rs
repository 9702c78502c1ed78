//! Integration tests of agentsearch, one module per feature. They need PostgreSQL
//! (`AGENTSEARCH_TEST_POSTGRES`, default the local server) and the model weights
//! (`scripts/fetch-model.sh`), and run on an optimized build (see README).

mod auth;
mod cluster;
mod context;
mod context_acl;
mod drills;
mod durability;
mod embedded;
mod eval;
mod feedback;
mod lifecycle;
mod limits;
mod membership;
mod metrics;
mod omissions;
mod plans;
mod principals;
mod replication;
mod rerank;
mod rest;
mod rest_guard;
mod rest_messages;
mod tenancy;
mod tls;
mod tools;
mod traces;
mod typed_context;
mod typed_query;
