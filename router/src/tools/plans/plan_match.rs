//! Recommending recorded plans ([`crate::tools::plans`]) to the queries of a multi-query search. Per
//! query, the project's plans are ranked the way tools are: BM25 over their use-case texts (the
//! analysis of the tool indexes: identifier pieces, lowercase, English stop words, Snowball
//! stemming) and the cosine between the query's use-case embedding and each plan's, fused by the
//! deployment's fusion ([`crate::tools::search::fuse_keyed`], `search.fusion` and its weights). The best
//! fused plan is recommended when its cosine is at least `plans.min_similarity`.
//!
//! Only plans that may be recommended take part: at least one success and no more failures than
//! successes, every step a tool of the catalog ([`crate::tools::plans`] keeps only those), and every step
//! allowed by the request: of the requested `integrations`, of integrations the user has connected
//! with `connectedOnly`, and, with `maxSideEffect` or `categories`, within them (checked on the
//! recommended plan's tools, from the search's candidates or the shards).
//!
//! A project keeps at most [`crate::tools::plans::MAX_PLANS`] plans, indexed once per cache period, so
//! ranking them is a few postings and at most that many dot products per query.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use agentsearch_common::config::SearchConfig;
use agentsearch_common::tool::{STOP_WORDS, SideEffect, identifier_pieces};
use futures::future::join_all;
use serde::Serialize;

use crate::Router;
use crate::tools::batch_request::BatchRequest;
use crate::tools::plans::difficulty;
use crate::tools::search::{Ranked, coverage_terms, fuse_keyed};
use agentsearch_fusion::coverage_pair;

/// BM25 saturation and length normalisation over plans' use cases.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A plan a search may recommend, as the plan cache holds it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CachedPlan {
    pub id: String,
    pub use_case: String,
    /// The use case's embedding (unit length once indexed).
    pub embedding: Vec<f32>,
    pub steps: Vec<String>,
    /// The integration of each step, from the catalog.
    pub integrations: Vec<String>,
    pub notes: String,
    pub pitfalls: Vec<String>,
    pub successes: u64,
    pub failures: u64,
}

/// A project's plans, indexed for ranking.
#[derive(Debug, Default)]
pub(crate) struct PlanIndex {
    plans: Vec<CachedPlan>,
    /// Analyzed term -> (plan, term frequency).
    postings: HashMap<String, Vec<(usize, f64)>>,
    /// Analyzed terms of each plan's use case.
    lengths: Vec<f64>,
    average_length: f64,
}

/// The terms BM25 matches in `text`: identifier pieces, lowercased, without English stop words,
/// stemmed (as the tool indexes analyze text).
pub(crate) fn analyze(text: &str) -> Vec<String> {
    let stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
    identifier_pieces(text)
        .into_iter()
        .filter(|piece| !STOP_WORDS.contains(&piece.as_str()))
        .map(|piece| stemmer.stem(&piece).into_owned())
        .collect()
}

fn unit(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm.is_finite() && norm > 0.0 {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}

/// Best first; equal scores in id order.
fn sorted(mut hits: Vec<(&str, f64)>) -> Vec<(&str, f64)> {
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    hits
}

impl PlanIndex {
    pub(crate) fn build(mut plans: Vec<CachedPlan>) -> Self {
        let mut postings: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(plans.len());
        for (i, plan) in plans.iter_mut().enumerate() {
            unit(&mut plan.embedding);
            let terms = analyze(&plan.use_case);
            lengths.push(terms.len() as f64);
            let mut frequencies: HashMap<String, f64> = HashMap::new();
            for term in terms {
                *frequencies.entry(term).or_default() += 1.0;
            }
            for (term, frequency) in frequencies {
                postings.entry(term).or_default().push((i, frequency));
            }
        }
        let average_length = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f64>() / lengths.len() as f64
        };
        Self {
            plans,
            postings,
            lengths,
            average_length,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }

    /// Approximate bytes held (the plan cache's weight).
    pub(crate) fn weight(&self) -> usize {
        self.plans
            .iter()
            .map(|p| {
                std::mem::size_of_val(p.embedding.as_slice())
                    + p.use_case.len() * 2
                    + p.notes.len()
                    + p.steps
                        .iter()
                        .chain(&p.integrations)
                        .chain(&p.pitfalls)
                        .map(String::len)
                        .sum::<usize>()
                    + 256
            })
            .sum::<usize>()
            + 64
    }

    /// BM25 of the allowed plans that match a term of `text`.
    fn lexical(&self, text: &str, allowed: &[bool]) -> Vec<(&str, f64)> {
        let n = self.plans.len() as f64;
        let mut terms = analyze(text);
        terms.sort();
        terms.dedup();
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for term in &terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(plan, tf) in postings {
                if !allowed[plan] {
                    continue;
                }
                let norm = if self.average_length > 0.0 {
                    1.0 - B + B * self.lengths[plan] / self.average_length
                } else {
                    1.0
                };
                *scores.entry(plan).or_default() += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        sorted(
            scores
                .into_iter()
                .map(|(plan, score)| (self.plans[plan].id.as_str(), score))
                .collect(),
        )
    }

    /// The plan ranked first for the query `text` (embedded as `vector`) among those `allowed`
    /// lets take part, with its cosine similarity to the query.
    pub(crate) fn best(
        &self,
        text: &str,
        vector: &[f32],
        allowed: impl Fn(&CachedPlan) -> bool,
        search: &SearchConfig,
    ) -> Option<(&CachedPlan, f64)> {
        // A plan embedded by another model (another dimension) cannot be compared: it takes
        // no part, rather than a cosine over part of its vector.
        let allowed: Vec<bool> = self
            .plans
            .iter()
            .map(|plan| plan.embedding.len() == vector.len() && allowed(plan))
            .collect();
        let mut query = vector.to_vec();
        unit(&mut query);
        let cosines: HashMap<&str, f64> = self
            .plans
            .iter()
            .zip(&allowed)
            .filter(|(_, allowed)| **allowed)
            .map(|(plan, _)| {
                let dot: f32 = plan.embedding.iter().zip(&query).map(|(a, b)| a * b).sum();
                (plan.id.as_str(), f64::from(dot))
            })
            .collect();
        if cosines.is_empty() {
            return None;
        }
        let limit = search.candidates.max(1) as usize;
        let mut lexical = self.lexical(text, &allowed);
        lexical.truncate(limit);
        let mut dense = sorted(cosines.iter().map(|(id, c)| (*id, *c)).collect());
        dense.truncate(limit);
        let weights = [search.lexical_weight, search.dense_weight];
        // How much of the request each list's best plans' use cases contain.
        let coverage = coverage_terms(search, text).map_or([0.0, 0.0], |terms| {
            coverage_pair([&lexical[..], &dense[..]], |(id, _)| {
                let plan = self.plans.iter().find(|p| p.id == *id)?;
                Some(terms.coverage([plan.use_case.as_str()]))
            })
        });
        let (fused, _) = fuse_keyed(search, weights, &lexical, &dense, coverage);
        let top = fused.first()?.key;
        let plan = self.plans.iter().find(|p| p.id == top)?;
        Some((plan, cosines.get(top).copied().unwrap_or(0.0)))
    }
}

/// A plan recommended to one query of a multi-query search.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedPlan {
    /// The plan's tools, in the order to run them.
    pub recommended_plan_steps: Vec<String>,
    pub plan_id: String,
    /// `easy`, `medium` or `hard` with the reason, from the plan's steps and recorded outcomes
    /// (e.g. `"easy - single-tool plan, succeeded 5 of 5 times"`).
    pub difficulty: String,
    /// The notes recorded with the plan, when it has some.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub plan_notes: String,
    /// The pitfalls recorded with the plan, when it has some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plan_pitfalls: Vec<String>,
    #[serde(skip)]
    pub successes: u64,
    #[serde(skip)]
    pub failures: u64,
}

impl RecommendedPlan {
    fn of(plan: &CachedPlan) -> Self {
        Self {
            recommended_plan_steps: plan.steps.clone(),
            plan_id: plan.id.clone(),
            difficulty: difficulty(plan.steps.len(), plan.successes, plan.failures),
            plan_notes: plan.notes.clone(),
            plan_pitfalls: plan.pitfalls.clone(),
            successes: plan.successes,
            failures: plan.failures,
        }
    }

    /// The tool router's `execution_guidance` line of the plan.
    pub fn guidance(&self) -> String {
        let total = u128::from(self.successes) + u128::from(self.failures);
        let times = if total == 1 { "time" } else { "times" };
        let mut text = format!(
            "A plan recorded for a similar use case succeeded {} of {total} {times}: follow \
             recommended_plan_steps ({}).",
            self.successes,
            self.recommended_plan_steps.join(", then ")
        );
        if !self.plan_notes.is_empty() {
            text.push_str(" Notes: ");
            text.push_str(&self.plan_notes);
        }
        text
    }
}

impl Router {
    /// The plan recommended to each query of `req` (by position): `None` for a query that failed
    /// (`ranked[i]` is `None`), whose use case could not be embedded, or that no plan is close
    /// enough to. `index` is the project's plans ([`Router::project_plans`]); `connected` the
    /// integrations the user has connected.
    pub(crate) async fn recommend_plans(
        &self,
        index: Option<Arc<PlanIndex>>,
        req: &BatchRequest,
        connected: &HashSet<String>,
        ranked: &[Option<Ranked>],
        request_id: &str,
        deadline: Instant,
    ) -> Vec<Option<RecommendedPlan>> {
        let mut out = vec![None; req.queries.len()];
        let Some(index) = index.filter(|i| !i.is_empty()) else {
            return out;
        };
        let min_similarity = self.settings.plans.min_similarity;
        let requested: HashSet<&str> = req.integrations.iter().map(String::as_str).collect();
        let allowed = |plan: &CachedPlan| {
            plan.integrations.iter().all(|integration| {
                (requested.is_empty() || requested.contains(integration.as_str()))
                    && (!req.connected_only || connected.contains(integration))
            })
        };
        // The use cases' embeddings: the ranking embedded the same text already unless the query
        // has known fields, so these are mostly cache hits.
        let vectors = join_all(req.queries.iter().zip(ranked).map(|(query, ranked)| async move {
            if ranked.is_none() {
                return None;
            }
            match self.embed_query(&query.use_case).await {
                Ok((vector, _)) => Some(vector),
                Err(err) => {
                    tracing::debug!(request_id, error = %err, "use case not embedded for plans");
                    None
                }
            }
        }))
        .await;
        for (i, (query, vector)) in req.queries.iter().zip(vectors).enumerate() {
            let Some(vector) = vector else {
                continue;
            };
            let best = index.best(&query.use_case, &vector, allowed, &self.settings.search);
            if let Some((plan, similarity)) = best
                && similarity >= min_similarity
            {
                out[i] = Some(RecommendedPlan::of(plan));
            }
        }
        if req.max_side_effect.is_some() || !req.categories.is_empty() {
            self.check_plan_tools(req, ranked, &mut out, request_id, deadline)
                .await;
        }
        out
    }

    /// Drops the recommendations with a tool above the request's side-effect ceiling or outside
    /// its categories. Tools among the search's candidates passed both already; the others are
    /// read from the shards (a failure drops the recommendations that need them).
    async fn check_plan_tools(
        &self,
        req: &BatchRequest,
        ranked: &[Option<Ranked>],
        out: &mut [Option<RecommendedPlan>],
        request_id: &str,
        deadline: Instant,
    ) {
        let candidates: HashSet<&str> = ranked
            .iter()
            .flatten()
            .flat_map(|r| r.candidates.iter().map(|c| c.record.name.as_str()))
            .collect();
        let mut missing: Vec<String> = out
            .iter()
            .flatten()
            .flat_map(|plan| plan.recommended_plan_steps.iter())
            .filter(|step| !candidates.contains(step.as_str()))
            .cloned()
            .collect();
        missing.sort();
        missing.dedup();
        let fetched = if missing.is_empty() {
            Ok(Vec::new())
        } else {
            self.fetch_tools(&req.project_id, &missing, request_id, deadline)
                .await
        };
        let fetched = match fetched {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(request_id, error = %err, "reading the tools of recommended plans failed");
                Vec::new()
            }
        };
        let allowed_tools: HashSet<&str> = fetched
            .iter()
            .map(|(record, _)| record)
            .filter(|r| {
                SideEffect::allowed_under(r.side_effect, req.max_side_effect)
                    && (req.categories.is_empty() || req.categories.contains(&r.category))
            })
            .map(|r| r.name.as_str())
            .chain(candidates.iter().copied())
            .collect();
        for slot in out.iter_mut() {
            if slot.as_ref().is_some_and(|plan| {
                !plan
                    .recommended_plan_steps
                    .iter()
                    .all(|step| allowed_tools.contains(step.as_str()))
            }) {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(id: &str, use_case: &str, embedding: Vec<f32>, integrations: &[&str]) -> CachedPlan {
        CachedPlan {
            id: id.into(),
            use_case: use_case.into(),
            embedding,
            steps: integrations
                .iter()
                .map(|i| format!("{}_TOOL", i.to_uppercase()))
                .collect(),
            integrations: integrations.iter().map(|i| i.to_string()).collect(),
            notes: String::new(),
            pitfalls: Vec::new(),
            successes: 1,
            failures: 0,
        }
    }

    #[test]
    fn analysis_matches_the_tool_indexes() {
        assert_eq!(
            analyze("Sending the weekly REPORTS to my team"),
            ["send", "week", "report", "team"]
        );
        assert_eq!(
            analyze("postMessage to SLACK_CHANNELS"),
            ["post", "messag", "slack", "channel"]
        );
        assert!(analyze("what is it").is_empty());
    }

    #[test]
    fn bm25_prefers_rarer_and_denser_matches() {
        let index = PlanIndex::build(vec![
            plan(
                "pln_a",
                "send the weekly report by email",
                vec![1.0, 0.0],
                &["gmail"],
            ),
            plan("pln_b", "send a slack message", vec![0.0, 1.0], &["slack"]),
            plan("pln_c", "archive old email", vec![0.6, 0.8], &["gmail"]),
        ]);
        let all = vec![true; 3];
        let hits = index.lexical("email the weekly report", &all);
        let ids: Vec<&str> = hits.iter().map(|h| h.0).collect();
        assert_eq!(ids, ["pln_a", "pln_c"]);
        assert!(hits[0].1 > hits[1].1);
        // A plan that may not take part scores nothing.
        let hits = index.lexical("email", &[false, true, true]);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), ["pln_c"]);
        assert!(index.lexical("the of", &all).is_empty());
    }

    #[test]
    fn the_best_plan_comes_with_its_cosine_and_only_from_allowed_plans() {
        let search = SearchConfig::default();
        let index = PlanIndex::build(vec![
            plan(
                "pln_a",
                "send the weekly report by email",
                vec![2.0, 0.0],
                &["gmail"],
            ),
            plan(
                "pln_b",
                "post the weekly report in slack",
                vec![0.0, 3.0],
                &["slack"],
            ),
            plan("pln_c", "archive old email", vec![0.6, 0.8], &["gmail"]),
        ]);
        let (best, cosine) = index
            .best("weekly report by email", &[0.9, 0.1], |_| true, &search)
            .unwrap();
        assert_eq!(best.id, "pln_a");
        assert!((cosine - 0.9 / (0.82f64).sqrt()).abs() < 1e-5, "{cosine}");
        let (best, _) = index
            .best(
                "weekly report by email",
                &[0.9, 0.1],
                |p| p.integrations[0] == "slack",
                &search,
            )
            .unwrap();
        assert_eq!(best.id, "pln_b");
        assert!(
            index
                .best("anything", &[1.0, 0.0], |_| false, &search)
                .is_none()
        );
        assert!(
            PlanIndex::default()
                .best("anything", &[1.0, 0.0], |_| true, &search)
                .is_none()
        );
    }

    #[test]
    fn plans_of_another_dimension_take_no_part() {
        let search = SearchConfig::default();
        let index = PlanIndex::build(vec![
            // Three dimensions: its first two alone would match the query best.
            plan(
                "pln_old",
                "send the weekly report by email",
                vec![1.0, 0.0, 0.0],
                &["gmail"],
            ),
            plan("pln_new", "archive old email", vec![0.6, 0.8], &["gmail"]),
        ]);
        let (best, _) = index
            .best(
                "send the weekly report by email",
                &[1.0, 0.0],
                |_| true,
                &search,
            )
            .unwrap();
        assert_eq!(best.id, "pln_new");
        assert!(
            index
                .best("anything", &[1.0, 0.0, 0.0, 0.0], |_| true, &search)
                .is_none()
        );
    }

    #[test]
    fn guidance_names_the_record_and_the_steps() {
        let mut recommended = RecommendedPlan::of(&CachedPlan {
            steps: vec!["GMAIL_SEARCH".into(), "GMAIL_REPLY".into()],
            notes: "Search the last 7 days only.".into(),
            successes: 3,
            failures: 1,
            ..plan(
                "pln_a",
                "reply to the latest invoice",
                vec![1.0],
                &["gmail"],
            )
        });
        assert_eq!(
            recommended.guidance(),
            "A plan recorded for a similar use case succeeded 3 of 4 times: follow \
             recommended_plan_steps (GMAIL_SEARCH, then GMAIL_REPLY). Notes: Search the last 7 \
             days only."
        );
        assert_eq!(
            recommended.difficulty,
            "medium - 2-step plan, succeeded 3 of 4 times"
        );
        recommended.plan_notes.clear();
        let json = serde_json::to_value(&recommended).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "recommendedPlanSteps": ["GMAIL_SEARCH", "GMAIL_REPLY"],
                "planId": "pln_a",
                "difficulty": "medium - 2-step plan, succeeded 3 of 4 times"
            })
        );
    }
}
