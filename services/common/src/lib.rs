//! Types every agentsearch crate shares: the error table and envelope, configuration, ids, the tool
//! model, the content model of context search (ACL tokens, pointers, segmentation), and the
//! internal shard API as a trait. It owns no I/O beyond reading configuration.

pub mod auth;
pub mod config;
pub mod context;
pub mod error;
pub mod hash;
pub mod ids;
pub mod metrics;
pub mod principal;
pub mod secret;
pub mod segment;
pub mod shard;
pub mod simd;
pub mod splitmix;
pub mod telemetry;
pub mod tool;

pub use error::{Error, ErrorCode, FieldViolation, Result};
