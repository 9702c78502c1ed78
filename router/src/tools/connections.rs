//! Users' connected accounts per integration: validation of writes, and the connection status an
//! agent sees for each integration (several accounts, `accountSelection: required` when the agent
//! must pick one). Rows live in the [`agentsearch_store::MetadataStore`], under the user id in the
//! form every principal is compared in ([`principal::key`]).

use std::collections::{BTreeSet, HashSet};

use agentsearch_common::principal;
use agentsearch_common::tool::MAX_SLUG_CHARS;
use agentsearch_common::{Error, FieldViolation, Result};
use agentsearch_store::{ConnectionInput, ConnectionRow};

use crate::Router;
use crate::tools::api::{ConnectedAccount, ToolkitConnectionStatus};

/// Statuses a connection may have; only `active` ones count as connected.
pub const STATUSES: &[&str] = &["active", "inactive", "expired", "revoked", "error"];
pub const ACCOUNT_TYPES: &[&str] = &["private", "shared"];
pub const MAX_CONNECTIONS_PER_CALL: usize = 100;
const MAX_ID_CHARS: usize = 256;
const MAX_USER_INFO_BYTES: usize = 4096;

/// A connection as received (REST or gRPC), before validation.
#[derive(Clone, Debug, Default)]
pub struct RawConnection {
    pub integration: Option<String>,
    pub account_id: Option<String>,
    pub alias: Option<String>,
    pub status: Option<String>,
    pub account_type: Option<String>,
    pub is_default: Option<bool>,
    pub user_info: Option<serde_json::Value>,
}

/// Checks a user id (the JWT `sub` or a path segment).
pub fn validate_user_id(field: &str, user_id: &str) -> Result<()> {
    if user_id.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if user_id.chars().count() > MAX_ID_CHARS || user_id.chars().any(char::is_control) {
        return Err(Error::invalid(
            field,
            format!("must be at most {MAX_ID_CHARS} printable characters"),
        ));
    }
    Ok(())
}

/// Checks `userId` and that the caller may act on that user's data: a user token (`sub`) only on
/// its own, service and anonymous callers on any.
pub fn check_user(caller: Option<&str>, user_id: &str) -> Result<()> {
    validate_user_id("userId", user_id)?;
    match caller {
        Some(user) if !principal::same(user, user_id) => Err(Error::PermissionDenied(
            "a user token may only act on its own user (`sub`)".into(),
        )),
        _ => Ok(()),
    }
}

/// The check of `connectedOnly`: it needs a user.
pub fn check_connected_only(connected_only: bool, user: Option<&str>) -> Result<()> {
    if connected_only && user.is_none() {
        return Err(Error::invalid(
            "connectedOnly",
            "needs a user: send a bearer JWT whose `sub` names the user",
        ));
    }
    Ok(())
}

/// Validates a batch of connections; every violation is reported at once, named
/// `connections[i].field`.
pub fn validate_connections(raw: Vec<RawConnection>) -> Result<Vec<ConnectionInput>> {
    let mut v: Vec<FieldViolation> = Vec::new();
    if raw.is_empty() {
        v.push(FieldViolation::new("connections", "must not be empty"));
    }
    if raw.len() > MAX_CONNECTIONS_PER_CALL {
        return Err(Error::invalid(
            "connections",
            format!(
                "at most {MAX_CONNECTIONS_PER_CALL} per call, got {}",
                raw.len()
            ),
        ));
    }
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, c) in raw.into_iter().enumerate() {
        let field = |name: &str| format!("connections[{i}].{name}");
        let integration = c.integration.unwrap_or_default();
        let slug_ok = !integration.is_empty()
            && integration.len() <= MAX_SLUG_CHARS
            && integration
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_' || ch == '-');
        if !slug_ok {
            v.push(FieldViolation::new(
                field("integration"),
                "is required: a lowercase slug [a-z0-9_-]",
            ));
        }
        let account_id = c.account_id.unwrap_or_default();
        if account_id.trim().is_empty()
            || account_id.chars().count() > MAX_ID_CHARS
            || account_id.chars().any(char::is_control)
        {
            v.push(FieldViolation::new(
                field("accountId"),
                format!("is required: 1..{MAX_ID_CHARS} printable characters"),
            ));
        }
        if let Some(alias) = &c.alias
            && (alias.chars().count() > MAX_ID_CHARS || alias.chars().any(char::is_control))
        {
            v.push(FieldViolation::new(
                field("alias"),
                format!("must be at most {MAX_ID_CHARS} printable characters"),
            ));
        }
        let status = c.status.unwrap_or_else(|| "active".into());
        if !STATUSES.contains(&status.as_str()) {
            v.push(FieldViolation::new(
                field("status"),
                format!("must be one of {}", STATUSES.join(", ")),
            ));
        }
        let account_type = c.account_type.unwrap_or_else(|| "private".into());
        if !ACCOUNT_TYPES.contains(&account_type.as_str()) {
            v.push(FieldViolation::new(
                field("accountType"),
                "must be private or shared",
            ));
        }
        let user_info = match c.user_info {
            None | Some(serde_json::Value::Null) => None,
            Some(value @ serde_json::Value::Object(_)) => {
                let text = value.to_string();
                if text.len() > MAX_USER_INFO_BYTES {
                    v.push(FieldViolation::new(
                        field("userInfo"),
                        format!("must be at most {MAX_USER_INFO_BYTES} bytes of JSON"),
                    ));
                }
                Some(text)
            }
            Some(_) => {
                v.push(FieldViolation::new(field("userInfo"), "must be an object"));
                None
            }
        };
        if !seen.insert((integration.clone(), account_id.clone())) {
            v.push(FieldViolation::new(
                field("accountId"),
                "duplicates an earlier connection of this integration",
            ));
        }
        out.push(ConnectionInput {
            integration,
            account_id,
            alias: c.alias,
            status,
            account_type,
            is_default: c.is_default.unwrap_or(false),
            user_info,
        });
    }
    if !v.is_empty() {
        return Err(Error::invalid_many(v));
    }
    Ok(out)
}

impl Router {
    pub async fn upsert_connections(
        &self,
        project_id: &str,
        user_id: &str,
        connections: Vec<ConnectionInput>,
    ) -> Result<Vec<ToolkitConnectionStatus>> {
        let rows = self
            .store
            .upsert_connections(project_id, &principal::key(user_id), &connections)
            .await?;
        Ok(statuses_of_rows(&rows))
    }

    /// The user's connections, grouped per integration (`integrations` empty: all).
    pub async fn list_connections(
        &self,
        project_id: &str,
        user_id: &str,
        integrations: &[String],
    ) -> Result<Vec<ToolkitConnectionStatus>> {
        let rows = self
            .store
            .list_connections(project_id, &principal::key(user_id), integrations)
            .await?;
        Ok(statuses_of_rows(&rows))
    }

    pub async fn delete_connection(
        &self,
        project_id: &str,
        user_id: &str,
        integration: &str,
        account_id: &str,
    ) -> Result<bool> {
        Ok(self
            .store
            .delete_connection(
                project_id,
                &principal::key(user_id),
                integration,
                account_id,
            )
            .await?)
    }

    /// Every connection of the caller (none without a user).
    pub(crate) async fn user_connections(
        &self,
        project_id: &str,
        user: Option<&str>,
    ) -> Result<Vec<ConnectionRow>> {
        match user {
            None => Ok(Vec::new()),
            Some(user) => Ok(self
                .store
                .list_connections(project_id, &principal::key(user), &[])
                .await?),
        }
    }
}

/// Integrations with at least one active account.
pub(crate) fn connected(rows: &[ConnectionRow]) -> HashSet<String> {
    rows.iter()
        .filter(|r| r.status == "active")
        .map(|r| r.integration.clone())
        .collect()
}

/// One status per integration of `rows` (every integration the user has accounts of).
pub(crate) fn statuses_of_rows(rows: &[ConnectionRow]) -> Vec<ToolkitConnectionStatus> {
    let integrations: BTreeSet<&str> = rows.iter().map(|r| r.integration.as_str()).collect();
    integrations
        .into_iter()
        .map(|integration| status(integration, rows))
        .collect()
}

/// One status per integration of `integrations` (not connected when `rows` has none of it), in
/// integration order.
pub(crate) fn statuses_for<'a>(
    rows: &[ConnectionRow],
    integrations: impl IntoIterator<Item = &'a String>,
) -> Vec<ToolkitConnectionStatus> {
    let integrations: BTreeSet<&str> = integrations.into_iter().map(String::as_str).collect();
    integrations
        .into_iter()
        .map(|integration| status(integration, rows))
        .collect()
}

/// The status of one integration from the user's rows of it (store order: default first).
fn status(integration: &str, rows: &[ConnectionRow]) -> ToolkitConnectionStatus {
    let rows: Vec<&ConnectionRow> = rows
        .iter()
        .filter(|r| r.integration == integration)
        .collect();
    let active: Vec<&&ConnectionRow> = rows.iter().filter(|r| r.status == "active").collect();
    let accounts: Vec<ConnectedAccount> = rows
        .iter()
        .map(|r| ConnectedAccount {
            id: r.account_id.clone(),
            alias: r.alias.clone(),
            user_info: r
                .user_info
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok()),
            status: r.status.clone(),
            created_at: rfc3339(r.created_at_ms),
            is_default: r.is_default,
            account_type: r.account_type.clone(),
        })
        .collect();
    let status_message = match (rows.len(), active.len()) {
        (0, _) => format!(
            "No account of {integration} is connected for this user: connect one before running its tools."
        ),
        (_, 0) => format!(
            "The user's {integration} accounts are not active ({}): the user must reconnect before its tools can run.",
            rows.iter()
                .map(|r| r.status.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, 1) => format!(
            "Connected: {integration} tools run as account {}.",
            active[0].account_id
        ),
        (_, n) => format!(
            "{n} active {integration} accounts: name the account to use (default {}).",
            active
                .iter()
                .find(|r| r.is_default)
                .map_or(active[0].account_id.as_str(), |r| r.account_id.as_str())
        ),
    };
    ToolkitConnectionStatus {
        toolkit: integration.to_string(),
        description: String::new(),
        has_active_connection: !active.is_empty(),
        account_selection: (active.len() > 1).then_some("required"),
        account_type: rows
            .iter()
            .find(|r| r.is_default)
            .map(|r| r.account_type.clone()),
        current_user_info: accounts
            .iter()
            .find(|a| a.is_default)
            .and_then(|a| a.user_info.clone()),
        accounts,
        status_message,
    }
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(integration: &str, account: &str, status: &str, default: bool) -> ConnectionRow {
        ConnectionRow {
            integration: integration.into(),
            account_id: account.into(),
            alias: None,
            status: status.into(),
            account_type: "private".into(),
            is_default: default,
            user_info: Some(r#"{"email":"a@example.com"}"#.into()),
            created_at_ms: 1_700_000_000_000,
            updated_at_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn several_active_accounts_require_a_selection() {
        let rows = [
            row("gmail", "a", "active", true),
            row("gmail", "b", "active", false),
            row("slack", "s", "expired", true),
        ];
        let statuses = statuses_for(
            &rows,
            &["gmail".to_string(), "slack".to_string(), "zoom".to_string()],
        );
        assert_eq!(statuses_of_rows(&rows), statuses[..2]);
        let names: Vec<&str> = statuses.iter().map(|s| s.toolkit.as_str()).collect();
        assert_eq!(names, ["gmail", "slack", "zoom"]);
        assert_eq!(statuses[0].account_selection, Some("required"));
        assert!(statuses[0].has_active_connection);
        assert_eq!(statuses[0].accounts.len(), 2);
        assert_eq!(
            statuses[0].accounts[0].user_info,
            Some(serde_json::json!({"email": "a@example.com"}))
        );
        assert!(!statuses[1].has_active_connection);
        assert_eq!(statuses[1].account_selection, None);
        assert!(!statuses[2].has_active_connection);
        assert!(statuses[2].accounts.is_empty());
        assert_eq!(connected(&rows), HashSet::from(["gmail".to_string()]));
    }

    #[test]
    fn every_bad_connection_field_is_named() {
        let err = validate_connections(vec![
            RawConnection {
                integration: Some("Gmail".into()),
                account_id: Some(" ".into()),
                status: Some("on".into()),
                account_type: Some("team".into()),
                user_info: Some(serde_json::json!([1])),
                ..Default::default()
            },
            RawConnection {
                integration: Some("gmail".into()),
                account_id: Some("a".into()),
                ..Default::default()
            },
        ])
        .unwrap_err();
        let Error::InvalidArgument { violations, .. } = err else {
            panic!("{err:?}")
        };
        let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "connections[0].integration",
                "connections[0].accountId",
                "connections[0].status",
                "connections[0].accountType",
                "connections[0].userInfo"
            ]
        );
        let ok = validate_connections(vec![RawConnection {
            integration: Some("gmail".into()),
            account_id: Some("a".into()),
            ..Default::default()
        }])
        .unwrap();
        assert_eq!(ok[0].status, "active");
        assert_eq!(ok[0].account_type, "private");
    }
}
