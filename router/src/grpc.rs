//! What the public gRPC services share: [`PublicGrpc`], which serves every service of the public
//! API, and `Begun`, a call whose caller is authenticated for the project it names. The services
//! themselves live with their domain ([`crate::tools::grpc`], [`crate::context::grpc`]).

use std::sync::Arc;
use std::time::Instant;

use agentsearch_common::Error;
use agentsearch_common::auth::authorization_text;
use agentsearch_common::ids::parse_project_id;
use agentsearch_proto::status_from_error;
use tonic::{Request, Status};

use crate::Router;
use crate::auth::Auth;
use crate::request::RequestContext;

#[derive(Clone)]
pub struct PublicGrpc {
    router: Arc<Router>,
    auth: Arc<Auth>,
}

impl PublicGrpc {
    pub fn new(router: Arc<Router>, auth: Auth) -> Self {
        Self {
            router,
            auth: Arc::new(auth),
        }
    }

    pub(crate) fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// The request id (the caller's `x-request-id` or a new one) and the credentials; every method
    /// then authenticates them for the project it names with [`Begun::authorize`].
    pub(crate) fn begin<T>(&self, request: &Request<T>) -> Begun {
        let metadata = request.metadata();
        Begun {
            started: Instant::now(),
            request_id: agentsearch_proto::context::request_id(metadata),
            authorization: authorization_text(metadata.get("authorization").map(|v| v.as_bytes()))
                .map(|v| v.map(str::to_string))
                .map_err(|e| e.to_string()),
            auth: self.auth.clone(),
        }
    }
}

/// A call whose caller is not yet authenticated for a project.
#[derive(Clone)]
pub(crate) struct Begun {
    pub(crate) request_id: String,
    started: Instant,
    /// The `Authorization` metadata; why it cannot be read when it is not ASCII.
    authorization: Result<Option<String>, String>,
    auth: Arc<Auth>,
}

impl Begun {
    /// Validates `projectId` and authenticates the caller for it.
    pub(crate) fn authenticate(&self, project_id: &str) -> Result<(String, RequestContext), Error> {
        let authorization = match &self.authorization {
            Ok(value) => value.as_deref(),
            Err(unreadable) => return Err(Error::Unauthenticated(unreadable.clone())),
        };
        let project_id = match parse_project_id("projectId", project_id) {
            Ok(id) => id,
            Err(invalid) => {
                if authorization.is_none() && self.auth.enabled() {
                    return Err(Error::Unauthenticated("missing bearer token".into()));
                }
                return Err(invalid);
            }
        };
        let caller = self.auth.authenticate(authorization, &project_id)?;
        Ok((
            project_id,
            RequestContext {
                request_id: self.request_id.clone(),
                user: caller.user,
                kind: caller.kind,
                auth: self.started.elapsed(),
            },
        ))
    }

    /// [`Begun::authenticate`] for a catalog, sync, record or group operation: user tokens are
    /// refused (see [`RequestContext::require_service`]).
    pub(crate) fn authenticate_service(&self, project_id: &str) -> Result<String, Error> {
        let (project_id, ctx) = self.authenticate(project_id)?;
        ctx.require_service()?;
        Ok(project_id)
    }

    /// [`Begun::authenticate_service`] with the failure as a status.
    #[allow(clippy::result_large_err)]
    pub(crate) fn authorize_service(&self, project_id: &str) -> Result<String, Status> {
        self.authenticate_service(project_id)
            .map_err(|e| status_from_error(&e, &self.request_id))
    }

    /// [`Begun::authenticate`] with the failure as a status.
    #[allow(clippy::result_large_err)]
    pub(crate) fn authorize(&self, project_id: &str) -> Result<(String, RequestContext), Status> {
        self.authenticate(project_id)
            .map_err(|e| status_from_error(&e, &self.request_id))
    }
}
