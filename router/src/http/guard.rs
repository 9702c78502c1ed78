//! The request guard of the REST API: one middleware in front of every route that turns away what
//! a browser page of another site could send, before any body is read.
//!
//! - A request with an `Origin` header is served only when that origin is listed in
//!   `http.allowed_origins` (`null` never is): `ORIGIN_NOT_ALLOWED` otherwise. Allowed origins get
//!   CORS headers, and their preflight requests are answered.
//! - A request that would be served anonymously (no `Authorization` header, to a project that
//!   allows anonymous callers) is served only under an IP literal, `localhost`, `*.localhost` or a
//!   name in `http.allowed_hosts`: `HOST_NOT_ALLOWED` otherwise, so a name rebound to a loopback
//!   address (DNS rebinding) cannot reach the tokenless access meant for local use.
//! - A body sent to a route that takes JSON must be declared JSON (`application/json` or
//!   `application/*+json`): `UNSUPPORTED_MEDIA_TYPE` otherwise, so no form or `text/plain` post
//!   of a page reaches a handler.

use std::net::IpAddr;

use agentsearch_common::Error;
use agentsearch_common::config::{HttpConfig, normalize_host, normalize_origin, split_port};
use agentsearch_common::ids::truncate;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_METHOD,
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, TRANSFER_ENCODING, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::Auth;
use crate::http::{ApiError, RestState, request_id};

/// Who may call the REST API from a browser, and under which host names anonymous callers are
/// served (`[http]` of the configuration, normalised).
#[derive(Clone, Debug, Default)]
pub struct RestAccess {
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
}

impl RestAccess {
    /// The lists of `config`; entries [`agentsearch_common::config::Config::validate`] refuses are
    /// left out.
    pub fn from_config(config: &HttpConfig) -> Self {
        Self::new(&config.allowed_origins, &config.allowed_hosts)
    }

    pub fn new(origins: &[String], hosts: &[String]) -> Self {
        Self {
            allowed_origins: origins
                .iter()
                .filter_map(|o| normalize_origin(o).ok())
                .collect(),
            allowed_hosts: hosts
                .iter()
                .filter_map(|h| normalize_host(h).ok())
                .collect(),
        }
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        normalize_origin(origin).is_ok_and(|o| self.allowed_origins.contains(&o))
    }

    /// Whether anonymous requests are served under the `Host` header `host`.
    fn host_allowed(&self, host: &str) -> bool {
        let Some((name, _port)) = split_port(host) else {
            return false;
        };
        if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
            return v6.parse::<std::net::Ipv6Addr>().is_ok();
        }
        if name.parse::<IpAddr>().is_ok() {
            return true;
        }
        let Ok(name) = normalize_host(name) else {
            return false;
        };
        name == "localhost" || name.ends_with(".localhost") || self.allowed_hosts.contains(&name)
    }
}

/// Methods whose routes take a JSON body.
fn takes_body(method: &Method) -> bool {
    [Method::POST, Method::PUT, Method::PATCH].contains(method)
}

/// `application/json` or `application/<something>+json`, with any parameters.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || (subtype.len() > "+json".len() && subtype.to_ascii_lowercase().ends_with("+json")))
}

/// Whether the request carries a body.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// The project named by `/api/<api>/projects/<id>/...`, percent-decoded as the router decodes it.
fn project_in_path(path: &str) -> Option<String> {
    let mut segments = path.split('/');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some(""), Some("api"), Some(_), Some("projects"), Some(id)) => percent_decode(id),
        _ => None,
    }
}

fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether the request would be served without credentials: it has no `Authorization` header and
/// the project in its path (or, for other paths, the deployment) accepts anonymous callers. A
/// request that will be refused for lack of a token is left to say so (401).
fn served_anonymously(auth: &Auth, path: &str, headers: &HeaderMap) -> bool {
    if headers.contains_key(AUTHORIZATION) {
        return false;
    }
    let project = project_in_path(path).unwrap_or_default();
    auth.authenticate(None, &project).is_ok()
}

/// The checks of the module documentation, in order: origin, host, content type.
fn check(state: &RestState, request: &Request) -> Result<(), Error> {
    let headers = request.headers();
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !state.access.origin_allowed(origin) {
            return Err(Error::OriginNotAllowed(format!(
                "requests from the web origin `{}` are not allowed: only origins listed in \
                 http.allowed_origins may call this API from a browser",
                truncate(origin, 128)
            )));
        }
    }
    if served_anonymously(&state.auth, request.uri().path(), headers) {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()));
        if !host.is_some_and(|h| state.access.host_allowed(h)) {
            return Err(Error::HostNotAllowed(format!(
                "requests without a bearer token are served only under loopback names (an IP \
                 address, localhost or *.localhost), not under `{}`: send a token, or add the \
                 name to http.allowed_hosts (AGENTSEARCH_HTTP__ALLOWED_HOSTS)",
                truncate(host.unwrap_or(""), 128)
            )));
        }
    }
    if takes_body(request.method()) && request.uri().path() != "/healthz" {
        match headers.get(CONTENT_TYPE) {
            Some(value) if value.to_str().is_ok_and(is_json) => {}
            Some(value) => {
                return Err(Error::UnsupportedMediaType(format!(
                    "the body must be JSON, sent as `Content-Type: application/json`; got `{}`",
                    truncate(value.to_str().unwrap_or("(not text)"), 128)
                )));
            }
            None if has_body(headers) => {
                return Err(Error::UnsupportedMediaType(
                    "the body must be JSON, sent as `Content-Type: application/json`; the \
                     request has no Content-Type"
                        .into(),
                ));
            }
            None => {}
        }
    }
    Ok(())
}

/// The middleware (`axum::middleware::from_fn_with_state`).
pub(crate) async fn guard(
    State(state): State<RestState>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(error) = check(&state, &request) {
        return ApiError::new(error, request_id(request.headers())).into_response();
    }
    let origin = request.headers().get(ORIGIN).cloned();
    let Some(origin) = origin else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(ACCESS_CONTROL_REQUEST_METHOD)
    {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, DELETE"),
        );
        headers.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(
                "authorization, content-type, x-request-id, mcp-protocol-version, \
                 mcp-session-id, last-event-id, x-agentsearch-project, x-agentsearch-identity",
            ),
        );
        headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        headers.insert(VARY, HeaderValue::from_static("origin"));
        return response;
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-request-id"),
    );
    headers.append(VARY, HeaderValue::from_static("origin"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn access() -> RestAccess {
        RestAccess::new(
            &["https://App.example.com".to_string()],
            &["search.internal".to_string()],
        )
    }

    #[test]
    fn origins_must_be_listed() {
        let access = access();
        assert!(access.origin_allowed("https://app.example.com"));
        assert!(access.origin_allowed("https://app.example.com:443"));
        assert!(!access.origin_allowed("http://app.example.com"));
        assert!(!access.origin_allowed("http://evil.example"));
        assert!(!access.origin_allowed("null"));
        assert!(!access.origin_allowed(""));
    }

    #[test]
    fn anonymous_hosts_are_loopback_names_or_listed() {
        let access = access();
        for ok in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[::1]",
            "localhost",
            "LOCALHOST:8080",
            "app.localhost:3000",
            "search.internal:8080",
            "search.internal.",
        ] {
            assert!(access.host_allowed(ok), "{ok}");
        }
        for bad in [
            "rebind.evil.example",
            "rebind.evil.example:8080",
            "localhost.evil.example",
            "evillocalhost",
            "[::1",
            "[nope]:80",
            "127.0.0.1:port",
            "",
        ] {
            assert!(!access.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
            "application/jsonx",
            "json",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }

    #[test]
    fn projects_in_paths_are_decoded_as_the_router_does() {
        assert_eq!(
            project_in_path("/api/context/projects/abc/search").as_deref(),
            Some("abc")
        );
        assert_eq!(
            project_in_path("/api/tools/projects/%30%30x/tools").as_deref(),
            Some("00x")
        );
        assert_eq!(project_in_path("/healthz"), None);
        assert_eq!(project_in_path("/api/tools"), None);
    }

    #[test]
    fn anonymous_means_no_authorization_and_a_project_that_serves_it() {
        let open = Auth::default();
        let closed = Auth::new(Some(agentsearch_common::config::Secret::new(
            "service-token-0123456789",
        )));
        let none = HeaderMap::new();
        let mut bearer = HeaderMap::new();
        bearer.insert(AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        let path = "/api/tools/projects/00000000-0000-4000-8000-000000000001/tools/search";
        assert!(served_anonymously(&open, path, &none));
        assert!(!served_anonymously(&open, path, &bearer));
        assert!(!served_anonymously(&closed, path, &none));
        assert!(served_anonymously(&open, "/healthz", &none));
        assert!(!served_anonymously(&closed, "/healthz", &none));
    }

    proptest! {
        #[test]
        fn host_parsing_never_panics(host in "\\PC{0,80}") {
            let _ = access().host_allowed(&host);
        }

        #[test]
        fn only_loopback_like_or_listed_names_pass(name in "[a-z]([a-z0-9-]{0,18}[a-z0-9])?(\\.[a-z]([a-z0-9-]{0,18}[a-z0-9])?){0,3}") {
            let allowed = access().host_allowed(&format!("{name}:8080"));
            let expected = name == "localhost" || name.ends_with(".localhost") || name == "search.internal";
            prop_assert_eq!(allowed, expected);
        }
    }
}
