//! Retrieval evaluation: the BEIR dataset layout ([`beir`]), ranking metrics ([`metrics`]) and
//! reproducible weakening of a retriever for stress tests ([`degrade`]),
//! implemented once and unit-tested on hand-computed examples. Running queries against a server is
//! the binary's job (`agentsearch eval`).

pub mod beir;
pub mod degrade;
pub mod metrics;
