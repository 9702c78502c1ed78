//! [`LocalReranker`]: a BERT cross-encoder run in process, on the blocking thread pool.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_embed::CrossEncoder;
use async_trait::async_trait;

use crate::{RerankError, Reranker, Result};

/// Scores texts with an in-process [`CrossEncoder`] (cross-encoder/ms-marco-MiniLM-L-6-v2 or any
/// BERT sequence classifier of that layout).
///
/// Each call runs on tokio's blocking pool, bounded by its timeout. A call that times out returns
/// [`RerankError::Timeout`] at once, but its computation cannot be interrupted: it finishes in the
/// background, holding a blocking thread and CPU until then, and its scores are dropped. One
/// computation runs at a time (it spreads over the encoder's threads already): a call that finds
/// one running, finished or abandoned, is refused as [`RerankError::Unavailable`] at once rather
/// than queued, so load never builds a backlog of CPU work.
pub struct LocalReranker {
    encoder: Arc<CrossEncoder>,
    running: Arc<tokio::sync::Semaphore>,
}

impl LocalReranker {
    /// Loads the cross-encoder in `model_dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`); an unreadable or unsupported model is [`RerankError::Config`].
    pub fn load(model_dir: &Path) -> Result<Self> {
        CrossEncoder::load(model_dir)
            .map(Self::new)
            .map_err(|e| RerankError::Config(e.to_string()))
    }

    /// A reranker on an already loaded encoder (to choose its threads).
    pub fn new(encoder: CrossEncoder) -> Self {
        Self {
            encoder: Arc::new(encoder),
            running: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    pub fn encoder(&self) -> &CrossEncoder {
        &self.encoder
    }
}

#[async_trait]
impl Reranker for LocalReranker {
    fn name(&self) -> &str {
        "local"
    }

    async fn rerank(&self, query: &str, texts: &[String], timeout: Duration) -> Result<Vec<f32>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let permit = self.running.clone().try_acquire_owned().map_err(|_| {
            RerankError::Unavailable("the local reranker is busy with another request".into())
        })?;
        let encoder = self.encoder.clone();
        let (query, texts) = (query.to_string(), texts.to_vec());
        let task = tokio::task::spawn_blocking(move || {
            // Held until the computation ends, even when the caller has stopped waiting.
            let _permit = permit;
            let passages: Vec<&str> = texts.iter().map(String::as_str).collect();
            encoder.score(&query, &passages)
        });
        match tokio::time::timeout(timeout, task).await {
            Err(_) => {
                tracing::debug!(
                    timeout_ms = timeout.as_millis() as u64,
                    "local rerank timed out; its computation finishes in the background"
                );
                Err(RerankError::Timeout)
            }
            Ok(Err(join)) => Err(RerankError::Unavailable(format!(
                "the scoring task failed: {join}"
            ))),
            Ok(Ok(Err(e))) => Err(RerankError::Unavailable(e.to_string())),
            Ok(Ok(Ok(scores))) => Ok(scores),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    fn model() -> (tempfile::TempDir, LocalReranker) {
        let dir = tempfile::tempdir().unwrap();
        agentsearch_embed::write_tiny_model(dir.path(), 42);
        let reranker = LocalReranker::load(dir.path()).unwrap();
        (dir, reranker)
    }

    #[tokio::test]
    async fn scores_are_the_encoders_in_input_order() {
        let (_dir, reranker) = model();
        assert_eq!(reranker.name(), "local");
        let texts: Vec<String> = ["refund a payment", "post a message", "", "track my order"]
            .map(String::from)
            .to_vec();
        let scores = reranker
            .rerank("how do i refund?", &texts, LONG)
            .await
            .unwrap();
        let passages: Vec<&str> = texts.iter().map(String::as_str).collect();
        let direct = reranker
            .encoder()
            .score("how do i refund?", &passages)
            .unwrap();
        assert_eq!(scores, direct);
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
        // One at a time, each text scores the same.
        for (text, score) in texts.iter().zip(&scores) {
            let alone = reranker
                .rerank("how do i refund?", std::slice::from_ref(text), LONG)
                .await
                .unwrap();
            assert!((alone[0] - score).abs() < 1e-6, "{text:?}");
        }
        assert!(reranker.rerank("q", &[], LONG).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_long_computation_times_out() {
        let (dir, _) = model();
        let encoder = CrossEncoder::load(dir.path()).unwrap().with_threads(1);
        let reranker = LocalReranker::new(encoder);
        // Thousands of 64-piece pairs on one thread: far longer than a millisecond.
        let texts: Vec<String> = (0..1000)
            .map(|i| format!("{i} send the invoice to my account ").repeat(12))
            .collect();
        let err = reranker
            .rerank("q", &texts, Duration::from_millis(1))
            .await
            .unwrap_err();
        assert!(matches!(err, RerankError::Timeout), "{err}");
        // The abandoned computation still runs: the next call is refused, not queued.
        let busy = reranker
            .rerank("q", &texts[..1], Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(busy, RerankError::Unavailable(_)), "{busy}");
    }

    #[test]
    fn a_missing_model_is_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = LocalReranker::load(dir.path()).err().unwrap();
        assert!(matches!(err, RerankError::Config(_)), "{err}");
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
