//! Who is asking: the per-request context every adapter (REST, gRPC, MCP) builds once the caller
//! is authenticated, and the domain logic reads.

use std::time::Duration;

use agentsearch_common::auth::CallerKind;
use agentsearch_common::{Error, Result};

/// Who is asking and how long authenticating them took (the `auth` trace step).
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub request_id: String,
    /// The token's `sub`; `None` for service and anonymous callers.
    pub user: Option<String>,
    pub kind: CallerKind,
    pub auth: Duration,
}

impl RequestContext {
    /// Catalog, sync, record and group writes (and sync listings) are for the deployment's
    /// services, not for end users: a user token is refused.
    pub fn require_service(&self) -> Result<()> {
        if self.kind == CallerKind::Jwt {
            return Err(Error::PermissionDenied(
                "a user token may not change the catalog or synced content; use the service token"
                    .into(),
            ));
        }
        Ok(())
    }
}
