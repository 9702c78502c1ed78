//! Authentication of agentsearch's gRPC and REST endpoints (public and shard). Until per-project
//! JWTs exist, a deployment either runs with auth off (only allowed on a loopback bind) or with one
//! static bearer token that every request must carry, router to shard included.

use std::net::SocketAddr;

use crate::config::Secret;
use crate::error::{Error, Result};

#[derive(Clone, Debug, Default)]
pub struct Auth {
    token: Option<Secret>,
}

impl Auth {
    pub fn new(token: Option<Secret>) -> Self {
        Self { token }
    }

    pub fn enabled(&self) -> bool {
        self.token.is_some()
    }

    /// The `Authorization` header value a client of a protected endpoint sends.
    pub fn header(&self) -> Option<String> {
        self.token
            .as_ref()
            .map(|t| format!("Bearer {}", t.expose()))
    }

    /// Checks an `Authorization` header value.
    pub fn check(&self, authorization: Option<&str>) -> Result<()> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let Some(value) = authorization else {
            return Err(Error::Unauthenticated("missing bearer token".into()));
        };
        let presented = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| {
                Error::Unauthenticated("the Authorization header must be `Bearer <token>`".into())
            })?;
        if constant_time_eq(presented.trim().as_bytes(), expected.expose().as_bytes()) {
            Ok(())
        } else {
            Err(Error::Unauthenticated("invalid bearer token".into()))
        }
    }

    /// Refuses to expose an unauthenticated API beyond this machine.
    pub fn check_bind(&self, addr: SocketAddr, what: &str) -> Result<()> {
        if self.token.is_none() && !addr.ip().is_loopback() {
            return Err(Error::invalid(
                "auth.token",
                format!(
                    "{what} binds {addr}, beyond loopback, without authentication: set AGENTSEARCH_AUTH__TOKEN \
                     (or auth.token in the config file), or bind 127.0.0.1"
                ),
            ));
        }
        Ok(())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
