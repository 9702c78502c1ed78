//! Errors as the caller sees them: one closed table of codes, the [`Error`] enum named by what the
//! caller can do, and the JSON [`Envelope`] every error reaches a client as.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Result with the crate-wide [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Defines [`ErrorCode`] from one table: code, gRPC status code, HTTP status, retryable, hint.
macro_rules! error_codes {
    ($($variant:ident => ($code:literal, $grpc:literal, $http:literal, $retryable:literal, $hint:literal),)*) => {
        /// The closed set of error codes a client can receive.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The stable string clients match on, such as `REQUEST_INVALID`.
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// The gRPC status code (numeric, as in `google.rpc.Code`).
            pub fn grpc_code(self) -> i32 {
                match self { $(ErrorCode::$variant => $grpc,)* }
            }

            /// The HTTP status of a REST response carrying this code.
            pub fn http_status(self) -> u16 {
                match self { $(ErrorCode::$variant => $http,)* }
            }

            /// Whether the same request may succeed when retried.
            pub fn retryable(self) -> bool {
                match self { $(ErrorCode::$variant => $retryable,)* }
            }

            /// The default next step for the caller.
            pub fn hint(self) -> &'static str {
                match self { $(ErrorCode::$variant => $hint,)* }
            }

            /// Parses a code string back (used when an error crosses a process boundary).
            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code { $($code => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

error_codes! {
    RequestInvalid => ("REQUEST_INVALID", 3, 400, false, "Correct the fields named in details and retry."),
    Unauthenticated => ("UNAUTHENTICATED", 16, 401, false, "Send a valid bearer token in the Authorization header."),
    ProjectMismatch => ("PROJECT_MISMATCH", 7, 403, false, "Use a token issued for the project in the path."),
    PermissionDenied => ("PERMISSION_DENIED", 7, 403, false, "The caller may not perform this operation."),
    OriginNotAllowed => ("ORIGIN_NOT_ALLOWED", 7, 403, false, "Call the API from a server, or add the web origin to http.allowed_origins."),
    HostNotAllowed => ("HOST_NOT_ALLOWED", 7, 403, false, "Send a bearer token, use a loopback name such as localhost, or add the host name to http.allowed_hosts."),
    NotFound => ("NOT_FOUND", 5, 404, false, "Check the identifier and retry."),
    MethodNotAllowed => ("METHOD_NOT_ALLOWED", 12, 405, false, "Use the method this route documents."),
    NotSupported => ("NOT_SUPPORTED", 12, 501, false, "This option is not available in this version; remove it from the request."),
    PayloadTooLarge => ("PAYLOAD_TOO_LARGE", 8, 413, false, "Send a smaller request, for example in smaller batches."),
    UnsupportedMediaType => ("UNSUPPORTED_MEDIA_TYPE", 3, 415, false, "Send `Content-Type: application/json`."),
    RateLimited => ("RATE_LIMITED", 8, 429, true, "Wait for retryAfterMs and retry."),
    Unavailable => ("UNAVAILABLE", 14, 503, true, "A backend is unavailable; retry shortly."),
    Timeout => ("TIMEOUT", 4, 504, true, "The request ran past its deadline; retry, possibly with a narrower scope."),
    Internal => ("INTERNAL", 13, 500, true, "Retry; if it persists, report the requestId."),
}

/// The `details` field of an [`Error::UnsupportedMediaType`]: the header to correct.
pub const CONTENT_TYPE_FIELD: &str = "content-type";

/// One invalid field of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldViolation {
    /// The field's path in the request, in the API's own casing (`topK`, `tools[3].name`).
    pub field: String,
    /// What is wrong with it.
    pub issue: String,
}

impl FieldViolation {
    pub fn new(field: impl Into<String>, issue: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            issue: issue.into(),
        }
    }
}

/// Every error of agentsearch, named by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed; the violations name the fields.
    #[error("{message}")]
    InvalidArgument {
        message: String,
        violations: Vec<FieldViolation>,
    },
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    ProjectMismatch(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// A browser request from a web origin the deployment does not allow.
    #[error("{0}")]
    OriginNotAllowed(String),
    /// A request without credentials under a host name that is not a loopback or allowed name.
    #[error("{0}")]
    HostNotAllowed(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// A request option this version does not implement yet.
    #[error("{message}")]
    NotSupported {
        message: String,
        field: Option<String>,
    },
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A body that is not declared as JSON; reported on the `content-type` header.
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("rate limited")]
    RateLimited { retry_after: Duration },
    /// A dependency (shard, database, model) is unreachable or failing.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Timeout(String),
    /// A bug or an unexpected failure. The text is logged, never sent to a client.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// An invalid request with one violation.
    pub fn invalid(field: impl Into<String>, issue: impl Into<String>) -> Self {
        let violation = FieldViolation::new(field, issue);
        Error::InvalidArgument {
            message: "The request payload failed validation.".to_string(),
            violations: vec![violation],
        }
    }

    /// An invalid setting, found when a process starts: the message names the key.
    pub fn config(key: impl Into<String>, issue: impl Into<String>) -> Self {
        let violation = FieldViolation::new(key, issue);
        Error::InvalidArgument {
            message: format!(
                "invalid configuration: {}: {}",
                violation.field, violation.issue
            ),
            violations: vec![violation],
        }
    }

    /// An invalid request with several violations (must not be empty).
    pub fn invalid_many(violations: Vec<FieldViolation>) -> Self {
        Error::InvalidArgument {
            message: "The request payload failed validation.".to_string(),
            violations,
        }
    }

    pub fn internal(err: impl std::fmt::Display) -> Self {
        Error::Internal(err.to_string())
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument { .. } => ErrorCode::RequestInvalid,
            Error::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Error::ProjectMismatch(_) => ErrorCode::ProjectMismatch,
            Error::PermissionDenied(_) => ErrorCode::PermissionDenied,
            Error::OriginNotAllowed(_) => ErrorCode::OriginNotAllowed,
            Error::HostNotAllowed(_) => ErrorCode::HostNotAllowed,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::MethodNotAllowed(_) => ErrorCode::MethodNotAllowed,
            Error::NotSupported { .. } => ErrorCode::NotSupported,
            Error::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            Error::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            Error::RateLimited { .. } => ErrorCode::RateLimited,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::Timeout(_) => ErrorCode::Timeout,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The client-facing envelope. Internal errors carry a generic message: their text is for logs.
    pub fn to_envelope(&self, request_id: &str) -> Envelope {
        let code = self.code();
        let message = match self {
            Error::Internal(_) => "An internal error occurred.".to_string(),
            Error::RateLimited { .. } => "Too many requests.".to_string(),
            other => other.to_string(),
        };
        let details = match self {
            Error::InvalidArgument { violations, .. } => violations.clone(),
            Error::NotSupported {
                field: Some(field),
                message,
            } => vec![FieldViolation::new(field.clone(), message.clone())],
            Error::UnsupportedMediaType(message) => {
                vec![FieldViolation::new(CONTENT_TYPE_FIELD, message.clone())]
            }
            _ => Vec::new(),
        };
        let retry_after_ms = match self {
            Error::RateLimited { retry_after } => Some(retry_after.as_millis() as u64),
            _ if code.retryable() => Some(100),
            _ => None,
        };
        Envelope {
            error: EnvelopeBody {
                code: code.as_str().to_string(),
                message,
                hint: code.hint().to_string(),
                retryable: code.retryable(),
                retry_after_ms,
                request_id: request_id.to_string(),
                details,
            },
        }
    }

    /// Rebuilds an error from an envelope received from another agentsearch process.
    pub fn from_envelope(envelope: &Envelope) -> Error {
        let body = &envelope.error;
        let message = body.message.clone();
        match ErrorCode::parse(&body.code).unwrap_or(ErrorCode::Internal) {
            ErrorCode::RequestInvalid => Error::InvalidArgument {
                message,
                violations: body.details.clone(),
            },
            ErrorCode::Unauthenticated => Error::Unauthenticated(message),
            ErrorCode::ProjectMismatch => Error::ProjectMismatch(message),
            ErrorCode::PermissionDenied => Error::PermissionDenied(message),
            ErrorCode::OriginNotAllowed => Error::OriginNotAllowed(message),
            ErrorCode::HostNotAllowed => Error::HostNotAllowed(message),
            ErrorCode::NotFound => Error::NotFound(message),
            ErrorCode::MethodNotAllowed => Error::MethodNotAllowed(message),
            ErrorCode::NotSupported => Error::NotSupported {
                message,
                field: body.details.first().map(|d| d.field.clone()),
            },
            ErrorCode::PayloadTooLarge => Error::PayloadTooLarge(message),
            ErrorCode::UnsupportedMediaType => Error::UnsupportedMediaType(message),
            ErrorCode::RateLimited => Error::RateLimited {
                retry_after: Duration::from_millis(body.retry_after_ms.unwrap_or(1000)),
            },
            ErrorCode::Unavailable => Error::Unavailable(message),
            ErrorCode::Timeout => Error::Timeout(message),
            ErrorCode::Internal => Error::Internal(message),
        }
    }
}

/// `{"error": {...}}`: the body of every REST error and the binary metadata of every gRPC error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    pub error: EnvelopeBody,
}

/// The fields of an error as a client sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeBody {
    pub code: String,
    pub message: String,
    pub hint: String,
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retry_after_ms: Option<u64>,
    pub request_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub details: Vec<FieldViolation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_parses_back() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
    }

    #[test]
    fn internal_text_never_reaches_the_envelope() {
        let err = Error::Internal("connection to 10.0.0.3:5432 refused: password for admin".into());
        let env = err.to_envelope("req_1");
        assert_eq!(env.error.code, "INTERNAL");
        assert!(!env.error.message.contains("5432"));
    }

    #[test]
    fn envelope_round_trips_through_an_error() {
        let err = Error::invalid("topK", "must be between 1 and 50");
        let env = err.to_envelope("req_2");
        let back = Error::from_envelope(&env);
        assert_eq!(back.to_envelope("req_2"), env);
    }

    #[test]
    fn request_guard_codes() {
        let env = Error::UnsupportedMediaType("the body must be JSON".into()).to_envelope("r");
        assert_eq!(env.error.code, "UNSUPPORTED_MEDIA_TYPE");
        assert_eq!(env.error.details[0].field, "content-type");
        assert!(!env.error.retryable);
        assert_eq!(Error::from_envelope(&env).to_envelope("r"), env);
        for (err, code) in [
            (
                Error::OriginNotAllowed("o".into()),
                ErrorCode::OriginNotAllowed,
            ),
            (Error::HostNotAllowed("h".into()), ErrorCode::HostNotAllowed),
        ] {
            assert_eq!(err.code(), code);
            assert_eq!((code.http_status(), code.grpc_code()), (403, 7));
            let env = err.to_envelope("r");
            assert_eq!(Error::from_envelope(&env).to_envelope("r"), env);
        }
        let code = ErrorCode::UnsupportedMediaType;
        assert_eq!((code.http_status(), code.grpc_code()), (415, 3));
    }

    #[test]
    fn retryable_errors_carry_a_delay() {
        let env = Error::Unavailable("shard down".into()).to_envelope("r");
        assert!(env.error.retryable);
        assert!(env.error.retry_after_ms.is_some());
        let env = Error::invalid("query", "empty").to_envelope("r");
        assert!(env.error.retry_after_ms.is_none());
    }
}
