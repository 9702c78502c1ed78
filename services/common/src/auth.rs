//! Authentication of agentsearch's gRPC and REST endpoints (public and shard).
//!
//! Two credentials exist:
//! - the deployment's static bearer token (`auth.token`), the service credential: shards require it
//!   of the router, and every project accepts it;
//! - per-project JWTs (`[auth.projects.<uuid>]`), signed with the project's HS256 secret or with the
//!   private half of one of its RS256 / ES256 public keys. They name the user (`sub`) and the
//!   project (`project`); a token of one project is refused by another with `PROJECT_MISMATCH`.
//!
//! A project without keys keeps the static-token rule: the token is required when configured,
//! otherwise the project is open (which [`Auth::check_bind`] allows only on loopback).

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, FieldViolation, Result};
use crate::ids::{DEMO_PROJECT_ID, truncate};
use crate::principal;
use crate::secret::Secret;

/// The `[auth]` section of the configuration (validated by [`config_problems`]).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Static bearer token: the service credential. Shards require it of the router; a project
    /// without keys requires it of every request; a project with keys accepts it besides JWTs.
    /// Required when binding beyond loopback.
    pub token: Option<Secret>,
    /// The credential between routers and shards, when it must differ from the public `token`:
    /// a router sends it to its shards, and a shard accepts it alone. Unset: a router sends
    /// `token` (or, with a client certificate in `shards.tls_cert_file`, nothing), and a shard
    /// accepts `token` (or, with `tls.client_ca_file`, a verified client certificate alone).
    pub internal_token: Option<Secret>,
    /// Per-project JWT verification, keyed by project UUID (`[auth.projects.<uuid>]`, or
    /// `AGENTSEARCH_AUTH__PROJECTS__<uuid>__<KEY>`; the hyphenless form of the UUID is accepted).
    pub projects: BTreeMap<String, ProjectAuthConfig>,
}

impl AuthConfig {
    /// The entry of `project_id` (any spelling of the same UUID), if configured.
    pub fn project(&self, project_id: &str) -> Option<&ProjectAuthConfig> {
        let wanted = uuid::Uuid::parse_str(project_id).ok()?;
        self.projects
            .iter()
            .find(|(key, _)| uuid::Uuid::parse_str(key).is_ok_and(|id| id == wanted))
            .map(|(_, project)| project)
    }
}

/// How the JWTs of one project are verified. A project with keys requires a bearer on every
/// request (unless `allow_anonymous`): a JWT signed by one of its keys, or the static
/// `auth.token`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectAuthConfig {
    /// Shared secret of HS256 tokens, at least 32 bytes.
    pub hs256_secret: Option<Secret>,
    /// Public keys of RS256 (RSA) and ES256 (EC P-256) tokens: each a PEM text or the path of a
    /// PEM file. Several keys allow rotation.
    pub public_keys: Vec<String>,
    /// The `aud` claim every token must carry.
    pub audience: String,
    /// The `iss` claim every token must carry, when set.
    pub issuer: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// A request without an `Authorization` header is served as anonymous; a presented token
    /// must still be valid.
    pub allow_anonymous: bool,
}

impl Default for ProjectAuthConfig {
    fn default() -> Self {
        Self {
            hs256_secret: None,
            public_keys: Vec::new(),
            audience: "agentsearch".to_string(),
            issuer: None,
            leeway_secs: 30,
            allow_anonymous: false,
        }
    }
}

/// Shortest accepted HS256 secret, in bytes (the hash output size of SHA-256).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

/// Largest accepted `leeway_secs`.
const MAX_LEEWAY_SECS: u64 = 600;

/// Path of the local HS256 key under the data dir.
const LOCAL_KEY_FILE: &str = "auth/local-hs256.key";

/// Who a request comes from, once authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The JWT's `sub`; `None` for a service credential or an anonymous caller.
    pub user: Option<String>,
    pub kind: CallerKind,
}

/// Other projects whose keys are tried on a token without a `project` claim that fails to verify.
const MISMATCH_PROBES: usize = 8;

/// How a caller authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallerKind {
    /// A JWT signed by one of the project's keys.
    Jwt,
    /// The deployment's static bearer token.
    ServiceToken,
    /// No credential: the project allows anonymous requests, or authentication is off.
    Anonymous,
}

impl Caller {
    fn anonymous() -> Self {
        Self {
            user: None,
            kind: CallerKind::Anonymous,
        }
    }

    fn service() -> Self {
        Self {
            user: None,
            kind: CallerKind::ServiceToken,
        }
    }
}

/// Verifies the credentials of requests: the static bearer token and the per-project JWTs. Keys are
/// parsed once, in [`Auth::from_config`]; clones share them.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    token: Option<Secret>,
    /// Keyed by canonical (lowercase, hyphenated) project UUID.
    projects: Arc<BTreeMap<String, ProjectKeys>>,
}

/// The parsed verification settings of one project.
#[derive(Debug)]
struct ProjectKeys {
    keys: Vec<VerifyingKey>,
    audience: String,
    issuer: Option<String>,
    leeway_secs: u64,
    allow_anonymous: bool,
}

/// One key and the validation that checks the signature (and only the signature) with it; the
/// claims are checked by [`ProjectKeys::check_claims`], which can say precisely what is wrong.
#[derive(Debug)]
struct VerifyingKey {
    algorithm: Algorithm,
    key: DecodingKey,
    validation: Validation,
}

impl Auth {
    /// Static-token authentication only (shards, and projects without keys).
    pub fn new(token: Option<Secret>) -> Self {
        Self {
            token,
            projects: Arc::default(),
        }
    }

    /// Builds the verifier of `config`: the static token and every project's keys, read and parsed
    /// now. Fails, naming the key path, on what [`crate::config::Config::validate`] refuses.
    pub fn from_config(config: &AuthConfig) -> Result<Auth> {
        let mut problems = Vec::new();
        let mut projects = BTreeMap::new();
        let mut spellings: BTreeMap<String, &str> = BTreeMap::new();
        for (key, project) in &config.projects {
            let Some(id) = canonical_project_id(key) else {
                problems.push(FieldViolation::new(
                    format!("auth.projects.{key}"),
                    "the key must be a project UUID",
                ));
                continue;
            };
            if let Some(first) = spellings.insert(id.clone(), key) {
                problems.push(FieldViolation::new(
                    format!("auth.projects.{key}"),
                    format!(
                        "the same project as auth.projects.{first}: spell the UUID one way in the \
                         file and the environment"
                    ),
                ));
                continue;
            }
            match ProjectKeys::load(key, project) {
                Ok(keys) => {
                    projects.insert(id, keys);
                }
                Err(more) => problems.extend(more),
            }
        }
        if !problems.is_empty() {
            return Err(config_error(problems));
        }
        Ok(Self {
            token: config.token.clone(),
            projects: Arc::new(projects),
        })
    }

    /// Whether the static bearer token is configured.
    pub fn enabled(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `project_id` has keys, that is whether its requests are verified as JWTs.
    pub fn has_project_keys(&self, project_id: &str) -> bool {
        self.projects.contains_key(&canonical_or_raw(project_id))
    }

    /// The `Authorization` header value a client of a protected endpoint sends (the static token).
    pub fn header(&self) -> Option<String> {
        self.token
            .as_ref()
            .map(|t| format!("Bearer {}", t.expose()))
    }

    /// Checks an `Authorization` header value against the static token only (the shard API).
    pub fn check(&self, authorization: Option<&str>) -> Result<()> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let Some(value) = authorization else {
            return Err(Error::Unauthenticated("missing bearer token".into()));
        };
        if constant_time_eq(bearer(value)?.as_bytes(), expected.expose().as_bytes()) {
            Ok(())
        } else {
            Err(Error::Unauthenticated("invalid bearer token".into()))
        }
    }

    /// Authenticates a request to `project_id` from its `Authorization` header value.
    ///
    /// - A project with keys requires a bearer, unless it allows anonymous requests (then a missing
    ///   header gives [`CallerKind::Anonymous`], but a presented token must still be valid). The
    ///   static token is accepted as a service credential; anything else must be a JWT signed with
    ///   one of the project's keys, in that key's algorithm, with `exp`, `aud` (the configured
    ///   audience), `iss` (when configured) and a non-empty `sub`. A token whose `project` claim
    ///   names another project, or that is signed by another project's key, is refused with
    ///   [`Error::ProjectMismatch`].
    /// - A project without keys requires the static token when one is configured, and is open
    ///   otherwise.
    ///
    /// Every other failure is [`Error::Unauthenticated`], whose message says what is wrong and
    /// never contains a secret.
    pub fn authenticate(&self, authorization: Option<&str>, project_id: &str) -> Result<Caller> {
        let project = canonical_or_raw(project_id);
        let Some(keys) = self.projects.get(&project) else {
            self.check(authorization)?;
            return Ok(if self.token.is_some() {
                Caller::service()
            } else {
                Caller::anonymous()
            });
        };
        let Some(value) = authorization else {
            return if keys.allow_anonymous {
                Ok(Caller::anonymous())
            } else {
                Err(Error::Unauthenticated(
                    "missing bearer token: this project requires a JWT in `Authorization: Bearer <token>`"
                        .into(),
                ))
            };
        };
        let presented = bearer(value)?;
        if let Some(token) = &self.token
            && constant_time_eq(presented.as_bytes(), token.expose().as_bytes())
        {
            return Ok(Caller::service());
        }
        self.verify_jwt(presented, &project, keys)
    }

    fn verify_jwt(&self, token: &str, project: &str, keys: &ProjectKeys) -> Result<Caller> {
        let malformed = || {
            Error::Unauthenticated(
                "malformed token: expected a JWT (header.payload.signature, base64url-encoded JSON \
                 with a supported `alg`)"
                    .into(),
            )
        };
        let header = jsonwebtoken::decode_header(token).map_err(|_| malformed())?;
        let unverified: Map<String, Value> =
            jsonwebtoken::dangerous::insecure_decode_claims(token).map_err(|_| malformed())?;
        ensure_provider();
        match keys.verify_signature(token, header.alg) {
            Ok(claims) => {
                if let Some(claimed) = claims.get("project") {
                    let claimed = claimed.as_str().ok_or_else(|| {
                        Error::Unauthenticated("malformed `project` claim: must be a string".into())
                    })?;
                    if canonical_or_raw(claimed) != project {
                        return Err(Error::ProjectMismatch(format!(
                            "the token is for project `{}`, not `{project}`",
                            truncate(claimed, 64)
                        )));
                    }
                }
                keys.check_claims(&claims, now_secs())
            }
            Err(failure) => {
                // A token signed by another project's key: say so rather than "bad signature". Only
                // the configured project the token names is tried; without one, at most
                // MISMATCH_PROBES others, so a forged token cannot cost a check of every key.
                let named = unverified
                    .get("project")
                    .and_then(Value::as_str)
                    .map(canonical_or_raw)
                    .filter(|named| named != project && self.projects.contains_key(named));
                let others: Vec<(&String, &ProjectKeys)> = match &named {
                    Some(named) => self.projects.get_key_value(named).into_iter().collect(),
                    None => self
                        .projects
                        .iter()
                        .filter(|(id, _)| id.as_str() != project)
                        .take(MISMATCH_PROBES)
                        .collect(),
                };
                for (other, other_keys) in others {
                    if other_keys.verify_signature(token, header.alg).is_ok() {
                        return Err(Error::ProjectMismatch(format!(
                            "the token is for project `{other}`, not `{project}`"
                        )));
                    }
                }
                Err(failure)
            }
        }
    }

    /// Refuses to expose the API beyond this machine without the static token. Project keys are
    /// not enough: projects without keys and the shards' internal API are protected by the static
    /// token only. Anonymous callers of a project that allows them have the service token's
    /// rights, so such a project is served on loopback only: `allow_anonymous` with a bind
    /// beyond loopback is refused, token or not.
    pub fn check_bind(&self, addr: SocketAddr, what: &str) -> Result<()> {
        if addr.ip().is_loopback() {
            return Ok(());
        }
        if self.token.is_none() {
            return Err(config_error(vec![FieldViolation::new(
                "auth.token",
                format!(
                    "{what} binds {addr}, beyond loopback, without authentication: set \
                     AGENTSEARCH_AUTH__TOKEN (or auth.token in the config file), or bind 127.0.0.1"
                ),
            )]));
        }
        let open: Vec<FieldViolation> = self
            .projects
            .iter()
            .filter(|(_, keys)| keys.allow_anonymous)
            .map(|(id, _)| {
                FieldViolation::new(
                    format!("auth.projects.{id}.allow_anonymous"),
                    format!(
                        "{what} binds {addr}, beyond loopback, and this project lets callers \
                         without a token act with the service token's rights: remove \
                         allow_anonymous, or bind 127.0.0.1"
                    ),
                )
            })
            .collect();
        if !open.is_empty() {
            return Err(config_error(open));
        }
        Ok(())
    }
}

impl ProjectKeys {
    /// Parses one project's settings; `key` is its key in `auth.projects`, for messages.
    fn load(key: &str, config: &ProjectAuthConfig) -> Result<Self, Vec<FieldViolation>> {
        let path = |field: &str| format!("auth.projects.{key}.{field}");
        let mut problems = Vec::new();
        let mut keys = Vec::new();
        if config.hs256_secret.is_none() && config.public_keys.is_empty() {
            problems.push(FieldViolation::new(
                format!("auth.projects.{key}"),
                "has neither hs256_secret nor public_keys: set at least one",
            ));
        }
        if let Some(secret) = &config.hs256_secret {
            if secret.expose().len() < MIN_HS256_SECRET_BYTES {
                problems.push(FieldViolation::new(
                    path("hs256_secret"),
                    format!("must be at least {MIN_HS256_SECRET_BYTES} bytes"),
                ));
            } else {
                match DecodingKey::from_secret(secret.expose().as_bytes()) {
                    Ok(decoding) => keys.push(VerifyingKey::new(Algorithm::HS256, decoding)),
                    Err(_) => problems.push(FieldViolation::new(
                        path("hs256_secret"),
                        "is not a usable HMAC key",
                    )),
                }
            }
        }
        for (i, value) in config.public_keys.iter().enumerate() {
            match parse_public_key(value) {
                Ok(key) => keys.push(key),
                Err(issue) => problems.push(FieldViolation::new(
                    format!("auth.projects.{key}.public_keys[{i}]"),
                    issue,
                )),
            }
        }
        if config.audience.trim().is_empty() {
            problems.push(FieldViolation::new(path("audience"), "must not be empty"));
        }
        if config
            .issuer
            .as_ref()
            .is_some_and(|issuer| issuer.trim().is_empty())
        {
            problems.push(FieldViolation::new(
                path("issuer"),
                "must not be empty when set",
            ));
        }
        if config.leeway_secs > MAX_LEEWAY_SECS {
            problems.push(FieldViolation::new(
                path("leeway_secs"),
                format!(
                    "must be at most {MAX_LEEWAY_SECS}, got {}",
                    config.leeway_secs
                ),
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            keys,
            audience: config.audience.clone(),
            issuer: config.issuer.clone(),
            leeway_secs: config.leeway_secs,
            allow_anonymous: config.allow_anonymous,
        })
    }

    /// The algorithms this project accepts, in key order, without repeats.
    fn algorithms(&self) -> Vec<Algorithm> {
        let mut seen = Vec::new();
        for key in &self.keys {
            if !seen.contains(&key.algorithm) {
                seen.push(key.algorithm);
            }
        }
        seen
    }

    /// The token's claims when one of this project's keys of algorithm `alg` signed it.
    fn verify_signature(&self, token: &str, alg: Algorithm) -> Result<Map<String, Value>> {
        let mut candidates = self.keys.iter().filter(|k| k.algorithm == alg).peekable();
        if candidates.peek().is_none() {
            let accepted = self
                .algorithms()
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Error::Unauthenticated(format!(
                "algorithm {alg:?} is not allowed for this project (accepted: {accepted})"
            )));
        }
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &key.validation) {
                Ok(data) => return Ok(data.claims),
                Err(err) => match err.kind() {
                    ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey => continue,
                    ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidKeyFormat => continue,
                    _ => {
                        return Err(Error::Unauthenticated(
                            "malformed token: the signature or the payload cannot be decoded"
                                .into(),
                        ));
                    }
                },
            }
        }
        Err(Error::Unauthenticated(
            "bad signature: the token is not signed by a key of this project".into(),
        ))
    }

    /// Checks the registered claims of a token whose signature verified.
    fn check_claims(&self, claims: &Map<String, Value>, now: u64) -> Result<Caller> {
        let unauthenticated = |message: String| Err(Error::Unauthenticated(message));
        let Some(exp) = claims.get("exp") else {
            return unauthenticated("missing `exp` claim: the token must expire".into());
        };
        let Some(exp) = numeric_date(exp) else {
            return unauthenticated("malformed `exp` claim: must be a NumericDate".into());
        };
        if exp.saturating_add(self.leeway_secs) < now {
            return unauthenticated(format!("token expired {}s ago", now.saturating_sub(exp)));
        }
        if let Some(nbf) = claims.get("nbf") {
            let Some(nbf) = numeric_date(nbf) else {
                return unauthenticated("malformed `nbf` claim: must be a NumericDate".into());
            };
            if nbf > now.saturating_add(self.leeway_secs) {
                return unauthenticated(format!(
                    "token not valid yet: valid in {}s (`nbf`)",
                    nbf - now
                ));
            }
        }
        match claims.get("aud") {
            None => {
                return unauthenticated(format!(
                    "missing `aud` claim (expected `{}`)",
                    self.audience
                ));
            }
            Some(aud) => {
                let audiences: Vec<&str> = match aud {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                if !audiences.contains(&self.audience.as_str()) {
                    return unauthenticated(format!(
                        "wrong audience `{}` (expected `{}`)",
                        truncate(&audiences.join(", "), 64),
                        self.audience
                    ));
                }
            }
        }
        if let Some(expected) = &self.issuer {
            match claims.get("iss") {
                None => {
                    return unauthenticated(format!("missing `iss` claim (expected `{expected}`)"));
                }
                Some(iss) if iss.as_str() != Some(expected.as_str()) => {
                    let shown = iss.as_str().map_or_else(|| iss.to_string(), str::to_string);
                    return unauthenticated(format!(
                        "wrong issuer `{}` (expected `{expected}`)",
                        truncate(&shown, 64)
                    ));
                }
                Some(_) => {}
            }
        }
        match claims.get("sub").and_then(Value::as_str) {
            Some(sub) if !sub.trim().is_empty() => match principal::checked(sub) {
                Ok(user) => Ok(Caller {
                    user: Some(user),
                    kind: CallerKind::Jwt,
                }),
                Err(issue) => unauthenticated(format!("malformed `sub` claim: {issue}")),
            },
            _ => unauthenticated("missing `sub` claim: the token must name its user".into()),
        }
    }
}

impl VerifyingKey {
    fn new(algorithm: Algorithm, key: DecodingKey) -> Self {
        let mut validation = Validation::new(algorithm);
        validation.required_spec_claims = HashSet::new();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.leeway = 0;
        Self {
            algorithm,
            key,
            validation,
        }
    }
}

/// A public key from a PEM text or the path of a PEM file; RSA keys verify RS256, EC P-256 keys
/// ES256. The error is the issue, for the caller to prefix with the key path.
fn parse_public_key(value: &str) -> std::result::Result<VerifyingKey, String> {
    let pem = if value.contains("-----BEGIN") {
        value.as_bytes().to_vec()
    } else {
        std::fs::read(value).map_err(|err| format!("cannot read `{value}`: {err}"))?
    };
    let not_public = "not a PEM RSA or EC P-256 public key";
    let label = pem_label(&pem).ok_or_else(|| not_public.to_string())?;
    if label.contains("PRIVATE") {
        return Err(format!(
            "{not_public}: this is a private key; configure its public half \
             (`openssl pkey -in KEY -pubout`)"
        ));
    }
    if label != "PUBLIC KEY" && label != "RSA PUBLIC KEY" {
        return Err(not_public.to_string());
    }
    let provider = ensure_provider();
    if let Ok(key) = DecodingKey::from_rsa_pem(&pem)
        && let Ok(der) = key.try_get_as_bytes()
        && (provider.key_utils.rsa_pub_components_from_public_key)(der).is_ok()
    {
        return Ok(VerifyingKey::new(Algorithm::RS256, key));
    }
    // The ES256 verifier parses the point on P-256, which refuses other curves.
    if let Ok(key) = DecodingKey::from_ec_pem(&pem)
        && (provider.verifier_factory)(&Algorithm::ES256, &key).is_ok()
    {
        return Ok(VerifyingKey::new(Algorithm::ES256, key));
    }
    Err(not_public.to_string())
}

/// The label of the first PEM block (`PUBLIC KEY` in `-----BEGIN PUBLIC KEY-----`).
fn pem_label(pem: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN ")? + "-----BEGIN ".len();
    let end = text[start..].find("-----")?;
    Some(text[start..start + end].trim().to_string())
}

/// The problems of `config`'s per-project settings, each `key path: issue`, for
/// [`crate::config::Config::validate`].
pub(crate) fn config_problems(config: &AuthConfig) -> Vec<String> {
    match Auth::from_config(config) {
        Ok(_) => Vec::new(),
        Err(Error::InvalidArgument { violations, .. }) => violations
            .into_iter()
            .map(|v| format!("{}: {}", v.field, v.issue))
            .collect(),
        Err(other) => vec![format!("auth.projects: {other}")],
    }
}

/// A configuration error whose message lists every `key path: issue`.
fn config_error(violations: Vec<FieldViolation>) -> Error {
    let message = violations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.issue))
        .collect::<Vec<_>>()
        .join("; ");
    Error::InvalidArgument {
        message: format!("invalid configuration: {message}"),
        violations,
    }
}

/// An invalid value whose message (what a command line prints) names the field.
fn invalid(field: impl Into<String>, issue: impl Into<String>) -> Error {
    let violation = FieldViolation::new(field, issue);
    Error::InvalidArgument {
        message: format!("{}: {}", violation.field, violation.issue),
        violations: vec![violation],
    }
}

/// A request's `Authorization` value (HTTP header or gRPC metadata) as text. `Ok(None)` when there
/// is none; a value that is not visible ASCII is refused, never taken as absent (which would make
/// the caller anonymous).
pub fn authorization_text(raw: Option<&[u8]>) -> Result<Option<&str>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match std::str::from_utf8(raw) {
        Ok(text)
            if text
                .bytes()
                .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic()) =>
        {
            Ok(Some(text))
        }
        _ => Err(Error::Unauthenticated(
            "the Authorization header must be ASCII: `Bearer <token>`".into(),
        )),
    }
}

/// The `project` claim of a bearer JWT, read without verifying anything: which project's keys
/// are to verify it (a route whose path names no project). `None` for a missing header, a token
/// that is not a JWT (the service token) or one without the claim.
pub fn claimed_project(authorization: Option<&str>) -> Option<String> {
    let token = bearer(authorization?).ok()?;
    let claims: Map<String, Value> = jsonwebtoken::dangerous::insecure_decode_claims(token).ok()?;
    claims.get("project")?.as_str().map(str::to_string)
}

/// The token of a `Bearer <token>` header value.
fn bearer(value: &str) -> Result<&str> {
    let presented = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| {
            Error::Unauthenticated("the Authorization header must be `Bearer <token>`".into())
        })?
        .trim();
    if presented.is_empty() {
        return Err(Error::Unauthenticated("empty bearer token".into()));
    }
    Ok(presented)
}

/// The canonical form of a project UUID, if `value` is one.
fn canonical_project_id(value: &str) -> Option<String> {
    uuid::Uuid::parse_str(value)
        .ok()
        .map(|id| id.hyphenated().to_string())
}

fn canonical_or_raw(value: &str) -> String {
    canonical_project_id(value).unwrap_or_else(|| value.to_string())
}

/// A JWT NumericDate (seconds since the epoch, possibly fractional), truncated to whole seconds.
fn numeric_date(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v as u64)
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The crypto provider of jsonwebtoken: the pure-Rust one, installed for the process if none is
/// (jsonwebtoken panics on first use when it cannot pick one by itself).
fn ensure_provider() -> &'static CryptoProvider {
    if let Some(provider) = CryptoProvider::try_get_default() {
        return provider;
    }
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    CryptoProvider::try_get_default()
        .unwrap_or(&jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The claims of a token issued by `agentsearch token`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// The user.
    pub sub: String,
    /// The project UUID.
    pub project: String,
    /// The audience, by default the project's configured one.
    pub aud: String,
    /// Issued at, seconds since the epoch.
    pub iat: u64,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
}

/// A key that signs tokens: an HS256 secret, or an RSA (RS256) or EC P-256 (ES256) private key.
pub struct SigningKey {
    algorithm: Algorithm,
    key: EncodingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// An HS256 key; the secret must have at least [`MIN_HS256_SECRET_BYTES`] bytes.
    pub fn hs256(secret: &Secret) -> Result<Self> {
        if secret.expose().len() < MIN_HS256_SECRET_BYTES {
            return Err(invalid(
                "hs256_secret",
                format!("must be at least {MIN_HS256_SECRET_BYTES} bytes"),
            ));
        }
        let key = EncodingKey::from_secret(secret.expose().as_bytes())
            .map_err(|_| invalid("hs256_secret", "is not a usable HMAC key"))?;
        Ok(Self {
            algorithm: Algorithm::HS256,
            key,
        })
    }

    /// A private key in PEM (PKCS#8, or PKCS#1 for RSA). `algorithm` is `RS256` or `ES256`, or
    /// `None` to take it from the key's type.
    pub fn from_pem(pem: &[u8], algorithm: Option<&str>) -> Result<Self> {
        let algorithm = match algorithm {
            None => None,
            Some(name) if name.eq_ignore_ascii_case("RS256") => Some(Algorithm::RS256),
            Some(name) if name.eq_ignore_ascii_case("ES256") => Some(Algorithm::ES256),
            Some(name) => {
                return Err(invalid(
                    "alg",
                    format!("must be RS256 or ES256, got `{}`", truncate(name, 16)),
                ));
            }
        };
        if !pem_label(pem).is_some_and(|label| label.contains("PRIVATE KEY")) {
            return Err(invalid(
                "private_key",
                "not a PEM private key (PKCS#8 `PRIVATE KEY`, or `RSA PRIVATE KEY`)",
            ));
        }
        let rsa = EncodingKey::from_rsa_pem(pem).ok();
        let ec = EncodingKey::from_ec_pem(pem).ok();
        let (algorithm, key) = match (algorithm, rsa, ec) {
            (None | Some(Algorithm::RS256), Some(key), _) => (Algorithm::RS256, key),
            (None | Some(Algorithm::ES256), _, Some(key)) => (Algorithm::ES256, key),
            (Some(alg), _, _) => {
                let wanted = if alg == Algorithm::RS256 {
                    "an RSA"
                } else {
                    "an EC P-256"
                };
                return Err(invalid(
                    "private_key",
                    format!("{alg:?} needs {wanted} private key"),
                ));
            }
            (None, None, None) => {
                return Err(invalid("private_key", "not an RSA or EC P-256 private key"));
            }
        };
        let provider = ensure_provider();
        if (provider.signer_factory)(&algorithm, &key).is_err() {
            return Err(invalid(
                "private_key",
                format!("not a usable {algorithm:?} private key (RSA, or EC on P-256)"),
            ));
        }
        Ok(Self { algorithm, key })
    }

    /// `HS256`, `RS256` or `ES256`.
    pub fn algorithm(&self) -> String {
        format!("{:?}", self.algorithm)
    }

    /// The signed token (`header.payload.signature`).
    pub fn sign(&self, claims: &TokenClaims) -> Result<String> {
        ensure_provider();
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, &self.key)
            .map_err(|err| Error::Internal(format!("signing a token: {err}")))
    }
}

/// The HS256 key of the embedded default, `<data_dir>/auth/local-hs256.key`: 32 random bytes in hex,
/// created on first use with mode 0600, read afterwards. It signs and verifies the demo project's
/// tokens when the configuration has no entry for that project.
pub fn local_key(data_dir: &Path) -> Result<Secret> {
    let path = data_dir.join(LOCAL_KEY_FILE);
    let io = |what: &str, path: &Path, err: std::io::Error| {
        Error::Internal(format!("{what} {}: {err}", path.display()))
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => return parse_local_key(&path, &text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(io("cannot read", &path, err)),
    }
    let dir = path.parent().unwrap_or(data_dir);
    std::fs::create_dir_all(dir).map_err(|err| io("cannot create", dir, err))?;
    let mut bytes = [0u8; 32];
    rand::TryRngCore::try_fill_bytes(&mut rand::rngs::OsRng, &mut bytes)
        .map_err(|err| Error::Internal(format!("no randomness for the local key: {err}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    // Written under a unique name, then linked into place: a concurrent first start either wins
    // the link or reads the winner's complete file.
    let staging = dir.join(format!(
        ".local-hs256.key.{}.{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    write_private(&staging, format!("{hex}\n").as_bytes())
        .map_err(|err| io("cannot write", &staging, err))?;
    let linked = std::fs::hard_link(&staging, &path);
    let _ = std::fs::remove_file(&staging);
    match linked {
        Ok(()) => Ok(Secret::new(hex)),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            let text =
                std::fs::read_to_string(&path).map_err(|err| io("cannot read", &path, err))?;
            parse_local_key(&path, &text)
        }
        Err(err) => Err(io("cannot create", &path, err)),
    }
}

fn parse_local_key(path: &Path, text: &str) -> Result<Secret> {
    let key = text.trim();
    if key.len() < MIN_HS256_SECRET_BYTES || !key.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::Internal(format!(
            "{} is not a local key (expected at least {MIN_HS256_SECRET_BYTES} hex digits); \
             delete it to create a new one",
            path.display()
        )));
    }
    Ok(Secret::new(key))
}

/// Creates `path` readable and writable by the owner only.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// The auth configuration `serve` runs with: `config`, plus the local key (see [`local_key`]) for
/// the demo project when `config` has no entry for it. The demo project then allows anonymous
/// requests only when no static token is configured, as before project keys existed: on loopback
/// the README's tokenless commands keep working, while a presented token is verified and names
/// the user.
pub fn embedded_config(config: &AuthConfig, data_dir: &Path) -> Result<AuthConfig> {
    let mut config = config.clone();
    if config.project(DEMO_PROJECT_ID).is_none() {
        config.projects.insert(
            DEMO_PROJECT_ID.to_string(),
            ProjectAuthConfig {
                hs256_secret: Some(local_key(data_dir)?),
                allow_anonymous: config.token.is_none(),
                ..ProjectAuthConfig::default()
            },
        );
    }
    Ok(config)
}

/// The key that signs tokens of `project_id` without a private key given: the project's
/// `hs256_secret`, or for an unconfigured demo project the local key of `data_dir`.
pub fn project_signing_secret(
    config: &AuthConfig,
    project_id: &str,
    data_dir: &Path,
) -> Result<Secret> {
    match config.project(project_id) {
        Some(project) => project.hs256_secret.clone().ok_or_else(|| {
            invalid(
                format!("auth.projects.{project_id}.hs256_secret"),
                "is not set: sign with the private key of one of the project's public_keys",
            )
        }),
        None if canonical_project_id(project_id).as_deref() == Some(DEMO_PROJECT_ID) => {
            local_key(data_dir)
        }
        None => Err(invalid(
            format!("auth.projects.{project_id}"),
            "is not configured: set its hs256_secret, or sign with a private key",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Test-only key pairs, generated with openssl; they protect nothing.
    const RSA_PUBLIC: &str = include_str!("../tests/fixtures/auth/rsa-public.pem");
    const RSA_PRIVATE: &str = include_str!("../tests/fixtures/auth/rsa-private.pem");
    const EC_PUBLIC: &str = include_str!("../tests/fixtures/auth/ec-p256-public.pem");
    const EC_PRIVATE: &str = include_str!("../tests/fixtures/auth/ec-p256-private.pem");
    const P384_PUBLIC: &str = include_str!("../tests/fixtures/auth/ec-p384-public.pem");

    const HS_PROJECT: &str = "11111111-1111-4111-8111-111111111111";
    const RSA_PROJECT: &str = "22222222-2222-4222-8222-222222222222";
    const EC_PROJECT: &str = "33333333-3333-4333-8333-333333333333";
    const OTHER_HS_PROJECT: &str = "44444444-4444-4444-8444-444444444444";
    const OPEN_PROJECT: &str = "55555555-5555-4555-8555-555555555555";
    const HS_SECRET: &str = "hs-secret-of-project-one-0123456789abcdef";
    const OTHER_HS_SECRET: &str = "hs-secret-of-project-four-0123456789abcdef";
    const SERVICE_TOKEN: &str = "service-token-0123456789";

    fn project(secret: Option<&str>, keys: &[&str]) -> ProjectAuthConfig {
        ProjectAuthConfig {
            hs256_secret: secret.map(Secret::new),
            public_keys: keys.iter().map(|k| k.to_string()).collect(),
            ..ProjectAuthConfig::default()
        }
    }

    fn config(token: Option<&str>) -> AuthConfig {
        let mut projects = BTreeMap::new();
        projects.insert(HS_PROJECT.to_string(), project(Some(HS_SECRET), &[]));
        projects.insert(RSA_PROJECT.to_string(), project(None, &[RSA_PUBLIC]));
        projects.insert(EC_PROJECT.to_string(), project(None, &[EC_PUBLIC]));
        projects.insert(
            OTHER_HS_PROJECT.to_string(),
            project(Some(OTHER_HS_SECRET), &[]),
        );
        AuthConfig {
            token: token.map(Secret::new),
            internal_token: None,
            projects,
        }
    }

    fn auth() -> Auth {
        Auth::from_config(&config(Some(SERVICE_TOKEN))).unwrap()
    }

    fn claims(project: &str) -> TokenClaims {
        let now = now_secs();
        TokenClaims {
            sub: "alice@example.com".into(),
            project: project.into(),
            aud: "agentsearch".into(),
            iat: now,
            exp: now + 3600,
            iss: None,
        }
    }

    fn hs(secret: &str) -> SigningKey {
        SigningKey::hs256(&Secret::new(secret)).unwrap()
    }

    fn rsa() -> SigningKey {
        SigningKey::from_pem(RSA_PRIVATE.as_bytes(), Some("RS256")).unwrap()
    }

    fn ec() -> SigningKey {
        SigningKey::from_pem(EC_PRIVATE.as_bytes(), None).unwrap()
    }

    /// A token signed by `key` with arbitrary JSON claims.
    fn raw_token(key: &SigningKey, claims: &Value) -> String {
        ensure_provider();
        jsonwebtoken::encode(&Header::new(key.algorithm), claims, &key.key).unwrap()
    }

    fn bearer_of(token: &str) -> String {
        format!("Bearer {token}")
    }

    fn unauthenticated(result: Result<Caller>) -> String {
        match result {
            Err(Error::Unauthenticated(message)) => message,
            other => panic!("expected Unauthenticated, got {other:?}"),
        }
    }

    fn mismatch(result: Result<Caller>) -> String {
        match result {
            Err(err @ Error::ProjectMismatch(_)) => {
                assert_eq!(err.code().as_str(), "PROJECT_MISMATCH");
                assert_eq!(err.code().http_status(), 403);
                assert_eq!(err.code().grpc_code(), 7);
                assert!(!err.code().retryable());
                err.to_string()
            }
            other => panic!("expected ProjectMismatch, got {other:?}"),
        }
    }

    fn jwt_caller() -> Caller {
        Caller {
            user: Some("alice@example.com".into()),
            kind: CallerKind::Jwt,
        }
    }

    #[test]
    fn token_rules() {
        let open = Auth::default();
        assert!(open.check(None).is_ok());
        assert!(
            open.check_bind("127.0.0.1:8080".parse().unwrap(), "http")
                .is_ok()
        );
        assert!(
            open.check_bind("[::1]:8080".parse().unwrap(), "http")
                .is_ok()
        );
        assert!(
            open.check_bind("0.0.0.0:8080".parse().unwrap(), "http")
                .is_err()
        );

        let closed = Auth::new(Some(Secret::new("0123456789abcdef")));
        assert!(
            closed
                .check_bind("0.0.0.0:8080".parse().unwrap(), "http")
                .is_ok()
        );
        assert!(closed.check(Some("Bearer 0123456789abcdef")).is_ok());
        assert!(matches!(closed.check(None), Err(Error::Unauthenticated(_))));
        assert!(closed.check(Some("Bearer 0123456789abcdeX")).is_err());
        assert!(closed.check(Some("Basic 0123456789abcdef")).is_err());
    }

    #[test]
    fn check_bind_requires_the_static_token_even_with_project_keys() {
        let keys_only = Auth::from_config(&config(None)).unwrap();
        let err = keys_only
            .check_bind("0.0.0.0:8080".parse().unwrap(), "the REST API")
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.token"), "{err}");
        assert!(
            keys_only
                .check_bind("127.0.0.1:8080".parse().unwrap(), "the REST API")
                .is_ok()
        );
        assert!(
            auth()
                .check_bind("0.0.0.0:8080".parse().unwrap(), "x")
                .is_ok()
        );
    }

    #[test]
    fn check_bind_refuses_anonymous_callers_beyond_loopback_even_with_the_token() {
        let mut config = config(Some(SERVICE_TOKEN));
        config.projects.get_mut(HS_PROJECT).unwrap().allow_anonymous = true;
        let open = Auth::from_config(&config).unwrap();
        let err = open
            .check_bind("0.0.0.0:8080".parse().unwrap(), "the REST API")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("auth.projects.{HS_PROJECT}.allow_anonymous")),
            "{err}"
        );
        assert!(
            open.check_bind("10.1.2.3:50051".parse().unwrap(), "the gRPC API")
                .is_err()
        );
        assert!(
            open.check_bind("127.0.0.1:8080".parse().unwrap(), "the REST API")
                .is_ok()
        );
        assert!(open.check_bind("[::1]:8080".parse().unwrap(), "x").is_ok());
    }

    #[test]
    fn hs256_token_is_accepted() {
        let token = hs(HS_SECRET).sign(&claims(HS_PROJECT)).unwrap();
        let caller = auth()
            .authenticate(Some(&bearer_of(&token)), HS_PROJECT)
            .unwrap();
        assert_eq!(caller, jwt_caller());
        // Any spelling of the project UUID.
        let upper = HS_PROJECT.to_uppercase();
        assert_eq!(
            auth()
                .authenticate(Some(&bearer_of(&token)), &upper)
                .unwrap(),
            jwt_caller()
        );
    }

    #[test]
    fn rs256_token_is_accepted() {
        let token = rsa().sign(&claims(RSA_PROJECT)).unwrap();
        assert_eq!(
            auth()
                .authenticate(Some(&bearer_of(&token)), RSA_PROJECT)
                .unwrap(),
            jwt_caller()
        );
    }

    #[test]
    fn es256_token_is_accepted() {
        let key = ec();
        assert_eq!(key.algorithm(), "ES256");
        let token = key.sign(&claims(EC_PROJECT)).unwrap();
        assert_eq!(
            auth()
                .authenticate(Some(&bearer_of(&token)), EC_PROJECT)
                .unwrap(),
            jwt_caller()
        );
    }

    #[test]
    fn public_keys_may_be_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rsa.pem");
        std::fs::write(&path, RSA_PUBLIC).unwrap();
        let mut config = config(None);
        config.projects.insert(
            RSA_PROJECT.to_string(),
            project(None, &[path.to_str().unwrap()]),
        );
        let auth = Auth::from_config(&config).unwrap();
        let token = rsa().sign(&claims(RSA_PROJECT)).unwrap();
        assert_eq!(
            auth.authenticate(Some(&bearer_of(&token)), RSA_PROJECT)
                .unwrap(),
            jwt_caller()
        );
    }

    #[test]
    fn token_without_project_claim_is_accepted() {
        let now = now_secs();
        let token = raw_token(
            &rsa(),
            &serde_json::json!({"sub": "bob", "aud": "agentsearch", "exp": now + 60}),
        );
        let caller = auth()
            .authenticate(Some(&bearer_of(&token)), RSA_PROJECT)
            .unwrap();
        assert_eq!(caller.user.as_deref(), Some("bob"));
    }

    #[test]
    fn missing_header_is_refused() {
        let message = unauthenticated(auth().authenticate(None, HS_PROJECT));
        assert!(message.contains("missing bearer token"), "{message}");
    }

    #[test]
    fn non_bearer_header_is_refused() {
        let message = unauthenticated(auth().authenticate(Some("Basic abc"), HS_PROJECT));
        assert!(message.contains("`Bearer <token>`"), "{message}");
        let message = unauthenticated(auth().authenticate(Some("Bearer "), HS_PROJECT));
        assert!(message.contains("empty"), "{message}");
    }

    #[test]
    fn malformed_token_is_refused() {
        for token in [
            "not-a-jwt",
            "a.b.c",
            "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln",
        ] {
            let message = unauthenticated(auth().authenticate(Some(&bearer_of(token)), HS_PROJECT));
            assert!(message.contains("malformed token"), "{token}: {message}");
        }
    }

    #[test]
    fn bad_signature_is_refused() {
        let token = hs(HS_SECRET).sign(&claims(HS_PROJECT)).unwrap();
        let (rest, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { 'B' } else { 'A' };
        let forged = format!("{rest}.{flipped}{}", &signature[1..]);
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&forged)), HS_PROJECT));
        assert!(message.contains("bad signature"), "{message}");

        let token = hs("an-unknown-secret-0123456789abcdefgh")
            .sign(&claims(HS_PROJECT))
            .unwrap();
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("bad signature"), "{message}");
        assert!(!message.contains(HS_SECRET));
    }

    #[test]
    fn expired_token_is_refused() {
        let mut c = claims(HS_PROJECT);
        c.exp = now_secs() - 120;
        let token = hs(HS_SECRET).sign(&c).unwrap();
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("expired"), "{message}");

        // Within the leeway (30 s by default).
        c.exp = now_secs() - 5;
        let token = hs(HS_SECRET).sign(&c).unwrap();
        assert!(
            auth()
                .authenticate(Some(&bearer_of(&token)), HS_PROJECT)
                .is_ok()
        );
    }

    #[test]
    fn token_not_yet_valid_or_without_exp_is_refused() {
        let now = now_secs();
        let token = raw_token(
            &hs(HS_SECRET),
            &serde_json::json!({"sub": "a", "aud": "agentsearch", "exp": now + 7200, "nbf": now + 3600}),
        );
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("not valid yet"), "{message}");

        let token = raw_token(
            &hs(HS_SECRET),
            &serde_json::json!({"sub": "a", "aud": "agentsearch"}),
        );
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("missing `exp`"), "{message}");
    }

    #[test]
    fn wrong_audience_is_refused() {
        let mut c = claims(HS_PROJECT);
        c.aud = "someone-else".into();
        let token = hs(HS_SECRET).sign(&c).unwrap();
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert_eq!(
            message,
            "wrong audience `someone-else` (expected `agentsearch`)"
        );
    }

    #[test]
    fn wrong_issuer_is_refused() {
        let mut config = config(None);
        config.projects.get_mut(HS_PROJECT).unwrap().issuer =
            Some("https://idp.example.com".into());
        let auth = Auth::from_config(&config).unwrap();
        let mut c = claims(HS_PROJECT);
        c.iss = Some("https://evil.example.com".into());
        let token = hs(HS_SECRET).sign(&c).unwrap();
        let message = unauthenticated(auth.authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("wrong issuer"), "{message}");

        c.iss = None;
        let token = hs(HS_SECRET).sign(&c).unwrap();
        let message = unauthenticated(auth.authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains("missing `iss`"), "{message}");

        c.iss = Some("https://idp.example.com".into());
        let token = hs(HS_SECRET).sign(&c).unwrap();
        assert_eq!(
            auth.authenticate(Some(&bearer_of(&token)), HS_PROJECT)
                .unwrap(),
            jwt_caller()
        );
    }

    #[test]
    fn missing_sub_is_refused() {
        let now = now_secs();
        for claims in [
            serde_json::json!({"aud": "agentsearch", "exp": now + 60}),
            serde_json::json!({"sub": "", "aud": "agentsearch", "exp": now + 60}),
        ] {
            let token = raw_token(&hs(HS_SECRET), &claims);
            let message =
                unauthenticated(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
            assert!(message.contains("missing `sub`"), "{message}");
        }
    }

    #[test]
    fn sub_is_checked_and_normalised_like_every_principal() {
        let now = now_secs();
        let signed = |sub: &str| {
            let claims = serde_json::json!({"sub": sub, "aud": "agentsearch", "exp": now + 60});
            bearer_of(&raw_token(&hs(HS_SECRET), &claims))
        };
        for bad in [
            "a".repeat(200 * 1024),
            "alice@example.com\nuser:admin@example.com".to_string(),
            "alice\u{0}@example.com".to_string(),
        ] {
            let message = unauthenticated(auth().authenticate(Some(&signed(&bad)), HS_PROJECT));
            assert!(message.starts_with("malformed `sub` claim"), "{message}");
            assert!(message.len() < 200, "the message echoes the claim");
        }
        let caller = auth()
            .authenticate(Some(&signed(" Alice@Example.COM ")), HS_PROJECT)
            .unwrap();
        assert_eq!(caller, jwt_caller());
        // Only ASCII case folds: a Kelvin sign is another user than `k`.
        let caller = auth()
            .authenticate(Some(&signed("\u{212a}im@example.com")), HS_PROJECT)
            .unwrap();
        assert_eq!(caller.user.as_deref(), Some("\u{212a}im@example.com"));
    }

    #[test]
    fn an_unreadable_authorization_header_is_refused_not_anonymous() {
        assert_eq!(authorization_text(None).unwrap(), None);
        assert_eq!(
            authorization_text(Some(b"Bearer abc.def")).unwrap(),
            Some("Bearer abc.def")
        );
        for raw in [
            &b"Bearer \xc3\xa9t\xc3\xa9"[..],
            b"Bearer \xff",
            b"Bearer a\x01b",
        ] {
            assert!(matches!(
                authorization_text(Some(raw)),
                Err(Error::Unauthenticated(_))
            ));
        }
    }

    #[test]
    fn hs256_token_against_an_rsa_only_project_is_refused() {
        // The classic confusion: an HS256 token "signed" with the RSA public key as the secret.
        let forged = hs(RSA_PUBLIC).sign(&claims(RSA_PROJECT)).unwrap();
        let message = unauthenticated(auth().authenticate(Some(&bearer_of(&forged)), RSA_PROJECT));
        assert_eq!(
            message,
            "algorithm HS256 is not allowed for this project (accepted: RS256)"
        );
    }

    #[test]
    fn project_mismatch_by_claim() {
        // Signed with this project's key, but names another project.
        let token = hs(HS_SECRET).sign(&claims(OTHER_HS_PROJECT)).unwrap();
        let message = mismatch(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains(OTHER_HS_PROJECT), "{message}");
    }

    #[test]
    fn project_mismatch_by_key() {
        // A valid token of another project, with and without the `project` claim.
        let token = hs(OTHER_HS_SECRET).sign(&claims(OTHER_HS_PROJECT)).unwrap();
        mismatch(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        let token = ec().sign(&claims(EC_PROJECT)).unwrap();
        mismatch(auth().authenticate(Some(&bearer_of(&token)), RSA_PROJECT));
        let now = now_secs();
        let token = raw_token(
            &hs(OTHER_HS_SECRET),
            &serde_json::json!({"sub": "a", "aud": "agentsearch", "exp": now + 60}),
        );
        let message = mismatch(auth().authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        assert!(message.contains(OTHER_HS_PROJECT), "{message}");
    }

    #[test]
    fn service_token_is_accepted() {
        let bearer = bearer_of(SERVICE_TOKEN);
        for project in [HS_PROJECT, RSA_PROJECT, OPEN_PROJECT] {
            assert_eq!(
                auth().authenticate(Some(&bearer), project).unwrap(),
                Caller {
                    user: None,
                    kind: CallerKind::ServiceToken
                }
            );
        }
    }

    #[test]
    fn anonymous_only_when_allowed() {
        let mut config = config(None);
        config.projects.get_mut(HS_PROJECT).unwrap().allow_anonymous = true;
        let auth = Auth::from_config(&config).unwrap();
        assert_eq!(
            auth.authenticate(None, HS_PROJECT).unwrap(),
            Caller {
                user: None,
                kind: CallerKind::Anonymous
            }
        );
        // A presented token must still be valid.
        let mut c = claims(HS_PROJECT);
        c.aud = "x".into();
        let token = hs(HS_SECRET).sign(&c).unwrap();
        unauthenticated(auth.authenticate(Some(&bearer_of(&token)), HS_PROJECT));
        let token = hs(HS_SECRET).sign(&claims(HS_PROJECT)).unwrap();
        assert_eq!(
            auth.authenticate(Some(&bearer_of(&token)), HS_PROJECT)
                .unwrap(),
            jwt_caller()
        );
        // Not allowed on the other projects.
        unauthenticated(auth.authenticate(None, RSA_PROJECT));
    }

    #[test]
    fn project_without_keys_keeps_the_static_token_rule() {
        let open = Auth::from_config(&config(None)).unwrap();
        assert_eq!(
            open.authenticate(None, OPEN_PROJECT).unwrap(),
            Caller {
                user: None,
                kind: CallerKind::Anonymous
            }
        );
        let closed = auth();
        unauthenticated(closed.authenticate(None, OPEN_PROJECT));
        unauthenticated(closed.authenticate(Some("Bearer wrong-token-0123456"), OPEN_PROJECT));
        assert_eq!(
            closed
                .authenticate(Some(&bearer_of(SERVICE_TOKEN)), OPEN_PROJECT)
                .unwrap()
                .kind,
            CallerKind::ServiceToken
        );
        assert!(!closed.has_project_keys(OPEN_PROJECT));
        assert!(closed.has_project_keys(HS_PROJECT));
    }

    #[test]
    fn invalid_project_settings_name_the_key_path() {
        let mut projects = BTreeMap::new();
        projects.insert("not-a-uuid".to_string(), project(Some(HS_SECRET), &[]));
        projects.insert(HS_PROJECT.to_string(), project(Some("short"), &[]));
        projects.insert(RSA_PROJECT.to_string(), project(None, &[P384_PUBLIC]));
        projects.insert(EC_PROJECT.to_string(), project(None, &[]));
        projects.insert(
            OTHER_HS_PROJECT.to_string(),
            project(None, &[EC_PUBLIC, RSA_PRIVATE, "/nonexistent/key.pem"]),
        );
        let config = AuthConfig {
            token: None,
            internal_token: None,
            projects,
        };
        let problems = config_problems(&config);
        for expected in [
            "auth.projects.not-a-uuid: the key must be a project UUID".to_string(),
            format!("auth.projects.{HS_PROJECT}.hs256_secret: must be at least 32 bytes"),
            format!(
                "auth.projects.{RSA_PROJECT}.public_keys[0]: not a PEM RSA or EC P-256 public key"
            ),
            format!("auth.projects.{EC_PROJECT}: has neither hs256_secret nor public_keys"),
            format!(
                "auth.projects.{OTHER_HS_PROJECT}.public_keys[1]: not a PEM RSA or EC P-256 public key: this is a private key"
            ),
            format!(
                "auth.projects.{OTHER_HS_PROJECT}.public_keys[2]: cannot read `/nonexistent/key.pem`"
            ),
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(&expected)),
                "{expected} not in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), 6, "{problems:#?}");
        assert!(
            !problems.iter().any(|p| p.contains("short")),
            "secrets never echoed"
        );
        let err = Auth::from_config(&config).unwrap_err().to_string();
        assert!(err.contains("auth.projects.not-a-uuid"), "{err}");
    }

    #[test]
    fn local_key_is_stable_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let first = local_key(dir.path()).unwrap();
        let second = local_key(dir.path()).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.expose().len(), 64);
        let path = dir.path().join("auth/local-hs256.key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        let other = tempfile::tempdir().unwrap();
        assert_ne!(local_key(other.path()).unwrap(), first);
    }

    #[test]
    fn embedded_config_registers_the_local_key_for_the_demo_project() {
        let dir = tempfile::tempdir().unwrap();
        let embedded = embedded_config(&AuthConfig::default(), dir.path()).unwrap();
        let auth = Auth::from_config(&embedded).unwrap();
        assert_eq!(
            auth.authenticate(None, DEMO_PROJECT_ID).unwrap().kind,
            CallerKind::Anonymous
        );
        let secret =
            project_signing_secret(&AuthConfig::default(), DEMO_PROJECT_ID, dir.path()).unwrap();
        let token = SigningKey::hs256(&secret)
            .unwrap()
            .sign(&claims(DEMO_PROJECT_ID))
            .unwrap();
        assert_eq!(
            auth.authenticate(Some(&bearer_of(&token)), DEMO_PROJECT_ID)
                .unwrap(),
            jwt_caller()
        );
        // With a static token, the demo project is no longer anonymous.
        let closed = AuthConfig {
            token: Some(Secret::new(SERVICE_TOKEN)),
            internal_token: None,
            projects: BTreeMap::new(),
        };
        let auth = Auth::from_config(&embedded_config(&closed, dir.path()).unwrap()).unwrap();
        unauthenticated(auth.authenticate(None, DEMO_PROJECT_ID));
        // A configured demo project is left alone.
        let configured = config(None);
        let mut with_demo = configured.clone();
        with_demo
            .projects
            .insert(DEMO_PROJECT_ID.to_string(), project(None, &[RSA_PUBLIC]));
        assert_eq!(embedded_config(&with_demo, dir.path()).unwrap(), with_demo);
        assert!(project_signing_secret(&with_demo, DEMO_PROJECT_ID, dir.path()).is_err());
        assert!(project_signing_secret(&configured, OPEN_PROJECT, dir.path()).is_err());
    }

    #[test]
    fn signing_keys_refuse_the_wrong_material() {
        assert!(SigningKey::hs256(&Secret::new("short")).is_err());
        assert!(SigningKey::from_pem(RSA_PUBLIC.as_bytes(), None).is_err());
        assert!(SigningKey::from_pem(RSA_PRIVATE.as_bytes(), Some("ES256")).is_err());
        assert!(SigningKey::from_pem(EC_PRIVATE.as_bytes(), Some("RS256")).is_err());
        assert!(SigningKey::from_pem(EC_PRIVATE.as_bytes(), Some("HS256")).is_err());
        assert_eq!(
            SigningKey::from_pem(RSA_PRIVATE.as_bytes(), None)
                .unwrap()
                .algorithm(),
            "RS256"
        );
    }
}
