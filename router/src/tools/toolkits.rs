//! What a project's catalog says of its integrations beside their tools: a description (shown in
//! connection statuses) and guidance for agents (a tool-router search's `execution_guidance`).
//! Written by services with `PUT .../integrations` (and `DELETE .../integrations/{integration}`), kept in the metadata store, read through a
//! per-router cache that lives as long as the placements' (`shards.metadata_cache_ms`).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use agentsearch_common::ids::{CONTROL_CHARACTERS, has_control};
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_store::IntegrationInfo;
use serde::Deserialize;

use crate::Router;
use crate::tools::api::ToolkitConnectionStatus;

/// Integrations per write.
pub const MAX_INTEGRATIONS: usize = 500;
/// Characters of a description or of guidance.
pub const MAX_TEXT: usize = 4000;
/// The longest a search waits for integration information the cache does not hold.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(250);
/// Tools with pitfalls per integration, pitfalls per tool, characters per pitfall.
pub const MAX_PITFALL_TOOLS: usize = 1000;
pub const MAX_PITFALLS: usize = 20;
pub const MAX_PITFALL_TEXT: usize = 1000;

/// One integration's information as sent.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIntegrationInfo {
    pub integration: Option<String>,
    pub description: Option<String>,
    pub guidance: Option<String>,
    /// Known pitfalls of the integration's tools, by tool name.
    pub pitfalls: Option<BTreeMap<String, Vec<String>>>,
}

/// `{"integrations": [...]}` as sent.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIntegrations {
    pub integrations: Option<Vec<RawIntegrationInfo>>,
}

impl RawIntegrations {
    /// Checks every entry; all violations at once.
    pub fn validate(self) -> Result<Vec<IntegrationInfo>> {
        let mut violations = Vec::new();
        let Some(raw) = self.integrations else {
            return Err(Error::invalid("integrations", "required"));
        };
        if raw.is_empty() || raw.len() > MAX_INTEGRATIONS {
            violations.push(FieldViolation::new(
                "integrations",
                format!(
                    "must hold 1 to {MAX_INTEGRATIONS} entries, got {}",
                    raw.len()
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(raw.len());
        for (i, entry) in raw.into_iter().enumerate() {
            let field = |name: &str| format!("integrations[{i}].{name}");
            let integration = entry.integration.unwrap_or_default();
            if let Err(issue) = agentsearch_common::tool::check_slug(&integration) {
                violations.push(FieldViolation::new(field("integration"), issue));
            } else if !seen.insert(integration.clone()) {
                violations.push(FieldViolation::new(
                    field("integration"),
                    "appears twice in this request",
                ));
            }
            let description = entry.description.unwrap_or_default();
            let guidance = entry.guidance.unwrap_or_default();
            for (name, text) in [("description", &description), ("guidance", &guidance)] {
                if text.chars().count() > MAX_TEXT {
                    violations.push(FieldViolation::new(
                        field(name),
                        format!("must be at most {MAX_TEXT} characters"),
                    ));
                } else if has_control(text) {
                    violations.push(FieldViolation::new(field(name), CONTROL_CHARACTERS));
                }
            }
            let pitfalls = entry.pitfalls.unwrap_or_default();
            if pitfalls.len() > MAX_PITFALL_TOOLS {
                violations.push(FieldViolation::new(
                    field("pitfalls"),
                    format!("must name at most {MAX_PITFALL_TOOLS} tools"),
                ));
            }
            for (tool, texts) in &pitfalls {
                let at = format!(
                    "{}.{}",
                    field("pitfalls"),
                    agentsearch_common::ids::truncate(tool, 64)
                );
                if tool.is_empty() || tool.len() > 128 || tool.chars().any(char::is_control) {
                    violations.push(FieldViolation::new(
                        at.clone(),
                        "a tool name of 1 to 128 characters, without control characters",
                    ));
                }
                if texts.is_empty() || texts.len() > MAX_PITFALLS {
                    violations.push(FieldViolation::new(
                        at.clone(),
                        format!("must hold 1 to {MAX_PITFALLS} pitfalls"),
                    ));
                }
                if texts
                    .iter()
                    .any(|t| t.trim().is_empty() || t.chars().count() > MAX_PITFALL_TEXT)
                {
                    violations.push(FieldViolation::new(
                        at,
                        format!("each pitfall must be 1 to {MAX_PITFALL_TEXT} characters"),
                    ));
                } else if texts.iter().any(|t| has_control(t)) {
                    violations.push(FieldViolation::new(
                        at,
                        format!("each pitfall {CONTROL_CHARACTERS}"),
                    ));
                }
            }
            out.push(IntegrationInfo {
                integration,
                description,
                guidance,
                pitfalls,
            });
        }
        if violations.is_empty() {
            Ok(out)
        } else {
            Err(Error::invalid_many(violations))
        }
    }
}

impl Router {
    /// Records what the catalog says of these integrations (each replaces its earlier entry).
    pub async fn put_integration_info(
        &self,
        project_id: &str,
        infos: Vec<IntegrationInfo>,
    ) -> Result<usize> {
        self.store.put_integration_info(project_id, &infos).await?;
        let mut cache = self.toolkit_cache.lock();
        for info in &infos {
            cache.remove(&(project_id.to_string(), info.integration.clone()));
        }
        Ok(infos.len())
    }

    /// Forgets what the catalog says of one integration; returns whether it said something.
    pub async fn delete_integration_info(
        &self,
        project_id: &str,
        integration: &str,
    ) -> Result<bool> {
        let deleted = self
            .store
            .delete_integration_info(project_id, integration)
            .await?;
        self.toolkit_cache
            .lock()
            .remove(&(project_id.to_string(), integration.to_string()));
        Ok(deleted)
    }

    /// What the catalog says of `integrations`, by integration (cached; a store that fails or
    /// takes longer than [`LOOKUP_TIMEOUT`] answers what is cached, or nothing).
    pub(crate) async fn integration_infos(
        &self,
        project_id: &str,
        integrations: &[String],
    ) -> HashMap<String, IntegrationInfo> {
        let ttl = self.settings.metadata_cache;
        let mut out = HashMap::new();
        let mut missing = Vec::new();
        {
            let cache = self.toolkit_cache.lock();
            for integration in integrations {
                match cache.get(&(project_id.to_string(), integration.clone())) {
                    Some((at, info)) if at.elapsed() < ttl => {
                        if let Some(info) = info {
                            out.insert(integration.clone(), info.clone());
                        }
                    }
                    _ => missing.push(integration.clone()),
                }
            }
        }
        if missing.is_empty() {
            return out;
        }
        let read = tokio::time::timeout(
            LOOKUP_TIMEOUT,
            self.store.integration_info(project_id, &missing),
        )
        .await
        .unwrap_or_else(|_| {
            Err(agentsearch_store::StoreError::Unavailable(
                "reading integration information timed out".into(),
            ))
        });
        match read {
            Ok(found) => {
                let mut found: HashMap<String, IntegrationInfo> = found
                    .into_iter()
                    .map(|i| (i.integration.clone(), i))
                    .collect();
                let now = Instant::now();
                let mut cache = self.toolkit_cache.lock();
                for integration in missing {
                    let info = found.remove(&integration);
                    if let Some(info) = &info {
                        out.insert(integration.clone(), info.clone());
                    }
                    cache.insert((project_id.to_string(), integration), (now, info));
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "reading integration information failed");
                // What was known stays in use (expired or not) until the store answers again;
                // searches do not wait on it meanwhile.
                let now = Instant::now();
                let mut cache = self.toolkit_cache.lock();
                for integration in missing {
                    let entry = cache
                        .entry((project_id.to_string(), integration.clone()))
                        .or_insert((now, None));
                    entry.0 = now;
                    if let Some(info) = &entry.1 {
                        out.insert(integration, info.clone());
                    }
                }
            }
        }
        out
    }

    /// Fills the descriptions of catalog integrations' connection statuses the catalog describes.
    pub(crate) async fn describe_toolkits(
        &self,
        project_id: &str,
        statuses: &mut [ToolkitConnectionStatus],
    ) {
        let names: Vec<String> = statuses
            .iter()
            .filter(|s| s.description.is_empty())
            .map(|s| s.toolkit.clone())
            .collect();
        if names.is_empty() {
            return;
        }
        let infos = self.integration_infos(project_id, &names).await;
        for status in statuses.iter_mut() {
            if status.description.is_empty()
                && let Some(info) = infos.get(&status.toolkit)
            {
                status.description = info.description.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(entries: Vec<(&str, &str, &str)>) -> RawIntegrations {
        RawIntegrations {
            integrations: Some(
                entries
                    .into_iter()
                    .map(|(i, d, g)| RawIntegrationInfo {
                        integration: Some(i.into()),
                        description: Some(d.into()),
                        guidance: Some(g.into()),
                        pitfalls: None,
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn entries_are_checked_and_every_problem_named() {
        let ok = raw(vec![("gmail", "Email", "Search before sending.")])
            .validate()
            .unwrap();
        assert_eq!(ok[0].integration, "gmail");
        let long = "x".repeat(MAX_TEXT + 1);
        let Err(Error::InvalidArgument { violations, .. }) = raw(vec![
            ("Gmail!", "", ""),
            ("slack", &long, ""),
            ("slack", "", ""),
        ])
        .validate() else {
            panic!("not refused");
        };
        let named: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        for field in [
            "integrations[0].integration",
            "integrations[1].description",
            "integrations[2].integration",
        ] {
            assert!(named.contains(&field), "{field} not named: {named:?}");
        }
        assert!(RawIntegrations::default().validate().is_err());
        // NUL (which PostgreSQL refuses) and other control characters, by field; tabs and
        // newlines are text.
        let mut control = raw(vec![
            ("gmail", "Email\u{0}", "Line one\nline two\ttabbed"),
            ("slack", "Chat", "Beep\u{7}"),
        ]);
        control.integrations.as_mut().unwrap()[1].pitfalls = Some(BTreeMap::from([
            (
                "SLACK_POST".to_string(),
                vec!["fine\r\n".to_string(), "esc\u{1b}".to_string()],
            ),
            ("SLACK\u{0}".to_string(), vec!["fine".to_string()]),
        ]));
        let Err(Error::InvalidArgument { violations, .. }) = control.validate() else {
            panic!("control characters accepted");
        };
        let named: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            named,
            [
                "integrations[0].description",
                "integrations[1].guidance",
                "integrations[1].pitfalls.SLACK\u{0}",
                "integrations[1].pitfalls.SLACK_POST",
            ]
        );
        let mut bad = raw(vec![("gmail", "", "")]);
        bad.integrations.as_mut().unwrap()[0].pitfalls = Some(BTreeMap::from([
            ("GMAIL_SEND_EMAIL".to_string(), vec![" ".to_string()]),
            ("GMAIL_LIST".to_string(), Vec::new()),
        ]));
        let Err(Error::InvalidArgument { violations, .. }) = bad.validate() else {
            panic!("empty pitfalls accepted");
        };
        let named: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            named,
            [
                "integrations[0].pitfalls.GMAIL_LIST",
                "integrations[0].pitfalls.GMAIL_SEND_EMAIL"
            ]
        );
        assert!(raw(vec![]).validate().is_err());
    }
}
