//! Why a reranker gave no scores. Callers usually keep their own order then.

/// Result of reranking.
pub type Result<T> = std::result::Result<T, RerankError>;

/// Why a reranker gave no scores, by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// The call took longer than its timeout (a local computation may still finish in the
    /// background).
    #[error("reranker timed out")]
    Timeout,
    /// The reranker could not answer: connection refused or reset, an HTTP error status, a failed
    /// local computation.
    #[error("reranker unavailable: {0}")]
    Unavailable(String),
    /// The reranker answered something unusable: not the expected JSON, an index out of range,
    /// duplicated or missing, a score that is not a finite number.
    #[error("reranker answered a malformed response: {0}")]
    Malformed(String),
    /// The reranker cannot be built: an invalid URL, TLS setup, unreadable model files.
    #[error("reranker misconfigured: {0}")]
    Config(String),
}
