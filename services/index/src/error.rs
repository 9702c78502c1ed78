//! Errors of index operations.

use agentsearch_common::Error;

pub type Result<T> = std::result::Result<T, IndexError>;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The caller sent something the index cannot take (wrong vector dimension, bad slug).
    #[error("{field}: {issue}")]
    InvalidArgument { field: String, issue: String },
    #[error("tantivy: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("faiss: {0}")]
    Faiss(#[from] faiss::error::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Files on disk that do not agree with each other or with the schema.
    #[error("corrupt index: {0}")]
    Corrupt(String),
}

impl IndexError {
    pub fn invalid(field: impl Into<String>, issue: impl Into<String>) -> Self {
        IndexError::InvalidArgument {
            field: field.into(),
            issue: issue.into(),
        }
    }
}

impl From<IndexError> for Error {
    fn from(err: IndexError) -> Self {
        match err {
            IndexError::InvalidArgument { field, issue } => Error::invalid(field, issue),
            other => Error::Internal(other.to_string()),
        }
    }
}
