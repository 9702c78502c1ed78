//! Reranking: a second opinion ([`agentsearch_rerank::Reranker`], an HTTP `/rerank` server or a
//! local cross-encoder) on the best fused candidates of a tool or context search.
//!
//! The first `top_n` candidates of the fused ranking are scored against the query in one call,
//! bounded by `rerank.timeout_ms` and by what is left of the request's deadline, and reordered by
//! that score; candidates below them keep their fused order. Every response says what happened
//! (`rerankOutcome`): `applied`; `failed_open` (the provider failed or timed out: the fused order
//! stands, `degraded: rerank_unavailable`); `skipped_deadline` (too little of the deadline was
//! left to ask: likewise); `disabled_by_request` (`rerank: false`); `disabled_by_deployment` (no
//! provider configured). Context search says `provider_unavailable` for both failures, as its
//! contract names them. The relevancies a response shows stay those of the fused ranking,
//! handed out again in the new order, so they still descend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_common::config::{RerankConfig, RerankProvider};
use agentsearch_rerank::{HttpReranker, LocalReranker, Reranker};

/// Below this much time left before the deadline, the provider is not asked.
pub const MIN_RERANK_TIME: Duration = Duration::from_millis(5);

/// Counter of rerank outcomes by `outcome` and `search` (tools or context).
pub const RERANKS: &str = "agentsearch_reranks_total";

/// The configured provider and its limits.
#[derive(Clone)]
pub struct Rerank {
    pub provider: Arc<dyn Reranker>,
    /// Candidates reranked per query.
    pub top_n: usize,
    /// Per call.
    pub timeout: Duration,
}

impl Rerank {
    /// The provider `[rerank]` names; `None` for `provider = "none"`.
    pub fn from_config(config: &RerankConfig) -> Result<Option<Rerank>, String> {
        let provider: Arc<dyn Reranker> = match config.provider {
            RerankProvider::None => return Ok(None),
            RerankProvider::Http => {
                let url = config
                    .url
                    .as_deref()
                    .ok_or("rerank.url: required with provider = \"http\"")?;
                Arc::new(
                    HttpReranker::new(url, Duration::from_millis(config.timeout_ms))
                        .map_err(|e| format!("rerank.url: {e}"))?,
                )
            }
            RerankProvider::Local => {
                let dir = config
                    .model_dir
                    .as_deref()
                    .ok_or("rerank.model_dir: required with provider = \"local\"")?;
                Arc::new(LocalReranker::load(dir).map_err(|e| format!("rerank.model_dir: {e}"))?)
            }
        };
        Ok(Some(Rerank {
            provider,
            top_n: config.top_n,
            timeout: Duration::from_millis(config.timeout_ms),
        }))
    }
}

/// What reranking did for one query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    FailedOpen,
    SkippedDeadline,
    DisabledByRequest,
    DisabledByDeployment,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::FailedOpen => "failed_open",
            Outcome::SkippedDeadline => "skipped_deadline",
            Outcome::DisabledByRequest => "disabled_by_request",
            Outcome::DisabledByDeployment => "disabled_by_deployment",
        }
    }

    /// The value context search reports: the context contract names both ways of failing open
    /// `provider_unavailable`.
    pub fn as_context_str(self) -> &'static str {
        match self {
            Outcome::FailedOpen | Outcome::SkippedDeadline => "provider_unavailable",
            other => other.as_str(),
        }
    }

    /// The degradation a response reports for it.
    pub fn degraded(self) -> Option<&'static str> {
        match self {
            Outcome::FailedOpen | Outcome::SkippedDeadline => Some("rerank_unavailable"),
            _ => None,
        }
    }
}

/// Asks the provider for one score per text, unless the request or the deployment turned
/// reranking off or the deadline is too near. Scores come back only with [`Outcome::Applied`].
pub(crate) async fn score(
    rerank: Option<&Rerank>,
    requested: bool,
    query: &str,
    texts: &[String],
    deadline: Instant,
    search: &'static str,
) -> (Outcome, Option<Vec<f32>>) {
    let (outcome, scores) = match rerank {
        _ if !requested => (Outcome::DisabledByRequest, None),
        None => (Outcome::DisabledByDeployment, None),
        // Nothing to reorder: nothing to ask.
        Some(_) if texts.is_empty() => (Outcome::Applied, Some(Vec::new())),
        Some(rerank) => {
            let left = deadline.saturating_duration_since(Instant::now());
            if left < MIN_RERANK_TIME {
                (Outcome::SkippedDeadline, None)
            } else {
                let started = Instant::now();
                let answer = rerank
                    .provider
                    .rerank(query, texts, rerank.timeout.min(left))
                    .await;
                metrics::histogram!("agentsearch_rerank_seconds", "search" => search)
                    .record(started.elapsed().as_secs_f64());
                match answer {
                    Ok(scores) if scores.len() == texts.len() => (Outcome::Applied, Some(scores)),
                    Ok(scores) => {
                        tracing::warn!(
                            provider = rerank.provider.name(),
                            texts = texts.len(),
                            scores = scores.len(),
                            "the reranker answered a score count that does not match"
                        );
                        (Outcome::FailedOpen, None)
                    }
                    Err(err) => {
                        tracing::warn!(provider = rerank.provider.name(), error = %err, "reranking failed; the fused order stands");
                        (Outcome::FailedOpen, None)
                    }
                }
            }
        }
    };
    metrics::counter!(RERANKS, "outcome" => outcome.as_str(), "search" => search).increment(1);
    (outcome, scores)
}

/// The order of `scores`' items by score, best first (ties keep their order); NaN last.
pub fn order(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (scores[a], scores[b]);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            (false, false) => y.total_cmp(&x),
        }
        .then(a.cmp(&b))
    });
    order
}

/// Reorders `items` by `scores` (one per item, best first) and hands the relevancies they had,
/// sorted from high to low, out again in the new order, so relevancy still descends.
pub fn reorder<T>(items: &mut Vec<T>, scores: &[f32], relevancy: impl Fn(&mut T) -> &mut f64) {
    debug_assert_eq!(items.len(), scores.len());
    let mut values: Vec<f64> = items.iter_mut().map(|item| *relevancy(item)).collect();
    values.sort_by(|a, b| b.total_cmp(a));
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    for (i, index) in order(scores).into_iter().enumerate() {
        let mut item = slots[index].take().expect("each index once");
        *relevancy(&mut item) = values[i];
        items.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn items_follow_their_scores_and_keep_descending_relevancies() {
        let mut items = vec![("a", 1.0), ("b", 0.6), ("c", 0.2)];
        reorder(&mut items, &[0.1, 0.9, 0.5], |item| &mut item.1);
        assert_eq!(items, vec![("b", 1.0), ("c", 0.6), ("a", 0.2)]);
    }

    #[test]
    fn ties_keep_the_fused_order_and_nan_goes_last() {
        assert_eq!(order(&[0.5, f32::NAN, 0.5, 0.7]), vec![3, 0, 2, 1]);
    }

    #[test]
    fn outcomes_say_what_degraded() {
        assert_eq!(Outcome::Applied.degraded(), None);
        assert_eq!(Outcome::FailedOpen.degraded(), Some("rerank_unavailable"));
        assert_eq!(
            Outcome::SkippedDeadline.degraded(),
            Some("rerank_unavailable")
        );
        assert_eq!(Outcome::DisabledByRequest.degraded(), None);
        assert_eq!(
            Outcome::DisabledByDeployment.as_str(),
            "disabled_by_deployment"
        );
    }

    /// Scores each text by its length and counts its calls.
    struct Lengths(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl Reranker for Lengths {
        fn name(&self) -> &str {
            "lengths"
        }

        async fn rerank(
            &self,
            _query: &str,
            texts: &[String],
            _timeout: Duration,
        ) -> Result<Vec<f32>, agentsearch_rerank::RerankError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|t| t.len() as f32).collect())
        }
    }

    #[tokio::test]
    async fn the_provider_is_asked_only_with_time_left_and_when_wanted() {
        let provider = Arc::new(Lengths(Default::default()));
        let rerank = Rerank {
            provider: provider.clone(),
            top_n: 10,
            timeout: Duration::from_secs(1),
        };
        let texts = vec!["a".to_string(), "abc".to_string()];
        let later = Instant::now() + Duration::from_secs(5);
        let (outcome, scores) = score(Some(&rerank), true, "q", &texts, later, "tools").await;
        assert_eq!(outcome, Outcome::Applied);
        assert_eq!(scores, Some(vec![1.0, 3.0]));
        let soon = Instant::now() + MIN_RERANK_TIME / 2;
        let (outcome, scores) = score(Some(&rerank), true, "q", &texts, soon, "tools").await;
        assert_eq!((outcome, scores), (Outcome::SkippedDeadline, None));
        let (outcome, _) = score(Some(&rerank), false, "q", &texts, later, "tools").await;
        assert_eq!(outcome, Outcome::DisabledByRequest);
        let (outcome, _) = score(None, true, "q", &texts, later, "tools").await;
        assert_eq!(outcome, Outcome::DisabledByDeployment);
        assert_eq!(provider.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    proptest! {
        #[test]
        fn reordering_is_a_permutation_sorted_by_score(
            scores in prop::collection::vec(-10.0f32..10.0, 0..40),
        ) {
            let mut items: Vec<(usize, f64)> = (0..scores.len())
                .map(|i| (i, 1.0 - i as f64 / 64.0))
                .collect();
            let before: Vec<f64> = items.iter().map(|i| i.1).collect();
            reorder(&mut items, &scores, |item| &mut item.1);
            let mut ids: Vec<usize> = items.iter().map(|i| i.0).collect();
            for pair in items.windows(2) {
                prop_assert!(scores[pair[0].0] >= scores[pair[1].0]);
                prop_assert!(pair[0].1 >= pair[1].1);
            }
            let after: Vec<f64> = items.iter().map(|i| i.1).collect();
            prop_assert_eq!(after, before);
            ids.sort();
            prop_assert_eq!(ids, (0..scores.len()).collect::<Vec<_>>());
        }
    }
}
