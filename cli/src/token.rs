//! `agentsearch token`: issues a JWT for a user of a project, signed with the project's HS256
//! secret (for the demo project of the embedded default, the local key of the data dir) or with a
//! given RS256 / ES256 private key.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentsearch_common::auth::{self, Auth, SigningKey, TokenClaims};
use agentsearch_common::config::Config;
use agentsearch_common::ids::{DEMO_PROJECT_ID, parse_project_id};
use anyhow::Context;
use clap::Args;

/// Longest accepted `--ttl`.
const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

#[derive(Args, Debug)]
pub struct TokenArgs {
    /// The user the token names (its `sub` claim).
    #[arg(long)]
    pub user: String,
    /// The project the token is for (its `project` claim).
    #[arg(long, default_value = DEMO_PROJECT_ID)]
    pub project: String,
    /// Lifetime: a number and a unit, s, m, h or d (`30m`, `1h`, `7d`, `1h30m`).
    #[arg(long, default_value = "1h", value_parser = parse_ttl)]
    pub ttl: Duration,
    /// The `aud` claim; by default the project's configured audience.
    #[arg(long)]
    pub audience: Option<String>,
    /// The `iss` claim; by default the project's configured issuer, if any.
    #[arg(long)]
    pub issuer: Option<String>,
    /// PEM private key (RSA or EC P-256) to sign with, instead of the project's HS256 secret.
    #[arg(long)]
    pub private_key: Option<PathBuf>,
    /// Algorithm of `--private-key`: RS256 or ES256 (by default the key's type decides).
    #[arg(long, requires = "private_key")]
    pub alg: Option<String>,
    /// Data dir holding the local key of the embedded default (default: `data_dir` of the config).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Prints the token on stdout.
pub fn run(args: TokenArgs, config: &Config) -> anyhow::Result<()> {
    let token = issue(&args, config, now_secs())?;
    println!("{token}");
    Ok(())
}

/// The signed token of `args`, issued at `now` (seconds since the epoch).
pub fn issue(args: &TokenArgs, config: &Config, now: u64) -> anyhow::Result<String> {
    let user = args.user.trim();
    anyhow::ensure!(!user.is_empty(), "--user: must not be empty");
    let project = parse_project_id("--project", &args.project)
        .map_err(|_| anyhow::anyhow!("--project: must be a project UUID"))?;
    let data_dir = args.data_dir.as_ref().unwrap_or(&config.data_dir);
    let configured = config.auth.project(&project);

    let key = match &args.private_key {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("--private-key: cannot read {}", path.display()))?;
            SigningKey::from_pem(&pem, args.alg.as_deref())?
        }
        None => SigningKey::hs256(&auth::project_signing_secret(
            &config.auth,
            &project,
            data_dir,
        )?)?,
    };

    let audience = args
        .audience
        .clone()
        .or_else(|| configured.map(|p| p.audience.clone()))
        .unwrap_or_else(|| "agentsearch".to_string());
    anyhow::ensure!(!audience.trim().is_empty(), "--audience: must not be empty");
    let issuer = args
        .issuer
        .clone()
        .or_else(|| configured.and_then(|p| p.issuer.clone()));
    let claims = TokenClaims {
        sub: user.to_string(),
        project: project.clone(),
        aud: audience,
        iat: now,
        exp: now + args.ttl.as_secs(),
        iss: issuer,
    };
    let token = key.sign(&claims)?;

    // Say so when this configuration would refuse the token (another audience, a key it does not
    // know): the token is still printed, for a deployment configured differently.
    let verifying = if configured.is_some() {
        Some(config.auth.clone())
    } else if project == DEMO_PROJECT_ID && args.private_key.is_none() {
        auth::embedded_config(&config.auth, data_dir).ok()
    } else {
        None
    };
    if let Some(verifying) = verifying
        && let Ok(auth) = Auth::from_config(&verifying)
        && let Err(err) = auth.authenticate(Some(&format!("Bearer {token}")), &project)
    {
        eprintln!("warning: this configuration would refuse the token: {err}");
    }
    Ok(token)
}

/// A lifetime such as `30m`, `1h`, `7d` or `1h30m`.
pub fn parse_ttl(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let invalid = || format!("`{value}` is not a lifetime such as 30m, 1h or 7d");
    if value.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in value.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(invalid()),
        };
        let n: u64 = digits.parse().map_err(|_| invalid())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(invalid)?;
    }
    if !digits.is_empty() {
        return Err(format!("{}: add a unit (s, m, h or d)", invalid()));
    }
    let ttl = Duration::from_secs(total);
    if ttl.is_zero() {
        return Err("the lifetime must be longer than 0s".to_string());
    }
    if ttl > MAX_TTL {
        return Err(format!("`{value}` is longer than the maximum of 366d"));
    }
    Ok(ttl)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentsearch_common::auth::CallerKind;

    fn args(dir: &std::path::Path) -> TokenArgs {
        TokenArgs {
            user: "alice@example.com".into(),
            project: DEMO_PROJECT_ID.into(),
            ttl: Duration::from_secs(3600),
            audience: None,
            issuer: None,
            private_key: None,
            alg: None,
            data_dir: Some(dir.to_path_buf()),
        }
    }

    #[test]
    fn ttls_are_humane() {
        assert_eq!(parse_ttl("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_ttl("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "0s", "10", "1w", "h", "9999999999999999999d", "400d"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn demo_token_verifies_with_the_local_key() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let token = issue(&args(dir.path()), &config, now_secs()).unwrap();
        let auth = Auth::from_config(
            &agentsearch_common::auth::embedded_config(&config.auth, dir.path()).unwrap(),
        )
        .unwrap();
        let caller = auth
            .authenticate(Some(&format!("Bearer {token}")), DEMO_PROJECT_ID)
            .unwrap();
        assert_eq!(caller.kind, CallerKind::Jwt);
        assert_eq!(caller.user.as_deref(), Some("alice@example.com"));
    }

    #[test]
    fn unconfigured_project_needs_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args(dir.path());
        a.project = "11111111-1111-4111-8111-111111111111".into();
        let err = issue(&a, &Config::default(), now_secs()).unwrap_err();
        assert!(err.to_string().contains("auth.projects."), "{err}");
        a.project = "not-a-uuid".into();
        assert!(issue(&a, &Config::default(), now_secs()).is_err());
    }
}
