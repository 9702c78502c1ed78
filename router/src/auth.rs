//! Authentication of the public APIs; the rules live in [`agentsearch_common::auth`] so shards
//! apply the same ones.

pub use agentsearch_common::auth::Auth;
