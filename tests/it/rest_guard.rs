//! The REST API against abuse: bodies read only after authentication and within a limit per
//! route, cross-site requests and DNS rebinding refused before any body is read (snapshots of each
//! envelope). Its server and request functions serve `rest_messages` too.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::config::{Config, Secret};
use agentsearch_router::RestAccess;
use agentsearch_router::auth::Auth;
use agentsearch_tests::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub(crate) const TOKEN: &str = "test-token-0123456789";
pub(crate) const TOOLS: &str = "/api/tools/projects/00000000-0000-4000-8000-0000000000f1/tools";
pub(crate) const USERS: &str = "/api/tools/projects/00000000-0000-4000-8000-0000000000f1/users";
pub(crate) const CONTEXT: &str = "/api/context/projects/00000000-0000-4000-8000-0000000000f1";
pub(crate) const JSON: (&str, &str) = ("content-type", "application/json");
/// Hang guard of every exchange: a server that waits for a body it should not read fails the
/// test instead of hanging it. Never an assertion on speed.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// A router with the fixture catalog, its REST API on a loopback port.
pub(crate) struct Rest {
    pub(crate) addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

pub(crate) async fn start(auth: Auth, access: RestAccess) -> Rest {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: agentsearch_common::config::ShardsConfig {
            local: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    let router = agentsearch::node::embedded_router(&config, embedder())
        .await
        .unwrap();
    router
        .upsert_tools(PROJECT, fixture_catalog(), "setup")
        .await
        .unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = http.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(agentsearch_router::serve_on_with(
        Arc::clone(&router),
        auth,
        access,
        http,
        grpc,
        async {
            let _ = stopped.await;
        },
    ));
    Rest {
        addr,
        _stop: stop,
        _dir: dir,
    }
}

pub(crate) struct Reply {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("{}", self.body))
    }

    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The exact envelope, for a snapshot.
    pub(crate) fn snapshot(&self) -> Value {
        serde_json::json!({"status": self.status, "body": self.json()})
    }
}

/// Sends `head` (request line and headers, without the blank line) and then `body`, which may be
/// shorter than the declared length, and reads one response: the head, then `content-length`
/// bytes of body. The connection is left open, so a server that waits for the rest of the body
/// never answers (and the hang guard fails the test).
async fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> Reply {
    let run = async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut request = format!("{head}\r\n\r\n").into_bytes();
        request.extend_from_slice(body);
        // The server may answer (and stop reading) before the whole request is written.
        let _ = stream.write_all(&request).await;
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        let head_end = loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed without a response");
            raw.extend_from_slice(&buf[..n]);
            if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut body = raw[head_end + 4..].to_vec();
        while body.len() < length {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed in the middle of the body");
            body.extend_from_slice(&buf[..n]);
        }
        Reply {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    };
    tokio::time::timeout(HANG_GUARD, run)
        .await
        .expect("the server did not answer")
}

/// A complete request with `headers` (a `host` header included when the test wants one).
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\ncontent-length: {}\r\nx-request-id: req_snapshot",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("\r\nhost: {addr}"));
    }
    for (k, v) in headers {
        head.push_str(&format!("\r\n{k}: {v}"));
    }
    exchange(addr, &head, body.as_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_read_after_authentication_within_the_route_limit() {
    let rest = start(Auth::new(Some(Secret::new(TOKEN))), RestAccess::default()).await;
    let search = format!("{TOOLS}/search");
    // 30 MiB announced (below the old global limit), a few bytes sent: the server must answer
    // 401 without waiting for the rest.
    let head = format!(
        "POST {search} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         x-request-id: req_snapshot\r\ncontent-length: {}",
        rest.addr,
        30 * 1024 * 1024
    );
    let reply = exchange(rest.addr, &head, br#"{"query": "#).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(reply.code(), "UNAUTHENTICATED");
    // The same for a write route of a larger limit, and for context search.
    for path in [TOOLS.to_string(), format!("{CONTEXT}/search")] {
        let method = if path == TOOLS { "PUT" } else { "POST" };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}",
            rest.addr,
            20 * 1024 * 1024
        );
        let reply = exchange(rest.addr, &head, b"{").await;
        assert_eq!(reply.status, 401, "{path}: {}", reply.body);
    }

    // Authenticated: a search body over 256 KiB is refused from its declared length, unread.
    let bearer = format!("Bearer {TOKEN}");
    let head = format!(
        "POST {search} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         authorization: {bearer}\r\nx-request-id: req_snapshot\r\ncontent-length: {}",
        rest.addr,
        1024 * 1024
    );
    let reply = exchange(rest.addr, &head, b"{").await;
    insta::assert_json_snapshot!("search_body_too_large", reply.snapshot());

    // Each route has its limit: one byte over is refused, unread.
    for (path, limit) in [
        (format!("{CONTEXT}/search"), 256 * 1024),
        (format!("{CONTEXT}/segments:read"), 256 * 1024),
        (format!("{search}:batch"), 4 * 1024 * 1024),
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             authorization: {bearer}\r\ncontent-length: {}",
            rest.addr,
            limit + 1
        );
        let reply = exchange(rest.addr, &head, b"{").await;
        assert_eq!(reply.status, 413, "{path}: {}", reply.body);
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.contains(&format!("{limit} bytes")), "{message}");
    }
    // Sent in full within the limits: 200 KiB for a search, 300 KiB for a batch or a catalog
    // write (parsed off the runtime).
    let padded = |body: &str, kib: usize| format!("{body}{}", " ".repeat(kib * 1024));
    let auth = [JSON, ("authorization", bearer.as_str())];
    let body = padded(r#"{"query": "close a ticket"}"#, 200);
    let reply = request(rest.addr, "POST", &search, &auth, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = padded(r#"{"queries": [{"useCase": "close a ticket"}]}"#, 300);
    let reply = request(rest.addr, "POST", &format!("{search}:batch"), &auth, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = request(
        rest.addr,
        "PUT",
        TOOLS,
        &auth,
        &padded(r#"{"tools": []}"#, 300),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_are_refused() {
    let access = RestAccess::new(&["http://app.example:3000".to_string()], &[]);
    let rest = start(Auth::default(), access).await;
    let delete = format!("{TOOLS}:delete");
    let names = r#"{"names": ["TICKETEER_CLOSE_TICKET"]}"#;

    // A page of another site posting a "simple" request: refused for its origin.
    let reply = request(
        rest.addr,
        "POST",
        &delete,
        &[
            ("content-type", "text/plain"),
            ("origin", "http://evil.example"),
        ],
        names,
    )
    .await;
    insta::assert_json_snapshot!("origin_not_allowed", reply.snapshot());
    for origin in [
        "null",
        "http://app.example:3001",
        "https://app.example:3000",
    ] {
        let reply = request(
            rest.addr,
            "POST",
            &delete,
            &[JSON, ("origin", origin)],
            names,
        )
        .await;
        assert_eq!(reply.code(), "ORIGIN_NOT_ALLOWED", "{origin}");
    }
    let reply = request(
        rest.addr,
        "GET",
        "/healthz",
        &[("origin", "http://evil.example")],
        "",
    )
    .await;
    assert_eq!(
        reply.status, 403,
        "health checks are not exempt from the origin rule"
    );

    // Without an origin, a body must still be declared JSON.
    let reply = request(
        rest.addr,
        "POST",
        &delete,
        &[("content-type", "text/plain")],
        names,
    )
    .await;
    insta::assert_json_snapshot!("unsupported_media_type", reply.snapshot());
    let reply = request(rest.addr, "POST", &delete, &[], names).await;
    insta::assert_json_snapshot!("missing_content_type", reply.snapshot());
    let form = ("content-type", "application/x-www-form-urlencoded");
    let reply = request(rest.addr, "PUT", TOOLS, &[form], "tools=x").await;
    assert_eq!(reply.status, 415);

    // Nothing was deleted.
    let search = format!("{TOOLS}/search");
    let reply = request(
        rest.addr,
        "POST",
        &search,
        &[("content-type", "application/json; charset=utf-8")],
        r#"{"query": "close a ticket", "integrations": ["ticketeer"]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("TICKETEER_CLOSE_TICKET"));
    let reply = request(
        rest.addr,
        "POST",
        &search,
        &[("content-type", "application/vnd.agentsearch+json")],
        r#"{"query": "close a ticket"}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // No body, no content type needed; the handler says the body is missing.
    let reply = request(rest.addr, "POST", &search, &[], "").await;
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (400, "REQUEST_INVALID")
    );
    let reply = request(rest.addr, "GET", "/healthz", &[], "").await;
    assert_eq!(reply.status, 200);

    // An allowed origin is served, with CORS headers, and its preflight is answered.
    let origin = ("origin", "http://app.example:3000");
    let reply = request(
        rest.addr,
        "POST",
        &search,
        &[JSON, origin],
        r#"{"query": "x"}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("http://app.example:3000")
    );
    let reply = request(
        rest.addr,
        "OPTIONS",
        &search,
        &[
            origin,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        "",
    )
    .await;
    assert_eq!(reply.status, 204);
    assert!(
        reply
            .header("access-control-allow-headers")
            .unwrap()
            .contains("content-type")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_requests_are_served_only_under_loopback_or_allowed_names() {
    let access = RestAccess::new(&[], &["search.internal".to_string()]);
    let rest = start(Auth::default(), access).await;
    let read = format!("{CONTEXT}/search");
    let body = r#"{"query": "q2 roadmap", "identity": "alice@example.com"}"#;
    let rebound = ("host", "rebind.evil.example:8080");
    let reply = request(rest.addr, "POST", &read, &[JSON, rebound], body).await;
    insta::assert_json_snapshot!("host_not_allowed", reply.snapshot());
    let search = format!("{TOOLS}/search");
    for host in [
        "rebind.evil.example",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
    ] {
        let reply = request(
            rest.addr,
            "POST",
            &search,
            &[JSON, ("host", host)],
            r#"{"query": "x"}"#,
        )
        .await;
        assert_eq!(reply.code(), "HOST_NOT_ALLOWED", "{host}");
    }
    for host in [
        "localhost:8080",
        "app.localhost",
        "[::1]:8080",
        "127.0.0.1",
        "search.internal:443",
    ] {
        let reply = request(
            rest.addr,
            "POST",
            &search,
            &[JSON, ("host", host)],
            r#"{"query": "x"}"#,
        )
        .await;
        assert_eq!(reply.status, 200, "{host}: {}", reply.body);
    }

    // With a token, any name: the token, not the name, is what authorizes.
    let rest = start(Auth::new(Some(Secret::new(TOKEN))), RestAccess::default()).await;
    let bearer = format!("Bearer {TOKEN}");
    let with_token = [JSON, rebound, ("authorization", bearer.as_str())];
    let reply = request(rest.addr, "POST", &search, &with_token, r#"{"query": "x"}"#).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // A deployment that serves no one anonymously says a token is missing, under any name.
    let reply = request(
        rest.addr,
        "POST",
        &search,
        &[JSON, rebound],
        r#"{"query": "x"}"#,
    )
    .await;
    assert_eq!(reply.code(), "UNAUTHENTICATED");
}
