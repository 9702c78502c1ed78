//! The meta-tools over the Model Context Protocol: `search_tools`, `search_context`,
//! `read_context` and `get_tool` ([`crate::agent::meta_tools`]), served on the router's streamable HTTP
//! transport at `/mcp` and, by `agentsearch mcp`, over stdio for desktop agents talking to a
//! running server.
//!
//! A tool call is the REST request with the call's arguments as its body (the meta-tools'
//! arguments are the REST fields), so validation, permissions, limits and errors are exactly the
//! REST API's: over HTTP the request goes through the router's own REST app in process (with the
//! MCP request's `Host` and `Origin`, which the REST guard judges as for any REST call), over
//! stdio to the server's REST address. The bearer token decides the user, and so the identity a
//! context search reads as; a service token may name the identity of the connection
//! (`x-agentsearch-identity`, `--identity`), never the model. An error comes back as a tool
//! result with `isError` and the error envelope, so the model reads what to correct.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};

/// Header naming the project of an MCP connection over HTTP (or `?projectId=` on the URL).
pub const PROJECT_HEADER: &str = "x-agentsearch-project";
/// Header naming the identity a service-token connection searches content as.
pub const IDENTITY_HEADER: &str = "x-agentsearch-identity";

/// Largest response body read from the REST API, in bytes.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// One REST call: method, path (with query), bearer, body.
pub struct Call {
    pub method: Method,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Option<Value>,
    /// The MCP request's `Host` and `Origin`, so the REST guard judges the call as it judged
    /// the MCP request (over HTTP; stdio has neither).
    pub host: Option<String>,
    pub origin: Option<String>,
}

/// Where tool calls go: the REST API, in process or over the network. Returns the status and
/// the JSON body.
pub trait Backend: Send + Sync + 'static {
    fn send(&self, call: Call) -> BoxFuture<'_, Result<(u16, Value), String>>;
}

/// The REST app of this process.
pub struct InProcess {
    app: axum::Router,
}

impl InProcess {
    pub fn new(app: axum::Router) -> Self {
        Self { app }
    }
}

impl Backend for InProcess {
    fn send(&self, call: Call) -> BoxFuture<'_, Result<(u16, Value), String>> {
        Box::pin(async move {
            use tower::ServiceExt;
            let host = call.host.clone().unwrap_or_else(|| "localhost".into());
            let request = build(&call, &host)?;
            let response = self
                .app
                .clone()
                .oneshot(request)
                .await
                .map_err(|e| e.to_string())?;
            read(response).await
        })
    }
}

/// A server's REST API at `http://host:port` (over plain HTTP; put TLS in front of it with a
/// local proxy, or use the router's `/mcp`).
pub struct Remote {
    authority: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        axum::body::Body,
    >,
}

impl Remote {
    /// `base` is `http://host:port`; with `sends_token`, a loopback host only (a bearer token
    /// is not sent in cleartext over a network).
    pub fn new(base: &str, sends_token: bool) -> Result<Self, String> {
        let uri: http::Uri = base
            .parse()
            .map_err(|e| format!("`{base}` is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "`{base}`: only http:// is supported here; for TLS use the server's /mcp endpoint"
            ));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("`{base}` has no host"))?
            .to_string();
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if sends_token && !loopback {
            return Err(format!(
                "`{base}`: a token is sent in cleartext over http:// only to a loopback address; \
                 for a remote server use its https /mcp endpoint"
            ));
        }
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        Ok(Self { authority, client })
    }
}

impl Backend for Remote {
    fn send(&self, call: Call) -> BoxFuture<'_, Result<(u16, Value), String>> {
        Box::pin(async move {
            let mut request = build(&call, &self.authority)?;
            *request.uri_mut() = format!("http://{}{}", self.authority, call.path)
                .parse()
                .map_err(|e| format!("bad path: {e}"))?;
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("the server at {} did not answer: {e}", self.authority))?;
            read(response.map(axum::body::Body::new)).await
        })
    }
}

fn build(call: &Call, host: &str) -> Result<Request<axum::body::Body>, String> {
    let mut request = Request::builder()
        .method(call.method.clone())
        .uri(&call.path)
        .header(http::header::HOST, host)
        .header(http::header::ACCEPT, "application/json");
    if let Some(token) = &call.authorization {
        request = request.header(http::header::AUTHORIZATION, token);
    }
    if let Some(origin) = &call.origin {
        request = request.header(http::header::ORIGIN, origin);
    }
    let body = match &call.body {
        Some(body) => {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
            axum::body::Body::from(body.to_string())
        }
        None => axum::body::Body::empty(),
    };
    request
        .body(body)
        .map_err(|e| format!("cannot build the REST request (is the token printable?): {e}"))
}

async fn read(response: http::Response<axum::body::Body>) -> Result<(u16, Value), String> {
    let status = response.status().as_u16();
    let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the response: {e}"))?
        .to_bytes();
    let value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    Ok((status, value))
}

/// What a connection fixes for every call: set for stdio, read from each HTTP request otherwise.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    pub project_id: Option<String>,
    /// `Bearer ...`.
    pub authorization: Option<String>,
    pub identity: Option<String>,
    /// The HTTP request's `Host` and `Origin` (none over stdio).
    pub host: Option<String>,
    pub origin: Option<String>,
}

/// The MCP server of the meta-tools.
#[derive(Clone)]
pub struct McpServer {
    backend: Arc<dyn Backend>,
    /// For stdio: the connection's settings. Over HTTP each request brings its own.
    fixed: Option<Connection>,
}

impl McpServer {
    /// Over HTTP: each request's headers decide project, bearer and identity.
    pub fn per_request(backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            fixed: None,
        }
    }

    /// Over stdio: one connection's settings for every call.
    pub fn fixed(backend: Arc<dyn Backend>, connection: Connection) -> Self {
        Self {
            backend,
            fixed: Some(connection),
        }
    }

    fn connection(&self, context: &RequestContext<RoleServer>) -> Connection {
        if let Some(fixed) = &self.fixed {
            return fixed.clone();
        }
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Connection::default();
        };
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let from_query = parts.uri.query().and_then(|q| {
            q.split('&')
                .find_map(|pair| pair.strip_prefix("projectId="))
                .map(str::to_string)
        });
        Connection {
            project_id: header(PROJECT_HEADER).or(from_query),
            authorization: header("authorization"),
            identity: header(IDENTITY_HEADER),
            host: header("host").or_else(|| parts.uri.authority().map(|a| a.to_string())),
            origin: header("origin"),
        }
    }

    async fn rest(&self, connection: &Connection, call: Call) -> Result<(u16, Value), ErrorData> {
        let call = Call {
            authorization: connection.authorization.clone(),
            host: connection.host.clone(),
            origin: connection.origin.clone(),
            ..call
        };
        self.backend
            .send(call)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))
    }
}

/// A project id as a path segment: a UUID (the REST API says so by name if not).
fn project_of(connection: &Connection) -> Result<String, ErrorData> {
    let project = connection.project_id.clone().ok_or_else(|| {
        ErrorData::invalid_params(
            format!(
                "no project: add ?projectId=<uuid> to the MCP URL or send the {PROJECT_HEADER} header"
            ),
            None,
        )
    })?;
    if project.is_empty() || !project.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(ErrorData::invalid_params(
            format!(
                "projectId must be a UUID, got `{}`",
                agentsearch_common::ids::truncate(&project, 64)
            ),
            None,
        ));
    }
    Ok(project)
}

/// A REST answer as a tool result: the JSON as text (and as structured content); an error
/// envelope with `isError`, its message first so a model reads what to change.
fn result(status: u16, body: Value) -> CallToolResult {
    let text = body.to_string();
    if StatusCode::from_u16(status).is_ok_and(|s| s.is_success()) {
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        if body.is_object() {
            result.structured_content = Some(body);
        }
        return result;
    }
    let error = &body["error"];
    let mut lines = vec![format!(
        "{}: {}",
        error["code"].as_str().unwrap_or("ERROR"),
        error["message"].as_str().unwrap_or("the request failed")
    )];
    for detail in error["details"].as_array().into_iter().flatten() {
        if let (Some(field), Some(issue)) = (detail["field"].as_str(), detail["issue"].as_str()) {
            lines.push(format!("{field}: {issue}"));
        }
    }
    if let Some(hint) = error["hint"].as_str() {
        lines.push(hint.to_string());
    }
    let mut result = CallToolResult::error(vec![
        ContentBlock::text(lines.join("\n")),
        ContentBlock::text(text),
    ]);
    result.structured_content = Some(body);
    result
}

fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "agentsearch",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "search_tools finds the tools of connected apps for a task; search_context finds \
                 passages of the user's synced content; read_context reads around a passage by \
                 its pointer; get_tool fetches one tool by name. Each search takes a plain-words \
                 query or a query JSON document whose schema is in the tool's input schema.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let connection = self.connection(&context);
        let project = project_of(&connection)?;
        let (status, body) = self
            .rest(
                &connection,
                Call {
                    method: Method::GET,
                    path: format!("/api/projects/{project}/meta-tools?format=anthropic"),
                    authorization: None,
                    body: None,
                    host: None,
                    origin: None,
                },
            )
            .await?;
        if !StatusCode::from_u16(status).is_ok_and(|s| s.is_success()) {
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("listing the tools failed")
                .to_string();
            return Err(match status {
                401 | 403 => ErrorData::invalid_request(message, Some(body)),
                _ => ErrorData::internal_error(message, Some(body)),
            });
        }
        let tools = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let schema = t["input_schema"].as_object()?.clone();
                Some(Tool::new(
                    t["name"].as_str()?.to_string(),
                    t["description"].as_str().unwrap_or_default().to_string(),
                    Arc::new(schema),
                ))
            })
            .collect();
        Ok(ListToolsResult {
            tools,
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let connection = self.connection(&context);
        let project = project_of(&connection)?;
        let mut arguments: Map<String, Value> = request.arguments.unwrap_or_default();
        let with_identity = |arguments: &mut Map<String, Value>| -> Result<(), String> {
            if let Some(name) = ["identity", "email"]
                .into_iter()
                .find(|name| arguments.contains_key(*name))
            {
                return Err(format!(
                    "`{name}` is not an argument: the connection's credentials decide whose \
                     content is read"
                ));
            }
            if let Some(identity) = &connection.identity {
                arguments.insert("identity".into(), json!(identity));
            }
            Ok(())
        };
        let call = match request.name.as_ref() {
            "search_tools" => Call {
                method: Method::POST,
                path: format!("/api/tools/projects/{project}/tools/search"),
                authorization: None,
                body: Some(Value::Object(arguments)),
                host: None,
                origin: None,
            },
            "search_context" | "read_context" => {
                if let Err(message) = with_identity(&mut arguments) {
                    return Ok(tool_error(message).into());
                }
                let path = match request.name.as_ref() {
                    "search_context" => format!("/api/context/projects/{project}/search"),
                    _ => format!("/api/context/projects/{project}/segments:read"),
                };
                Call {
                    method: Method::POST,
                    path,
                    authorization: None,
                    body: Some(Value::Object(arguments)),
                    host: None,
                    origin: None,
                }
            }
            "get_tool" => {
                let name = match arguments.remove("name") {
                    Some(Value::String(name)) if arguments.is_empty() => name,
                    _ => {
                        return Ok(tool_error(
                            "get_tool takes one argument, `name`: the tool's exact name".into(),
                        )
                        .into());
                    }
                };
                let encoded: String = name
                    .bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                            (b as char).to_string()
                        }
                        _ => format!("%{b:02X}"),
                    })
                    .collect();
                Call {
                    method: Method::GET,
                    path: format!("/api/tools/projects/{project}/tools/{encoded}"),
                    authorization: None,
                    body: None,
                    host: None,
                    origin: None,
                }
            }
            other => {
                let known = ["search_tools", "search_context", "read_context", "get_tool"];
                let hint = agentsearch_query::parse::nearest(other, known)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                return Ok(tool_error(format!(
                    "no tool `{}`{hint} The tools are {}.",
                    agentsearch_common::ids::truncate(other, 64),
                    known.join(", ")
                ))
                .into());
            }
        };
        let (status, body) = self.rest(&connection, call).await?;
        Ok(result(status, body).into())
    }
}

/// The streamable HTTP transport for the router's REST app: stateless (any router replica
/// answers any request), JSON responses. Hosts and origins are checked by the REST guard, on the
/// MCP request and again on each REST call it makes (which carries the same `Host` and
/// `Origin`), so rmcp's own host list is off.
pub fn http_service(
    app: axum::Router,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    McpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    let server = McpServer::per_request(Arc::new(InProcess::new(app)));
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(server.clone()),
        Default::default(),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .disable_allowed_hosts()
            .with_max_request_body_bytes(crate::http::body::SEARCH_BODY_LIMIT),
    )
}

/// Serves the meta-tools over stdio until the client closes it.
pub async fn serve_stdio(server: McpServer) -> Result<(), String> {
    use rmcp::ServiceExt;
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| format!("MCP handshake failed: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("MCP session ended with an error: {e}"))?;
    Ok(())
}
