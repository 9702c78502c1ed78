//! The wire formats of agentsearch: generated code for the public API (`agentsearch.v1`) and the
//! internal shard API (`agentsearch.shard.v1`), conversions between the internal messages and the
//! domain types of `agentsearch-common`, the codec between errors and gRPC statuses, and the
//! tower layers every gRPC server of agentsearch runs (metrics, admission).

pub mod admission;
pub mod context;
pub mod convert;
pub mod convert_context;
pub mod error_codec;
pub mod grpc_metrics;
pub mod incoming;
pub mod tls;

/// The public API: tool search and catalog maintenance.
pub mod v1 {
    #![allow(clippy::all)]
    tonic::include_proto!("agentsearch.v1");
}

/// The internal router <-> shard API.
pub mod shard_v1 {
    #![allow(clippy::all)]
    tonic::include_proto!("agentsearch.shard.v1");
}

/// Encoded descriptors of every service, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("agentsearch_descriptor");

pub use error_codec::{error_from_status, status_from_error};
