//! Rerank providers for agentsearch: the [`Reranker`] trait, which scores texts against a query,
//! and its implementations: [`HttpReranker`] asks a text-embeddings-inference `/rerank` endpoint,
//! [`LocalReranker`] runs a BERT cross-encoder ([`agentsearch_embed::CrossEncoder`]) in process.
//!
//! It does not own which results are reranked, how scores are combined with the fused ranking, nor
//! what a failure means for a response: callers decide (typically, keep the fused order).

mod error;
mod http;
mod local;

pub use error::{RerankError, Result};
pub use http::{HttpReranker, MAX_ANSWER_BYTES};
pub use local::LocalReranker;

use std::time::Duration;

use async_trait::async_trait;

/// Scores texts by their relevance to a query.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// A short, fixed name of the provider (`http`, `local`), fit for logs and metric labels.
    fn name(&self) -> &str;

    /// One score per text, in input order; higher is more relevant. The call takes at most
    /// `timeout` (then [`RerankError::Timeout`]). No texts, no work: an empty answer.
    async fn rerank(
        &self,
        query: &str,
        texts: &[String],
        timeout: Duration,
    ) -> std::result::Result<Vec<f32>, RerankError>;
}
