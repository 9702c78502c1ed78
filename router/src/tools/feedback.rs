//! Learning from use, per project: a caller reports which tools an agent actually called after a
//! tool search (`POST .../tools/feedback`, tied to the search's request id); the project's
//! ranking model is refit from that feedback in the background, stored in the metadata store,
//! versioned, and used by the project's later searches only.
//!
//! - **The search log** keeps, per router and for `search.feedback_log_secs`, the two candidate
//!   lists of every tool search (names and raw scores), bounded by `search.feedback_log_mib`.
//!   Feedback is refused for a request id it does not hold, so a feedback example always carries
//!   the exact lists that search fused.
//! - **An example** is those lists and the called tools; the store keeps the newest
//!   [`EXAMPLES_KEPT`] of a project.
//! - **The model** is the pair of fusion weights that ranks the called tools best over the
//!   newest [`EXAMPLES_FITTED`] examples (mean nDCG@10, the lists re-fused exactly as a search
//!   fuses them), searched over a grid of directions. It replaces the deployment's weights only
//!   when cross-validation over at least [`MIN_EXAMPLES`] examples shows that choosing this way
//!   gains at least [`MIN_GAIN`] on examples it did not choose on; otherwise the new version
//!   keeps the deployment's weights.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_common::config::SearchConfig;
use agentsearch_common::shard::Hit;
use agentsearch_common::{Error, Result};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::Router;
use crate::tools::fusion::fuse_keyed;

/// The kinds of search feedback is stored under: tool search and context search.
pub const TOOLS: &str = "tools";
pub const CONTEXT: &str = "context";
/// Feedback examples the store keeps per project and kind (the oldest go first).
pub const EXAMPLES_KEPT: u32 = 5_000;
/// Examples a refit reads (the newest).
pub const EXAMPLES_FITTED: u32 = 2_000;
/// Examples needed before a model may depart from the deployment's weights.
pub const MIN_EXAMPLES: usize = 20;
/// Cross-validated mean nDCG@10 gain a model must show to depart from the deployment's weights.
pub const MIN_GAIN: f64 = 0.005;
/// Called tools one feedback may name.
pub const MAX_CALLED: usize = 50;
/// The longest request id feedback may name.
pub const MAX_REQUEST_ID: usize = 128;
/// How long a search waits for the store's answer about its project's model before ranking with
/// what it had (the default weights, or the model it read last).
pub const MODEL_LOOKUP_TIMEOUT: Duration = Duration::from_millis(250);
/// How long a project's model is used before the store is asked again (a model another router
/// refit reaches this one within it).
pub const MODEL_TTL: Duration = Duration::from_secs(10);

/// What a tool search fused: each retriever's candidates, best first, with raw scores (BM25,
/// cosine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lists {
    pub lexical: Vec<(String, f32)>,
    pub dense: Vec<(String, f32)>,
    /// How much of the query each list's best candidates contained (what adaptive fusion read;
    /// `[0, 0]` in searches kept before it was recorded).
    #[serde(default)]
    pub coverage: [f64; 2],
}

impl Lists {
    pub fn of(lexical: &[Hit], dense: &[Hit], coverage: [f64; 2]) -> Self {
        let pairs = |hits: &[Hit]| hits.iter().map(|h| (h.name.clone(), h.score)).collect();
        Self {
            lexical: pairs(lexical),
            dense: pairs(dense),
            coverage,
        }
    }

    /// A context search's record-level lists: keys `{syncId}\n{recordId}` become record ids
    /// `{syncId}.{recordId}`.
    pub fn of_records(
        lexical: &[(String, f64)],
        dense: &[(String, f64)],
        coverage: [f64; 2],
    ) -> Self {
        let pairs = |list: &[(String, f64)]| {
            list.iter()
                .map(|(key, score)| (key.replacen('\n', ".", 1), *score as f32))
                .collect()
        };
        Self {
            lexical: pairs(lexical),
            dense: pairs(dense),
            coverage,
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.lexical
            .iter()
            .chain(&self.dense)
            .any(|(n, _)| n == name)
    }

    fn bytes(&self) -> usize {
        self.lexical
            .iter()
            .chain(&self.dense)
            .map(|(name, _)| name.len() + 32)
            .sum::<usize>()
            + 64
    }
}

/// One feedback example: the lists of a search and the tools called after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Example {
    #[serde(flatten)]
    pub lists: Lists,
    pub called: Vec<String>,
}

/// A version of a project's model, as stored (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelParams {
    /// Lexical and dense fusion weights.
    pub weights: [f64; 2],
    /// Whether `weights` depart from the deployment's.
    pub learned: bool,
    /// Mean nDCG@10 over the examples with the deployment's weights and with `weights`.
    pub default_ndcg: f64,
    pub ndcg: f64,
    /// The cross-validated mean gain of choosing weights from feedback (see [`fit`]).
    #[serde(default)]
    pub cv_gain: f64,
    /// The deployment's fusion settings the model was fitted under ([`fusion_fingerprint`]): a
    /// model is used only under the same settings.
    #[serde(default)]
    pub fusion: String,
}

/// The fusion settings a learned model depends on, and the deployment's weights for `base`.
pub fn fusion_fingerprint(search: &SearchConfig, base: [f64; 2]) -> String {
    format!(
        "{:?} base={:?} rrf_k={} cosine_reference={} cosine_exponent={} margin_exponent={} \
         coverage_gain={} coverage_margin={}",
        search.fusion,
        base,
        search.rrf_k,
        search.cosine_reference,
        search.cosine_exponent,
        search.margin_exponent,
        search.coverage_gain,
        search.coverage_margin
    )
}

/// The model a project's searches use.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectModel {
    pub version: u64,
    pub weights: [f64; 2],
}

/// A project's model as last read from the store: when, the newest version seen (0: none), and
/// the model searches use (`None`: the deployment's weights, also when the newest version learned
/// nothing or was fitted under other settings).
pub(crate) type CachedModel = (Instant, u64, Option<Arc<ProjectModel>>);

/// The searches of the last `feedback_log_secs`, by kind, project and request id.
pub(crate) struct SearchLog {
    entries: Option<moka::sync::Cache<LogKey, Arc<Lists>>>,
}

/// Kind, project, the searching user (empty for service callers) and request id.
type LogKey = (&'static str, String, String, String);

impl SearchLog {
    pub fn new(search: &SearchConfig) -> Self {
        let entries = (search.feedback_log_mib > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(search.feedback_log_mib << 20)
                .weigher(|key: &LogKey, lists: &Arc<Lists>| {
                    u32::try_from(key.1.len() + key.2.len() + key.3.len() + lists.bytes())
                        .unwrap_or(u32::MAX)
                })
                .time_to_live(Duration::from_secs(search.feedback_log_secs.max(1)))
                .build()
        });
        Self { entries }
    }

    pub fn enabled(&self) -> bool {
        self.entries.is_some()
    }

    /// Keeps a search's lists. A search with one list teaches fusion nothing, but its feedback
    /// is still taken (and kept for the refit, where it weighs the same under every weighting).
    pub fn record(
        &self,
        kind: &'static str,
        project_id: &str,
        user: Option<&str>,
        request_id: &str,
        lists: impl FnOnce() -> Lists,
    ) {
        if let Some(entries) = &self.entries {
            entries.insert(key(kind, project_id, user, request_id), Arc::new(lists()));
        }
    }

    fn get(
        &self,
        kind: &'static str,
        project_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Option<Arc<Lists>> {
        self.entries
            .as_ref()?
            .get(&key(kind, project_id, user, request_id))
    }
}

fn key(kind: &'static str, project_id: &str, user: Option<&str>, request_id: &str) -> LogKey {
    (
        kind,
        project_id.to_string(),
        user.unwrap_or_default().to_string(),
        request_id.to_string(),
    )
}

/// What a feedback call reports back.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackOutcome {
    /// Feedback examples the project has now (at most 5,000, the most recent).
    pub examples: u64,
    /// The model version the project's searches use now (0: the deployment's default); a refit
    /// follows in the background.
    pub ranking_model: u64,
}

/// The request field naming what was used after a search of `kind`.
pub fn used_field(kind: &str) -> &'static str {
    if kind == CONTEXT {
        "openedRecords"
    } else {
        "calledTools"
    }
}

/// Validates a feedback request's fields, naming the offending one.
pub fn validate_feedback(kind: &str, request_id: &str, used: &[String]) -> Result<()> {
    let what = if kind == CONTEXT {
        "record the user opened"
    } else {
        "tool the agent called"
    };
    validate_used(request_id, used, used_field(kind), what)
}

fn validate_used(request_id: &str, called: &[String], field: &str, what: &str) -> Result<()> {
    if request_id.trim().is_empty() {
        return Err(Error::invalid(
            "requestId",
            "is required: the x-request-id of the search",
        ));
    }
    if request_id.len() > MAX_REQUEST_ID {
        return Err(Error::invalid(
            "requestId",
            format!("must be at most {MAX_REQUEST_ID} bytes"),
        ));
    }
    if called.is_empty() {
        return Err(Error::invalid(
            field,
            format!("must name at least one {what}"),
        ));
    }
    if called.len() > MAX_CALLED {
        return Err(Error::invalid(
            field,
            format!("must name at most {MAX_CALLED}, got {}", called.len()),
        ));
    }
    let mut seen = HashSet::new();
    for (i, name) in called.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(Error::invalid(format!("{field}[{i}]"), "is empty"));
        }
        if !seen.insert(name.as_str()) {
            return Err(Error::invalid(
                format!("{field}[{i}]"),
                "repeats an earlier one",
            ));
        }
    }
    Ok(())
}

/// Refits in flight, by project: `true` when feedback arrived during the refit (run again).
pub(crate) struct Refits {
    running: Mutex<HashMap<String, bool>>,
    /// One refit at a time in the whole router: at most one core.
    permit: Arc<tokio::sync::Semaphore>,
}

impl Refits {
    pub fn new() -> Self {
        Self {
            running: Mutex::new(HashMap::new()),
            permit: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

impl Router {
    /// The model the project's searches of `kind` use now (`None`: the deployment's weights),
    /// asked of the store at most every [`MODEL_TTL`]. A store failure keeps the default: ranking
    /// never fails for want of a model.
    pub(crate) async fn ranking_model(
        &self,
        kind: &'static str,
        project_id: &str,
    ) -> Option<Arc<ProjectModel>> {
        if !self.search_log.enabled() {
            return None;
        }
        let key = format!("{kind}/{project_id}");
        let cached = self.models.lock().get(&key).cloned();
        if let Some((at, _, model)) = &cached
            && at.elapsed() < MODEL_TTL
        {
            return model.clone();
        }
        let previous = cached.map(|(_, version, model)| (version, model));
        let lookup = tokio::time::timeout(
            MODEL_LOOKUP_TIMEOUT,
            self.store.ranking_model(project_id, kind),
        )
        .await;
        let (version, model) = match lookup {
            Ok(Ok(None)) => (0, None),
            Ok(Ok(Some(row))) => {
                let model = serde_json::from_str::<ModelParams>(&row.params)
                    .inspect_err(|e| {
                        tracing::warn!(project_id, kind, version = row.version, error = %e, "unreadable ranking model");
                    })
                    .ok()
                    .filter(|params| self.usable(kind, params))
                    .map(|params| {
                        Arc::new(ProjectModel {
                            version: row.version,
                            weights: params.weights,
                        })
                    });
                (row.version, model)
            }
            Ok(Err(err)) => {
                tracing::warn!(project_id, kind, error = %err, "ranking model lookup failed; keeping the last one");
                previous.unwrap_or((0, None))
            }
            Err(_) => {
                tracing::warn!(
                    project_id,
                    kind,
                    "ranking model lookup timed out; keeping the last one"
                );
                previous.unwrap_or((0, None))
            }
        };
        self.cache_model(key, version, model)
    }

    /// Caches what searches use for the project after seeing `version`, unless a newer version
    /// is cached already (a refit that finished while this lookup ran); returns what is cached.
    fn cache_model(
        &self,
        key: String,
        version: u64,
        model: Option<Arc<ProjectModel>>,
    ) -> Option<Arc<ProjectModel>> {
        let mut models = self.models.lock();
        let entry = match models.get(&key) {
            Some((_, seen, cached)) if *seen > version => (*seen, cached.clone()),
            _ => (version, model),
        };
        models.insert(key, (Instant::now(), entry.0, entry.1.clone()));
        entry.1
    }

    /// A stored model is used when it learned something under the fusion settings in force.
    fn usable(&self, kind: &str, params: &ModelParams) -> bool {
        params.learned
            && params.fusion == fusion_fingerprint(&self.settings.search, self.base_weights(kind))
            && params.weights.iter().all(|w| w.is_finite() && *w > 0.0)
    }

    /// The deployment's fusion weights for searches of `kind`.
    fn base_weights(&self, kind: &str) -> [f64; 2] {
        if kind == CONTEXT {
            let c = &self.settings.context;
            [c.lexical_weight, c.dense_weight]
        } else {
            let s = &self.settings.search;
            [s.lexical_weight, s.dense_weight]
        }
    }

    /// Records what was used after the search `request_id` of the project by the same caller
    /// (tools the agent called, records the user opened), then refits the project's model of
    /// that kind in the background. Called tools must be in the project's catalog; opened records
    /// among that search's candidates, so nobody learns of a record through feedback.
    pub async fn feedback(
        self: &Arc<Self>,
        kind: &'static str,
        project_id: &str,
        user: Option<&str>,
        request_id: &str,
        used: Vec<String>,
    ) -> Result<FeedbackOutcome> {
        validate_feedback(kind, request_id, &used)?;
        self.feedback_enabled()?;
        let unknown = if kind == CONTEXT {
            None
        } else {
            let known: HashSet<String> = self
                .store
                .catalog_entries(project_id, &used)
                .await?
                .into_iter()
                .map(|e| e.name)
                .collect();
            used.iter().position(|name| !known.contains(name))
        };
        if let Some(i) = unknown {
            return Err(Error::invalid(
                format!("calledTools[{i}]"),
                "is not a tool of this project's catalog",
            ));
        }
        let lists = self.logged(kind, project_id, user, request_id)?;
        if kind == CONTEXT
            && let Some(i) = used.iter().position(|id| !lists.contains(id))
        {
            return Err(Error::invalid(
                format!("openedRecords[{i}]"),
                "was not among that search's candidates",
            ));
        }
        self.keep_example(kind, project_id, request_id, &lists, used)
            .await
    }

    fn feedback_enabled(&self) -> Result<()> {
        if self.search_log.enabled() {
            Ok(())
        } else {
            Err(Error::NotSupported {
                message: "feedback is off in this deployment (search.feedback_log_mib = 0)".into(),
                field: None,
            })
        }
    }

    /// The search `request_id` of the project by the same caller (a user's token for a user's
    /// search, a service caller for a service caller's).
    fn logged(
        &self,
        kind: &'static str,
        project_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<Arc<Lists>> {
        self.search_log
            .get(kind, project_id, user, request_id)
            .ok_or_else(|| {
                let what = if kind == CONTEXT { "context" } else { "tool" };
                Error::invalid(
                    "requestId",
                    format!(
                        "no {what} search of this project by this caller with this request id \
                         in the last {} s on this router",
                        self.settings.search.feedback_log_secs
                    ),
                )
            })
    }

    async fn keep_example(
        self: &Arc<Self>,
        kind: &'static str,
        project_id: &str,
        request_id: &str,
        lists: &Lists,
        called: Vec<String>,
    ) -> Result<FeedbackOutcome> {
        let example = Example {
            lists: lists.clone(),
            called,
        };
        let json = serde_json::to_string(&example)
            .map_err(|e| Error::Internal(format!("feedback example: {e}")))?;
        let examples = self
            .store
            .put_feedback(project_id, kind, request_id, &json, EXAMPLES_KEPT)
            .await?;
        self.schedule_refit(kind, project_id);
        let ranking_model = self
            .ranking_model(kind, project_id)
            .await
            .map_or(0, |m| m.version);
        Ok(FeedbackOutcome {
            examples,
            ranking_model,
        })
    }

    /// Starts a refit of the project's model unless one is running (then that one runs again
    /// when it ends).
    fn schedule_refit(self: &Arc<Self>, kind: &'static str, project_id: &str) {
        let key = format!("{kind}/{project_id}");
        {
            let mut running = self.refits.running.lock();
            if let Some(again) = running.get_mut(&key) {
                *again = true;
                return;
            }
            running.insert(key.clone(), false);
        }
        let router = self.clone();
        let project_id = project_id.to_string();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(
                    router.settings.search.feedback_refit_secs,
                ))
                .await;
                let refit = std::panic::AssertUnwindSafe(router.refit(kind, &project_id));
                match futures::FutureExt::catch_unwind(refit).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(err)) => {
                        tracing::warn!(project_id, kind, error = %err, "ranking model refit failed")
                    }
                    Err(_) => tracing::error!(project_id, kind, "ranking model refit panicked"),
                }
                let mut running = router.refits.running.lock();
                match running.get_mut(&key) {
                    Some(again) if *again => *again = false,
                    _ => {
                        running.remove(&key);
                        break;
                    }
                }
            }
        });
    }

    /// Fits the project's model of `kind` on its newest feedback and stores it as a new version.
    pub(crate) async fn refit(&self, kind: &'static str, project_id: &str) -> Result<ProjectModel> {
        let _permit = self
            .refits
            .permit
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        let rows = self
            .store
            .feedback(project_id, kind, EXAMPLES_FITTED)
            .await?;
        let examples: Vec<Example> = rows
            .iter()
            .filter_map(|row| serde_json::from_str(row).ok())
            .collect();
        let search = self.settings.search.clone();
        let base = self.base_weights(kind);
        let fitted = examples.len() as u64;
        let params = tokio::task::spawn_blocking(move || fit(&search, base, &examples))
            .await
            .map_err(|e| Error::Internal(format!("refit task: {e}")))?;
        let json = serde_json::to_string(&params)
            .map_err(|e| Error::Internal(format!("ranking model: {e}")))?;
        let row = self
            .store
            .put_ranking_model(project_id, kind, &json, fitted)
            .await?;
        let model = ProjectModel {
            version: row.version,
            weights: params.weights,
        };
        tracing::info!(
            project_id,
            kind,
            version = row.version,
            examples = row.examples,
            learned = params.learned,
            weights = ?params.weights,
            ndcg = params.ndcg,
            default_ndcg = params.default_ndcg,
            cv_gain = params.cv_gain,
            "ranking model refit"
        );
        let used = self.usable(kind, &params).then(|| Arc::new(model.clone()));
        self.cache_model(format!("{kind}/{project_id}"), row.version, used);
        Ok(model)
    }
}

/// The directions the refit tries: lexical and dense weights `(cos a, sin a)` for `a` from 5 to
/// 85 degrees in steps of 5 (only the ratio of the weights changes a ranking). Neither weight is
/// ever 0: a model never switches a retriever off, so a tool only one retriever finds can still
/// be found.
fn grid() -> impl Iterator<Item = [f64; 2]> {
    (1..=17).map(|step| {
        let angle = f64::from(step) * 5.0_f64.to_radians();
        let (sin, cos) = angle.sin_cos();
        [cos.max(0.0), sin.max(0.0)]
    })
}

/// Folds of the cross-validation that decides whether a model departs from the default.
const FOLDS: usize = 5;

/// The model the examples support. Each weighting (the deployment's and the grid's) is scored on
/// every example; the best on all examples becomes the model only when choosing that way
/// generalises: five-fold cross-validation (choose on four folds, score on the fifth) must show a
/// mean gain over the deployment's weights of at least [`MIN_GAIN`], over at least
/// [`MIN_EXAMPLES`] examples. Otherwise the model keeps the deployment's weights. Pure and
/// deterministic; ties go to the deployment's weights, then to the first direction of the grid.
pub fn fit(search: &SearchConfig, base: [f64; 2], examples: &[Example]) -> ModelParams {
    let mut weightings = vec![base];
    weightings.extend(grid().filter(|w| *w != base));
    // scores[w][i]: nDCG@10 of example i under weighting w.
    let scores: Vec<Vec<f64>> = weightings
        .iter()
        .map(|w| {
            examples
                .iter()
                .map(|e| example_ndcg(search, *w, e))
                .collect()
        })
        .collect();
    let mean_over = |w: usize, keep: &dyn Fn(usize) -> bool| -> f64 {
        let (sum, n) = scores[w]
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .fold((0.0, 0usize), |(s, n), (_, x)| (s + x, n + 1));
        if n == 0 { 0.0 } else { sum / n as f64 }
    };
    let best_over = |keep: &dyn Fn(usize) -> bool| -> usize {
        let mut best = (0usize, mean_over(0, keep));
        for w in 1..weightings.len() {
            let m = mean_over(w, keep);
            if m > best.1 + 1e-12 {
                best = (w, m);
            }
        }
        best.0
    };
    let n = examples.len();
    let default_ndcg = mean_over(0, &|_| true);
    let mut cv_gain = 0.0;
    if n >= MIN_EXAMPLES {
        for fold in 0..FOLDS {
            let chosen = best_over(&|i| i % FOLDS != fold);
            cv_gain += (fold..n)
                .step_by(FOLDS)
                .map(|i| scores[chosen][i] - scores[0][i])
                .sum::<f64>();
        }
        cv_gain /= n as f64;
    }
    let best = best_over(&|_| true);
    let learned = n >= MIN_EXAMPLES && best != 0 && cv_gain >= MIN_GAIN;
    let chosen = if learned { best } else { 0 };
    ModelParams {
        weights: weightings[chosen],
        learned,
        default_ndcg,
        ndcg: mean_over(chosen, &|_| true),
        cv_gain,
        fusion: fusion_fingerprint(search, base),
    }
}

fn pairs(list: &[(String, f32)]) -> Vec<(&str, f64)> {
    list.iter()
        .map(|(name, score)| (name.as_str(), f64::from(*score)))
        .collect()
}

fn example_ndcg(search: &SearchConfig, weights: [f64; 2], e: &Example) -> f64 {
    let (fused, _) = fuse_keyed(
        search,
        weights,
        &pairs(&e.lists.lexical),
        &pairs(&e.lists.dense),
        e.lists.coverage,
    );
    let ranking: Vec<&str> = fused.iter().take(10).map(|f| f.key).collect();
    ndcg_at_10(&ranking, &e.called)
}

/// nDCG@10 with binary gains: `relevant` are the tools called.
pub fn ndcg_at_10(ranking: &[&str], relevant: &[String]) -> f64 {
    let gain = |i: usize| 1.0 / (i as f64 + 2.0).log2();
    let dcg: f64 = ranking
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, name)| relevant.iter().any(|r| r == *name))
        .map(|(i, _)| gain(i))
        .sum();
    let ideal: f64 = (0..relevant.len().min(10)).map(gain).sum();
    if ideal > 0.0 { dcg / ideal } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples_keep_their_coverage_and_those_stored_without_it_still_read() {
        let mut e = example(&[("a", 3.0), ("b", 1.0)], &[("b", 0.6)], &["a"]);
        e.lists.coverage = [0.75, 0.25];
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Example>(&json).unwrap(), e);
        let old = r#"{"lexical":[["a",3.0],["b",1.0]],"dense":[["b",0.6]],"called":["a"]}"#;
        let read: Example = serde_json::from_str(old).unwrap();
        assert_eq!(read.lists.coverage, [0.0, 0.0]);
        assert_eq!(read.lists.lexical, e.lists.lexical);
        assert_eq!(read.called, e.called);
    }

    fn example(lexical: &[(&str, f32)], dense: &[(&str, f32)], called: &[&str]) -> Example {
        let own = |list: &[(&str, f32)]| list.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        Example {
            lists: Lists {
                lexical: own(lexical),
                dense: own(dense),
                coverage: [0.0, 0.0],
            },
            called: called.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn ndcg_counts_binary_gains() {
        let called = vec!["a".to_string()];
        assert_eq!(ndcg_at_10(&["a", "b"], &called), 1.0);
        assert!((ndcg_at_10(&["b", "a"], &called) - 1.0 / 3f64.log2()).abs() < 1e-12);
        assert_eq!(ndcg_at_10(&["b"], &called), 0.0);
        assert_eq!(ndcg_at_10(&["a"], &[]), 0.0);
    }

    #[test]
    fn too_few_examples_keep_the_default() {
        let search = SearchConfig::default();
        let e = example(&[("a", 9.0), ("b", 1.0)], &[("b", 0.9), ("a", 0.1)], &["a"]);
        let params = fit(
            &search,
            [search.lexical_weight, search.dense_weight],
            &vec![e; MIN_EXAMPLES - 1],
        );
        assert!(!params.learned);
        assert_eq!(params.weights, [search.lexical_weight, search.dense_weight]);
    }

    /// When the called tool is always lexical's first and dense's last, the model learns to
    /// trust lexical; the other way round, dense.
    #[test]
    fn learns_the_retriever_the_callers_agree_with() {
        let search = SearchConfig::default();
        let lexical_right: Vec<Example> = (0..MIN_EXAMPLES)
            .map(|i| {
                let names: Vec<String> = (0..12).map(|k| format!("t{i}_{k}")).collect();
                let lex: Vec<(&str, f32)> = names
                    .iter()
                    .enumerate()
                    .map(|(k, n)| (n.as_str(), 20.0 - k as f32))
                    .collect();
                let den: Vec<(&str, f32)> = names
                    .iter()
                    .rev()
                    .enumerate()
                    .map(|(k, n)| (n.as_str(), 0.9 - 0.05 * k as f32))
                    .collect();
                example(&lex, &den, &[names[0].as_str()])
            })
            .collect();
        let params = fit(
            &search,
            [search.lexical_weight, search.dense_weight],
            &lexical_right,
        );
        assert!(params.learned, "{params:?}");
        assert!(params.weights[0] > params.weights[1], "{params:?}");
        assert!(params.ndcg > params.default_ndcg + MIN_GAIN);
        assert!(params.cv_gain >= MIN_GAIN, "{params:?}");
        let dense_right: Vec<Example> = lexical_right.iter().map(example_swapped).collect();
        let params = fit(
            &search,
            [search.lexical_weight, search.dense_weight],
            &dense_right,
        );
        assert!(
            !params.learned || params.weights[1] > params.weights[0],
            "{params:?}"
        );
    }

    fn example_swapped(e: &Example) -> Example {
        let last = e.lists.lexical.last().unwrap().0.clone();
        Example {
            lists: e.lists.clone(),
            called: vec![last],
        }
    }

    #[test]
    fn feedback_fields_are_checked() {
        let ok = vec!["A".to_string()];
        assert!(validate_feedback(TOOLS, "r1", &ok).is_ok());
        let field = |r: Result<()>| match r.unwrap_err() {
            Error::InvalidArgument { violations, .. } => violations[0].field.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(field(validate_feedback(TOOLS, " ", &ok)), "requestId");
        assert_eq!(
            field(validate_feedback(TOOLS, &"x".repeat(129), &ok)),
            "requestId"
        );
        assert_eq!(field(validate_feedback(TOOLS, "r1", &[])), "calledTools");
        let many: Vec<String> = (0..=MAX_CALLED).map(|i| format!("T{i}")).collect();
        assert_eq!(field(validate_feedback(TOOLS, "r1", &many)), "calledTools");
        let repeated = vec!["A".to_string(), "B".to_string(), "A".to_string()];
        assert_eq!(
            field(validate_feedback(TOOLS, "r1", &repeated)),
            "calledTools[2]"
        );
        let empty = vec!["A".to_string(), String::new()];
        assert_eq!(
            field(validate_feedback(TOOLS, "r1", &empty)),
            "calledTools[1]"
        );
        assert_eq!(
            field(validate_feedback(CONTEXT, "r1", &[])),
            "openedRecords"
        );
        assert_eq!(
            field(validate_feedback(CONTEXT, "r1", &repeated)),
            "openedRecords[2]"
        );
    }

    fn arb_example() -> impl Strategy<Value = Example> {
        (
            prop::collection::vec(0.0f32..30.0, 1..15),
            prop::collection::vec(-1.0f32..1.0, 1..15),
            0usize..20,
        )
            .prop_map(|(lex, den, called)| {
                let mut lex = lex;
                let mut den = den;
                lex.sort_by(|a, b| b.total_cmp(a));
                den.sort_by(|a, b| b.total_cmp(a));
                Example {
                    lists: Lists {
                        lexical: lex
                            .iter()
                            .enumerate()
                            .map(|(i, s)| (format!("t{i}"), *s))
                            .collect(),
                        dense: den
                            .iter()
                            .enumerate()
                            .map(|(i, s)| (format!("t{}", (i * 7) % 20), *s))
                            .collect(),
                        coverage: [0.0, 0.0],
                    },
                    called: vec![format!("t{called}")],
                }
            })
    }

    proptest! {
        /// A fit is deterministic, never scores below the deployment's weights on its own
        /// examples, and keeps the deployment's weights unless it learned something.
        #[test]
        fn fit_never_loses_on_its_examples(examples in prop::collection::vec(arb_example(), 0..40)) {
            let search = SearchConfig::default();
            let a = fit(&search, [search.lexical_weight, search.dense_weight], &examples);
            prop_assert_eq!(&a, &fit(&search, [search.lexical_weight, search.dense_weight], &examples));
            prop_assert!(a.ndcg >= a.default_ndcg);
            prop_assert!(a.weights.iter().all(|w| w.is_finite() && *w >= 0.0));
            if !a.learned {
                prop_assert_eq!(a.weights, [search.lexical_weight, search.dense_weight]);
            } else {
                prop_assert!(examples.len() >= MIN_EXAMPLES);
                prop_assert!(a.cv_gain >= MIN_GAIN);
                prop_assert!(a.ndcg > a.default_ndcg);
            }
        }
    }
}
