//! What every gRPC method does first: take the caller's request id (or make one) and check the
//! bearer token.

use agentsearch_common::auth::{Auth, authorization_text};
use agentsearch_common::ids::accept_request_id;
use tonic::metadata::MetadataMap;

use crate::status_from_error;

/// The request id to use: the caller's `x-request-id` when it is a sane token, else a new one.
pub fn request_id(metadata: &MetadataMap) -> String {
    accept_request_id(metadata.get("x-request-id").and_then(|v| v.to_str().ok()))
}

/// The request id, once the caller is authenticated; otherwise the `UNAUTHENTICATED` status.
#[allow(clippy::result_large_err)]
pub fn begin(metadata: &MetadataMap, auth: &Auth) -> Result<String, tonic::Status> {
    let request_id = request_id(metadata);
    let authorization = authorization_text(metadata.get("authorization").map(|v| v.as_bytes()))
        .map_err(|e| status_from_error(&e, &request_id))?;
    auth.check(authorization)
        .map_err(|e| status_from_error(&e, &request_id))?;
    Ok(request_id)
}
