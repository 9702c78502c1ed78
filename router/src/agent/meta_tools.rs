//! The service's own tools, as definitions a model API takes as they are: `search_tools`,
//! `search_context`, `read_context` and `get_tool`. Their arguments are the REST requests' fields
//! (an application forwards a call's arguments as the request body), and the `query` of
//! `search_tools` and `search_context` takes a query JSON document under the generated schema
//! (for content: the fields every record has and the metadata the project's syncs declare). The caller's identity is never an
//! argument: the application's credentials decide it.

use agentsearch_common::Error;
use serde_json::{Map, Value, json};

use crate::context::api::{MAX_READ_AROUND, MAX_SEGMENTS_PER_RECORD, MAX_SOURCES, MAX_SYNC_IDS};
use crate::tools::api::{MAX_FILTER_ITEMS, MAX_QUERY_CHARS, MAX_TOOL_TOKENS, MAX_TOP_K};

/// The shape a model API expects tool definitions in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `{name, description, input_schema}` (Anthropic's Messages API).
    Anthropic,
    /// `{type: "function", function: {name, description, parameters}}` (OpenAI's Chat
    /// Completions, and the shape of the tools tool search returns).
    OpenAi,
}

impl Format {
    /// `?format=`: `anthropic` (default) or `openai`.
    pub fn parse(value: Option<&str>) -> Result<Format, Error> {
        match value {
            None | Some("anthropic") => Ok(Format::Anthropic),
            Some("openai") => Ok(Format::OpenAi),
            Some(other) => Err(Error::invalid(
                "format",
                format!(
                    "must be anthropic or openai, got `{}`",
                    agentsearch_common::ids::truncate(other, 32)
                ),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
        }
    }
}

/// One meta-tool: its name, what a model is told, and the JSON Schema of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaTool {
    pub name: &'static str,
    pub description: String,
    pub input_schema: Value,
}

/// The four meta-tools; `content` is the project's content catalog.
pub fn meta_tools(content: &agentsearch_query::Catalog) -> Vec<MetaTool> {
    vec![
        search_tools(),
        search_context(content),
        read_context(),
        get_tool(),
    ]
}

/// The meta-tools as one model API takes them.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct MetaToolDefinitions {
    /// `anthropic` or `openai`.
    pub format: &'static str,
    /// Tool definitions in that API's shape.
    pub tools: Vec<Value>,
}

/// `{format, tools: [...]}`: `tools` is what a model API takes.
pub fn definitions(format: Format, content: &agentsearch_query::Catalog) -> MetaToolDefinitions {
    let tools: Vec<Value> = meta_tools(content)
        .into_iter()
        .map(|t| match format {
            Format::Anthropic => json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
            }),
            Format::OpenAi => json!({
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }),
        })
        .collect();
    MetaToolDefinitions {
        format: format.as_str(),
        tools,
    }
}

fn strings(max_items: usize, description: &str) -> Value {
    json!({
        "type": "array",
        "maxItems": max_items,
        "items": {"type": "string", "minLength": 1, "maxLength": 256},
        "description": description,
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A `query` property taking a string (`text`) or a query JSON document of `catalog`, with the
/// `$defs` the document schema needs (its root as `queryDocument`).
fn query_property(catalog: &agentsearch_query::Catalog, text: &str) -> (Value, Value) {
    let mut document = agentsearch_query::schema(catalog);
    let defs = document
        .as_object_mut()
        .and_then(|d| d.remove("$defs"))
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(d) = document.as_object_mut() {
        d.remove("$schema");
    }
    let mut defs = match defs {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    defs.insert("queryDocument".into(), document);
    let property = json!({
        "anyOf": [
            {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": text},
            {"$ref": "#/$defs/queryDocument"}
        ]
    });
    (property, Value::Object(defs))
}

fn search_tools() -> MetaTool {
    let catalog = agentsearch_query::Catalog::tools();
    let (query, defs) = query_property(
        catalog,
        "The task in natural language, e.g. \"post a message to the team channel\".",
    );
    let mut schema = object(
        json!({
            "query": query,
            "topK": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K,
                     "description": "How many tools to return (default 8)."},
            "maxToolTokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_TOKENS,
                              "description": "Token budget for the returned tool definitions."},
            "integrations": strings(MAX_FILTER_ITEMS, "Only these apps (integration slugs)."),
            "categories": strings(MAX_FILTER_ITEMS, "Only these categories."),
            "maxSideEffect": {"enum": ["read", "write", "delete", "send"],
                              "description": "The most a returned tool may do: read < write < delete < send."},
            "connectedOnly": {"type": "boolean",
                              "description": "Only apps the user has connected."}
        }),
        &["query"],
    );
    schema["$defs"] = defs;
    MetaTool {
        name: "search_tools",
        description: format!(
            "Find the tools (functions of connected apps) best suited to a task, among this \
             project's catalog. Returns the best tools with their JSON schemas, ready to call, and \
             whether the user has connected each app. Give `query` as the task in plain words; \
             to constrain exactly, give a query JSON document instead: {{\"v\": 1, \"q\": \
             \"words\", \"query\": node, \"filter\": node}}. {}",
            agentsearch_query::schema::description(catalog)
        ),
        input_schema: schema,
    }
}

fn search_context(catalog: &agentsearch_query::Catalog) -> MetaTool {
    let (query, defs) = query_property(catalog, "What to find, in natural language.");
    let mut schema = object(
        json!({
                "query": query,
                "sources": strings(MAX_SOURCES, "Only content of these sources (e.g. googledrive, slack)."),
                "syncIds": strings(MAX_SYNC_IDS, "Only content of these syncs."),
                "topK": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K,
                         "description": "How many records to return (default 10)."},
                "segmentsPerRecord": {"type": "integer", "minimum": 1, "maximum": MAX_SEGMENTS_PER_RECORD,
                                      "description": "Passages per record (default 1)."}
        }),
        &["query"],
    );
    schema["$defs"] = defs;
    MetaTool {
        name: "search_context",
        description: format!(
            "Search the user's synced content (documents, messages, files) for passages about a \
             question. Returns the best records the user may read, each with passages and a \
             `pointer` to read around a passage with read_context. Give `query` as the question \
             in plain words; to constrain exactly (a folder, an author, a date range), give a \
             query JSON document instead: {{\"v\": 1, \"q\": \"words\", \"filter\": node}}. {}",
            agentsearch_query::schema::description(catalog)
        ),
        input_schema: schema,
    }
}

fn read_context() -> MetaTool {
    MetaTool {
        name: "read_context",
        description: "Read a passage found by search_context together with the passages before \
                      and after it in the same record."
            .into(),
        input_schema: object(
            json!({
                "pointer": {"type": "string", "minLength": 1, "maxLength": 4096,
                            "description": "A passage's `pointer` from search_context."},
                "before": {"type": "integer", "minimum": 0, "maximum": MAX_READ_AROUND,
                           "description": "Passages to read before it."},
                "after": {"type": "integer", "minimum": 0, "maximum": MAX_READ_AROUND,
                          "description": "Passages to read after it."}
            }),
            &["pointer"],
        ),
    }
}

fn get_tool() -> MetaTool {
    MetaTool {
        name: "get_tool",
        description: "Get one tool of the catalog by its exact name (as search_tools returns it), \
                      with its JSON schema."
            .into(),
        input_schema: object(
            json!({
                "name": {"type": "string", "minLength": 1, "maxLength": 256,
                         "description": "The tool's exact name, e.g. SLACK_SEND_MESSAGE."}
            }),
            &["name"],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content() -> agentsearch_query::Catalog {
        agentsearch_query::Catalog::content(&[])
    }

    fn input(name: &str) -> Value {
        meta_tools(&content())
            .into_iter()
            .find(|t| t.name == name)
            .unwrap()
            .input_schema
    }

    #[test]
    fn the_search_tools_schema_takes_strings_and_query_documents() {
        let validator = jsonschema::draft202012::new(&input("search_tools")).unwrap();
        for ok in [
            json!({"query": "send an email"}),
            json!({"query": {"v": 1, "q": "send", "filter": {"type": "term", "field": "integration", "value": "gmail"}}, "topK": 3}),
        ] {
            assert!(validator.is_valid(&ok), "{ok}");
        }
        for bad in [
            json!({}),
            json!({"query": ""}),
            json!({"query": {"v": 1, "query": {"type": "term", "field": "integraton", "value": "x"}}}),
            json!({"query": "x", "identity": "someone@example.com"}),
            json!({"query": "x", "maxSideEffect": "unknown"}),
        ] {
            assert!(!validator.is_valid(&bad), "{bad}");
        }
    }

    #[test]
    fn the_search_context_schema_takes_documents_over_content_fields() {
        let validator = jsonschema::draft202012::new(&input("search_context")).unwrap();
        let ok = json!({"query": {"v": 1, "q": "budget", "filter": {"type": "range", "field": "modifiedAt", "gte": "2026-01-01"}}});
        assert!(validator.is_valid(&ok), "{ok}");
        let bad = json!({"query": {"v": 1, "filter": {"type": "prefix", "field": "paht", "value": "/a"}}});
        assert!(!validator.is_valid(&bad), "{bad}");
    }

    #[test]
    fn every_definition_compiles_and_each_format_has_its_shape() {
        for tool in meta_tools(&content()) {
            jsonschema::draft202012::new(&tool.input_schema).unwrap();
            assert_eq!(tool.input_schema["type"], "object");
            assert!(!tool.description.is_empty());
        }
        let anthropic = definitions(Format::Anthropic, &content());
        assert_eq!(anthropic.format, "anthropic");
        assert_eq!(anthropic.tools[0]["name"], "search_tools");
        assert!(anthropic.tools[2]["input_schema"].is_object());
        let openai = definitions(Format::OpenAi, &content());
        assert_eq!(openai.tools[1]["function"]["name"], "search_context");
        assert!(openai.tools[3]["function"]["parameters"].is_object());
        assert_eq!(openai.tools.len(), 4);
        assert!(Format::parse(Some("gemini")).is_err());
    }
}
