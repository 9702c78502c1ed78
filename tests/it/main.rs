//! Integration tests of agentsearch, one module per feature. They need PostgreSQL
//! (`AGENTSEARCH_TEST_POSTGRES`, default the local server) and the model weights
//! (`scripts/fetch-model.sh`), and run on an optimized build (see README).

mod cluster;
mod context;
mod embedded;
mod eval;
mod rest;
mod rest_guard;
mod rest_messages;
mod tools;
