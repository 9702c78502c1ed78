//! Errors across gRPC: a [`tonic::Status`] with rich details (ErrorInfo with the code, BadRequest
//! with the field violations, RequestInfo, RetryInfo) and the whole JSON envelope in the binary
//! metadata key [`ENVELOPE_KEY`], so nothing is lost between a shard, the router and a client.

use std::time::Duration;

use agentsearch_common::error::{Envelope, Error};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// Binary metadata key carrying the JSON error envelope.
pub const ENVELOPE_KEY: &str = "agentsearch-error-bin";

/// The status a client receives for `err`.
pub fn status_from_error(err: &Error, request_id: &str) -> Status {
    if let Error::Internal(text) = err {
        tracing::error!(request_id, error = %text, "internal error");
    }
    let envelope = err.to_envelope(request_id);
    let body = &envelope.error;
    let mut details = ErrorDetails::new();
    details.set_error_info(
        body.code.clone(),
        "agentsearch",
        [("hint".to_string(), body.hint.clone())]
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>(),
    );
    details.set_request_info(request_id, "");
    for v in &body.details {
        details.add_bad_request_violation(v.field.clone(), v.issue.clone());
    }
    if let Some(ms) = body.retry_after_ms {
        details.set_retry_info(Some(Duration::from_millis(ms)));
    }
    let mut metadata = MetadataMap::new();
    if let Ok(json) = serde_json::to_vec(&envelope) {
        metadata.insert_bin(ENVELOPE_KEY, MetadataValue::from_bytes(&json));
    }
    let code = Code::from_i32(err.code().grpc_code());
    Status::with_error_details_and_metadata(code, body.message.clone(), details, metadata)
}

/// The error a status stands for: the envelope when present, otherwise from the gRPC code.
pub fn error_from_status(status: &Status) -> Error {
    if let Some(value) = status.metadata().get_bin(ENVELOPE_KEY)
        && let Ok(bytes) = value.to_bytes()
        && let Ok(envelope) = serde_json::from_slice::<Envelope>(&bytes)
    {
        return Error::from_envelope(&envelope);
    }
    let message = status.message().to_string();
    match status.code() {
        Code::InvalidArgument => Error::invalid("", message),
        Code::NotFound => Error::NotFound(message),
        Code::Unauthenticated => Error::Unauthenticated(message),
        Code::PermissionDenied => Error::PermissionDenied(message),
        Code::Unimplemented => Error::NotSupported {
            message,
            field: None,
        },
        Code::DeadlineExceeded | Code::Cancelled => Error::Timeout(message),
        Code::Unavailable => Error::Unavailable(message),
        Code::ResourceExhausted => Error::RateLimited {
            retry_after: Duration::from_secs(1),
        },
        _ => Error::Internal(format!("{:?}: {message}", status.code())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_round_trips_with_rich_details() {
        let err = Error::invalid("topK", "must be between 1 and 50");
        let status = status_from_error(&err, "req_abc");
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        assert_eq!(details.error_info().unwrap().reason, "REQUEST_INVALID");
        assert_eq!(details.request_info().unwrap().request_id, "req_abc");
        let violations = &details.bad_request().unwrap().field_violations;
        assert_eq!(violations[0].field, "topK");
        let back = error_from_status(&status);
        assert_eq!(back.to_envelope("req_abc"), err.to_envelope("req_abc"));
    }

    #[test]
    fn retryable_errors_carry_retry_info() {
        let status = status_from_error(&Error::Unavailable("shard 2 unreachable".into()), "r");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.get_error_details().retry_info().is_some());
        assert!(matches!(error_from_status(&status), Error::Unavailable(_)));
    }

    #[test]
    fn plain_statuses_map_by_code() {
        assert!(matches!(
            error_from_status(&Status::unavailable("down")),
            Error::Unavailable(_)
        ));
        assert!(matches!(
            error_from_status(&Status::deadline_exceeded("late")),
            Error::Timeout(_)
        ));
        assert!(matches!(
            error_from_status(&Status::internal("x")),
            Error::Internal(_)
        ));
    }
}
