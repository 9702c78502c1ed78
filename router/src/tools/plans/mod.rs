//! Recorded plans: what worked (or did not) for a use case in one project. A service records a
//! plan with `POST .../plans` (the use case, the tools it ran in order, notes, pitfalls and the
//! outcome); recording the same plan again counts one more outcome. Multi-query searches whose
//! use case is close to a recorded successful plan recommend it ([`crate::tools::plans::plan_match`]).
//!
//! A plan's identity is its project, its use case normalised ([`normalise_use_case`]: trimmed,
//! lowercased, whitespace collapsed) and its steps; its id is `pln_` and 32 hex digits of a
//! SHA-256 of the three ([`plan_id`]). Plans live in the metadata store, per project: a project
//! never sees another's. They are deleted with their tools: a plan naming a tool that leaves the
//! catalog goes with it ([`crate::tools::catalog_write`]). Searches read a project's plans through a
//! per-router cache that lives as long as the placements' (`shards.metadata_cache_ms`), waiting
//! for the store at most [`LOOKUP_TIMEOUT`] and keeping what it knew through a store outage.

pub mod plan_match;
pub(crate) mod rest;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentsearch_common::ids::{CONTROL_CHARACTERS, has_control, truncate};
use agentsearch_common::tool::MAX_NAME_CHARS;
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_store::{PlanOutcome, PlanRow};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Router;
use crate::tools::connections::rfc3339;
use crate::tools::plans::plan_match::{CachedPlan, PlanIndex};

/// Plan ids: this prefix and 32 lowercase hex digits.
pub const PLAN_PREFIX: &str = "pln_";
/// Characters of a use case.
pub const MAX_USE_CASE_CHARS: usize = 1024;
/// Steps of a plan.
pub const MAX_STEPS: usize = 32;
/// Characters of a plan's notes.
pub const MAX_NOTES_CHARS: usize = 2000;
/// Pitfalls of a plan, and characters of each.
pub const MAX_PITFALLS: usize = 16;
pub const MAX_PITFALL_CHARS: usize = 500;
/// Plans a project keeps: recording a new one beyond is refused (outcomes of existing plans are
/// still counted), which keeps ranking a project's plans within a millisecond.
pub const MAX_PLANS: u64 = 1000;
/// The longest a search waits for plans the cache does not hold.
const LOOKUP_TIMEOUT: Duration = Duration::from_millis(250);

/// A plan as sent to `POST .../plans`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "PlanRequest")]
pub struct RawPlan {
    pub use_case: Option<String>,
    pub steps: Option<Vec<String>>,
    pub notes: Option<String>,
    pub pitfalls: Option<Vec<String>>,
    pub outcome: Option<String>,
}

/// A plan outcome, validated (its tools not checked against the catalog yet).
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRecord {
    /// Trimmed.
    pub use_case: String,
    pub steps: Vec<String>,
    /// `None`: keep the notes recorded before.
    pub notes: Option<String>,
    /// `None`: keep the pitfalls recorded before.
    pub pitfalls: Option<Vec<String>>,
    pub success: bool,
}

impl RawPlan {
    /// Checks every field; all violations at once.
    pub fn validate(self) -> Result<PlanRecord> {
        let mut v = Vec::new();
        let use_case = self.use_case.unwrap_or_default().trim().to_string();
        if use_case.is_empty() {
            v.push(FieldViolation::new(
                "useCase",
                "is required and must not be empty",
            ));
        } else if use_case.chars().count() > MAX_USE_CASE_CHARS {
            v.push(FieldViolation::new(
                "useCase",
                format!("must be at most {MAX_USE_CASE_CHARS} characters"),
            ));
        } else if has_control(&use_case) {
            v.push(FieldViolation::new("useCase", CONTROL_CHARACTERS));
        }
        let steps = self.steps.unwrap_or_default();
        if steps.is_empty() || steps.len() > MAX_STEPS {
            v.push(FieldViolation::new(
                "steps",
                format!(
                    "is required: 1 to {MAX_STEPS} tool names, in order, got {}",
                    steps.len()
                ),
            ));
        }
        for (i, step) in steps.iter().enumerate().take(MAX_STEPS) {
            let bad = step.is_empty()
                || step.chars().count() > MAX_NAME_CHARS
                || step.trim() != step
                || step.chars().any(char::is_control);
            if bad {
                v.push(FieldViolation::new(
                    format!("steps[{i}]"),
                    format!(
                        "must be a tool name: 1 to {MAX_NAME_CHARS} characters, no surrounding \
                         spaces or control characters"
                    ),
                ));
            }
        }
        if let Some(notes) = &self.notes {
            if notes.chars().count() > MAX_NOTES_CHARS {
                v.push(FieldViolation::new(
                    "notes",
                    format!("must be at most {MAX_NOTES_CHARS} characters"),
                ));
            } else if has_control(notes) {
                v.push(FieldViolation::new("notes", CONTROL_CHARACTERS));
            }
        }
        if let Some(pitfalls) = &self.pitfalls {
            if pitfalls.len() > MAX_PITFALLS {
                v.push(FieldViolation::new(
                    "pitfalls",
                    format!("must hold at most {MAX_PITFALLS} pitfalls"),
                ));
            }
            for (i, text) in pitfalls.iter().enumerate().take(MAX_PITFALLS) {
                if text.trim().is_empty() || text.chars().count() > MAX_PITFALL_CHARS {
                    v.push(FieldViolation::new(
                        format!("pitfalls[{i}]"),
                        format!("must be 1 to {MAX_PITFALL_CHARS} characters"),
                    ));
                } else if has_control(text) {
                    v.push(FieldViolation::new(
                        format!("pitfalls[{i}]"),
                        CONTROL_CHARACTERS,
                    ));
                }
            }
        }
        let success = match self.outcome.as_deref() {
            Some("success") => true,
            Some("failure") => false,
            Some(_) => {
                v.push(FieldViolation::new(
                    "outcome",
                    "must be `success` or `failure`",
                ));
                false
            }
            None => {
                v.push(FieldViolation::new(
                    "outcome",
                    "is required: `success` or `failure`",
                ));
                false
            }
        };
        if !v.is_empty() {
            return Err(Error::invalid_many(v));
        }
        Ok(PlanRecord {
            use_case,
            steps,
            notes: self.notes,
            pitfalls: self.pitfalls,
            success,
        })
    }
}

/// A use case as a plan's identity sees it: trimmed, lowercased, every run of whitespace one
/// space.
pub fn normalise_use_case(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The id of the plan of `project_id` with this normalised use case and these steps: `pln_` and
/// the first 32 hex digits of a SHA-256 of the three (encoded as one JSON array, so no two
/// identities share an input).
pub fn plan_id(project_id: &str, normalised_use_case: &str, steps: &[String]) -> String {
    let identity = serde_json::json!([project_id, normalised_use_case, steps]);
    let digest = Sha256::digest(identity.to_string().as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PLAN_PREFIX}{hex}")
}

/// Whether `id` has the shape of a plan id (checked before any store read).
fn plan_id_shape(id: &str) -> bool {
    id.strip_prefix(PLAN_PREFIX).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// How hard a plan is, from its steps and recorded outcomes, in the reference's form
/// (`"easy - single-tool plan, succeeded 5 of 5 times"`). With `rate` = successes / outcomes:
/// `hard` when the plan has more than 4 steps or `rate` < 0.75; `easy` when it has one step and
/// `rate` >= 0.9; `medium` otherwise. A plan without outcomes has a rate of 0.
pub fn difficulty(steps: usize, successes: u64, failures: u64) -> String {
    let total = u128::from(successes) + u128::from(failures);
    let rate = if total == 0 {
        0.0
    } else {
        successes as f64 / (successes as f64 + failures as f64)
    };
    let level = if steps > 4 || rate < 0.75 {
        "hard"
    } else if steps == 1 && rate >= 0.9 {
        "easy"
    } else {
        "medium"
    };
    let shape = if steps == 1 {
        "single-tool plan".to_string()
    } else {
        format!("{steps}-step plan")
    };
    let times = if total == 1 { "time" } else { "times" };
    format!("{level} - {shape}, succeeded {successes} of {total} {times}")
}

/// What recording a plan answers.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub plan_id: String,
    pub use_case: String,
    pub steps: Vec<String>,
    pub successes: u64,
    pub failures: u64,
    pub difficulty: String,
}

impl PlanSummary {
    fn of(row: &PlanRow) -> Self {
        Self {
            plan_id: row.id.clone(),
            use_case: row.use_case.clone(),
            steps: row.steps.clone(),
            successes: row.successes,
            failures: row.failures,
            difficulty: difficulty(row.steps.len(), row.successes, row.failures),
        }
    }
}

/// A plan as listed.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanDetail {
    #[serde(flatten)]
    pub summary: PlanSummary,
    pub notes: String,
    pub pitfalls: Vec<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What the plan cache holds of a project: when it was read and its plans ready to rank.
pub(crate) type PlanCacheEntry = (Instant, Arc<PlanIndex>);

/// Memory the plan cache may use (vectors and texts), across projects.
pub(crate) const PLAN_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// The plan cache of a router.
pub(crate) fn plan_cache() -> moka::sync::Cache<String, PlanCacheEntry> {
    moka::sync::Cache::builder()
        .max_capacity(PLAN_CACHE_BYTES)
        .weigher(|project: &String, entry: &PlanCacheEntry| {
            u32::try_from(project.len() + entry.1.weight()).unwrap_or(u32::MAX)
        })
        .build()
}

impl Router {
    /// Records one outcome of a plan: its tools must be in the project's catalog; the use case is
    /// embedded with the query model. A new plan beyond [`MAX_PLANS`] is refused.
    ///
    /// It runs under the project's write lock, so a deletion of its tools on this router cannot
    /// interleave between the catalog check and the write (and leave a plan naming a tool that
    /// is gone; on another router, searches skip such a plan: they keep only plans whose steps
    /// are all in the catalog).
    pub async fn record_plan(&self, project_id: &str, plan: PlanRecord) -> Result<PlanSummary> {
        let _serial = self.write_locks.lock(project_id).await;
        let distinct: Vec<String> = plan
            .steps
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let known: HashSet<String> = self
            .store
            .catalog_entries(project_id, &distinct)
            .await?
            .into_iter()
            .map(|e| e.name)
            .collect();
        let unknown: Vec<FieldViolation> = plan
            .steps
            .iter()
            .enumerate()
            .filter(|(_, step)| !known.contains(*step))
            .map(|(i, step)| {
                FieldViolation::new(
                    format!("steps[{i}]"),
                    format!(
                        "the project's catalog has no tool named `{}`",
                        truncate(step, crate::json::MAX_ECHOED_NAME)
                    ),
                )
            })
            .collect();
        if !unknown.is_empty() {
            return Err(Error::invalid_many(unknown));
        }
        let (vector, _) = self.embed_query(&plan.use_case).await?;
        let outcome = PlanOutcome {
            id: plan_id(project_id, &normalise_use_case(&plan.use_case), &plan.steps),
            use_case: plan.use_case,
            embedding: vector.to_vec(),
            steps: plan.steps,
            notes: plan.notes,
            pitfalls: plan.pitfalls,
            success: plan.success,
            at_ms: now_ms(),
        };
        let recorded = self
            .store
            .record_plan(project_id, &outcome, MAX_PLANS)
            .await?;
        self.invalidate_plans(project_id, true);
        let Some(row) = recorded else {
            return Err(Error::invalid(
                "useCase",
                format!(
                    "the project keeps {MAX_PLANS} plans, the most it may: delete plans it no \
                     longer needs (DELETE .../plans/{{planId}}) before recording new ones"
                ),
            ));
        };
        Ok(PlanSummary::of(&row))
    }

    /// Every plan of the project, by id, as the store has them now.
    pub async fn list_plans(&self, project_id: &str) -> Result<Vec<PlanDetail>> {
        Ok(self
            .store
            .plans(project_id)
            .await?
            .into_iter()
            .map(|row| PlanDetail {
                summary: PlanSummary::of(&row),
                created_at: rfc3339(row.created_at_ms),
                updated_at: rfc3339(row.updated_at_ms),
                notes: row.notes,
                pitfalls: row.pitfalls,
            })
            .collect())
    }

    /// Deletes one plan of the project; `NOT_FOUND` when it has none with this id.
    pub async fn delete_plan(&self, project_id: &str, plan_id: &str) -> Result<()> {
        let deleted = plan_id_shape(plan_id) && self.store.delete_plan(project_id, plan_id).await?;
        if deleted {
            self.invalidate_plans(project_id, false);
        }
        if !deleted {
            return Err(Error::NotFound(format!(
                "the project has no plan `{}`",
                truncate(plan_id, crate::json::MAX_ECHOED_VALUE)
            )));
        }
        Ok(())
    }

    /// The project's plans a search may recommend, ready to rank (cached; a store that fails or
    /// takes longer than [`LOOKUP_TIMEOUT`] answers what is cached, or nothing).
    pub(crate) async fn project_plans(&self, project_id: &str) -> Option<Arc<PlanIndex>> {
        let cached = self.plan_cache.get(project_id);
        if let Some((at, index)) = &cached
            && at.elapsed() < self.settings.metadata_cache
        {
            return Some(index.clone());
        }
        let version = self.plan_version.load(Ordering::SeqCst);
        let read = tokio::time::timeout(LOOKUP_TIMEOUT, self.read_plans(project_id))
            .await
            .unwrap_or_else(|_| Err(Error::Unavailable("reading plans timed out".into())));
        match read {
            Ok(index) => {
                let index = Arc::new(index);
                // Plans recorded or deleted while they were read: what was read may predate
                // that, so it is used once, not cached.
                if self.plan_version.load(Ordering::SeqCst) == version {
                    self.plan_cache
                        .insert(project_id.to_string(), (Instant::now(), index.clone()));
                }
                Some(index)
            }
            Err(err) => {
                tracing::warn!(project_id, error = %err, "reading plans failed");
                // What was known stays in use (expired or not) until the store answers again;
                // searches do not wait on it meanwhile.
                let index = cached.map_or_else(|| Arc::new(PlanIndex::default()), |(_, i)| i);
                self.plan_cache
                    .insert(project_id.to_string(), (Instant::now(), index.clone()));
                Some(index)
            }
        }
    }

    /// The project's plans that may be recommended: at least one success, no more failures than
    /// successes, and every step a tool of the catalog.
    async fn read_plans(&self, project_id: &str) -> Result<PlanIndex> {
        let plans: Vec<PlanRow> = self
            .store
            .plans(project_id)
            .await?
            .into_iter()
            .filter(|p| p.successes >= 1 && p.successes >= p.failures)
            .collect();
        if plans.is_empty() {
            return Ok(PlanIndex::default());
        }
        let names: Vec<String> = plans
            .iter()
            .flat_map(|p| p.steps.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let integration_of: HashMap<String, String> = self
            .store
            .catalog_entries(project_id, &names)
            .await?
            .into_iter()
            .map(|e| (e.name, e.integration))
            .collect();
        let cached = plans
            .into_iter()
            .filter_map(|p| {
                let integrations = p
                    .steps
                    .iter()
                    .map(|s| integration_of.get(s).cloned())
                    .collect::<Option<Vec<String>>>()?;
                Some(CachedPlan {
                    id: p.id,
                    use_case: p.use_case,
                    embedding: p.embedding,
                    steps: p.steps,
                    integrations,
                    notes: p.notes,
                    pitfalls: p.pitfalls,
                    successes: p.successes,
                    failures: p.failures,
                })
            })
            .collect();
        Ok(PlanIndex::build(cached))
    }

    /// Makes the next search of the project read its plans from the store. With `keep_fallback`
    /// (a plan was recorded), what was cached stays as the fallback of a store outage; without
    /// it (a plan or a tool was deleted), it is dropped, so that an outage cannot bring back
    /// what was deleted.
    pub(crate) fn invalidate_plans(&self, project_id: &str, keep_fallback: bool) {
        self.plan_version.fetch_add(1, Ordering::SeqCst);
        let expired =
            Instant::now().checked_sub(self.settings.metadata_cache + Duration::from_millis(1));
        match (self.plan_cache.get(project_id), expired) {
            (Some((_, index)), Some(expired)) if keep_fallback => {
                self.plan_cache
                    .insert(project_id.to_string(), (expired, index));
            }
            _ => self.plan_cache.invalidate(project_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(use_case: &str, steps: &[&str], outcome: &str) -> RawPlan {
        RawPlan {
            use_case: Some(use_case.into()),
            steps: Some(steps.iter().map(|s| s.to_string()).collect()),
            notes: None,
            pitfalls: None,
            outcome: Some(outcome.into()),
        }
    }

    fn fields(raw: RawPlan) -> Vec<String> {
        match raw.validate() {
            Err(Error::InvalidArgument { violations, .. }) => {
                violations.into_iter().map(|v| v.field).collect()
            }
            other => panic!("expected violations, got {other:?}"),
        }
    }

    #[test]
    fn a_plan_is_checked_and_every_problem_named() {
        let ok = raw(
            "  Send the weekly report ",
            &["GMAIL_SEND_EMAIL"],
            "success",
        )
        .validate()
        .unwrap();
        assert_eq!(ok.use_case, "Send the weekly report");
        assert!(ok.success);
        assert_eq!(ok.notes, None);
        assert!(
            !raw("x", &["A"], "failure").validate().unwrap().success,
            "failure"
        );

        assert_eq!(fields(RawPlan::default()), ["useCase", "steps", "outcome"]);
        let too_many: Vec<String> = (0..=MAX_STEPS).map(|i| format!("T{i}")).collect();
        let refs: Vec<&str> = too_many.iter().map(String::as_str).collect();
        assert_eq!(fields(raw("x", &refs, "success")), ["steps"]);
        assert_eq!(
            fields(raw(
                &"u".repeat(MAX_USE_CASE_CHARS + 1),
                &["A", "", " B", "C\n"],
                "maybe"
            )),
            ["useCase", "steps[1]", "steps[2]", "steps[3]", "outcome"]
        );
        let mut long = raw("x", &["A"], "success");
        long.notes = Some("n".repeat(MAX_NOTES_CHARS + 1));
        long.pitfalls = Some(vec![
            "fine".into(),
            " ".into(),
            "p".repeat(MAX_PITFALL_CHARS + 1),
        ]);
        assert_eq!(fields(long), ["notes", "pitfalls[1]", "pitfalls[2]"]);
        let mut many = raw("x", &["A"], "success");
        many.pitfalls = Some(vec!["p".into(); MAX_PITFALLS + 1]);
        assert_eq!(fields(many), ["pitfalls"]);

        // At the caps, accepted (characters, not bytes).
        let mut full = raw(
            &"é".repeat(MAX_USE_CASE_CHARS),
            &refs[..MAX_STEPS],
            "success",
        );
        full.notes = Some("é".repeat(MAX_NOTES_CHARS));
        full.pitfalls = Some(vec!["é".repeat(MAX_PITFALL_CHARS); MAX_PITFALLS]);
        assert!(full.validate().is_ok());
    }

    #[test]
    fn control_characters_are_refused_by_field() {
        let mut plan = raw("send\0 it", &["A"], "success");
        plan.notes = Some("first\u{7}".into());
        plan.pitfalls = Some(vec!["fine\tto\nread\r".into(), "bad\u{1b}[0m".into()]);
        assert_eq!(fields(plan), ["useCase", "notes", "pitfalls[1]"]);
        let mut fine = raw("send it\tnow", &["A"], "success");
        fine.notes = Some("line one\nline two\r\n".into());
        fine.pitfalls = Some(vec!["a\tb".into()]);
        assert!(fine.validate().is_ok());
    }

    #[test]
    fn difficulty_follows_steps_and_success_rate() {
        assert_eq!(
            difficulty(1, 5, 0),
            "easy - single-tool plan, succeeded 5 of 5 times"
        );
        assert_eq!(
            difficulty(1, 1, 0),
            "easy - single-tool plan, succeeded 1 of 1 time"
        );
        // One step, 0.9 exactly: easy; just below: medium.
        assert!(difficulty(1, 9, 1).starts_with("easy - "));
        assert!(difficulty(1, 8, 1).starts_with("medium - "));
        assert_eq!(
            difficulty(3, 3, 1),
            "medium - 3-step plan, succeeded 3 of 4 times"
        );
        assert_eq!(
            difficulty(4, 10, 0),
            "medium - 4-step plan, succeeded 10 of 10 times"
        );
        assert_eq!(
            difficulty(5, 10, 0),
            "hard - 5-step plan, succeeded 10 of 10 times"
        );
        // Below 0.75: hard, whatever the steps.
        assert_eq!(
            difficulty(1, 2, 1),
            "hard - single-tool plan, succeeded 2 of 3 times"
        );
        assert_eq!(
            difficulty(2, 0, 0),
            "hard - 2-step plan, succeeded 0 of 0 times"
        );
        assert!(difficulty(2, u64::MAX, u64::MAX).starts_with("hard - "));
    }

    #[test]
    fn plan_ids_have_one_shape_and_name_the_identity() {
        let steps = vec!["A".to_string(), "B".to_string()];
        let id = plan_id("p", "send a report", &steps);
        assert!(plan_id_shape(&id), "{id}");
        assert_ne!(id, plan_id("q", "send a report", &steps));
        assert_ne!(id, plan_id("p", "send a reports", &steps));
        assert_ne!(
            id,
            plan_id("p", "send a report", &["B".to_string(), "A".to_string()])
        );
        // Steps are not concatenated text: ["AB"] is another plan than ["A", "B"].
        assert_ne!(id, plan_id("p", "send a report", &["AB".to_string()]));
        assert!(!plan_id_shape("pln_"));
        assert!(!plan_id_shape(&id.to_uppercase()));
        assert!(!plan_id_shape(&format!("{id}0")));
        assert!(!plan_id_shape(&id.replace("pln_", "trs_")));
    }

    #[test]
    fn use_cases_normalise_case_and_whitespace() {
        assert_eq!(
            normalise_use_case("  Send\tthe  WEEKLY\n report  "),
            "send the weekly report"
        );
        assert_eq!(normalise_use_case(" \n "), "");
        assert_eq!(normalise_use_case("Ünïcode  Straße"), "ünïcode straße");
    }

    proptest! {
        /// Recording a use case with other letter case or other whitespace (runs, tabs,
        /// newlines, around it) names the same plan.
        #[test]
        fn plan_identity_ignores_case_and_whitespace(
            words in proptest::collection::vec("[a-zA-Z0-9éÉ'?-]{1,12}", 1..8),
            gaps in proptest::collection::vec("[ \t\n]{1,3}", 8),
            lead in "[ \t\n]{0,3}",
            trail in "[ \t\n]{0,3}",
            upper in proptest::collection::vec(any::<bool>(), 8),
            steps in proptest::collection::vec("[A-Z_]{1,10}", 1..4),
        ) {
            let plain = words.join(" ");
            let mut varied = lead.clone();
            for (i, word) in words.iter().enumerate() {
                if i > 0 {
                    varied.push_str(&gaps[i]);
                }
                if upper[i] {
                    varied.push_str(&word.to_uppercase());
                } else {
                    varied.push_str(word);
                }
            }
            varied.push_str(&trail);
            let normalised = normalise_use_case(&varied);
            prop_assert_eq!(&normalised, &normalise_use_case(&plain));
            prop_assert_eq!(normalise_use_case(&normalised), normalised.clone());
            prop_assert_eq!(
                plan_id("p", &normalise_use_case(&varied), &steps),
                plan_id("p", &normalise_use_case(&plain), &steps)
            );
        }
    }
}
