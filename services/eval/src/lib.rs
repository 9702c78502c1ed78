//! Retrieval evaluation: the BEIR dataset layout ([`beir`]) and ranking metrics ([`metrics`]),
//! implemented once and unit-tested on hand-computed examples. Running queries against a server is
//! the binary's job (`agentsearch eval`).

pub mod beir;
pub mod metrics;
