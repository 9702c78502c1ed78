//! The OpenAPI 3.1 document of the REST API, generated from the request and response types the
//! handlers parse and serialize (their `JsonSchema` derives, which follow their serde
//! attributes), served at `/openapi.json` and committed as `openapi.json` (a test fails when the
//! two differ).
//!
//! Every operation is declared once in [`document`]: its method and path (path parameters are
//! taken from the `{...}` segments), the type of its body and of its answer, its query
//! parameters, and which error statuses it can answer; errors are always the envelope
//! ([`agentsearch_common::Envelope`]). Request schemas describe what the parsers accept
//! (deserialization), response schemas what the handlers write (serialization).

use std::collections::BTreeMap;

use agentsearch_common::error::Envelope;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// The version of the REST contract, as `info.version`.
pub const API_VERSION: &str = "1.0.0";

const COMPONENTS: &str = "/components/schemas";

/// A query string parameter of an operation.
#[derive(Clone, Copy)]
pub struct QueryParam {
    pub name: &'static str,
    pub description: &'static str,
    /// The parameter's JSON Schema, as JSON text.
    pub schema: &'static str,
}

const DIAGNOSTICS: QueryParam = QueryParam {
    name: "diagnostics",
    description: "`1` or `true`: add `explain` to every result and a `trace` of the steps.",
    schema: r#"{"type": "string", "enum": ["0", "1", "true", "false"]}"#,
};

/// Which statuses an operation can answer besides its success.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answers {
    /// A route of a project that reads a JSON body.
    WithBody,
    /// A route of a project without a body.
    NoBody,
}

/// Statuses every project route can answer: a field is invalid, the caller is not
/// authenticated or may not call it, something named is unknown, the caller is over its rate,
/// an internal error, a backend is unavailable, the deadline passed.
const ERRORS: &[(u16, &str)] = &[
    (
        400,
        "A field of the request is invalid: `details` names each.",
    ),
    (401, "No valid bearer token."),
    (
        403,
        "The token may not call this route or act on this project, user or origin.",
    ),
    (
        404,
        "A project, tool, sync, record or session in the request does not exist.",
    ),
    (
        429,
        "Over the caller's rate or the server's concurrency: retry after `retryAfterMs`.",
    ),
    (500, "An internal error (reported with the request id)."),
    (501, "An option this version does not implement."),
    (
        503,
        "A backend (shard, metadata store) is unavailable; retryable.",
    ),
    (504, "The request ran past its deadline; retryable."),
];

/// Statuses of routes that read a body.
const BODY_ERRORS: &[(u16, &str)] = &[
    (413, "The body is larger than the route's limit."),
    (415, "The body is not sent as `application/json`."),
];

/// Builds the document as operations are declared.
struct Builder {
    requests: SchemaGenerator,
    responses: SchemaGenerator,
    paths: BTreeMap<String, Map<String, Value>>,
}

impl Builder {
    fn new() -> Self {
        let settings = |serialize: bool| {
            let settings = SchemaSettings::draft2020_12().with(|s| {
                s.definitions_path = COMPONENTS.into();
                s.meta_schema = None;
            });
            if serialize {
                settings.for_serialize()
            } else {
                settings.for_deserialize()
            }
        };
        Self {
            requests: settings(false).into_generator(),
            responses: settings(true).into_generator(),
            paths: BTreeMap::new(),
        }
    }

    fn request<T: JsonSchema>(&mut self) -> Schema {
        self.requests.subschema_for::<T>()
    }

    fn response<T: JsonSchema>(&mut self) -> Schema {
        self.responses.subschema_for::<T>()
    }

    /// Declares `method path` answering `Res` (200), with a JSON body `Req` unless it is `()`.
    #[allow(clippy::too_many_arguments)]
    fn operation(
        &mut self,
        method: &str,
        path: &str,
        id: &str,
        tag: &str,
        summary: &str,
        body: Option<Schema>,
        ok: Schema,
        query: &[QueryParam],
    ) {
        let answers = if body.is_some() {
            Answers::WithBody
        } else {
            Answers::NoBody
        };
        let mut parameters: Vec<Value> = path_parameters(path)
            .into_iter()
            .map(|name| {
                json!({
                    "name": name,
                    "in": "path",
                    "required": true,
                    "schema": path_schema(name),
                })
            })
            .collect();
        for param in query {
            let schema: Value =
                serde_json::from_str(param.schema).expect("query parameter schemas are JSON");
            parameters.push(json!({
                "name": param.name,
                "in": "query",
                "required": false,
                "description": param.description,
                "schema": schema,
            }));
        }
        parameters.push(json!({
            "name": "x-request-id",
            "in": "header",
            "required": false,
            "description": "Echoed in the `x-request-id` response header and in errors; a fresh \
                            one is made when absent or not a sane token.",
            "schema": {"type": "string"},
        }));
        let mut responses = Map::new();
        responses.insert(
            "200".into(),
            json!({
                "description": "Success.",
                "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                "content": {"application/json": {"schema": ok}},
            }),
        );
        let mut errors: Vec<(u16, &str)> = ERRORS.to_vec();
        if answers == Answers::WithBody {
            errors.extend_from_slice(BODY_ERRORS);
        }
        errors.sort_by_key(|(status, _)| *status);
        for (status, description) in errors {
            responses.insert(status.to_string(), error_response(description));
        }
        let mut operation = json!({
            "operationId": id,
            "tags": [tag],
            "summary": summary,
            "parameters": parameters,
            "responses": responses,
        });
        if let Some(body) = body {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": body}},
            });
        }
        if tag != "health" {
            operation["security"] = json!([{"bearer": []}, {}]);
        }
        self.paths
            .entry(path.to_string())
            .or_default()
            .insert(method.to_string(), operation);
    }

    fn post<Req: JsonSchema, Res: JsonSchema>(
        &mut self,
        path: &str,
        id: &str,
        tag: &str,
        summary: &str,
        query: &[QueryParam],
    ) {
        let body = self.request::<Req>();
        let ok = self.response::<Res>();
        self.operation("post", path, id, tag, summary, Some(body), ok, query);
    }

    fn put<Req: JsonSchema, Res: JsonSchema>(
        &mut self,
        path: &str,
        id: &str,
        tag: &str,
        summary: &str,
    ) {
        let body = self.request::<Req>();
        let ok = self.response::<Res>();
        self.operation("put", path, id, tag, summary, Some(body), ok, &[]);
    }

    fn get<Res: JsonSchema>(
        &mut self,
        path: &str,
        id: &str,
        tag: &str,
        summary: &str,
        query: &[QueryParam],
    ) {
        let ok = self.response::<Res>();
        self.operation("get", path, id, tag, summary, None, ok, query);
    }

    fn delete<Res: JsonSchema>(&mut self, path: &str, id: &str, tag: &str, summary: &str) {
        let ok = self.response::<Res>();
        self.operation("delete", path, id, tag, summary, None, ok, &[]);
    }

    fn finish(mut self) -> Value {
        let envelope = self.responses.subschema_for::<Envelope>();
        debug_assert_eq!(
            envelope.get("$ref").and_then(Value::as_str),
            Some("#/components/schemas/Envelope")
        );
        let mut schemas = self.requests.take_definitions(true);
        for (name, schema) in self.responses.take_definitions(true) {
            match schemas.get(&name) {
                Some(existing) if existing != &schema => {
                    panic!("`{name}` is both a request and a response type with different schemas")
                }
                _ => {
                    schemas.insert(name, schema);
                }
            }
        }
        let schemas: BTreeMap<String, Value> = schemas.into_iter().collect();
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "agentsearch",
                "version": API_VERSION,
                "description": "Tool search and context search for AI agents. Errors are always \
                                the envelope `{\"error\": {...}}` (see the `Envelope` schema).",
                "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
            },
            "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
            "paths": self.paths,
            "components": {
                "schemas": schemas,
                "headers": {
                    "RequestId": {
                        "description": "The request id, as sent or made by the server.",
                        "schema": {"type": "string"},
                    },
                },
                "securitySchemes": {
                    "bearer": {
                        "type": "http",
                        "scheme": "bearer",
                        "bearerFormat": "JWT or the service token",
                        "description": "A JWT for the project in the path (or the configured \
                                        service token). Omitted on a server with authentication \
                                        off (the loopback demo).",
                    },
                },
            },
            "tags": [
                {"name": "tools", "description": "Tool search, batch search, lookup and feedback."},
                {"name": "catalog", "description": "The project's tool catalog and integration information."},
                {"name": "connections", "description": "A user's connected accounts."},
                {"name": "context", "description": "Context search and read-around over synced content."},
                {"name": "syncs", "description": "Syncs, their records and permission groups."},
                {"name": "tool-router", "description": "Routes following the hosted tool router's names and shapes."},
                {"name": "health", "description": "Probes and this document."},
            ],
        })
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}}},
    })
}

/// The schema of a path parameter: project ids are UUIDs, the rest strings.
fn path_schema(name: &str) -> Value {
    match name {
        "project_id" => json!({"type": "string", "format": "uuid"}),
        _ => json!({"type": "string", "minLength": 1}),
    }
}

/// The names of the `{...}` segments of `path`, in order.
fn path_parameters(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|segment| {
            let start = segment.find('{')?;
            let end = segment.find('}')?;
            Some(&segment[start + 1..end])
        })
        .collect()
}

/// The OpenAPI document of every REST route (the operator routes under `/admin` and MCP at
/// `/mcp` are not part of it).
pub fn document() -> Value {
    use crate::context::rest_types as ct;
    use crate::http::types as t;
    use crate::tools::api::ToolSearchResponse;
    use crate::tools::rest_types as tt;

    let mut b = Builder::new();
    const TOOLS: &str = "/api/tools/projects/{project_id}";
    const CONTEXT: &str = "/api/context/projects/{project_id}";

    // Tool search.
    b.post::<tt::ToolSearchBody, ToolSearchResponse>(
        &format!("{TOOLS}/tools/search"),
        "searchTools",
        "tools",
        "The best tools for a task, their schemas within a token budget and a side-effect ceiling.",
        &[DIAGNOSTICS],
    );
    b.post::<crate::tools::batch::RawBatch, crate::tools::batch::BatchResponse>(
        &format!("{TOOLS}/tools/search:batch"),
        "searchToolsBatch",
        "tools",
        "Several use cases at once: primary and related tools per query, schemas deduplicated.",
        &[DIAGNOSTICS],
    );
    b.post::<tt::ToolFeedbackBody, crate::tools::feedback::FeedbackOutcome>(
        &format!("{TOOLS}/tools/feedback"),
        "toolFeedback",
        "tools",
        "Which tools an agent called after a search (by its request id).",
        &[],
    );
    b.get::<t::JsonSchemaDocument>(
        &format!("{TOOLS}/tools/schema"),
        "toolQuerySchema",
        "tools",
        "The JSON Schema of the query JSON documents tool search accepts.",
        &[],
    );
    b.get::<crate::agent::meta_tools::MetaToolDefinitions>(
        "/api/projects/{project_id}/meta-tools",
        "metaTools",
        "tools",
        "The service's own tools as definitions for a model API.",
        &[QueryParam {
            name: "format",
            description: "`anthropic` (default) or `openai`.",
            schema: r#"{"type": "string", "enum": ["anthropic", "openai"]}"#,
        }],
    );
    b.get::<crate::tools::lookup::GetToolResponse>(
        &format!("{TOOLS}/tools/{{name}}"),
        "getTool",
        "tools",
        "One tool by name, with its schema (hydrated for the caller when configured).",
        &[],
    );

    // Catalog.
    b.put::<tt::UpsertToolsBody, tt::UpsertedTools>(
        &format!("{TOOLS}/tools"),
        "upsertTools",
        "catalog",
        "Adds or replaces tools of the catalog (service credential).",
    );
    b.post::<tt::DeleteToolsBody, tt::DeletedTools>(
        &format!("{TOOLS}/tools:delete"),
        "deleteTools",
        "catalog",
        "Removes tools from the catalog (service credential).",
        &[],
    );
    b.put::<crate::tools::toolkits::RawIntegrations, t::UpsertedCount>(
        &format!("{TOOLS}/integrations"),
        "putIntegrations",
        "catalog",
        "Records integrations' descriptions, guidance and per-tool pitfalls (service credential).",
    );
    b.delete::<t::Deleted>(
        &format!("{TOOLS}/integrations/{{integration}}"),
        "deleteIntegration",
        "catalog",
        "Takes back what was recorded for an integration (service credential).",
    );

    // Recorded plans.
    b.post::<crate::tools::plans::RawPlan, crate::tools::plans::PlanSummary>(
        &format!("{TOOLS}/plans"),
        "recordPlan",
        "catalog",
        "Records an outcome of a plan (ordered tools) for a use case (service credential).",
        &[],
    );
    b.get::<crate::tools::plans::rest::Plans>(
        &format!("{TOOLS}/plans"),
        "listPlans",
        "catalog",
        "The project's recorded plans (service credential).",
        &[],
    );
    b.delete::<t::Deleted>(
        &format!("{TOOLS}/plans/{{plan_id}}"),
        "deletePlan",
        "catalog",
        "Deletes a recorded plan (service credential).",
    );

    // Connections.
    b.put::<crate::tools::rest::RawConnections, tt::Toolkits>(
        &format!("{TOOLS}/users/{{user_id}}/connections"),
        "upsertConnections",
        "connections",
        "Adds or replaces a user's connected accounts.",
    );
    b.get::<tt::Toolkits>(
        &format!("{TOOLS}/users/{{user_id}}/connections"),
        "listConnections",
        "connections",
        "A user's connection status per integration.",
        &[QueryParam {
            name: "integrations",
            description: "Comma-separated integrations to report (default: every one the user \
                          has an account of).",
            schema: r#"{"type": "string"}"#,
        }],
    );
    b.delete::<t::Deleted>(
        &format!("{TOOLS}/users/{{user_id}}/connections/{{integration}}/{{account_id}}"),
        "deleteConnection",
        "connections",
        "Removes one of a user's connected accounts.",
    );

    // Context search.
    b.post::<crate::context::api::RawContextSearch, crate::context::api::ContextSearchResponse>(
        &format!("{CONTEXT}/search"),
        "searchContext",
        "context",
        "The best passages of the identity's readable content.",
        &[DIAGNOSTICS],
    );
    b.get::<t::JsonSchemaDocument>(
        &format!("{CONTEXT}/schema"),
        "contextQuerySchema",
        "context",
        "The JSON Schema of the query JSON documents context search accepts.",
        &[QueryParam {
            name: "syncIds",
            description: "Comma-separated sync ids whose declared metadata to include.",
            schema: r#"{"type": "string"}"#,
        }],
    );
    b.post::<crate::context::api::RawReadContext, crate::context::api::ReadContextResponse>(
        &format!("{CONTEXT}/segments:read"),
        "readSegmentContext",
        "context",
        "The segments around a passage, within what the identity may read.",
        &[],
    );
    b.post::<ct::ContextFeedbackBody, crate::tools::feedback::FeedbackOutcome>(
        &format!("{CONTEXT}/feedback"),
        "contextFeedback",
        "context",
        "Which records a user opened after a search (by its request id).",
        &[],
    );

    // Syncs, records, groups.
    b.post::<crate::context::api::RawCreateSync, crate::context::api::SyncStatus>(
        &format!("{CONTEXT}/syncs"),
        "createSync",
        "syncs",
        "Creates a sync (service credential).",
        &[],
    );
    b.get::<ct::Syncs>(
        &format!("{CONTEXT}/syncs"),
        "listSyncs",
        "syncs",
        "The project's syncs (service credential).",
        &[],
    );
    b.get::<crate::context::api::SyncStatus>(
        &format!("{CONTEXT}/syncs/{{sync_id}}"),
        "getSync",
        "syncs",
        "One sync and its state (service credential).",
        &[],
    );
    b.put::<crate::context::api::RawUpsertRecords, ct::UpsertedRecords>(
        &format!("{CONTEXT}/syncs/{{sync_id}}/records"),
        "upsertRecords",
        "syncs",
        "Adds or replaces records of a sync (service credential).",
    );
    b.post::<crate::context::api::RawDeleteRecords, ct::DeletedRecords>(
        &format!("{CONTEXT}/syncs/{{sync_id}}/records:delete"),
        "deleteRecords",
        "syncs",
        "Removes records of a sync (service credential).",
        &[],
    );
    b.put::<crate::context::api::RawPutGroups, ct::Groups>(
        &format!("{CONTEXT}/syncs/{{sync_id}}/groups"),
        "putGroups",
        "syncs",
        "Sets the members of permission groups of a sync (service credential).",
    );

    // The tool-router-compatible surface.
    b.post::<crate::tool_router::RawSessionCreate, crate::tool_router::SessionCreated>(
        "/api/v3.1/tool_router/session",
        "createToolRouterSession",
        "tool-router",
        "Creates a session for the caller's project and user.",
        &[],
    );
    b.post::<crate::tools::batch::RawBatch, crate::tool_router::SessionSearch>(
        "/api/v3.1/tool_router/session/{session_id}/search",
        "searchToolRouterSession",
        "tool-router",
        "A multi-query tool search within a session, in the tool router's shape.",
        &[],
    );

    // Health.
    b.get::<t::Status>("/healthz", "healthz", "health", "The process answers.", &[]);
    b.get::<t::Status>("/livez", "livez", "health", "Liveness.", &[]);
    b.get::<crate::cluster::health::Readiness>(
        "/readyz",
        "readyz",
        "health",
        "Readiness: 200 when every shard is reachable (503 otherwise, same body).",
        &[QueryParam {
            name: "allowPartial",
            description: "`true`: ready as long as the router can answer at all.",
            schema: r#"{"type": "boolean"}"#,
        }],
    );
    b.get::<t::JsonSchemaDocument>("/openapi.json", "openapi", "health", "This document.", &[]);
    let mut doc = b.finish();
    health_answers(&mut doc);
    doc
}

/// Probes are neither authenticated nor rate limited: they answer no error but readiness's 503
/// (with the readiness body) and the guard's refusal of a web origin or host name.
fn health_answers(doc: &mut Value) {
    let paths = doc["paths"].as_object_mut().expect("paths is an object");
    for (path, item) in paths.iter_mut() {
        if !(path == "/healthz" || path == "/livez" || path == "/readyz" || path == "/openapi.json")
        {
            continue;
        }
        let get = item["get"].as_object_mut().expect("probes are GET routes");
        get.remove("security");
        let responses = get["responses"].as_object_mut().expect("responses");
        let ok = responses.remove("200").expect("200");
        responses.clear();
        if path == "/readyz" {
            let mut unavailable = ok.clone();
            unavailable["description"] = json!("Not ready: the body says why.");
            responses.insert("503".into(), unavailable);
        }
        responses.insert("200".into(), ok);
        responses.insert(
            "403".into(),
            error_response("A web origin or host name this server does not serve."),
        );
    }
}

/// The document as served and committed: pretty JSON with a final newline.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).expect("the document serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_are_named_in_order() {
        assert_eq!(
            path_parameters("/a/{project_id}/b/{name}/c:{x}"),
            vec!["project_id", "name", "x"]
        );
        assert!(path_parameters("/healthz").is_empty());
    }

    /// `openapi.json` at the repository's root is the generated document; regenerate it with
    /// `UPDATE_OPENAPI=1 cargo test -p agentsearch-router openapi`.
    #[test]
    fn the_committed_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json");
        let generated = document_text();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "openapi.json differs from the document the code generates; run \
             `UPDATE_OPENAPI=1 cargo test -p agentsearch-router openapi` and commit it"
        );
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &piece[..piece.find('"').unwrap()];
            assert!(schemas.contains_key(name), "unresolved reference to {name}");
        }
    }

    #[test]
    fn every_operation_documents_errors_with_the_envelope() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let responses = op["responses"].as_object().unwrap();
                assert!(responses.contains_key("200"), "{method} {path}");
                assert!(responses.contains_key("403"), "{method} {path}");
                if op.get("requestBody").is_some() {
                    assert!(responses.contains_key("413"), "{method} {path}");
                }
            }
        }
    }
}
