//! Where data lives and how it stays there: placement of integrations and syncs on shards
//! ([`placement`]), the shard clients and fan-out ([`shards`]), replicas that missed writes
//! (`replicas`), write quorums (`quorum`), repair ([`repair`]), drains and rebalances
//! ([`membership`]), per-key write locks ([`locks`]) and readiness ([`health`]). Shared by tool
//! search and context search; it knows neither.

pub mod health;
pub mod locks;
pub mod membership;
pub mod placement;
pub(crate) mod quorum;
pub mod repair;
pub(crate) mod replicas;
pub mod shards;
